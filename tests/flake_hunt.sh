#!/usr/bin/env bash
# Runs the tests whose names match REGEX RUNS times in a row under extra CPU
# load, and prints how often each passed: make flake-hunt (issue 30).
#
#   tests/flake_hunt.sh BUILD_DIR REGEX RUNS
#
#   KVFERRY_CPU_LOAD  busy processes beside the tests (default 2: on a 2-core
#                     machine the tests get half of it); exported to the tests
#                     too (per_rank_test adds its own busy threads)
#   JOBS              ctest -j (default: nproc)
#   LABELS_OUT        ctest -LE (default soak: the default suite)
#
# A failing run's output is kept under BUILD_DIR/flake-hunt/run-N.log. Exits 1
# when any test failed in any run.
set -euo pipefail

if [ $# -ne 3 ]; then
  echo "usage: $0 BUILD_DIR REGEX RUNS" >&2
  exit 2
fi
build=$1 regex=$2 runs=$3
case "$runs" in '' | *[!0-9]*) echo "flake-hunt: RUNS is \"$runs\"; expected a number" >&2; exit 2 ;; esac
load=${KVFERRY_CPU_LOAD:-2}
jobs=${JOBS:-$(nproc)}
labels_out=${LABELS_OUT:-soak}
out="$build/flake-hunt"
mkdir -p "$out"
export KVFERRY_CPU_LOAD=$load

busy=()
stop_load() { [ ${#busy[@]} -eq 0 ] || kill "${busy[@]}" 2>/dev/null || true; }
trap stop_load EXIT
for ((i = 0; i < load; i++)); do
  (while :; do :; done) &
  busy+=($!)
done

declare -A passed failed
started=$(date +%s)
for ((run = 1; run <= runs; run++)); do
  log="$out/run-$run.log"
  rc=0
  (cd "$build" && ctest -R "$regex" -LE "$labels_out" -j"$jobs" --output-on-failure) >"$log" 2>&1 || rc=$?
  # "  3/12 Test  #7: name ......   Passed    1.23 sec" (or ***Failed, ***Timeout, ...)
  while IFS=$'\t' read -r verdict name; do
    if [ "$verdict" = Passed ] || [ "$verdict" = Skipped ]; then
      passed[$name]=$((${passed[$name]:-0} + 1))
    else
      failed[$name]=$((${failed[$name]:-0} + 1))
    fi
  done < <(sed -nE 's/^ *[0-9]+\/[0-9]+ Test +#[0-9]+: (.*[^ .]) \.+ *(\*+)?([A-Za-z]+).*/\3\t\1/p' "$log")
  [ "$rc" -eq 0 ] && rm -f "$log"
  echo "flake-hunt: run $run/$runs: $([ "$rc" -eq 0 ] && echo passed || echo "FAILED (kept $log)")"
done

echo "flake-hunt: $runs runs of /$regex/ with $load busy processes, $(($(date +%s) - started)) s"
printf '%-100s %7s %7s\n' test passed failed
any=0
while IFS= read -r name; do
  [ -n "$name" ] || continue
  printf '%-100s %7d %7d\n' "$name" "${passed[$name]:-0}" "${failed[$name]:-0}"
  [ "${failed[$name]:-0}" -eq 0 ] || any=1
done < <(printf '%s\n' "${!passed[@]}" "${!failed[@]}" | sort -u)
exit $any
