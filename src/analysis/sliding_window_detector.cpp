#include "greyhound/analysis/sliding_window_detector.h"

#include <algorithm>
#include <cmath>

#include "greyhound/analysis/robust_stats.h"

namespace greyhound::analysis {

SlidingWindowDetector::SlidingWindowDetector(const SlidingWindowParams& params)
    : params_(params), history_(std::size_t{params.short_window} + params.long_window + 1) {
  params_.short_window = std::max<std::uint32_t>(params_.short_window, 1);
  params_.long_window = std::max(params_.long_window, params_.short_window);
}

bool SlidingWindowDetector::push(double iter_ms, std::vector<SlowdownEvent>& events) {
  if (!std::isfinite(iter_ms) || iter_ms <= 0.0) return false;
  const std::uint64_t now = n_++;
  history_.append(iter_ms);
  const std::uint64_t k = params_.short_window;
  if (n_ < regime_start_ + 2 * k) return true;  // the regime needs k reference and k recent iterations
  const std::uint64_t short_from = n_ - k;
  const std::uint64_t ref_from = std::max(regime_start_, short_from >= params_.long_window ? short_from - params_.long_window : 0);
  const double ref = median(history_.range(ref_from, short_from), scratch_);
  const double recent = median(history_.range(short_from, n_), scratch_);
  const double lo = std::min(ref, recent);
  const double hi = std::max(ref, recent);
  if (hi / lo - 1.0 < params_.min_rel_change) return true;
  const bool slower = recent > ref;
  auto off = [&](double v) {
    return slower ? v / ref - 1.0 >= params_.min_rel_change : ref / v - 1.0 >= params_.min_rel_change;
  };
  // Onset: the first off iteration from which at least 3/4 of the short window's remainder is off (a spike
  // earlier in the window does not pull it back).
  std::uint64_t onset = now;
  for (std::uint64_t j = short_from; j <= now; ++j) {
    if (!off(history_.at(j))) continue;
    std::uint64_t count = 0;
    for (std::uint64_t i = j; i <= now; ++i) count += off(history_.at(i)) ? 1 : 0;
    if (4 * count >= 3 * (now - j + 1)) {
      onset = j;
      break;
    }
  }
  events.push_back(SlowdownEvent{slower ? ChangeDirection::kSlowdown : ChangeDirection::kRecovery, onset, now,
                                 ref, recent, recent / ref});
  regime_start_ = onset;
  return true;
}

}  // namespace greyhound::analysis
