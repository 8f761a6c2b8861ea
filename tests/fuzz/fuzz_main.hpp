// The entry every fuzz harness of tests/fuzz/ exposes, and the main that
// drives it. A harness defines
//   int kvferry_fuzz_one(const uint8_t* data, size_t size);
// and includes this header once; it runs the real code on one input and
// aborts (fuzz_check) when an invariant breaks. The main replays every file
// it is given, or every file of the folders it is given: ctest does so with
// the seed corpora, and afl-fuzz runs it on one file per exec (`@@`) where
// the harness is built with afl-g++ (AFL++'s GCC mode, forkserver only).
// With KVFERRY_AFL_PERSISTENT (afl-g++-fast, AFL++'s gcc plugin, where it
// works) the main is AFL++'s persistent loop instead.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

/// Runs one input through the harness; returns 0 (the value is not used).
int kvferry_fuzz_one(const uint8_t* data, size_t size);

/// Aborts, naming the broken invariant: a finding (AFL++ counts a crash).
#define fuzz_check(cond, what)                                                                 \
  do {                                                                                         \
    if (!(cond)) {                                                                             \
      std::fprintf(stderr, "fuzz invariant broken: %s (%s) at %s:%d\n", what, #cond, __FILE__, \
                   __LINE__);                                                                  \
      std::abort();                                                                            \
    }                                                                                          \
  } while (false)

namespace kvferry::fuzz {

/// Replays the files (or every file of the folders) named in `argv`; fails
/// when it finds none, so that a lost corpus does not pass.
inline int replay(int argc, char** argv) {
  std::vector<std::filesystem::path> files;
  for (int i = 1; i < argc; ++i) {
    std::filesystem::path p{argv[i]};
    if (std::filesystem::is_directory(p)) {
      for (auto& e : std::filesystem::recursive_directory_iterator(p))
        if (e.is_regular_file())
          files.push_back(e.path());
    } else {
      files.push_back(p);
    }
  }
  if (files.empty()) {
    std::fprintf(stderr, "usage: %s FILE|DIR...: replays each input (no input found)\n", argv[0]);
    return 1;
  }
  for (auto& f : files) {
    std::ifstream in{f, std::ios::binary};
    if (!in) {
      std::fprintf(stderr, "%s: cannot read\n", f.c_str());
      return 1;
    }
    std::vector<uint8_t> bytes{std::istreambuf_iterator<char>{in}, {}};
    kvferry_fuzz_one(bytes.data(), bytes.size());
  }
  std::printf("replayed %zu inputs\n", files.size());
  return 0;
}

}  // namespace kvferry::fuzz

#ifdef KVFERRY_AFL_PERSISTENT
#include <unistd.h>  // __AFL_FUZZ_TESTCASE_LEN reads stdin without shared memory

__AFL_FUZZ_INIT();
#endif

int main(int argc, char** argv) {
#ifdef KVFERRY_AFL_PERSISTENT
  if (argc > 1 && !std::getenv("__AFL_SHM_ID"))
    return kvferry::fuzz::replay(argc, argv);
  __AFL_INIT();
  const uint8_t* buf = __AFL_FUZZ_TESTCASE_BUF;
  while (__AFL_LOOP(10000))
    kvferry_fuzz_one(buf, static_cast<size_t>(__AFL_FUZZ_TESTCASE_LEN));
  return 0;
#else
  return kvferry::fuzz::replay(argc, argv);
#endif
}
