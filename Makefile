# What users type. `make test` is what CI runs (.ci/run).
BUILD ?= build
BUILD_ASAN ?= build-asan
JOBS ?= 2
CMAKE_FLAGS ?=

FUZZ_TIME ?= 2m
FUZZ_BACKENDS ?= torch,onednn,opencv,armnn,xnnpack
FUZZ_GENERATOR ?= muffin

CONFORMANCE_BACKENDS ?= torch,onednn,opencv,armnn,xnnpack

.PHONY: all deps build test test-fast test-asan fuzz conformance calibrate bench format clean

all: build

deps:
	@bash deps/install.sh

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_FLAGS)

build: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j$(JOBS)

# Tests on the normal build, then again under AddressSanitizer + UndefinedBehaviorSanitizer
# (Quorum's own code: the library backends are left out of the sanitizer build, since the
# libraries themselves are not instrumented and their builds are slow).
test: build
	cd $(BUILD) && ctest --output-on-failure -j$(JOBS)
	$(MAKE) test-asan

test-fast: build
	cd $(BUILD) && ctest --output-on-failure -j$(JOBS)

test-asan: deps
	cmake -S . -B $(BUILD_ASAN) -DCMAKE_BUILD_TYPE=Debug -DQUORUM_SANITIZE=ON -DQUORUM_BENCH=OFF \
	  -DQUORUM_WITH_LIBRARIES=OFF $(CMAKE_FLAGS)
	cmake --build $(BUILD_ASAN) -j$(JOBS)
	cd $(BUILD_ASAN) && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 ctest --output-on-failure -j$(JOBS)

# A short real campaign on the default backends into ./campaign (resumes if it exists).
fuzz: build
	./$(BUILD)/quorum fuzz --generator $(FUZZ_GENERATOR) --backends $(FUZZ_BACKENDS) --mode both \
	  --time $(FUZZ_TIME) --out campaign

# Float32 tolerances calibrated from agreement sweeps (60 sampled cases per operator on every
# library); regenerates src/ops/calibrated_tolerances.inc, then rebuilds with it.
CALIBRATE_BACKENDS ?= torch,onednn,opencv,armnn,xnnpack
calibrate: build
	./$(BUILD)/quorum calibrate --backends $(CALIBRATE_BACKENDS) --count 60 --output src/ops/calibrated_tolerances.inc
	cmake --build $(BUILD) -j$(JOBS)

# The ONNX conformance suite on the reference and every library; regenerates docs/conformance.md.
conformance: build
	./$(BUILD)/quorum conformance --backends $(CONFORMANCE_BACKENDS) --output docs/conformance.md

bench: build
	@for b in $(BUILD)/*_bench; do [ -x "$$b" ] || continue; "$$b" || exit 1; done

format:
	clang-format -i $$(git ls-files 'src/*.cpp' 'src/*.h' 'tests/*.cpp' 'bench/*.cpp')

clean:
	rm -rf $(BUILD) $(BUILD_ASAN)
