// Deterministic random numbers for the bench fixtures: xoshiro256** seeded by splitmix64, with its own
// distributions (std:: distributions are implementation-defined, and the fixtures must give the same traces
// on every platform).
#pragma once

#include <cmath>
#include <cstdint>

#include "greyhound/hash.h"

namespace greyhound::analysis::eval {

class Rng {
 public:
  explicit Rng(std::uint64_t seed) {
    for (auto& w : s_) {
      w = splitmix64(seed);
      seed += kGoldenGamma;
    }
  }
  std::uint64_t next() {
    const std::uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const std::uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }  // [0, 1)
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  std::uint64_t integer(std::uint64_t lo, std::uint64_t hi) { return lo + next() % (hi - lo + 1); }  // [lo, hi]
  bool chance(double p) { return uniform() < p; }
  double normal() {  // Box-Muller, one value per call
    const double u1 = 1.0 - uniform();
    const double u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
  std::uint32_t poisson(double mean) {
    const double limit = std::exp(-mean);
    std::uint32_t k = 0;
    for (double p = uniform(); p > limit; p *= uniform()) ++k;
    return k;
  }

 private:
  static std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  std::uint64_t s_[4];
};

}  // namespace greyhound::analysis::eval
