// quorum train and train-diff on bad input: one line on stderr, exit code 2, before any training.
#include <gtest/gtest.h>

#include <algorithm>

#include "../run_quorum.h"

namespace quorum::testing {
namespace {

TEST(TrainCli, BadInputExitsTwoWithOneLine) {
  const auto empty = scratch("train_cli") / "empty";
  std::filesystem::create_directories(empty);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"train", "train: expected one zoo MODEL"},
      {"train nosuch", "unknown zoo model 'nosuch'"},
      {"train lenet5 --optimizer rmsprop", "--optimizer rmsprop: choose sgd or adam"},
      {"train lenet5 --epochs 0", "--epochs must be at least 1"},
      {"train lenet5 --batch 5000", "--batch must lie in 1..4096"},
      {"train lenet5 --momentum 1", "the momentum must lie in [0, 1)"},
      {"train lenet5 --learning_rate 0", "the learning rate must be a finite number above 0"},
      {"train lenet5 --dataset sine", "only the recurrent zoo models train on sine"},
      {"train lenet5 --dataset random", "--dataset random: train reads fashion-mnist or sine"},
      {"train lenet5 --backend nosuch", "unknown backend 'nosuch'"},
      {"train-diff lenet5", "--backends LIST is required"},
      {"train-diff lenet5 --backends faulty --steps 0", "--steps must be at least 1"},
      {"train-diff lenet5 --backends faulty --f32_factor 0.5", "--f32_factor must be at least 1"},
      {"train-diff lenet5 --backends faulty --optimizer lbfgs", "--optimizer lbfgs: choose sgd or adam"},
      {"train-diff nosuch.json --backends faulty", "nosuch.json"},
      {"train-diff " + empty.string(), "case.json"},
  };
  for (const auto& [args, expect] : cases) {
    const Result r = run_quorum(args, "train_cli");
    EXPECT_EQ(r.code, 2) << args << "\n" << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << args << "\n" << r.err;
    EXPECT_EQ(r.err.rfind("quorum: ", 0), 0u) << args << "\n" << r.err;
    EXPECT_NE(r.err.find(expect), std::string::npos) << args << "\n" << r.err;
  }
}

}  // namespace
}  // namespace quorum::testing
