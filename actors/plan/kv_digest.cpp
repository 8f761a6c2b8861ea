#include "actors/plan/kv_digest.hpp"

#include <cstdio>

#define XXH_STATIC_LINKING_ONLY  // XXH3_state_t on the stack: no allocation per chunk
#include <xxhash.h>

#include "actors/plan/planner.hpp"

namespace kvferry {

namespace {

using transport::status;

std::string hex(uint64_t v) {
  char buf[19];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

/// "layer 3 V" of buffer `b` of `x`.
std::string buffer_name(const kv_layout& x, size_t b) {
  auto layers = x.layer_ids.size();
  if (layers == 0)
    return "buffer " + std::to_string(b);
  auto layer = x.layer_ids[b % layers];
  auto kind = x.mla ? "latent" : (b >= layers ? "V" : "K");
  return "buffer " + std::to_string(b) + " (layer " + std::to_string(layer) + " " + kind + ")";
}

}  // namespace

std::string to_string(kv_checksum kind) {
  return kind == kv_checksum::xxh3 ? "xxh3" : "off";
}

std::optional<kv_checksum> checksum_named(std::string_view name) {
  if (name == "off")
    return kv_checksum::off;
  if (name == "xxh3")
    return kv_checksum::xxh3;
  return std::nullopt;
}

transport::result<std::vector<uint64_t>> chunk_digests(const kv_layout& src, const kv_layout& dst,
                                                       digest_side side,
                                                       std::span<std::byte* const> bases,
                                                       std::span<const uint32_t> pages,
                                                       uint32_t skip_tokens) {
  bool source = side == digest_side::source;
  auto& own = source ? src : dst;
  if (auto st = check_page_list(pages, own.page_capacity(), source ? "source" : "destination");
      !st.ok())
    return st;
  if (skip_tokens >= own.page_size)
    return status::invalid_argument(
        "a skip of " + std::to_string(skip_tokens) +
        " tokens of the first page, expected fewer than the page size " +
        std::to_string(own.page_size));
  if (bases.size() != own.kv_buffers.size())
    return status::invalid_argument(std::to_string(bases.size()) + " buffer addresses for " +
                                    std::to_string(own.kv_buffers.size()) + " KV buffers");
  auto g = geometry_of(src, dst);
  if (!g.ok())
    return g.error();
  auto tok = source ? g->src_tok : g->dst_tok;
  auto in_tok = source ? g->src_in_tok : g->dst_in_tok;
  std::vector<uint64_t> out;
  out.reserve(g->pairs.size() * pages.size());
  XXH3_state_t state;  // for sliced rows; a whole page is one call
  XXH3_INITSTATE(&state);
  for (auto [sb, db] : g->pairs) {
    auto b = source ? sb : db;
    auto item = own.kv_buffers[b].item_len;
    for (size_t i = 0; i < pages.size(); ++i) {
      auto page = bases[b] + uint64_t{pages[i]} * item;
      uint32_t first = i == 0 ? skip_tokens : 0;
      if (g->whole) {
        out.push_back(XXH3_64bits(page + first * tok, item - first * tok));
        continue;
      }
      XXH3_64bits_reset(&state);
      for (uint32_t t = first; t < own.page_size; ++t)
        XXH3_64bits_update(&state, page + t * tok + in_tok, g->slice_bytes);
      out.push_back(XXH3_64bits_digest(&state));
    }
  }
  return out;
}

std::optional<std::string> digest_mismatch(const kv_layout& src, const kv_layout& dst,
                                           std::span<const uint64_t> sent,
                                           std::span<const uint64_t> landed,
                                           std::span<const uint32_t> dst_pages,
                                           uint32_t first_page) {
  if (sent.size() != landed.size()) {
    auto pages = dst_pages.size();
    auto pairs = pages == 0 ? 0 : landed.size() / pages;
    return std::to_string(sent.size()) + " digests from the source, expected " +
           std::to_string(landed.size()) + " (" + std::to_string(pages) +
           (pages == 1 ? " page" : " pages") + " x " + std::to_string(pairs) + " buffers)";
  }
  auto g = geometry_of(src, dst);
  if (!g.ok() || dst_pages.empty())
    return sent.empty() ? std::nullopt : std::optional<std::string>{"digests without pages"};
  for (size_t k = 0; k < sent.size(); ++k) {
    if (sent[k] == landed[k])
      continue;
    auto pair = k / dst_pages.size();
    auto i = k % dst_pages.size();
    auto b = pair < g->pairs.size() ? g->pairs[pair].second : 0;
    return "page " + std::to_string(dst_pages[i]) + " (page " + std::to_string(first_page + i) +
           " of the room), " + buffer_name(dst, b) + ": xxh3 " + hex(landed[k]) +
           " landed, the source sent " + hex(sent[k]);
  }
  return std::nullopt;
}

}  // namespace kvferry
