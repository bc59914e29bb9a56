// SlidingWindowDetector: the baseline the paper compares BOCD with, "flag when > 10 % off the running
// median". To make it a fair baseline rather than a spike counter, it compares the median of the last
// `short_window` iterations (a single GC spike cannot move it) with the running median of up to
// `long_window` earlier iterations of the current regime; an event starts a new regime at its onset.
// The onset is the first off iteration of the short window from which at least 3/4 of the rest are off.
// Jitter bursts shorter than short_window / 2 + 1 iterations cannot move the short median; detection takes
// at least that many iterations. Its weakness, as in the paper: a change that builds up slowly is absorbed
// into the running median before the short median departs from it.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "greyhound/analysis/iteration_history.h"
#include "greyhound/analysis/slowdown_detector.h"
#include "greyhound/thresholds.h"

namespace greyhound::analysis {

// short_window 11 makes its latency (6 of 11 iterations must be off: detected 5 after the onset) equal to
// bocd+v's, so the comparison in docs/analysis.md is at equal latency.
struct SlidingWindowParams {
  std::uint32_t short_window = 11;
  std::uint32_t long_window = 50;
  double min_rel_change = kSignificantChange;  // symmetric: max/min - 1 of the two medians
};

class SlidingWindowDetector final : public SlowdownDetector {
 public:
  explicit SlidingWindowDetector(const SlidingWindowParams& params = {});

  bool push(double iter_ms, std::vector<SlowdownEvent>& events) override;
  std::uint64_t iterations() const override { return n_; }

 private:
  SlidingWindowParams params_;
  IterationHistory history_;
  std::vector<double> scratch_;
  std::uint64_t n_ = 0;
  std::uint64_t regime_start_ = 0;
};

}  // namespace greyhound::analysis
