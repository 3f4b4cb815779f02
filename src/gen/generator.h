// Model generators, selectable by name, and what every caller does with their models: draw the
// weights and a batch of data, check validity (IR validation, then the float64 reference), and
// summarise a run (operators used, nodes per model, validity with reasons).
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "gen/builder.h"
#include "gen/feedback.h"
#include "ref/interpreter.h"

namespace quorum::gen {

struct GenOptions {
  std::string generator = "muffin";
  uint64_t seed = 1;
  int max_nodes = 10;         // muffin max_v; ws/rn n
  int max_cells = 5;          // muffin max_c
  bool invalid_params = false;  // zoo: one deliberately invalid attribute value per model
  double mutation_rate = 0.1;   // mutate: r
  std::vector<ir::Graph> seed_models;  // mutate: models to mutate (none: generated ws/rn models)
  Limits limits;
  // --ops / --skip_ops: the catalogue operators a model may hold (empty: all) and those it may not.
  // The generators draw their layers from the allowed ones; a model that still holds another (the
  // builder's glue: reshape, flatten, the dense + softmax head, the guards' clip, ...; a zoo
  // architecture) is drawn again, a few times, then skipped as invalid.
  std::vector<std::string> only_ops, skip_ops;
  // mcts: the coverage it is guided by (not owned; none: every block counts as uncovered), the
  // models simulated per selected path (tc2) and the depth limit (tc1).
  Feedback* feedback = nullptr;
  int mcts_visits = 1;
  int mcts_depth = 10;
  // muffin: the layer-type counts its fitness-proportionate choice starts from (by operator name; none:
  // every type at 0). A campaign gives each model the counts of the models before its epoch
  // (campaign/model_source.h), so that the choice counts over the whole campaign.
  std::map<std::string, int64_t> layer_counts;
  // --dtype int8: every model quantized (gen/quantize.h) once its weights and batch are drawn; the unit
  // generator cycles the quantized operators instead of the float ones.
  bool quantized = false;
};

// Whether `op` may appear in models of `opt` (--ops, --skip_ops).
bool op_allowed(const GenOptions& opt, const std::string& op);

class Generator {
 public:
  virtual ~Generator() = default;
  virtual std::string name() const = 0;
  // The operators this generator may place: the denominator of its functionality coverage.
  virtual std::vector<std::string> operators() const = 0;
  // The architecture of model `index`, drawn from `rng` (and the generator's own state, such as
  // Muffin's selection counts, which models generated in order share).
  virtual Model generate(uint64_t index, core::Rng& rng) = 0;
  // What running model `index` gave: `success` when it found a new root cause (a generator that
  // learns, mcts, rewards the choices that made it). Called after generate(index), in model order
  // when one job runs the models.
  virtual void outcome(uint64_t /*index*/, bool /*success*/) {}
};

// UserError on an unknown name or bad options (a mutation rate outside [0, 1), an operator of --ops
// or --skip_ops that is not in the catalogue).
std::unique_ptr<Generator> make_generator(const GenOptions& opt, const data::Source& source);
const std::vector<std::string>& generator_names();
// The zoo's architectures in model-index order (zoo model i is architecture i % 7, as published for
// i < 7): lenet5, resnet20, vgg16, mobilenet_v2, simple_rnn, lstm, gru.
const std::vector<std::string>& zoo_architectures();

// One finished model: weights drawn, and a batch for its inputs.
struct Generated {
  ir::Graph graph;
  data::DataSpec data;
  bool invalid_by_design = false;
  std::string note;
  ref::ValueMap inputs;  // one tensor per graph input (float64)
  core::Tensor target;   // the task's target when the model's first output has its shape
};

// The one derivation of model i's randomness, shared by `quorum gen` and campaigns (and therefore
// by `quorum gen --index I`, which writes a campaign's model I): the architecture draws from
// model_rng(seed, i) = Rng(seed).derive("model:i"), its weights from that stream's
// derive("weights"), its batch from derive("data"); what a campaign adds to the case (inputs a
// generator left undrawn, the loss target) from case_rng(seed, i) = Rng(seed).derive("data:i").
core::Rng model_rng(uint64_t seed, uint64_t index);
core::Rng case_rng(uint64_t seed, uint64_t index);

// Generates models 0, 1, ... in order, model i from model_rng(seed, i), so that drawing weights
// or data never changes an architecture. The generator is shared by the stream's models (Muffin's
// selection counts carry over from one model to the next); a campaign makes each model with a
// fresh generator instead, so from the second model on a Muffin stream differs from a campaign of
// the same seed (`quorum gen --index I` writes the campaign's model I).
class Stream {
 public:
  Stream(const GenOptions& opt, const data::Source& source);
  Model next_architecture();  // fast: no weights
  Generated next();           // architecture, weights and data
  uint64_t index() const { return index_; }
  Generator& generator() { return *gen_; }

 private:
  const data::Source& source_;
  std::unique_ptr<Generator> gen_;
  uint64_t seed_;
  uint64_t index_ = 0;
};

// Draws weights and data for an architecture (the second half of Stream::next).
Generated finish_model(Model m, core::Rng& model_rng, const data::Source& source);

// Validity: IR validation passes and the reference runs the model on its inputs without error.
struct Verdict {
  bool valid = true;
  std::string reason;  // "validate: ..." or "reference: ..."
};
Verdict check_model(const ir::Graph& g, const ref::ValueMap& inputs, bool allow_invalid_attrs = false);

// What `quorum gen` prints, gathered model by model.
struct Summary {
  uint64_t models = 0, valid = 0, by_design = 0, by_design_rejected = 0;
  size_t min_nodes = 0, max_nodes = 0, total_nodes = 0;
  std::map<std::string, uint64_t> op_nodes;   // nodes per operator
  std::map<std::string, uint64_t> op_models;  // models using each operator
  std::map<std::string, uint64_t> invalid;    // reason (node names and numbers elided) -> count
  std::map<std::string, uint64_t> accepted_invalid;  // by design, yet validated and ran: reason -> count
  void add(const Generated& g, const Verdict& v);
  // Operators of `universe` never used.
  std::vector<std::string> missing(const std::vector<std::string>& universe) const;
  std::string text(const std::vector<std::string>& universe) const;
};

// A reason with node names and numbers elided, so that like failures are counted together.
std::string reason_key(const std::string& reason);

}  // namespace quorum::gen
