// oneDNN's optimized run, the lowering's part (lower.h, plan_fusions; no oneDNN header): which nodes a
// framework integration would fold into a primitive's post-ops. An application asks only for the graph's
// outputs, so a producer's result read by one elementwise node only is never seen: oneDNN computes that
// node on the primitive's result in registers (dnnl::post_ops) instead of a second pass over memory.
#include <algorithm>
#include <map>

#include "backends/onednn/lower.h"

namespace quorum::backends::onednn_lower {

std::vector<PostOp> Fusion::post_ops(size_t n) const {
  std::vector<PostOp> out;
  for (size_t i = 0; i < n && i < steps.size(); ++i) out.insert(out.end(), steps[i].begin(), steps[i].end());
  return out;
}

namespace {

bool is_graph_output(const ir::Graph& g, const std::string& v) {
  return std::find(g.outputs.begin(), g.outputs.end(), v) != g.outputs.end();
}

// The dst dims of the node's one primitive when it can take post-ops, else nothing. A transposed
// convolution may be truncated (a second step adds the bias), an avg pool with a rescale is a pool then
// a binary mul, and a matmul below rank 2 is not one the lowering pads plainly: none is a single primitive.
std::optional<Dims> producer_dst(const ir::Graph& g, const ir::Node& n) {
  const Shape& x = g.types.at(n.inputs.at(0)).shape;
  const Shape& y = g.types.at(n.outputs.at(0)).shape;
  if (n.op == "conv1d" || n.op == "conv2d" || n.op == "conv3d") return conv_geo(n.op, x, y, n.attrs).dst;
  if (n.op == "dense") {
    const DenseGeo d = dense_geo(x, n.attrs);
    return Dims{d.rows, d.units};
  }
  if (n.op == "matmul" && x.size() >= 2 && g.types.at(n.inputs.at(1)).shape.size() >= 2) return dims_of(y);
  if (is_pool(n.op)) {
    const PoolGeo p = pool_geo(n.op, x, y, n.attrs);
    if (p.factor.empty()) return p.dst;
  }
  return std::nullopt;
}

// A binary operand of shape `b` against the node result `y`, in the primitive's dst dims: NumPy
// broadcasting into y only (b never widens the result). Inner product computes [rows, units] for a
// result [..., units]: there b must be whole, per unit, or per row.
std::optional<Dims> operand_dims(const Shape& b, const Shape& y, const Dims& dst) {
  if (b.size() > y.size()) return std::nullopt;
  const Dims bd = dims_of(pad_rank(b, y.size())), yd = dims_of(y);
  for (size_t i = 0; i < bd.size(); ++i)
    if (bd[i] != yd[i] && bd[i] != 1) return std::nullopt;
  if (yd == dst) return bd;
  if (dst.size() != 2) return std::nullopt;
  bool lead_ones = true, lead_same = true;
  for (size_t i = 0; i + 1 < bd.size(); ++i) {
    lead_ones = lead_ones && bd[i] == 1;
    lead_same = lead_same && bd[i] == yd[i];
  }
  if (lead_ones) return Dims{1, bd.back()};
  if (lead_same) return Dims{dst[0], bd.back()};
  return std::nullopt;
}

// A binary post-op computes dst (op) operand. Only add and mul give the same bits with the operands
// swapped, so for the others the producer's result must be the node's first operand.
std::optional<std::vector<PostOp>> binary_step(const ir::Graph& g, const ir::Node& c, const std::string& v,
                                               const Dims& dst) {
  const auto alg = binary_alg(c.op);
  if (!alg || c.inputs.size() != 2) return std::nullopt;
  const size_t at = c.inputs[0] == v ? 0 : 1;
  if (at == 1 && *alg != Alg::binary_add && *alg != Alg::binary_mul) return std::nullopt;
  const Shape& y = g.types.at(c.outputs.at(0)).shape;
  if (y != g.types.at(v).shape) return std::nullopt;
  const std::string& other = c.inputs[1 - at];
  const auto od = operand_dims(g.types.at(other).shape, y, dst);
  if (!od) return std::nullopt;
  return std::vector<PostOp>{PostOp{*alg, 0, 0, other, *od}};
}

// The post-ops node c becomes when it reads v, the chain's result so far; nothing if it cannot.
std::optional<std::vector<PostOp>> absorb(const ir::Graph& g, const ir::Node& c, const std::string& v,
                                          const Dims& dst) {
  if (c.outputs.size() != 1) return std::nullopt;
  if (c.inputs.size() == 1) {
    const auto chain = eltwise_chain(c.op, c.attrs);
    if (!chain) return std::nullopt;
    std::vector<PostOp> steps;
    for (const Eltwise& e : *chain) steps.push_back(PostOp{e.alg, e.alpha, e.beta, {}, {}});
    return steps;
  }
  return binary_step(g, c, v, dst);
}

}  // namespace

std::vector<Fusion> plan_fusions(const ir::Graph& g) {
  std::map<std::string, int> reads;
  std::map<std::string, size_t> reader;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (const auto& v : g.nodes[i].inputs) ++reads[v], reader[v] = i;
  std::vector<Fusion> out;
  // A node joins one fusion at most: mul(dense, matmul) reads two producers' results, and only one of them
  // can take the mul as its post-op (the other's result is then the post-op's operand).
  std::vector<bool> claimed(g.nodes.size(), false);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (g.nodes[i].outputs.size() != 1) continue;
    const auto dst = producer_dst(g, g.nodes[i]);
    if (!dst) continue;
    Fusion f;
    f.producer = i;
    std::string v = g.nodes[i].outputs[0];
    while (!is_graph_output(g, v) && reads[v] == 1) {
      const size_t k = reader.at(v);
      const auto steps = claimed[k] ? std::nullopt : absorb(g, g.nodes[k], v, *dst);
      if (!steps) break;
      claimed[k] = true;
      f.consumers.push_back(k);
      f.steps.push_back(*steps);
      v = g.nodes[k].outputs[0];
    }
    if (!f.consumers.empty()) out.push_back(std::move(f));
  }
  return out;
}

}  // namespace quorum::backends::onednn_lower
