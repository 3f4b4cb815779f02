// Audee's genetic search (METHODS.md §4) and divergence seeking: chromosomes over a model's inputs,
// weights, or both; a population seeded with Cauchy noise, the m fittest kept, children by gene-wise
// crossover and Cauchy mutation; stop at maxIte generations, at the evaluation budget, or at the first
// failure. The search runs nothing itself: an Evaluator (built by the campaign on its workers and its
// evaluate()) runs a whole generation in one call and returns every backend's run and the verdicts.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "core/rng.h"
#include "ir/graph.h"
#include "oracle/oracle.h"
#include "search/candidate.h"

namespace quorum::search {

// Which values a chromosome holds.
enum class Level { Input, Weights, Both };
Level level_from_string(const std::string& s);  // input|weights|both; UserError otherwise
const char* to_string(Level l);

// What the search maximises. Inconsistency: mean absolute difference at the logits (graph output 0)
// between two backends (the largest over pairs of libraries; with one library, it against the
// reference). Nan: the spread max - min of the finite logits. Diverge: one library away from the others and
// from the reference where they agree, over every node's value and gradient (divergence()).
// Edge: the inconsistency plus how near the vulnerable operands (OpSpec::valid_ranges, ref::vulnerable_sites)
// come to their invalid boundaries on the reference's values: the largest 1 / (1 + distance) over the sites
// (GRIST's suspect loss, without its gradients), so the fitness is not flat before an overflow, a log of a
// subnormal or a division by a tiny value fires.
enum class Fitness { Inconsistency, Nan, Diverge, Edge };
Fitness fitness_from_string(const std::string& s);  // inconsistency|nan|diverge|edge; UserError otherwise
const char* to_string(Fitness f);

// Where a search stops. A failure the campaign's verdicts label with a known-issue ledger entry
// (Finding::known) is a bug already filed: by default the search goes on past it for one the ledgers do not
// know, and keeps the first known failure it met as its result only when it finds nothing else.
struct StopRule {
  enum class Kind { Unknown, First, Entry } kind = Kind::Unknown;
  std::string entry;  // Kind::Entry: the only ledger entry to stop at (a rediscovery run, bench/)
  // Whether a failure labelled `known` ("" for none) ends the search.
  bool stops(const std::string& known) const;
};
// "unknown", "first" or a ledger entry's id; UserError for an empty text.
StopRule stop_rule_from_string(const std::string& s);

struct GaParams {
  int64_t population = 20;    // n
  int64_t elite = 10;         // m: the fittest kept each generation
  double crossover = 0.5;     // r1: a child's gene comes from parent 1 with this probability
  double mutation = 0.1;      // r2: each gene of a child gets Cauchy noise with this probability
  int64_t max_ite = 50;       // maxIte: generations
  double cauchy_scale = 1.0;  // noise scale, times a segment's median |value| (at least 1e-3)
  int64_t budget = 0;         // evaluations in all (0: no limit beyond max_ite)
  Level level = Level::Input;
  Fitness fitness = Fitness::Inconsistency;
  // Quorum's float-aware operators (the default, --ga_operators floats): three of four of the initial
  // population's inputs drawn as the campaign draws them (data/values.h: edge values, subnormals), half
  // of each later generation's children immigrants with such inputs, and half of the mutations a float move
  // (float_move) instead of Cauchy noise, so the search leaves a tensor's magnitude.
  // False (--ga_operators audee): Audee's operators alone, the paper's configuration.
  bool float_moves = true;
  StopRule stop;
};


// One candidate's evaluation: every backend's run (the reference first) and the campaign's verdicts.
struct Trial {
  std::vector<oracle::BackendRun> runs;
  std::vector<oracle::Finding> findings;
};

// Runs a generation: one Trial per candidate, in order.
class Evaluator {
 public:
  virtual ~Evaluator() = default;
  virtual std::vector<Trial> evaluate(const std::vector<Candidate>& batch) = 0;
};

// Where a chromosome's genes come from: graph inputs and/or initializers, in a fixed order.
struct Segment {
  bool weight = false;
  std::string name;
  core::Shape shape;
  size_t offset = 0, size = 0;
  double scale = 1;  // the Cauchy noise scale for these genes
};
struct Layout {
  std::vector<Segment> segments;
  size_t genes = 0;
  // The model's own values worth a float move: the finite boundaries of its vulnerable operands' valid ranges
  // (OpSpec::valid_ranges: exp's overflow edge, log's 0, ...), each with its neighbours just inside and outside
  // (next to 0: float32's subnormals and FLT_MIN, both signs).
  std::vector<double> edges;
};
// The genes of `level` in `g` with the values of `seed` (float inputs only; every float initializer).
Layout layout_of(const ir::Graph& g, const Candidate& seed, Level level, double cauchy_scale);
std::vector<double> genes_of(const Candidate& c, const Layout& l);
// `base` with the genes written into its inputs and weights.
Candidate with_genes(const Candidate& base, const Layout& l, const std::vector<double>& genes);

// Gene-wise crossover: gene i from `a` when U < r1, else from `b`.
std::vector<double> crossover(const std::vector<double>& a, const std::vector<double>& b, double r1, core::Rng& rng);
// Each gene, with probability r2, plus Cauchy(0, its segment's scale) noise; with `float_moves`, half of
// those genes take a float_move instead.
void mutate(std::vector<double>& genes, const Layout& l, double r2, core::Rng& rng, bool float_moves = false);
// A move across float32's values, which Cauchy noise around a tensor's median never makes: the value times
// 2^k (k uniform in [-40, 40]: another binade, toward 0 or toward the range's end), its negation, an edge
// value the campaign draws (data::edge_values(): signed zeros, +-1, subnormals, +-1e4, +-1e6), or one of
// float32's ends and NaN (+-FLT_MIN, +-FLT_MAX, +-inf, NaN: the campaign's inputs never hold NaN, its models
// make it inside, so NaN handling at a model's input is reached only this way); each a quarter of the moves.
// With `edges` (Layout::edges), the edge-value move picks from the model's own boundaries half the time.
double float_move(double x, core::Rng& rng, const std::vector<double>* edges = nullptr);

// A test oracle that fired on a trial.
enum class Oracle { Crash, Nan, Verdict, Label };
const char* to_string(Oracle o);  // crash, nan, verdict, label
struct Failure {
  Oracle oracle = Oracle::Verdict;
  std::string detail;
  std::string known;  // verdict: the ledger entry that labels its first finding ("" for none)
  std::string backend;  // the library blamed (label: the first of the two)
};
// The first oracle that fires: crash (a library's worker died or hung), verdict (the campaign's
// findings), and, only where no float64 reference ran (with one, the per-node rule has judged every node:
// what it leaves is float32's), nan (a library's NaN/Inf anywhere) and label (two libraries' top-1 labels at
// graph output 0 differ; a row holding NaN or an infinity has no label).
std::optional<Failure> failure_of(const ir::Graph& g, const Trial& t);
// `c`: the candidate the trial ran (Edge reads the operands that are graph inputs or weights from it).
double fitness_of(const ir::Graph& g, const Trial& t, Fitness f, const Candidate* c = nullptr);
// Edge's term: the largest 1 / (1 + distance to the invalid region) over the graph's vulnerable operands on the
// reference's values (1 where one is inside it; 0 without a vulnerable operand).
double edge_closeness(const ir::Graph& g, const Trial& t, const Candidate* c);
// Divergence: over every node output (and, for trained runs, every gradient) the largest
// d_j - max_{k != j} d_k, d = Chebyshev distance to the reference over (1 + max |reference|); a
// library's NaN/Inf where the reference is finite counts 1e3 (less when another library has it too).
double divergence(const ir::Graph& g, const Trial& t);

// A known failure the search met and went past (StopRule): its ledger entry and the evaluation (1-based).
struct Met {
  std::string known;
  int64_t evaluation = 0;
  std::string name() const { return known.empty() ? "unlabelled" : known; }
};
// Adds the failure labelled `known` met at `evaluation` unless its entry is listed already (each at its first).
void add_met(std::vector<Met>& met, const std::string& known, int64_t evaluation);

// "ID@N,ID@N" (an unlabelled failure: "unlabelled"), or "none".
std::string met_text(const std::vector<Met>& met);

struct Result {
  bool found = false;
  Failure failure;
  Candidate candidate;  // the failing candidate, or the fittest
  Trial trial;
  double best = 0;                // the best fitness seen
  std::vector<double> best_by_generation;
  int64_t evaluations = 0, generations = 0;
  double seconds = 0;
  std::vector<Met> met;  // each known entry met and gone past, at its first evaluation
};

// Audee's Algorithm 1 from `seed` (its genes are the population's centre).
Result genetic_search(const ir::Graph& g, const Candidate& seed, const GaParams& p, Evaluator& ev, core::Rng& rng);
// The baseline of the same budget: fresh inputs drawn as a campaign draws them (data/values.h), in
// batches of `batch`, scored with the same fitness and oracles.
Result random_search(const ir::Graph& g, const Candidate& seed, const GaParams& p, Evaluator& ev, core::Rng& rng);

}  // namespace quorum::search
