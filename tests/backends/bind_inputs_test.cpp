// The graph-input binding every library session uses: inputs in graph order with their index, each
// given with its declared shape, else one clear error.
#include <gtest/gtest.h>

#include "backends/backend.h"
#include "core/error.h"

namespace quorum::backends {
namespace {

ir::Graph two_inputs() {
  ir::Graph g;
  g.inputs = {{"b", {core::DType::F32, {2, 3}}}, {"a", {core::DType::F32, {4}}}};
  return g;
}

std::string error_of(const ir::Graph& g, const ValueMap& m) {
  try {
    bind_graph_inputs(g, m);
  } catch (const core::UserError& e) {
    return e.what();
  }
  return "";
}

TEST(BindGraphInputs, GraphOrderWithIndexAndTheCallersValues) {
  const ir::Graph g = two_inputs();
  const ValueMap m = {{"a", Tensor(core::DType::F64, {4})}, {"b", Tensor(core::DType::F32, {2, 3})},
                      {"unused", Tensor(core::DType::F32, {1})}};
  const auto bound = bind_graph_inputs(g, m);
  ASSERT_EQ(bound.size(), 2u);
  EXPECT_EQ(bound[0].index, 0u);
  EXPECT_EQ(bound[0].info.name, "b");
  EXPECT_EQ(&bound[0].value, &m.at("b"));
  EXPECT_EQ(bound[1].index, 1u);
  EXPECT_EQ(bound[1].info.name, "a");
  EXPECT_EQ(bound[1].value.dtype(), core::DType::F64) << "the session converts, not the binding";
}

TEST(BindGraphInputs, MissingOrMisshapenInputIsOneClearError) {
  const ir::Graph g = two_inputs();
  EXPECT_EQ(error_of(g, {{"b", Tensor(core::DType::F32, {2, 3})}}), "missing value for graph input 'a'");
  EXPECT_EQ(error_of(g, {{"b", Tensor(core::DType::F32, {3, 2})}, {"a", Tensor(core::DType::F32, {4})}}),
            "graph input 'b' has shape [3,2], the model wants [2,3]");
}

}  // namespace
}  // namespace quorum::backends
