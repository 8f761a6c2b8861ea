// The figures a process keeps for Prometheus: counters, gauges and
// histograms, each one series of a named family with fixed labels. Plain
// logic, no CAF. A series is found (or made) once, under the registry's lock,
// by whoever will update it (a rank when it starts, a transfer actor when it
// meets a peer); updates are relaxed atomic adds, taken from any thread, and
// never lock. collect() reads every series under the lock.
//
// Label values never name a room: a family has at most max_series series;
// past that, series_at() hands out a sink that is counted but not shown, and
// the family reports how many were refused in kvferry_metrics_series_refused.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "messages/metric_family.hpp"

namespace kvferry::metrics {

/// Labels of one series, in the order they are written out.
using label_set = std::vector<std::pair<std::string, std::string>>;

class counter {
 public:
  void add(uint64_t n = 1) { v_.fetch_add(n, std::memory_order_relaxed); }
  uint64_t value() const { return v_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> v_{0};
};

class gauge {
 public:
  void set(int64_t v) { v_.store(v, std::memory_order_relaxed); }
  void add(int64_t n) { v_.fetch_add(n, std::memory_order_relaxed); }
  int64_t value() const { return v_.load(std::memory_order_relaxed); }

 private:
  std::atomic<int64_t> v_{0};
};

/// Durations, in Prometheus' cumulative buckets (bounds in seconds).
class histogram {
 public:
  explicit histogram(std::vector<double> bounds);

  void observe(std::chrono::nanoseconds d);

  struct reading {
    std::vector<uint64_t> cumulative;  ///< per bound, then +Inf
    uint64_t count = 0;
    double sum_seconds = 0;
  };
  reading read() const;
  const std::vector<double>& bounds() const { return bounds_; }

 private:
  std::vector<double> bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> buckets_;  // per bound, then +Inf (not cumulative)
  std::atomic<uint64_t> count_{0};
  std::atomic<uint64_t> sum_ns_{0};
};

/// Bounds for durations of rooms and verdicts: 100 µs to 5 min.
const std::vector<double>& duration_bounds();

/// Most series of one family.
constexpr size_t max_series = 4096;

class registry {
 public:
  registry() = default;
  registry(const registry&) = delete;
  registry& operator=(const registry&) = delete;

  /// The series of family `name` with `labels`, made on first use. A name or
  /// label name Prometheus would not take, or a family asked for as another
  /// kind than it was made, throws std::invalid_argument naming it.
  counter& counter_at(std::string_view name, std::string_view help, const label_set& labels);
  gauge& gauge_at(std::string_view name, std::string_view help, const label_set& labels);
  histogram& histogram_at(std::string_view name, std::string_view help, const label_set& labels,
                          const std::vector<double>& bounds = duration_bounds());

  /// Called at the start of each collect(), on the collecting thread: where
  /// figures that are read rather than counted (memory, open files, rates)
  /// are set. One that returns false is called no more (its owner went).
  void on_collect(std::function<bool()> f);

  /// Every family with at least one series, by name.
  std::vector<metric_family> collect();

 private:
  enum class kind { counter, gauge, histogram };
  struct series {
    std::unique_ptr<counter> c;
    std::unique_ptr<gauge> g;
    std::unique_ptr<histogram> h;
  };
  struct family {
    kind k;
    std::string help;
    std::map<std::string, series> by_labels;  // rendered labels → series
    uint64_t refused = 0;                     // series past max_series
    series sink;                              // what they update instead
  };
  series& series_at(kind k, std::string_view name, std::string_view help, const label_set& labels,
                    const std::vector<double>* bounds);

  std::mutex mu_;
  std::mutex collect_mu_;  // one collect() at a time: it prunes the collectors
  std::map<std::string, family, std::less<>> families_;
  std::vector<std::function<bool()>> collectors_;
};

/// `{a="x",b="y"}` with Prometheus' escapes ("" for no labels).
std::string render_labels(const label_set& labels);

}  // namespace kvferry::metrics
