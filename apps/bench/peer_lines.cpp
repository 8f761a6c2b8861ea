#include "apps/bench/peer_lines.hpp"

#include <chrono>
#include <regex>
#include <stdexcept>

namespace kvferry::bench {

uint16_t await_bootstrap_port(apps::child_process& peer, const std::string& who) {
  auto line = peer.wait_for_line([](auto& l) { return l.rfind("ready ", 0) == 0; },
                                 std::chrono::seconds{60});
  std::smatch m;
  if (!line || !std::regex_search(*line, m, std::regex{R"(bootstrap=(\d+))"}))
    throw std::runtime_error(who + " did not start: " + peer.output());
  return static_cast<uint16_t>(std::stoul(m[1]));
}

double number_after(const std::string& line, const std::string& key) {
  std::smatch m;
  if (!std::regex_search(line, m, std::regex{key + R"(=([0-9.eE+-]+))"}))
    throw std::runtime_error("a peer's report lacks " + key + ": " + line);
  return std::stod(m[1]);
}

std::optional<double> json_number(const std::string& line, const std::string& key) {
  std::smatch m;
  if (!std::regex_search(line, m, std::regex{"\"" + key + "\": (-?[0-9.eE+-]+)"}))
    return std::nullopt;
  return std::stod(m[1]);
}

std::optional<std::string> json_text(const std::string& line, const std::string& key) {
  std::smatch m;
  if (!std::regex_search(line, m, std::regex{"\"" + key + "\": \"([^\"]*)\""}))
    return std::nullopt;
  return m[1].str();
}

}  // namespace kvferry::bench
