// The block corpus of graph-based fuzzing: every single operator, and subgraphs that inference
// engines fuse or rewrite (conv+bias+relu, conv+bn+relu, conv+relu+pow+concat, conv+conv+add+add,
// a multi-scale concat, matmul+add+gelu, ...). Each block lists its allowed in-degrees and its
// operators with their inner edges; the builder instantiates it with fitted parameters.
#pragma once
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gen/builder.h"

namespace quorum::gen {

// Where an operator of a block reads an input from.
namespace block_ref {
constexpr int kAllPorts = -50;      // every input of the block, in order
constexpr int kConstChannel = -100;  // a weight shaped [1, C, 1, ...] after the op's first input (a bias)
constexpr int kConstLast = -101;     // a weight shaped [last dim of the first input]
constexpr int kConstMatrix = -102;   // a weight [last dim of the first input, H], or a stack [..., K, H]
constexpr int port(int k) { return -1 - k; }  // block input k
}  // namespace block_ref

struct BlockOp {
  std::string op;
  std::vector<int> inputs;  // >= 0: an earlier op of the block; block_ref::port(k), kAllPorts or kConst*
  Attrs fixed = {};
  Want want = {};
  bool per_port = false;   // one copy per block input (reading port(0) means "its" input)
  int channels_of = -1;    // >= 0: out_channels = the channel count of block input channels_of
};

struct Block {
  std::string name;
  int min_in = 1, max_in = 1;  // allowed in-degree; max_in -1 means any
  std::vector<BlockOp> ops;    // the last op's output is the block's output
  bool subgraph() const { return ops.size() > 1; }
  bool accepts(int in_degree) const { return in_degree >= min_in && (max_in < 0 || in_degree <= max_in); }
  // Inner edges (from op, to op), as the corpus of the paper lists them.
  std::vector<std::pair<int, int>> edges() const;
};

// Single operators (every non-loss catalogue operator) first, then the subgraphs.
const std::vector<Block>& block_corpus();

// Instantiates `block` on `in` (its size must be accepted). Leaves nothing behind on failure.
std::optional<Vid> instantiate(const Block& block, Builder& b, const std::vector<Vid>& in);

}  // namespace quorum::gen
