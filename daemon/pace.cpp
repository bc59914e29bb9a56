#include "daemon/pace.h"

#include <algorithm>
#include <cmath>

namespace greyhound::master {

bool pace_stale(const std::optional<IterationUpdate>& u, std::int64_t now_unix_ms) {
  if (!u || u->t_unix_ms <= 0 || u->t_unix_ms > now_unix_ms + kPaceFutureMs) return true;
  const double iter_ms = std::isfinite(u->iter_ms) && u->iter_ms > 0 ? u->iter_ms : 0.0;
  const double limit_ms = std::max(static_cast<double>(kPaceStaleMinMs), kPaceStaleIterations * iter_ms);
  return static_cast<double>(now_unix_ms - u->t_unix_ms) > limit_ms;
}

std::vector<int> pace_candidates(const std::vector<int>& ranks, int current, std::size_t max, std::size_t search) {
  std::vector<int> out;
  if (ranks.empty() || max == 0) return out;
  const std::size_t n = std::min(max, ranks.size());
  const std::size_t shift = search % (ranks.size() / n);  // within one stride: the spread stays even
  for (std::size_t k = 0; k < n; ++k) {
    const int r = ranks[k * ranks.size() / n + shift];
    if (r != current) out.push_back(r);
  }
  return out;
}

void PaceSearch::started(double mono_s) {
  next_s_ = mono_s + wait_s_;
  wait_s_ = std::min(2 * wait_s_, kPaceSearchMaxS);
}

void PaceSearch::reset() {
  wait_s_ = kPaceSearchFirstS;
  misses_ = 0;
}

std::optional<IterationUpdate> fresher_pace(const std::optional<IterationUpdate>& current,
                                            const std::vector<IterationUpdate>& read, std::int64_t now_unix_ms) {
  const IterationUpdate* best = nullptr;
  for (const IterationUpdate& u : read) {
    if (pace_stale(u, now_unix_ms)) continue;
    if (!best || u.t_unix_ms > best->t_unix_ms) best = &u;
  }
  if (!best || (current && current->t_unix_ms >= best->t_unix_ms)) return std::nullopt;
  return *best;
}

}  // namespace greyhound::master
