// The transfer actor's book of jobs and batches, by direct calls: ids and
// cookies from one counter, batches counted per job and per room and peer,
// refusals and completions undone exactly once, and what a throw abandons.
#include <catch2/catch.hpp>

#include <stdexcept>

#include "actors/transfer/job_book.hpp"

using namespace kvferry;

namespace {

const rank_ref d0{role::decode, "d", 1, 0, 0};
const rank_ref d1{role::decode, "d", 1, 1, 0};
const rank_ref self_rank{role::prefill, "p", 1, 0, 0};

/// Opens job `id` of `room` to `peer` in `book`.
transfer_job& open(job_book& book, uint64_t id, room_key room, const rank_ref& peer,
                   uint32_t chunk = 0) {
  auto& j = book.open(id);
  j.meta.key = room;
  j.meta.peer = peer;
  j.meta.chunk = chunk;
  return j;
}

}  // namespace

TEST_CASE("job_book draws ids and cookies from one counter", "[logic][transfer]") {
  job_book book;
  CHECK(book.next() == 1);
  auto id = book.draw();
  CHECK(id == 1);
  open(book, id, {7, 1}, d0);
  auto cookie = book.add_batch(id, 4096, 2, false);
  CHECK(cookie == 2);  // a cookie is never an id of a job
  CHECK(book.next() == 3);
  CHECK(book.draw() == 3);
}

TEST_CASE("job_book counts a job's batches, bytes and writes, and its room's KV in flight",
          "[logic][transfer]") {
  job_book book;
  auto id = book.draw();
  auto& j = open(book, id, {7, 1}, d0);
  auto a = book.add_batch(id, 4096, 2, false);
  auto b = book.add_batch(id, 1024, 1, false);
  auto aux = book.add_batch(id, 64, 1, true);
  CHECK(j.pending == 3);
  CHECK(j.bytes == 4096 + 1024 + 64);
  CHECK(j.writes == 4);
  CHECK(book.batches() == 3);
  CHECK(book.kv_in_flight({7, 1}, d0));
  CHECK_FALSE(book.kv_in_flight({7, 1}, d1));  // per peer
  CHECK_FALSE(book.kv_in_flight({7, 2}, d0));  // per generation
  CHECK(book.job_of(a) == id);

  auto c = book.complete(a);
  REQUIRE(c);
  CHECK(c->job == id);
  CHECK_FALSE(c->aux);
  CHECK_FALSE(c->kv_landed);  // b is still in flight
  CHECK_FALSE(book.job_of(a));
  CHECK_FALSE(book.complete(a));  // a completion counts once

  c = book.complete(aux);
  REQUIRE(c);
  CHECK(c->aux);
  CHECK_FALSE(c->kv_landed);  // an aux batch is not KV
  CHECK(book.kv_in_flight({7, 1}, d0));

  c = book.complete(b);
  REQUIRE(c);
  CHECK(c->kv_landed);  // the room's last KV batch
  CHECK_FALSE(book.kv_in_flight({7, 1}, d0));
  CHECK(j.pending == 0);
  CHECK(j.done());
  book.close(id);
  CHECK(book.empty());
}

TEST_CASE("job_book counts KV in flight over every job of a room to a peer", "[logic][transfer]") {
  job_book book;
  auto first = book.draw();
  auto last = book.draw();
  open(book, first, {7, 1}, d0, 0);
  auto& l = open(book, last, {7, 1}, d0, 1);
  l.aux_waiting = true;
  auto k0 = book.add_batch(first, 100, 1, false);
  auto k1 = book.add_batch(last, 100, 1, false);
  CHECK_FALSE(l.done());
  CHECK_FALSE(book.complete(k1)->kv_landed);  // the first chunk's KV is still out
  CHECK(book.complete(k0)->kv_landed);
  CHECK(book.rooms_in_flight() == 0);
}

TEST_CASE("job_book undoes a refused batch once - no completion will come", "[logic][transfer]") {
  job_book book;
  auto id = book.draw();
  auto& j = open(book, id, {7, 1}, d0);
  auto cookie = book.add_batch(id, 4096, 3, false);
  book.refused(cookie);
  CHECK(j.pending == 0);
  CHECK(j.bytes == 4096);  // what was tried still counts in the result
  CHECK(j.writes == 3);
  CHECK(book.batches() == 0);
  CHECK_FALSE(book.kv_in_flight({7, 1}, d0));
  book.refused(cookie);  // unknown now: ignored
  CHECK(j.pending == 0);
  CHECK_FALSE(book.complete(cookie));
}

TEST_CASE("job_book throws on a completion whose job is gone, as the actor's at() did",
          "[logic][transfer]") {
  job_book book;
  auto id = book.draw();
  open(book, id, {7, 1}, d0);
  auto cookie = book.add_batch(id, 1, 1, true);
  book.close(id);  // a bug: closed with a batch out
  CHECK_THROWS_AS(book.complete(cookie), std::out_of_range);
  CHECK(book.batches() == 0);  // the batch went before the throw
}

TEST_CASE("job_book abandons a job with its batches and only its KV", "[logic][transfer]") {
  job_book book;
  auto a = book.draw();
  auto b = book.draw();
  open(book, a, {7, 1}, d0, 0);
  open(book, b, {7, 1}, d0, 1);
  auto ka = book.add_batch(a, 10, 1, false);
  book.add_batch(a, 10, 1, true);
  auto kb = book.add_batch(b, 10, 1, false);
  book.abandon(a);
  CHECK_FALSE(book.find(a));
  CHECK(book.batches() == 1);
  CHECK_FALSE(book.complete(ka));        // a late completion is ignored
  CHECK(book.kv_in_flight({7, 1}, d0));  // b's KV still counts
  CHECK(book.complete(kb)->kv_landed);   // and lands alone
  book.abandon(a);                       // twice: nothing more
  book.abandon(999);                     // unknown: nothing
  CHECK(book.jobs().size() == 1);
}

TEST_CASE("job_book names the rooms posted since a cookie, and the jobs of rooms",
          "[logic][transfer]") {
  job_book book;
  auto a = book.draw();
  auto b = book.draw();
  auto c = book.draw();
  open(book, a, {7, 1}, d0);
  open(book, b, {8, 1}, d0);
  open(book, c, {7, 1}, d1);
  book.add_batch(a, 1, 1, false);
  auto since = book.next();
  book.add_batch(b, 1, 1, false);
  CHECK(book.rooms_posted_since(since) == std::set<room_key>{{8, 1}});
  CHECK(book.rooms_posted_since(1) == std::set<room_key>{{7, 1}, {8, 1}});
  CHECK(book.rooms_posted_since(book.next()).empty());
  CHECK(book.jobs_of({{7, 1}}) == std::vector<uint64_t>{a, c});  // every peer, oldest first

  book.forget_kv({{7, 1}});
  CHECK_FALSE(book.kv_in_flight({7, 1}, d0));
  CHECK(book.kv_in_flight({8, 1}, d0));
}

TEST_CASE("a transfer job keeps its first failure and reports it in its result",
          "[logic][transfer]") {
  transfer_job j;
  j.meta.key = {7, 1};
  j.meta.peer = d0;
  j.meta.chunk = 3;
  j.meta.first_page = 12;
  j.meta.last = true;
  j.meta.src_pages = {1, 2, 3, 4};
  j.bytes = 4096;
  j.writes = 2;
  j.staged = true;
  auto r = j.result();
  CHECK_FALSE(r.why);
  CHECK(r.key == room_key{7, 1});
  CHECK(r.peer == d0);
  CHECK(r.chunk == 3);
  CHECK(r.first_page == 12);
  CHECK(r.last);
  CHECK(r.pages == 4);
  CHECK(r.bytes == 4096);
  CHECK(r.writes == 2);
  CHECK(r.staged);

  j.fail(failure{errc::transfer_failed, "first", self_rank});
  j.fail(failure{errc::deadline, "second", self_rank});
  CHECK(j.why.code == errc::transfer_failed);
  CHECK(j.result().why.cause == "first");
  CHECK(j.done());
  j.aux_waiting = true;
  CHECK_FALSE(j.done());
}
