// A synthetic scheduler: drives rooms through the same sender/receiver API an
// embedding scheduler uses, for every rank of one instance at once (as the TP
// ranks of a serving instance each run the same scheduling decisions). The
// prefill driver picks random free pages, writes each room's pattern into
// them on every rank (what a forward pass would compute) and sends them in
// chunks; the decode driver reserves random free pages on every rank, waits,
// and on Success checks every byte each rank holds. Both sides derive the
// rooms from one workload, and both check that all ranks of the instance
// concluded each room the same way.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "actors/facade/runtime.hpp"
#include "apps/common/host_pool.hpp"

namespace kvferry::apps {

struct run_report;

struct workload {
  uint64_t seed = 42;
  uint32_t rooms = 200;
  uint64_t first_room = 1;
  uint32_t min_tokens = 16;
  uint32_t max_tokens = 192;
  uint32_t chunk_pages = 4;  ///< pages per chunk (chunked prefill); 0 = one chunk
  uint32_t concurrency = 8;  ///< rooms in flight per side
  /// Paced arrivals (0: as fast as the window allows): room i is opened no
  /// earlier than epoch_ns + i * interval_us (system clock, shared by every
  /// process of a run), and a process that starts late skips the rooms whose
  /// time has passed, as a scheduler that joins a running cluster would.
  int64_t epoch_ns = 0;
  uint32_t interval_us = 0;
  /// Record when each rank concluded each room (run_report::conclusions).
  bool record_conclusions = false;
  /// Keep each room's latency (run_report::latencies_us): 8 bytes a room, off
  /// for a run that measures the memory a room leaves behind.
  bool record_latencies = true;
  /// Explicit room ids (a router's share of a cluster's rooms); when set they
  /// replace first_room + i and `rooms` is their count. Paced arrivals count
  /// from first_room: room id r opens at epoch_ns + (r - first_room) * interval.
  std::vector<uint64_t> ids;
  /// Called from the driving thread with the report so far (run_report::now
  /// holds the rooms in flight by state), at most every progress_period, and
  /// once at the end.
  std::function<void(const run_report&)> on_progress;
  std::chrono::milliseconds progress_period{200};
  /// Decode, a router: given a room and the prefill instance it was meant
  /// for, where to send it now (another instance while that one is known
  /// down). Rooms sent elsewhere count in run_report::rerouted.
  std::function<bootstrap_locator(uint64_t room, const bootstrap_locator& planned)> route;
  /// Prefill, as a router's other half: rooms of this driver's share are not
  /// opened while the instance is known dead (run_report::rerouted), and rooms
  /// decode ranks asked for that are not in its share (re-routed here) are
  /// opened as they come, until serve_until_ns (system clock; 0: until its own
  /// rooms are done and none was asked for during serve_grace).
  bool serve_rerouted = false;
  int64_t serve_until_ns = 0;
  std::chrono::milliseconds serve_grace{2000};
  /// A rank that came back (a restarted process) joins the work where its
  /// instance is, not where the clock says: set, the first room of the share
  /// it may open (its siblings' position: they opened every room before it).
  /// Rooms between it and the clock's position are opened at once.
  std::optional<uint32_t> resume_at;
  /// Prefill, a rank that came back: rooms of its share are opened only once
  /// a decode rank asks for them (requested_rooms), whatever the clock says.
  /// A room the decode side gave up on while this rank was away (it failed
  /// at once, for every rank still there) is never asked for, so it is never
  /// opened here to wait out its Bootstrapping deadline alone. Ends as
  /// serve_rerouted does (serve_until_ns, else serve_grace without an ask);
  /// rooms never asked for count as skipped.
  bool follow_requests = false;

  uint32_t count() const { return ids.empty() ? rooms : static_cast<uint32_t>(ids.size()); }
  uint64_t room_id(uint32_t i) const { return ids.empty() ? first_room + i : ids[i]; }
  /// The pacing slot of the i-th room of this driver.
  uint64_t slot(uint32_t i) const { return room_id(i) - first_room; }
  /// Tokens of room `room` (deterministic).
  uint32_t tokens_of(uint64_t room) const;
  /// Pages of room `room` with `page_size` tokens per page.
  uint32_t pages_of(uint64_t room, uint32_t page_size) const;
};

/// The ranks of one instance, with the pool of each (same page counts).
struct instance_ranks {
  std::vector<runtime*> ranks;
  std::vector<const host_pool*> pools;
};

/// One rank's conclusion of one room, as its scheduler saw it.
struct conclusion {
  uint64_t room = 0;
  size_t rank = 0;  ///< index into instance_ranks::ranks
  kv_poll state = kv_poll::failed;
  int64_t at_ns = 0;      ///< system clock, when the rank concluded it (its slot says)
  std::string why;        ///< the failure, "code: cause (from rank)", when Failed
  int64_t opened_ns = 0;  ///< system clock, when this scheduler opened the room
};

struct run_report {
  uint32_t rooms = 0;
  uint32_t ranks = 1;
  uint32_t success = 0;
  uint32_t failed = 0;
  uint32_t verified = 0;       ///< decode: rooms whose bytes were checked on every rank
  uint32_t corrupted = 0;      ///< decode: rooms with a byte that did not match
  uint32_t disagreements = 0;  ///< rooms whose ranks concluded differently
  uint64_t bytes = 0;          ///< KV + aux bytes of successful rooms, all ranks
  double seconds = 0;
  std::map<std::string, uint32_t> states_seen;  ///< rooms that were seen in each state
  std::map<std::string, uint32_t> failures;     ///< failure code → rooms
  std::vector<std::string> first_errors;        ///< up to 5 full errors
  std::vector<double> latencies_us;             ///< per room, open to terminal on every rank
  uint32_t skipped = 0;                         ///< paced rooms whose time passed before the start
  /// Rooms of the share opened so far, in order (the share's index of the
  /// next one): where a restarted sibling resumes (workload::resume_at).
  uint32_t opened = 0;
  /// Decode: rooms sent to another prefill instance than planned (it was
  /// down). Prefill: rooms of its share not opened while its instance was dead.
  uint32_t rerouted = 0;
  uint32_t served_for_others = 0;       ///< prefill: rooms re-routed here and opened
  std::vector<conclusion> conclusions;  ///< with workload::record_conclusions
  std::map<std::string, uint32_t> now;  ///< rooms in flight by their current state
  bool side_prefill = false;            ///< rerouted rooms were not opened here (prefill)

  double gbps() const { return seconds > 0 ? bytes / seconds / 1e9 : 0; }
  bool ok() const {
    return failed == 0 && corrupted == 0 && disagreements == 0 &&
           success + skipped + (side_prefill ? rerouted : 0) == rooms;
  }
  /// Several lines for people.
  std::string to_text(const std::string& side) const;
};

/// One report for several drivers of a side (DP groups, say): counts, bytes,
/// states and latencies summed, the longest time, the first errors (up to 5).
/// Conclusions are not carried: their rank indices are each driver's own.
run_report merged(const std::vector<run_report>& parts);

/// Runs the prefill side of the workload; returns when every room concluded.
run_report drive_prefill(const instance_ranks& inst, const workload& w);

/// Runs the decode side; `where` is the prefill instance's bootstrap.
run_report drive_decode(const instance_ranks& inst, const workload& w,
                        const bootstrap_locator& where);

/// Runs the decode side with a prefill instance chosen per room (a router
/// that spreads rooms over several prefill instances).
run_report drive_decode(const instance_ranks& inst, const workload& w,
                        const std::function<bootstrap_locator(uint64_t room)>& where_of);

}  // namespace kvferry::apps
