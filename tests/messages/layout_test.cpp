#include <catch2/catch.hpp>

#include "messages/layout.hpp"

using namespace kvferry;

namespace {

kv_layout mha(uint32_t page_size = 16, uint32_t layers = 2) {
  kv_layout l;
  l.page_size = page_size;
  l.dtype = kv_dtype::bf16;
  for (uint32_t i = 0; i < layers; ++i)
    l.layer_ids.push_back(i);
  l.total_kv_heads = 8;
  l.kv_heads = 8;
  l.head_dim = 128;
  auto item = uint64_t{page_size} * 8 * 128 * 2;
  for (uint32_t i = 0; i < 2 * layers; ++i)
    l.kv_buffers.push_back({i + 1, 0, item * 100, item});
  l.aux_buffers.push_back({99, 0, 64 * 32, 64});
  return l;
}

}  // namespace

TEST_CASE("a consistent layout validates", "[messages][layout]") {
  auto l = mha();
  CHECK_FALSE(validate(l));
  CHECK(l.page_capacity() == 100);
  CHECK(l.aux_capacity() == 32);
  CHECK(l.token_bytes() == 8 * 128 * 2);
}

TEST_CASE("validate names the field - its value and what was expected", "[messages][layout]") {
  auto l = mha();
  SECTION("item_len") {
    l.kv_buffers[1].item_len = 1000;
    auto bad = validate(l);
    REQUIRE(bad);
    CHECK_THAT(*bad, Catch::Contains("kv buffer 1 item_len 1000, expected 32768"));
  }
  SECTION("buffer count") {
    l.kv_buffers.pop_back();
    auto bad = validate(l);
    REQUIRE(bad);
    CHECK_THAT(*bad, Catch::Contains("3 kv buffers, expected 4"));
  }
  SECTION("MLA with several heads") {
    l.mla = true;
    auto bad = validate(l);
    REQUIRE(bad);
    CHECK_THAT(*bad, Catch::Contains("MLA layout with kv_heads 8, expected 1"));
  }
  SECTION("aux row too short for the room stamp") {
    l.aux_buffers[0].item_len = 8;
    auto bad = validate(l);
    REQUIRE(bad);
    CHECK_THAT(*bad, Catch::Contains("aux buffer 0 item_len 8, expected at least 16"));
  }
  SECTION("protocol version") {
    l.version = 99;
    auto bad = validate(l);
    REQUIRE(bad);
    CHECK_THAT(
        *bad, Catch::Contains("protocol version 99, expected " + std::to_string(protocol_version)));
  }
  SECTION("page size 0") {
    l.page_size = 0;
    CHECK(validate(l));
  }
}

TEST_CASE("compare names the first differing field with both values", "[messages][layout]") {
  auto p = mha(16);
  CHECK_FALSE(compare(p, mha(16)));
  CHECK(*compare(p, mha(64)) == "page_size prefill=16 decode=64");
  auto d = mha(16);
  d.dtype = kv_dtype::fp8_e4m3;
  CHECK(*compare(p, d) == "kv dtype prefill=bf16 decode=fp8_e4m3");
  d = mha(16);
  d.mla = true;
  CHECK(*compare(p, d) == "attention prefill=MHA decode=MLA");
  d = mha(16, 3);
  CHECK_FALSE(compare(p, d));  // which layers pair is the mapping's business
  d = mha(16);
  d.head_dim = 64;
  CHECK(*compare(p, d) == "head_dim prefill=128 decode=64");
  d = mha(16);
  d.aux_buffers[0].item_len = 128;
  CHECK(*compare(p, d) == "aux buffer 0 item_len prefill=64 decode=128");
  d = mha(16);
  d.version = protocol_version + 1;
  CHECK(*compare(p, d) == "protocol_version prefill=" + std::to_string(protocol_version) +
                              " decode=" + std::to_string(protocol_version + 1));
}

TEST_CASE("buffer base - length and region may differ between peers", "[messages][layout]") {
  auto p = mha(16);
  auto d = mha(16);
  for (auto& b : d.kv_buffers) {
    b.region += 40;
    b.offset = 4096;
    b.length *= 3;
  }
  CHECK_FALSE(compare(p, d));
}

TEST_CASE("dtype names round-trip", "[messages][layout]") {
  for (auto t : {kv_dtype::f32, kv_dtype::f16, kv_dtype::bf16, kv_dtype::fp8_e4m3,
                 kv_dtype::fp8_e5m2, kv_dtype::int8}) {
    auto name = to_string(t);
    REQUIRE(parse_dtype(name));
    CHECK(*parse_dtype(name) == t);
    CHECK(dtype_size(t) > 0);
  }
  CHECK_FALSE(parse_dtype("bf17"));
}

TEST_CASE("validate refuses sizes beyond the caps - naming the value and the cap",
          "[messages][layout]") {
  auto l = mha();
  auto refused = [&](const std::string& what) {
    auto bad = validate(l);
    REQUIRE(bad);
    CHECK_THAT(*bad, Catch::Contains(what));
  };
  SECTION("tp_size near 2^32 (a rank would loop ~4e9 times)") {
    l.tp_size = UINT32_MAX;
    refused("tp_size 4294967295 out of range, expected at most " + std::to_string(max_tp_size));
  }
  SECTION("pp_size") {
    l.pp_size = max_pp_size + 1;
    refused("pp_size 1025 out of range, expected at most 1024");
  }
  SECTION("tp_size x pp_size") {
    l.tp_size = 1024;
    l.pp_size = 8;
    refused("tp_size x pp_size 8192 out of range, expected at most " +
            std::to_string(max_instance_ranks));
  }
  SECTION("tp_rank and pp_rank inside their sizes") {
    l.tp_rank = 1;
    refused("rank tp1 pp0 outside tp_size 1 x pp_size 1");
    l.tp_rank = 0;
    l.pp_rank = 7;
    refused("rank tp0 pp7 outside tp_size 1 x pp_size 1");
  }
  SECTION("page_size") {
    l.page_size = max_page_size + 1;
    refused("page_size 65537 out of range, expected at most 65536");
  }
  SECTION("head counts and head width") {
    l.total_kv_heads = UINT32_MAX;
    refused("total_kv_heads 4294967295 out of range, expected at most 4096");
    l = mha();
    l.head_dim = UINT32_MAX;
    refused("head_dim 4294967295 out of range, expected at most 65536");
  }
  SECTION("layer count") {
    l.layer_ids.assign(max_layers + 1, 0);
    refused("layer count 4097 out of range, expected at most 4096");
  }
  SECTION("a layer listed twice") {
    l.layer_ids = {3, 3};
    refused("layer id 3 listed twice in layer_ids [3,3]");
  }
  SECTION("aux buffers and state components") {
    l.aux_buffers.resize(max_aux_buffers + 1, l.aux_buffers[0]);
    refused("aux buffer count 65 out of range, expected at most 64");
    l = mha();
    l.states.resize(max_states + 1);
    refused("state component count 65 out of range, expected at most 64");
  }
  SECTION("a buffer whose bytes run past 2^64") {
    l.kv_buffers[2].offset = UINT64_MAX - 10;
    refused("kv buffer 2 offset 18446744073709551605 + length 3276800 runs past 2^64 bytes");
  }
  SECTION("the largest sizes within the caps multiply without overflow") {
    l.page_size = max_page_size;
    l.total_kv_heads = max_kv_heads;
    l.kv_heads = max_kv_heads;
    l.head_dim = max_head_dim;
    l.dtype = kv_dtype::f32;
    auto item = uint64_t{max_page_size} * max_kv_heads * max_head_dim * 4;
    CHECK(item == uint64_t{1} << 46);
    for (auto& b : l.kv_buffers)
      b = {b.region, 0, item, item};
    CHECK_FALSE(validate(l));
    CHECK(uint64_t{l.page_size} * l.token_bytes() == item);
  }
}
