// xoshiro256** seeded through splitmix64, with hand-written distributions.
#include "core/rng.h"

#include <cmath>
#include <numbers>
#include <random>

#include "core/error.h"

namespace quorum::core {

namespace {
uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
}  // namespace

Rng::Rng(uint64_t seed) : seed_(seed) {
  uint64_t x = seed;
  for (auto& s : s_) s = splitmix64(x);
}

uint64_t Rng::resolve_seed(uint64_t seed) {
  if (seed != 0) return seed;
  std::random_device rd;
  uint64_t s = 0;
  while (s == 0) s = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  return s % 1000000000000ull + 1;  // short enough to type
}

uint64_t Rng::next_u64() {
  const uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

double Rng::uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

double Rng::uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }

int64_t Rng::randint(int64_t lo, int64_t hi) {
  QUORUM_CHECK(lo <= hi, "randint with empty range");
  const uint64_t span = static_cast<uint64_t>(hi - lo) + 1;
  if (span == 0) return static_cast<int64_t>(next_u64());  // full 64-bit range
  const uint64_t limit = UINT64_MAX - UINT64_MAX % span;
  uint64_t r;
  do r = next_u64();
  while (r >= limit);
  return lo + static_cast<int64_t>(r % span);
}

size_t Rng::index(size_t n) {
  QUORUM_CHECK(n > 0, "index into empty range");
  return static_cast<size_t>(randint(0, static_cast<int64_t>(n) - 1));
}

bool Rng::bernoulli(double p) { return uniform() < p; }

double Rng::normal(double mean, double stddev) {
  // Box-Muller without caching: one pair per draw keeps the stream position easy to reason about.
  double u1 = uniform();
  while (u1 <= 0.0) u1 = uniform();
  const double u2 = uniform();
  return mean + stddev * std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

double Rng::cauchy(double loc, double scale) {
  double u = uniform();
  while (u == 0.0 || u == 0.5) u = uniform();
  return loc + scale * std::tan(std::numbers::pi * (u - 0.5));
}

Rng Rng::derive(const std::string& tag) const {
  uint64_t h = seed_ ^ 0xA0761D6478BD642Full;
  for (unsigned char c : tag) h = (h ^ c) * 0x100000001B3ull;
  uint64_t x = h;
  return Rng(splitmix64(x));
}

}  // namespace quorum::core
