#include "apps/bench/suite_checksum.hpp"

#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "apps/bench/bench_report.hpp"
#include "apps/bench/path_run.hpp"

namespace kvferry::bench {

namespace {

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in{text};
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty())
      out.push_back(item);
  return out;
}

}  // namespace

int run_checksum_suite(const args& a) {
  auto name = a.get("model", std::string{"llama-7b"});
  auto shape = apps::shape_named(name);
  if (!shape)
    throw std::invalid_argument("--model=" + name + ", expected one of " + apps::shape_names());
  auto reps = static_cast<int>(a.get("reps", a.has("quick") ? 1u : 3u));
  struct mapping {
    uint32_t p, d;
  };
  for (auto& transport : split_list(a.get("transports", std::string{"shm,tcp"}))) {
    if (transport != "shm" && transport != "tcp")
      throw std::invalid_argument("--transports lists " + transport + ", expected shm or tcp");
    auto on = a;
    on.options["transport"] = transport;
    for (auto m : {mapping{1, 1}, mapping{2, 2}, mapping{1, 2}}) {
      std::vector<double> checked, plain;
      path_run last;
      for (int i = 0; i < reps; ++i) {
        plain.push_back(move_rooms(on, *shape, m.p, m.d, {}).gbps());
        last = move_rooms(on, *shape, m.p, m.d, {.checksum = kv_checksum::xxh3});
        checked.push_back(last.gbps());
      }
      figure f;
      f.suite = "checksum";
      f.metric = "checksum_bandwidth";
      f.value = median(checked);
      f.unit = "GB/s";
      f.baseline = median(plain);
      f.baseline_name = "checksums off, same rooms";
      f.reps = reps;
      f.notes["mapping"] = std::to_string(m.p) + "->" + std::to_string(m.d);
      f.notes["model"] = shape->name;
      f.notes["transport"] = transport;
      f.notes["checksum"] = "xxh3";
      f.extra["bytes_per_run"] = static_cast<double>(last.bytes);
      print(f, a.json);
    }
  }
  return 0;
}

}  // namespace kvferry::bench
