// quorum fuzz --search: a model that runs clean on its random inputs is searched, and what the search
// finds goes into the campaign's store with the method in its bundle and in the issue text.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <sstream>

#include <nlohmann/json.hpp>

#include "campaign/bundle.h"
#include "campaign/campaign.h"
#include "campaign/store.h"
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
  const auto store = open_store("", opt.out);
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

}  // namespace
}  // namespace quorum::campaign
