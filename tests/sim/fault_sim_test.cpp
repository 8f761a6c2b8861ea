// The deterministic fault simulation (see tests/support/fault_sim.hpp): every
// fault at every step of the room protocol, then random interleavings and
// random faults over many seeds, for three TP mappings and for DP attention
// (the room's groups beside a group that must be spared). Each run prints how many scenarios it
// checked; a failure names the scenario (mapping, fault, step, seed), and
// KVFERRY_SIM_SEED=<seed> replays one seed of the random run.
#include "tests/support/caf_catch.hpp"  // first

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <random>

#include "tests/support/fault_sim.hpp"

using namespace kvferry::test::sim;

namespace {

struct mapping {
  uint32_t p, d;
  bool dp = false;  ///< the room's instances are DP group 1 of 2 (see scenario::dp)
};

constexpr mapping mappings[] = {{2, 2}, {1, 4}, {4, 1}, {2, 2, true}};

struct tally {
  size_t scenarios = 0;
  std::vector<std::string> failures;

  void add(const scenario& s, const report& r) {
    ++scenarios;
    for (auto& v : r.violations)
      failures.push_back(to_string(s) +
                         (r.struck_at.empty() ? "" : " (after " + r.struck_at + ")") + ": " + v);
  }

  void expect_none() {
    if (auto* path = std::getenv("KVFERRY_SIM_DUMP")) {
      std::ofstream out{path};
      for (auto& f : failures)
        out << f << "\n";
    }
    for (size_t i = 0; i < failures.size() && i < 20; ++i)
      FAIL_CHECK(failures[i]);
    CHECK(failures.size() == 0u);
  }
};

uint64_t env_or(const char* name, uint64_t fallback) {
  auto* v = std::getenv(name);
  return v ? std::strtoull(v, nullptr, 10) : fallback;
}

}  // namespace

TEST_CASE("fault simulation: every fault at every step of the protocol", "[sim]") {
  tally t;
  for (auto m : mappings) {
    scenario clean{m.p, m.d, {}, 0, m.dp};
    auto base = run(clean);
    t.add(clean, base);
    REQUIRE(base.violations.empty());
    auto faults = every_fault(m.p, m.d, base.steps);
    for (auto& f : faults) {
      scenario s{m.p, m.d, {f}, 0, m.dp};
      t.add(s, run(s));
    }
    std::cout << "fault simulation, TP " << m.p << "->" << m.d
              << (m.dp ? " in DP group 1 of 2" : "") << ": " << base.steps << " protocol steps, "
              << faults.size() << " faults checked" << std::endl;
  }
  std::cout << "fault simulation: " << t.scenarios << " scenarios checked, " << t.failures.size()
            << " violations" << std::endl;
  t.expect_none();
}

TEST_CASE("fault simulation: random interleavings and faults over many seeds", "[sim]") {
  auto seeds = env_or("KVFERRY_SIM_SEEDS", 1000);
  auto only = env_or("KVFERRY_SIM_SEED", 0);
  tally t;
  for (auto m : mappings) {
    auto steps = run(scenario{m.p, m.d, {}, 0, m.dp}).steps;
    for (uint64_t k = 1; k <= seeds; ++k) {
      auto seed = only != 0
                      ? only
                      : (uint64_t{m.dp} << 48) ^ (uint64_t{m.p} << 40) ^ (uint64_t{m.d} << 32) ^ k;
      std::mt19937_64 rng{seed};
      auto draw = [&](uint64_t n) {
        return std::uniform_int_distribution<uint64_t>{0, n - 1}(rng);
      };
      // One or two faults, at random steps; a cut-off part may heal early.
      scenario s{m.p, m.d, {}, seed, m.dp};
      for (uint64_t n = 1 + draw(2); n > 0; --n) {
        fault f;
        f.kind = static_cast<fault_kind>(draw(4));
        f.where = static_cast<target>(draw(6));
        if (f.kind == fault_kind::abort)
          f.where = draw(2) == 0 ? target::prefill_rank : target::decode_rank;
        f.index = static_cast<uint32_t>(draw(f.where == target::prefill_rank ? m.p : m.d));
        f.step = draw(steps + steps / 4 + 1);
        if (f.kind == fault_kind::cut_off && draw(2) == 0)
          f.heal_after = 1 + draw(steps);
        s.strikes.push_back(f);
      }
      t.add(s, run(s));
      if (only != 0)
        break;
    }
  }
  std::cout << "fault simulation: " << t.scenarios << " random scenarios (" << seeds
            << " seeds per mapping) checked, " << t.failures.size() << " violations" << std::endl;
  t.expect_none();
}
