// The one shape-checked graph builder every generator uses. Each node is checked by its operator's
// shape rule as it is added, so a finished model is valid by construction. The builder picks
// parameters that fit (gen/params.h), brings inputs to what an operator takes with reshaping layers
// (a rank it accepts; one shape for the inputs of a merge), guards the operands of vulnerable
// operations, and shapes output layers for the task. A rejected draw is repaired before the next
// is tried, and draws are bounded by count, never by time, so a seed gives the same model anywhere.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "data/dataset.h"
#include "gen/params.h"
#include "ir/graph.h"

namespace quorum::gen {

// A generated architecture: the graph and the weights still to draw. Drawing weights is a separate
// step (materialize) so that generating architectures stays fast.
struct Model {
  ir::Graph graph;  // nodes in topological order; every node output typed; initializers may be partial
  std::vector<std::pair<std::string, ops::ParamSpec>> pending;  // initializers to draw, in creation order
  data::DataSpec data;                   // the input and task the model was built for
  std::vector<ops::InputGen> input_gen;  // per graph input value ranges, when not from `data` (unit)
  bool invalid_by_design = false;        // carries a deliberately invalid attribute value
  std::string note;                      // what was made invalid, and other remarks
  // The layer types the generator chose by name, each with how often (Muffin: its fitness counts'
  // increments), so a campaign can sum them over its models (GenOptions::layer_counts).
  std::map<std::string, int64_t> picks;
  // Quantize the model once its weights and batch are drawn (GenOptions::quantized; gen/quantize.h).
  bool quantize = false;
};

// Draws every pending weight with ops::init_param (in creation order) in the dtype its ParamSpec
// names, and moves the graph out. Does not validate.
ir::Graph materialize(Model m, core::Rng& rng);

using Vid = int;  // a value of the graph being built

class Builder {
 public:
  Builder(core::Rng& rng, const Limits& lim = {}, core::DType dtype = core::DType::F32);

  // A graph input, and a weight used as a data operand (a bias added by `add`, a matmul's matrix).
  Vid input(const Shape& shape, const std::string& name = "input");
  Vid constant(const Shape& shape, ops::Init init, const std::string& tag);
  // An initializer kept as it is (a constant of an imported model).
  Vid constant(const std::string& name, const core::Tensor& value);

  const TensorType& type(Vid v) const { return vals_[static_cast<size_t>(v)].type; }
  const Shape& shape(Vid v) const { return type(v).shape; }
  int rank(Vid v) const { return static_cast<int>(shape(v).size()); }
  const std::string& name(Vid v) const { return vals_[static_cast<size_t>(v)].name; }

  // Exactly this node (attributes canonicalised). Throws core::OpError when the shape rule fails;
  // nothing is added then.
  Vid add(const std::string& op, const std::vector<Vid>& in, const Attrs& attrs = {});
  // Parameters that fit the inputs as they are: `fixed` as given, the rest drawn; each rejected
  // draw is repaired and retried, then redrawn, at most Limits::tries draws (the last
  // conservative). nullopt when nothing fits within the limits.
  std::optional<Vid> place(const ops::OpSpec& spec, const std::vector<Vid>& in, const Attrs& fixed = {},
                           const Want& want = {});
  // A layer in Muffin's sense: place(), after bringing the inputs to what the operator takes (a rank
  // a single-input operator accepts; one shape for a merge; [.., M, K] x [K, N] for matmul) and
  // guarding vulnerable operands. Leaves nothing behind when it fails.
  std::optional<Vid> layer(const ops::OpSpec& spec, std::vector<Vid> in, const Attrs& fixed = {},
                           const Want& want = {});
  // `attrs` kept if they fit (after a repair if needed); otherwise a fresh layer() of the same
  // operator. Used to rebuild mutated and recombined models.
  std::optional<Vid> adapt(const ops::OpSpec& spec, const std::vector<Vid>& in, const Attrs& attrs);

  // Reshaping layers: to a rank (same elements), and to an exact shape (reshape, transpose, crop
  // with slice, pad, or flatten + dense).
  Vid to_rank(Vid v, int rank);
  Vid to_shape(Vid v, const Shape& target);
  // The output layer of a task: classification flattens to [N, F], then dense to the classes and
  // softmax; regression flattens, then dense to the target's size (reshaped to the target).
  Vid head(Vid v, const data::DataSpec& d);
  void output(Vid v);

  // Probability that an operand of a vulnerable operation (log, sqrt, rsqrt, reciprocal, pow, the
  // divisor of div) is first clipped into its valid range. Unguarded ones exercise NaN handling.
  void set_guard_probability(double p) { guard_p_ = p; }

  struct Mark {
    size_t nodes, vals, pending, inputs, counter;
  };
  Mark mark() const;
  void rollback(const Mark& m);

  size_t node_count() const { return g_.nodes.size(); }
  // The node added last: the one place/layer/adapt just returned (reshaping comes before it).
  const ir::Node& last_node() const { return g_.nodes.back(); }
  // Uses `value` for the pending weight `name` instead of drawing one, when the types agree (a
  // rebuilt model keeps the weights of the nodes a mutation left alone). Not undone by rollback.
  bool keep_weight(const std::string& name, const core::Tensor& value);
  core::Rng& rng() { return rng_; }
  const Limits& limits() const { return lim_; }
  // Whether the glue may place `op` (Limits::glue).
  bool glue_ok(const std::string& op) const;
  Model finish(const std::string& name, const data::DataSpec& d);

 private:
  struct Val {
    std::string name;
    TensorType type;
  };
  std::vector<TensorType> types_of(const std::vector<Vid>& in) const;
  std::optional<Vid> try_node(const ops::OpSpec& spec, const std::vector<Vid>& in,
                              const std::vector<TensorType>& types, Attrs a, const Attrs& fixed, bool check_limits);
  bool within_limits(const ops::Signature& sig) const;
  Vid emit(const ops::OpSpec& spec, const std::vector<Vid>& in, Attrs attrs, const ops::Signature& sig);
  // A reshaping layer whose every attribute and output shape the builder computed itself (reshape to
  // a shape of equal size, a crop inside the bounds, a pad): added without calling the shape rule,
  // whose eager error messages cost more than the rest of generation. ir::validate, which quorum
  // gen and the tests run on every model, checks these nodes like any other.
  Vid emit_known(const std::string& op, Vid in, Attrs full_attrs, const Shape& out);
  std::optional<std::vector<Vid>> prepare_merge(const ops::OpSpec& spec, std::vector<Vid> in, Attrs& fixed,
                                                const Want& want);
  std::vector<Vid> guard(const ops::OpSpec& spec, std::vector<Vid> in);
  Vid crop_and_pad(Vid v, const Shape& target);

  core::Rng& rng_;
  Limits lim_;
  core::DType dtype_;
  double guard_p_ = 0.9;
  ir::Graph g_;
  std::vector<Val> vals_;
  std::vector<std::pair<std::string, ops::ParamSpec>> pending_;
  size_t counter_ = 0;  // node-name counter
};

// The graph outputs of a generated DAG: the values of its `sinks` (vertex v's value is val[v]), the
// last sink first (output 0 is the one a loss is put on), each value once and never the input `x`;
// a relu of `x` when none is left.
void output_sinks(Builder& b, std::vector<int> sinks, const std::vector<Vid>& val, Vid x);

}  // namespace quorum::gen
