// The CPU segment copy (transport/segment_copy.hpp): staging's gather and
// scatter on the host, and the reference the CUDA kernel is checked against.
// Always built and run; needs no GPU.
#include <catch2/catch.hpp>

#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "tests/cuda/segment_shapes.hpp"
#include "transport/segment_copy.hpp"

using namespace kvferry::transport;
using kvferry::test::head_slices;
using kvferry::test::random_bytes;
using kvferry::test::random_segments;

namespace {

/// What the copy must produce, one byte at a time.
std::vector<std::byte> expected(std::vector<std::byte> dst, const std::vector<std::byte>& src,
                                const std::vector<copy_segment>& segs) {
  for (auto& s : segs)
    for (uint64_t i = 0; i < s.length; ++i)
      dst[s.dst_offset + i] = src[s.src_offset + i];
  return dst;
}

}  // namespace

TEST_CASE("segment copy: random segment lists land byte for byte", "[segment_copy]") {
  std::mt19937_64 rng{7};
  for (int round = 0; round < 20; ++round) {
    uint64_t src_size = 1 + rng() % 200000, dst_size = 1 + rng() % 200000;
    auto src = random_bytes(src_size, round);
    auto dst = random_bytes(dst_size, 1000 + round);
    auto segs = random_segments(rng, 1 + rng() % 2000, 1 + rng() % 3000, src_size, dst_size);
    auto want = expected(dst, src, segs);
    REQUIRE(copy_segments_cpu(dst, src, segs).ok());
    CHECK(dst == want);
  }
}

TEST_CASE("segment copy: a head-sliced gather then scatter gives the slice back",
          "[segment_copy]") {
  for (uint64_t ranks : {1, 2, 4, 8}) {
    head_slices shape{
        .layers = 4, .tokens = 16, .row_bytes = 4096, .ranks = ranks, .rank = ranks - 1};
    auto pool = random_bytes(shape.pool_bytes(), ranks);
    std::vector<std::byte> slot(shape.slot_bytes());
    REQUIRE(copy_segments_cpu(slot, pool, shape.gather()).ok());
    // The slot holds rank's slice of each row, rows in order.
    for (uint64_t r = 0; r < shape.rows(); ++r)
      REQUIRE(std::memcmp(slot.data() + r * shape.slice(),
                          pool.data() + r * shape.row_bytes + shape.rank * shape.slice(),
                          shape.slice()) == 0);
    std::vector<std::byte> back(shape.pool_bytes());
    REQUIRE(copy_segments_cpu(back, slot, shape.scatter()).ok());
    CHECK(back == expected(std::vector<std::byte>(shape.pool_bytes()), slot, shape.scatter()));
  }
}

TEST_CASE("segment copy: empty lists and zero lengths copy nothing", "[segment_copy]") {
  std::vector<std::byte> src(64, std::byte{1}), dst(64, std::byte{2});
  CHECK(copy_segments_cpu(dst, src, {}).ok());
  std::vector<copy_segment> zero{{64, 64, 0}, {0, 0, 0}};
  CHECK(copy_segments_cpu(dst, src, zero).ok());
  CHECK(dst == std::vector<std::byte>(64, std::byte{2}));
  CHECK(total_bytes(zero) == 0);
  std::vector<copy_segment> some{{0, 0, 10}, {5, 20, 7}};
  CHECK(total_bytes(some) == 17);
}

TEST_CASE("segment copy: a segment past the source is refused by index and size",
          "[segment_copy]") {
  std::vector<std::byte> src(4096), dst(8192, std::byte{9});
  std::vector<copy_segment> segs{{0, 0, 512}, {0, 512, 512}, {3800, 1024, 512}};
  auto st = copy_segments_cpu(dst, src, segs);
  REQUIRE_FALSE(st.ok());
  CHECK(st.error_code() == code::out_of_bounds);
  CHECK(st.message() == "copy segment 2: src_offset 3800 + length 512 past the source (4096 B)");
  // Nothing was copied: the list is checked before the first byte moves.
  CHECK(dst == std::vector<std::byte>(8192, std::byte{9}));
}

TEST_CASE("segment copy: a segment past the destination is refused by index and size",
          "[segment_copy]") {
  std::vector<std::byte> src(8192), dst(8448);
  std::vector<copy_segment> segs{{0, 0, 512}, {0, 0, 0}, {0, 0, 1}, {0, 8192, 512}};
  auto st = check_segments(segs, src.size(), dst.size());
  REQUIRE_FALSE(st.ok());
  CHECK(st.error_code() == code::out_of_bounds);
  CHECK(st.message() ==
        "copy segment 3: dst_offset 8192 + length 512 past the destination (8448 B)");
}

TEST_CASE("segment copy: offsets and lengths that overflow are refused", "[segment_copy]") {
  constexpr auto max = std::numeric_limits<uint64_t>::max();
  std::vector<std::byte> src(100), dst(100);
  auto st = copy_segments_cpu(dst, src, std::vector<copy_segment>{{max - 1, 0, 4}});
  REQUIRE_FALSE(st.ok());
  CHECK(st.message() ==
        "copy segment 0: src_offset 18446744073709551614 + length 4 past the "
        "source (100 B)");
  st = copy_segments_cpu(dst, src, std::vector<copy_segment>{{0, 0, 10}, {0, 8, max}});
  REQUIRE_FALSE(st.ok());
  CHECK(st.message() ==
        "copy segment 1: src_offset 0 + length 18446744073709551615 past the "
        "source (100 B)");
  // An offset exactly at the end with no length is in bounds.
  CHECK(check_segments(std::vector<copy_segment>{{100, 100, 0}}, 100, 100).ok());
  CHECK_FALSE(check_segments(std::vector<copy_segment>{{101, 0, 0}}, 100, 100).ok());
}
