#include "greyhound/analysis/changepoint_validation.h"

#include <algorithm>

#include "greyhound/analysis/robust_stats.h"

namespace greyhound::analysis {

LevelChange validate_change(std::span<const double> before, std::span<const double> after,
                            const ValidationParams& params, std::vector<double>& scratch) {
  LevelChange c;
  c.before = trimmed_mean(before, params.trim_low, params.trim_high, scratch);
  c.after = trimmed_mean(after, params.trim_low, params.trim_high, scratch);
  c.ratio = c.after / c.before;
  c.direction = c.after > c.before ? ChangeDirection::kSlowdown : ChangeDirection::kRecovery;
  const double lo = std::min(c.before, c.after);
  const double hi = std::max(c.before, c.after);
  c.significant = lo > 0.0 && hi / lo - 1.0 >= params.min_rel_change;
  return c;
}

}  // namespace greyhound::analysis
