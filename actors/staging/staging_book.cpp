#include "actors/staging/staging_book.hpp"

#include <span>
#include <string>

namespace kvferry {

namespace {

std::string bytes_text(uint64_t n) {
  return std::to_string(n) + " bytes";
}

}  // namespace

staging_book::staging_book(kv_layout local, rank_ref self, uint64_t ring_size)
    : local_(std::move(local)), self_(std::move(self)), ring_(ring_size) {}

void staging_book::open(staging_room spec) {
  auto key = spec.key;
  rooms_.try_emplace(key, room{std::move(spec), {}});
}

std::variant<uint32_t, failure> staging_book::writer_of(const room& r, const rank_ref& writer,
                                                        const char* what) const {
  // By place: a transfer actor names its rank without the instance
  // generation; the room itself belongs to the generation that opened it.
  for (size_t i = 0; i < r.spec.writers.size(); ++i)
    if (same_place(r.spec.writers[i].rank, writer))
      return static_cast<uint32_t>(i);
  return bad(errc::invalid_argument, std::string{what} + " from " + to_string(writer) +
                                         ", which is not a staging writer of " +
                                         to_string(r.spec.key));
}

std::optional<failure> staging_book::check_ask(const room& r, uint32_t writer,
                                               const staging_ask& a) const {
  auto room_pages = r.spec.dst_pages.size();
  if (a.pages == 0 || uint64_t{a.first_page} + a.pages > room_pages)
    return bad(errc::invalid_pages,
               "staged chunk " + std::to_string(a.chunk) + " of " + to_string(a.key) + ": pages [" +
                   std::to_string(a.first_page) + ", " +
                   std::to_string(uint64_t{a.first_page} + a.pages) + ") outside the room's " +
                   std::to_string(room_pages) + " pages");
  auto& writer_layout = r.spec.writers[writer].layout;
  auto expected = staged_bytes(writer_layout, local_, a.pages);
  if (expected == 0)
    return bad(errc::invalid_argument, "staged chunk " + std::to_string(a.chunk) + " of " +
                                           to_string(a.key) + " from " + to_string(a.writer) +
                                           ", which shares no head with " + to_string(self_));
  if (a.bytes != expected)
    return bad(errc::invalid_argument,
               "staged chunk " + std::to_string(a.chunk) + " of " + to_string(a.key) + " from " +
                   to_string(a.writer) + ": " + bytes_text(a.bytes) + ", expected " +
                   bytes_text(expected) + " for " + std::to_string(a.pages) + " pages");
  return std::nullopt;
}

std::variant<staging_grant, failure> staging_book::ask(const staging_ask& a) {
  auto i = rooms_.find(a.key);
  if (i == rooms_.end())
    return bad(errc::unknown_room, "staging space asked for " + to_string(a.key) +
                                       ", which is not open for staging here");
  auto& r = i->second;
  auto w = writer_of(r, a.writer, "staging space asked");
  if (auto* f = std::get_if<failure>(&w))
    return *f;
  auto writer = std::get<uint32_t>(w);
  if (auto f = check_ask(r, writer, a))
    return *f;
  auto c = r.chunks.find(a.chunk);
  if (c == r.chunks.end()) {
    chunk_space space;
    space.first_page = a.first_page;
    space.pages = a.pages;
    uint64_t total = 0;
    for (auto& wr : r.spec.writers) {
      space.part_offsets.push_back(total);
      total += staged_bytes(wr.layout, local_, a.pages);
    }
    auto grant = ring_.assign(total);
    if (!grant)
      return bad(errc::staging_oversized,
                 "staged chunk " + std::to_string(a.chunk) + " of " + to_string(a.key) + " (" +
                     std::to_string(a.pages) + " pages from " +
                     std::to_string(r.spec.writers.size()) + " writers) needs " +
                     bytes_text(total) + ", more than the staging ring of " +
                     bytes_text(ring_.size()) + " on " + to_string(self_) +
                     ": enlarge the ring or send smaller chunks");
    space.grant = *grant;
    c = r.chunks.emplace(a.chunk, std::move(space)).first;
  } else if (c->second.first_page != a.first_page || c->second.pages != a.pages) {
    return bad(errc::invalid_chunk, "staged chunk " + std::to_string(a.chunk) + " of " +
                                        to_string(a.key) + " from " + to_string(a.writer) +
                                        " covers pages [" + std::to_string(a.first_page) + ", +" +
                                        std::to_string(a.pages) + "), another writer's covers [" +
                                        std::to_string(c->second.first_page) + ", +" +
                                        std::to_string(c->second.pages) + ")");
  }
  auto& s = c->second;
  return staging_grant{a.key, a.chunk, s.grant.offset + s.part_offsets[writer], s.grant.end,
                       ring_.watermark()};
}

std::variant<staging_book::scatter, failure> staging_book::arrive(const chunk_landed& msg) {
  auto i = rooms_.find(msg.key);
  if (i == rooms_.end())
    return bad(errc::unknown_room, "staged chunk " + std::to_string(msg.chunk) + " of " +
                                       to_string(msg.key) + " landed, but the room is not open " +
                                       "for staging here");
  auto& r = i->second;
  auto w = writer_of(r, msg.prefill_rank, "a staged chunk landed");
  if (auto* f = std::get_if<failure>(&w))
    return *f;
  auto writer = std::get<uint32_t>(w);
  auto c = r.chunks.find(msg.chunk);
  if (c == r.chunks.end())
    return bad(errc::invalid_chunk, "staged chunk " + std::to_string(msg.chunk) + " of " +
                                        to_string(msg.key) + " from " +
                                        to_string(msg.prefill_rank) + " landed without ring space");
  auto& s = c->second;
  if (s.first_page != msg.first_page || s.pages != msg.pages)
    return bad(errc::invalid_chunk,
               "staged chunk " + std::to_string(msg.chunk) + " of " + to_string(msg.key) +
                   " landed for pages [" + std::to_string(msg.first_page) + ", +" +
                   std::to_string(msg.pages) + "), its space was granted for [" +
                   std::to_string(s.first_page) + ", +" + std::to_string(s.pages) + ")");
  if (!s.arrived.insert(writer).second)
    return bad(errc::invalid_chunk, "staged chunk " + std::to_string(msg.chunk) + " of " +
                                        to_string(msg.key) + " from " +
                                        to_string(msg.prefill_rank) + " landed twice");
  auto pages = std::span<const uint32_t>{r.spec.dst_pages}.subspan(s.first_page, s.pages);
  auto copies = plan_scatter(r.spec.writers[writer].layout, local_, pages,
                             s.first_page == 0 ? r.spec.skip_tokens : 0);
  if (!copies.ok())
    return bad(errc::invalid_pages, "scattering staged chunk " + std::to_string(msg.chunk) +
                                        " of " + to_string(msg.key) + ": " +
                                        copies.error().message());
  scatter out{s.grant.offset + s.part_offsets[writer], std::move(copies).value()};
  if (s.arrived.size() == r.spec.writers.size()) {
    ring_.release(s.grant.start);
    r.chunks.erase(c);
  }
  return out;
}

bool staging_book::close(const room_key& key) {
  auto i = rooms_.find(key);
  if (i == rooms_.end())
    return false;
  auto before = ring_.watermark();
  for (auto& [chunk, space] : i->second.chunks)
    ring_.release(space.grant.start);
  rooms_.erase(i);
  return ring_.watermark() != before;
}

}  // namespace kvferry
