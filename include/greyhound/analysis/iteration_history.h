// The most recent iteration times of a detector, addressed by absolute iteration index, as contiguous spans
// (the robust statistics need spans). Keeps at least `keep` values; storage is at most 2 * keep values and
// appending is amortised O(1) (the oldest half is dropped when full). Used by the slowdown detectors.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

namespace greyhound::analysis {

class IterationHistory {
 public:
  explicit IterationHistory(std::size_t keep) : keep_(std::max<std::size_t>(keep, 1)) { values_.reserve(2 * keep_); }

  void append(double v) {
    if (values_.size() == 2 * keep_) {
      values_.erase(values_.begin(), values_.begin() + static_cast<std::ptrdiff_t>(keep_));
      first_ += keep_;
    }
    values_.push_back(v);
  }
  void clear() {
    values_.clear();
    first_ = 0;
  }
  // Index of the next value to be appended.
  std::uint64_t end() const { return first_ + values_.size(); }
  // Oldest index still held.
  std::uint64_t begin() const { return first_; }
  // Values [from, to) clipped to what is held.
  std::span<const double> range(std::uint64_t from, std::uint64_t to) const {
    from = std::max(from, first_);
    to = std::min(to, end());
    if (from >= to) return {};
    return {values_.data() + (from - first_), static_cast<std::size_t>(to - from)};
  }
  double at(std::uint64_t index) const { return values_[index - first_]; }

 private:
  std::size_t keep_;
  std::uint64_t first_ = 0;
  std::vector<double> values_;
};

}  // namespace greyhound::analysis
