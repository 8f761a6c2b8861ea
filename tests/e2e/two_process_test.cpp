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

/// Both sides of a run, started and released together.
struct process_pair {
  std::unique_ptr<child_process> prefill;
  std::unique_ptr<child_process> decode;
};

/// Waits for `p`'s "ready" line (its ranks up).
void await_ready(child_process& p, const char* side) {
  auto line = p.wait_for_line([](const std::string& l) { return l.rfind("ready ", 0) == 0; }, 120s);
  INFO(side << " output:\n" << p.output());
  REQUIRE(line);
}

/// Starts the prefill side (bootstrap and ranks) and the decode side against
/// its bootstrap, each held at its gate (--epoch-from-stdin) until both are
/// ready: a side whose memory is slow to touch (seconds per GiB on a machine
/// that hands memory out lazily) leaves no room of the other waiting past
/// its deadline meanwhile. The runs are not paced: the epoch only opens the
/// gate.
process_pair start_pair(std::vector<std::string> prefill_args,
                        std::vector<std::string> decode_args) {
  process_pair out;
  std::vector<std::string> argv{demo, "--role=prefill", "--bootstrap-port=0", "--epoch-from-stdin"};
  argv.insert(argv.end(), prefill_args.begin(), prefill_args.end());
  out.prefill = std::make_unique<child_process>(argv);
  auto line = out.prefill->wait_for_line(
      [](const std::string& l) { return l.find("bootstrap listening on") != std::string::npos; },
      60s);
  INFO("prefill output:\n" << out.prefill->output());
  REQUIRE(line);
  std::smatch m;
  REQUIRE(std::regex_search(*line, m, std::regex{R"(:(\d+)$)"}));
  std::vector<std::string> dargv{demo, "--role=decode", "--bootstrap-port=" + m[1].str(),
                                 "--epoch-from-stdin"};
  dargv.insert(dargv.end(), decode_args.begin(), decode_args.end());
  out.decode = std::make_unique<child_process>(dargv);
  await_ready(*out.prefill, "prefill");
  await_ready(*out.decode, "decode");
  auto now = std::to_string(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                std::chrono::system_clock::now().time_since_epoch())
                                .count()) +
             "\n";
  REQUIRE(out.prefill->write_stdin(now));
  REQUIRE(out.decode->write_stdin(now));
  return out;
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
  auto [prefill, decode] = start_pair(common, common);
  int drc = decode->wait(120s);
  int prc = prefill->wait(60s);
  INFO("decode output:\n" << decode->output());
  INFO("prefill output:\n" << prefill->output());
  CHECK(drc == 0);
  CHECK(prc == 0);
  CHECK_THAT(
      decode->output(),
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
  std::vector<std::string> dargs{"--decode-tp=" + std::to_string(r.dtp),
                                 "--decode-pp=" + std::to_string(r.dpp)};
  dargs.insert(dargs.end(), common.begin(), common.end());
  auto [prefill, decode] = start_pair(pargs, dargs);
  int drc = decode->wait(120s);
  int prc = prefill->wait(60s);
  INFO("decode output:\n" << decode->output());
  INFO("prefill output:\n" << prefill->output());
  CHECK(drc == 0);
  CHECK(prc == 0);
  CHECK_THAT(decode->output(), Catch::Contains("16 Success, 0 Failed, 16 verified byte for byte, "
                                               "0 corrupted, 0 disagreements"));
  CHECK_THAT(prefill->output(), Catch::Contains("16 Success, 0 Failed, 0 disagreements"));
}

TEST_CASE("two processes: a page size mismatch is refused at handshake on both sides",
          "[e2e][process]") {
  auto [prefill, decode] = start_pair(
      {"--rooms=12", "--model=tiny", "--page-size=16", "--kvferry.bootstrap-timeout=20s"},
      {"--rooms=12", "--model=tiny", "--page-size=32", "--kvferry.bootstrap-timeout=20s"});
  int drc = decode->wait(60s);
  int prc = prefill->wait(60s);
  INFO("decode output:\n" << decode->output());
  INFO("prefill output:\n" << prefill->output());
  CHECK(drc == 1);
  CHECK(prc == 1);
  CHECK_THAT(decode->output(), Catch::Contains("decode: failed with layout_mismatch: 12"));
  CHECK_THAT(decode->output(), Catch::Contains("layout mismatch: page_size prefill=16 decode=32"));
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

TEST_CASE("the main job with DP attention groups moves every byte of every group",
          "[e2e][process][dp]") {
  // prefill TP 4 DP 4 -> decode TP 8 DP 8 (MLA, the done-when shape), prefill
  // DP 1 -> decode DP 4 (GQA: TP 2 to groups of 2), and DP on both sides with
  // fan-in inside the groups (MHA: groups of 2 to groups of 1).
  auto shape =
      GENERATE(as<std::vector<std::string>>{},
               std::vector<std::string>{"--model=deepseek-mla", "--prefill-tp=4", "--prefill-dp=4",
                                        "--decode-tp=8", "--decode-dp=8"},
               std::vector<std::string>{"--model=tiny-gqa", "--prefill-tp=2", "--decode-tp=8",
                                        "--decode-dp=4"},
               std::vector<std::string>{"--model=tiny", "--prefill-tp=4", "--prefill-dp=2",
                                        "--decode-tp=2", "--decode-dp=2"});
  std::vector<std::string> argv{demo, "--rooms=48", "--pool-pages=48", "--max-tokens=200"};
  argv.insert(argv.end(), shape.begin(), shape.end());
  child_process job{argv};
  int rc = job.wait(120s);
  INFO(job.output());
  CHECK(rc == 0);
  CHECK_THAT(job.output(), Catch::Contains("48 Success, 0 Failed, 48 verified byte for byte, 0 "
                                           "corrupted, 0 disagreements"));
  CHECK_THAT(job.output(), Catch::Contains("prefill: 48 requests"));
}

TEST_CASE("the main job refuses DP shapes whose groups cannot pair, naming both",
          "[e2e][process][dp]") {
  child_process job{{demo, "--prefill-tp=6", "--prefill-dp=2", "--decode-tp=4", "--decode-dp=2"}};
  int rc = job.wait(60s);
  INFO(job.output());
  CHECK(rc == 2);
  CHECK_THAT(job.output(), Catch::Contains("prefill tp = 6, dp = 2 (groups of 3) and decode tp = "
                                           "4, dp = 2 (groups of 2) cannot pair"));
  child_process split{{demo, "--prefill-tp=3", "--prefill-dp=2"}};
  CHECK(split.wait(60s) == 2);
  CHECK_THAT(split.output(),
             Catch::Contains("prefill tp = 3, dp = 2: expected a dp that divides tp"));
}
