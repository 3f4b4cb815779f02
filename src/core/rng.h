// The one seeded random number generator. Every random choice in Quorum draws from an Rng
// passed explicitly. The distributions are the project's own (std::*_distribution output differs
// between standard libraries), so a seed gives the same result on any machine.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace quorum::core {

class Rng {
 public:
  explicit Rng(uint64_t seed);

  // Seed 0 means "choose one": returns a fresh non-zero seed from the OS.
  static uint64_t resolve_seed(uint64_t seed);

  uint64_t seed() const { return seed_; }
  uint64_t next_u64();
  double uniform();                        // [0, 1)
  double uniform(double lo, double hi);    // [lo, hi)
  int64_t randint(int64_t lo, int64_t hi);  // inclusive both ends, unbiased
  bool bernoulli(double p);
  double normal(double mean = 0.0, double stddev = 1.0);
  double cauchy(double loc = 0.0, double scale = 1.0);
  size_t index(size_t n);  // uniform in [0, n)

  template <class T>
  const T& pick(const std::vector<T>& v) {
    return v[index(v.size())];
  }
  template <class T>
  void shuffle(std::vector<T>& v) {
    for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[index(i)]);
  }

  // An independent stream derived from this one's seed and a tag (does not advance this one).
  Rng derive(const std::string& tag) const;

 private:
  uint64_t seed_;
  uint64_t s_[4];
};

// FNV-1a of a string: a stable 64-bit seed or key from a name (an operator, a node, a signature).
inline uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

}  // namespace quorum::core
