// The figures a process keeps for Prometheus (actors/metrics/): the registry,
// its exposition, and the figures a rank and a decider keep, without actors.
#include <catch2/catch.hpp>

#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>

#include "actors/metrics/decider_figures.hpp"
#include "actors/metrics/exposition.hpp"
#include "actors/metrics/process_figures.hpp"
#include "actors/metrics/rank_figures.hpp"
#include "actors/metrics/registry.hpp"
#include "actors/metrics/transfer_figures.hpp"
#include "actors/rank/room_fsm.hpp"
#include "apps/ctl/prometheus_text.hpp"

using namespace kvferry;
using namespace std::chrono_literals;

namespace {

rank_ref decode_rank(uint32_t tp) {
  return rank_ref{role::decode, "decode-0", 3, tp, 0};
}

prom::prom_exposition scrape(metrics::registry& reg) {
  return prom::parse_prometheus(metrics::render(reg.collect()));
}

}  // namespace

TEST_CASE("a registry renders counters, gauges and histograms as Prometheus text") {
  metrics::registry reg;
  reg.counter_at("kvferry_things_total", "Things", {{"kind", "a"}}).add(3);
  reg.counter_at("kvferry_things_total", "Things", {{"kind", "b \"quoted\"\\\n"}}).add();
  reg.gauge_at("kvferry_level", "A level", {}).set(-7);
  auto& h = reg.histogram_at("kvferry_wait_seconds", "Waits", {{"side", "x"}});
  h.observe(50us);
  h.observe(3ms);
  h.observe(400s);
  auto text = metrics::render(reg.collect());
  auto e = prom::parse_prometheus(text);
  CHECK(e.types.at("kvferry_things_total") == "counter");
  CHECK(e.types.at("kvferry_wait_seconds") == "histogram");
  CHECK(e.sum("kvferry_things_total", {{"kind", "a"}}) == 3);
  // Escapes round-trip.
  CHECK(e.sum("kvferry_things_total", {{"kind", "b \"quoted\"\\\n"}}) == 1);
  CHECK(e.sum("kvferry_level") == -7);
  CHECK(e.sum("kvferry_wait_seconds_count") == 3);
  CHECK(e.sum("kvferry_wait_seconds_bucket", {{"le", "0.0001"}}) == 1);
  CHECK(e.sum("kvferry_wait_seconds_bucket", {{"le", "0.0050000000000000001"}}) == 2);
  CHECK(e.sum("kvferry_wait_seconds_bucket", {{"le", "300"}}) == 2);
  CHECK(e.sum("kvferry_wait_seconds_bucket", {{"le", "+Inf"}}) == 3);
  CHECK(e.sum("kvferry_wait_seconds_sum") == Approx(400.00305));
  CHECK(text.find("# HELP kvferry_level A level\n# TYPE kvferry_level gauge\n") !=
        std::string::npos);
}

TEST_CASE("a registry refuses names Prometheus would not take, naming them") {
  metrics::registry reg;
  CHECK_THROWS_WITH(reg.counter_at("9lives", "", {}), Catch::Contains("\"9lives\""));
  CHECK_THROWS_WITH(reg.counter_at("ok_total", "", {{"bad-label", "v"}}),
                    Catch::Contains("\"bad-label\""));
  CHECK_THROWS_WITH(reg.counter_at("ok_total", "", {{"le", "v"}}), Catch::Contains("le"));
  reg.counter_at("kvferry_x", "", {});
  CHECK_THROWS_WITH(reg.gauge_at("kvferry_x", "", {}), Catch::Contains("is a counter"));
}

TEST_CASE("a family keeps at most max_series series and says how many it refused") {
  metrics::registry reg;
  for (size_t i = 0; i < metrics::max_series + 5; ++i)
    reg.counter_at("kvferry_many_total", "", {{"i", std::to_string(i)}}).add();
  auto e = scrape(reg);
  CHECK(e.count("kvferry_many_total") == metrics::max_series);
  CHECK(e.sum("kvferry_metrics_series_refused", {{"family", "kvferry_many_total"}}) == 5);
}

TEST_CASE("exposition merges the families of several processes, each series once") {
  std::vector<metric_family> a{
      {"kvferry_rooms_total", "Rooms", "counter", {"kvferry_rooms_total{p=\"1\"} 4"}}};
  std::vector<metric_family> b{
      {"kvferry_rooms_total",
       "Rooms",
       "counter",
       {"kvferry_rooms_total{p=\"2\"} 5", "kvferry_rooms_total{p=\"1\"} 4"}},
      {"kvferry_other", "Other", "gauge", {"kvferry_other 1"}},
      {"kvferry_other", "Clash", "counter", {"kvferry_other{x=\"y\"} 2"}}};
  auto e = prom::parse_prometheus(metrics::render(metrics::merge({a, b})));
  CHECK(e.count("kvferry_rooms_total") == 2);
  CHECK(e.sum("kvferry_rooms_total") == 9);
  CHECK(e.types.at("kvferry_other") == "gauge");
  CHECK(e.count("kvferry_other") == 1);
}

TEST_CASE("the format reader catches what a scraper would refuse") {
  CHECK_THROWS(prom::parse_prometheus("a 1"));  // no newline
  CHECK_THROWS(prom::parse_prometheus("a{x=\"1\"} 1\na{x=\"1\"} 2\n"));
  CHECK_THROWS(prom::parse_prometheus("a 1\nb 1\na{x=\"2\"} 1\n"));
  CHECK_THROWS(prom::parse_prometheus("# TYPE a counter\na -1\n"));
  CHECK_THROWS(prom::parse_prometheus("a{x=1} 1\n"));
  CHECK_THROWS(prom::parse_prometheus("a one\n"));
  CHECK_THROWS(prom::parse_prometheus(
      "# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\nh_count 1\n"));
  CHECK_NOTHROW(prom::parse_prometheus(
      "# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 2\nh_count 2\nh_sum 3\n"));
}

TEST_CASE("a rank's figures follow its rooms' moves, by state and outcome") {
  auto reg = std::make_shared<metrics::registry>();
  auto figures = std::make_unique<metrics::rank_figures>(reg, decode_rank(1));
  deadlines limits;
  room_fsm a{limits}, b{limits}, c{limits};
  auto follow = [&](room_fsm& f) {
    if (auto ch = f.take_change())
      figures->moved(ch->from, ch->to, f.why(), 2ms);
  };
  for (auto* f : {&a, &b, &c})
    follow(*f);
  follow(a);  // no move: nothing counted twice
  CHECK(figures->in_flight(kv_poll::bootstrapping) == 3);
  a.advance(kv_poll::waiting_for_input);
  a.advance(kv_poll::transferring);
  follow(a);
  a.succeed();
  follow(a);
  b.fail(failure{errc::deadline, "late", rank_ref{role::prefill, "prefill-0", 1, 0, 0}});
  follow(b);
  c.advance(kv_poll::waiting_for_input);
  follow(c);
  figures->fast_failed(errc::instance_dead);

  auto e = scrape(*reg);
  std::map<std::string, std::string> rank{
      {"kv_instance", "decode-0"}, {"role", "decode"}, {"tp", "1"}, {"pp", "0"}};
  auto with = [&](std::string k, std::string v) {
    auto m = rank;
    m[k] = v;
    return m;
  };
  CHECK(e.sum("kvferry_rooms_total", with("outcome", "success")) == 1);
  CHECK(e.sum("kvferry_rooms_total", with("outcome", "failed")) == 1);
  CHECK(e.sum("kvferry_rooms_in_flight", with("state", "Bootstrapping")) == 0);
  CHECK(e.sum("kvferry_rooms_in_flight", with("state", "WaitingForInput")) == 1);
  CHECK(e.sum("kvferry_rooms_in_flight", with("state", "Transferring")) == 0);
  CHECK(e.sum("kvferry_room_failures_total",
              {{"code", "deadline"}, {"origin", "prefill-0 tp0 pp0"}}) == 1);
  CHECK(e.sum("kvferry_room_seconds_count", with("outcome", "success")) == 1);
  CHECK(e.sum("kvferry_fast_fail_total", with("code", "instance_dead")) == 1);

  // A rank that goes takes its rooms in flight off the gauges.
  figures.reset();
  CHECK(scrape(*reg).sum("kvferry_rooms_in_flight") == 0);
}

TEST_CASE("a decider's figures count misses and say which peers are up, with generation") {
  auto reg = std::make_shared<metrics::registry>();
  metrics::decider_figures d{reg, "decode-0"};
  rank_ref p{role::prefill, "prefill-0", 9, 1, 0};
  d.standing(p, true);
  d.missed(p);
  d.missed(p);
  d.standing(p, false);
  d.verdict(kv_poll::failed, 3ms);
  auto e = scrape(*reg);
  std::map<std::string, std::string> peer{{"kv_instance", "decode-0"},
                                          {"peer", "prefill-0 tp1 pp0"}};
  CHECK(e.sum("kvferry_heartbeat_misses_total", peer) == 2);
  CHECK(e.sum("kvferry_peer_up", peer) == 0);
  CHECK(e.sum("kvferry_peer_generation", peer) == 9);
  CHECK(e.sum("kvferry_verdict_seconds_count", {{"outcome", "failed"}}) == 1);
}

TEST_CASE("transfer figures count bytes per peer, and the bandwidth goes with them") {
  auto reg = std::make_shared<metrics::registry>();
  auto t = std::make_shared<metrics::transfer_figures>(reg, rank_ref{role::prefill, "p", 1, 0, 0},
                                                       "tcp");
  t->watch_bandwidth();
  t->posted(decode_rank(0), 1000);
  t->posted(decode_rank(1), 24);
  t->failed(decode_rank(1));
  t->staged_waited(decode_rank(0));
  auto e = scrape(*reg);
  CHECK(e.sum("kvferry_transfer_bytes_total", {{"transport", "tcp"}}) == 1024);
  CHECK(e.sum("kvferry_transfer_batches_total", {{"peer", "decode-0 tp1 pp0"}}) == 1);
  CHECK(e.sum("kvferry_transfer_failed_batches_total") == 1);
  CHECK(e.sum("kvferry_transfer_staged_waits_total", {{"peer", "decode-0 tp0 pp0"}}) == 1);
  CHECK(e.sum("kvferry_transfer_bandwidth_bytes_per_second") > 0);
  t.reset();  // its collector goes with it
  CHECK(scrape(*reg).sum("kvferry_transfer_bandwidth_bytes_per_second") == 0);
}

TEST_CASE("process figures read this process's memory, descriptors and connections") {
  metrics::registry reg;
  metrics::watch_process(reg, {{"process", "test"}});
  auto e = scrape(reg);
  CHECK(e.sum("kvferry_process_resident_bytes") > 1e6);
  CHECK(e.sum("kvferry_process_open_fds") >= 3);
  CHECK(e.count("kvferry_process_open_connections") == 1);
}
