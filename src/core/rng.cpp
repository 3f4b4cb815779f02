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

namespace {
// Marsaglia and Tsang's ziggurat for the standard normal, 128 layers of equal area V with the base
// layer's strip reaching r, in Doornik's form (the layer index and the uniform from disjoint bits of
// one draw). Nearly every draw is one 64-bit number and a multiplication: Box-Muller's log, sqrt and
// cos per value were 45 % of generating a model with weights and data.
struct Ziggurat {
  static constexpr int kLayers = 128;
  static constexpr double kR = 3.442619855899, kV = 9.91256303526217e-3;
  double x[kLayers + 1];  // x[0] = V / f(r) (the base strip's pseudo-width), x[1] = r, x[128] = 0
  double ratio[kLayers];  // x[i + 1] / x[i]: inside this share of layer i a draw is accepted at once
  Ziggurat() {
    double f = std::exp(-0.5 * kR * kR);
    x[0] = kV / f;
    x[1] = kR;
    x[kLayers] = 0;
    for (int i = 2; i < kLayers; ++i) {
      x[i] = std::sqrt(-2.0 * std::log(kV / x[i - 1] + f));
      f = std::exp(-0.5 * x[i] * x[i]);
    }
    for (int i = 0; i < kLayers; ++i) ratio[i] = x[i + 1] / x[i];
  }
};
const Ziggurat& ziggurat() {
  static const Ziggurat z;
  return z;
}
}  // namespace

double Rng::normal(double mean, double stddev) {
  const Ziggurat& z = ziggurat();
  for (;;) {
    const uint64_t bits = next_u64();
    const int i = static_cast<int>(bits & (Ziggurat::kLayers - 1));  // low 7 bits: the layer
    const double u = 2.0 * (static_cast<double>(bits >> 11) * 0x1.0p-53) - 1.0;  // top 53 bits: (-1, 1)
    if (std::fabs(u) < z.ratio[i]) return mean + stddev * u * z.x[i];
    if (i == 0) {  // the tail beyond r, by Marsaglia's exponential method
      double a, b;
      do {
        double u1 = uniform();
        while (u1 <= 0.0) u1 = uniform();
        double u2 = uniform();
        while (u2 <= 0.0) u2 = uniform();
        a = std::log(u1) / Ziggurat::kR;
        b = std::log(u2);
      } while (-2.0 * b < a * a);
      return mean + stddev * (u < 0 ? a - Ziggurat::kR : Ziggurat::kR - a);
    }
    // The wedge between layer i's rectangle and the curve: accept under the density.
    const double v = u * z.x[i];
    const double f0 = std::exp(-0.5 * (z.x[i] * z.x[i] - v * v));
    const double f1 = std::exp(-0.5 * (z.x[i + 1] * z.x[i + 1] - v * v));
    if (f1 + uniform() * (f0 - f1) < 1.0) return mean + stddev * v;
  }
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
