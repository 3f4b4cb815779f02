// A bundle shared by others may hold anything in finding.json and reduced/reduction.json (found
// by fuzz/finding_json_fuzz.cpp and fuzz/reduction_json_fuzz.cpp): finding.json that is not what
// Quorum writes is one UserError naming the file; reduction.json is read for what it holds and never
// throws.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "campaign/bundle.h"
#include "core/error.h"
#include "report/issue.h"
#include "report/repro.h"

namespace quorum::report {
namespace {

void expect_refused(const std::string& text) {
  try {
    const auto j = campaign::parse_finding(text, "f.json");
    backends::ReproCase c;
    read_finding_fields(j, j, "f.json", c);
    campaign::finding_setup(j, "f.json");
    ADD_FAILURE() << "accepted: " << text;
  } catch (const core::UserError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("f.json: ", 0), 0u) << e.what();
  }
}

TEST(BundleFilesMalformed, AFindingOfTheWrongShapeIsOneUserError) {
  expect_refused("[1, 2]");
  expect_refused(R"({"backend": 3, "kind": "nan", "stage": "FC", "signature": "s"})");
  expect_refused(R"({"backend": "faulty", "kind": "nan", "stage": "FC", "signature": "s", "lowering": "x"})");
  expect_refused(R"({"backend": "faulty", "kind": "nan", "stage": "FC", "signature": "s", "backends": [1]})");
  expect_refused(R"({"backend": "faulty", "kind": "nan", "stage": "XX", "signature": "s"})");
  expect_refused(R"({"backend": "faulty", "kind": "nan", "stage": "FC", "signature": "s", "setup": 1})");
  expect_refused(R"({"backend": "faulty", "kind": "nan", "stage": "FC", "signature": "s", "setup": {"backends":
    ["faulty"], "mode": "sideways", "dtype": "float32", "threads": 1, "loss": "", "learning_rate": 0.1,
    "timeout_s": 1, "memory_mb": 1, "T": 1, "eps": 1, "relative_metric": true}})");
}

TEST(BundleFilesMalformed, AReductionIsReadForWhatItHolds) {
  EXPECT_FALSE(parse_reduction("not json").present);
  EXPECT_FALSE(parse_reduction("[]").present);
  const Reduction r = parse_reduction(
      R"({"nodes_before": "7", "nodes_after": 1, "causes": [1, {"attribute": "alpha", "value": 2},
          {"attribute": "beta", "value": "0", "fixed_by": "beta = 1"}], "random_inputs": []})");
  EXPECT_TRUE(r.present);
  EXPECT_EQ(r.nodes_before, 0);
  EXPECT_EQ(r.nodes_after, 1);
  ASSERT_EQ(r.causes.size(), 2u);
  EXPECT_EQ(r.causes[0].attribute, "alpha");
  EXPECT_EQ(r.causes[0].value, "");
  EXPECT_EQ(r.causes[1].fixed_by, "beta = 1");
  EXPECT_EQ(r.inputs_tried, 0);
}

}  // namespace
}  // namespace quorum::report
