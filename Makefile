# What users type. `make test` is what CI runs (.ci/run).
BUILD ?= build
BUILD_ASAN ?= build-asan
BUILD_FUZZ_SELF ?= build-fuzz-self
JOBS ?= 2
CMAKE_FLAGS ?=

FUZZ_TIME ?= 2m
FUZZ_BACKENDS ?= torch,onednn,opencv,armnn,xnnpack,ort
FUZZ_GENERATOR ?= muffin

CONFORMANCE_BACKENDS ?= torch,onednn,opencv,armnn,xnnpack,ort

# Quorum's own readers of untrusted input under libFuzzer (fuzz/): each harness runs this long;
# `make test` runs each for FUZZ_SELF_TEST_TIME. FUZZ_SELF_PARALLEL harnesses run at once.
FUZZ_SELF_TIME ?= 10m
FUZZ_SELF_TEST_TIME ?= 10s
FUZZ_SELF_PARALLEL ?= 1
FUZZ_SELF_HARNESSES ?= $(patsubst fuzz/%_fuzz.cpp,%,$(wildcard fuzz/*_fuzz.cpp))

.PHONY: all deps build test test-fast test-asan fuzz fuzz-self fuzz-self-build conformance calibrate bench format clean

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
# Then every libFuzzer harness of Quorum's own readers for a short time (a crash fails the test).
test: build
	cd $(BUILD) && ctest --output-on-failure -j$(JOBS)
	$(MAKE) test-asan
	$(MAKE) fuzz-self FUZZ_SELF_TIME=$(FUZZ_SELF_TEST_TIME) FUZZ_SELF_PARALLEL=2

test-fast: build
	cd $(BUILD) && ctest --output-on-failure -j$(JOBS)

# The sanitizer stage leaves out the longest campaign tests (each over 50 s under ASan, 15 minutes of the
# stage together): they run the same code as the shorter campaign tests it keeps, for their own
# campaign-level claims, which the normal stage checks. `make test-asan ASAN_SKIP=^$$` runs them all.
ASAN_SKIP_LIST := Mcts\.KeepsModelsThatRaiseCoverage BackendShare\.EveryBackendRunsAThird CampaignCoverage\.AnMcts \
  CampaignCoverage\.AResumedCampaign Detect\.APlantedSoftmaxFloor GenCli\.IndexWrites Merge\.ShardsMergedEqual \
  PostgresCampaign\.TheSlurmExampleRunsAsAJobArray PostgresCampaign\.FourShards
ASAN_SKIP ?= ^($(subst $(eval) ,|,$(strip $(ASAN_SKIP_LIST))))
test-asan: deps
	cmake -S . -B $(BUILD_ASAN) -DCMAKE_BUILD_TYPE=Debug -DQUORUM_SANITIZE=ON -DQUORUM_BENCH=OFF \
	  -DQUORUM_WITH_LIBRARIES=OFF $(CMAKE_FLAGS)
	cmake --build $(BUILD_ASAN) -j$(JOBS)
	cd $(BUILD_ASAN) && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --output-on-failure -j$(JOBS) -E '$(ASAN_SKIP)'

# The harnesses are built with clang, libFuzzer, ASan and UBSan in their own build directory (the
# library backends left out; clang's warnings do not stop it, the gcc build's -Werror is the gate);
# each runs on a scratch copy of its seed corpus fuzz/corpus/<name>/.
fuzz-self-build: deps
	cmake -S . -B $(BUILD_FUZZ_SELF) -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -gline-tables-only" -DQUORUM_FUZZ_SELF=ON -DQUORUM_WERROR=OFF \
	  -DQUORUM_TESTS=OFF -DQUORUM_BENCH=OFF -DQUORUM_WITH_LIBRARIES=OFF $(CMAKE_FLAGS)
	cmake --build $(BUILD_FUZZ_SELF) --target fuzz_self -j$(JOBS)

fuzz-self: fuzz-self-build
	bash fuzz/run.sh $(BUILD_FUZZ_SELF)/fuzz $(FUZZ_SELF_TIME) $(FUZZ_SELF_PARALLEL) $(FUZZ_SELF_HARNESSES)

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
	rm -rf $(BUILD) $(BUILD_ASAN) $(BUILD_FUZZ_SELF)
