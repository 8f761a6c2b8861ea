# The short commands of the README. Each installs what is missing first.
#   make demo    the main job: prefill + decode + bootstrap in one process, verified
#   make test    the test suite (ctest), as CI runs it
#   make bench   kvferry-bench suites, JSON lines
BUILD ?= build
JOBS ?= $(shell nproc)
BUILD_TYPE ?= RelWithDebInfo

.PHONY: deps configure build demo test soak bench format clean

deps:
	./deploy/install-deps.sh

configure: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE)

build: configure
	cmake --build $(BUILD) -j$(JOBS)

demo: build
	$(BUILD)/apps/kvferry-demo $(ARGS)

test: build
	cd $(BUILD) && ctest --output-on-failure -j$(JOBS) -LE soak

soak: build
	cd $(BUILD) && ctest --output-on-failure -L soak

bench: build
	$(BUILD)/apps/kvferry-bench tcp --json

format:
	git ls-files '*.cpp' '*.hpp' | xargs clang-format -i

clean:
	rm -rf $(BUILD)
