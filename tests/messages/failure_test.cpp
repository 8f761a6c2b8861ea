#include <catch2/catch.hpp>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>

#include "messages/failure.hpp"
#include "messages/type_ids.hpp"
#include "messages/type_registry.hpp"

using namespace kvferry;

namespace {

rank_ref decode0() {
  return rank_ref{role::decode, "decode-0", 3, 1, 0};
}

struct cfg : caf::actor_system_config {
  cfg() { register_types(*this); }
};

}  // namespace

TEST_CASE("codes are scoped by what they take down", "[messages][failure]") {
  CHECK(scope_of(errc::none) == failure_scope::none);
  for (auto c : {errc::layout_mismatch, errc::invalid_pages, errc::invalid_chunk,
                 errc::unknown_room, errc::duplicate_room, errc::deadline, errc::aborted,
                 errc::aux_mismatch, errc::transfer_failed, errc::out_of_bounds, errc::unsupported,
                 errc::internal, errc::invalid_argument, errc::staging_oversized})
    CHECK(scope_of(c) == failure_scope::room);
  for (auto c : {errc::peer_down, errc::heartbeat_lost, errc::connect_failed,
                 errc::bootstrap_unreachable, errc::link_lost})
    CHECK(scope_of(c) == failure_scope::peer);
  for (auto c : {errc::instance_restarted, errc::shut_down})
    CHECK(scope_of(c) == failure_scope::instance);
}

TEST_CASE("every code has a name", "[messages][failure]") {
  for (int i = 0; i < 256; ++i) {
    auto c = static_cast<errc>(i);
    auto name = to_string(c);
    if (name.rfind("errc(", 0) == 0)
      continue;
    CHECK(name.find(' ') == std::string::npos);
  }
  CHECK(to_string(errc::layout_mismatch) == "layout_mismatch");
}

TEST_CASE("a scheduler's error carries the room - the cause and the origin rank",
          "[messages][failure]") {
  transfer_error e{room_key{42, 7},
                   failure{errc::deadline,
                           "room 42#7 stayed in WaitingForInput past its 30s deadline", decode0()}};
  CHECK(e.what() ==
        "KVTransferError(room 42#7): deadline: room 42#7 stayed in WaitingForInput past its 30s "
        "deadline (from decode-0 tp1 pp0)");
}

TEST_CASE("caf::error carries a failure and gives it back", "[messages][failure]") {
  failure f{errc::layout_mismatch, "layout mismatch: page_size prefill=16 decode=64", decode0()};
  auto err = to_error(f);
  CHECK(err.category() == error_category);
  CHECK(err.code() == static_cast<uint8_t>(errc::layout_mismatch));
  auto back = to_failure(err, rank_ref{});
  CHECK(back == f);

  auto plain = make_error(errc::unknown_room, "room 5 is not open on prefill-0 tp0 pp0");
  auto f2 = to_failure(plain, decode0());
  CHECK(f2.code == errc::unknown_room);
  CHECK(f2.cause == "room 5 is not open on prefill-0 tp0 pp0");
  CHECK(f2.origin == decode0());

  // Errors of other categories become `internal`, with CAF's words.
  auto other = to_failure(caf::make_error(caf::sec::request_timeout), decode0());
  CHECK(other.code == errc::internal);
  CHECK_THAT(other.cause, Catch::Contains("request_timeout"));
}

TEST_CASE("the actor system renders kvferry errors", "[messages][failure]") {
  cfg c;
  caf::actor_system sys{c};
  failure f{errc::aux_mismatch, "aux row 3 carries room 41#2, expected room 42#7", decode0()};
  CHECK(sys.render(to_error(f)) ==
        "kvferry.aux_mismatch: aux row 3 carries room 41#2, expected room 42#7 (from decode-0 "
        "tp1 pp0)");
}
