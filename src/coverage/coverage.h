// Operator-level coverage of a set of models (graph-based fuzzing, METHODS.md §3) and functionality
// coverage per backend (Muffin, §1). Every operator fact comes from the catalogue's OpSpecs: the
// operator types are the non-loss operators, an operator's allowed in-degrees its data-input arity.
//
// Coverage is a set of facts, each (subject, kind, value) with the first model that covered it:
//   operator facts, subject = the operator: "op" (used), "in" (an in-degree), "out" (an out-degree),
//   "succ" (a successor's operator type), "spc" (a shape-and-parameter vector, at most n_maxspc kept);
//   backend facts, subject = the backend spec: "maps" (an operator or loss its supports() accepts),
//   "ran" (an operator or loss a model run on it invoked); for a backend that reads exported ONNX,
//   "form" (an operator's exchange form it read, "dense gemm=matmul_add", ir::OnnxForm) and
//   "opset" (an ONNX opset it read, "12"); for a backend that optimizes, "fused" (what its optimizer did in an
//   optimized run, its lowering's "fused ..." entry without the prefix: "InnerProduct+ReLU",
//   "FoldPadIntoConvolution2d").
// Facts only accumulate, so a campaign store keeps them as rows and a resumed campaign reloads them.
#pragma once
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "gen/feedback.h"
#include "ir/graph.h"

namespace quorum::coverage {

// What a fact records (the header above); its text form (to_string: "op", "maps", ...) is what the
// stores keep. Listed in the alphabetical order of those names, so facts keyed by kind sort as their
// stored rows do.
enum class FactKind : uint8_t { Form, Fused, In, Maps, Op, Opset, Out, Ran, Spc, Succ };
const char* to_string(FactKind k);
// The kind named `s`; nullopt for a name this version does not know (a row a later version stored).
std::optional<FactKind> fact_kind_from_string(const std::string& s);
// A backend's fact (maps, ran, form, opset, fused), not an operator's.
bool backend_fact(FactKind k);

struct Fact {
  std::string subject;
  FactKind kind = FactKind::Op;
  std::string value;
  int64_t model = 0;  // the first model that covered it
  // How many models showed it: counted for "fused" facts (Coverage::add passes every one on, the store
  // sums them); other kinds are recorded once, their count means nothing.
  int64_t models = 1;
};

// The five parts' weights in OLC, and n_maxspc.
struct CoverageOptions {
  double w_otc = 1, w_idc = 1, w_odc = 1, w_sec = 1, w_spc = 1;
  int64_t n_maxspc = 200;
};
// "W1,W2,W3,W4,W5" (OTC, IDC, ODC, SEC, SPC), each >= 0, not all 0: UserError otherwise.
void parse_weights(const std::string& text, CoverageOptions& opt);

// The in- and out-degrees counted apart: a larger degree counts as this one ("4 or more").
constexpr int kMaxDegree = 4;

// OTC, IDC, ODC, SEC, SPC and their weighted mean OLC, each in [0, 1].
struct Parts {
  double otc = 0, idc = 0, odc = 0, sec = 0, spc = 0, olc = 0;
};

// One operator's share: what it was seen with, over what it allows.
struct OpCoverage {
  std::string op;
  bool used = false;
  int in_seen = 0, in_allowed = 0, out_seen = 0, out_allowed = 0, succ_seen = 0, succ_allowed = 0;
  int64_t spc_seen = 0;
  Parts parts;  // otc is 0 or 1; olc is OLC_op
};

// One backend's functionality coverage: of the operators and losses it maps, those invoked on it.
struct Functionality {
  std::string backend;
  int mapped = 0, invoked = 0;
  std::vector<std::string> uncovered;  // mapped, never invoked
  // A backend reading exported ONNX: the exchange forms ("op what=form") and opsets it read.
  std::vector<std::string> forms;
  std::vector<int> opsets;
  // A backend that optimizes: what its optimizer did in the optimized runs ("fused" facts), each with the
  // number of models it did it in.
  std::vector<std::pair<std::string, int64_t>> fused;
  double share() const { return mapped ? static_cast<double>(invoked) / mapped : 0.0; }
};

// The opsets of [lo, hi] not in `seen`, as text ("11, 12") — what a backend reading ONNX never read.
std::string missing_opsets(const std::vector<int>& seen, int lo, int hi);

// The operator types coverage counts (the catalogue's non-loss operators), sorted.
const std::vector<std::string>& operator_types();
// The in-degrees operator `op` allows: its data-input arity, a variadic one up to kMaxDegree.
std::vector<int> allowed_in_degrees(const std::string& op);

// The operator facts of one model (every shape-and-parameter vector, not yet capped), model = `model`.
// A node's in-degree is its data-input count, its out-degree the nodes reading its outputs (a graph
// output counts as one), its shape-and-parameter vector its data inputs' types with its attributes
// completed by the spec's defaults (so a graph before and after validation gives the same facts).
std::vector<Fact> model_facts(const ir::Graph& g, int64_t model = 0);

// A growing coverage; thread-safe.
class Coverage : public gen::Feedback {
 public:
  explicit Coverage(CoverageOptions opt = {});
  const CoverageOptions& options() const { return opt_; }

  // Adds facts (a shape-and-parameter vector beyond n_maxspc of its operator is dropped); returns the
  // ones new, in order. A fact seen before keeps its earlier first model.
  std::vector<Fact> add(const std::vector<Fact>& facts);

  // gen::Feedback.
  double op_coverage(const std::string& op) const override;
  size_t gain(const ir::Graph& g) const override;
  bool has_successor(const std::string& op, const std::string& successor) const override;

  Parts parts() const;
  std::vector<OpCoverage> per_op() const;  // by operator name
  std::vector<Functionality> functionality() const;  // by backend
  std::vector<Fact> facts() const;  // by first model, then subject, kind, value
  size_t size() const;

 private:
  struct Op {
    bool used = false;
    std::set<int> in, out;
    std::set<std::string> succ, spc;
  };
  OpCoverage op_locked(const std::string& op) const;
  bool add_locked(const Fact& f);

  CoverageOptions opt_;
  mutable std::mutex mu_;
  std::map<std::string, Op> ops_;
  std::map<std::string, std::pair<std::set<std::string>, std::set<std::string>>> backends_;  // maps, ran
  std::map<std::string, std::set<std::string>> forms_;  // backend -> forms read
  std::map<std::string, std::map<std::string, int64_t>> fused_;  // backend -> what its optimizer did -> models
  std::map<std::string, std::set<int>> opsets_;          // backend -> opsets read
  std::map<std::tuple<std::string, FactKind, std::string>, int64_t> first_;  // fact -> first model
};

// Coverage after models 0 .. x, at most `points` points over the models the facts reach (a
// campaign's coverage over time, in model order).
std::vector<std::pair<int64_t, Parts>> coverage_curve(const std::vector<Fact>& facts, const CoverageOptions& opt,
                                                      int points = 50);

// The text `quorum coverage` prints: the five parts and OLC, functionality per backend with the
// operators it never ran; with `ops` (names, or "all"), one row per operator.
std::string coverage_text(const Coverage& c, const std::vector<std::string>& ops = {});
// One line: "OLC 63.1% (OTC 97.0 IDC 80.2 ODC 55.0 SEC 30.3 SPC 52.8)".
std::string parts_line(const Parts& p);

}  // namespace quorum::coverage
