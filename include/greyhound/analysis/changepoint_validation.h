// The paper's validation ("+V"): a changepoint stands only if the iteration time after it differs from the
// iteration time before it by at least 10 %; smaller shifts are ordinary jitter (Python GC, allocator cache
// misses, uneven sequence lengths). Both directions are events: slower is a slowdown, faster a recovery.
//
// Two choices beyond the paper's one sentence, both measured in docs/analysis.md:
// - The change is measured symmetrically, max(before, after) / min(before, after) - 1 >= min_rel_change,
//   so that the recovery from a 10 % slowdown (a 9.1 % drop relative to the slow level) also stands.
// - "Mean" is a trimmed mean whose trims are parameters: (0, 0) is the paper's plain mean. The slowdown
//   detector uses the mean of the fastest quarter (trim_low 0, trim_high 0.75): interference (GC pauses,
//   allocator misses, stalls, bursts) only ever adds time, so the fastest iterations show the level the
//   hardware allows, and a short after-segment with two or three disturbed iterations in it still shows the
//   true level. A plain mean over the few iterations available when an online detector decides moves by
//   more than 10 % with one GC pause in it.
#pragma once

#include <span>
#include <vector>

#include "greyhound/analysis/slowdown_detector.h"
#include "greyhound/thresholds.h"

namespace greyhound::analysis {

struct ValidationParams {
  double min_rel_change = kSignificantChange;
  double trim_low = 0.0;         // fraction of the smallest values dropped before averaging
  double trim_high = 0.75;       // fraction of the largest values dropped before averaging
};

struct LevelChange {
  double before = 0.0;  // robust mean of `before`
  double after = 0.0;   // robust mean of `after`
  double ratio = 0.0;   // after / before
  ChangeDirection direction = ChangeDirection::kSlowdown;  // after > before: slowdown
  bool significant = false;  // the relative change reaches min_rel_change
};

// Compares two non-empty segments of iteration times. `scratch` is working memory.
LevelChange validate_change(std::span<const double> before, std::span<const double> after,
                            const ValidationParams& params, std::vector<double>& scratch);

}  // namespace greyhound::analysis
