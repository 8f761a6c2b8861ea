// Fuzz harness: the BASP frame reader that stands between a CAF port's socket
// and CAF (actors/process/basp_frames.cpp, called by caf_port_guard.cpp on
// every read of a CAF connection, plaintext or after TLS). The input is a cap
// (4 bytes, little-endian, taken modulo 2^20 + 1 so that small caps are
// common), a split seed (1 byte), and then the bytes of a connection.
//
// Invariants (a broken one aborts: a finding):
//   - the reader comes to the same conclusion (fault, frames, handshake)
//     whether the bytes come at once or in pieces of any size;
//   - it agrees with a reference reading of the whole stream: every header
//     before the first fault names an operation of 0-6 and declares at most
//     the cap; the first that does not is the fault;
//   - a fault is described in words, and only a fault.
#include <algorithm>
#include <cstring>

#include "actors/process/basp_frames.hpp"
#include "tests/fuzz/fuzz_main.hpp"

using namespace kvferry;

namespace {

struct reading {
  basp_frame_watch::fault fault = basp_frame_watch::fault::none;
  uint64_t frames = 0;
  bool handshake = false;
};

/// The reference: the stream read whole, header by header.
reading reference(const uint8_t* p, size_t n, uint32_t cap) {
  reading r;
  size_t at = 0;
  while (n - at >= basp_header_size) {
    uint8_t op = p[at];
    uint32_t len = (uint32_t{p[at + 4]} << 24) | (uint32_t{p[at + 5]} << 16) |
                   (uint32_t{p[at + 6]} << 8) | uint32_t{p[at + 7]};
    if (op > 6) {
      r.fault = basp_frame_watch::fault::unknown_operation;
      return r;
    }
    if (len > cap) {
      r.fault = basp_frame_watch::fault::oversized;
      return r;
    }
    at += basp_header_size;
    if (n - at < len)
      return r;  // the payload is not all in yet
    at += len;
    ++r.frames;
    if (op == 1)
      r.handshake = true;
  }
  return r;
}

reading of(const basp_frame_watch& w) {
  return {w.found(), w.frames(), w.handshake_done()};
}

bool same(const reading& a, const reading& b) {
  return a.fault == b.fault && a.frames == b.frames && a.handshake == b.handshake;
}

}  // namespace

int kvferry_fuzz_one(const uint8_t* data, size_t size) {
  if (size < 5)
    return 0;
  uint32_t raw;
  std::memcpy(&raw, data, 4);
  uint32_t cap = raw % ((1u << 20) + 1);
  uint8_t seed = data[4];
  const uint8_t* stream = data + 5;
  size_t n = size - 5;

  basp_frame_watch whole{cap};
  whole.feed(stream, n);
  basp_frame_watch pieces{cap};
  uint32_t state = seed * 2654435761u + 1;
  for (size_t at = 0; at < n;) {
    state = state * 1103515245u + 12345u;
    size_t take = std::min<size_t>(n - at, 1 + (state >> 16) % 97);
    pieces.feed(stream + at, take);
    at += take;
  }
  fuzz_check(same(of(whole), of(pieces)), "the same reading whole and in pieces");
  fuzz_check(same(of(whole), reference(stream, n, cap)), "the reference reading");
  fuzz_check(whole.describe().empty() == (whole.found() == basp_frame_watch::fault::none),
             "a fault, and only a fault, is described");
  return 0;
}
