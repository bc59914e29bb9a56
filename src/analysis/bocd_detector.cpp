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
  if (!(params_.moderate_ratio > 1.0)) params_.moderate_ratio = 0.0;  // a ratio up to 1 would take any level
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

double BocdDetector::flat_tolerance(std::span<const double> before, FlatBand band) {
  const double level = median(before, scratch_);
  deviations_.clear();
  for (double x : before) deviations_.push_back(std::abs(x / level - 1.0));
  const double jitter = 1.4826 * median(deviations_, scratch_);  // robust relative jitter
  return std::max(band.floor, band.sigmas * jitter);
}

bool BocdDetector::flat(std::span<const double> before, std::span<const double> after, FlatBand band) {
  const auto [lo, hi] = std::minmax_element(after.begin(), after.end());
  return *hi / *lo - 1.0 <= flat_tolerance(before, band);
}

bool BocdDetector::first_between_levels(std::span<const double> before, std::span<const double> after,
                                        bool beyond_jitter) {
  const double old_level = median(before, scratch_);
  const double new_level = median(after.subspan(1), scratch_);
  const double first = after[0];
  if (first <= std::min(old_level, new_level) || first >= std::max(old_level, new_level)) return false;
  return !beyond_jitter || std::abs(first / new_level - 1.0) > flat_tolerance(before, flat_band());
}

void BocdDetector::step(std::uint64_t i, std::uint64_t now, std::vector<SlowdownEvent>& events) {
  bocd_.update(std::log(history_.at(i)) - log_level_);
  const auto& p = params_;
  // The rules in order of the persistence they ask for: ordinary (min_run), early (early_run, flat), severe
  // (severe_run, flat and far from the old level). The first that decides wins.
  if (bocd_.mass_between(p.min_run, p.max_run) >= p.threshold && decide(i, now, p.min_run, Rule::kOrdinary, events)) return;
  if (p.early_run > 0 && p.early_run < p.min_run && bocd_.mass_between(p.early_run, p.max_run) >= p.threshold &&
      decide(i, now, p.early_run, Rule::kEarly, events)) {
    return;
  }
  if (p.severe_run > 0 && p.severe_run < std::min(p.min_run, p.early_run > 0 ? p.early_run : p.min_run) &&
      bocd_.mass_between(p.severe_run, p.max_run) >= p.threshold) {
    decide(i, now, p.severe_run, Rule::kSevere, events);
  }
}

bool BocdDetector::decide(std::uint64_t i, std::uint64_t now, std::uint32_t run, Rule rule,
                          std::vector<SlowdownEvent>& events) {
  const auto& p = params_;
  const bool early = rule != Rule::kOrdinary;
  std::uint64_t r = 0;
  if (!bocd_.map_run_length_between(run, p.max_run, &r)) return false;
  std::uint64_t onset = i + 1 - r;
  if (last_decided_ && onset <= *last_decided_) return false;  // not new evidence
  const std::uint64_t before_from = std::max<std::uint64_t>(segment_start_, onset >= p.before_max ? onset - p.before_max : 0);
  if (onset < before_from + p.min_run) return false;  // too little before the onset to compare with
  const auto before = history_.range(before_from, onset);
  auto after = history_.range(onset, i + 1);
  // The run may begin with the iteration the change happened in, partly at the old level and partly at the
  // new one; the onset is then the next iteration. Under the early and severe rules: when the run is not
  // flat with it, but the rest is (and still `run` long). Under the ordinary rule, where Bocd's most
  // probable run may start with it when it lies nearer the new level: when it is farther from that level
  // than the jitter allows (min_run iterations still remain).
  bool drop_first = false;
  if (early && !flat(before, after, flat_band())) {
    if (after.size() <= run || !first_between_levels(before, after, false) ||
        !flat(before, after.subspan(1), flat_band())) {
      return false;
    }
    drop_first = true;
  } else if (!early && after.size() > p.min_run) {
    drop_first = first_between_levels(before, after, true);
  }
  if (drop_first) {
    after = after.subspan(1);
    ++onset;
  }
  if (rule == Rule::kSevere) {
    const double old_level = median(before, scratch_);
    const double new_level = median(after, scratch_);
    if (!(old_level > 0)) return false;
    const double ratio = std::max(new_level / old_level, old_level / new_level);
    const bool severe = ratio >= p.severe_ratio;
    // Below severe_ratio: a moderate shift, taken when its run is within the narrower band.
    const bool moderate = !severe && p.moderate_ratio > 0 && ratio >= p.moderate_ratio &&
                          flat(before, after, moderate_band());
    if (!severe && !moderate) return false;
  }
  const LevelChange c = validate_change(before, after, p.validation, scratch_);
  if (p.validate && !c.significant) return false;
  events.push_back(SlowdownEvent{c.direction, onset, now, c.before, c.after, c.ratio});
  segment_start_ = onset;
  last_decided_ = now;
  return true;
}

}  // namespace greyhound::analysis
