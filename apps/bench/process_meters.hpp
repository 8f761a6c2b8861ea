// What a bench measures of its own process: CPU time and resident set.
#pragma once

#include <sys/resource.h>

namespace kvferry::bench {

/// CPU time (user + system) so far, in microseconds: of this whole process
/// (RUSAGE_SELF) or of the calling thread (RUSAGE_THREAD).
double cpu_us(int who = RUSAGE_SELF);

/// Resident set of this process now, in bytes.
double rss_bytes();

}  // namespace kvferry::bench
