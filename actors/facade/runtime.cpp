#include "actors/facade/runtime.hpp"

#include <chrono>
#include <random>

#include <caf/scoped_actor.hpp>

#include "actors/log.hpp"
#include "actors/rank/decode_rank.hpp"
#include "actors/rank/local_pool.hpp"
#include "actors/rank/prefill_rank.hpp"
#include "actors/transfer/transfer_actor.hpp"
#include "transport/registry.hpp"

namespace kvferry {

namespace {

/// A distinct first room generation per decode rank incarnation: the high 32
/// bits are random, the low 32 count rooms.
uint64_t first_generation() {
  std::random_device rd;
  return (uint64_t{rd()} << 32) | 1u;
}

}  // namespace

caf::expected<kv_layout> layout_of(const kv_pool& pool, const std::vector<uint32_t>& kv_regions,
                                   const std::vector<uint32_t>& aux_regions) {
  kv_layout l;
  l.page_size = pool.page_size;
  l.dtype = pool.dtype;
  l.layer_ids = pool.layer_ids;
  l.total_kv_heads = pool.total_kv_heads;
  l.kv_heads = pool.kv_heads;
  l.head_dim = pool.head_dim;
  l.mla = pool.mla;
  for (size_t i = 0; i < pool.kv.size(); ++i)
    l.kv_buffers.push_back({kv_regions.at(i), 0, pool.kv[i].length, pool.kv[i].item_len});
  for (size_t i = 0; i < pool.aux.size(); ++i)
    l.aux_buffers.push_back({aux_regions.at(i), 0, pool.aux[i].length, pool.aux[i].item_len});
  if (auto bad = validate(l))
    return make_error(errc::invalid_argument, "kv pool: " + *bad);
  return l;
}

runtime::runtime(caf::actor_system& sys, rank_options opts) : sys_(sys), opts_(std::move(opts)) {}

caf::expected<std::unique_ptr<runtime>> runtime::start(caf::actor_system& sys, rank_options opts) {
  std::unique_ptr<runtime> rt{new runtime(sys, std::move(opts))};
  auto& o = rt->opts_;
  if (o.tp_rank >= o.tp_size || o.pp_rank >= o.pp_size)
    return make_error(errc::invalid_argument, "rank tp" + std::to_string(o.tp_rank) + " pp" +
                                                  std::to_string(o.pp_rank) + " outside tp_size " +
                                                  std::to_string(o.tp_size) + " x pp_size " +
                                                  std::to_string(o.pp_size));
  auto made = transport::make_transport(o.transport, o.transport_options);
  if (!made.ok())
    return make_error(errc::invalid_argument, "transport: " + made.error().to_string());
  auto owned = std::move(made).value();
  if (o.wrap_transport)
    owned = o.wrap_transport(std::move(owned));
  std::shared_ptr<transport::transport> net = std::move(owned);

  // Register every buffer; the layout names them by region id.
  std::vector<uint32_t> kv_regions, aux_regions;
  for (auto* list : {&o.pool.kv, &o.pool.aux}) {
    for (auto& b : *list) {
      auto id = net->register_region(b.base, b.length);
      if (!id.ok())
        return make_error(errc::invalid_argument,
                          "registering a pool buffer: " + id.error().to_string());
      (list == &o.pool.kv ? kv_regions : aux_regions).push_back(*id);
    }
  }
  auto layout = layout_of(o.pool, kv_regions, aux_regions);
  if (!layout)
    return layout.error();
  rt->layout_ = *layout;
  rt->endpoint_ = net->endpoint();
  rt->rank_ = rank_ref{o.side, o.instance, 0, o.tp_rank, o.pp_rank};

  local_pool pool{*layout, {}, {}};
  for (auto& b : o.pool.kv)
    pool.kv_bases.push_back(static_cast<std::byte*>(b.base));
  for (auto& b : o.pool.aux)
    pool.aux_bases.push_back(static_cast<std::byte*>(b.base));

  if (o.side == role::prefill) {
    rt->transfer_ = sys.spawn(kvferry::transfer, rt->rank_, pool, net);
    prefill_rank_config cfg{rt->rank_,     o.tp_size, o.pp_size,   *layout,
                            rt->endpoint_, o.limits,  o.bootstrap, rt->transfer_};
    rt->prefill_ = sys.spawn(prefill_rank, std::move(cfg));
  } else {
    decode_rank_config cfg{rt->rank_,     o.tp_size, o.pp_size, pool,
                           rt->endpoint_, o.limits,  net,       first_generation()};
    rt->decode_ = sys.spawn(decode_rank, std::move(cfg));
  }
  log().info("[{}] started: {} transport at {}", to_string(rt->rank_), o.transport, rt->endpoint_);
  return rt;
}

runtime::~runtime() {
  stop();
}

sender runtime::make_sender(uint64_t room) {
  auto slot = std::make_shared<room_slot>();
  if (!prefill_) {
    slot->fail(room_key{room, 0},
               failure{errc::invalid_argument, "make_sender on a decode rank", rank_});
    return sender{prefill_, room, slot};
  }
  caf::anon_send(prefill_, room_open_atom_v, room, slot);
  return sender{prefill_, room, std::move(slot)};
}

receiver runtime::make_receiver(uint64_t room, bootstrap_locator where) {
  auto slot = std::make_shared<room_slot>();
  if (!decode_) {
    slot->fail(room_key{room, 0},
               failure{errc::invalid_argument, "make_receiver on a prefill rank", rank_});
    return receiver{decode_, room, slot};
  }
  caf::anon_send(decode_, room_open_atom_v, room, std::move(where), slot);
  return receiver{decode_, room, std::move(slot)};
}

void runtime::stop() {
  if (stopped_)
    return;
  stopped_ = true;
  std::vector<caf::actor> actors;
  if (prefill_)
    actors.push_back(caf::actor_cast<caf::actor>(prefill_));
  if (transfer_)
    actors.push_back(caf::actor_cast<caf::actor>(transfer_));
  if (decode_)
    actors.push_back(caf::actor_cast<caf::actor>(decode_));
  for (auto& a : actors)
    caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  if (opts_.wait_on_stop) {
    caf::scoped_actor self{sys_};
    self->wait_for(actors);
  }
}

}  // namespace kvferry
