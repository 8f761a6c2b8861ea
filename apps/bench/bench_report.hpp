// How kvferry-bench reports: one JSON object per line with --json
//   {"suite", "metric", "value", "unit", "baseline", "ratio", "reps", ...}
// or a readable line otherwise. Figures are medians over repetitions.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace kvferry::bench {

struct figure {
  std::string suite;
  std::string metric;
  double value = 0;
  std::string unit;
  std::optional<double> baseline;  ///< the limit measured in the same run
  std::string baseline_name;       ///< what the baseline is ("raw TCP stream")
  int reps = 0;
  std::map<std::string, double> extra;  ///< further numbers (p99, sizes...)
  std::map<std::string, std::string> notes;
};

/// Prints one figure as JSON (one line) or as text.
void print(const figure& f, bool json);

/// The median of `xs` (mean of the two middle ones for an even count).
double median(std::vector<double> xs);

/// The p-th percentile (0..100) of `xs`, nearest rank.
double percentile(std::vector<double> xs, double p);

}  // namespace kvferry::bench
