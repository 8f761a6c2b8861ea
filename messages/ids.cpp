#include "messages/ids.hpp"

namespace kvferry {

std::string to_string(const room_key& x) {
  auto s = "room " + std::to_string(x.room);
  if (x.generation != 0)
    s += "#" + std::to_string(x.generation);
  return s;
}

std::string to_string(role x) {
  return x == role::prefill ? "prefill" : "decode";
}

std::string to_string(const rank_ref& x) {
  auto name = x.instance.empty() ? to_string(x.side) : x.instance;
  if (x.names_instance())
    return "instance " + name;
  return name + " tp" + std::to_string(x.tp) + " pp" + std::to_string(x.pp);
}

std::string control_endpoint::key() const {
  if (!published())
    return "-";
  auto h = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  return h + ":" + std::to_string(port);
}

}  // namespace kvferry
