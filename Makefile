# The short commands of the README. Each installs what is missing first.
#   make demo    the main job: prefill + decode + bootstrap in one process, verified
#   make test    the test suite (ctest), as CI runs it
#   make bench   kvferry-bench tcp and python -m kvferry.bench, JSON lines
BUILD ?= build
JOBS ?= $(shell nproc)
BUILD_TYPE ?= RelWithDebInfo
# The interpreter the Python package is built for (Debian's; not the first on PATH).
PYTHON ?= /usr/bin/python3

.PHONY: deps configure build demo test soak bench format clean fuzz flake-hunt

deps:
	./deploy/install-deps.sh

configure: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE)

build: configure
	cmake --build $(BUILD) -j$(JOBS)

# Only what the demo needs (kvferry-demo and its libraries), not the tests.
demo: configure
	cmake --build $(BUILD) -j$(JOBS) --target kvferry-demo
	$(BUILD)/apps/kvferry-demo $(ARGS)

test: build
	cd $(BUILD) && ctest --output-on-failure -j$(JOBS) -LE soak

soak: build
	cd $(BUILD) && ctest --output-on-failure -L soak

# The tests matching REGEX (default: all of the default suite), RUNS times
# in a row beside KVFERRY_CPU_LOAD busy processes (default 2): pass counts
# per test. E.g. make flake-hunt REGEX='per_rank|storm' RUNS=50
REGEX ?= .
RUNS ?= 10
flake-hunt: build
	./tests/flake_hunt.sh $(BUILD) '$(REGEX)' $(RUNS)

bench: build
	$(BUILD)/apps/kvferry-bench tcp --json
	PYTHONPATH=$(BUILD)/python $(PYTHON) -m kvferry.bench --json \
	  --cpp-bench $(BUILD)/apps/kvferry-bench

# AFL++ (installed if missing) on each harness of tests/fuzz for FUZZ_SECONDS
# (default 60) each, built in build-fuzz-afl/: see docs/FUZZING.md.
fuzz:
	./deploy/install-deps.sh --fuzz
	./tests/fuzz/run_afl.sh

format:
	git ls-files '*.cpp' '*.hpp' | xargs clang-format -i

clean:
	rm -rf $(BUILD)

# The peers of `kvferry-bench transports` (Mooncake's transfer engine, NIXL)
# from PyPI into $(BUILD)/peers-venv: deploy/install-peers.sh. The default
# build and tests download nothing from PyPI.
.PHONY: peers
peers:
	PEERS_VENV=$(abspath $(BUILD))/peers-venv ./deploy/install-peers.sh

# kvferry as SGLang's transfer backend, checked against the real SGLang 0.5.23
# in a venv ($(BUILD)/sglang-venv; downloads sglang, torch and the packages its
# disaggregation layer imports from PyPI, a few GB): deploy/sglang-check.sh.
.PHONY: sglang-check
sglang-check: configure
	SGLANG_VENV=$(abspath $(BUILD))/sglang-venv KVFERRY_CMAKE_BUILD_DIR=$(abspath $(BUILD)) \
	  ./deploy/sglang-check.sh
