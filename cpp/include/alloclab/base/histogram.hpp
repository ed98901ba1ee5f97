// LatencyHistogram: per-worker latency record with bounded memory (log-linear buckets, HdrHistogram-like).
// 64 sub-buckets per power of two: any percentile is within 1.6 % of the true value; min, max and mean are exact.
#pragma once

#include <array>
#include <cstdint>

namespace alloclab {

class LatencyHistogram {
 public:
  void record(uint64_t ns) {
    ++count_;
    sum_ += ns;
    if (ns > max_) max_ = ns;
    if (ns < min_) min_ = ns;
    ++buckets_[index(ns)];
  }
  void merge(const LatencyHistogram& o);
  uint64_t count() const { return count_; }
  double mean() const { return count_ ? double(sum_) / double(count_) : 0.0; }
  uint64_t max() const { return max_; }
  uint64_t min() const { return count_ ? min_ : 0; }
  // q in [0, 1]; the upper edge of the bucket holding the q-quantile (0 when empty), capped at max().
  double percentile(double q) const;

 private:
  static constexpr int kSubBits = 6;  // 64 sub-buckets
  static constexpr int kBuckets = (64 - kSubBits + 1) << kSubBits;
  static int index(uint64_t v) {
    if (v < (1u << kSubBits)) return int(v);
    const int msb = 63 - __builtin_clzll(v);
    const int shift = msb - kSubBits;
    return ((shift + 1) << kSubBits) + int((v >> shift) & ((1u << kSubBits) - 1));
  }
  static uint64_t upper(int idx);
  std::array<uint32_t, kBuckets> buckets_{};
  uint64_t count_ = 0, sum_ = 0, max_ = 0, min_ = UINT64_MAX;
};

}  // namespace alloclab
