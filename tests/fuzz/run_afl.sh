#!/usr/bin/env bash
# make fuzz: builds the harnesses of tests/fuzz with AFL++'s g++ into
# build-fuzz-afl/ and runs afl-fuzz on each for FUZZ_SECONDS (default 60),
# from its seed corpus (tests/fuzz/corpus/<harness>). Prints per harness the
# seconds run, the paths (corpus entries) it ended with and found, execs, and
# the crashes and hangs saved (under build-fuzz-afl/afl/<harness>/default/).
# Exits 1 when any harness saved a crash. FUZZ_HARNESSES="wire planner"
# runs only those.
#
# AFL++'s gcc plugin (afl-g++-fast, persistent mode) where it can build a
# program here; else afl-g++ (AFL++'s GCC mode: a fork per input). Debian's
# afl++ 4.04c plugin refuses the gcc 12.2.0-14+deb12u1 it ships beside
# ("GCC and plugin have incompatible versions"), so on Debian 12 it is
# afl-g++. Never clang: clang-built code crashes against Debian's libcaf.
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds="${FUZZ_SECONDS:-60}"
build="${FUZZ_BUILD:-build-fuzz-afl}"
read -r -a harnesses <<<"${FUZZ_HARNESSES:-layout planner cluster_file wire basp_frames}"

probe="$(mktemp -d)"
trap 'rm -rf "$probe"' EXIT
echo 'int main() { return 0; }' >"$probe/t.cpp"
cxx="" persistent=OFF
if command -v afl-g++-fast >/dev/null && afl-g++-fast "$probe/t.cpp" -o "$probe/t" >/dev/null 2>&1; then
  cxx="$(command -v afl-g++-fast)" persistent=ON
elif command -v afl-g++ >/dev/null && afl-g++ "$probe/t.cpp" -o "$probe/t" >/dev/null 2>&1; then
  cxx="$(command -v afl-g++)"
else
  echo "fuzz: neither afl-g++-fast nor afl-g++ builds a program here (deploy/install-deps.sh --fuzz)" >&2
  exit 2
fi
echo "fuzz: $cxx (persistent mode $persistent), $seconds s per harness"

cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKVFERRY_CUDA=OFF \
  -DKVFERRY_FUZZ_SANITIZE=OFF -DKVFERRY_FUZZ_AFL_CXX="$cxx" \
  -DKVFERRY_FUZZ_AFL_PERSISTENT="$persistent" >/dev/null
targets=()
for h in "${harnesses[@]}"; do targets+=("fuzz_$h"); done
cmake --build "$build" -j"${JOBS:-$(nproc)}" --target "${targets[@]}"

stat() { sed -n "s/^$1 *: *//p" "$2"; }
crashed=0
printf '\n%-13s %8s %8s %11s %10s %9s %8s %6s\n' harness seconds paths paths_found execs execs/s crashes hangs
for h in "${harnesses[@]}"; do
  out="$build/afl/$h"
  rm -rf "$out"
  mkdir -p "$out"
  AFL_SKIP_CPUFREQ=1 AFL_NO_UI=1 AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES=1 \
    timeout "$((seconds + 120))" afl-fuzz -V "$seconds" -m none -t 5000 \
    -i "tests/fuzz/corpus/$h" -o "$out" -- "$build/tests/fuzz/fuzz_$h" @@ >"$out/afl-fuzz.log" 2>&1 ||
    { echo "fuzz: afl-fuzz on $h failed, see $out/afl-fuzz.log" >&2; tail -5 "$out/afl-fuzz.log" >&2; }
  s="$out/default/fuzzer_stats"
  if [ ! -f "$s" ]; then
    printf '%-13s (no fuzzer_stats)\n' "$h"
    crashed=1
    continue
  fi
  crashes="$(stat saved_crashes "$s")"
  printf '%-13s %8s %8s %11s %10s %9s %8s %6s\n' "$h" "$(stat run_time "$s")" \
    "$(stat corpus_count "$s")" "$(stat corpus_found "$s")" "$(stat execs_done "$s")" \
    "$(stat execs_per_sec "$s")" "$crashes" "$(stat saved_hangs "$s")"
  [ "${crashes:-0}" -eq 0 ] || crashed=1
done
for h in "${harnesses[@]}"; do
  for f in "$build/afl/$h"/default/crashes/id*; do
    [ -e "$f" ] && echo "crash: $f (replay: $build/tests/fuzz/fuzz_$h $f)"
  done
done
exit "$crashed"
