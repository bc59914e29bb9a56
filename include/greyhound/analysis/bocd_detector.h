// BocdDetector: the paper's online slowdown detector. Bocd finds where the iteration-time level changed;
// validation (changepoint_validation.h) keeps only changes of >= 10 %. With validation off it is the plain
// BOCD baseline ("bocd"); with it on, the paper's "bocd+v".
//
// Pipeline for each iteration time x_t, read strictly in order:
// 1. Healthy level (scale-free). The first `baseline_iterations` values are buffered; their median is the
//    level L. Leading values more than min_rel_change above L are warm-up (compilation, autotuning,
//    allocator growth) and are skipped (at most half of the buffer). Bocd then sees y_t = ln(x_t / L): the
//    log makes multiplicative jitter homoscedastic and a 1.5x slowdown the same step at any scale, so one
//    prior serves 50 ms and 50 s iterations. No event is decided before the buffer is full.
// 2. Bocd update with y_t (Normal-Gamma, hazard 1 / hazard_lambda, outlier-robust, pruned).
// 3. Decision (the lagged rule): P(min_run <= r_t <= max_run | y_1..t) >= threshold, i.e. "a new run began
//    between max_run and min_run iterations ago" is at least 90 % likely; or, for a flat run (a level shift
//    without interference, see early_run), the same with early_run in place of min_run. The onset is the
//    first iteration of the most probable such run, or the next one when that first iteration is the mix of
//    a change that happened within it (between the two levels, farther from the new one than the jitter
//    allows). min_run is the number of iterations a change must
//    persist before it can be reported: jitter bursts shorter than min_run never form a run that long, and
//    the detection latency (detected_index - onset) is at least min_run - 1 (early_run - 1 when flat). Under a constant hazard P(r_t = 0) is always exactly
//    the hazard, so "P(changepoint) > 0.9" must be read this way.
// 4. The candidate must be new evidence: its onset lies after the iteration at which the previous event was
//    decided, and at least min_run iterations of the current segment precede it. With validation,
//    before = the robust mean of up to `before_max` iterations from the previous event's onset (or the
//    start) to the onset, after = the robust mean from the onset to t; the event stands if they differ by
//    >= min_rel_change. A candidate that fails is re-checked on the next iterations
//    while Bocd still places the run start there (up to max_run), so a borderline change gets a longer
//    after-segment before it is dropped.
// Memory O(before_max + max_run + kept run lengths); time O(kept run lengths) per iteration.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "greyhound/analysis/bocd.h"
#include "greyhound/analysis/changepoint_validation.h"
#include "greyhound/analysis/slowdown_detector.h"
#include "greyhound/analysis/iteration_history.h"

namespace greyhound::analysis {

// Defaults and why (the trade-off tables behind them are in docs/analysis.md):
struct BocdDetectorParams {
  // Healthy level: median of the first 16 iterations (robust to up to 7 warm-up or disturbed ones).
  std::uint32_t baseline_iterations = 16;
  // Bocd on ln(x / level). The prior says: a fresh run's mean is unknown (kappa 0.01: its first iteration
  // sets it), its jitter about 3 % (beta / (alpha - 1) = 0.03^2), with moderately heavy tails (alpha 2:
  // 4 degrees of freedom). Hazard 1/100: fail-slows are transient and come as onset/end pairs minutes
  // apart; 100 was better than 250 and 1000 on every evaluation sample (docs/analysis.md).
  double hazard_lambda = 100.0;
  NormalGammaPrior prior{0.0, 0.01, 2.0, 0.0009};
  // Interference (GC pauses, stalls) as outliers: eps 2 % of iterations, uniform over a log-range of 10
  // (ratios 1/150 .. 150 to the level). Keeps one checkpoint stall from erasing Bocd's history (see Bocd).
  double outlier_probability = 0.02;
  double outlier_log_density = -2.302585092994046;  // log(1 / 10)
  // Pruning: in a stationary stretch every run length keeps a posterior of order H e^-k (a young run
  // predicts as well as an old one once it has learned the jitter), so a tiny threshold keeps O(t) of
  // them; 1e-3 (H / 10) keeps 2-3 and Bocd runs several times faster than at 1e-4, with the same accuracy
  // (docs/analysis.md). A change still seeds a run: its first iteration gives the r = 1 hypothesis far
  // more than 1e-3 unless it lies within ~2 standard deviations of the current level.
  double prune_below = 1e-3;
  std::size_t max_run_lengths = 1024;
  // Decision rule: P(6 <= r_t <= 16) >= 0.9 (a threshold is clamped below 1 - 1/hazard_lambda, the most
  // mass r > 0 can have). min_run 6 is the persistence a change needs: interference
  // clusters of up to 5 iterations (a burst next to a GC pause) are common enough in long jobs that
  // min_run 5 gives about 1-3 % of healthy 1,500-6,000-iteration jobs a false event, min_run 6 under 1 %;
  // the cost is a detection latency of 5 iterations (detected_index - onset) for changes that are not flat
  // (see early_run for those). max_run 16 bounds how long a borderline change keeps being re-validated.
  std::uint32_t min_run = 6;
  std::uint32_t max_run = 16;
  // Early decision for level shifts: a run of at least early_run iterations may be reported before min_run
  // when it is flat, every iteration of it within a band of the others: max / min - 1 <= max(flat_floor,
  // flat_sigmas x the robust relative jitter of the before-segment). A fail-slow is a level shift, flat
  // but for the job's jitter; the interference clusters min_run guards against are bursts and pauses of
  // unrelated sizes, which are not. A run that begins with the iteration the change happened in (between
  // the two levels) may leave it out, the onset moving to the next. This is what lets the node agent report
  // within 5 iterations of the onset (its iteration times lag by up to one iteration) without the false
  // events of a plain min_run 4 or 5 (trade-off table in docs/analysis.md). 0 switches it off.
  std::uint32_t early_run = 5;
  // Severe level shifts: a flat run of at least severe_run iterations whose level is at least severe_ratio
  // times (or at most 1 / severe_ratio of) the level before may be reported sooner still (latency 3).
  // Interference clusters that flat and that far from the level for 4 iterations are rare: on the
  // evaluation traces severe_run 4 at 1.4x keeps FPR at 0.2 % (at 1.2-1.3x it is 0.7-0.9 %; severe_run 3 at
  // 1.5x, 2.9 %; table in docs/analysis.md). 0 switches it off.
  std::uint32_t severe_run = 4;
  double severe_ratio = 1.4;
  double flat_sigmas = 2.5;
  double flat_floor = 0.02;
  // The severe rule also takes a milder shift, from moderate_ratio (1.15x) on, when its run is flatter
  // still: within max(moderate_flat_floor, moderate_flat_sigmas x the jitter), 1 % or half a sigma. A level
  // that steady and 15 % or more away is not interference; it is what a throttled GPU or a congested link
  // looks like on a job with little jitter, and deciding it on its 4th iteration puts the decision within
  // 5 of the job's iterations of the fault's start, the iteration it began in counted. On the evaluation
  // traces (seeds 1-3, the scale-6 and scale-10 samples of seed 11) it changes no figure; 0.75 sigma costs
  // 0.1 point of FPR on seed 1, 1 sigma 0.1-0.2 points on four of the five (docs/analysis.md). A first
  // iteration within the wide band but not the narrow one (a change early in its iteration) is not left
  // out for it: the early rule decides that run, on the same iteration. 0 (or anything up to 1) switches
  // it off.
  double moderate_ratio = 1.15;
  double moderate_flat_sigmas = 0.5;
  double moderate_flat_floor = 0.01;
  double threshold = 0.9;  // the paper's 0.9
  // Validation (changepoint_validation.h): 10 %, fastest-quarter means, before = up to 64 iterations.
  bool validate = true;
  ValidationParams validation;
  std::uint32_t before_max = 64;
};

class BocdDetector final : public SlowdownDetector {
 public:
  explicit BocdDetector(const BocdDetectorParams& params = {});

  bool push(double iter_ms, std::vector<SlowdownEvent>& events) override;
  std::uint64_t iterations() const override { return n_; }

  // The healthy level (median of the baseline), once known.
  std::optional<double> level() const { return level_; }
  // Iterations skipped as warm-up (known once the baseline is full).
  std::uint64_t warmup_iterations() const { return warmup_; }
  const Bocd& bocd() const { return bocd_; }
  const BocdDetectorParams& params() const { return params_; }

 private:
  // A band a flat run stays within: max(floor, sigmas x the robust relative jitter of the segment before).
  struct FlatBand {
    double floor;
    double sigmas;
  };
  // The early and severe rules' band, and the narrower one the severe rule asks of a moderate shift.
  FlatBand flat_band() const { return {params_.flat_floor, params_.flat_sigmas}; }
  FlatBand moderate_band() const { return {params_.moderate_flat_floor, params_.moderate_flat_sigmas}; }
  // The relative width of `band` against the jitter of `before`.
  double flat_tolerance(std::span<const double> before, FlatBand band);
  // Whether `after` lies within `band` (max / min - 1) against the jitter of `before`.
  bool flat(std::span<const double> before, std::span<const double> after, FlatBand band);
  // Whether the first iteration of `after` (2+ long) is the mix of a change within it: strictly between the
  // level before and the level of the rest; with `beyond_jitter`, also farther from the latter than
  // flat_band's tolerance.
  bool first_between_levels(std::span<const double> before, std::span<const double> after, bool beyond_jitter);
  enum class Rule { kOrdinary, kEarly, kSevere };
  // Feeds iteration `i` (already in history_) to Bocd and decides; `now` is the iteration being read.
  void step(std::uint64_t i, std::uint64_t now, std::vector<SlowdownEvent>& events);
  // Decides on a run of at least `run` iterations ending at `i` under `rule`; true when it reported one.
  bool decide(std::uint64_t i, std::uint64_t now, std::uint32_t run, Rule rule, std::vector<SlowdownEvent>& events);

  BocdDetectorParams params_;
  Bocd bocd_;
  IterationHistory history_;
  std::vector<double> scratch_;
  std::vector<double> deviations_;
  std::uint64_t n_ = 0;
  std::optional<double> level_;
  double log_level_ = 0.0;
  std::uint64_t warmup_ = 0;
  std::uint64_t segment_start_ = 0;            // onset of the last event, or the first non-warm-up iteration
  std::optional<std::uint64_t> last_decided_;  // detected_index of the last event
};

}  // namespace greyhound::analysis
