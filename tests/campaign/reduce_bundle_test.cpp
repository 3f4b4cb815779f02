// Every conditional planted fault of the faulty backend, found by a campaign inside a chain of
// other layers: the reducer cuts the finding down to the faulty layer (at most 3 nodes, here 1),
// localize-fix names the attribute whose value triggers the fault, and the finding's localization
// map highlights the faulty layer first.
#include "campaign/reduce_bundle.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "campaign/bundle.h"
#include "campaign/campaign.h"
#include "campaign/store.h"
#include "ir/json_io.h"

namespace quorum::campaign {
namespace {

namespace fs = std::filesystem;

struct Planted {
  std::string fault, op, attribute, input_shape, attrs;
};

const std::vector<Planted> kPlanted = {
    {"elu-alpha-ignored", "elu", "alpha", "[2, 6]", R"({"alpha": 2.0})"},
    {"leaky-relu-big-alpha-halved", "leaky_relu", "alpha", "[2, 6]", R"({"alpha": 0.8})"},
    {"softmax-axis0-on-last", "softmax", "axis", "[3, 4]", R"({"axis": 0})"},
    {"pad-reflect-as-edge", "pad", "mode", "[1, 1, 4, 4]", R"({"mode": "reflect", "pads": [0, 0, 1, 1, 0, 0, 1, 1]})"},
    {"resize-align-corners-as-half-pixel", "resize_bilinear", "coordinate_transformation_mode", "[1, 1, 3, 3]",
     R"({"sizes": [5, 5], "coordinate_transformation_mode": "align_corners"})"},
    {"gelu-tanh-as-exact", "gelu", "approximate", "[2, 6]", R"({"approximate": "tanh"})"},
};

// input -> neg -> OP (the planted one) -> tanh -> sigmoid
ir::Graph chain(const Planted& p) {
  return ir::graph_from_json(R"({"inputs": [{"name": "x", "dtype": "float32", "shape": )" + p.input_shape + R"(}],
    "outputs": ["s"],
    "nodes": [{"name": "n", "op": "neg", "inputs": ["x"], "outputs": ["n"]},
              {"name": "faulty_layer", "op": ")" + p.op + R"(", "inputs": ["n"], "outputs": ["f"], "attrs": )" + p.attrs + R"(},
              {"name": "t", "op": "tanh", "inputs": ["f"], "outputs": ["t"]},
              {"name": "s", "op": "sigmoid", "inputs": ["t"], "outputs": ["s"]}]})",
                             p.fault);
}

TEST(ReduceBundle, EveryConditionalPlantedFaultIsReducedToItsLayerWithItsParameterNamed) {
  for (const Planted& p : kPlanted) {
    SCOPED_TRACE(p.fault);
    CampaignOptions opt;
    opt.generator = "planted chain";
    opt.setup.backends = parse_backends("faulty:" + p.fault);
    opt.setup.mode = Mode::Infer;
    opt.models = 3;
    opt.seed = 11;
    opt.out = (fs::temp_directory_path() / ("quorum_reduce_" + p.fault + "_" + std::to_string(::getpid()))).string();
    fs::remove_all(opt.out);
    opt.quiet = true;
    std::ostringstream log;
    run_campaign(opt, [&](int64_t, core::Rng&) { return ModelCase{chain(p), {}, {}}; }, log);
    const auto all = open_sqlite_store(opt.out)->findings();
    ASSERT_EQ(all.size(), 1u) << (all.empty() ? "no finding" : all[0].signature);
    EXPECT_EQ(all[0].op, p.op);
    // The map: the faulty layer is the first highlighted one.
    std::ifstream map(fs::path(all[0].bundle) / "map.json");
    ASSERT_TRUE(map.good()) << "no map.json in " << all[0].bundle;
    EXPECT_EQ(nlohmann::json::parse(map).at("first_highlighted").get<std::string>(), "faulty_layer");
    EXPECT_TRUE(fs::exists(fs::path(all[0].bundle) / "map.svg") || fs::exists(fs::path(all[0].bundle) / "map.dot"));
    // The reduction: the faulty layer alone, its triggering attribute named.
    const BundleReduction r = reduce_bundle(all[0].bundle, 100, nullptr);
    ASSERT_TRUE(r.reduction.reproduced);
    EXPECT_EQ(r.nodes_before, 4);
    EXPECT_LE(r.nodes_after, 3);
    EXPECT_TRUE(r.reduction.one_node);
    bool named = false;
    for (const auto& c : r.fix.causes) named |= c.attribute == p.attribute;
    EXPECT_TRUE(named) << "localize-fix did not name '" << p.attribute << "'";
    ASSERT_FALSE(r.reduced_dir.empty());
    EXPECT_TRUE(fs::exists(fs::path(r.reduced_dir) / "reduction.json"));
    EXPECT_TRUE(replay(r.reduced_dir).reproduced);  // quorum replay works on the reduced case
    fs::remove_all(opt.out);
  }
}

}  // namespace
}  // namespace quorum::campaign
