#!/bin/sh
# RULE_LAUNCH_COMPILE / RULE_LAUNCH_LINK of tests/fuzz under `make fuzz`:
#   afl_cxx.sh AFL_CXX CXX ARGS...  runs AFL_CXX ARGS... (the harnesses and
# the sources they compile get AFL++'s instrumentation; the libraries they
# link keep the plain g++ of the rest of the build).
afl="$1"
shift 2
exec "$afl" "$@"
