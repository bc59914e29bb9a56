// SkiRental: for one fail-slow incident, when to climb the strategy ladder S1 -> S2 -> S3 -> S4 and when
// to step back down after it ends. The duration of a fail-slow is unknown (seconds to hours); its cost so
// far is not. Like renting skis until the rent paid equals the price of buying, the controller stays with
// the current strategy until the loss accumulated over the incident reaches the overhead of the next one.
//
// Rule, evaluated once per iteration (the master calls observe() with the iteration that just ended; one
// in which the current strategy was not in force only adds to the loss, SkiRentalObservation::held):
//  - While the fail-slow is present: loss += max(0, t_iteration - t_healthy). If the current strategy has
//    not brought the iteration time (median of the last `window` iterations since it took effect) back to
//    within fixed_ratio x healthy, and loss >= overhead(next), apply `next`: the next strategy that can help
//    the localised cause (S2 balances compute, so it is skipped for a congested link) and that the master
//    has not marked unavailable (solver or planner found nothing better). One step per call.
//    If the current strategy does hold the iteration within fixed_ratio, it has paid off the loss before
//    it, and only the residual loss accumulated under it counts: `next` is applied when that residual
//    reaches overhead(next). (Without this, a residual under 10 % would never be escalated, and a long
//    incident would cost without bound against an oracle that restarts.)
//  - After it ends: S1 and S4 leave nothing to undo (S4 restarted without the slow part). S2 and S3 may
//    leave a configuration slower than the original on the healthy cluster; its excess over healthy
//    (beyond jitter_ratio) is a new rent, and the controller reverts when it reaches the revert overhead.
//    A configuration that stays within jitter for `window` iterations is kept.
// Overheads: S2 = one iteration + solve time; S3 = the measured pause (default 60 s); S4 = checkpoint +
// restart. Reverting S2 or S3 costs what applying it did.
//
// Competitiveness (docs/mitigation.md): with S1 and one remedy the loss is at most twice that of an oracle
// that knows the duration (plus one iteration of rounding); with an intermediate rung S_k before S4, at
// most 2 + overhead(S_k) / overhead(S4) times if S_k does not fix the incident, 2 + 2 overhead(S_k) /
// overhead(S4) if it leaves a residual within fixed_ratio.
//
// Pure: time enters only as the iteration durations passed in. Not thread-safe; one per incident.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "greyhound/vocabulary.h"
#include "greyhound/mitigate/result.h"
#include "greyhound/thresholds.h"

namespace greyhound::mitigate {

enum class FailSlowCause : std::uint8_t {
  kComputation,    // slow GPU or CPU contention: S2, S3 and S4 can help
  kCommunication,  // congested link: S3 and S4 can help, S2 cannot
  kBoth,           // compound: any may help
};

struct SkiRentalConfig {
  double fixed_ratio = kSignificantRatio;  // "fixed": iteration time <= fixed_ratio x healthy
  double s2_solve_s = 0.001;     // S2 overhead = one iteration + this
  double s3_pause_s = 60.0;      // S3 overhead
  double s4_restart_s = 1800.0;  // S4 overhead: checkpoint + restart
  double jitter_ratio = 0.02;    // after recovery, iterations within this of healthy cost nothing
  int window = 5;                // iterations whose median judges the current strategy
};

struct SkiRentalIncident {
  FailSlowCause cause = FailSlowCause::kComputation;
  double healthy_iteration_s = 0.0;
  bool s2_available = true;  // false: the solver finds no allocation faster than the current one
  bool s3_available = true;  // false: the planner finds no placement worth its pause
  bool s4_available = true;  // false: no spare capacity, or restarts are not allowed
};

struct SkiRentalObservation {
  double iteration_s = 0.0;       // duration of the iteration that just ended
  bool fail_slow_present = true;  // the localised cause is still there (profiling / validation)
  // The current strategy was not in force in this iteration (a plan still awaiting its acknowledgements, an
  // operator's plan in its place): while the fail-slow is present its loss counts, but the iteration says
  // nothing of the strategy, so it neither judges it (no climb) nor enters the window it is judged on; once
  // the fail-slow is over it adds nothing to the rent of the strategy's configuration (no revert). It is
  // still the job's latest iteration (S2's price).
  bool held = false;
};

enum class SkiRentalAction : std::uint8_t {
  kStay,    // nothing to do
  kApply,   // apply `strategy` from the next iteration boundary
  kRevert,  // restore the original configuration (even micro-batches, original placement)
};

struct SkiRentalDecision {
  SkiRentalAction action = SkiRentalAction::kStay;
  Strategy strategy = Strategy::kS1;  // the strategy in force after the action
  double overhead_s = 0.0;                  // expected cost of the action
  std::string reason;                       // why; empty for kStay
};

// What a SkiRental has learnt, to keep it across a restart of whoever owns it (the post-recovery rent is not
// kept: the master ends a fail-slow on evidence, not on the rent after it).
struct SkiRentalState {
  Strategy strategy = Strategy::kS1;
  Strategy previous = Strategy::kS1;
  double loss_s = 0.0;
  double strategy_loss_s = 0.0;
  double last_iteration_s = 0.0;  // 0: not known
  std::vector<double> window;     // newest last
  bool s2_available = true, s3_available = true, s4_available = true;
};

class SkiRental {
 public:
  // Errors: healthy time not > 0, a negative or non-finite overhead, fixed_ratio < 1, window < 1.
  static Result<SkiRental> create(const SkiRentalConfig& config, const SkiRentalIncident& incident);

  SkiRentalDecision observe(const SkiRentalObservation& observation);

  // The escalation observe() would decide, now, without a new iteration: for a fail-slow found after it has
  // already cost the job (an account restored with its loss since the onset), so that the rung its loss
  // pays for is taken at once rather than at the next iteration. Judged on the iterations since the
  // strategy took effect, or the latest one when there are none. No-op once the fail-slow is over.
  SkiRentalDecision decide();

  // The master could not apply `s` after all (nothing better found): mark it unavailable and, if the
  // controller had just moved to it, fall back to the strategy before it.
  void decline(Strategy s);

  // `s` (S2 or S3) is already in force, applied before this controller existed (by an earlier run of the
  // master): continue from it, with the loss counted from now. Other strategies: no effect.
  void resume(Strategy s);

  // What applying `s` (S3 or S4) costs on this job, in place of the configured overhead from now on: the
  // job's own estimate, or (S3) the switch it measured and acknowledged. The next escalation to it, and its
  // revert, weigh what it costs here. S1 and S2 (one iteration): no effect; a negative or non-finite value:
  // ignored.
  void set_overhead(Strategy s, double seconds);

  // What confirming the fail-slow costs before S3 or S4 may be applied (the validation pause the master runs
  // first under --validate auto): part of their price when climbing to them, not of their revert. 0 (the
  // default) once it is confirmed, or when nothing is confirmed first. A negative or non-finite value: 0.
  void set_confirmation_overhead(double seconds);
  double confirmation_overhead_s() const { return confirm_s_; }

  SkiRentalState state() const;
  // Continues from `state` (its window cut to the configured length; availability only ever narrows).
  void restore(const SkiRentalState& state);

  Strategy strategy() const { return strategy_; }
  double accumulated_loss_s() const { return loss_s_; }
  double post_recovery_loss_s() const { return post_loss_s_; }
  bool finished() const { return finished_; }
  double overhead_s(Strategy s) const;  // S2 uses the latest iteration time
  // What climbing to `s` costs: its overhead, plus the confirmation for S3 and S4.
  double price_s(Strategy s) const;
  // Whether `s` may still help this fail-slow: not declined, and (S2) not a link's.
  bool can_help(Strategy s) const;

 private:
  SkiRental(const SkiRentalConfig& config, const SkiRentalIncident& incident);
  SkiRentalDecision escalate();  // the climb of observe() while the fail-slow is present
  double judged_iteration_s() const;  // median of window_

  SkiRentalConfig config_;
  SkiRentalIncident incident_;
  Strategy strategy_ = Strategy::kS1;
  Strategy previous_ = Strategy::kS1;
  double loss_s_ = 0.0;           // over the incident
  double strategy_loss_s_ = 0.0;  // since the current strategy took effect
  double post_loss_s_ = 0.0;
  int calm_iterations_ = 0;
  double last_iteration_s_ = 0.0;
  std::deque<double> window_;            // iteration times since the strategy took effect, newest last
  mutable std::vector<double> scratch_;  // for the median, to avoid allocating per call
  bool finished_ = false;
  double confirm_s_ = 0.0;  // set_confirmation_overhead
};

}  // namespace greyhound::mitigate
