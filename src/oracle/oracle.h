// Oracles: from every backend's run of one model, the findings — forward (FC), loss (LC) and
// backward (BC) inconsistencies, NaN/Inf a library produced or swallowed, and crashes where at
// least one backend ran normally. Two rules judge the numbers: the per-node rule (the default:
// every node of every library against the catalogue's float64 kernel run on that library's own
// inputs and incoming gradients) and Muffin's pairwise "born here" rule with voting.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "core/finding_kind.h"
#include "ir/graph.h"
#include "worker/outcome.h"

namespace quorum::oracle {

// A finding's stage and kind: the one vocabulary of core/finding_kind.h.
using Stage = core::Stage;
using Kind = core::FindingKind;
using core::to_string;

// A library's optimized run of the model (backends::CompileOptions::optimized: only the graph outputs asked
// for, its optimizer free), made after a pinned run that ran normally.
struct OptimizedRun {
  bool ran = false;         // asked for: the backend optimizes and the campaign's optimized run is on
  worker::Outcome outcome;  // its compile and run
  backends::ValueMap values;  // the graph outputs
  std::map<std::string, std::vector<std::string>> lowering;  // per node, what the optimizer made of it
};

// The batch relation's run (stage BR): the library's run of the model with the graph inputs' batch axis
// (axis 0) widened to `batch`, the model's own samples at rows [position, position + N) of it (N: their
// number) and fresh samples around them. `values` hold, for every node output the float64 reference shows
// to be a function of its own sample alone (the reference's rows there equal its run of the model, bit for
// bit), the library's rows [position, position + N): shaped as the pinned run's.
struct RelationRun {
  bool ran = false;
  worker::Outcome outcome;
  backends::ValueMap values;
};
struct BatchRun : RelationRun {
  int64_t batch = 0, position = 0;
};

// The form relation's run (stage FR): the library's pinned run of the model read in another exchange form
// (ir::Graph::form_draw: another opset, other ONNX spellings of its nodes), on the same inputs; `values` every
// node output. Per node, the form each run read ("opset 12", "opset 12, gemm=matmul_add").
struct FormRun : RelationRun {
  std::map<std::string, std::string> pinned, other;
};

// The position relation's run (stage PR): the library's run of the model with axis `axis` of the graph inputs
// that share the first input's length N there widened to `length`, the model's own values at positions
// [position, position + N) and fresh values around them. `values` hold, for every node output that keeps the
// widened axis (at whatever axis of its own), the library's positions [position, position + N) there, shaped as
// the pinned run's; an element the float64 reference does not show to be decided by the model's own positions
// alone (its value there differs from its run of the model, bit for bit, or is NaN: a convolution's border
// that reads the fresh neighbours) holds the pinned run's value, so it agrees.
struct PositionRun : RelationRun {
  int axis = 0;
  int64_t length = 0, position = 0, samples = 0;
};

// What the position relation's judge needs of the wider model, once for every library: the model, its inputs
// and the float64 reference's values (its float32 envelope is that model's: fresh values a softmax over the
// widened axis takes in may make a float32 NaN the float64 limit does not show), and per judged value the axis
// that holds the widened one and the offset of the model's positions along it.
struct PositionCase {
  ir::Graph graph;
  backends::ValueMap inputs, reference;
  std::map<std::string, std::pair<size_t, int64_t>> placed;
};

// One backend's run of one model. NaN/Inf counts only where another library (not the float64
// reference, which does not overflow where float32 must) ran the same stage clean. Stages that did not run are empty.
struct BackendRun {
  std::string backend;
  bool is_reference = false;
  worker::Outcome outcome;  // the first non-ok outcome, or ok
  Stage failed_at = Stage::Compile;  // meaningful when !outcome.ok()
  bool unsupported = false;          // supports() said no: the backend abstains
  backends::ValueMap values;         // every node output (forward; the inference pass where one ran)
  // The training pass's own forward values when it ran beside an inference pass (mode both);
  // empty when `values` are that pass's. A library may compute its training forward differently
  // (oneDNN's RNNs run forward_training kernels), so the loss and the gradients are judged on
  // these and the forward on `values`.
  backends::ValueMap train_values;
  const backends::ValueMap& training_values() const { return train_values.empty() ? values : train_values; }
  bool trained = false;
  double loss = 0;
  core::Tensor loss_grad;
  backends::ValueMap grads;          // node outputs and weights
  OptimizedRun optimized;
  BatchRun batched;
  FormRun formed;
  PositionRun positioned;
};

// Which rule judges numbers. PerNode: each library node against the catalogue kernel on the
// library's own inputs (and own incoming gradient), within the operator's tolerance at the run's
// dtype; no voting, a single library suffices. Muffin: METHODS.md §1, pairs of backends, born
// where inputs agree and outputs do not, blame by vote. Each is one entry of oracle_rules().
enum class Rule : uint8_t { PerNode, Muffin };
Rule rule_from_string(const std::string& s);  // a rule's name; UserError naming the rules otherwise
const char* to_string(Rule r);

struct Thresholds {
  Rule rule = Rule::PerNode;
  core::DType dtype = core::DType::F32;  // the precision the libraries ran in: sets the tolerances
  double T = 0.15;       // a distance above T (and beyond the op's tolerance) is inconsistent
  double eps = 1e-5;     // inputs agree when below eps (or within the producing op's tolerance)
  bool relative_metric = false;  // the graph-fuzzing rule instead: >= 99.9% of elements within 0.1%
  double rel_share = 0.999, rel_err = 0.001;
  std::string loss_op = "mse_loss";  // the loss the trained runs used (named in LC findings)
  // The per-node rule's common case: a library value within the plain tolerance of the reference's
  // value at the same place (every operand and both values finite) passes without re-running the
  // kernels on the library's operands. Off: every value is judged by the kernels (the verdicts are
  // the same: tests/oracle/fast_path_test.cpp).
  bool fast_path = true;
};

struct Finding;

// A registered rule: its name (--oracle, a bundle's "oracle"), and the function that judges the
// numbers of one model's runs (the crash rule is common to every rule and runs first).
// Adding a rule is one entry in oracle.cpp's table (docs/ARCHITECTURE.md, "Adding an oracle rule").
using JudgeNumbers = std::vector<Finding> (*)(const ir::Graph& g, const std::vector<BackendRun>& runs,
                                              const Thresholds& th, const backends::ValueMap* inputs,
                                              const core::Tensor* target);
struct OracleRule {
  Rule rule;
  const char* name;
  const char* doc;  // one line for --help and docs
  JudgeNumbers judge;
};
const std::vector<OracleRule>& oracle_rules();
const OracleRule& oracle_rule(Rule r);

struct Finding {
  Kind kind = Kind::Inconsistency;
  Stage stage = Stage::Forward;
  std::string backend;            // blamed
  std::vector<std::string> against;  // the backends it disagreed with (inconsistency)
  std::string node, op;
  std::string params;             // the node's categorical attributes (modes, flags), rendered
  double distance = 0;            // Chebyshev distance (inconsistency)
  double rate = 0;                // change rate R at the node
  std::string message;            // outcome message (crash), normalised
  std::string detail;             // free text for people
  std::string known;              // the known-issue ledger entry it matches (oracle/known.h), or empty
  // The library operations the blamed backend ran for the node (backends::Session::lowering:
  // primitives, subgraph definitions, layers), forward and backward; empty where it does not say.
  std::vector<std::string> lowering;
  // Blamed on the reference: each library in `against`'s operations for the node, as `lowering` is for a library.
  std::map<std::string, std::vector<std::string>> against_lowering;
  // Whether the library's value is what the kernel gives on the library's operands with their float32
  // subnormals read as signed zeros (the denormals-are-zero mode some libraries compute in): the
  // per-node rule's evaluation that explains the finding, which a ledger pattern may require.
  bool subnormals_flushed = false;
  // Whether the libraries agreed with each other against the float64 reference ("ref").
  bool blames_reference() const { return backend == "ref"; }
  // The deduplication key: kind, stage, blamed backend, operator, and the categorical
  // attributes (inconsistency), nothing more (NaN: by layer type) or the normalised message (crash).
  // The optimized stage (OC) keys every numeric kind by `params`, which there name what the optimizer
  // did (its "fused ..." entries), not the attributes of the output's node.
  std::string signature() const;
};

// Chebyshev distance max |a - b|; NaN/Inf at the same positions count as equal, elsewhere as +inf.
double chebyshev(const core::Tensor& a, const core::Tensor& b);

// Numbers, hexadecimal addresses and paths replaced, so messages that differ only there match;
// whitespace collapsed to one space, none at the end.
std::string normalize_message(const std::string& msg);

// All findings for one model. `runs` holds every backend that took part (the reference too);
// `inputs` are the graph inputs every backend received (rounded to the run's dtype), `target` the
// loss target of the training step (the per-node rule needs both to recompute a library's nodes
// and loss on its own values; without them nodes fed by graph inputs and the loss are not judged).
std::vector<Finding> judge(const ir::Graph& g, const std::vector<BackendRun>& runs, const Thresholds& th,
                           const backends::ValueMap* inputs = nullptr, const core::Tensor* target = nullptr);

// The crash rule every oracle rule shares (judge() runs it first, then the rule's numbers): where at least
// one run succeeded, each run that failed — not refused, not Quorum's own failure (its exporter inside a
// worker, an unreadable reply) — is a crash at the stage it failed in, keyed by its normalised message, and
// at the node whose output the message names in single quotes ('conv2d_3' returned with a wrong shape).
std::vector<Finding> crash_findings(const ir::Graph& g, const std::vector<BackendRun>& runs);

// The batch relation (stage BR), whatever rule judges the numbers: each library's rows of the model's samples
// in a larger batch (BackendRun::batched) against its own pinned run and the float64 reference, node by node
// in order, within the whole-graph float32 envelope (oracle/second_run.h); the first node whose rows depart
// is the finding's (its operands did not). A batched run that failed where the pinned run ran is a crash.
std::vector<Finding> judge_batch_relation(const ir::Graph& g, const std::vector<BackendRun>& runs,
                                          const Thresholds& th, const backends::ValueMap* inputs);

// The form relation (stage FR), whatever rule judges the numbers: each library's run of the model read in
// another exchange form (BackendRun::formed) against its own pinned run and the float64 reference, node by
// node as the batch relation; a second run that failed where the pinned run ran is a crash.
std::vector<Finding> judge_form_relation(const ir::Graph& g, const std::vector<BackendRun>& runs,
                                         const Thresholds& th, const backends::ValueMap* inputs);

// The position relation (stage PR), whatever rule judges the numbers: each library's positions of the model's
// values along a longer axis (BackendRun::positioned) against its own pinned run and the float64 reference,
// node by node as the batch relation, within the wider model's float32 envelope at those positions; a second
// run that failed where the pinned run ran is a crash.
std::vector<Finding> judge_position_relation(const ir::Graph& g, const std::vector<BackendRun>& runs,
                                             const Thresholds& th, const backends::ValueMap* inputs,
                                             const PositionCase& wide);

}  // namespace quorum::oracle
