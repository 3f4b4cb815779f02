// Exchange forms (ir::OnnxForm): every seeded form of every catalogue operator, at every opset the
// exporter writes, passes the ONNX checker and shape inference (graph_to_onnx runs them), reads
// back through Quorum's importer and gives the reference the same numbers as the operator itself;
// the choice is a function of the model and the seed; python3-onnx's checker accepts every form.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>

#include <unistd.h>

#include "core/error.h"
#include "core/fileio.h"
#include "ir/build.h"
#include "ir/json_io.h"
#include "ir/onnx_io.h"
#include "ops/registry.h"
#include "ref/interpreter.h"

namespace quorum::ir {
namespace {

namespace fs = std::filesystem;
using core::DType;

// The largest difference |a-b|/(1+|a|) over the values both maps hold of `names` (NaN matches NaN).
double worst_difference(const ref::ValueMap& a, const ref::ValueMap& b, const std::vector<std::string>& names,
                        std::string& where) {
  double worst = 0;
  for (const auto& v : names) {
    const core::Tensor& x = a.at(v);
    const core::Tensor& y = b.at(v);
    if (x.shape() != y.shape()) {
      where = v + ": shape " + core::to_string(x.shape()) + " vs " + core::to_string(y.shape());
      return INFINITY;
    }
    for (int64_t i = 0; i < x.numel(); ++i) {
      const double p = x.get(i), q = y.get(i);
      if ((std::isnan(p) && std::isnan(q)) || p == q) continue;
      const double d = std::abs(p - q) / (1.0 + std::abs(p));
      if (!(d <= worst)) {
        worst = std::isnan(d) ? INFINITY : d;
        where = v + "[" + std::to_string(i) + "]: " + std::to_string(p) + " vs " + std::to_string(q);
      }
    }
  }
  return worst;
}

struct Sample {
  std::string ctx;
  SingleNode s;
};

// A few float64 single-node models of every exportable catalogue operator.
std::vector<Sample> catalogue_samples(int per_op) {
  std::vector<Sample> out;
  for (const ops::OpSpec* spec : ops::catalogue().all()) {
    if (spec->is_loss || !spec->onnx_export) continue;
    for (int k = 0; k < per_op; ++k) {
      core::Rng rng(4242 + static_cast<uint64_t>(k) * 104729 + std::hash<std::string>{}(spec->name) % 100000);
      const ops::Case c = spec->sample(rng);
      core::Rng wrng = rng.derive("weights");
      Sample s{spec->name + " case " + std::to_string(k) + " " + core::to_string(c.attrs),
               single_node_graph(*spec, c, wrng, DType::F64)};
      s.s.graph.name = spec->name + "_" + std::to_string(k);
      out.push_back(std::move(s));
    }
  }
  return out;
}

TEST(OnnxForms, EveryFormAtEveryOpsetGivesTheReferenceTheSameNumbers) {
  std::map<std::string, std::set<std::string>> seen;  // operator -> "what=form" entries
  int exported = 0;
  for (const Sample& smp : catalogue_samples(4)) {
    const Graph& g = smp.s.graph;
    const std::string op = g.nodes.at(0).op;
    const ref::ValueMap want = ref::forward(g, smp.s.inputs);
    std::vector<std::string> outs = g.outputs;
    for (int opset = kOnnxMinOpset; opset <= kOnnxMaxOpset; ++opset) {
      for (uint64_t seed = 0; seed < 24; ++seed) {
        const std::string ctx = smp.ctx + " opset " + std::to_string(opset) + " seed " + std::to_string(seed);
        OnnxExported x;
        try {
          x = graph_to_onnx(g, OnnxForm{opset, seed});
        } catch (const core::UserError& e) {
          // What the exporter cannot write at this opset it refuses for every form, the plain one too.
          EXPECT_THROW(graph_to_onnx(g, opset), core::UserError) << ctx << ": " << e.what();
          break;
        }
        ++exported;
        // The dry run names the same forms.
        EXPECT_EQ(onnx_forms(g, OnnxForm{opset, seed}).forms, x.forms) << ctx;
        for (const auto& [node, f] : x.forms) {
          std::string rest = f;
          for (size_t p = 0; p != std::string::npos;) {
            const size_t q = rest.find(',', p);
            seen[op].insert(rest.substr(p, q == std::string::npos ? q : q - p));
            p = q == std::string::npos ? q : q + 1;
          }
        }
        Graph back;
        try {
          back = graph_from_onnx(x.bytes, ctx);
        } catch (const core::UserError& e) {
          ADD_FAILURE() << ctx << " (" << x.str() << "): import failed: " << e.what();
          continue;
        }
        const ref::ValueMap got = ref::forward(back, smp.s.inputs);
        std::string where;
        // Decompositions (softmax, layer_norm, gelu's scaling) round differently in float64.
        EXPECT_LE(worst_difference(want, got, outs, where), 1e-12) << ctx << " (" << x.str() << "): " << where;
      }
    }
  }
  EXPECT_GT(exported, 1000);
  // Each kind of form is reached: flags, decompositions, defaults left out, constant operands as
  // Constant nodes, scales vs sizes.
  for (const auto& [op, form] : std::vector<std::pair<std::string, std::string>>{
           {"dense", "gemm=gemm_transB"},
           {"dense", "gemm=gemm_explicit"},
           {"dense", "gemm=matmul_add"},
           {"dense", "gemm=gemm_scaled"},
           {"dense", "alpha=2"},
           {"dense", "beta=2"},
           {"dense", "gemm=gemm_transA"},
           {"conv2d", "attrs=minimal"},
           {"softmax", "softmax=decomposed"},
           {"log_softmax", "softmax=decomposed"},
           {"layer_norm", "layer_norm=decomposed"},
           {"hardswish", "hardswish=decomposed"},
           {"reshape", "operands=constant_node"},
           {"reshape", "shape=inferred"},
           {"reshape", "shape=copy_zero"},
           {"slice", "slice=crop"},
           {"matmul", "matmul=a_vector"},
           {"matmul", "matmul=b_vector"},
           {"max_pool2d", "attrs=minimal"},
           {"add", "operands_order=swapped"},
           {"gelu", "erf_arg=mul_rsqrt2"},
           {"qlinear_add", "qlinear=qdq"},
           {"qlinear_concat", "qlinear=qdq"},
           {"qlinear_conv2d", "qlinear=qdq"},
           {"qlinear_matmul", "qlinear=qdq"},
           {"qlinear_conv2d", "qlinear=integer"},
           {"qlinear_matmul", "qlinear=integer"}})
    EXPECT_TRUE(seen[op].count(form)) << op << " never exported as " << form << ", only as" << [&] {
      std::string all;
      for (const auto& f : seen[op]) all += " " + f;
      return all;
    }();
}

// The form is a function of the model: the same graph gives the same forms and opset; another
// model name gives another seed; the plain export is form seed 0.
TEST(OnnxForms, TheChoiceIsAFunctionOfTheModel) {
  core::Rng rng(3);
  SingleNode s = single_node_graph(ops::op("dense"), ops::op("dense").sample(rng), rng);
  s.graph.name = "muffin_7";
  const OnnxForm a = seeded_form(s.graph, 11, 17), b = seeded_form(s.graph, 11, 17);
  EXPECT_EQ(a.seed, b.seed);
  EXPECT_EQ(a.opset, b.opset);
  EXPECT_NE(a.seed, 0u);
  EXPECT_GE(a.opset, 11);
  EXPECT_LE(a.opset, 17);
  EXPECT_EQ(graph_to_onnx(s.graph, a).bytes, graph_to_onnx(s.graph, b).bytes);
  EXPECT_EQ(seeded_form(s.graph, 14, 14).opset, 14);
  std::set<int> opsets;
  std::set<uint64_t> seeds;
  for (int i = 0; i < 40; ++i) {
    s.graph.name = "muffin_" + std::to_string(i);
    opsets.insert(seeded_form(s.graph, 11, 17).opset);
    seeds.insert(form_seed(s.graph));
  }
  EXPECT_EQ(opsets.size(), 7u);
  EXPECT_EQ(seeds.size(), 40u);
  EXPECT_EQ(graph_to_onnx(s.graph, OnnxForm{13, 0}).bytes, graph_to_onnx(s.graph, 13));
  // Forms an engine cannot read are not chosen: with both of a choice's forms avoided, the seeded one.
  std::set<std::string> with, without;
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    for (const auto& [n, f] : onnx_forms(s.graph, OnnxForm{13, seed, {"operands=constant_node"}}).forms) with.insert(f);
    for (const auto& [n, f] : onnx_forms(s.graph, OnnxForm{13, seed, {}}).forms) without.insert(f);
  }
  for (const auto& f : with) EXPECT_EQ(f.find("operands=constant_node"), std::string::npos) << f;
  bool seen = false;
  for (const auto& f : without) seen = seen || f.find("operands=constant_node") != std::string::npos;
  EXPECT_TRUE(seen);
  const OnnxExported x = graph_to_onnx(s.graph, OnnxForm{12, 5});
  EXPECT_EQ(x.str().rfind("opset 12; " + s.graph.nodes[0].name + " ", 0), 0u) << x.str();
}

// A dense layer (its Gemm has forms) and a relu (none), for the tests of a node's forms.
Graph dense_then_relu(const std::string& name) {
  return graph_from_json(R"({"inputs": [{"name": "x", "dtype": "float32", "shape": [2, 3]}],
    "outputs": ["y"], "initializers": [{"name": "w", "dtype": "float32", "shape": [4, 3],
    "data": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]}],
    "nodes": [{"name": "d", "op": "dense", "inputs": ["x", "w"], "outputs": ["d"], "attrs": {"units": 4, "bias": 0}},
              {"name": "y", "op": "relu", "inputs": ["d"], "outputs": ["y"]}]})",
                         name);
}

// A forced form (an execution variant running one form on purpose) is written wherever a node offers
// it, over the seeded choice, over `avoid` and under seed 0; a node without that choice is unchanged.
TEST(OnnxForms, AForcedFormWinsOverTheSeedAndAvoid) {
  const Graph g = dense_then_relu("forced");
  std::set<std::string> seeded;
  for (uint64_t seed = 0; seed <= 30; ++seed) {
    OnnxForm f{13, seed, {"gemm=gemm_pretransposed"}};
    seeded.insert(onnx_forms(g, f).forms["d"]);
    f.force = {"gemm=gemm_pretransposed"};
    const OnnxExported x = graph_to_onnx(g, f);
    EXPECT_NE(("," + x.forms.at("d") + ",").find(",gemm=gemm_pretransposed,"), std::string::npos) << x.forms.at("d");
    EXPECT_EQ(x.forms.count("y"), onnx_forms(g, OnnxForm{13, seed}).forms.count("y"));
    f.force = {"dense gemm=matmul_add"};
    const std::string d = "," + onnx_forms(g, f).forms.at("d") + ",";
    EXPECT_NE(d.find(",gemm=matmul_add,"), std::string::npos) << d;
  }
  for (const auto& f : seeded) EXPECT_EQ(f.find("gemm_pretransposed"), std::string::npos) << f;
}

// A node's recorded choices (a bundle writing the model an engine read) win over the seed, the forced
// forms and `avoid`: the export is the recorded one, byte for byte.
TEST(OnnxForms, ANodesRecordedFormsAreWrittenAgainExactly) {
  const Graph g = dense_then_relu("recorded");
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    // What an engine that avoids the pretransposed Gemm read.
    const OnnxExported read = graph_to_onnx(g, OnnxForm{13, seed, {"gemm=gemm_pretransposed"}});
    OnnxForm again{13, seed};
    again.node_forms = read.forms;
    EXPECT_EQ(graph_to_onnx(g, again).bytes, read.bytes) << read.str();
    // Recorded as pretransposed: written so, although the same seed with `avoid` never chose it.
    OnnxForm other{13, seed, {"gemm=gemm_pretransposed"}};
    other.node_forms["d"] = "gemm=gemm_pretransposed";
    EXPECT_NE(("," + onnx_forms(g, other).forms.at("d") + ",").find(",gemm=gemm_pretransposed,"), std::string::npos);
  }
}

// python3-onnx's own checker (full_check: shape inference too) on every form of every operator at
// every opset, in one interpreter.
TEST(OnnxForms, PythonOnnxCheckerAcceptsEveryForm) {
  if (std::system("/usr/bin/python3 -c 'import onnx' >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "python3-onnx is not installed";
  const fs::path dir = fs::temp_directory_path() / ("quorum_onnx_forms_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  int n = 0;
  for (const Sample& smp : catalogue_samples(2)) {
    for (int opset = kOnnxMinOpset; opset <= kOnnxMaxOpset; ++opset) {
      for (uint64_t seed = 0; seed < 4; ++seed) {
        try {
          const OnnxExported x = graph_to_onnx(smp.s.graph, OnnxForm{opset, seed + 1});
          core::write_file_atomic((dir / (std::to_string(n++) + ".onnx")).string(), x.bytes);
        } catch (const core::UserError&) {
          break;
        }
      }
    }
  }
  ASSERT_GT(n, 500);
  const std::string script =
      "import onnx, os, sys\n"
      "d = sys.argv[1]; bad = 0\n"
      "for f in sorted(os.listdir(d)):\n"
      "    try:\n"
      "        onnx.checker.check_model(onnx.load(os.path.join(d, f)), full_check=True)\n"
      "    except Exception as e:\n"
      "        bad += 1; print(f, str(e).splitlines()[0] if str(e) else e)\n"
      "print('checked', len(os.listdir(d)), 'bad', bad)\n"
      "sys.exit(1 if bad else 0)\n";
  core::write_file_atomic((dir / "check.py").string(), script);
  fs::create_directories(dir / "models");
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".onnx") fs::rename(e.path(), dir / "models" / e.path().filename());
  const std::string cmd = "/usr/bin/python3 " + (dir / "check.py").string() + " " + (dir / "models").string() +
                          " > " + (dir / "out.txt").string() + " 2>&1";
  const int rc = std::system(cmd.c_str());
  const std::string out = core::read_file((dir / "out.txt").string());
  fs::remove_all(dir);
  EXPECT_EQ(rc, 0) << out;
}

}  // namespace
}  // namespace quorum::ir
