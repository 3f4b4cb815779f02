// quorum fuzz --search: a model that runs clean on its random inputs is searched, and what the search
// finds goes into the campaign's store with the method in its bundle and in the issue text.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <sstream>

#include <nlohmann/json.hpp>

#include "ir/json_io.h"
#include "campaign/bundle.h"
#include "campaign/campaign.h"
#include "campaign/replay.h"
#include "store/store.h"
#include "report/issue.h"

namespace quorum::campaign {
namespace {

namespace fs = std::filesystem;

TEST(FuzzSearch, RecordsTheMethodOfWhatTheSearchFound) {
  const fs::path out = fs::temp_directory_path() / ("quorum_fuzz_search_" + std::to_string(::getpid()));
  fs::remove_all(out);
  CampaignOptions opt;
  opt.generator = "band";
  opt.setup.backends = parse_backends("faulty:band=relu@5..5.5");
  opt.setup.mode = Mode::Infer;
  opt.models = 2;
  opt.seed = 4;
  opt.out = out.string();
  opt.quiet = true;
  opt.search.method = SearchMethod::Ga;
  opt.search.ga.budget = 100;
  opt.search.ga.fitness = search::Fitness::Nan;
  const ModelFactory factory = [](int64_t, core::Rng&) {
    ModelCase m;
    m.graph.inputs.push_back({"x", {core::DType::F32, {1, 32}}});
    m.graph.nodes.push_back({"relu", "relu", {"x"}, {"relu"}, {}});
    m.graph.outputs = {"relu"};
    ir::validate(m.graph, "band");
    return m;
  };
  std::ostringstream log;
  const Summary s = run_campaign(opt, factory, log);
  EXPECT_EQ(s.searched, 2) << log.str();
  EXPECT_GE(s.search_found, 1);
  const auto store = store::open_store("", opt.out);
  const auto findings = store->findings();
  ASSERT_EQ(findings.size(), 1u) << log.str();
  EXPECT_EQ(findings[0].op, "relu");
  const auto j = read_finding(findings[0].bundle);
  EXPECT_EQ(j.value("method", ""), "ga");
  // The bundle holds the search's failure-inducing input: it replays.
  EXPECT_TRUE(replay(findings[0].bundle).reproduced);
  EXPECT_NE(report::issue_markdown(findings[0].bundle).find("by its ga search"), std::string::npos);
  fs::remove_all(out);
}

// fuzz --search grist: a clean model's inputs and weights driven toward exp's overflow until the
// planted exp-overflow-early fault shows (exp +inf for operands in (20, 88.72]); the bundle names grist.
TEST(FuzzSearch, GristInACampaignFindsWhatTheModelsOwnDrawMisses) {
  const fs::path out = fs::temp_directory_path() / ("quorum_fuzz_grist_" + std::to_string(::getpid()));
  fs::remove_all(out);
  CampaignOptions opt;
  opt.generator = "exp";
  opt.setup.backends = parse_backends("faulty:exp-overflow-early");
  opt.setup.mode = Mode::Infer;
  opt.models = 1;
  opt.seed = 4;
  opt.out = out.string();
  opt.quiet = true;
  opt.search.method = SearchMethod::Grist;
  opt.search.ga.budget = 60;
  const ModelFactory factory = [](int64_t, core::Rng&) {
    return ModelCase{ir::graph_from_json(R"({"inputs": [{"name": "x", "dtype": "float32", "shape": [1, 4]}],
        "outputs": ["y"],
        "initializers": [{"name": "w", "dtype": "float32", "shape": [2, 4],
                          "data": [0.5, -0.3, 0.8, 0.2, -0.6, 0.4, 0.1, 0.9]},
                         {"name": "b", "dtype": "float32", "shape": [2], "data": [0, 0]}],
        "nodes": [{"name": "fc", "op": "dense", "inputs": ["x", "w", "b"], "outputs": ["fc"], "attrs": {"units": 2}},
                  {"name": "y", "op": "exp", "inputs": ["fc"], "outputs": ["y"]}]})",
                                         "exp"),
                     {},
                     {}};
  };
  std::ostringstream log;
  const Summary s = run_campaign(opt, factory, log);
  EXPECT_EQ(s.searched, 1) << log.str();  // the model's own draw ran clean
  EXPECT_EQ(s.search_found, 1) << log.str();
  const auto findings = store::open_store("", opt.out)->findings();
  ASSERT_EQ(findings.size(), 1u) << log.str();
  EXPECT_EQ(findings[0].signature, "nan|FC|faulty:exp-overflow-early|exp");
  EXPECT_EQ(read_finding(findings[0].bundle).value("method", ""), "grist");
  EXPECT_TRUE(replay(findings[0].bundle).reproduced);
  fs::remove_all(out);
}

}  // namespace
}  // namespace quorum::campaign
