#include "daemon/job_clock.h"

#include <algorithm>
#include <cmath>

namespace greyhound::master {

void JobClock::observe(double t_s, std::int64_t unix_ms) {
  if (!std::isfinite(t_s) || t_s < 0 || unix_ms <= 0) return;
  if (reading_ && unix_ms < reading_->unix_ms) return;
  reading_ = Reading{t_s, unix_ms};
}

std::optional<double> JobClock::at(std::int64_t unix_ms) {
  if (!reading_) return last_;
  const double since_s = static_cast<double>(std::max<std::int64_t>(0, unix_ms - reading_->unix_ms)) * 1e-3;
  const double t = reading_->t_s + since_s;
  last_ = last_ ? std::max(*last_, t) : t;
  return last_;
}

}  // namespace greyhound::master
