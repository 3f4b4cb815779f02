// What ArmNN 20.08's optimizer did to the network ArmNN's lowering built: the optimized run's "fused ..."
// lowering entries (backends/backend.h kFusedPrefix), per Quorum node. Free of ArmNN's headers (built
// with the lowering, so tests drive it without the library): the backend records the network as built
// (NetworkRecorder around its sink) and gives the layer names IOptimizedNetwork::SerializeToDot lists.
//
// What Optimize does, measured on Debian's libarmnn22 with CpuRef (a conv -> batch norm -> relu chain, a
// pad before it, reshape and transpose chains; each with only the final output bound, then with every
// intermediate bound): its one pass list is SquashEqual{Permute,Transpose,Reshape}Siblings,
// OptimizeInverse{Permutes,Transposes}, Move{Permute,Transpose}Up, {Permute,Transpose}AsReshape,
// OptimizeConsecutiveReshapes, FoldPadIntoConvolution2d, PermuteAndBatchToSpaceAsDepthToSpace. It fuses
// nothing else (libarmnn22 has none of the FuseBatchNorm passes later releases add: Convolution2d,
// BatchNormalization and Activation stay three layers). A pass that makes a layer names it after the
// layers it replaces ("folded-PAD-into-CONV",
// "merged-BASE-with-CHILD", "as_reshape-T", "moved_up-T", nested as passes repeat); one that bypasses
// layers just drops them (an inverse transpose pair, an equal sibling, a reshape pair that restores the
// shape — also a Transpose of size-1 axes made a Reshape and the Reshape after it, as reduce_min's lowering
// gives), and layers left without consumers are erased. An output layer keeps its layer, but the folds
// still happen beside it: with every node output bound the Pad stays and the folded convolution is
// added, and a reshape whose output is bound is not merged with the next.
#pragma once
#include <map>
#include <set>
#include <string>
#include <vector>

#include "backends/armnn/lower.h"

namespace quorum::backends::armnn_lower {

// One layer of the network as built, by its sink handle.
struct BuiltLayer {
  std::string name;         // as the lowering named it ("NODE/what#N"), or the graph input's name
  std::string type;         // ArmNN's layer type as SerializeToDot names it ("Reshape"; "Input")
  std::string params;       // describe() of the layer: equal siblings are equal here
  std::string node;         // the Quorum node it was added for ("" for an input layer)
  std::vector<int> inputs;  // the handles feeding it, in slot order
  bool as_reshape = false;  // a Transpose that moves only axes of size 1 (TransposeAsReshape makes it a Reshape)
  // A Pad's parameters FoldPadIntoConvolution2d gets wrong when it folds it (the ledger's entries
  // armnn-foldpad-conv2d-*): "pad value" (not 0), "channel axis" (a pad of axis 0 or 1).
  std::vector<std::string> fold_defects;
};

struct BuiltNetwork {
  std::map<int, BuiltLayer> layers;
  std::vector<int> outputs;                // the handles bound to output layers
  std::vector<std::string> output_names;  // and those output layers' names
};

// A sink that forwards every call to another and records the network built.
class NetworkRecorder : public LayerSink {
 public:
  explicit NetworkRecorder(LayerSink& inner) : inner_(inner) {}
  int input(size_t index, const std::string& name, const Shape& shape, const Quant& q) override;
  int layer(const Layer& layer, const std::vector<Value>& inputs, const Shape& out, const Quant& q,
            const std::string& name) override;
  void output(size_t index, const std::string& name, const Value& v) override;
  void node(const ir::Node& n) override;
  void defined(const std::string& value, const Value& v) override { inner_.defined(value, v); }
  void comment(const std::string& text) override { inner_.comment(text); }
  const BuiltNetwork& network() const { return net_; }

 private:
  LayerSink& inner_;
  BuiltNetwork net_;
  std::string node_;
};

// The layer names in IOptimizedNetwork::SerializeToDot's text, as it writes them ('<' and '>' escaped).
std::set<std::string> dot_layer_names(const std::string& dot);

// Per Quorum node, what the optimizer did to its layers, each entry "fused PASS" with ArmNN's pass name
// ("fused FoldPadIntoConvolution2d", "fused OptimizeConsecutiveReshapes"): from the layers of `built` that
// a layer of the optimized network (`optimized`: dot_layer_names) names, and the ones that are gone. A
// layer that fed no output layer (erased as unused) is not an entry: no output shows what it computed.
// A fold of a Pad the pass mishandles also gives "fused FoldPadIntoConvolution2d (DEFECT)" (fold_defects)
// on both nodes: the optimized stage's signatures then tell the known defects from a correct fold.
std::map<std::string, std::vector<std::string>> optimizer_passes(const BuiltNetwork& built,
                                                                 const std::set<std::string>& optimized);

}  // namespace quorum::backends::armnn_lower
