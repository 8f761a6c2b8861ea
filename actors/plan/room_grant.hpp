// What a room's fence admits at its decode rank (transport/grant.hpp): the
// room's sources may write its pages of every KV buffer, its aux row of
// every aux buffer, its slots of every state component and, when a source
// is staged, the staging ring; nothing else of the rank's memory.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "messages/layout.hpp"
#include "transport/grant.hpp"

namespace kvferry {

/// The staging ring a room's staged sources write into (size 0: none).
struct granted_ring {
  uint32_t region = 0;
  uint64_t size = 0;
};

/// The grant of one room at a decode rank of layout `local`: writes from
/// `senders` (their data-plane endpoints) into `pages`, `aux_slot` (or
/// no_aux_slot), `states` (one list per state component) and `ring`.
transport::grant room_grant(const kv_layout& local, std::vector<std::string> senders,
                            std::vector<uint32_t> pages, uint32_t aux_slot,
                            const std::vector<std::vector<uint32_t>>& states, granted_ring ring);

}  // namespace kvferry
