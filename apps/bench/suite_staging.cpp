#include "apps/bench/suite_staging.hpp"

#include <stdexcept>
#include <string>
#include <vector>

#include "apps/bench/bench_report.hpp"
#include "apps/bench/path_run.hpp"

namespace kvferry::bench {

int run_staging_suite(const args& a) {
  auto name = a.get("model", std::string{"llama-7b"});
  auto shape = apps::shape_named(name);
  if (!shape || shape->mla)
    throw std::invalid_argument("--model=" + name + ", expected an MHA/GQA shape of " +
                                apps::shape_names());
  auto reps = static_cast<int>(a.get("reps", a.has("quick") ? 1u : 3u));
  struct mapping {
    uint32_t p, d;
  };
  for (auto m : {mapping{4, 1}, mapping{1, 4}}) {
    std::vector<double> staged_gbps, sliced_gbps, ratios;
    path_run last_staged, last_sliced;
    for (int i = 0; i < reps; ++i) {
      last_sliced = move_rooms(a, *shape, m.p, m.d, {.staging = false});
      last_staged = move_rooms(a, *shape, m.p, m.d, {.staging = true});
      if (last_staged.staged != last_staged.chunks)
        throw std::runtime_error(
            "staging was not taken for every chunk: " + std::to_string(last_staged.staged) +
            " of " + std::to_string(last_staged.chunks));
      sliced_gbps.push_back(last_sliced.gbps());
      staged_gbps.push_back(last_staged.gbps());
      ratios.push_back(static_cast<double>(last_sliced.writes) /
                       static_cast<double>(std::max<uint64_t>(last_staged.writes, 1)));
    }
    auto tag = std::to_string(m.p) + "->" + std::to_string(m.d);
    figure w;
    w.suite = "staging";
    w.metric = "writes_per_request_ratio";
    w.value = median(ratios);
    w.unit = "x";
    w.reps = reps;
    w.notes["mapping"] = tag;
    w.notes["model"] = shape->name;
    w.extra["sliced_writes_per_request"] =
        static_cast<double>(last_sliced.writes) / last_sliced.rooms;
    w.extra["staged_writes_per_request"] =
        static_cast<double>(last_staged.writes) / last_staged.rooms;
    print(w, a.json);
    figure b;
    b.suite = "staging";
    b.metric = "staging_bandwidth";
    b.value = median(staged_gbps);
    b.unit = "GB/s";
    b.baseline = median(sliced_gbps);
    b.baseline_name = "head-sliced path, same rooms";
    b.reps = reps;
    b.notes["mapping"] = tag;
    b.notes["model"] = shape->name;
    b.notes["transport"] = a.get("transport", std::string{"auto"});
    b.extra["bytes_per_run"] = static_cast<double>(last_staged.bytes);
    print(b, a.json);
  }
  return 0;
}

}  // namespace kvferry::bench
