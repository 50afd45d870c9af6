# A thin front for CMake: the README's commands. Everything else is CMake.
#   make demo      build, then run the main job on the bundled default model
#   make test      build and run the whole test suite (ctest, label `slow` excluded)
#   make sanitize  the same suite under AddressSanitizer + UBSan
#   make tsan      the threaded tests (label tsan) under ThreadSanitizer
#   make fuzz      build the libFuzzer targets with clang and run each for FUZZ_SECONDS
JOBS ?= $(shell nproc)
BUILD ?= build
CMAKE_FLAGS ?=
FUZZ_SECONDS ?= 60
TOLK = $(BUILD)/tolk

.PHONY: all deps build test sanitize tsan fuzz demo clean

all: build

deps:
	@scripts/deps.sh
	@scripts/testdata.sh
	@scripts/testenv.sh

$(BUILD)/CMakeCache.txt: | deps
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS)

build: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

test: build
	cd $(BUILD) && ctest -j $(JOBS) --output-on-failure -LE slow

sanitize: deps
	cmake -S . -B build-asan -DTOLK_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug $(CMAKE_FLAGS)
	cmake --build build-asan -j $(JOBS)
	cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest -j $(JOBS) --output-on-failure -LE 'slow|nosan'

tsan: deps
	cmake -S . -B build-tsan -DTOLK_TSAN=ON -DCMAKE_BUILD_TYPE=Debug $(CMAKE_FLAGS)
	cmake --build build-tsan -j $(JOBS)
	cd build-tsan && TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
	  ctest -j $(JOBS) --output-on-failure -L tsan

fuzz: deps
	CC=clang CXX=clang++ cmake -S . -B build-fuzz -DTOLK_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo
	cmake --build build-fuzz -j $(JOBS) --target fuzzers
	scripts/fuzz.sh build-fuzz $(FUZZ_SECONDS)

demo: build
	@scripts/demo.sh $(TOLK)

clean:
	rm -rf $(BUILD) build-asan build-tsan build-fuzz python/build
