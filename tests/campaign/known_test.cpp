// The known-issue ledger: loading (malformed files are one clear error), matching campaign
// signatures, and re-running entries (an entry that no longer reproduces is reported stale).
#include "campaign/known_check.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/cpu.h"
#include "core/error.h"
#include "oracle/known.h"

namespace quorum::campaign {
namespace {

namespace fs = std::filesystem;

// A ledger folder with one backend's file.
std::string ledger_dir(const std::string& name, const std::string& backend, const std::string& body) {
  const fs::path d = fs::temp_directory_path() / ("quorum_known_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d / backend);
  std::ofstream(d / backend / "known_differences.json") << body;
  return d.string();
}

// relu after log: log of a negative input is the model's own NaN, which relu must keep; the planted
// relu-nan-to-zero fault swallows it.
// `fields`: more of the entry's fields, each followed by a comma.
std::string entry(const std::string& backend, const std::string& fields = "") {
  return R"({"format": "quorum.known", "backend": "faulty", "entries": [
    {"id": "faulty-relu-nan", "backend": ")" + backend + R"(", )" + fields + R"( "class": "bug",
     "signature": "nan-swallowed|FC|faulty|relu", "note": "relu turns NaN into 0",
     "case": {"mode": "infer",
              "model": {"inputs": [{"name": "x", "dtype": "float32", "shape": [1, 2]}], "outputs": ["r"],
                        "nodes": [{"name": "l", "op": "log", "inputs": ["x"], "outputs": ["l"]},
                                  {"name": "r", "op": "relu", "inputs": ["l"], "outputs": ["r"]}]},
              "inputs": {"x": {"shape": [1, 2], "data": [-1, 2]}}},
     "agreement": [{"op": "relu", "case": 3, "stage": "FC"}]}]})";
}

TEST(Known, LoadsEntriesAndMatchesSignaturesWhateverTheBackendOptions) {
  const std::string dir = ledger_dir("load", "faulty", entry("faulty:relu-nan-to-zero"));
  const oracle::Ledger l = oracle::load_ledgers(dir);
  ASSERT_EQ(l.entries.size(), 1u);
  const auto& e = l.entries[0];
  EXPECT_EQ(e.id, "faulty-relu-nan");
  EXPECT_EQ(e.cls, "bug");
  EXPECT_TRUE(e.has_case);
  EXPECT_EQ(e.model.nodes.size(), 2u);
  ASSERT_EQ(e.agreement.size(), 1u);
  EXPECT_EQ(e.agreement[0].case_index, 3);
  EXPECT_EQ(l.match("nan-swallowed|FC|faulty:relu-nan-to-zero+concat-drops-last|relu"), &e);
  EXPECT_EQ(l.match("nan-swallowed|FC|faulty|relu6"), nullptr);
  EXPECT_EQ(oracle::base_signature("crash|compile|exec:timeout=2+/bin/x|op|msg: a|b"),
            "crash|compile|exec|op|msg: a|b");
  fs::remove_all(dir);
}

// A signature or pattern whose backend field names options holds only for a backend run with them (they choose
// another library path: oneDNN's kernels for another instruction set, libtorch's other quantized engine); one
// without options holds under any (seed 13501: a oneDNN finding at the full ISA was labelled with an entry of the
// AVX2 path, whose signature named onednn:isa=avx2).
TEST(Known, ASignatureNamingBackendOptionsHoldsOnlyUnderThem) {
  const std::string dir = ledger_dir("options", "faulty", R"({"format": "quorum.known", "backend": "faulty",
    "entries": [
      {"id": "path-only", "backend": "faulty:relu-nan-to-zero", "class": "bug", "note": "n",
       "signature": "nan-swallowed|FC|faulty:relu-nan-to-zero|relu",
       "also": ["nan-swallowed|*|faulty:*relu-nan-to-zero*|relu6*"]},
      {"id": "any", "backend": "faulty", "class": "bug", "note": "n", "signature": "nan-swallowed|FC|faulty|elu",
       "also": ["nan-swallowed|*|faulty*|selu"]}]})");
  const oracle::Ledger l = oracle::load_ledgers(dir);
  ASSERT_EQ(l.entries.size(), 2u);
  const auto* path = &l.entries[0];
  const auto* any = &l.entries[1];
  EXPECT_EQ(l.match("nan-swallowed|FC|faulty:relu-nan-to-zero|relu"), path);
  EXPECT_EQ(l.match("nan-swallowed|FC|faulty|relu"), nullptr);
  EXPECT_EQ(l.match("nan-swallowed|FC|faulty:concat-drops-last|relu"), nullptr);
  EXPECT_EQ(l.match("nan-swallowed|BC|faulty:concat-drops-last+relu-nan-to-zero|relu6"), path);
  EXPECT_EQ(l.match("nan-swallowed|BC|faulty|relu6"), nullptr);
  EXPECT_EQ(l.match("nan-swallowed|FC|faulty:relu-nan-to-zero|elu"), any);
  EXPECT_EQ(l.match("nan-swallowed|FC|faulty|selu"), any);
  EXPECT_EQ(l.match("nan-swallowed|FC|faulty:relu-nan-to-zero|selu"), any);
  fs::remove_all(dir);
}

// An entry covers its root cause wherever it shows: '*' in an `also` signature matches any run of
// characters, and a pattern with `lowering` matches only findings whose node ran one of those
// library operations (the same primitive behind several operators). Exact signatures win over
// patterns, whichever entry comes first.
TEST(Known, PatternsCoverEveryOperatorBuiltOnTheSamePrimitive) {
  const std::string dir =
      ledger_dir("patterns", "onednn", R"({"format": "quorum.known", "backend": "onednn", "entries": [
    {"id": "relu-nan", "class": "convention", "signature": "nan-swallowed|FC|onednn|relu", "note": "n",
     "also": [{"signature": "nan-swallowed|FC|onednn|*", "lowering": ["eltwise_relu"]}]},
    {"id": "ge-nan", "class": "bug", "signature": "inconsistency|BC|onednn|maximum|{}", "note": "n",
     "also": [{"signature": "inconsistency|BC|onednn|*", "lowering": ["binary_ge", "binary_gt"]},
              "crash|compile|onednn||conversion failure: Blob * not found"]},
    {"id": "clip-nan", "class": "convention", "signature": "nan-swallowed|FC|onednn|clip", "note": "n",
     "also": ["nan-swallowed|FC|onednn|leaky_relu"]}]})");
  const oracle::Ledger l = oracle::load_ledgers(dir);
  ASSERT_EQ(l.entries.size(), 3u);
  EXPECT_EQ(l.match("nan-swallowed|FC|onednn|elu", {"eltwise_relu"}), &l.entries[0]);
  EXPECT_EQ(l.match("nan-swallowed|FC|onednn|elu", {"eltwise_elu"}), nullptr);
  EXPECT_EQ(l.match("nan-swallowed|FC|onednn|elu"), nullptr);
  EXPECT_EQ(l.match("inconsistency|BC|onednn|categorical_hinge|{}", {"binary_sub", "binary_gt"}), &l.entries[1]);
  EXPECT_EQ(l.match("inconsistency|FC|onednn|maximum|{}", {"binary_ge"}), nullptr);  // FC: not this pattern
  EXPECT_EQ(l.match("crash|compile|onednn:x||conversion failure: Blob t_7 not found"), &l.entries[1]);
  EXPECT_EQ(l.match("crash|compile|onednn||conversion failure: Blob t not in the net"), nullptr);
  // The exact signature of the third entry wins over the first entry's pattern.
  EXPECT_EQ(l.match("nan-swallowed|FC|onednn|leaky_relu", {"eltwise_relu"}), &l.entries[2]);
  EXPECT_EQ(l.find("ge-nan"), &l.entries[1]);
  EXPECT_EQ(l.entries[1].also[0].str(), "inconsistency|BC|onednn|*  when the node ran binary_ge or binary_gt");
  fs::remove_all(dir);
}

// A finding blamed on the reference because every library differs from the kernel alike is a
// known bug when each of those libraries has one with that signature: libtorch's float32 gelu
// backward runs oneDNN's kernel, so both are wrong the same way (campaign seed 4242424).
TEST(Known, ASharedKnownBugBlamedOnTheReferenceIsKnown) {
  const std::string dir = ledger_dir("shared", "torch", R"({"format": "quorum.known", "backend": "torch", "entries": [
    {"id": "torch-gelu", "class": "bug", "signature": "inconsistency|BC|torch|gelu|{approximate=\"none\"}", "note": "n"},
    {"id": "onednn-gelu", "backend": "onednn", "class": "bug", "signature": "inconsistency|BC|onednn|gelu|{approximate=\"none\"}", "note": "n"}]})");
  const oracle::Ledger l = oracle::load_ledgers(dir);
  oracle::Finding f;
  f.kind = oracle::Kind::Inconsistency;
  f.stage = oracle::Stage::Backward;
  f.backend = "ref";
  f.op = "gelu";
  f.params = "{approximate=\"none\"}";
  f.against = {"torch", "onednn"};
  EXPECT_EQ(l.match(f), &l.entries[0]);
  f.against = {"torch", "armnn"};  // armnn has no such entry: the reference stays suspect
  EXPECT_EQ(l.match(f), nullptr);
  fs::remove_all(dir);
}

// A reference-blamed finding is matched per library with that library's own operations for the node, so an
// entry whose pattern names a library operation (one primitive behind several operators) covers it too.
TEST(Known, AReferenceBlamedFindingIsMatchedWithEachLibrarysLowering) {
  const std::string dir = ledger_dir("shared_lowering", "onednn", R"({"format": "quorum.known", "backend": "onednn",
  "entries": [
    {"id": "onednn-max", "class": "bug", "signature": "inconsistency|FC|onednn|reduce_max|{}", "note": "n",
     "also": [{"signature": "inconsistency|FC|onednn|*", "lowering": ["reduction_max"]}]},
    {"id": "armnn-max", "backend": "armnn", "class": "bug", "signature": "inconsistency|FC|armnn|reduce_max|{}",
     "note": "n", "also": [{"signature": "inconsistency|FC|armnn|*", "lowering": ["Reduce"]}]}]})");
  const oracle::Ledger l = oracle::load_ledgers(dir);
  oracle::Finding f;
  f.kind = oracle::Kind::Inconsistency;
  f.stage = oracle::Stage::Forward;
  f.backend = "ref";
  f.op = "global_max_pool";
  f.params = "{}";
  f.against = {"onednn", "armnn"};
  EXPECT_EQ(l.match(f), nullptr);  // no lowering: the patterns do not apply
  f.against_lowering = {{"onednn", {"reduction_max"}}, {"armnn", {"Reshape", "Reduce"}}};
  EXPECT_EQ(l.match(f), &l.entries[0]);
  f.against_lowering["armnn"] = {"Pooling2d"};  // armnn ran another operation: the reference stays suspect
  EXPECT_EQ(l.match(f), nullptr);
  fs::remove_all(dir);
}

// The project's own ledgers: a root cause's other message forms match its entry (seed 6061830: the
// Mish fusion's dropped Tanh, consumed by a Sum of three, fails the Sum's parse as 'Sum of constants
// is not implemented', cut from the signature after "not impl").
TEST(Known, TheProjectsLedgersKnowEveryMessageFormOfARootCause) {
  const oracle::Ledger l = oracle::load_ledgers(oracle::default_ledger_dir());
  const oracle::KnownEntry* e = l.match(
      "crash|compile|opencv||conversion failure: OpenCV's ONNX importer refused the model: OpenCV(N) "
      "./modules/dnn/src/onnx/onnx_importer.cpp:N: error: (-N:Unspecified error) in function 'handleNode' > Node "
      "[Sum@ai.onnx]:(onnx_node!sum_N) parse error: OpenCV(N) ./modules/dnn/src/onnx/onnx_importer.cpp:N: error: "
      "(-N:The function/feature is not impl",
      {});
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->id, "opencv-mish-fusion-extra-consumer");
  // Seed 8080808: the dropped Tanh's blob missing in a Sum, the message cut after "not fo".
  const oracle::KnownEntry* cut = l.match(
      "crash|compile|opencv||conversion failure: OpenCV's ONNX importer refused the model: OpenCV(N) "
      "./modules/dnn/src/onnx/onnx_importer.cpp:N: error: (-N:Unspecified error) in function 'handleNode' > Node "
      "[Sum@ai.onnx]:(onnx_node!sum_N) parse error: OpenCV(N) ./modules/dnn/src/onnx/onnx_importer.cpp:N: error: "
      "(-N:Bad argument) Blob tanh_N not fo",
      {});
  ASSERT_NE(cut, nullptr);
  EXPECT_EQ(cut->id, "opencv-mish-fusion-extra-consumer");
  // Seed 2417: an Elu reading the dropped Tanh is added without inputs (layer.cpp's getMemoryShapes).
  const oracle::KnownEntry* elu = l.match(
      "crash|compile|opencv||conversion failure: OpenCV's ONNX importer refused the model: OpenCV(N) ./modu"
      "les/dnn/src/onnx/onnx_importer.cpp:N: error: (-N:Unspecified error) in function 'handleNode' > Node "
      "[Elu@ai.onnx]:(onnx_node!elu_N) parse error: OpenCV(N) ./modules/dnn/src/layer.cpp:N: error: (-N:Ass"
      "ertion failed) inputs.size() in function '",
      {});
  ASSERT_NE(elu, nullptr);
  EXPECT_EQ(elu->id, "opencv-mish-fusion-extra-consumer");
  // Seed 10381: a Max reading the dropped Softplus is added with one input (eltwise_layer.cpp).
  const oracle::KnownEntry* max = l.match(
      "crash|compile|opencv||conversion failure: OpenCV's ONNX importer refused the model: OpenCV(N) ./modules/dnn/"
      "src/onnx/onnx_importer.cpp:N: error: (-N:Unspecified error) in function 'handleNode' > Node [Max@ai.onnx]:("
      "onnx_node!maximum_N) parse error: OpenCV(N) ./modules/dnn/src/layers/eltwise_layer.cpp:N: error: (-N:Assertion"
      " failed) inputs.s",
      {});
  ASSERT_NE(max, nullptr);
  EXPECT_EQ(max->id, "opencv-mish-fusion-extra-consumer");
}

// An exchange form in the lowering: OpenCV's silent x*B for a square constant B is labelled only when
// the node was read in the form gemm=gemm_pretransposed, not every dense inconsistency on OpenCV.
TEST(Known, ALoweringPatternNamesTheExchangeForm) {
  const oracle::Ledger l = oracle::load_ledgers(oracle::default_ledger_dir());
  const std::string sig = "inconsistency|FC|opencv:form=gemm=gemm_pretransposed|dense|{bias=0}";
  const oracle::KnownEntry* e =
      l.match(sig, {"onnx opset 13", "onnx form gemm=gemm_pretransposed,operands=initializer"});
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->id, "opencv-gemm-const-b-transb0");
  EXPECT_EQ(l.match("inconsistency|FC|opencv|dense|{bias=0}", {"onnx opset 13", "onnx form gemm=gemm_transB"}),
            nullptr);
}

// An entry's own signature with a lowering: a signature as general as any dense inconsistency with a
// bias is OpenCV's ignored Gemm alpha and beta only where the node was read in the form gemm=gemm_scaled.
TEST(Known, AnEntrysSignatureWithALoweringIsThatEntrysOnlyInThatForm) {
  const oracle::Ledger l = oracle::load_ledgers(oracle::default_ledger_dir());
  const std::string sig = "inconsistency|FC|opencv|dense|{bias=1}";
  const oracle::KnownEntry* e = l.match(sig, {"onnx opset 13", "onnx form gemm=gemm_scaled,alpha=2,beta=4"});
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->id, "opencv-gemm-alpha-beta-ignored");
  EXPECT_EQ(l.match(sig, {"onnx opset 13", "onnx form gemm=gemm_transB"}), nullptr);
  EXPECT_EQ(l.match(sig), nullptr);
}

// A form-relation finding is the library's forward in its other exchange form: the forward entry of that form
// holds it; the same finding in a form the entry does not name is unknown.
TEST(Known, AFormRelationFindingBelongsToTheForwardEntryOfItsForm) {
  const oracle::Ledger l = oracle::load_ledgers(oracle::default_ledger_dir());
  oracle::Finding f;
  f.kind = core::FindingKind::Inconsistency;
  f.stage = core::Stage::Form;
  f.backend = "opencv";
  f.node = "dense_0";
  f.op = "dense";
  f.params = "{bias=1}";
  f.lowering = {"onnx opset 13", "onnx form gemm=gemm_scaled,alpha=2,beta=4"};
  const oracle::KnownEntry* e = l.match(f);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->id, "opencv-gemm-alpha-beta-ignored");
  f.lowering = {"onnx opset 13", "onnx form gemm=gemm_transB"};
  EXPECT_EQ(l.match(f), nullptr);
  f.stage = core::Stage::Batch;  // the batch relation's findings name their own entries
  f.lowering = {"onnx opset 13", "onnx form gemm=gemm_scaled,alpha=2,beta=4"};
  EXPECT_EQ(l.match(f), nullptr);
}

// The other form's run that fails at import is a form-relation crash: the library's compile-stage entry holds it
// (seed 9941: OpenCV's CELU matcher segfaulted on the model read with the Mul's operands in the given order).
TEST(Known, AFormRelationCrashBelongsToTheCompileEntry) {
  const oracle::Ledger l = oracle::load_ledgers(oracle::default_ledger_dir());
  oracle::Finding f;
  f.kind = core::FindingKind::Crash;
  f.stage = core::Stage::Form;
  f.backend = "opencv";
  f.message = "crash: SIGSEGV";
  const oracle::KnownEntry* e = l.match(f);
  ASSERT_NE(e, nullptr) << f.signature();
  EXPECT_EQ(e->id, "opencv-celu-fusion-import-crash");
  f.stage = core::Stage::Batch;  // the batch relation's crashes name their own entries
  EXPECT_EQ(l.match(f), nullptr);
}

TEST(Known, AMalformedLedgerIsOneClearError) {
  const std::string dir = ledger_dir("bad", "faulty", R"({"format": "quorum.known", "backend": "faulty", "entries": [
    {"id": "x", "class": "feature", "signature": "s", "note": "n"}]})");
  try {
    oracle::load_ledgers(dir);
    FAIL() << "a bad class must be rejected";
  } catch (const core::UserError& e) {
    EXPECT_NE(std::string(e.what()).find("entry 'x': class must be bug, convention or precision"), std::string::npos)
        << e.what();
  }
  fs::remove_all(dir);
}

TEST(Known, CheckReproducesAnEntryAndReportsAStaleOne) {
  // The same case on the planted fault reproduces; on the exact faulty backend it is stale (as an
  // entry becomes when a library version fixes the bug).
  const std::string dir = ledger_dir("check", "faulty", entry("faulty:relu-nan-to-zero"));
  const auto ok = check_known(oracle::load_ledgers(dir), campaign::KnownCheckOptions{});
  ASSERT_EQ(ok.size(), 1u);
  EXPECT_EQ(ok[0].status, KnownCheck::Status::Reproduces);
  const std::string stale_dir = ledger_dir("stale", "faulty", entry("faulty"));
  const auto stale = check_known(oracle::load_ledgers(stale_dir), campaign::KnownCheckOptions{});
  ASSERT_EQ(stale.size(), 1u);
  EXPECT_EQ(stale[0].status, KnownCheck::Status::Stale);
  fs::remove_all(dir);
  fs::remove_all(stale_dir);
}

// A pattern that requires flushed subnormals labels only a finding they explain, before any other pattern
// and whatever its operator; the same signature without the flag stays another entry's or unknown.
TEST(Known, ASubnormalsFlushedPatternLabelsOnlyFindingsFlushingExplains) {
  const std::string dir = ledger_dir("flushed", "faulty", R"({"format": "quorum.known", "backend": "faulty",
    "entries": [
      {"id": "any-dense", "class": "bug", "signature": "nan|FC|faulty|relu", "note": "n",
       "also": ["inconsistency|FC|faulty|*"]},
      {"id": "daz", "class": "convention", "signature": "nan|FC|faulty|sqrt", "note": "n",
       "also": [{"signature": "*|FC|faulty|*", "subnormals_flushed": true}]}]})");
  const oracle::Ledger l = oracle::load_ledgers(dir);
  oracle::Finding f;
  f.kind = oracle::Kind::Inconsistency;
  f.backend = "faulty:x";
  f.op = "dense";
  f.params = "{}";
  ASSERT_NE(l.match(f), nullptr);
  EXPECT_EQ(l.match(f)->id, "any-dense");
  f.subnormals_flushed = true;
  ASSERT_NE(l.match(f), nullptr);
  EXPECT_EQ(l.match(f)->id, "daz");
  f.backend = "torch";
  EXPECT_EQ(l.match(f), nullptr);
  const std::string bad = ledger_dir("flushed_bad", "faulty", R"({"format": "quorum.known", "backend": "faulty",
    "entries": [{"id": "daz", "class": "convention", "signature": "nan|FC|faulty|sqrt", "note": "n",
       "also": [{"signature": "*|FC|faulty|*", "subnormals_flushed": "yes"}]}]})");
  EXPECT_THROW(oracle::load_ledgers(bad), core::UserError);
  // A condition this build does not know fails loudly instead of being dropped (the pattern would cover
  // every finding of the library); so does an unknown field of an entry.
  const std::string newer = ledger_dir("flushed_newer", "faulty", R"({"format": "quorum.known", "backend": "faulty",
    "entries": [{"id": "daz", "class": "convention", "signature": "nan|FC|faulty|sqrt", "note": "n",
       "also": [{"signature": "*|FC|faulty|*", "some_future_condition": true}]}]})");
  try {
    oracle::load_ledgers(newer);
    ADD_FAILURE() << "an unknown pattern field was accepted";
  } catch (const core::UserError& e) {
    EXPECT_NE(std::string(e.what()).find("unknown field 'some_future_condition'"), std::string::npos) << e.what();
  }
  const std::string typo = ledger_dir("entry_typo", "faulty", entry("faulty", R"("needs_cpus": ["avx2"],)"));
  EXPECT_THROW(oracle::load_ledgers(typo), core::UserError);
  fs::remove_all(dir);
  fs::remove_all(bad);
  fs::remove_all(newer);
  fs::remove_all(typo);
}

TEST(Known, AnEntryThatNeedsACpuFeatureThisMachineLacksIsNotHereNotStale) {
  // The stale case again, recorded as needing a CPU feature no machine has: the library would pick
  // another implementation here, so the check names what the case needs instead of calling it fixed.
  const std::string dir = ledger_dir("nothere", "faulty", entry("faulty", R"("needs_cpu": ["quorum_no_such_flag"],)"));
  const oracle::Ledger l = oracle::load_ledgers(dir);
  ASSERT_EQ(l.entries.size(), 1u);
  EXPECT_EQ(l.entries[0].needs_cpu, std::vector<std::string>{"quorum_no_such_flag"});
  const auto c = check_known(l, campaign::KnownCheckOptions{});
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status, KnownCheck::Status::NotHere);
  EXPECT_NE(c[0].why.find("needs quorum_no_such_flag; here "), std::string::npos) << c[0].why;
  EXPECT_NE(c[0].why.find("without quorum_no_such_flag"), std::string::npos) << c[0].why;
  // A case that reproduces is Reproduces whatever it records as needed.
  const std::string ok_dir =
      ledger_dir("nothere_ok", "faulty", entry("faulty:relu-nan-to-zero", R"("needs_cpu": ["quorum_no_such_flag"],)"));
  const auto ok = check_known(oracle::load_ledgers(ok_dir), campaign::KnownCheckOptions{});
  ASSERT_EQ(ok.size(), 1u);
  EXPECT_EQ(ok[0].status, KnownCheck::Status::Reproduces);
  fs::remove_all(dir);
  fs::remove_all(ok_dir);
}

// An entry whose case shows only on CPUs without a feature (lacks_cpu: u8 x s8 pair sums saturating without
// VNNI), on a CPU with it: the check says what the case needs and what this CPU has instead of STALE, and the
// entry labels no finding here; on a CPU without the feature it labels as any entry does.
TEST(Known, AnEntryForCpusWithoutAFeatureThisMachineHasIsNotHereAndLabelsNothing) {
  if (core::cpu_flags().empty()) GTEST_SKIP() << "no CPU flags readable here";
  const std::string flag = *core::cpu_flags().begin();
  const std::string dir = ledger_dir("lacks", "faulty", entry("faulty", R"("lacks_cpu": [")" + flag + R"("],)"));
  const oracle::Ledger l = oracle::load_ledgers(dir);
  ASSERT_EQ(l.entries.size(), 1u);
  EXPECT_EQ(l.entries[0].lacks_cpu, std::vector<std::string>{flag});
  const auto c = check_known(l, campaign::KnownCheckOptions{});
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status, KnownCheck::Status::NotHere);
  EXPECT_NE(c[0].why.find("needs a CPU without " + flag + "; here "), std::string::npos) << c[0].why;
  EXPECT_NE(c[0].why.find(", with " + flag), std::string::npos) << c[0].why;
  EXPECT_EQ(l.match("nan-swallowed|FC|faulty|relu"), nullptr);
  const std::string other =
      ledger_dir("lacks_other", "faulty", entry("faulty", R"("lacks_cpu": ["quorum_no_such_flag"],)"));
  const oracle::Ledger here = oracle::load_ledgers(other);
  ASSERT_NE(here.match("nan-swallowed|FC|faulty|relu"), nullptr);
  EXPECT_EQ(here.entries[0].cpu_unmet(), "");
  fs::remove_all(dir);
  fs::remove_all(other);
}

}  // namespace
}  // namespace quorum::campaign
