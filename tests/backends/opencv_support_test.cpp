// OpenCV's edge/reflect padding reads at most one axis length beyond the edge: a wider pad is one
// refusal with one reason (it used to surface as four crash signatures, one per padTop/padLeft/...
// assertion), whichever side is too wide.
#include <gtest/gtest.h>

#include <algorithm>

#include "ir/json_io.h"
#include "worker/supervisor.h"

namespace quorum::backends {
namespace {

ir::Graph edge_pad(const std::string& pads) {
  return ir::graph_from_json(R"({"inputs": [{"name": "x", "dtype": "float32", "shape": [1, 1, 2, 3]}], "outputs": ["p"],
    "nodes": [{"name": "p", "op": "pad", "inputs": ["x"], "outputs": ["p"],
               "attrs": {"mode": "edge", "pads": )" + pads + R"(}}]})",
                             "pad");
}

TEST(OpenCVSupport, AnEdgePadWiderThanTheAxisIsOneRefusal) {
  const auto& have = worker::available_backends();
  if (std::find(have.begin(), have.end(), "opencv") == have.end()) GTEST_SKIP() << "opencv backend not built";
  worker::Worker w("opencv", {}, worker::Limits{});
  std::vector<std::string> reasons;
  for (const char* pads : {"[0, 0, 3, 0, 0, 0, 0, 0]", "[0, 0, 0, 4, 0, 0, 0, 0]", "[0, 0, 0, 0, 0, 0, 3, 0]",
                           "[0, 0, 0, 0, 0, 0, 0, 4]"}) {
    std::vector<worker::NodeSupport> sup;
    ASSERT_TRUE(w.supports(edge_pad(pads), false, sup).ok());
    ASSERT_EQ(sup.size(), 1u);
    EXPECT_FALSE(sup[0].ok) << pads;
    reasons.push_back(sup[0].reason.substr(0, sup[0].reason.find(": pads")));
  }
  EXPECT_TRUE(std::all_of(reasons.begin(), reasons.end(), [&](const std::string& r) { return r == reasons[0]; }));
  std::vector<worker::NodeSupport> sup;
  ASSERT_TRUE(w.supports(edge_pad("[0, 0, 2, 3, 0, 0, 2, 3]"), false, sup).ok());
  EXPECT_TRUE(sup[0].ok) << sup[0].reason;  // as wide as the axis: fine
}

}  // namespace
}  // namespace quorum::backends
