#include "messages/bootstrap.hpp"

namespace kvferry {

std::string bootstrap_locator::key() const {
  if (handle)
    return "local:" + std::to_string(handle.id());
  auto h = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  return h + ":" + std::to_string(port);
}

}  // namespace kvferry
