// Standalone reproducers: for a real library bug of each library's known-issue ledger, the bundle
// its minimal case produces (`quorum known --check --out`) gives a reproducer (`quorum repro`) that
// builds and runs without Quorum, shows expected versus actual and exits 1; with the library's
// answer as the expectation it exits 0 (it does not cry wolf).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "core/fileio.h"
#include "run_quorum.h"
#include "worker/supervisor.h"

namespace quorum::report {
namespace {

namespace fs = std::filesystem;
using testing::run_quorum;

struct Ran {
  int code;
  std::string out;
};

// Runs `command` in `dir` through the shell, output captured.
Ran run_in(const fs::path& dir, const std::string& command) {
  const fs::path log = dir / "run.log";
  const std::string cmd = "cd '" + dir.string() + "' && (" + command + ") >'" + log.string() + "' 2>&1 </dev/null";
  const int status = std::system(cmd.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128, core::read_file(log.string())};
}

// Whether this build has the library's worker (the sanitizer build leaves the libraries out).
bool built(const std::string& backend) {
  const auto& b = worker::available_backends();
  return std::find(b.begin(), b.end(), backend) != b.end();
}
#define REQUIRE_BACKEND(b) \
  if (!built(b)) GTEST_SKIP() << "backend " << (b) << " is not built"

// The bundle of ledger entry `id` (run on its backend), written under a scratch folder.
fs::path ledger_bundle(const std::string& id, const std::string& backend) {
  const fs::path out = testing::scratch("repro") / id;
  fs::remove_all(out);
  const auto r =
      run_quorum("known --check --backends " + backend + " --filter " + id + " --out " + out.string(), "repro_" + id);
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  if (fs::exists(out / "bundles"))
    for (const auto& e : fs::directory_iterator(out / "bundles")) return e.path();
  ADD_FAILURE() << "no bundle written for " << id << ": " << r.out;
  return {};
}

// Writes the bundle's reproducer; returns its folder and the printed run command.
std::pair<fs::path, std::string> reproducer(const fs::path& bundle, const std::string& tag) {
  const auto r = run_quorum("repro " + bundle.string(), "repro_" + tag);
  EXPECT_EQ(r.code, 0) << r.err;
  const std::string key = "  run: cd ";
  const auto at = r.out.find(key);
  if (at == std::string::npos) {
    ADD_FAILURE() << "no reproducer written: " << r.out;
    return {};
  }
  const std::string line = r.out.substr(at + key.size(), r.out.find('\n', at) - at - key.size());
  const auto amp = line.find(" && ");
  return {fs::path(line.substr(0, amp)), line.substr(amp + 4)};
}

// The entry's reproducer exits 1 and prints the discrepancy; returns its folder.
fs::path expect_reproduces(const std::string& id, const std::string& backend, const std::string& shows) {
  const fs::path bundle = ledger_bundle(id, backend);
  if (bundle.empty()) return {};
  const auto [dir, run] = reproducer(bundle, id);
  if (dir.empty()) return {};
  const Ran ran = run_in(dir, run);
  EXPECT_EQ(ran.code, 1) << run << "\n" << ran.out;
  EXPECT_NE(ran.out.find("differ"), std::string::npos) << ran.out;
  EXPECT_NE(ran.out.find(shows), std::string::npos) << ran.out;
  // The program names where it came from and how to build it.
  std::string main;
  for (const char* m : {"repro.py", "repro.cpp"})
    if (fs::exists(dir / m)) main = core::read_file((dir / m).string());
  EXPECT_NE(main.find("Build and run: "), std::string::npos);
  EXPECT_NE(main.find("Known-issue ledger entry: " + id), std::string::npos);
  return dir;
}

TEST(Repro, OpencvSoftplusOverflowShowsInItsPythonApi) {
  REQUIRE_BACKEND("opencv");
  const fs::path dir = expect_reproduces("opencv-softplus-overflow", "opencv", "actual inf");
  ASSERT_FALSE(dir.empty());
  // With OpenCV's own answer as the expectation the same script finds nothing.
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("expected_", 0) != 0) continue;
    const std::string value = name.substr(9, name.size() - 9 - 4);
    fs::copy_file(dir.parent_path() / "outputs" / "opencv" / (value + ".npy"), e.path(),
                  fs::copy_options::overwrite_existing);
  }
  const Ran ran = run_in(dir, "/usr/bin/python3 repro.py");
  EXPECT_EQ(ran.code, 0) << ran.out;
  EXPECT_NE(ran.out.find("as expected"), std::string::npos) << ran.out;
}

// An importer bug in an exchange form OpenCV's seeded form avoids: the entry's case runs in the
// variant that forces the form (opencv:form=gemm=gemm_pretransposed), and so does its reproducer,
// whose model.onnx is that form (Gemm with a constant non-square B and transB left out): it fails at
// forward in cv2 as in Quorum's worker.
TEST(Repro, OpencvGemmWithAConstantBAndDefaultTransBShowsInItsPythonApi) {
  REQUIRE_BACKEND("opencv");
  const fs::path bundle = ledger_bundle("opencv-gemm-const-b-transb0", "opencv");
  ASSERT_FALSE(bundle.empty());
  const auto [dir, run] = reproducer(bundle, "opencv-gemm-const-b-transb0");
  ASSERT_FALSE(dir.empty());
  const Ran ran = run_in(dir, run);
  EXPECT_EQ(ran.code, 1) << ran.out;
  EXPECT_NE(ran.out.find("OpenCV failed"), std::string::npos) << ran.out;
  EXPECT_NE(ran.out.find("fully_connected_layer.cpp"), std::string::npos) << ran.out;
  const std::string py = core::read_file((dir / "repro.py").string());
  EXPECT_NE(py.find("opencv:form=gemm=gemm_pretransposed+opset=13"), std::string::npos);
}

TEST(Repro, TorchGeluBackwardShowsInPytorchsPythonApiWithAFloat64Baseline) {
  REQUIRE_BACKEND("torch");
  // A backward bug: libtorch's float32 gelu backward (oneDNN's erf kernel) on a non-contiguous
  // gradient. The script runs under Debian's python3 with python3-torch, the same 1.13 library.
  const fs::path dir = expect_reproduces("torch-gelu-backward-onednn-erf", "torch", "[decides]");
  if (!dir.empty()) {
    const std::string py = core::read_file((dir / "repro.py").string());
    EXPECT_NE(py.find("import torch"), std::string::npos);
    EXPECT_NE(py.find(".backward("), std::string::npos);
    const Ran again = run_in(dir, "/usr/bin/python3 repro.py");
    EXPECT_NE(again.out.find("torch float64"), std::string::npos)
        << "the float64 baseline in the same script: " << again.out;
  }
}

TEST(Repro, OnednnComparisonPrimitiveBehindAComposedBackwardIsNamed) {
  REQUIRE_BACKEND("onednn");
  // maximum's backward is composed of binary_ge (the mask), binary_mul and binary_sub; the program
  // checks the mask on its own, so the primitive that is wrong for NaN is the one it names.
  const fs::path dir = expect_reproduces("onednn-binary-ge-gt-nan", "onednn", "binary_ge(a, b)");
  if (!dir.empty()) {
    const std::string src = core::read_file((dir / "repro.cpp").string());
    EXPECT_NE(src.find("algorithm::binary_ge"), std::string::npos);
  }
}

TEST(Repro, XnnpackMaxPoolNanFirstShowsInItsCApi) {
  REQUIRE_BACKEND("xnnpack");
  expect_reproduces("xnnpack-maxpool-nan-first-upper-bound", "xnnpack", "expected nan, actual inf");
}

// A finding of the optimized stage (OC) gets the optimized form: only the graph output is external, so
// xnn_create_runtime_v2 merges the two clamps through the internal value and refuses the empty range it
// makes. The pinned form (the middle value external, nothing fused) runs first, beside it, and is right.
TEST(Repro, XnnpackFusedClampEmptyRangeShowsInItsOptimizedForm) {
  REQUIRE_BACKEND("xnnpack");
  const fs::path bundle = ledger_bundle("xnnpack-fused-clamp-empty-range", "xnnpack");
  ASSERT_FALSE(bundle.empty());
  const auto [dir, run] = reproducer(bundle, "xnnpack-fused-clamp-empty-range");
  ASSERT_FALSE(dir.empty());
  const Ran ran = run_in(dir, run);
  EXPECT_EQ(ran.code, 1) << ran.out;
  const auto pinned = ran.out.find("every node output external (no fusion):\ny: all 4 elements as expected");
  const auto fused = ran.out.find(
      "only the graph outputs external (XNNPACK fuses):\nxnn_create_runtime_v2 failed: xnn_status_invalid_parameter");
  EXPECT_NE(pinned, std::string::npos) << ran.out;
  EXPECT_NE(fused, std::string::npos) << ran.out;
  EXPECT_LT(pinned, fused) << ran.out;
  const std::string src = core::read_file((dir / "repro.cpp").string());
  EXPECT_NE(src.find("Known-issue ledger entry: xnnpack-fused-clamp-empty-range"), std::string::npos);
  EXPECT_NE(src.find("fused xnn_define_clamp+xnn_define_clamp (nodes 'c', 'y')"), std::string::npos) << src;
  // The middle value 'c' is an external output of the pinned form only; 'y' of both.
  auto count = [&](const std::string& what) {
    size_t n = 0;
    for (auto at = src.find(what); at != std::string::npos; at = src.find(what, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count("XNN_VALUE_FLAG_EXTERNAL_OUTPUT);  // 'c'"), 1u) << src;
  EXPECT_EQ(count("XNN_VALUE_FLAG_EXTERNAL_OUTPUT);  // 'y'"), 2u) << src;
}

TEST(Repro, ArmnnFoldPadIntoConvolutionShowsInItsCppApi) {
  REQUIRE_BACKEND("armnn");
  // Two nodes (pad with a non-zero value, then conv2d): ArmNN's optimizer folds the pad into the
  // convolution and pads with zeros.
  const fs::path dir = expect_reproduces("armnn-foldpad-conv2d-ignores-pad-value", "armnn", "elements differ");
  if (!dir.empty()) {
    const std::string src = core::read_file((dir / "repro.cpp").string());
    EXPECT_NE(src.find("AddPadLayer"), std::string::npos);
    EXPECT_NE(src.find("AddConvolution2dLayer"), std::string::npos);
  }
}

// A finding of the optimized stage (OC) gets the optimized form: only the graph output bound to an output
// layer, so Optimize may drop the layers in between. The case (campaign seed 9101's, reduced, as a one-entry
// ledger of its own): two equal transposes, one behind a relu, into maximum; with only 'm' bound the
// optimized network returns numbers from memory it never wrote, while the pinned form (every node output
// bound, built and run first in the same program) is right.
TEST(Repro, ArmnnOptimizedStageShowsInItsOptimizedForm) {
  REQUIRE_BACKEND("armnn");
  const fs::path root = testing::scratch("repro") / "armnn-oc";
  fs::remove_all(root);
  fs::create_directories(root / "ledger" / "armnn");
  std::ofstream(root / "ledger" / "armnn" / "known_differences.json") << R"({"format": "quorum.known",
    "backend": "armnn", "entries": [
    {"id": "armnn-oc-transpose-pair", "backend": "armnn", "class": "bug",
     "signature": "inconsistency|OC|armnn|maximum|fused={MoveTransposeUp, SquashEqualTransposeSiblings}",
     "note": "two equal transposes, one behind a relu, into maximum: wrong when only the output is bound",
     "case": {"mode": "infer",
              "model": {"inputs": [{"name": "x", "dtype": "float32", "shape": [1, 3, 3]}], "outputs": ["m"],
                        "nodes": [{"name": "r", "op": "relu", "inputs": ["x"], "outputs": ["r"]},
                                  {"name": "t1", "op": "transpose", "inputs": ["r"], "outputs": ["t1"],
                                   "attrs": {"perm": [0, 2, 1]}},
                                  {"name": "t2", "op": "transpose", "inputs": ["x"], "outputs": ["t2"],
                                   "attrs": {"perm": [0, 2, 1]}},
                                  {"name": "m", "op": "maximum", "inputs": ["t2", "t1"], "outputs": ["m"]}]},
              "inputs": {"x": {"shape": [1, 3, 3], "data": [-1, 2, -3, 4, -5, 6, -7, 8, -9]}}}}]})";
  const auto k = run_quorum(
      "known --check --ledger " + (root / "ledger").string() + " --out " + (root / "out").string(), "repro_armnn_oc");
  ASSERT_EQ(k.code, 0) << k.out << k.err;
  fs::path bundle;
  for (const auto& e : fs::directory_iterator(root / "out" / "bundles")) bundle = e.path();
  ASSERT_FALSE(bundle.empty()) << k.out;
  EXPECT_NE(bundle.filename().string().find("-OC-"), std::string::npos) << bundle;
  const auto [dir, run] = reproducer(bundle, "armnn-oc");
  ASSERT_FALSE(dir.empty());
  const Ran ran = run_in(dir, run);
  EXPECT_EQ(ran.code, 1) << ran.out;
  const auto pinned = ran.out.find("every node output bound (no fusion):\nm: all 9 elements as expected");
  const auto optimized = ran.out.find("only the graph outputs bound (ArmNN's Optimize folds and fuses):");
  EXPECT_NE(pinned, std::string::npos) << ran.out;
  EXPECT_NE(optimized, std::string::npos) << ran.out;
  EXPECT_LT(pinned, optimized) << ran.out;
  EXPECT_NE(ran.out.find("elements differ", optimized), std::string::npos) << ran.out;
  const std::string src = core::read_file((dir / "repro.cpp").string());
  EXPECT_NE(src.find("//   SquashEqualTransposeSiblings"), std::string::npos) << src;
  // The pinned network binds every node output ('m' last, binding id 3), the optimized one 'm' alone.
  EXPECT_NE(src.find("AddOutputLayer(3, \"m\")"), std::string::npos) << src;
  EXPECT_NE(src.find("AddOutputLayer(0, \"m\")"), std::string::npos) << src;
}

TEST(Repro, OnednnRnnDiffWeightsIterShowsInItsCppApi) {
  REQUIRE_BACKEND("onednn");
  // A backward finding: the program feeds oneDNN's own incoming gradient to vanilla_rnn_backward;
  // only the recurrent weights' gradient is wrong.
  const fs::path dir = expect_reproduces("onednn-rnn-diff-weights-iter", "onednn", "elements differ");
  if (!dir.empty()) {
    const std::string src = core::read_file((dir / "repro.cpp").string());
    EXPECT_NE(src.find("vanilla_rnn_backward"), std::string::npos);
    const Ran again = run_in(dir, "./repro");
    EXPECT_EQ(again.code, 1);
    EXPECT_NE(again.out.find("w_hh"), std::string::npos) << again.out;
  }
}

TEST(Repro, OnednnLrnBackwardCrashShowsInItsCppApi) {
  REQUIRE_BACKEND("onednn");
  // oneDNN picks its lrn_jit:avx512_core backward, which crashes, only on an AVX-512 machine.
  if (core::read_file("/proc/cpuinfo").find("avx512f") == std::string::npos) GTEST_SKIP() << "no AVX-512 here";
  const fs::path bundle = ledger_bundle("onednn-lrn-bwd-jit-avx512-crash", "onednn");
  if (bundle.empty()) return;
  // A crash names no node: the one-node case's node is the one run forward and backward.
  const auto [dir, run] = reproducer(bundle, "onednn-lrn-bwd-jit-avx512-crash");
  if (dir.empty()) return;
  const Ran ran = run_in(dir, run);
  EXPECT_NE(ran.code, 0) << ran.out;
  // The last primitive named before the crash is the one at fault.
  EXPECT_NE(ran.out.find("lrn_backward: lrn_jit:avx512_core"), std::string::npos) << ran.out;
}

TEST(Repro, OnednnExpNanToInfShowsInItsCppApi) {
  REQUIRE_BACKEND("onednn");
  expect_reproduces("onednn-exp-nan-to-inf", "onednn", "expected nan, actual inf");
}

// An optimized-stage (OC) finding: the program runs the model without post-ops (each node its own
// primitive: right) and as Quorum's optimized run compiles it, the sigmoid a logistic post-op of the
// convolution's primitive (NaN becomes 0); the exit status follows the run with post-ops.
TEST(Repro, OnednnPostOpLogisticNanToZeroShowsInItsCppApi) {
  REQUIRE_BACKEND("onednn");
  const fs::path dir = expect_reproduces("onednn-postop-logistic-nan-to-zero", "onednn", "expected nan, actual 0");
  if (!dir.empty()) {
    const std::string src = core::read_file((dir / "repro.cpp").string());
    EXPECT_NE(src.find("post_ops"), std::string::npos);
    EXPECT_NE(src.find("{algorithm::eltwise_logistic,"), std::string::npos) << "the post-op list";
    const Ran again = run_in(dir, "./repro");
    EXPECT_EQ(again.code, 1);
    EXPECT_NE(again.out.find("without post-ops"), std::string::npos) << again.out;
    EXPECT_NE(again.out.find("with post-ops (as fused"), std::string::npos) << again.out;
    EXPECT_NE(again.out.find("without them the same model is as expected"), std::string::npos) << again.out;
  }
}

// Two clip_v2 post-ops on one inner product: the second runs with the first one's bounds.
TEST(Repro, OnednnPostOpRepeatedEltwiseParamsShowsInItsCppApi) {
  REQUIRE_BACKEND("onednn");
  const fs::path dir = expect_reproduces("onednn-postop-repeated-eltwise-params", "onednn", "expected 0.1, actual 0");
  if (!dir.empty()) {
    const std::string src = core::read_file((dir / "repro.cpp").string());
    EXPECT_NE(src.find("post_ops"), std::string::npos);
    EXPECT_NE(src.find("const PostOps po_d{{algorithm::eltwise_clip_v2,"), std::string::npos) << src;
    EXPECT_NE(src.find("dense_fwd(prop_kind::forward_inference, dense_d, v_x, v_d_weight, v_d_bias, po_d)"),
              std::string::npos);
  }
}

// An optimized-stage crash in the entry's variant (onednn:isa=sse41): the run without post-ops ends, the
// pooling with a clip post-op crashes, and the last primitive it names is that pooling.
TEST(Repro, OnednnSse41PoolPostOpCrashShowsInItsCppApi) {
  REQUIRE_BACKEND("onednn");
  const fs::path bundle = ledger_bundle("onednn-sse41-pool-postop-crash", "onednn");
  if (bundle.empty()) return;
  const auto [dir, run] = reproducer(bundle, "onednn-sse41-pool-postop-crash");
  if (dir.empty()) return;
  EXPECT_NE(core::read_file((dir / "repro.cpp").string()).find("set_max_cpu_isa(dnnl::cpu_isa::sse41)"),
            std::string::npos);
  const Ran ran = run_in(dir, run);
  EXPECT_NE(ran.code, 0) << ran.out;
  EXPECT_NE(ran.out.find("the model ran to the end without post-ops"), std::string::npos) << ran.out;
  const auto fused = ran.out.find("with post-ops (as fused");
  ASSERT_NE(fused, std::string::npos) << ran.out;
  EXPECT_NE(ran.out.find("pooling_v2_forward: jit:sse41", fused), std::string::npos) << ran.out;
  EXPECT_EQ(ran.out.find("the model ran to the end with post-ops"), std::string::npos) << ran.out;
}

TEST(Repro, ExecRunnerIsRunAgainWithItsModelInputsAndExpectedOutputs) {
  // A runner that computes tanh 1.5 times too large, as a one-entry ledger whose case Quorum runs.
  const std::string runner = std::string(QUORUM_SOURCE_DIR) + "/tests/backends/exec_runners/numpy_runner.py";
  const std::string backend = "exec:/usr/bin/python3+" + runner + "+skew=Tanh";
  const fs::path root = testing::scratch("repro") / "exec";
  fs::remove_all(root);
  fs::create_directories(root / "ledger" / "exec");
  std::ofstream(root / "ledger" / "exec" / "known_differences.json")
      << R"({"format": "quorum.known", "backend": "exec", "entries": [
    {"id": "exec-tanh-skew", "backend": ")" +
             backend + R"(", "class": "bug",
     "signature": "inconsistency|FC|)" +
             backend + R"(|tanh|{}", "note": "the runner's tanh is 1.5 times too large",
     "case": {"mode": "infer",
              "model": {"inputs": [{"name": "x", "dtype": "float32", "shape": [1, 3]}], "outputs": ["y"],
                        "nodes": [{"name": "y", "op": "tanh", "inputs": ["x"], "outputs": ["y"]}]},
              "inputs": {"x": {"shape": [1, 3], "data": [-1, 0.5, 2]}}}}]})";
  const auto k = run_quorum(
      "known --check --ledger " + (root / "ledger").string() + " --out " + (root / "out").string(), "repro_exec");
  ASSERT_EQ(k.code, 0) << k.out << k.err;
  fs::path bundle;
  for (const auto& e : fs::directory_iterator(root / "out" / "bundles")) bundle = e.path();
  ASSERT_FALSE(bundle.empty());
  const auto [dir, run] = reproducer(bundle, "exec");
  ASSERT_EQ(run, "sh run.sh");
  for (const char* f : {"model.onnx", "input_0.npy", "expected_0.npy", "check.py"})
    EXPECT_TRUE(fs::exists(dir / f)) << f;
  const Ran ran = run_in(dir, run);
  EXPECT_EQ(ran.code, 1) << ran.out;
  EXPECT_NE(ran.out.find("3 of 3 elements differ"), std::string::npos) << ran.out;
  EXPECT_NE(core::read_file((dir / "run.sh").string()).find("'skew=Tanh' \"$DIR\""), std::string::npos);
}

TEST(Repro, BundleWithoutWriterSaysWhyAndHowToReplay) {
  // The faulty backend is Quorum's own: no library API to write a program in.
  const fs::path out = testing::scratch("repro") / "faulty";
  fs::remove_all(out);
  const auto c = run_quorum(
      "fuzz --generator muffin --backends faulty:softmax-no-max-sub --mode infer --models 30 --seed 7 --reduce 0 "
      "--out " +
          out.string(),
      "repro_faulty");
  ASSERT_EQ(c.code, 0) << c.err;
  fs::path bundle;
  for (const auto& e : fs::directory_iterator(out / "bundles")) bundle = e.path();
  ASSERT_FALSE(bundle.empty());
  const auto r = run_quorum("repro " + bundle.string(), "repro_faulty");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("no reproducer: no reproducer writer for backend 'faulty:softmax-no-max-sub'"),
            std::string::npos)
      << r.out;
  const std::string readme = core::read_file((bundle / "repro" / "README.txt").string());
  EXPECT_NE(readme.find("quorum replay " + bundle.string()), std::string::npos) << readme;
}

TEST(Repro, BadInputIsOneLineAndExitTwo) {
  const auto r = run_quorum("repro /nonexistent/bundle", "repro_bad");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("neither a bundle"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace quorum::report
