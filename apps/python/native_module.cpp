// kvferry._native: the C++ runtime as Python sees it, one object per job:
//   Node       one actor system per process (kvferry::config)
//   Rank       one rank's runtime over the caller's buffers (host memory)
//   Sender     prefill side of a room;  Receiver  decode side of a room
// The SGLang-shaped classes (issue 14) are built on these in pure Python.
// poll() reads the room's published slot (an atomic load, no actor call);
// everything that may wait releases the GIL. Bad input raises ValueError
// naming the value.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/io/middleman.hpp>
#include <caf/scoped_actor.hpp>

#include "actors/bootstrap/bootstrap_actor.hpp"
#include "actors/decision/decider_actor.hpp"
#include "actors/facade/receiver.hpp"
#include "actors/facade/runtime.hpp"
#include "actors/facade/sender.hpp"
#include "actors/gateway/gateway_actor.hpp"
#include "actors/gateway/tls.hpp"
#include "actors/process/config.hpp"
#include "messages/bootstrap.hpp"

namespace py = pybind11;
using namespace kvferry;

namespace {

/// One actor system per process, and the bootstraps it serves.
class node {
 public:
  node() : sys_(cfg_) {}
  ~node() {
    py::gil_scoped_release unlocked;
    for (auto& a : served_)
      caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  }

  /// Publishes a prefill instance's bootstrap on host:port (0: any free
  /// port); returns the port.
  uint16_t serve_bootstrap(const std::string& instance, const std::string& host, uint16_t port) {
    py::gil_scoped_release unlocked;
    return serve("the bootstrap of " + instance,
                 sys_.spawn(bootstrap, instance, fresh_generation()), host, port);
  }

  /// Publishes the decider of decode instance `instance` (tp_size x pp_size
  /// ranks) on host:port (0: any free port); returns the port.
  uint16_t serve_decider(const std::string& instance, uint32_t tp_size, uint32_t pp_size,
                         const std::string& host, uint16_t port) {
    if (tp_size == 0 || pp_size == 0)
      throw py::value_error("decider of " + instance + ": tp_size " + std::to_string(tp_size) +
                            ", pp_size " + std::to_string(pp_size) + "; expected at least 1");
    py::gil_scoped_release unlocked;
    return serve("the decider of " + instance,
                 sys_.spawn(decider, instance, tp_size, pp_size, fresh_generation(), deadlines{}),
                 host, port);
  }

  /// How many DP groups the prefill instance behind the bootstrap at
  /// host:port has (1: a plain instance; 0: no rank registered yet);
  /// nullopt when the bootstrap cannot be reached within `timeout_ms`.
  std::optional<uint32_t> prefill_dp_size(const std::string& host, uint16_t port,
                                          uint32_t timeout_ms) {
    py::gil_scoped_release unlocked;
    std::optional<uint32_t> size;
    ask(
        host, port, timeout_ms, [&](uint32_t n) { size = n; }, dp_group_atom_v);
    return size;
  }

  /// DP attention: whether the prefill instance's rooms follow
  /// bootstrap_room % dp_size (true) or are registered one by one (false);
  /// nullopt when its bootstrap cannot be reached.
  std::optional<bool> prefill_dp_routing(const std::string& host, uint16_t port,
                                         uint32_t timeout_ms) {
    py::gil_scoped_release unlocked;
    std::optional<bool> follows;
    ask(
        host, port, timeout_ms, [&](bool f) { follows = f; }, dp_route_atom_v);
    return follows;
  }

  /// A prefill rank says how its instance's rooms find their DP group; the
  /// routing in force comes back. Raises ValueError when the bootstrap
  /// refuses it (its other ranks said otherwise) or cannot be reached.
  bool say_dp_routing(const std::string& host, uint16_t port, bool follows, uint32_t timeout_ms) {
    std::optional<bool> in_force;
    auto why = ask_unlocked(
        host, port, timeout_ms, [&](bool f) { in_force = f; }, dp_route_atom_v, follows);
    if (!in_force)
      throw py::value_error("DP routing at the bootstrap " + host + ":" + std::to_string(port) +
                            ": " + why);
    return *in_force;
  }

  /// A prefill rank registers that DP group `group` serves room `room`.
  /// Raises ValueError naming the values when the bootstrap refuses it or
  /// cannot be reached.
  void register_room_dp_group(const std::string& host, uint16_t port, uint64_t room, uint32_t group,
                              uint32_t timeout_ms) {
    bool done = false;
    auto why = ask_unlocked(
        host, port, timeout_ms, [&](bool) { done = true; }, dp_route_atom_v, room, group);
    if (!done)
      throw py::value_error("room " + std::to_string(room) + "'s DP group " +
                            std::to_string(group) + " at the bootstrap " + host + ":" +
                            std::to_string(port) + ": " + why);
  }

  /// The DP groups of those of `rooms` a prefill rank registered, as
  /// {room: group}; empty when the bootstrap cannot be reached.
  std::map<uint64_t, uint32_t> query_room_dp_groups(const std::string& host, uint16_t port,
                                                    std::vector<uint64_t> rooms,
                                                    uint32_t timeout_ms) {
    py::gil_scoped_release unlocked;
    std::map<uint64_t, uint32_t> out;
    ask(
        host, port, timeout_ms,
        [&](room_dp_groups& g) {
          for (size_t i = 0; i < g.rooms.size() && i < g.groups.size(); ++i)
            out[g.rooms[i]] = g.groups[i];
        },
        room_dp_query{std::move(rooms)});
    return out;
  }

  caf::actor_system& system() { return sys_; }

 private:
  /// The bootstrap published at host:port (through the TLS gateway where
  /// the node has one), kept for the next ask; unset when it cannot be
  /// reached within `timeout`.
  bootstrap_actor bootstrap_at(caf::scoped_actor& self, const std::string& host, uint16_t port,
                               std::chrono::milliseconds timeout) {
    auto key = host + ":" + std::to_string(port);
    {
      std::lock_guard<std::mutex> guard{known_mx_};
      if (auto i = known_.find(key); i != known_.end())
        return i->second;
    }
    bootstrap_actor boot;
    auto found = [&](caf::strong_actor_ptr& ptr, const std::set<std::string>& ifs) {
      if (ptr && sys_.assignable<bootstrap_actor>(ifs))
        boot = caf::actor_cast<bootstrap_actor>(std::move(ptr));
    };
    auto failed = [](caf::error&) {};
    if (sys_.has_openssl_manager())
      self->request(gateway_of(sys_), timeout, caf::connect_atom_v, host, port)
          .receive([&](published_actor& p) { found(p.whom, p.interface); }, failed);
    else
      self->request(sys_.middleman().actor_handle(), timeout, caf::connect_atom_v, host, port)
          .receive([&](const caf::node_id&, caf::strong_actor_ptr& ptr,
                       const std::set<std::string>& ifs) { found(ptr, ifs); },
                   failed);
    if (boot) {
      std::lock_guard<std::mutex> guard{known_mx_};
      known_[key] = boot;
    }
    return boot;
  }

  /// Asks the bootstrap at host:port `xs...` and hands the answer to
  /// `on_answer`; returns why there is none ("" when there is). A bootstrap
  /// that does not answer is looked up afresh next time. The caller has
  /// released the GIL.
  template <class OnAnswer, class... Ts>
  std::string ask(const std::string& host, uint16_t port, uint32_t timeout_ms, OnAnswer on_answer,
                  Ts&&... xs) {
    auto timeout = std::chrono::milliseconds{timeout_ms};
    caf::scoped_actor self{sys_};
    auto boot = bootstrap_at(self, host, port, timeout);
    if (!boot)
      return "not reached within " + std::to_string(timeout_ms) + " ms";
    std::string why;
    bool refused = false;  // the bootstrap's own answer, not a lost one
    self->request(boot, timeout, std::forward<Ts>(xs)...).receive(on_answer, [&](caf::error& err) {
      why = sys_.render(err);
      refused = err.category() == error_category;
    });
    if (!why.empty() && !refused) {
      std::lock_guard<std::mutex> guard{known_mx_};
      known_.erase(host + ":" + std::to_string(port));
    }
    return why;
  }

  /// The same, releasing the GIL itself.
  template <class OnAnswer, class... Ts>
  std::string ask_unlocked(const std::string& host, uint16_t port, uint32_t timeout_ms,
                           OnAnswer on_answer, Ts&&... xs) {
    py::gil_scoped_release unlocked;
    return ask(host, port, timeout_ms, on_answer, std::forward<Ts>(xs)...);
  }

  /// Publishes `whom` on host:port and keeps it until the node goes; a port
  /// that cannot be taken kills it and raises ValueError naming the port.
  template <class Handle>
  uint16_t serve(const std::string& what, Handle whom, const std::string& host, uint16_t port) {
    auto got = publish_actor(sys_, whom, port, host);
    if (!got) {
      caf::anon_send_exit(whom, caf::exit_reason::kill);
      throw py::value_error("cannot serve " + what + " on " + host + ":" + std::to_string(port) +
                            ": " + sys_.render(got.error()) +
                            "; expected a free port on this host");
    }
    served_.push_back(caf::actor_cast<caf::actor>(whom));
    return *got;
  }

  kvferry::config cfg_;
  caf::actor_system sys_;
  std::vector<caf::actor> served_;  ///< bootstraps and deciders, stopped with the node
  std::mutex known_mx_;             ///< Python threads ask at once (SGLang's query executor)
  std::map<std::string, bootstrap_actor> known_;  ///< bootstraps reached, by "host:port"
};

/// The bootstrap at host:port, or DP group `dp_group` behind it (-1: none).
bootstrap_locator locator_of(const std::string& host, uint16_t port, int64_t dp_group) {
  bootstrap_locator loc{{}, host, port};
  if (dp_group < -1 || dp_group >= int64_t{bootstrap_locator::max_dp_groups})
    throw py::value_error("dp_group " + std::to_string(dp_group) + "; expected -1 (none) or 0 to " +
                          std::to_string(bootstrap_locator::max_dp_groups - 1));
  if (dp_group >= 0)
    loc.dp_group = static_cast<uint32_t>(dp_group);
  return loc;
}

/// Buffers from parallel lists of addresses, lengths and item lengths.
std::vector<kv_pool::buffer> buffers_of(const char* what, const std::vector<uintptr_t>& ptrs,
                                        const std::vector<uint64_t>& lens,
                                        const std::vector<uint64_t>& item_lens,
                                        const std::vector<bool>& on_device = {}) {
  if (!on_device.empty() && on_device.size() != ptrs.size())
    throw py::value_error(std::string{what} + ": " + std::to_string(on_device.size()) +
                          " memory kinds for " + std::to_string(ptrs.size()) +
                          " buffers; expected one per buffer");
  if (ptrs.size() != lens.size() || ptrs.size() != item_lens.size())
    throw py::value_error(std::string{what} + ": " + std::to_string(ptrs.size()) + " pointers, " +
                          std::to_string(lens.size()) + " lengths and " +
                          std::to_string(item_lens.size()) +
                          " item lengths; expected one of each per buffer");
  std::vector<kv_pool::buffer> out;
  for (size_t i = 0; i < ptrs.size(); ++i) {
    if (ptrs[i] == 0 || lens[i] == 0 || item_lens[i] == 0 || lens[i] % item_lens[i] != 0)
      throw py::value_error(std::string{what} + " buffer " + std::to_string(i) + ": pointer " +
                            std::to_string(ptrs[i]) + ", length " + std::to_string(lens[i]) +
                            ", item length " + std::to_string(item_lens[i]) +
                            "; expected a non-null pointer and a length that is a positive "
                            "multiple of the item length");
    out.push_back({reinterpret_cast<void*>(ptrs[i]), lens[i], item_lens[i],
                   !on_device.empty() && on_device[i] ? transport::memory_kind::device
                                                      : transport::memory_kind::host});
  }
  return out;
}

/// A state component as Python hands it: (kind, pointers, lengths, item
/// lengths, on_device per buffer).
using state_spec = std::tuple<std::string, std::vector<uintptr_t>, std::vector<uint64_t>,
                              std::vector<uint64_t>, std::vector<bool>>;

kv_pool::state state_of(size_t index, const state_spec& spec) {
  const auto& [kind, ptrs, lens, item_lens, on_device] = spec;
  kv_pool::state st;
  if (kind == "single_slot")
    st.kind = state_kind::single_slot;
  else if (kind == "page_indexed")
    st.kind = state_kind::page_indexed;
  else
    throw py::value_error("state component " + std::to_string(index) + ": kind \"" + kind +
                          "\"; expected single_slot or page_indexed");
  st.buffers =
      buffers_of(("state " + std::to_string(index)).c_str(), ptrs, lens, item_lens, on_device);
  return st;
}

kv_dtype dtype_named(const std::string& name) {
  if (auto d = parse_dtype(name))
    return *d;
  throw py::value_error("dtype \"" + name +
                        "\"; expected f32, f16, bf16, fp8_e4m3, fp8_e5m2 or int8");
}

/// One rank's runtime; rooms keep it alive.
struct rank_holder {
  std::shared_ptr<node> home;
  std::unique_ptr<runtime> rt;
  ~rank_holder() {
    py::gil_scoped_release unlocked;
    rt.reset();
  }
};

std::vector<uint32_t> pages_of(const std::vector<int64_t>& pages);

std::vector<std::vector<uint32_t>> states_of(const std::vector<std::vector<int64_t>>& states) {
  std::vector<std::vector<uint32_t>> out;
  for (auto& s : states)
    out.push_back(pages_of(s));
  return out;
}

std::vector<uint32_t> pages_of(const std::vector<int64_t>& pages) {
  std::vector<uint32_t> out;
  out.reserve(pages.size());
  for (auto p : pages) {
    if (p < 0 || p > UINT32_MAX)
      throw py::value_error("page index " + std::to_string(p) + "; expected 0 to " +
                            std::to_string(UINT32_MAX));
    out.push_back(static_cast<uint32_t>(p));
  }
  return out;
}

/// A room's state and failure, as both sides read them.
template <class Room>
struct room_view {
  std::shared_ptr<rank_holder> rank;
  Room room;

  int poll() const { return static_cast<int>(room.poll()); }
  std::optional<std::string> failure() const {
    if (auto f = room.failure())
      return std::string{f->what()};
    return std::nullopt;
  }
  bool released() const { return room.released(); }
  /// Nanoseconds per poll() over `n` calls from C++: the baseline of a poll from Python.
  double poll_ns(uint64_t n) const {
    auto t0 = std::chrono::steady_clock::now();
    uint64_t sum = 0;
    for (uint64_t i = 0; i < n; ++i)
      sum += static_cast<uint64_t>(room.poll());
    auto ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0);
    sink_ = sum;
    return n ? ns.count() / static_cast<double>(n) : 0.0;
  }
  mutable volatile uint64_t sink_ = 0;
  void abort() { room.abort(); }
  void clear() { room.clear(); }
};

using sender_view = room_view<sender>;
using receiver_view = room_view<receiver>;

}  // namespace

PYBIND11_MODULE(_native, m) {
  m.doc() = "kvferry's C++ runtime (see kvferry/__init__.py)";

  py::class_<node, std::shared_ptr<node>>(m, "Node")
      .def(py::init<>())
      .def("serve_bootstrap", &node::serve_bootstrap, py::arg("instance"), py::arg("host"),
           py::arg("port"))
      .def("prefill_dp_size", &node::prefill_dp_size, py::arg("host"), py::arg("port"),
           py::arg("timeout_ms") = 1000)
      .def("prefill_dp_routing", &node::prefill_dp_routing, py::arg("host"), py::arg("port"),
           py::arg("timeout_ms") = 1000)
      .def("say_dp_routing", &node::say_dp_routing, py::arg("host"), py::arg("port"),
           py::arg("follows_room"), py::arg("timeout_ms") = 5000)
      .def("register_room_dp_group", &node::register_room_dp_group, py::arg("host"),
           py::arg("port"), py::arg("room"), py::arg("group"), py::arg("timeout_ms") = 5000)
      .def("query_room_dp_groups", &node::query_room_dp_groups, py::arg("host"), py::arg("port"),
           py::arg("rooms"), py::arg("timeout_ms") = 5000)
      .def("serve_decider", &node::serve_decider, py::arg("instance"), py::arg("tp_size"),
           py::arg("pp_size"), py::arg("host"), py::arg("port"));

  py::class_<rank_holder, std::shared_ptr<rank_holder>>(m, "Rank")
      .def(py::init([](std::shared_ptr<node> home, const std::string& role_name,
                       const std::string& instance, uint32_t tp_rank, uint32_t tp_size,
                       uint32_t page_size, const std::string& dtype, uint32_t layers,
                       uint32_t total_kv_heads, uint32_t kv_heads, uint32_t head_dim, bool mla,
                       std::vector<uintptr_t> kv_ptrs, std::vector<uint64_t> kv_lens,
                       std::vector<uint64_t> kv_item_lens, std::vector<uintptr_t> aux_ptrs,
                       std::vector<uint64_t> aux_lens, std::vector<uint64_t> aux_item_lens,
                       const std::string& bootstrap_host, uint16_t bootstrap_port,
                       const std::string& transport_name, std::vector<uint32_t> layer_ids,
                       uint32_t pp_rank, uint32_t pp_size, std::vector<bool> kv_on_device,
                       std::vector<state_spec> states, const std::string& control_host,
                       const std::string& data_host, const std::string& decider_host,
                       uint16_t decider_port, const std::string& checksum,
                       int64_t bootstrap_dp_group, uint32_t bootstrap_dp_size) {
             if (role_name != "prefill" && role_name != "decode")
               throw py::value_error("role \"" + role_name + "\"; expected prefill or decode");
             rank_options o;
             o.side = role_name == "prefill" ? role::prefill : role::decode;
             o.instance = instance;
             o.tp_rank = tp_rank;
             o.tp_size = tp_size;
             o.pp_rank = pp_rank;
             o.pp_size = pp_size;
             o.transport = transport_name;
             if (!data_host.empty())
               o.transport_options.listen_host = data_host;
             o.pool.page_size = page_size;
             o.pool.dtype = dtype_named(dtype);
             if (layer_ids.empty())
               for (uint32_t l = 0; l < layers; ++l)
                 layer_ids.push_back(l);
             else if (layer_ids.size() != layers)
               throw py::value_error(std::to_string(layer_ids.size()) + " layer ids for " +
                                     std::to_string(layers) + " layers; expected one per layer");
             o.pool.layer_ids = std::move(layer_ids);
             o.pool.total_kv_heads = total_kv_heads;
             o.pool.kv_heads = kv_heads;
             o.pool.head_dim = head_dim;
             o.pool.mla = mla;
             o.pool.kv = buffers_of("kv", kv_ptrs, kv_lens, kv_item_lens, kv_on_device);
             o.pool.aux = buffers_of("aux", aux_ptrs, aux_lens, aux_item_lens);
             for (size_t i = 0; i < states.size(); ++i)
               o.pool.states.push_back(state_of(i, states[i]));
             if (o.side == role::prefill) {
               o.bootstrap = locator_of(bootstrap_host, bootstrap_port, bootstrap_dp_group);
               o.bootstrap.dp_size = bootstrap_dp_size;
               o.control_host = control_host;
             } else if (!decider_host.empty()) {
               o.decider = decider_locator{{}, decider_host, decider_port};
             }
             auto kind = checksum_named(checksum);
             if (!kind)
               throw py::value_error("checksum \"" + checksum + "\"; expected off or xxh3");
             o.checksum = *kind;
             auto holder = std::make_shared<rank_holder>();
             holder->home = home;
             caf::expected<std::unique_ptr<runtime>> rt{caf::error{}};
             {
               py::gil_scoped_release unlocked;
               rt = runtime::start(home->system(), std::move(o));
             }
             if (!rt)
               throw py::value_error(home->system().render(rt.error()));
             holder->rt = std::move(*rt);
             return holder;
           }),
           py::arg("node"), py::arg("role"), py::arg("instance"), py::arg("tp_rank"),
           py::arg("tp_size"), py::arg("page_size"), py::arg("dtype"), py::arg("layers"),
           py::arg("total_kv_heads"), py::arg("kv_heads"), py::arg("head_dim"), py::arg("mla"),
           py::arg("kv_ptrs"), py::arg("kv_lens"), py::arg("kv_item_lens"), py::arg("aux_ptrs"),
           py::arg("aux_lens"), py::arg("aux_item_lens"), py::arg("bootstrap_host") = "",
           py::arg("bootstrap_port") = 0, py::arg("transport") = "auto",
           py::arg("layer_ids") = std::vector<uint32_t>{}, py::arg("pp_rank") = 0,
           py::arg("pp_size") = 1, py::arg("kv_on_device") = std::vector<bool>{},
           py::arg("states") = std::vector<state_spec>{}, py::arg("control_host") = "",
           py::arg("data_host") = "", py::arg("decider_host") = "", py::arg("decider_port") = 0,
           py::arg("checksum") = "off", py::arg("bootstrap_dp_group") = -1,
           py::arg("bootstrap_dp_size") = 0)
      .def(
          "prefill_down",
          [](const rank_holder& r, const std::string& host, uint16_t port,
             int64_t dp_group) -> std::optional<std::string> {
            if (auto f = r.rt->prefill_down(locator_of(host, port, dp_group)))
              return to_string(*f);
            return std::nullopt;
          },
          py::arg("bootstrap_host"), py::arg("bootstrap_port"), py::arg("dp_group") = -1)
      .def_property_readonly("data_endpoint",
                             [](const rank_holder& r) { return r.rt->data_endpoint(); })
      .def(
          "sender",
          [](std::shared_ptr<rank_holder> r, uint64_t room) {
            return sender_view{r, r->rt->make_sender(room)};
          },
          py::arg("room"))
      .def(
          "receiver",
          [](std::shared_ptr<rank_holder> r, uint64_t room, const std::string& host, uint16_t port,
             int64_t dp_group) {
            return receiver_view{r, r->rt->make_receiver(room, locator_of(host, port, dp_group))};
          },
          py::arg("room"), py::arg("bootstrap_host"), py::arg("bootstrap_port"),
          py::arg("dp_group") = -1);

  py::class_<sender_view>(m, "Sender")
      .def(
          "init",
          [](sender_view& s, uint32_t num_pages, std::optional<uint32_t> aux_slot) {
            s.room.init(num_pages, aux_slot);
          },
          py::arg("num_pages"), py::arg("aux_slot") = std::nullopt)
      .def(
          "send",
          [](sender_view& s, const std::vector<int64_t>& pages, bool last,
             const std::vector<std::vector<int64_t>>& states) {
            s.room.send(pages_of(pages), last, states_of(states));
          },
          py::arg("pages"), py::arg("last"),
          py::arg("states") = std::vector<std::vector<int64_t>>{})
      .def_property_readonly(
          "decode_prefix_tokens",
          [](const sender_view& s) { return s.room.decode_prefix_tokens(); },
          "tokens the decode side already holds (prefix reuse), once polled WaitingForInput")
      .def("poll", &sender_view::poll)
      .def("released", &sender_view::released)
      .def("poll_ns", &sender_view::poll_ns, py::arg("n"))
      .def("failure", &sender_view::failure)
      .def("abort", &sender_view::abort)
      .def("clear", &sender_view::clear);

  py::class_<receiver_view>(m, "Receiver")
      .def(
          "init",
          [](receiver_view& r, const std::vector<int64_t>& pages, std::optional<uint32_t> aux_slot,
             const std::vector<std::vector<int64_t>>& states, int64_t prefix_tokens) {
            if (prefix_tokens < 0 || prefix_tokens > UINT32_MAX)
              throw py::value_error("prefix_tokens " + std::to_string(prefix_tokens) +
                                    "; expected 0 to " + std::to_string(UINT32_MAX));
            r.room.init(pages_of(pages), aux_slot, states_of(states),
                        static_cast<uint32_t>(prefix_tokens));
          },
          py::arg("pages"), py::arg("aux_slot") = std::nullopt,
          py::arg("states") = std::vector<std::vector<int64_t>>{}, py::arg("prefix_tokens") = 0)
      .def("poll", &receiver_view::poll)
      .def("released", &receiver_view::released)
      .def("poll_ns", &receiver_view::poll_ns, py::arg("n"))
      .def("failure", &receiver_view::failure)
      .def("abort", &receiver_view::abort)
      .def("clear", &receiver_view::clear);
}
