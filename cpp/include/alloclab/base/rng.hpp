// Rng: xoshiro256** seeded through splitmix64. Each worker gets its own stream from (run seed, worker index), so a
// run's random choices depend on the seed alone and not on thread timing.
#pragma once

#include <cstdint>

namespace alloclab {

class Rng {
 public:
  explicit Rng(uint64_t seed = 1, uint64_t stream = 0) {
    uint64_t x = seed ^ (stream * 0x9E3779B97F4A7C15ull);
    for (auto& w : s_) w = splitmix(x);
  }
  uint64_t next() {
    const uint64_t r = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return r;
  }
  // Uniform in [0, n) (Lemire's multiply-shift; bias below 2^-32 for the sizes used here).
  uint64_t below(uint64_t n) { return uint64_t((__uint128_t(next()) * n) >> 64); }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  static uint64_t splitmix(uint64_t& x) {
    uint64_t z = (x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  uint64_t s_[4];
};

}  // namespace alloclab
