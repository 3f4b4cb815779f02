// The quorum command as a user runs it: exit codes, one-line errors, reproducible output.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/fileio.h"
#include "core/npy.h"
#include "ops/registry.h"
#include "run_quorum.h"

namespace {

namespace fs = std::filesystem;

using quorum::testing::Result;

fs::path scratch() { return quorum::testing::scratch("cli_test"); }

Result quorum(const std::string& args) { return quorum::testing::run_quorum(args, "cli_test"); }

// The whitespace-separated words of every line of `text`.
std::vector<std::vector<std::string>> rows_of(const std::string& text) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::vector<std::string> row;
    for (std::string w; words >> w;) row.push_back(w);
    rows.push_back(std::move(row));
  }
  return rows;
}

// Whether some line of `text` starts with these words, whatever the spacing between them.
bool has_row(const std::string& text, const std::vector<std::string>& words) {
  for (const auto& row : rows_of(text))
    if (row.size() >= words.size() && std::equal(words.begin(), words.end(), row.begin())) return true;
  return false;
}

std::string example(const std::string& name) { return std::string(QUORUM_SOURCE_DIR) + "/docs/examples/" + name; }

std::string write_temp(const std::string& name, const std::string& text) {
  const fs::path p = scratch() / name;
  std::ofstream(p) << text;
  return p.string();
}

TEST(Cli, VersionAndHelp) {
  Result r = quorum("--version");
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(r.out.rfind("quorum ", 0), 0u);
  r = quorum("--help");
  EXPECT_EQ(r.code, 0);
  for (const char* c : {"run", "ops", "version"}) EXPECT_NE(r.out.find(c), std::string::npos) << c;
  r = quorum("run --help");
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("--seed"), std::string::npos);
  // Numeric and duration flags show their value and their default from flags.def.
  r = quorum("fuzz --help");
  EXPECT_EQ(r.code, 0);
  for (const char* f : {"--threshold V", "(default 0.15)", "--epsilon V", "(default 1e-5)", "--learning_rate V",
                        "(default 0.01)", "--mutation_rate V", "(default 0.1)", "--time V"})
    EXPECT_NE(r.out.find(f), std::string::npos) << f << "\n" << r.out;
  // Grouped: a heading line before each group of fuzz's flags, and only fuzz's flags.
  for (const char* h : {"\nthe campaign:\n", "\njudging:\n", "\nsearching each model (--search):\n",
                        "\ntrained models (--generator zoo --trained DIR):\n"})
    EXPECT_NE(r.out.find(h), std::string::npos) << h << "\n" << r.out;
  EXPECT_EQ(r.out.find("--expose V"), std::string::npos) << r.out;  // search's, not fuzz's
}

TEST(Cli, OpsListsEveryOperatorOfTheCatalogue) {
  const Result r = quorum("ops");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto pos = r.out.rfind('\n', r.out.size() - 2);
  const int count = std::stoi(r.out.substr(pos + 1));
  const auto all = quorum::ops::catalogue().all();
  EXPECT_EQ(count, static_cast<int>(all.size()));
  for (const auto* spec : all) EXPECT_TRUE(has_row(r.out, {spec->name, "in"})) << spec->name;
  EXPECT_NE(r.out.find("conv2d"), std::string::npos);
  EXPECT_NE(r.out.find("invalid:"), std::string::npos);
}

TEST(Cli, RunExamplesIsReproducible) {
  for (const char* m : {"lenet5.json", "residual_small.json"}) {
    const Result a = quorum("run " + example(m) + " --seed 17");
    ASSERT_EQ(a.code, 0) << a.err;
    EXPECT_NE(a.out.find("seed: 17"), std::string::npos);
    EXPECT_EQ(a.out, quorum("run " + example(m) + " --seed 17").out);
    EXPECT_NE(a.out, quorum("run " + example(m) + " --seed 18").out);
  }
  const Result chosen = quorum("run " + example("lenet5.json"));
  ASSERT_EQ(chosen.code, 0);
  EXPECT_NE(chosen.out.find("seed: "), std::string::npos);
}

TEST(Cli, RunWithLossPrintsGradientsAndSavesNpy) {
  const fs::path dir = scratch() / "saved";
  fs::remove_all(dir);
  const Result r =
      quorum("run " + example("lenet5.json") + " --seed 3 --loss softmax_cross_entropy --save " + dir.string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("loss (softmax_cross_entropy): "), std::string::npos);
  EXPECT_NE(r.out.find("gradients of the loss"), std::string::npos);
  EXPECT_EQ(quorum::core::read_npy((dir / "softmax.npy").string()).shape(), (quorum::core::Shape{1, 10}));
  EXPECT_EQ(quorum::core::read_npy((dir / "grad.conv1.weight.npy").string()).shape(),
            (quorum::core::Shape{6, 1, 5, 5}));
  // Saved inputs feed a rerun that prints the same numbers.
  const Result again = quorum("run " + example("lenet5.json") + " --seed 99 --inputs " + dir.string());
  ASSERT_EQ(again.code, 0) << again.err;
  const Result first = quorum("run " + example("lenet5.json") + " --seed 3");
  EXPECT_EQ(again.out.substr(again.out.find("model:")), first.out.substr(first.out.find("model:")));
}

TEST(Cli, BadInputExitsTwoWithOneLine) {
  const std::string unknown_op = write_temp("unknown.json", R"({"inputs": [{"name": "x", "dtype": "float32",
    "shape": [2]}], "outputs": ["y"], "nodes": [{"name": "n", "op": "frob", "inputs": ["x"], "outputs": ["y"]}]})");
  const std::string bad_attr = write_temp("attr.json", R"({"inputs": [{"name": "x", "dtype": "float32",
    "shape": [2]}], "outputs": ["y"], "nodes": [{"name": "n", "op": "elu", "inputs": ["x"], "outputs": ["y"],
    "attrs": {"alpha": "high"}}]})");
  const std::string bad_shape = write_temp("shape.json", R"({"inputs": [{"name": "x", "dtype": "float32",
    "shape": [2]}], "outputs": ["y"], "nodes": [{"name": "n", "op": "relu", "inputs": ["x"],
    "outputs": [{"name": "y", "dtype": "float32", "shape": [3]}]}]})");
  const std::string malformed = write_temp("malformed.json", "{\"inputs\": [1,");
  const std::string huge = write_temp("huge.json", R"({"inputs": [{"name": "x", "dtype": "float32",
    "shape": [100000, 100000, 100000]}], "outputs": ["y"], "nodes": [{"name": "n", "op": "relu", "inputs": ["x"],
    "outputs": ["y"]}]})");
  const std::string huge_out = write_temp("huge_out.json", R"({"inputs": [{"name": "x", "dtype": "float32",
    "shape": [1, 1, 2, 2]}], "outputs": ["y"], "nodes": [{"name": "n", "op": "resize_nearest", "inputs": ["x"],
    "outputs": ["y"], "attrs": {"sizes": [1000000, 1000000]}}]})");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"run /nonexistent/model.json", "cannot open"},
      {"run " + malformed, "malformed JSON"},
      {"run " + unknown_op, "node 'n' (frob): unknown operator 'frob'"},
      {"run " + bad_attr, "node 'n' (elu): attribute 'alpha' must be float"},
      {"run " + bad_shape, "node 'n' (relu): output 'y' is declared float32[3]"},
      {"run " + example("lenet5.json") + " --bogus", "unknown flag '--bogus'"},
      {"run " + example("lenet5.json") + " --seed abc", "--seed: expected an integer from 0 to 18446744073709551615"},
      {"run " + example("lenet5.json") + " --seed 18446744073709551616", "--seed: expected an integer from 0"},
      {"run " + example("lenet5.json") + " --loss relu", "is not a loss"},
      {"run " + example("lenet5.json") + " --loss nope", "unknown operator 'nope'"},
      {"run " + example("lenet5.json") + " --inputs /nonexistent", "missing input file"},
      {"run " + huge, "value 'x' [100000,100000,100000] is too large (1e+15 elements"},
      {"run " + huge_out, "node 'n' (resize_nearest): value 'y' [1,1,1000000,1000000] is too large"},
      {"fuzz --threshold abc --models 1", "--threshold: expected a number >= 0, got 'abc'"},
      {"fuzz --threshold -1 --models 1", "--threshold: expected a number >= 0, got '-1'"},
      {"fuzz --learning_rate 1e999 --models 1", "--learning_rate: expected a number >= 0, got '1e999'"},
      {"fuzz --epsilon= --models 1", "--epsilon: expected a number >= 0, got ''"},
      {"fuzz --mutation_rate 0.1.2 --models 1", "--mutation_rate: expected a number >= 0, got '0.1.2'"},
      {"fuzz --mutation_rate 1.5 --models 1", "--mutation_rate: expected a number from 0 to 1, got '1.5'"},
      {"known --check --backends nosuch", "unknown backend 'nosuch'"},
      // A backend's options are read by its worker before anything runs: a misspelt one is this line, not a crash.
      {"run " + example("lenet5.json") + " --backends faulty:frob", "faulty: unknown fault 'frob'"},
      {"fuzz --models 1 --backends ref,faulty:band=relu", "faulty: band=OP@LO..HI expected"},
      {"fuzz --backends ref --optimized yes --models 1", "--optimized: expected on or off, got 'yes'"},
      {"fuzz --time 5x", "--time: expected a duration like 90s, 10m or 2h, got '5x'"},
      {"fuzz --time -1m", "--time: expected a duration like 90s, 10m or 2h, got '-1m'"},
      {"fuzz --time", "flag '--time' needs a value"},
      {"run model.txt", "unsupported model file type"},
      {"run", "expected one MODEL file"},
      {"frobnicate", "unknown command 'frobnicate'"},
  };
  for (const auto& [args, expect] : cases) {
    const Result r = quorum(args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << args << "\n" << r.err;
    EXPECT_EQ(r.err.rfind("quorum: ", 0), 0u) << args << "\n" << r.err;
    EXPECT_NE(r.err.find(expect), std::string::npos) << args << "\n" << r.err;
  }
}

}  // namespace

namespace {

TEST(Cli, BackendsListsEveryBuiltBackendWithVersion) {
  const Result r = quorum("backends");
  ASSERT_EQ(r.code, 0) << r.err;
  // The reference supports every operator of the catalogue and trains.
  const std::string n = std::to_string(quorum::ops::catalogue().all().size());
  EXPECT_TRUE(has_row(r.out, {"ref", "yes", n + "/" + n})) << r.out;
  EXPECT_NE(r.out.find("faulty"), std::string::npos) << r.out;
}

TEST(Cli, RunOnBackendsReportsDifferencesAndOutcomes) {
  const Result r = quorum("run " + example("lenet5.json") + " --seed 3 --backends ref,faulty:crash-on-op=softmax");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(has_row(r.out, {"conv1", "conv2d", "0.0e+00", "/", "0.0e+00"})) << r.out;
  EXPECT_NE(r.out.find("  ref: ok\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("faulty:crash-on-op=softmax: crash: SIGSEGV"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("crashing in node 'softmax'"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("findings:\n  crash|FC|faulty:crash-on-op=softmax"), std::string::npos) << r.out;
}

TEST(Cli, RunOnBackendsWithALossComparesGradients) {
  const Result r = quorum("run " + example("residual_small.json") +
                          " --seed 3 --loss mse_loss --backends ref,faulty:relu-grad-at-zero+loss-grad-x2");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("gradients of the loss"), std::string::npos) << r.out;
  EXPECT_TRUE(has_row(r.out, {"stem.weight", "conv2d", "0.0e+00", "/", "0.0e+00"})) << r.out;
  EXPECT_NE(r.out.find("inconsistency|LC|faulty:relu-grad-at-zero+loss-grad-x2|mse_loss"), std::string::npos) << r.out;
}

TEST(Cli, BadBackendArgumentsExitTwo) {
  for (const std::string& args : std::vector<std::string>{"run " + example("lenet5.json") + " --backends nope",
                                 "run " + example("lenet5.json") + " --backends ref --dtype float16",
                                 std::string("worker --backend nope"), std::string("worker")}) {
    const Result r = quorum(args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << args << "\n" << r.err;
  }
}

}  // namespace

namespace {

TEST(Cli, ExportedOnnxRunsLikeTheJson) {
  const std::string onnx = (scratch() / "lenet5.onnx").string();
  const Result e = quorum("export " + example("lenet5.json") + " -o " + onnx);
  ASSERT_EQ(e.code, 0) << e.err;
  const Result a = quorum("run " + example("lenet5.json") + " --seed 4");
  const Result b = quorum("run " + onnx + " --seed 4");
  ASSERT_EQ(b.code, 0) << b.err;
  EXPECT_EQ(a.out.substr(a.out.find("forward")), b.out.substr(b.out.find("forward")));
  const Result bad = quorum("run " + write_temp("junk.onnx", "not a protobuf"));
  EXPECT_EQ(bad.code, 2);
  EXPECT_EQ(std::count(bad.err.begin(), bad.err.end(), '\n'), 1) << bad.err;
}

// A bundle's form seed is a 64-bit hash: one of 20 digits is written in the form it names.
TEST(Cli, ExportTakesEveryFormSeed) {
  const std::string onnx = (scratch() / "lenet5-form.onnx").string();
  const Result e = quorum("export " + example("lenet5.json") + " -o " + onnx + " --form_seed 18446744073709551615");
  ASSERT_EQ(e.code, 0) << e.err;
  EXPECT_NE(e.out.find("forms: opset"), std::string::npos) << e.out;
  EXPECT_EQ(quorum("run " + onnx + " --seed 4").code, 0);
}

}  // namespace
