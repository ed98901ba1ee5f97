// LatencyHistogram (see histogram.hpp).
#include "alloclab/base/histogram.hpp"

#include <algorithm>
#include <cmath>

namespace alloclab {

void LatencyHistogram::merge(const LatencyHistogram& o) {
  for (int i = 0; i < kBuckets; ++i) buckets_[size_t(i)] += o.buckets_[size_t(i)];
  count_ += o.count_;
  sum_ += o.sum_;
  max_ = std::max(max_, o.max_);
  min_ = std::min(min_, o.min_);
}

uint64_t LatencyHistogram::upper(int idx) {
  if (idx < (1 << kSubBits)) return uint64_t(idx);
  const int shift = (idx >> kSubBits) - 1;
  const uint64_t sub = uint64_t(idx & ((1 << kSubBits) - 1)) | (uint64_t(1) << kSubBits);
  return ((sub + 1) << shift) - 1;
}

double LatencyHistogram::percentile(double q) const {
  if (count_ == 0) return 0.0;
  const uint64_t rank = std::max<uint64_t>(1, uint64_t(std::ceil(q * double(count_))));
  uint64_t seen = 0;
  for (int i = 0; i < kBuckets; ++i) {
    seen += buckets_[size_t(i)];
    if (seen >= rank) return double(std::min(upper(i), max_));
  }
  return double(max_);
}

}  // namespace alloclab
