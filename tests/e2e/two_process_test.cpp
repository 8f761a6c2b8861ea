// The slice across two real processes on 127.0.0.1: bootstrap + prefill rank
// in one, decode rank in the other, the control plane over CAF's middleman,
// the KV over the tcp backend; and the main job (README command 1) itself.
#include <catch2/catch.hpp>

#include <regex>
#include <tuple>

#include "apps/common/child_process.hpp"

using namespace kvferry::apps;
using namespace std::chrono_literals;

namespace {

const std::string demo = KVFERRY_DEMO_PATH;

/// Starts the prefill side and returns it with its bootstrap port.
std::pair<std::unique_ptr<child_process>, std::string> start_prefill(
    std::vector<std::string> extra) {
  std::vector<std::string> argv{demo, "--role=prefill", "--bootstrap-port=0"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  auto p = std::make_unique<child_process>(argv);
  auto line = p->wait_for_line(
      [](const std::string& l) { return l.find("bootstrap listening on") != std::string::npos; },
      20s);
  REQUIRE(line);
  std::smatch m;
  REQUIRE(std::regex_search(*line, m, std::regex{R"(:(\d+)$)"}));
  return {std::move(p), m[1]};
}

}  // namespace

TEST_CASE("two processes: a prefill and a decode process move every byte", "[e2e][process]") {
  auto chunk = GENERATE(as<std::string>{}, "--chunk-pages=1", "--chunk-pages=3", "--chunk-pages=0");
  auto model = GENERATE(as<std::string>{}, "--model=tiny", "--model=deepseek-mla");
  CAPTURE(chunk, model);
  std::vector<std::string> common{"--rooms=40",
                                  "--pool-pages=96",
                                  "--page-size=16",
                                  chunk,
                                  model,
                                  "--max-tokens=200",
                                  "--kvferry.bootstrap-timeout=20s"};
  auto [prefill, port] = start_prefill(common);
  std::vector<std::string> argv{demo, "--role=decode", "--bootstrap-port=" + port};
  argv.insert(argv.end(), common.begin(), common.end());
  child_process decode{argv};
  int drc = decode.wait(120s);
  int prc = prefill->wait(60s);
  INFO("decode output:\n" << decode.output());
  INFO("prefill output:\n" << prefill->output());
  CHECK(drc == 0);
  CHECK(prc == 0);
  CHECK_THAT(
      decode.output(),
      Catch::Contains("decode: 40 requests on 1 rank, 40 Success, 0 Failed, 40 verified byte for "
                      "byte, 0 corrupted, 0 disagreements"));
  CHECK_THAT(prefill->output(),
             Catch::Contains("prefill: 40 requests on 1 rank, 40 Success, 0 Failed"));
}

namespace {

struct mapping_run {
  uint32_t ptp, ppp, dtp, dpp;
  std::string model;
  uint32_t page;
};

/// The TP matrix over the three model kinds, each pair at a different page
/// size, and the PP mappings.
std::vector<mapping_run> mapping_runs() {
  std::vector<mapping_run> runs;
  std::vector<std::pair<uint32_t, uint32_t>> tps{{1, 1}, {2, 2}, {1, 2}, {2, 1},
                                                 {1, 4}, {4, 1}, {2, 8}, {8, 2}};
  std::vector<std::string> models{"tiny", "tiny-gqa", "deepseek-mla"};
  std::vector<uint32_t> pages{16, 1, 64};
  for (size_t i = 0; i < tps.size(); ++i)
    for (size_t m = 0; m < models.size(); ++m)
      runs.push_back({tps[i].first, 1, tps[i].second, 1, models[m], pages[(i + m) % 3]});
  runs.push_back({2, 2, 1, 1, "tiny", 16});
  runs.push_back({2, 2, 2, 2, "tiny-gqa", 16});
  runs.push_back({1, 2, 1, 1, "deepseek-mla", 16});
  return runs;
}

}  // namespace

TEST_CASE("two processes: TP and PP mappings move every byte of every rank", "[e2e][process]") {
  auto r = GENERATE(from_range(mapping_runs()));
  CAPTURE(r.ptp, r.ppp, r.dtp, r.dpp, r.model, r.page);
  // Room sizes and pools scaled to the page size: about 1-8 pages per room.
  auto max_tokens = std::to_string(r.page * 8);
  std::vector<std::string> common{"--rooms=16",
                                  "--pool-pages=80",
                                  "--page-size=" + std::to_string(r.page),
                                  "--min-tokens=1",
                                  "--max-tokens=" + max_tokens,
                                  "--chunk-pages=3",
                                  "--model=" + r.model,
                                  "--kvferry.bootstrap-timeout=20s"};
  auto pargs = common;
  pargs.insert(pargs.end(),
               {"--prefill-tp=" + std::to_string(r.ptp), "--prefill-pp=" + std::to_string(r.ppp)});
  auto [prefill, port] = start_prefill(pargs);
  std::vector<std::string> argv{demo, "--role=decode", "--bootstrap-port=" + port,
                                "--decode-tp=" + std::to_string(r.dtp),
                                "--decode-pp=" + std::to_string(r.dpp)};
  argv.insert(argv.end(), common.begin(), common.end());
  child_process decode{argv};
  int drc = decode.wait(120s);
  int prc = prefill->wait(60s);
  INFO("decode output:\n" << decode.output());
  INFO("prefill output:\n" << prefill->output());
  CHECK(drc == 0);
  CHECK(prc == 0);
  CHECK_THAT(decode.output(), Catch::Contains("16 Success, 0 Failed, 16 verified byte for byte, "
                                              "0 corrupted, 0 disagreements"));
  CHECK_THAT(prefill->output(), Catch::Contains("16 Success, 0 Failed, 0 disagreements"));
}

TEST_CASE("two processes: a page size mismatch is refused at handshake on both sides",
          "[e2e][process]") {
  auto [prefill, port] = start_prefill(
      {"--rooms=12", "--model=tiny", "--page-size=16", "--kvferry.bootstrap-timeout=20s"});
  child_process decode{{demo, "--role=decode", "--bootstrap-port=" + port, "--rooms=12",
                        "--model=tiny", "--page-size=32", "--kvferry.bootstrap-timeout=20s"}};
  int drc = decode.wait(60s);
  int prc = prefill->wait(60s);
  INFO("decode output:\n" << decode.output());
  INFO("prefill output:\n" << prefill->output());
  CHECK(drc == 1);
  CHECK(prc == 1);
  CHECK_THAT(decode.output(), Catch::Contains("decode: failed with layout_mismatch: 12"));
  CHECK_THAT(decode.output(), Catch::Contains("layout mismatch: page_size prefill=16 decode=32"));
  CHECK_THAT(prefill->output(), Catch::Contains("prefill: failed with layout_mismatch: 12"));
  CHECK_THAT(prefill->output(), Catch::Contains("layout mismatch: page_size prefill=16 decode=32"));
}

TEST_CASE("the main job runs in one process and verifies every byte", "[e2e][process]") {
  child_process job{{demo, "--model=tiny", "--rooms=60", "--pool-pages=64"}};
  int rc = job.wait(120s);
  INFO(job.output());
  CHECK(rc == 0);
  CHECK_THAT(
      job.output(),
      Catch::Contains("decode: 60 requests on 1 rank, 60 Success, 0 Failed, 60 verified byte for "
                      "byte"));
  CHECK_THAT(job.output(), Catch::Contains("GB/s"));
  CHECK_THAT(job.output(), Catch::Contains("states reached:"));
}
