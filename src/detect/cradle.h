// CRADLE's detection (METHODS.md §2) on a trained classifier's outputs over a validation set: the
// class-based distance (top-k rank score 2^(k - rank) of the ground-truth class) and the MAD-based
// distance (mean absolute deviation from the one-hot ground truth) between two backends' outputs,
// the inputs that trigger (distance above T_C / T_M), whether the pair is inconsistent (more than
// a share p of the inputs trigger), the inconsistency pattern (the histogram of distances: the
// distinct class distances, ten equal MAD bins over [0, 1]) whose equality makes one unique
// inconsistency, and label changes (top-1 differs). Pure arithmetic on vectors: it runs nothing
// and knows no backend or operator.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace quorum::detect {

struct Thresholds {
  int k = 5;              // top-k of the class score
  double class_t = 8;     // T_C: a class distance above it triggers
  double mad_t = 0.2;     // T_M: a MAD distance above it triggers
  double p = 0;           // a pair is inconsistent when more than this share of the inputs trigger
};

enum class Metric : uint8_t { Class, Mad };
const char* to_string(Metric m);  // "class", "MAD"

// Outputs of one backend over the validation set: n rows of `classes` scores (probabilities).
struct Outputs {
  int64_t n = 0, classes = 0;
  std::vector<double> v;  // row-major
  const double* row(int64_t i) const { return v.data() + i * classes; }
};

// rank(c, y): 1 + the number of classes scored strictly above c (a tie ranks c first).
int64_t rank_of(const double* y, int64_t classes, int64_t c);
// σ(c, y) = 2^(k - rank) when rank <= k, else 0 (in [0, 2^(k-1)]).
double class_score(const double* y, int64_t classes, int64_t c, int k);
// D_class = |σ(c, y) − σ(c, y')|.
double class_distance(const double* y, const double* y2, int64_t classes, int64_t c, int k);
// δ(y, o) = mean |y − o| with o the one-hot vector of class c.
double mad(const double* y, int64_t classes, int64_t c);
// D_MAD = |δ − δ'| / (δ + δ'), 0 when both are 0; 1 when one is not finite and the other is.
double mad_distance(const double* y, const double* y2, int64_t classes, int64_t c);

// A histogram of distances: value (class: the distance itself; MAD: the bin's lower edge) -> count.
struct Pattern {
  Metric metric = Metric::Class;
  std::map<double, int64_t> bins;
  std::string key() const;  // "class{0:990,12:10}" — equal keys: one unique inconsistency
  bool operator==(const Pattern& o) const { return metric == o.metric && bins == o.bins; }
};
Pattern class_pattern(const std::vector<double>& d);
Pattern mad_pattern(const std::vector<double>& d);  // bins [0,0.1), ..., [0.9,1]; non-finite in the last

// One metric's verdict on one pair.
struct MetricResult {
  Metric metric = Metric::Class;
  std::vector<double> distance;  // per input
  int64_t triggering = 0;        // inputs above the threshold
  bool inconsistent = false;     // triggering > p * n
  int64_t worst = -1;            // the most inconsistent input (largest distance, first of ties)
  Pattern pattern;
};

struct PairResult {
  std::string a, b;
  MetricResult by_class, by_mad;
  int64_t label_changes = 0;      // inputs whose top-1 differs between a and b
  std::vector<int64_t> changed;   // those inputs
};

// Both metrics and the label changes of backends a and b on the same inputs with labels `labels`.
PairResult compare_pair(const std::string& a, const Outputs& ya, const std::string& b, const Outputs& yb,
                        const std::vector<int64_t>& labels, const Thresholds& th);

// A unique inconsistency: one pattern, the inconsistent (pair, metric)s that show it.
struct Unique {
  Pattern pattern;
  std::vector<size_t> pairs;  // indices into the PairResults given
};
// The inconsistent pairs' patterns grouped: identical patterns are one unique inconsistency, in the
// order first shown (pair order, class before MAD).
std::vector<Unique> unique_inconsistencies(const std::vector<PairResult>& pairs);
const MetricResult& metric_of(const PairResult& p, Metric m);

}  // namespace quorum::detect
