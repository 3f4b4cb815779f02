// Every generator: 200 models from fixed seeds are at least 99.5 % valid (IR validation passes and
// the float64 reference runs them), the same seed gives byte-identical models, and Muffin uses every
// operator it may use. The 2 000-model validity check per generator is bench/gen_validity_bench.cpp
// (`make bench`).
#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "core/npy.h"
#include "gen/generator.h"
#include "ir/json_io.h"
#include "ops/registry.h"

namespace quorum::gen {
namespace {

constexpr uint64_t kModels = 200;  // 2 000 in bench/gen_validity_bench.cpp

std::string example(const std::string& name) { return std::string(QUORUM_SOURCE_DIR) + "/docs/examples/" + name; }

GenOptions options(const std::string& g, uint64_t seed) {
  GenOptions opt;
  opt.generator = g;
  opt.seed = seed;
  return opt;
}

// Generates `count` models, checks each, and returns the summary (printed, so that the reasons
// for any invalid model are in the test log).
Summary run(const GenOptions& opt, const std::string& dataset, uint64_t count) {
  const auto source = data::open_source(dataset);
  Stream stream(opt, *source);
  Summary s;
  for (uint64_t i = 0; i < count; ++i) {
    Generated g = stream.next();
    s.add(g, check_model(g.graph, g.inputs));
  }
  std::cout << "[" << opt.generator << ", " << dataset << "]\n" << s.text(stream.generator().operators());
  return s;
}

void expect_valid(const Summary& s, uint64_t count) {
  ASSERT_EQ(s.models, count);
  EXPECT_GE(static_cast<double>(s.valid), 0.995 * static_cast<double>(count));
  for (const auto& [reason, n] : s.invalid) ADD_FAILURE() << n << " invalid: " << reason;  // explained, and
  // counted: any invalid model is a builder bug worth a look, even under the 0.5 % allowance.
}

class Validity : public ::testing::TestWithParam<std::string> {};

TEST_P(Validity, ModelsAreValid) { expect_valid(run(options(GetParam(), 20240601), "random", kModels), kModels); }

INSTANTIATE_TEST_SUITE_P(Generators, Validity, ::testing::Values("muffin", "unit", "ws", "rn", "mutate", "mcts", "zoo"),
                         [](const auto& info) { return info.param; });

TEST(Validity, MutantsOfImportedModelsAreValid) {
  GenOptions opt = options("mutate", 5);
  opt.seed_models = {ir::load_graph(example("lenet5.json")), ir::load_graph(example("residual_small.json"))};
  opt.mutation_rate = 0.2;
  expect_valid(run(opt, "random", kModels / 4), kModels / 4);
}

TEST(Validity, RealDataSetsGiveValidModels) {
  for (const char* g : {"muffin", "zoo", "unit", "rn"}) {
    expect_valid(run(options(g, 11), "sine", kModels / 20), kModels / 20);
    if (std::filesystem::exists(data::fashion_mnist_dir()))
      expect_valid(run(options(g, 12), "fashion-mnist", kModels / 20), kModels / 20);
  }
}

TEST(Zoo, InvalidParametersAreRejectedByOurOwnValidation) {
  GenOptions opt = options("zoo", 3);
  opt.invalid_params = true;
  const Summary s = run(opt, "random", kModels / 10);
  EXPECT_EQ(s.by_design, kModels / 10);
  EXPECT_EQ(s.by_design_rejected, s.by_design) << "a deliberately invalid value passed Quorum's own validation";
}

// ---- reproducibility ----------------------------------------------------------------------------

std::vector<std::string> files_of(const GenOptions& opt, uint64_t count) {
  const auto source = data::open_source("random");
  Stream stream(opt, *source);
  std::vector<std::string> out;
  for (uint64_t i = 0; i < count; ++i) {
    Generated g = stream.next();
    std::string bytes = ir::graph_to_json(g.graph);
    for (const auto& [name, t] : g.inputs) bytes += name + core::npy_bytes(t);
    if (g.target.defined()) bytes += core::npy_bytes(g.target);
    out.push_back(std::move(bytes));
  }
  return out;
}

TEST(Reproducibility, SameSeedGivesByteIdenticalModels) {
  for (const auto& g : generator_names()) {
    const auto a = files_of(options(g, 99), 40), b = files_of(options(g, 99), 40);
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i], b[i]) << g << " model " << i;
    const auto c = files_of(options(g, 100), 40);
    EXPECT_NE(a, c) << g << ": another seed should give other models";
  }
}

TEST(Reproducibility, WeightsAndDataDoNotChangeTheArchitecture) {
  const auto source = data::open_source("random");
  Stream fast(options("muffin", 4), *source), full(options("muffin", 4), *source);
  for (int i = 0; i < 50; ++i) {
    const Model m = fast.next_architecture();
    const Generated g = full.next();
    EXPECT_EQ(m.graph.nodes, g.graph.nodes);
    EXPECT_EQ(m.graph.inputs, g.graph.inputs);
  }
}

// ---- coverage ---------------------------------------------------------------------------------

std::set<std::string> used_ops(const GenOptions& opt, uint64_t count) {
  const auto source = data::open_source("random");
  Stream stream(opt, *source);
  std::set<std::string> used;
  for (uint64_t i = 0; i < count; ++i)
    for (const auto& n : stream.next_architecture().graph.nodes) used.insert(n.op);
  return used;
}

TEST(Coverage, MuffinUsesEveryOperatorItMayUse) {
  const auto source = data::open_source("random");
  const auto universe = make_generator(options("muffin", 1), *source)->operators();
  // Every catalogue operator but the losses, which training applies on top of a model, and the quantized
  // ones, which only quantized models hold.
  size_t losses = 0;
  for (const ops::OpSpec* s : ops::catalogue().all()) losses += s->is_loss || s->is_quantized ? 1 : 0;
  EXPECT_EQ(universe.size() + losses, ops::catalogue().all().size());
  const auto used = used_ops(options("muffin", 20240601), 2000);
  for (const auto& op : universe) EXPECT_TRUE(used.count(op)) << op << " never used in 2000 muffin models";
}

TEST(Coverage, GraphGeneratorsUseEveryOperator) {
  for (const char* g : {"ws", "rn"}) {
    const auto source = data::open_source("random");
    const auto universe = make_generator(options(g, 1), *source)->operators();
    const auto used = used_ops(options(g, 8), 1000);
    for (const auto& op : universe) EXPECT_TRUE(used.count(op)) << g << ": " << op;
  }
}

// The corpus's matmul weight is sometimes a stack [..., K, H] whose leading dimensions broadcast against the
// operand's batch dimensions (ONNX MatMul with a constant operand of rank 3 or 4).
TEST(Coverage, GraphGeneratorsDrawStackedMatmulWeights) {
  const auto source = data::open_source("random");
  int stacked = 0, flat = 0;
  // Several seeds: a matmul on an operand of rank 3 or more is rare in rn's graphs, and one seed's count
  // moves whenever the catalogue grows.
  for (uint64_t seed = 8; seed <= 13; ++seed) {
    Stream stream(options("rn", seed), *source);
    for (uint64_t i = 0; i < 600; ++i) {
      const ir::Graph g = stream.next().graph;
      for (const auto& n : g.nodes)
        if (n.op == "matmul" && g.is_initializer(n.inputs[1]))
          ++(g.initializers.at(n.inputs[1]).shape().size() > 2 ? stacked : flat);
    }
  }
  EXPECT_GT(stacked, 0) << flat << " rank-2 weights";
  EXPECT_GT(flat, stacked);
}

TEST(Coverage, UnitCyclesTheCatalogue) {
  const auto source = data::open_source("random");
  Stream stream(options("unit", 1), *source);
  const auto all = ops::catalogue().all();
  for (const ops::OpSpec* s : all) {
    if (s->is_quantized) continue;
    const Model m = stream.next_architecture();
    ASSERT_EQ(m.graph.nodes.size(), 1u);
    EXPECT_EQ(m.graph.nodes[0].op, s->name);
  }
}

TEST(Coverage, UnitReachesEveryChoiceOfEveryEnumeration) {
  const auto source = data::open_source("random");
  Stream stream(options("unit", 1), *source);
  const auto all = ops::catalogue().all();
  std::map<std::string, std::set<std::string>> seen;  // "op.attr" -> values
  for (size_t i = 0; i < all.size() * 40; ++i) {  // (3/4)^40: a 4-way choice is missed once in 10^5
    const Model m = stream.next_architecture();
    for (const auto& [k, v] : m.graph.nodes[0].attrs) seen[m.graph.nodes[0].op + "." + k].insert(core::to_string(v));
  }
  for (const ops::OpSpec* s : all)
    for (const auto& a : s->attrs)
      for (const auto& c : a.choices)
        EXPECT_TRUE(s->is_quantized || seen[s->name + "." + a.name].count(core::to_string(c)))
            << s->name << "." << a.name << " = " << core::to_string(c) << " never generated";
}

// ---- generators' own shapes -------------------------------------------------------------------

TEST(Zoo, PublishedArchitecturesComeFirst) {
  const auto source = data::open_source("random");
  Stream stream(options("zoo", 1), *source);
  std::map<std::string, std::map<std::string, int>> ops;  // architecture -> op -> count
  for (int i = 0; i < 7; ++i) {
    const Model m = stream.next_architecture();
    const std::string arch = m.graph.name.substr(0, m.graph.name.rfind('_'));
    for (const auto& n : m.graph.nodes) ++ops[arch][n.op];
  }
  EXPECT_EQ(ops["lenet5"]["conv2d"], 2);
  EXPECT_EQ(ops["lenet5"]["dense"], 3);
  EXPECT_EQ(ops["resnet20"]["conv2d"], 19 + 2);  // 19 + the two projection shortcuts
  EXPECT_EQ(ops["resnet20"]["add"], 9);
  EXPECT_EQ(ops["vgg16"]["conv2d"], 13);
  EXPECT_EQ(ops["vgg16"]["dense"], 3);
  EXPECT_EQ(ops["vgg16"]["max_pool2d"], 5);
  EXPECT_EQ(ops["mobilenet_v2"]["conv2d"], 1 + 16 * 3 + 2 + 1);  // stem, 16 expanding blocks, 1 without, last
  EXPECT_EQ(ops["simple_rnn"]["simple_rnn"], 2);
  EXPECT_EQ(ops["lstm"]["lstm"], 2);
  EXPECT_EQ(ops["gru"]["gru"], 2);
}

TEST(Muffin, OneInputOneOutputAndTheTaskHead) {
  const auto source = data::open_source("random");
  Stream stream(options("muffin", 2), *source);
  for (int i = 0; i < 200; ++i) {
    const Model m = stream.next_architecture();
    ASSERT_EQ(m.graph.inputs.size(), 1u);
    ASSERT_EQ(m.graph.outputs.size(), 1u);
    EXPECT_EQ(m.graph.inputs[0].type.shape, m.data.input);
    const auto& out = m.graph.types.at(m.graph.outputs[0]).shape;
    EXPECT_EQ(out, m.data.target) << m.graph.name;
    if (m.data.task == data::Task::Classification) {
      EXPECT_EQ(m.graph.nodes.back().op, "softmax");
    }
  }
}

TEST(Mutate, KeepsWeightsOfUntouchedNodes) {
  GenOptions opt = options("mutate", 6);
  opt.seed_models = {ir::load_graph(example("lenet5.json"))};
  opt.mutation_rate = 0.0;  // ceil(E*0) = 0 edges, no node chosen: only TSM and PM can change anything
  const auto source = data::open_source("random");
  Stream stream(opt, *source);
  const ir::Graph seed = ir::load_graph(example("lenet5.json"));
  std::set<std::string> seed_weights;
  for (const auto& [name, t] : seed.initializers)
    seed_weights.insert(std::string(static_cast<const char*>(t.raw()), t.nbytes()));
  int kept = 0;
  for (int i = 0; i < 20; ++i) {
    const Generated g = stream.next();
    for (const auto& [name, t] : g.graph.initializers)
      kept += seed_weights.count(std::string(static_cast<const char*>(t.raw()), t.nbytes())) ? 1 : 0;
  }
  EXPECT_GT(kept, 20 * 3);  // most of LeNet's ten weights survive a mutation at rate 0
}

TEST(Generators, UnknownNameAndBadRateAreUserErrors) {
  const auto source = data::open_source("random");
  EXPECT_THROW(make_generator(options("nope", 1), *source), core::UserError);
  GenOptions opt = options("mutate", 1);
  opt.mutation_rate = 1.0;
  EXPECT_THROW(make_generator(opt, *source), core::UserError);
}

// --ops / --skip_ops: no model holds an operator left out, whichever generator; the allowed ones
// are still used; a model whose glue needs a skipped operator is drawn again.
TEST(Generators, OpsAndSkipOpsRestrictEveryGenerator) {
  for (const char* g : {"muffin", "unit", "ws", "rn", "mutate"}) {
    GenOptions opt = options(g, 11);
    opt.skip_ops = {"gelu", "lstm", "gru", "simple_rnn", "conv2d", "resize_nearest"};
    const Summary s = run(opt, "random", 40);
    for (const auto& op : opt.skip_ops) EXPECT_EQ(s.op_nodes.count(op), 0u) << g << " placed " << op;
    EXPECT_GT(s.op_nodes.size(), 3u) << g;
  }
  GenOptions only = options("unit", 2);
  only.only_ops = {"relu", "softmax"};
  const Summary u = run(only, "random", 10);
  EXPECT_EQ(u.op_nodes.size(), 2u);
  EXPECT_EQ(u.op_nodes.count("relu") + u.op_nodes.count("softmax"), 2u);
  // The zoo's architectures are fixed: one holding a skipped operator is invalid, saying why.
  GenOptions zoo = options("zoo", 1);
  zoo.skip_ops = {"conv2d"};
  const auto zoo_source = data::open_source("random");
  Stream stream(zoo, *zoo_source);
  try {
    stream.next();
    ADD_FAILURE() << "LeNet-5 holds conv2d";
  } catch (const core::UserError& e) {
    EXPECT_NE(std::string(e.what()).find("holds operator 'conv2d'"), std::string::npos) << e.what();
  }
  GenOptions bad = options("muffin", 1);
  bad.only_ops = {"relu", "LSTM"};
  const auto source = data::open_source("random");
  EXPECT_THROW(make_generator(bad, *source), core::UserError);
}

// --dtype int8 with --ops naming only a quantized operator: its models hold the quantize_linear that makes each
// quantized operand, which --ops need not name (every model was drawn again, and a campaign ran its whole budget
// with no model); --skip_ops cannot leave the boundaries out.
TEST(Generators, QuantizedModelsKeepTheirBoundariesUnderOps) {
  GenOptions opt = options("unit", 7);
  opt.quantized = true;
  opt.only_ops = {"qlinear_add"};
  const Summary s = run(opt, "random", 6);
  EXPECT_GT(s.op_nodes.count("qlinear_add"), 0u);
  EXPECT_GT(s.op_nodes.count("quantize_linear"), 0u);
  EXPECT_EQ(s.op_nodes.size(), 2u);
  GenOptions skip = options("unit", 7);
  skip.quantized = true;
  skip.skip_ops = {"dequantize_linear"};
  const auto source = data::open_source("random");
  try {
    make_generator(skip, *source);
    ADD_FAILURE() << "--skip_ops dequantize_linear under --dtype int8 accepted";
  } catch (const core::UserError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot be left out"), std::string::npos) << e.what();
  }
}

TEST(Summary, ReasonKeysGroupLikeFailures) {
  EXPECT_EQ(reason_key("validate: m: node 'conv2d_3' (conv2d): kernel 5 over 3 (inputs f32[1,2,3,3])"),
            "validate: m: node (conv#d): kernel # over #");
}

}  // namespace
}  // namespace quorum::gen

namespace quorum::gen {
namespace {

// Muffin's fitness-proportionate choice starts from the counts it is given (a campaign's counts of the
// models before the epoch): with every single-input type but relu counted 10 000 times, relu takes
// nearly every single-input vertex; the model says what it chose.
TEST(Muffin, StartsFromTheLayerCountsItIsGiven) {
  const auto source = data::open_source("random");
  GenOptions opt = options("muffin", 3);
  for (const ops::OpSpec* s : ops::catalogue().all())
    if (!s->is_loss && s->name != "relu") opt.layer_counts[s->name] = 10000;
  int64_t relu = 0, all = 0;
  for (uint64_t i = 0; i < 20; ++i) {
    core::Rng rng = model_rng(3, i);
    const Model m = make_generator(opt, *source)->generate(i, rng);
    for (const auto& [op, n] : m.picks) {
      all += n;
      relu += op == "relu" ? n : 0;
    }
  }
  EXPECT_GT(all, 40);
  EXPECT_GT(relu, all / 2) << relu << " of " << all << " picks";
  // Without counts relu is one type of dozens.
  int64_t free_relu = 0;
  for (uint64_t i = 0; i < 20; ++i) {
    core::Rng rng = model_rng(3, i);
    const Model m = make_generator(options("muffin", 3), *source)->generate(i, rng);
    free_relu += m.picks.count("relu") ? m.picks.at("relu") : 0;
  }
  EXPECT_LT(free_relu, all / 5);
}

}  // namespace
}  // namespace quorum::gen
