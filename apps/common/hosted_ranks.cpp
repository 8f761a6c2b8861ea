#include "apps/common/hosted_ranks.hpp"

#include "messages/failure.hpp"

namespace kvferry::apps {

instance_ranks hosted_ranks::view() const {
  instance_ranks v;
  for (size_t i = 0; i < ranks.size(); ++i) {
    v.ranks.push_back(ranks[i].get());
    v.pools.push_back(pools[i].get());
  }
  return v;
}

void hosted_ranks::stop() {
  for (auto& r : ranks)
    r->stop();
}

caf::expected<hosted_ranks> start_ranks(caf::actor_system& sys, const ranks_spec& spec) {
  hosted_ranks out;
  for (uint32_t s = 0; s < spec.pp; ++s)
    for (uint32_t t = 0; t < spec.tp; ++t) {
      uint32_t index = t + s * spec.tp;
      if (!spec.hosted.empty() && !spec.hosted.count(index))
        continue;
      out.pools.push_back(std::make_unique<host_pool>(spec.shape, spec.page_size, spec.pool_pages,
                                                      spec.aux_rows, 64,
                                                      rank_place{t, spec.tp, s, spec.pp}));
      rank_options o;
      o.side = spec.side;
      o.instance = spec.instance;
      o.tp_rank = t;
      o.tp_size = spec.tp;
      o.pp_rank = s;
      o.pp_size = spec.pp;
      o.pool = out.pools.back()->describe();
      o.transport = spec.transport;
      o.transport_options.listen_host = spec.listen_host;
      // A prefill rank is reached directly by decode processes and deciders
      // (they connect; it never connects to them).
      if (spec.side == role::prefill && spec.publish_control)
        o.control_host = spec.listen_host;
      o.transport_options.listen_port =
          spec.first_data_port == 0 ? 0 : static_cast<uint16_t>(spec.first_data_port + index);
      o.limits = spec.limits;
      o.staging = spec.staging;
      o.checksum = spec.checksum;
      o.bootstrap = spec.bootstrap;
      o.decider = spec.decider;
      o.metrics = spec.metrics;
      auto rt = runtime::start(sys, std::move(o));
      if (!rt)
        return make_error(
            errc::invalid_argument,
            "tp" + std::to_string(t) + " pp" + std::to_string(s) + ": " + sys.render(rt.error()));
      out.ranks.push_back(std::move(*rt));
    }
  return out;
}

}  // namespace kvferry::apps
