// The staging actor of a decode rank (heterogeneous TP, MHA/GQA): it owns the
// rank's staging ring, grants prefill writers space per (room, chunk),
// scatters each writer's block into the room's pages when its chunk lands,
// and sends the ring's watermark to the writers as it advances. Its logic is
// staging_book's; this actor adds the memory and the messages.
//
// Asks for a room its decode rank has not opened here yet wait (the room
// opens right before its requests go out, so they are rare and short); one
// still waiting after `ask_wait` is refused. It never blocks: a writer that
// must wait for the watermark waits on its own side.
#pragma once

#include <chrono>
#include <cstddef>
#include <map>
#include <memory>
#include <vector>

#include <caf/typed_event_based_actor.hpp>
#include <caf/typed_response_promise.hpp>

#include "actors/base/guard.hpp"
#include "actors/common/local_pool.hpp"
#include "actors/metrics/staging_figures.hpp"
#include "actors/staging/staging_book.hpp"
#include "messages/handles.hpp"

namespace kvferry {

struct staging_config {
  rank_ref self;    ///< the decode rank whose ring this is
  local_pool pool;  ///< that rank's pool: where scatters go
  std::byte* ring = nullptr;
  uint64_t ring_size = 0;
  std::chrono::milliseconds ask_wait{5000};
  /// Where it keeps its figures for Prometheus (null: none kept).
  std::shared_ptr<metrics::registry> metrics;
};

struct staging_state {
  static inline const char* name = "kvferry.staging";

  staging_config cfg;
  std::unique_ptr<staging_book> book;
  struct parked {
    staging_ask ask;
    caf::typed_response_promise<staging_grant> promise;
    caf::actor_clock::time_point since;
  };
  std::multimap<room_key, parked> waiting;  // asks for rooms not open yet
  bool sweep_armed = false;
  std::map<caf::actor_addr, transfer_actor> writers;  // to tell of the watermark
  uint64_t told = 0;                                  // the watermark they were told
  uint64_t scatters = 0;                              // writer blocks scattered (tests look)
  /// Run first inside the guard of every handler (actors/base/guard.hpp).
  handler_hook before_handler;
  std::unique_ptr<metrics::staging_figures> figures;  // with cfg.metrics
};

staging_actor::behavior_type staging(staging_actor::stateful_pointer<staging_state> self,
                                     staging_config cfg);

}  // namespace kvferry
