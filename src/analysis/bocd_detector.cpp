#include "greyhound/analysis/bocd_detector.h"

#include <algorithm>
#include <cmath>

#include "greyhound/analysis/robust_stats.h"

namespace greyhound::analysis {
namespace {

BocdParams bocd_params(const BocdDetectorParams& p) {
  BocdParams b;
  b.hazard_lambda = p.hazard_lambda;
  b.prior = p.prior;
  b.outlier_probability = p.outlier_probability;
  b.outlier_log_density = p.outlier_log_density;
  b.prune_below = p.prune_below;
  b.max_run_lengths = p.max_run_lengths;
  return b;
}

}  // namespace

BocdDetector::BocdDetector(const BocdDetectorParams& params)
    : params_(params),
      bocd_(bocd_params(params)),
      history_(std::max<std::size_t>(params.before_max + params.max_run + 1, params.baseline_iterations)) {
  params_.baseline_iterations = std::max<std::uint32_t>(params_.baseline_iterations, 1);
  params_.min_run = std::max<std::uint32_t>(params_.min_run, 1);
  params_.max_run = std::max(params_.max_run, params_.min_run);
  // r = 0 always holds 1 / hazard_lambda of the mass: a threshold at or above the rest is never reached.
  params_.threshold = std::min(params_.threshold, 1.0 - 1.0 / params_.hazard_lambda - 1e-9);
}

bool BocdDetector::push(double iter_ms, std::vector<SlowdownEvent>& events) {
  if (!std::isfinite(iter_ms) || iter_ms <= 0.0) return false;
  const std::uint64_t now = n_++;
  history_.append(iter_ms);
  if (level_) {
    step(now, now, events);
    return true;
  }
  if (n_ < params_.baseline_iterations) return true;
  const auto baseline = history_.range(0, n_);
  level_ = median(baseline, scratch_);
  log_level_ = std::log(*level_);
  const double warm = *level_ * (1.0 + params_.validation.min_rel_change);
  while (warmup_ < n_ / 2 && history_.at(warmup_) > warm) ++warmup_;
  segment_start_ = warmup_;
  for (std::uint64_t i = warmup_; i < n_; ++i) step(i, now, events);
  return true;
}

void BocdDetector::step(std::uint64_t i, std::uint64_t now, std::vector<SlowdownEvent>& events) {
  bocd_.update(std::log(history_.at(i)) - log_level_);
  const auto& p = params_;
  if (bocd_.mass_between(p.min_run, p.max_run) < p.threshold) return;
  std::uint64_t r = 0;
  if (!bocd_.map_run_length_between(p.min_run, p.max_run, &r)) return;
  const std::uint64_t onset = i + 1 - r;
  if (last_decided_ && onset <= *last_decided_) return;  // not new evidence
  const std::uint64_t before_from = std::max<std::uint64_t>(segment_start_, onset >= p.before_max ? onset - p.before_max : 0);
  if (onset < before_from + p.min_run) return;  // too little before the onset to compare with
  const auto before = history_.range(before_from, onset);
  const auto after = history_.range(onset, i + 1);
  const LevelChange c = validate_change(before, after, p.validation, scratch_);
  if (p.validate && !c.significant) return;
  events.push_back(SlowdownEvent{c.direction, onset, now, c.before, c.after, c.ratio});
  segment_start_ = onset;
  last_decided_ = now;
}

}  // namespace greyhound::analysis
