#include "transport/registry.hpp"

#include <functional>
#include <utility>

#include "transport/auto/auto_transport.hpp"
#include "transport/inproc/inproc_transport.hpp"
#include "transport/shm/shm_transport.hpp"
#include "transport/tcp/tcp_transport.hpp"
#ifdef KVFERRY_HAVE_VERBS
#include "transport/verbs/verbs_transport.hpp"
#endif

namespace kvferry::transport {

namespace {

using factory = std::function<result<std::unique_ptr<transport>>(const options&)>;

using table_rows = std::vector<std::pair<std::string, factory>>;

const table_rows& table() {
  static const table_rows rows = [] {
    table_rows r{
        {"inproc", [](const options& o) { return inproc::make_inproc_transport(o); }},
        {"tcp", [](const options& o) { return tcp::make_tcp_transport(o); }},
        {"shm", [](const options& o) { return shm::make_shm_transport(o); }},
        {"auto",
         [](const options& o) {
           return automatic::make_auto_transport(make_transport("tcp", o),
                                                 make_transport("shm", o));
         }},
    };
#ifdef KVFERRY_HAVE_VERBS  // where libibverbs was found (transport/verbs/CMakeLists.txt)
    r.emplace_back("verbs", [](const options& o) { return verbs::make_verbs_transport(o); });
#endif
    return r;
  }();
  return rows;
}

}  // namespace

result<std::unique_ptr<transport>> make_transport(std::string_view backend, const options& opts) {
  for (auto& [name, make] : table())
    if (name == backend)
      return make(opts);
  std::string known;
  for (auto& [name, make] : table())
    known += (known.empty() ? "" : ", ") + name;
  return status::invalid_argument("transport backend '" + std::string{backend} +
                                  "' is not built in, expected one of: " + known);
}

std::vector<std::string> backend_names() {
  std::vector<std::string> out;
  for (auto& row : table())
    out.push_back(row.first);
  return out;
}

}  // namespace kvferry::transport
