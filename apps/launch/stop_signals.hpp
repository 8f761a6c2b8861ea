// SIGINT and SIGTERM as a serving node takes them: blocked in every thread,
// then waited for in the node's own loop, so that it stops cleanly.
#pragma once

#include <chrono>

namespace kvferry::launch {

/// Blocks SIGINT and SIGTERM in the calling thread and the threads it starts
/// afterwards: call it before the actor system starts its threads, so that a
/// serving node (no workload) takes them in its own loop and stops cleanly.
void block_stop_signals();

/// Waits up to `timeout` for SIGINT or SIGTERM (blocked by block_stop_signals());
/// true when one came.
bool took_signal(std::chrono::milliseconds timeout);

}  // namespace kvferry::launch
