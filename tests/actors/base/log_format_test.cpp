// The JSON-lines log format (actors/base/log_json.hpp), by formatting messages
// directly: one object per line, the rank, room and failure read from the
// house convention, strings escaped; and log_format_from.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <string>

#include "actors/base/log.hpp"
#include "actors/base/log_json.hpp"
#include "messages/failure.hpp"

using namespace kvferry;

namespace {

/// 2026-12-02T11:33:19.123456Z
spdlog::log_clock::time_point sample_time() {
  using namespace std::chrono;
  return spdlog::log_clock::time_point{
      duration_cast<spdlog::log_clock::duration>(seconds{1796211199} + microseconds{123456})};
}

std::string json(std::string_view text, spdlog::level::level_enum level = spdlog::level::warn) {
  spdlog::details::log_msg msg{sample_time(), spdlog::source_loc{}, "kvferry", level,
                               spdlog::string_view_t{text.data(), text.size()}};
  json_log_formatter f;
  spdlog::memory_buf_t buf;
  f.format(msg, buf);
  return std::string{buf.data(), buf.size()};
}

/// Exactly one line: ends with the only newline.
bool one_line(const std::string& s) {
  return !s.empty() && s.back() == '\n' && std::count(s.begin(), s.end(), '\n') == 1;
}

bool has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

const std::string head =
    R"({"ts":"2026-12-02T11:33:19.123456Z","level":"warn","logger":"kvferry",)";

}  // namespace

TEST_CASE("log format: a message without rank or room has ts, level, logger and msg only",
          "[logic][log]") {
  auto s = json("the runtime stopped");
  CHECK(one_line(s));
  CHECK(s == head + R"("msg":"the runtime stopped"})" + "\n");
  CHECK(json("x", spdlog::level::err) ==
        R"({"ts":"2026-12-02T11:33:19.123456Z","level":"error","logger":"kvferry","msg":"x"})"
        "\n");
  CHECK(has(json("x", spdlog::level::info), R"("level":"info")"));
  CHECK(has(json("x", spdlog::level::critical), R"("level":"critical")"));
}

TEST_CASE("log format: a rank's line gives rank, instance, room and generation", "[logic][log]") {
  auto s = json("[prefill-0 tp0 pp0] room 42#7: chunk 3 landed (16 pages)");
  CHECK(one_line(s));
  CHECK(s == head +
                 R"j("msg":"[prefill-0 tp0 pp0] room 42#7: chunk 3 landed (16 pages)",)j"
                 R"("rank":"prefill-0 tp0 pp0","instance":"prefill-0","room":42,"generation":7})" +
                 "\n");

  auto f = read_log_fields("[decode-1 tp12 pp3] room 18446744073709551615 opened");
  CHECK(f.rank == "decode-1 tp12 pp3");
  CHECK(f.instance == "decode-1");
  REQUIRE(f.room);
  CHECK(*f.room == 18446744073709551615u);
  CHECK_FALSE(f.generation);  // an unbound room
  CHECK(f.cause.empty());
}

TEST_CASE("log format: a failure gives cause, code and origin", "[logic][log]") {
  failure why{errc::deadline, "room 42#7 stayed in WaitingForInput past its 30s deadline",
              rank_ref{role::decode, "decode-0", 1, 0, 0}};
  auto text = "[decode-1 tp1 pp0] " + to_string(room_key{42, 7}) + ": Failed: " + to_string(why);
  CHECK(text ==
        "[decode-1 tp1 pp0] room 42#7: Failed: deadline: room 42#7 stayed in WaitingForInput "
        "past its 30s deadline (from decode-0 tp0 pp0)");
  auto s = json(text);
  CHECK(one_line(s));
  CHECK(s == head + R"("msg":")" + text + R"(",)" +
                 R"("rank":"decode-1 tp1 pp0","instance":"decode-1","room":42,"generation":7,)"
                 R"("cause":"deadline: room 42#7 stayed in WaitingForInput past its 30s )"
                 R"j(deadline (from decode-0 tp0 pp0)","code":"deadline",)j"
                 R"("origin":"decode-0 tp0 pp0"})" +
                 "\n");

  // No origin, and "failed: " in lower case.
  auto f = read_log_fields(
      "[prefill-0 tp0 pp0] room 5#1: transfer failed: aborted: by the "
      "scheduler");
  CHECK(f.cause == "aborted: by the scheduler");
  CHECK(f.code == "aborted");
  CHECK(f.origin.empty());

  // A cause whose first word is no failure code keeps no code.
  f = read_log_fields("[prefill-0 tp0 pp0] handshake failed: no route: refused");
  CHECK(f.cause == "no route: refused");
  CHECK(f.code.empty());

  // "failed: " inside a word (a code's name) is not a failure rendering.
  f = read_log_fields("decider counted 3 transfer_failed: rooms");
  CHECK(f.cause.empty());

  // Every failure code is known (the list follows messages/failure.cpp).
  for (auto code : {errc::layout_mismatch, errc::transfer_failed, errc::peer_down,
                    errc::heartbeat_lost, errc::link_lost, errc::instance_dead}) {
    CHECK(is_failure_code(to_string(code)));
    failure x{code, "why", rank_ref{role::prefill, "prefill-2", 1, 1, 0}};
    f = read_log_fields("[decode-0 tp0 pp0] room 1#2: Failed: " + to_string(x));
    CHECK(f.code == to_string(code));
    CHECK(f.origin == "prefill-2 tp1 pp0");
  }
  CHECK_FALSE(is_failure_code("none"));
  CHECK_FALSE(is_failure_code("deadlines"));
}

TEST_CASE("log format: actors that name themselves, and a bare rank", "[logic][log]") {
  auto s =
      json("[decider decode-0] room 9#2: Failed: aborted: by prefill (from prefill-0 tp0 pp0)");
  CHECK(has(s, R"("instance":"decode-0","actor":"decider","room":9,"generation":2,)"));
  CHECK_FALSE(has(s, R"("rank")"));
  CHECK(has(s, R"("code":"aborted","origin":"prefill-0 tp0 pp0"})"));

  auto f = read_log_fields("[status node-a] dropped a report for decode-0/1");
  CHECK(f.actor == "status");
  CHECK(f.node == "node-a");
  CHECK(f.instance.empty());
  CHECK(f.rank.empty());

  f = read_log_fields("[bootstrap prefill-1] decode-0 tp0 pp0 registered");
  CHECK(f.actor == "bootstrap");
  CHECK(f.instance == "prefill-1");
  CHECK(f.rank.empty());

  f = read_log_fields("decode-0 tp0 pp0: cannot reach the decider");
  CHECK(f.rank == "decode-0 tp0 pp0");
  CHECK(f.instance == "decode-0");

  // Brackets that are no rank nor a known actor are left to the message.
  f = read_log_fields("[something else entirely] room 3 closed");
  CHECK(f.rank.empty());
  CHECK(f.instance.empty());
  CHECK(f.actor.empty());
  REQUIRE(f.room);
  CHECK(*f.room == 3);

  // "room" must stand as a word of its own and be followed by a number.
  f = read_log_fields("bedroom 4, room count 2, rooms 7, room 8#x, room 11#3.");
  REQUIRE(f.room);
  CHECK(*f.room == 11);
  CHECK(*f.generation == 3);
}

TEST_CASE("log format: strings are escaped, UTF-8 kept, one line per event", "[logic][log]") {
  auto s = json("quote \" backslash \\ newline \n tab \t bell \x07 caf\xc3\xa9 \xe2\x86\x92");
  CHECK(one_line(s));
  CHECK(has(s, R"("msg":"quote \" backslash \\ newline \u000a tab \u0009 bell \u0007 )"
               "caf\xc3\xa9 \xe2\x86\x92\"}"));

  std::string out;
  append_json_escaped(out, std::string_view{"a\0b\x1f\r", 5});
  CHECK(out == R"(a\u0000b\u001f\u000d)");

  // A rank and a cause with a quote in them are escaped too.
  s = json("[decode-0 tp0 pp0] room 1#1: Failed: internal: \"boom\"\n at line 2");
  CHECK(one_line(s));
  CHECK(has(s, R"("cause":"internal: \"boom\"\u000a at line 2","code":"internal"})"));
}

TEST_CASE("log format: the formatter clones, and names parse", "[logic][log]") {
  json_log_formatter f;
  auto c = f.clone();
  REQUIRE(c);
  spdlog::details::log_msg msg{sample_time(), spdlog::source_loc{}, "kvferry", spdlog::level::warn,
                               "hello"};
  spdlog::memory_buf_t a, b;
  f.format(msg, a);
  c->format(msg, b);
  CHECK(std::string(a.data(), a.size()) == std::string(b.data(), b.size()));

  CHECK(log_format_from("text") == log_format::text);
  CHECK(log_format_from("json") == log_format::json);
  CHECK_FALSE(log_format_from("JSON"));
  CHECK_FALSE(log_format_from(""));
  CHECK_FALSE(log_format_from("jsonl"));
}

TEST_CASE("log format: a relayed JSON line stays one object, naming who relayed it",
          "[logic][log]") {
  auto once = relayed_line("decode-0/1", R"({"ts":"x","msg":"m"})");
  CHECK(once == R"({"via":"decode-0/1","ts":"x","msg":"m"})");
  CHECK(relayed_line("decode-node", once) ==
        R"({"via":"decode-node/decode-0/1","ts":"x","msg":"m"})");
  CHECK(relayed_line("node \"n\"", R"({"ts":"x"})") == R"({"via":"node \"n\"","ts":"x"})");
  CHECK(relayed_line("decode-node", "progress: 3/40") == "[decode-node] progress: 3/40");
  CHECK(relayed_line("decode-node", "") == "[decode-node] ");
}
