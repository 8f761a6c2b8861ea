#include "actors/facade/runtime.hpp"

#include <chrono>
#include <random>

#include <caf/io/middleman.hpp>
#include <caf/scoped_actor.hpp>

#include "actors/base/log.hpp"
#include "actors/common/local_pool.hpp"
#include "actors/decision/decider_actor.hpp"
#include "actors/gateway/tls.hpp"
#include "actors/process/life_token.hpp"
#include "actors/rank/decode_rank.hpp"
#include "actors/rank/prefill_rank.hpp"
#include "actors/staging/staging_actor.hpp"
#include "actors/transfer/transfer_actor.hpp"
#include "transport/device_registry.hpp"
#include "transport/registry.hpp"

namespace kvferry {

namespace {

/// A generation for a decode instance incarnation the runtime starts itself.
uint64_t first_generation() {
  std::random_device rd;
  return (uint64_t{rd()} << 32) | rd();
}

}  // namespace

caf::expected<kv_layout> layout_of(const kv_pool& pool, const std::vector<uint32_t>& regions,
                                   uint32_t tp_rank, uint32_t tp_size, uint32_t pp_rank,
                                   uint32_t pp_size) {
  kv_layout l;
  l.page_size = pool.page_size;
  l.dtype = pool.dtype;
  l.layer_ids = pool.layer_ids;
  l.total_kv_heads = pool.total_kv_heads;
  l.kv_heads = pool.kv_heads;
  l.head_dim = pool.head_dim;
  l.mla = pool.mla;
  l.tp_rank = tp_rank;
  l.tp_size = tp_size;
  l.pp_rank = pp_rank;
  l.pp_size = pp_size;
  size_t next = 0;
  auto desc = [&](const kv_pool::buffer& b) {
    return buffer_desc{regions.at(next++), 0, b.length, b.item_len};
  };
  for (auto& b : pool.kv)
    l.kv_buffers.push_back(desc(b));
  for (auto& b : pool.aux)
    l.aux_buffers.push_back(desc(b));
  for (auto& st : pool.states) {
    state_desc sd{st.kind, {}};
    for (auto& b : st.buffers)
      sd.buffers.push_back(desc(b));
    l.states.push_back(std::move(sd));
  }
  if (auto bad = validate(l))
    return make_error(errc::invalid_argument, "kv pool: " + *bad);
  return l;
}

runtime::runtime(caf::actor_system& sys, rank_options opts) : sys_(sys), opts_(std::move(opts)) {}

namespace {

/// Why `o` cannot start a rank (its place, its deadlines), or none.
caf::error check_place_and_deadlines(const rank_options& o) {
  if (o.tp_rank >= o.tp_size || o.pp_rank >= o.pp_size)
    return make_error(errc::invalid_argument, "rank tp" + std::to_string(o.tp_rank) + " pp" +
                                                  std::to_string(o.pp_rank) + " outside tp_size " +
                                                  std::to_string(o.tp_size) + " x pp_size " +
                                                  std::to_string(o.pp_size));
  if (auto bad = validate(o.limits))
    return make_error(errc::invalid_argument, "deadlines: " + *bad);
  return {};
}

/// Whether the pool holds device memory (its copier then moves it: the
/// transports' bounce pieces and IPC, staging's kernels). Aux rows must be
/// host memory (kvferry reads them), and the KV buffers all of one kind
/// (staging's gather and scatter copy between every one and the ring).
caf::expected<bool> device_pool_of(const kv_pool& pool) {
  bool device = false;
  for (size_t i = 0; i < pool.aux.size(); ++i)
    if (pool.aux[i].memory == transport::memory_kind::device)
      return make_error(errc::invalid_argument,
                        "aux buffer " + std::to_string(i) +
                            " in device memory, expected host memory (kvferry reads its rows)");
  for (auto& b : pool.kv)
    device |= b.memory == transport::memory_kind::device;
  for (size_t i = 0; i < pool.kv.size(); ++i)
    if (device && pool.kv[i].memory != transport::memory_kind::device)
      return make_error(errc::invalid_argument,
                        "KV buffer " + std::to_string(i) +
                            " in host memory while others are in device memory, expected every "
                            "KV buffer in one kind of memory");
  for (auto& st : pool.states)
    for (auto& b : st.buffers)
      device |= b.memory == transport::memory_kind::device;
  return device;
}

/// The rank's data plane: `o.transport` with a device copier for a device
/// pool, wrapped as the options say (tests' fault seams).
caf::expected<std::shared_ptr<transport::transport>> open_transport(rank_options& o,
                                                                    bool device_pool) {
  if (device_pool && !o.transport_options.device) {
    auto copier = transport::make_device_copier(o.device_copier, o.cuda_device);
    if (!copier.ok())
      return make_error(errc::invalid_argument,
                        "the pool has device memory: " + copier.error().to_string());
    o.transport_options.device = std::move(copier).value();
  }
  auto made = transport::make_transport(o.transport, o.transport_options);
  if (!made.ok())
    return make_error(errc::invalid_argument, "transport: " + made.error().to_string());
  auto owned = std::move(made).value();
  if (o.wrap_transport)
    owned = o.wrap_transport(std::move(owned));
  return std::shared_ptr<transport::transport>{std::move(owned)};
}

/// Registers every buffer of `pool` (KV, aux, then each state's) with `net`:
/// their region ids, in that order, for the layout.
caf::expected<std::vector<uint32_t>> register_pool(transport::transport& net, const kv_pool& pool) {
  std::vector<const kv_pool::buffer*> buffers;
  for (auto& b : pool.kv)
    buffers.push_back(&b);
  for (auto& b : pool.aux)
    buffers.push_back(&b);
  for (auto& st : pool.states)
    for (auto& b : st.buffers)
      buffers.push_back(&b);
  std::vector<uint32_t> regions;
  for (auto* b : buffers) {
    auto id = net.register_region(b->base, b->length, b->memory);
    if (!id.ok())
      return make_error(errc::invalid_argument,
                        "registering a pool buffer: " + id.error().to_string());
    regions.push_back(*id);
  }
  return regions;
}

}  // namespace

caf::expected<std::unique_ptr<runtime>> runtime::start(caf::actor_system& sys, rank_options opts) {
  std::unique_ptr<runtime> rt{new runtime(sys, std::move(opts))};
  auto& o = rt->opts_;
  if (auto err = check_place_and_deadlines(o))
    return err;
  // A prefill rank of a DP group is named as its group's directory names
  // it ("prefill-0/dp2"), so that its transfer and staging actors carry the
  // name every other rank reads in the topology.
  if (o.side == role::prefill && o.bootstrap.has_dp_group()) {
    auto suffix = "/dp" + std::to_string(o.bootstrap.dp_group);
    if (!o.instance.ends_with(suffix))
      o.instance += suffix;
  }
  auto device_pool = device_pool_of(o.pool);
  if (!device_pool)
    return device_pool.error();
  auto net = open_transport(o, *device_pool);
  if (!net)
    return net.error();
  auto regions = register_pool(**net, o.pool);
  if (!regions)
    return regions.error();
  auto layout = layout_of(o.pool, *regions, o.tp_rank, o.tp_size, o.pp_rank, o.pp_size);
  if (!layout)
    return layout.error();
  rt->layout_ = *layout;
  rt->endpoint_ = (*net)->endpoint();
  rt->rank_ = rank_ref{o.side, o.instance, 0, o.tp_rank, o.pp_rank};

  local_pool pool{*layout, {}, {}, {}};
  for (auto& b : o.pool.kv)
    pool.kv_bases.push_back(static_cast<std::byte*>(b.base));
  for (auto& b : o.pool.aux)
    pool.aux_bases.push_back(static_cast<std::byte*>(b.base));
  if (*device_pool)
    pool.device = o.transport_options.device;
  if (o.side == role::decode && o.checksum != kv_checksum::off && *device_pool)
    return make_error(errc::unsupported,
                      "checksum " + to_string(o.checksum) +
                          " over a device pool: checksums are built for host pools only");
  auto staging = rt->open_staging(**net, pool);
  if (!staging)
    return staging.error();
  // The rank actor holds this token while it lives; the slots of its rooms
  // watch it.
  auto alive = std::make_shared<int>(0);
  rt->alive_ = alive;
  auto err = o.side == role::prefill ? rt->start_prefill(*net, pool, *staging, alive)
                                     : rt->start_decode(*net, pool, *staging, alive);
  if (err)
    return err;
  log().info("[{}] started: {} transport at {}", to_string(rt->rank_), o.transport, rt->endpoint_);
  return rt;
}

caf::expected<runtime::staging_area> runtime::open_staging(transport::transport& net,
                                                           const local_pool& pool) {
  // The staging ring (decode) or gather buffer (prefill): never for MLA,
  // whose latent is whole on every rank.
  auto& o = opts_;
  staging_area out;
  auto bytes = o.side == role::prefill ? o.staging.gather_bytes : o.staging.ring_bytes;
  if (!o.staging.enabled || layout_.mla || bytes == 0)
    return out;
  auto mem = transport::shared_memory::allocate(
      bytes, o.side == role::prefill ? "kvferry-gather" : "kvferry-ring");
  if (!mem.ok())
    return make_error(errc::invalid_argument, "staging memory of " + std::to_string(bytes) +
                                                  " bytes: " + mem.error().to_string());
  staging_memory_ = std::move(mem).value();
  auto id = net.register_region(staging_memory_.data(), bytes);
  if (!id.ok())
    return make_error(errc::invalid_argument,
                      "registering the staging memory: " + id.error().to_string());
  if (pool.device) {
    // The gather and scatter kernels reach the ring or gather buffer directly.
    auto* base = staging_memory_.data();
    if (auto st = pool.device->pin_host(base, bytes); !st.ok())
      return make_error(errc::invalid_argument, "pinning the staging memory: " + st.to_string());
    staging_pin_ =
        std::shared_ptr<void>{base, [device = pool.device](void* p) { device->unpin_host(p); }};
  }
  out.base = static_cast<std::byte*>(staging_memory_.data());
  out.bytes = bytes;
  out.region = *id;
  return out;
}

caf::error runtime::start_prefill(std::shared_ptr<transport::transport> net, const local_pool& pool,
                                  const staging_area& staging, const std::shared_ptr<int>& alive) {
  auto& o = opts_;
  transfer_staging ts{staging.base, staging.bytes, staging.region, o.staging.slot_wait};
  counters_ = std::make_shared<transfer_counters>();
  transfer_ = sys_.spawn(kvferry::transfer, rank_, pool, net, ts, counters_, o.metrics);
  prefill_rank_config cfg{rank_,
                          o.tp_size,
                          o.pp_size,
                          layout_,
                          endpoint_,
                          o.limits,
                          o.bootstrap,
                          transfer_,
                          staging.base != nullptr,
                          alive,
                          {},
                          false,
                          0,
                          board_,
                          nullptr,
                          o.life_token ? this_process_life() : life_token_ref{}};
  cfg.rank_generation = first_generation();
  cfg.publish_first = !o.control_host.empty();
  if (o.metrics)
    cfg.figures = std::make_shared<metrics::rank_figures>(o.metrics, rank_);
  prefill_ = sys_.spawn(prefill_rank, std::move(cfg));
  if (o.control_host.empty())
    return {};
  if (!sys_.has_middleman())
    return make_error(errc::invalid_argument,
                      "control_host = " + o.control_host +
                          ": publishing a rank needs an actor system with a middleman");
  auto port = publish_actor(sys_, prefill_, o.control_port, o.control_host);
  if (!port) {
    caf::anon_send_exit(prefill_, caf::exit_reason::user_shutdown);
    return make_error(errc::invalid_argument,
                      "cannot publish " + to_string(rank_) + " on " + o.control_host + ":" +
                          std::to_string(o.control_port) + " (" + sys_.render(port.error()) +
                          "); expected a free port on this host");
  }
  control_port_ = *port;
  caf::anon_send(prefill_, control_endpoint{o.control_host, *port});
  return {};
}

caf::error runtime::start_decode(std::shared_ptr<transport::transport> net, const local_pool& pool,
                                 const staging_area& staging, const std::shared_ptr<int>& alive) {
  auto& o = opts_;
  if (!o.decider.handle && o.decider.host.empty()) {
    if (o.tp_size * o.pp_size != 1)
      return make_error(errc::invalid_argument,
                        "decode rank of an instance of TP " + std::to_string(o.tp_size) + " x PP " +
                            std::to_string(o.pp_size) +
                            " without a decider: give every rank the same decider_locator");
    own_decider_ = sys_.spawn(decider_on, o.instance, o.tp_size, o.pp_size, first_generation(),
                              o.limits, std::string{}, o.metrics);
    o.decider.handle = own_decider_;
  }
  staging_offer offer;
  if (staging.base) {
    staging_config sc{.self = rank_,
                      .pool = pool,
                      .ring = staging.base,
                      .ring_size = staging.bytes,
                      .metrics = o.metrics};
    staging_ = sys_.spawn(kvferry::staging, std::move(sc));
    offer = staging_offer{staging_, staging.region, staging.bytes};
  }
  decode_rank_config cfg{rank_,
                         o.tp_size,
                         o.pp_size,
                         pool,
                         endpoint_,
                         o.limits,
                         std::move(net),
                         o.decider,
                         offer,
                         alive,
                         board_,
                         nullptr,
                         o.life_token ? this_process_life() : life_token_ref{}};
  cfg.checksum = o.checksum;
  if (o.metrics)
    cfg.figures = std::make_shared<metrics::rank_figures>(o.metrics, rank_);
  decode_ = sys_.spawn(decode_rank, std::move(cfg));
  return {};
}

runtime::~runtime() {
  stop();
}

sender runtime::make_sender(uint64_t room) {
  auto slot = std::make_shared<room_slot>(room, rank_, alive_);
  if (!prefill_) {
    slot->fail(room_key{room, 0},
               failure{errc::invalid_argument, "make_sender on a decode rank", rank_});
    return sender{prefill_, room, slot};
  }
  caf::send_as(prefill_, prefill_, room_open_atom_v, room, slot);
  return sender{prefill_, room, std::move(slot)};
}

receiver runtime::make_receiver(uint64_t room, bootstrap_locator where) {
  auto slot = std::make_shared<room_slot>(room, rank_, alive_);
  if (!decode_) {
    slot->fail(room_key{room, 0},
               failure{errc::invalid_argument, "make_receiver on a prefill rank", rank_});
    return receiver{decode_, room, slot};
  }
  caf::send_as(decode_, decode_, room_open_atom_v, room, std::move(where), slot);
  return receiver{decode_, room, std::move(slot)};
}

std::optional<failure> runtime::prefill_down(const bootstrap_locator& where) const {
  return board_->down(where.key());
}

std::optional<failure> runtime::instance_down() const {
  return board_->down(own_instance_key);
}

std::vector<uint64_t> runtime::requested_rooms() const {
  return board_->requested();
}

void runtime::stop() {
  if (stopped_)
    return;
  stopped_ = true;
  std::vector<caf::actor> actors;
  if (prefill_ && control_port_ != 0 && sys_.has_middleman())
    unpublish_actor(sys_, prefill_, control_port_);
  if (prefill_)
    actors.push_back(caf::actor_cast<caf::actor>(prefill_));
  if (transfer_)
    actors.push_back(caf::actor_cast<caf::actor>(transfer_));
  if (decode_)
    actors.push_back(caf::actor_cast<caf::actor>(decode_));
  if (staging_)
    actors.push_back(caf::actor_cast<caf::actor>(staging_));
  if (own_decider_)
    actors.push_back(caf::actor_cast<caf::actor>(own_decider_));
  for (auto& a : actors)
    caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  if (opts_.wait_on_stop) {
    caf::scoped_actor self{sys_};
    self->wait_for(actors);
  }
}

}  // namespace kvferry
