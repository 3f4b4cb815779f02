// `quorum search --method grist` as a user runs it: model mode on the documented example writes a
// case that `quorum run` replays with its NaN/Inf; the library target writes a bundle that replays;
// bad input is one line and exit 2.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <vector>

#include "run_quorum.h"

namespace quorum {
namespace {

namespace fs = std::filesystem;
using testing::run_quorum;

const std::string kExample = std::string(QUORUM_SOURCE_DIR) + "/docs/examples/log_softmax_head.json";

TEST(GristCli, ModelModeWritesACaseThatReplays) {
  const fs::path out = testing::scratch("search_cli") / "head";
  const auto r = run_quorum("search --method grist --expose model --weights --seed 5 --budget 400 --model " + kExample +
                                " --out " + out.string(),
                            "search_cli");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("y (log) operand 0 in ["), std::string::npos) << r.out;  // the static flag line
  EXPECT_NE(r.out.find("vulnerable operation: y (log)"), std::string::npos) << r.out;
  ASSERT_TRUE(fs::exists(out / "model.json"));
  ASSERT_TRUE(fs::exists(out / "inputs" / "x.npy"));
  const auto replay =
      run_quorum("run " + (out / "model.json").string() + " --inputs " + (out / "inputs").string(), "search_cli");
  EXPECT_EQ(replay.code, 0) << replay.err;
  // Without --weights the inputs alone cannot break this head.
  const auto inputs_only = run_quorum(
      "search --method grist --expose model --seed 5 --budget 100 --model " + kExample + " --out " + out.string(),
      "search_cli");
  EXPECT_EQ(inputs_only.code, 0) << inputs_only.err;
  EXPECT_NE(inputs_only.out.find("no NaN/Inf found within the budget"), std::string::npos) << inputs_only.out;
}

TEST(GristCli, LibraryTargetWritesABundleThatReplays) {
  const fs::path dir = testing::scratch("search_cli");
  const fs::path model = dir / "exp.json";
  core::write_file_atomic(model.string(), R"({"inputs": [{"name": "x", "dtype": "float32", "shape": [1, 4]}],
    "outputs": ["y"], "initializers": [{"name": "w", "dtype": "float32", "shape": [2, 4],
      "data": [0.5, -0.3, 0.8, 0.2, -0.6, 0.4, 0.1, 0.9]}],
    "nodes": [{"name": "fc", "op": "dense", "inputs": ["x", "w"], "outputs": ["fc"], "attrs": {"units": 2, "bias": 0}},
              {"name": "y", "op": "exp", "inputs": ["fc"], "outputs": ["y"]}]})");
  const auto r = run_quorum("search --method grist --backends faulty:exp-overflow-early --seed 3 --budget 20 --model " +
                                model.string() + " --out " + (dir / "lib").string(),
                            "search_cli");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("finding: nan|FC|faulty:exp-overflow-early|exp"), std::string::npos) << r.out;
  const auto at = r.out.find("replay: quorum replay ");
  ASSERT_NE(at, std::string::npos) << r.out;
  const std::string bundle = r.out.substr(at + 22, r.out.find('\n', at) - at - 22);
  const auto replay = run_quorum("replay " + bundle, "search_cli");
  EXPECT_EQ(replay.code, 0) << replay.out << replay.err;
  EXPECT_NE(replay.out.find("reproduced: the same finding"), std::string::npos) << replay.out;
}

TEST(GristCli, BadInputIsOneLine) {
  for (const std::string& args :
       std::vector<std::string>{"search --method ga --model " + kExample, "search --method grist",
                                "search --method grist --expose nowhere --model " + kExample,
                                "search --method grist --expose model --data_range 1,0 --model " + kExample,
                                "search --method grist --model " + kExample}) {  // library target: no --backends
    const auto r = run_quorum(args, "search_cli");
    EXPECT_EQ(r.code, 2) << args << "\n" << r.out << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << args << "\n" << r.err;
  }
}


TEST(GristCli, TheOldTargetSpellingIsRefusedNamingTheNewFlag) {
  const auto r = run_quorum("search --method grist --target model --model " + kExample, "search_cli");
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find("'--target' of 'search' is now '--expose library|model'"), std::string::npos) << r.err;
  const auto help = run_quorum("search --help", "search_cli");
  EXPECT_NE(help.out.find("--expose V"), std::string::npos) << help.out;
  EXPECT_EQ(help.out.find("--target V"), std::string::npos) << help.out;
}

}  // namespace
}  // namespace quorum
