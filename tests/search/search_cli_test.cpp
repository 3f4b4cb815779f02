// quorum search as a user runs it: the seed and a replay line, the failure-inducing case as a bundle
// that replays and records its method, the same output for the same seed, one-line errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "campaign/bundle.h"
#include "core/fileio.h"
#include "ir/graph.h"
#include "ir/json_io.h"
#include "run_quorum.h"

namespace {

namespace fs = std::filesystem;
using quorum::testing::Result;

Result quorum(const std::string& args) { return quorum::testing::run_quorum(args, "search_cli_test"); }

// x[1, 32] -> relu, written as MODEL.json.
std::string band_model() {
  quorum::ir::Graph g;
  g.inputs.push_back({"x", {quorum::core::DType::F32, {1, 32}}});
  g.nodes.push_back({"relu", "relu", {"x"}, {"relu"}, {}});
  g.outputs = {"relu"};
  quorum::ir::validate(g, "band");
  const fs::path p = quorum::testing::scratch("search_cli_test") / "band.json";
  quorum::ir::save_graph(p.string(), g);
  return p.string();
}

TEST(SearchCli, WritesTheFailureAsABundleWithItsMethodAndReplayLines) {
  const fs::path out = quorum::testing::scratch("search_cli_test") / "found";
  fs::remove_all(out);
  const std::string args = "search --method ga --fitness nan --model " + band_model() +
                           " --backends faulty:band=relu@5..5.5 --mode infer --budget 200 --seed 1 --out " +
                           out.string();
  const Result r = quorum(args);
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("seed 1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("found: verdict"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("replay search: quorum search --method ga"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("result: method=ga found=1 oracle=verdict"), std::string::npos) << r.out;
  const auto bundles = quorum::campaign::list_bundles(out.string());
  ASSERT_EQ(bundles.size(), 1u) << r.out;
  EXPECT_EQ(quorum::campaign::read_finding(bundles[0]).value("method", ""), "ga");
  const Result replay = quorum("replay " + bundles[0]);
  EXPECT_EQ(replay.code, 0) << replay.out << replay.err;
  // The same seed, the same search.
  fs::remove_all(out);
  const Result again = quorum(args);
  auto result_line = [](const std::string& s) {
    return s.substr(s.find("result:"), s.find(" seconds=") - s.find("result:"));
  };
  EXPECT_EQ(result_line(again.out), result_line(r.out));
}

TEST(SearchCli, BadInputIsOneLineAndExitCode2) {
  const std::string model = band_model();
  const std::vector<std::string> bad_args = {
      "search --method annealing --model " + model + " --backends ref",
      "search --method ga --model " + model + " --backends ref --level layers",
      "search --method ga --model " + model + " --backends ref --elite 20",
      "search --method ga --model /nonexistent.json --backends ref",
      "search --method ga --model " + model,
      "fuzz --models 1 --backends ref --search grist-like"};
  for (const std::string& bad : bad_args) {
    const Result r = quorum(bad);
    EXPECT_EQ(r.code, 2) << bad << "\n" << r.out << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << bad << "\n" << r.err;
  }
}

}  // namespace
