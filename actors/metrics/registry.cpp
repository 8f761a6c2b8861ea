#include "actors/metrics/registry.hpp"

#include <algorithm>
#include <cstdio>
#include <stdexcept>

namespace kvferry::metrics {

namespace {

bool name_ok(std::string_view s, bool colon) {
  if (s.empty())
    return false;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    bool alpha =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (colon && c == ':');
    if (!alpha && !(i > 0 && c >= '0' && c <= '9'))
      return false;
  }
  return true;
}

const char* kind_name(int k) {
  return k == 0 ? "counter" : k == 1 ? "gauge" : "histogram";
}

/// A sample value: integers as integers, others with full precision.
std::string number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

}  // namespace

std::string render_labels(const label_set& labels) {
  if (labels.empty())
    return {};
  std::string out = "{";
  for (auto& [k, v] : labels) {
    if (out.size() > 1)
      out += ',';
    out += k;
    out += "=\"";
    for (char c : v) {
      if (c == '\\')
        out += "\\\\";
      else if (c == '"')
        out += "\\\"";
      else if (c == '\n')
        out += "\\n";
      else
        out += c;
    }
    out += '"';
  }
  out += '}';
  return out;
}

histogram::histogram(std::vector<double> bounds) : bounds_(std::move(bounds)) {
  std::sort(bounds_.begin(), bounds_.end());
  buckets_ = std::make_unique<std::atomic<uint64_t>[]>(bounds_.size() + 1);
  for (size_t i = 0; i <= bounds_.size(); ++i)
    buckets_[i].store(0, std::memory_order_relaxed);
}

void histogram::observe(std::chrono::nanoseconds d) {
  auto ns = std::max<int64_t>(d.count(), 0);
  double s = static_cast<double>(ns) / 1e9;
  auto i =
      static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), s) - bounds_.begin());
  buckets_[i].fetch_add(1, std::memory_order_relaxed);
  sum_ns_.fetch_add(static_cast<uint64_t>(ns), std::memory_order_relaxed);
  count_.fetch_add(1, std::memory_order_relaxed);
}

histogram::reading histogram::read() const {
  reading r;
  uint64_t run = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    run += buckets_[i].load(std::memory_order_relaxed);
    r.cumulative.push_back(run);
  }
  // The count is the +Inf bucket, so that the two agree in one reading even
  // while observations land.
  r.count = run;
  r.sum_seconds = static_cast<double>(sum_ns_.load(std::memory_order_relaxed)) / 1e9;
  return r;
}

const std::vector<double>& duration_bounds() {
  static const std::vector<double> b{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
                                     0.025,  0.05,    0.1,    0.25,  0.5,    1,     2.5,
                                     5,      10,      30,     60,    300};
  return b;
}

registry::series& registry::series_at(kind k, std::string_view name, std::string_view help,
                                      const label_set& labels, const std::vector<double>* bounds) {
  if (!name_ok(name, true))
    throw std::invalid_argument("metric name \"" + std::string{name} +
                                "\": expected [a-zA-Z_:][a-zA-Z0-9_:]*");
  for (auto& [key, v] : labels)
    if (!name_ok(key, false) || key == "le" || key.starts_with("__"))
      throw std::invalid_argument("label name \"" + key + "\" of " + std::string{name} +
                                  ": expected [a-zA-Z_][a-zA-Z0-9_]*, not le or __*");
  std::lock_guard<std::mutex> guard{mu_};
  auto f = families_.find(name);
  if (f == families_.end())
    f = families_.emplace(std::string{name}, family{k, std::string{help}, {}, 0, {}}).first;
  else if (f->second.k != k)
    throw std::invalid_argument("metric " + std::string{name} + " is a " +
                                kind_name(static_cast<int>(f->second.k)) + ", asked for as a " +
                                kind_name(static_cast<int>(k)));
  auto& fam = f->second;
  auto make = [&](series& s) {
    if (k == kind::counter && !s.c)
      s.c = std::make_unique<counter>();
    else if (k == kind::gauge && !s.g)
      s.g = std::make_unique<gauge>();
    else if (k == kind::histogram && !s.h)
      s.h = std::make_unique<histogram>(bounds ? *bounds : duration_bounds());
  };
  auto key = render_labels(labels);
  auto i = fam.by_labels.find(key);
  if (i != fam.by_labels.end())
    return i->second;
  if (fam.by_labels.size() >= max_series) {
    ++fam.refused;
    make(fam.sink);
    return fam.sink;
  }
  auto& s = fam.by_labels[key];
  make(s);
  return s;
}

counter& registry::counter_at(std::string_view name, std::string_view help,
                              const label_set& labels) {
  return *series_at(kind::counter, name, help, labels, nullptr).c;
}

gauge& registry::gauge_at(std::string_view name, std::string_view help, const label_set& labels) {
  return *series_at(kind::gauge, name, help, labels, nullptr).g;
}

histogram& registry::histogram_at(std::string_view name, std::string_view help,
                                  const label_set& labels, const std::vector<double>& bounds) {
  return *series_at(kind::histogram, name, help, labels, &bounds).h;
}

void registry::on_collect(std::function<bool()> f) {
  std::lock_guard<std::mutex> guard{mu_};
  collectors_.push_back(std::move(f));
}

std::vector<metric_family> registry::collect() {
  std::lock_guard<std::mutex> one_at_a_time{collect_mu_};
  std::vector<std::function<bool()>> collectors;
  {
    std::lock_guard<std::mutex> guard{mu_};
    collectors = collectors_;
  }
  std::vector<size_t> gone;
  for (size_t i = 0; i < collectors.size(); ++i)
    if (!collectors[i]())
      gone.push_back(i);
  if (!gone.empty()) {
    // Collectors are only ever appended: the indexes taken still hold.
    std::lock_guard<std::mutex> guard{mu_};
    for (auto i = gone.rbegin(); i != gone.rend(); ++i)
      collectors_.erase(collectors_.begin() + static_cast<std::ptrdiff_t>(*i));
  }
  std::vector<metric_family> out;
  metric_family refused{"kvferry_metrics_series_refused",
                        "Series a family did not make: it had max_series already",
                        "counter",
                        {}};
  std::lock_guard<std::mutex> guard{mu_};
  for (auto& [name, fam] : families_) {
    if (fam.by_labels.empty())
      continue;
    metric_family m{name, fam.help, kind_name(static_cast<int>(fam.k)), {}};
    for (auto& [labels, s] : fam.by_labels) {
      if (s.c) {
        m.samples.push_back(name + labels + " " + std::to_string(s.c->value()));
      } else if (s.g) {
        m.samples.push_back(name + labels + " " + std::to_string(s.g->value()));
      } else if (s.h) {
        auto r = s.h->read();
        // The bucket bound goes after the series' own labels.
        auto with_le = [&](const std::string& le) {
          auto inner = labels.empty() ? std::string{} : labels.substr(1, labels.size() - 2) + ",";
          return "{" + inner + "le=\"" + le + "\"}";
        };
        auto& b = s.h->bounds();
        for (size_t i = 0; i < b.size(); ++i)
          m.samples.push_back(name + "_bucket" + with_le(number(b[i])) + " " +
                              std::to_string(r.cumulative[i]));
        m.samples.push_back(name + "_bucket" + with_le("+Inf") + " " +
                            std::to_string(r.cumulative.back()));
        m.samples.push_back(name + "_sum" + labels + " " + number(r.sum_seconds));
        m.samples.push_back(name + "_count" + labels + " " + std::to_string(r.count));
      }
    }
    if (fam.refused > 0)
      refused.samples.push_back(refused.name + render_labels({{"family", name}}) + " " +
                                std::to_string(fam.refused));
    out.push_back(std::move(m));
  }
  if (!refused.samples.empty())
    out.push_back(std::move(refused));
  return out;
}

}  // namespace kvferry::metrics
