// quorum gen as a user runs it: the files it writes, its summary, reproducible output, and one
// line with exit code 2 for every bad argument.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "core/fileio.h"
#include "run_quorum.h"
#include "core/npy.h"
#include "ir/json_io.h"
#include "ref/interpreter.h"

namespace {

namespace fs = std::filesystem;

using quorum::testing::Result;

fs::path scratch() { return quorum::testing::scratch("gen_cli_test"); }

Result quorum(const std::string& args) { return quorum::testing::run_quorum(args, "gen_cli_test"); }

TEST(GenCli, WritesModelsDataAndASummary) {
  const fs::path out = scratch() / "muffin";
  fs::remove_all(out);
  const Result r = quorum("gen --generator muffin --count 12 --seed 5 --out " + out.string());
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* s : {"seed: 5", "generator: muffin", "models: 12", "nodes per model: min", "operators used:",
                        "validity: 12 of 12 valid"})
    EXPECT_NE(r.out.find(s), std::string::npos) << s << "\n" << r.out;
  for (int i = 0; i < 12; ++i) {
    char stem[32];
    std::snprintf(stem, sizeof stem, "model_%05d", i);
    const quorum::ir::Graph g = quorum::ir::load_graph((out / (std::string(stem) + ".json")).string());
    ASSERT_EQ(g.inputs.size(), 1u);
    // The batch beside the model feeds it, and its target fits the model's output.
    const fs::path data = out / (std::string(stem) + ".data");
    quorum::ref::ValueMap in;
    in.emplace(g.inputs[0].name, quorum::core::read_npy((data / (g.inputs[0].name + ".npy")).string()));
    const auto values = quorum::ref::forward(g, in);
    const auto target = quorum::core::read_npy((data / "target.npy").string());
    EXPECT_EQ(values.at(g.outputs[0]).shape(), target.shape());
  }
}

TEST(GenCli, SameSeedSameFiles) {
  const fs::path a = scratch() / "a", b = scratch() / "b";
  for (const char* g : {"muffin", "ws", "zoo"}) {
    fs::remove_all(a);
    fs::remove_all(b);
    const std::string args = std::string("gen --generator ") + g + " --count 8 --seed 77 --out ";
    ASSERT_EQ(quorum(args + a.string()).code, 0);
    ASSERT_EQ(quorum(args + b.string()).code, 0);
    size_t files = 0;
    for (const auto& e : fs::recursive_directory_iterator(a)) {
      if (!e.is_regular_file()) continue;
      const fs::path other = b / fs::relative(e.path(), a);
      ASSERT_TRUE(fs::exists(other)) << other;
      EXPECT_EQ(quorum::core::read_file(e.path().string()), quorum::core::read_file(other.string())) << e.path();
      ++files;
    }
    EXPECT_GE(files, 16u) << g;
  }
}

TEST(GenCli, MutatesAnImportedModel) {
  const fs::path out = scratch() / "mutants";
  fs::remove_all(out);
  const Result r = quorum("gen --generator mutate --model " + std::string(QUORUM_SOURCE_DIR) +
                          "/docs/examples/residual_small.json --mutation_rate 0.2 --count 10 --seed 3 --out " +
                          out.string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("validity: 10 of 10 valid"), std::string::npos) << r.out;
}

TEST(GenCli, BadArgumentsAreOneLineAndExitTwo) {
  const std::string out = " --out " + (scratch() / "bad").string();
  const std::pair<std::string, std::string> cases[] = {
      {"gen --generator nope" + out, "unknown generator 'nope'"},
      {"gen --count 0" + out, "--count must be at least 1"},
      {"gen --generator muffin", "--out DIR is required"},
      {"gen --generator mutate --model /no/such/model.json" + out, "/no/such/model.json"},
      {"gen --generator mutate --mutation_rate 2" + out, "expected a number from 0 to 1"},
      {"gen --generator mutate --mutation_rate 1" + out, "[0, 1)"},
      {"gen --generator mutate --mutation_rate x" + out, "expected a number"},
      {"gen --dataset cifar" + out, "unknown data set 'cifar'"},
      {"gen --generator muffin --invalid_params" + out, "zoo generator only"},
      {"gen --generator muffin --model x.json" + out, "mutate generator"},
      {"gen --generator muffin --ops relu,nope" + out, "--ops: 'nope' is not a catalogue operator"},
      {"gen --generator muffin --skip_ops Erf" + out, "--skip_ops: 'Erf' is not a catalogue operator"},
      {"fuzz --backends ref --generator unit --skip_ops gelu,LSTM --models 1" + out, "--skip_ops: 'LSTM' is not"},
  };
  for (const auto& [args, want] : cases) {
    const Result r = quorum(args);
    EXPECT_EQ(r.code, 2) << args;
    EXPECT_NE(r.err.find(want), std::string::npos) << args << ": " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << args << ": " << r.err;
  }
}

// quorum gen --index I writes exactly the case a campaign with the same seed and options evaluated
// as its model I: the model and input bytes of every bundle (the campaign writes the evaluated
// case into it), and the loss target. Also with the share policy drawing models for a backend that
// does not map two common layer types, muffin's campaign-wide counts in epochs of 5 models, two jobs,
// and a shard of two.
TEST(GenCli, IndexWritesTheModelACampaignEvaluated) {
  struct Case {
    const char* name;
    std::string opts, fuzz_only;
  };
  const std::string backends = " --backends faulty:all-numeric+refuse-op=tanh+refuse-op=conv2d";
  const std::vector<Case> cases = {
      {"unit", " --generator unit --seed 23 --backends faulty:all-numeric", ""},
      {"muffin", " --generator muffin --seed 23" + backends + " --muffin_epoch 5 --backend_share 0.8", " --jobs 2"},
      {"muffin-shard", " --generator muffin --seed 23" + backends + " --muffin_epoch 5", " --shard 1/2"}};
  for (const Case& c : cases) {
    const char* generator = c.name;
    const fs::path camp = scratch() / (std::string("index-campaign-") + generator);
    fs::remove_all(camp);
    const std::string& opts = c.opts;
    const Result f = quorum("fuzz" + opts + c.fuzz_only + " --models 24 --reduce 0 --out " + camp.string());
    ASSERT_EQ(f.code, 0) << f.err;
    int compared = 0;
    for (const auto& b : fs::directory_iterator(camp / "bundles")) {
      const std::string finding = quorum::core::read_file((b.path() / "finding.json").string());
      const auto at = finding.find("\"model_index\":");
      ASSERT_NE(at, std::string::npos) << b.path();
      const int64_t index = std::stoll(finding.substr(finding.find_first_of("0123456789", at)));
      const fs::path out = scratch() / (std::string("index-gen-") + generator);
      fs::remove_all(out);
      const Result g = quorum("gen" + opts + " --index " + std::to_string(index) + " --out " + out.string());
      ASSERT_EQ(g.code, 0) << g.err;
      char stem[32];
      std::snprintf(stem, sizeof stem, "model_%05lld", static_cast<long long>(index));
      const fs::path model = out / (std::string(stem) + ".json"), data = out / (std::string(stem) + ".data");
      EXPECT_EQ(quorum::core::read_file(model.string()), quorum::core::read_file((b.path() / "model.json").string()))
          << generator << " model " << index;
      int inputs = 0;
      for (const auto& in : fs::directory_iterator(b.path() / "inputs")) {
        ++inputs;
        EXPECT_EQ(quorum::core::read_file((data / in.path().filename()).string()),
                  quorum::core::read_file(in.path().string()))
            << generator << " model " << index << " input " << in.path().filename();
      }
      EXPECT_GT(inputs, 0);
      EXPECT_EQ(quorum::core::read_file((data / "target.npy").string()),
                quorum::core::read_file((b.path() / "target.npy").string()))
          << generator << " model " << index;
      ++compared;
    }
    if (std::string(generator) != "muffin-shard") {
      EXPECT_GT(compared, 0) << generator << ": the campaign wrote no bundle";
    }
    fs::remove_all(camp);
  }
  // Without the campaign's seed there is no campaign model to write.
  const Result r = quorum("gen --index 3 --out " + (scratch() / "noseed").string());
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--seed"), std::string::npos) << r.err;
  EXPECT_EQ(quorum("gen --seed 5 --index x --out " + (scratch() / "badindex").string()).code, 2);
}


}  // namespace
