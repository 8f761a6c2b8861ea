// The one place that names the backends: a table of names and factories
// (registry.cpp), with verbs where libibverbs was found at configure time.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "transport/status.hpp"
#include "transport/transport.hpp"

namespace kvferry::transport {

/// Creates the backend called `backend` ("inproc", "tcp", "shm", "auto",
/// "verbs"), made with `opts` and its settings of that backend.
result<std::unique_ptr<transport>> make_transport(std::string_view backend, const options& opts);

/// The backends built into this binary.
std::vector<std::string> backend_names();

}  // namespace kvferry::transport
