// One model through every backend and the oracles: the unit of work of a campaign and of replay.
#pragma once
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "campaign/learned_refusals.h"
#include "core/rng.h"
#include "oracle/known.h"
#include "oracle/oracle.h"
#include "worker/supervisor.h"
#include "worker/worker_set.h"

namespace quorum::campaign {

enum class Mode { Infer, Train, Both };
Mode mode_from_string(const std::string& s);  // UserError for anything but infer|train|both
const char* to_string(Mode m);

// The backend specs and worker sets live with the workers (the conformance runner uses them too).
using worker::BackendSpec;
using worker::parse_backends;
using worker::WorkerSet;

struct Setup {
  std::vector<BackendSpec> backends;  // the libraries; the reference always takes part in-process
  Mode mode = Mode::Both;
  core::DType dtype = core::DType::F32;
  int threads = 1;
  std::string loss = "mse_loss";
  double learning_rate = 0.01;
  oracle::Thresholds thresholds;
  worker::Limits limits;
  // The known-issue ledgers: findings matching an entry are labelled with its id (none: no labels).
  std::shared_ptr<const oracle::Ledger> known;
  // Refusals the backends declared so far (none: every model goes to every backend). A model holding
  // one is not sent to that backend, which abstains on it (docs/findings.md, "Learned refusals").
  std::shared_ptr<LearnedRefusals> refusals;
  // The optimized run (--optimized on): every backend that optimizes (backends::Backend::optimizes) also
  // compiles the model with only its graph outputs asked for and runs it on the same inputs, after a
  // pinned run that ran normally; the oracle judges it as stage OC. evaluate_batch (a search's
  // generations) does not make it.
  bool optimized = true;
  // The batch relation (--batch_relation on, stage BR): after the pinned runs, every graph input whose axis 0
  // is the first input's (N samples) is widened to a batch drawn per model (sizes around vector widths:
  // 3 .. 65), the model's own samples placed at a drawn position among fresh ones; each library that ran the
  // model runs it again so, and oracle::judge_batch_relation judges its rows. The draw is a function of the
  // case's input values; `batch` > 0 fixes it (replay and reduction of a BR finding, from its bundle), the
  // position then clamped to fit. evaluate_batch does not make it.
  struct BatchRelation {
    bool on = false;
    int64_t batch = 0, position = 0;
  } batch_relation;
  // The form relation (--form_relation on, stage FR): after the pinned runs (and the batch relation's), every
  // library that read the model as exported ONNX reads it again in its `draw`-th other exchange form
  // (ir::Graph::form_draw: another opset and other spellings of its nodes, drawn from the model's form seed)
  // and runs it on the same inputs; oracle::judge_form_relation judges every node. evaluate_batch does not
  // make it.
  struct FormRelation {
    bool on = false;
    uint64_t draw = 1;
  } form_relation;
  // The position relation (--position_relation on, stage PR): after the pinned runs, one axis other than the
  // batch of the first graph input (the last one half the time; N positions) is widened, in every graph input
  // of its rank that has N there, to a length drawn as the batch relation draws batches, the model's own values
  // at a drawn offset and fresh values around them (plain uniform draws without edge values: the model's own
  // values carry those; a fresh infinity a softmax over the widened axis takes in would make float32's NaN
  // where the float64 limit equals the model's run, seed 10531); each library that ran the model runs it again so, and
  // oracle::judge_position_relation judges its positions of the model's values wherever the float64 reference
  // shows them decided by those values alone (a convolution's border, which reads the fresh neighbours, is not).
  // Where a shape rule ties the axis to its length (a dense head's features, a reshape's shape), the wider
  // model is the longest valid run of the model's first nodes; an axis that ties the first node is not drawn.
  // The draw is a function of the case's input values; `length` > 0 fixes it (with `axis`; the offset then
  // clamped to fit). evaluate_batch does not make it.
  struct PositionRelation {
    bool on = false;
    int axis = 0;
    int64_t length = 0, position = 0;
  } position_relation;
};

struct ModelCase {
  ir::Graph graph;
  backends::ValueMap inputs;  // float64 values; every backend receives them rounded to the dtype
  core::Tensor target;
};

// Seconds spent per phase, summed over a campaign.
struct Timing {
  double generate = 0, compare = 0, store = 0, reference = 0, reduce = 0;
  // Generation that overlapped the job's previous model on the libraries (a job draws its next model
  // while the current one runs): off the hot path, so not in overhead(), but on the same cores.
  double generate_ahead = 0;
  std::map<std::string, double> compile, run;  // per backend
  std::map<std::string, double> optimized;     // per backend: the optimized run's compile and run
  std::map<std::string, double> batched;       // per backend: the batch relation's compile and run
  std::map<std::string, double> formed;        // per backend: the form relation's compile and run
  std::map<std::string, double> positioned;    // per backend: the position relation's compile and run
  void add(const Timing& o);
  // The libraries' own time (every backend's compile and run) and the campaign's overhead on the
  // models' hot path: generate, reference, compare and store (reduction is counted apart).
  double libraries() const;
  double overhead() const { return generate + reference + compare + store; }
};

// A backend the model was not sent to, because of a learned refusal.
struct NotSent {
  std::string backend;
  backends::Refusal refusal;
  std::vector<std::string> ops;  // the catalogue operators of the nodes it covers
};

struct Evaluation {
  std::vector<oracle::BackendRun> runs;  // the reference first
  std::vector<oracle::Finding> findings;
  std::vector<NotSent> not_sent;
  // Per backend that ran the model and reads it as exported ONNX: what its lowering says it read,
  // per node ("onnx opset N", "onnx form what=form,...": backends::Session::lowering).
  std::map<std::string, std::map<std::string, std::vector<std::string>>> exchange;
  // The batch relation's draw when it was made (Setup::batch_relation): the batch and the samples' position.
  int64_t batch = 0, position = 0;
  // The position relation's draw when it was made (Setup::position_relation; length 0: not made).
  Setup::PositionRelation positioned;
};

Evaluation evaluate(const ModelCase& m, const Setup& setup, WorkerSet& workers, Timing* timing = nullptr);

// Many cases of one model (the same nodes, inputs and outputs; their own input values, targets and
// weights), as evaluate() judges each, with one worker call per backend (worker::Worker::batch: a
// search's generation in one round trip). When a worker dies or hangs in the batch, every case is
// run again alone on it, so the crash is told to the case that caused it.
std::vector<Evaluation> evaluate_batch(const std::vector<ModelCase>& ms, const Setup& setup, WorkerSet& workers,
                                       Timing* timing = nullptr);

// The batch relation's case for a model `g` fed `inputs` (as the libraries received them, rounded to the
// dtype): every graph input whose axis 0 is the first input's (`samples` of them) widened to `batch`, the
// model's own samples at rows [position, position + samples), fresh samples (data::complete_inputs) around
// them; the batch and position drawn from the input values, or Setup::batch_relation's when fixed. nullopt
// where the model has no such axis or its shape rules refuse the wider batch.
struct WideCase {
  ir::Graph graph;
  backends::ValueMap inputs;  // rounded to the dtype
  backends::ValueMap fresh;   // the same with fresh samples in the model's rows too
  std::set<std::string> widened;
  int axis = 0;  // the widened axis: 0 (the batch), or the position relation's
  int64_t samples = 0, batch = 0, position = 0;  // along `axis`: the model's length, the wide one, the offset
};
std::optional<WideCase> wide_case(const ir::Graph& g, const backends::ValueMap& inputs, const Setup& setup);
// The position relation's case (Setup::position_relation): the same along the drawn axis (`batch` its wide
// length; the graph the longest valid run of the model's first nodes where a later one ties the axis), or
// nullopt where no axis other than the first input's batch can be widened.
std::optional<WideCase> positioned_case(const ir::Graph& g, const backends::ValueMap& inputs, const Setup& setup);

// Fills what a model case lacks with data/values.h: inputs for every graph input not given
// (data::complete_inputs, the one edge-value policy), and a target for the loss
// (data::loss_target), unless one of the output's shape is given.
void complete_case(ModelCase& m, const std::string& loss, core::Rng& rng);

// The losses of the catalogue that can train `g` (its output 0): the shape rule accepts the output
// as a prediction, and a loss whose prediction has a valid range (binary cross-entropy's (0, 1))
// only where the output's static range lies within that range's closure (ref::analyze_ranges on the
// campaign's input range): its predictions then sit on or next to the domain's edges where they
// saturate. In catalogue order.
std::vector<std::string> losses_for(const ir::Graph& g);
// Whether the loss `loss`'s shape rule takes `g`'s output 0 as its prediction (with a target of the same
// shape, as campaigns draw it): the first of losses_for's tests.
bool loss_takes(const std::string& loss, const ir::Graph& g);
// One of losses_for(g), drawn from `rng` (mse_loss's family first if none: the catalogue's
// any-shape loss).
std::string choose_loss(const ir::Graph& g, core::Rng rng);

}  // namespace quorum::campaign
