#include "detect/cradle.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "core/stats.h"

namespace quorum::detect {

const char* to_string(Metric m) { return m == Metric::Class ? "class" : "MAD"; }

int64_t rank_of(const double* y, int64_t classes, int64_t c) {
  int64_t r = 1;
  for (int64_t j = 0; j < classes; ++j)
    if (j != c && (y[j] > y[c] || (std::isnan(y[c]) && !std::isnan(y[j])))) ++r;
  return r;
}

double class_score(const double* y, int64_t classes, int64_t c, int k) {
  const int64_t r = rank_of(y, classes, c);
  return r <= k ? std::ldexp(1.0, static_cast<int>(k - r)) : 0.0;
}

double class_distance(const double* y, const double* y2, int64_t classes, int64_t c, int k) {
  return std::abs(class_score(y, classes, c, k) - class_score(y2, classes, c, k));
}

double mad(const double* y, int64_t classes, int64_t c) {
  double s = 0;
  for (int64_t j = 0; j < classes; ++j) s += std::abs(y[j] - (j == c ? 1.0 : 0.0));
  return classes > 0 ? s / static_cast<double>(classes) : 0.0;
}

double mad_distance(const double* y, const double* y2, int64_t classes, int64_t c) {
  const double a = mad(y, classes, c), b = mad(y2, classes, c);
  if (!std::isfinite(a) || !std::isfinite(b)) return std::isfinite(a) == std::isfinite(b) ? 0.0 : 1.0;
  if (a + b == 0) return 0.0;
  return std::abs(a - b) / (a + b);
}

std::string Pattern::key() const {
  std::ostringstream s;
  s << to_string(metric) << "{";
  bool first = true;
  for (const auto& [v, n] : bins) {
    s << (first ? "" : ",") << v << ":" << n;
    first = false;
  }
  s << "}";
  return s.str();
}

Pattern class_pattern(const std::vector<double>& d) {
  Pattern p;
  p.metric = Metric::Class;
  for (double v : d) ++p.bins[v];
  return p;
}

Pattern mad_pattern(const std::vector<double>& d) {
  Pattern p;
  p.metric = Metric::Mad;
  for (int b = 0; b < 10; ++b) p.bins[b / 10.0] = 0;
  for (double v : d) {
    int b = std::isfinite(v) ? static_cast<int>(std::floor(v * 10)) : 9;
    b = b < 0 ? 0 : b > 9 ? 9 : b;
    ++p.bins[b / 10.0];
  }
  return p;
}

namespace {

MetricResult judge(Metric m, std::vector<double> d, double threshold, double p) {
  MetricResult r;
  r.metric = m;
  for (size_t i = 0; i < d.size(); ++i) {
    if (d[i] > threshold || std::isnan(d[i])) ++r.triggering;
    if (r.worst < 0 || d[i] > d[static_cast<size_t>(r.worst)]) r.worst = static_cast<int64_t>(i);
  }
  r.inconsistent = static_cast<double>(r.triggering) > p * static_cast<double>(d.size());
  r.pattern = m == Metric::Class ? class_pattern(d) : mad_pattern(d);
  r.distance = std::move(d);
  return r;
}

}  // namespace

PairResult compare_pair(const std::string& a, const Outputs& ya, const std::string& b, const Outputs& yb,
                        const std::vector<int64_t>& labels, const Thresholds& th) {
  PairResult r;
  r.a = a;
  r.b = b;
  const int64_t n = std::min({ya.n, yb.n, static_cast<int64_t>(labels.size())});
  const int64_t classes = std::min(ya.classes, yb.classes);
  std::vector<double> dc(static_cast<size_t>(n)), dm(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t c = labels[static_cast<size_t>(i)];
    dc[static_cast<size_t>(i)] = class_distance(ya.row(i), yb.row(i), classes, c, th.k);
    dm[static_cast<size_t>(i)] = mad_distance(ya.row(i), yb.row(i), classes, c);
    if (core::top1(ya.row(i), classes) != core::top1(yb.row(i), classes)) r.changed.push_back(i);
  }
  r.label_changes = static_cast<int64_t>(r.changed.size());
  r.by_class = judge(Metric::Class, std::move(dc), th.class_t, th.p);
  r.by_mad = judge(Metric::Mad, std::move(dm), th.mad_t, th.p);
  return r;
}

const MetricResult& metric_of(const PairResult& p, Metric m) { return m == Metric::Class ? p.by_class : p.by_mad; }

std::vector<Unique> unique_inconsistencies(const std::vector<PairResult>& pairs) {
  std::vector<Unique> out;
  for (size_t i = 0; i < pairs.size(); ++i)
    for (const Metric m : {Metric::Class, Metric::Mad}) {
      const MetricResult& r = metric_of(pairs[i], m);
      if (!r.inconsistent) continue;
      bool found = false;
      for (auto& u : out)
        if (u.pattern == r.pattern) {
          u.pairs.push_back(i);
          found = true;
          break;
        }
      if (!found) out.push_back({r.pattern, {i}});
    }
  return out;
}

}  // namespace quorum::detect
