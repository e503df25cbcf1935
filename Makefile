# Convenience wrapper around CMake. `make`, `make test`, `make demo` work on a fresh clone.
BUILD ?= build
GROVE_CUDA ?= AUTO
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=

.PHONY: all configure test demo clean asan format

all: configure
	cmake --build $(BUILD) -j $(JOBS)

# Configure once; GROVE_CUDA given on the command line (make GROVE_CUDA=OFF) reconfigures.
configure:
	@if [ ! -f $(BUILD)/CMakeCache.txt ] || [ "$(origin GROVE_CUDA)" = "command line" ]; then \
	  cmake -S . -B $(BUILD) -DGROVE_CUDA=$(GROVE_CUDA) $(CMAKE_FLAGS); fi

test: all
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

demo: all
	./$(BUILD)/grove demo

# CPU-only build with AddressSanitizer and UBSan, and its tests.
asan:
	@test -f build-asan/CMakeCache.txt || cmake -S . -B build-asan -DGROVE_CUDA=OFF -DGROVE_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo
	cmake --build build-asan -j $(JOBS)
	cd build-asan && ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure -j $(JOBS)

format:
	clang-format -i include/grove/*.h src/*/*.c src/*/*.h src/*/*.cu src/*/*.cuh tools/*.c tools/*.h tests/*.c tests/*.h bench/*.c bench/*.h bench/*.cu 2>/dev/null || true

clean:
	rm -rf $(BUILD) build-asan
