// CRADLE's detection on a trained classifier (quorum detect, fuzz --trained; METHODS.md §2): the
// validation set's inference in batches on every library (float32) and on the float64 reference,
// the class and MAD distances of every pair with their patterns (src/detect/), label changes, and for
// each unique inconsistency its most inconsistent input run again alone through evaluate(): the
// localization map on it, the per-node verdicts on it (each per-node finding recorded, bundled and
// reduced like a campaign's), and a `detection` finding with its bundle. docs/trained.md.
#pragma once
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "campaign/evaluate.h"
#include "store/store.h"
#include "data/dataset.h"
#include "detect/cradle.h"
#include "localize/rate_map.h"

namespace quorum::campaign {

// The float64 reference's name in detection's pairs (the libraries are named by their spec).
inline constexpr const char* kReferenceName = "reference";

struct DetectOptions {
  Setup setup;  // the libraries, dtype, limits and the per-node rule's settings (mode: inference)
  detect::Thresholds thresholds;
  int64_t batch = 100;    // images per worker call
  int reduce_runs = 30;   // each new per-node finding reduced with at most this many runs (0: none)
  std::string out;        // bundles go to OUT/bundles
  uint64_t seed = 0;
  std::string command_line, model_path;
  std::map<std::string, std::string> versions;  // backend spec -> library version
  std::string origin;     // how the model came about (a mutant of a trained model), for bundles
};

// One unique inconsistency, judged on its most inconsistent input.
struct DetectedCase {
  detect::Pattern pattern;
  std::string a, b;  // the first pair that shows it
  detect::Metric metric = detect::Metric::Class;
  int64_t input = -1, label = -1;
  double distance = 0;
  std::map<std::string, int64_t> top1;  // per backend (and the reference) on that input
  std::optional<oracle::Finding> finding;  // the detection finding (none when the input alone no longer triggers)
  localize::RateMap map;
  std::vector<oracle::Finding> verdicts;  // the per-node rule on that input
  std::string bundle;                     // the detection finding's bundle (empty: not new in the store)
  std::vector<std::string> reduced;       // per-node findings' reduced cases: "signature -> dir"
  std::string note;                       // why something is missing
};

struct Detection {
  std::string model;
  int64_t images = 0, batch = 0;
  std::vector<std::string> backends;           // the reference first, then the libraries that ran
  std::map<std::string, std::string> failed;   // library -> why it gave no outputs
  std::map<std::string, double> seconds;       // forward time over all images
  std::map<std::string, double> compile_seconds;
  std::map<std::string, int64_t> correct;      // top-1 equal to the label
  std::vector<detect::PairResult> pairs;       // every pair of `backends`
  std::vector<detect::Unique> unique;
  std::vector<DetectedCase> cases;             // one per unique inconsistency
  std::vector<oracle::Finding> findings;       // every finding recorded (detection, per-node, crashes)
  int64_t inconsistent_pairs() const;
  int64_t label_changes() const;               // over every pair
};

// The graph with its first input's batch dimension set to `n` (types inferred again); UserError when
// the model fixes its batch elsewhere (a reshape to a constant shape).
ir::Graph rebatched(const ir::Graph& g, int64_t n);

// Detection of one model on a validation set. `store`: where findings go (null: nowhere, no bundles);
// `index`: the model's index in the store.
Detection detect_model(const ir::Graph& g, const data::Validation& v, const DetectOptions& opt, WorkerSet& workers,
                       store::Store* store, int64_t index, std::ostream* log);

// The detection finding of one case (a single input with its one-hot target) for the pair (a, b)
// and `metric`: the blamed backend is the one whose output lies farther from the reference's (the
// library, when the other is the reference), its node and operator the localization map's prime
// suspect. None when the input does not trigger. Shared by detect_model and replay.
std::optional<oracle::Finding> detection_finding(const ModelCase& m, const Evaluation& ev, const std::string& a,
                                                 const std::string& b, detect::Metric metric,
                                                 const detect::Thresholds& th, localize::RateMap* map = nullptr);
// The same from a bundle's finding.json "detection" object (its JSON text).
std::optional<oracle::Finding> replay_detection(const ModelCase& m, const Evaluation& ev,
                                                const std::string& detection_json);

// The figures for people: pairs, unique inconsistencies, label changes, times.
void print_detection(const Detection& d, std::ostream& os);

// fuzz --generator zoo --trained DIR: every trained model of DIR (DIR/model.json, DIR/*/model.json)
// and, from model index `count` on, mutants of them (every weight tensor moved by Gaussian noise of
// `mutation_rate` times its own standard deviation, the network-level mutation of trained weights),
// each through detect_model, recorded in OUT's store under its index. `models`: the budget (0: the
// trained models alone). Returns the number of models run.
struct TrainedCampaign {
  std::string dir, data = "fashion-mnist";
  int64_t images = 1000, models = 0;
  double time_s = 0, mutation_rate = 0.1;
  std::string store;
  bool quiet = false;
};
int64_t run_trained_campaign(const TrainedCampaign& tc, const DetectOptions& opt, std::ostream& log);

// The trained models of a directory: DIR/model.json itself, or DIR/*/model.json (sorted); UserError
// when there is none.
std::vector<std::string> trained_models(const std::string& dir);

}  // namespace quorum::campaign
