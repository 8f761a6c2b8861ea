// Which rooms a throw in a transfer actor's handler fails, by direct calls:
// the handled job's room, stranded jobs' rooms and rooms posted since the
// handler began; jobs still moving on their own are left alone.
#include <catch2/catch.hpp>

#include "actors/transfer/throw_scope.hpp"

using namespace kvferry;

namespace {

const rank_ref d0{role::decode, "d", 1, 0, 0};

transfer_job& open(job_book& book, uint64_t id, room_key room) {
  auto& j = book.open(id);
  j.meta.key = room;
  j.meta.peer = d0;
  return j;
}

}  // namespace

TEST_CASE("a job with batches out, or queued for its ring, is not stranded",
          "[logic][transfer][exception]") {
  job_book book;
  staged_queue queue;
  auto a = book.draw();
  auto& ja = open(book, a, {7, 1});
  book.add_batch(a, 1, 1, false);
  CHECK_FALSE(stranded(book, queue, a, ja));

  auto b = book.draw();
  auto& jb = open(book, b, {8, 1});
  queue.push(d0, b, {8, 1});
  CHECK_FALSE(stranded(book, queue, b, jb));
  jb.posted = true;  // posted yet nothing in flight: it went nowhere
  CHECK(stranded(book, queue, b, jb));

  auto c = book.draw();
  auto& jc = open(book, c, {9, 1});
  CHECK(stranded(book, queue, c, jc));  // neither in flight nor queued
}

TEST_CASE("a last chunk waiting for its room's KV is stranded only when none is in flight",
          "[logic][transfer][exception]") {
  job_book book;
  staged_queue queue;
  auto kv = book.draw();
  open(book, kv, {7, 1});
  auto cookie = book.add_batch(kv, 1, 1, false);
  auto last = book.draw();
  auto& jl = open(book, last, {7, 1});
  jl.aux_waiting = true;
  CHECK_FALSE(stranded(book, queue, last, jl));
  book.complete(cookie);
  CHECK(stranded(book, queue, last, jl));
}

TEST_CASE("a throw concerns the handled job's room, stranded rooms and rooms posted since",
          "[logic][transfer][exception]") {
  job_book book;
  staged_queue queue;
  auto moving = book.draw();
  open(book, moving, {1, 1});
  book.add_batch(moving, 1, 1, false);
  auto queued = book.draw();
  open(book, queued, {2, 1});
  queue.push(d0, queued, {2, 1});
  auto handled = book.draw();
  open(book, handled, {3, 1});
  queue.push(d0, handled, {3, 1});  // queued, but the handler was handling it
  CHECK(rooms_hit_by_throw(book, queue, std::nullopt, book.next()).empty());
  CHECK(rooms_hit_by_throw(book, queue, handled, book.next()) == std::set<room_key>{{3, 1}});
  CHECK(rooms_hit_by_throw(book, queue, 999, book.next()).empty());  // a job already gone

  auto since = book.next();
  auto posted = book.draw();
  open(book, posted, {4, 1});
  book.add_batch(posted, 1, 1, false);  // a post the throw may have cut short
  auto left = book.draw();
  open(book, left, {5, 1});  // in no queue, nothing in flight
  CHECK(rooms_hit_by_throw(book, queue, std::nullopt, since) == std::set<room_key>{{4, 1}, {5, 1}});
}
