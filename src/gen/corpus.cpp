// The block corpus and its instantiation.
#include "gen/corpus.h"

#include "gen/factories.h"
#include "ops/registry.h"

namespace quorum::gen {
namespace {

using Ints = std::vector<int64_t>;

Want keep() {
  Want w;
  w.keep_spatial = true;
  return w;
}

Want bcast() {
  Want w;
  w.broadcast = true;
  return w;
}

Want keep_same_channels() {
  Want w = keep();
  w.channels = -1;
  return w;
}

Want depthwise() {
  Want w = keep();
  w.depthwise = true;
  return w;
}

std::vector<Block> subgraphs() {
  using namespace block_ref;
  const Attrs k1{{"kernel_shape", Ints{1, 1}}, {"strides", Ints{1, 1}}, {"pads", Ints{0, 0, 0, 0}}};
  return {
      // BiasAdd after a bias-free convolution, then the activation: the classic fusion.
      {"conv+bias+relu", 1, 1,
       {{"conv2d", {port(0)}, {{"bias", int64_t{0}}}}, {"add", {0, kConstChannel}, {}, bcast()}, {"relu", {1}}}},
      {"conv+bn+relu", 1, 1, {{"conv2d", {port(0)}}, {"batch_norm", {0}}, {"relu", {1}}}},
      // Graph-based fuzzing's subgraph: inner edges (0,1), (1,3), (2,3).
      {"conv+relu+pow+concat", 2, 2,
       {{"conv2d", {port(0)}, {}, keep()},
        {"relu", {0}},
        {"pow", {port(1)}},
        {"concat", {1, 2}, {{"axis", int64_t{1}}}}}},
      // And its other: inner edges (0,2), (1,2), (2,3), (2,3).
      {"conv+conv+add+add", 2, 2,
       {{"conv2d", {port(0)}, {}, keep()}, {"conv2d", {port(1)}, {}, keep()}, {"add", {0, 1}}, {"add", {2, 2}}}},
      // SSD's multi-scale head: a convolution per feature map, flattened, concatenated.
      {"multi-scale concat", 2, 6,
       {{"conv2d", {port(0)}, {}, {}, true},
        {"flatten", {0}, {{"axis", int64_t{1}}}, {}, true},
        {"concat", {1}, {{"axis", int64_t{1}}}}}},
      // Inception: parallel branches that keep the spatial size, joined on channels.
      {"inception", 1, 1,
       {{"conv2d", {port(0)}, k1, keep()},
        {"conv2d", {port(0)}, {}, keep()},
        {"max_pool2d", {port(0)}, {}, keep()},
        {"concat", {0, 1, 2}, {{"axis", int64_t{1}}}}}},
      // A transformer's projection: matmul with a weight, bias add, GELU.
      {"matmul+add+gelu", 1, 1,
       {{"matmul", {port(0), kConstMatrix}}, {"add", {0, kConstLast}, {}, bcast()}, {"gelu", {1}}}},
      {"dense+relu", 1, 1, {{"dense", {port(0)}}, {"relu", {0}}}},
      // MobileNet's depthwise-separable convolution.
      {"separable conv+relu6", 1, 1,
       {{"conv2d", {port(0)}, {}, depthwise()}, {"conv2d", {0}, k1}, {"relu6", {1}}}},
      // ResNet's basic block: the input skips two convolutions and is added back.
      {"residual", 1, 1,
       {{"conv2d", {port(0)}, {}, keep_same_channels()},
        {"relu", {0}},
        {"conv2d", {1}, {}, keep_same_channels()},
        {"add", {port(0), 2}},
        {"relu", {3}}}},
      // Swish / SiLU: x * sigmoid(x), fused by most engines.
      {"swish", 1, 1, {{"sigmoid", {port(0)}}, {"mul", {port(0), 0}}}},
      // Squeeze-and-excitation: channel weights from a pooled summary scale the input.
      {"squeeze-excite", 1, 1,
       {{"global_avg_pool", {port(0)}},
        {"conv2d", {0}, k1},
        {"relu", {1}},
        {"conv2d", {2}, k1, {}, false, 0},
        {"sigmoid", {3}},
        {"mul", {port(0), 4}, {}, bcast()}}},
      // Attention's core: scores, softmax over keys, weighted sum of values.
      {"matmul+softmax+matmul", 2, 2,
       {{"matmul", {port(0), port(1)}}, {"softmax", {0}, {{"axis", int64_t{-1}}}}, {"matmul", {1, port(1)}}}},
      // A transformer's feed-forward: layer norm, dense, GELU, dense.
      {"layernorm+dense+gelu+dense", 1, 1,
       {{"layer_norm", {port(0)}, {{"axis", int64_t{-1}}}}, {"dense", {0}}, {"gelu", {1}}, {"dense", {2}}}},
      // An explicit pad that engines fold into the following convolution.
      {"pad+conv", 1, 1, {{"pad", {port(0)}}, {"conv2d", {0}, {{"auto_pad", std::string("VALID")}}}}},
      // ReLU6 spelled as clip(0, 6) after a convolution (TFLite's fused activation).
      {"conv+clip", 1, 1,
       {{"conv2d", {port(0)}}, {"clip", {0}, {{"min", 0.0}, {"max", 6.0}}}}},
      // Multiply-add, which arithmetic optimisers turn into one fused op.
      {"mul+add", 2, 2, {{"mul", {port(0), port(1)}}, {"add", {0, port(0)}}}},
      // Pre-activation: batch norm and ReLU before the convolution.
      {"bn+relu+conv", 1, 1, {{"batch_norm", {port(0)}}, {"relu", {0}}, {"conv2d", {1}}}},
      // Pooling pyramid: pools of two sizes that keep the size, summed.
      {"pool pyramid", 1, 1,
       {{"max_pool2d", {port(0)}, {}, keep()}, {"avg_pool2d", {port(0)}, {}, keep()}, {"sum", {port(0), 0, 1}}}},
  };
}

}  // namespace

std::vector<std::pair<int, int>> Block::edges() const {
  std::vector<std::pair<int, int>> e;
  for (size_t i = 0; i < ops.size(); ++i)
    for (int r : ops[i].inputs)
      if (r >= 0) e.emplace_back(r, static_cast<int>(i));
  return e;
}

const std::vector<Block>& block_corpus() {
  static const std::vector<Block> corpus = [] {
    std::vector<Block> c;
    for (const ops::OpSpec* s : layer_operators()) {
      Block b;
      b.name = s->name;
      b.min_in = s->min_inputs;
      b.max_in = s->max_inputs == ops::kUnbounded ? -1 : s->max_inputs;
      BlockOp op;
      op.op = s->name;
      op.inputs = {s->multi_input() ? block_ref::kAllPorts : block_ref::port(0)};
      b.ops = {op};
      c.push_back(b);
    }
    for (auto& b : subgraphs()) c.push_back(std::move(b));
    return c;
  }();
  return corpus;
}

std::optional<Vid> instantiate(const Block& block, Builder& b, const std::vector<Vid>& in) {
  const Builder::Mark m = b.mark();
  std::vector<std::vector<Vid>> outs(block.ops.size());
  for (size_t i = 0; i < block.ops.size(); ++i) {
    const BlockOp& bop = block.ops[i];
    const size_t copies = bop.per_port ? in.size() : 1;
    for (size_t rep = 0; rep < copies; ++rep) {
      std::vector<Vid> args;
      for (int r : bop.inputs) {
        if (r >= 0) {
          const auto& src = outs[static_cast<size_t>(r)];
          if (bop.per_port && block.ops[static_cast<size_t>(r)].per_port) args.push_back(src[rep]);
          else args.insert(args.end(), src.begin(), src.end());
        } else if (r == block_ref::kAllPorts) {
          args.insert(args.end(), in.begin(), in.end());
        } else if (r <= block_ref::kConstChannel) {
          const Shape& x = b.shape(args.at(0));
          Shape s;
          if (r == block_ref::kConstChannel && x.size() >= 2) {
            s.assign(x.size(), 1);
            s[1] = x[1];
          } else if (r == block_ref::kConstMatrix) {
            // A weight [K, H], or, for an operand of rank 3 or more, sometimes a stack of them whose leading
            // dimensions broadcast against the operand's batch dimensions (each its size or 1, some dropped).
            if (x.size() >= 3 && b.rng().bernoulli(0.3)) {
              const auto keep = static_cast<size_t>(b.rng().randint(1, static_cast<int64_t>(x.size()) - 2));
              for (size_t d = x.size() - 2 - keep; d + 2 < x.size(); ++d)
                s.push_back(b.rng().bernoulli(0.3) ? 1 : x[d]);
            }
            s.push_back(x.back());
            s.push_back(b.rng().randint(1, b.limits().max_units));
          } else {
            s = {x.back()};
          }
          args.push_back(b.constant(s, r == block_ref::kConstMatrix ? ops::Init::Normal : ops::Init::Zeros, "const"));
        } else {
          const int k = block_ref::port(0) - r;  // port(k) = -1 - k
          args.push_back(in.at(bop.per_port && k == 0 ? rep : static_cast<size_t>(k)));
        }
      }
      Want want = bop.want;
      if (bop.channels_of >= 0) {
        const Shape& x = b.shape(in.at(static_cast<size_t>(bop.channels_of)));
        if (x.size() >= 2) want.channels = x[1];
      }
      auto v = b.layer(ops::op(bop.op), args, bop.fixed, want);
      if (!v) {
        b.rollback(m);
        return std::nullopt;
      }
      outs[i].push_back(*v);
    }
  }
  return outs.back().at(0);
}

}  // namespace quorum::gen
