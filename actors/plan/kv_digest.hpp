// End-to-end KV checksums (issue 31), as pure functions over one side's
// memory: the digest of every page of a chunk, per buffer pair, over exactly
// the bytes the source writes into the destination (the heads they share, the
// tokens after a prefix decode holds). The prefill rank hashes its source
// rows before they are written, the decode rank the rows that landed, each
// with its own layout's offsets and the same order, so the two agree exactly
// when every byte arrived as it was. No I/O, no CAF.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "messages/layout.hpp"
#include "transport/status.hpp"

namespace kvferry {

/// The checksums an instance asks for: none, or XXH3-64 (libxxhash).
enum class kv_checksum : uint8_t { off = 0, xxh3 = 1 };

/// "off" or "xxh3".
std::string to_string(kv_checksum kind);

/// The kind named `name` ("off", "xxh3"); nullopt for anything else.
std::optional<kv_checksum> checksum_named(std::string_view name);

/// Which memory a digest reads: the source's rows (prefill, before the
/// writes) or the destination's (decode, after they landed).
enum class digest_side : uint8_t { source, destination };

/// The digests of one chunk from `src` into `dst`: for every buffer pair of
/// geometry_of(src, dst) (in its order) and every page of `pages` (that
/// side's page numbers, in room order), XXH3-64 of the shared heads of each
/// token row, tokens in order, from token `skip_tokens` on in the first page.
/// `bases` are that side's addresses of page 0 of each KV buffer (host
/// memory). Refuses pages outside the pool, a skip of a page or more, or two
/// ranks that share no head, naming the value.
transport::result<std::vector<uint64_t>> chunk_digests(const kv_layout& src, const kv_layout& dst,
                                                       digest_side side,
                                                       std::span<std::byte* const> bases,
                                                       std::span<const uint32_t> pages,
                                                       uint32_t skip_tokens);

/// Compares the digests a source sent (`sent`) with the ones computed over
/// what landed (`landed`, same order): nullopt when they agree; otherwise
/// names the first page and buffer that differ (`dst_pages` and `first_page`
/// place it in the room, `dst` names the buffer) or a count that differs.
std::optional<std::string> digest_mismatch(const kv_layout& src, const kv_layout& dst,
                                           std::span<const uint64_t> sent,
                                           std::span<const uint64_t> landed,
                                           std::span<const uint32_t> dst_pages,
                                           uint32_t first_page);

}  // namespace kvferry
