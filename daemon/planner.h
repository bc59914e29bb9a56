// The master's Planner for one job: what the job runs now (micro-batch allocation and placement, from its
// layout and the plans it applied) and the plans that change it. Pure: the controller decides *when* (each
// fail-slow's ski rental, daemon/controller.h), the planner *what*:
//  - S2: the MicrobatchSolver on the replicas' times per pipeline slot (from the latest localisation), from
//    the allocation in force. Its prediction: the iteration time now scaled by the 1F1B makespan of the new
//    split over that of the split in force, max over replicas of (m + P - 1) x time per slot.
//  - S3: the TopologyPlanner on a CostModel built from the localisation (needs the layout's gpus_per_node):
//    healthy stage time = the median replica's time per slot; the culprit's GPU slowed by its replica's
//    time over the median; suspect links slowed by their group's ratio; DP gradient and PP activation
//    volumes from the typical transfer times at a nominal bandwidth (1 GB/s between nodes, 10 GB/s inside
//    one; only ratios matter). Ski rental has already judged that the loss pays for the pause if S3 removes
//    it; the planner's own check (saving over a horizon > pause) then asks whether this placement removes
//    enough of it. Horizon: twice the fail-slow's duration so far (it has lasted t, and is expected to last
//    about t more), so a placement must win back about half the slowdown. The pause is what S3 costs on this
//    job (costs()): the switch it measured, else its own estimate, else the configured one.
//  - S4: restart from the checkpoint without the culprit (rank and node), or, for a link, without its nodes.
//    No spare nodes are assumed: the job comes back with as many DP replicas as fit on the GPUs left
//    (whole TP x PP replicas), and the same global batch over them. Its prediction: the healthy iteration
//    scaled by the 1F1B makespan of the original split's largest replica, (m + P - 1), to that of the new
//    one; nullopt when no replica would be left.
//  - A revert: back to the original allocation and/or placement; or back to a given configuration (a remedy
//    that did not pay).
// A builder that finds nothing better than what runs returns nullopt.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "daemon/localiser.h"
#include "greyhound/mitigate/placement.h"
#include "greyhound/mitigate/ski_rental.h"
#include "greyhound/thresholds.h"
#include "store/messages.h"

namespace greyhound::master {

struct PlannerConfig {
  mitigate::SkiRentalConfig ski;
};

// The ski-rental cause of a localised cause (a contended host is helped as a slow GPU is).
mitigate::FailSlowCause ski_cause(Cause c);

// What runs: an allocation and a placement.
struct JobConfig {
  std::vector<int> microbatches;
  mitigate::Placement placement;
  bool operator==(const JobConfig&) const = default;
};

class Planner {
 public:
  // The layout's allocation in force, and the placement it names (Megatron's order when it names none).
  Planner(const PlannerConfig& config, const JobLayout& layout);

  // Whether the job can apply `s` for a fail-slow of this cause: its capability, and what the layout
  // allows (S2: more than one replica and not a link; S3: whole TP groups per node).
  bool available(Strategy s, Cause cause) const;

  // The remedies' overheads on this job: the configured ones, except where the job's layout gives its own
  // estimate (S3, S4), and S3's where the job measured a switch (`measured_s3_s` > 0: the apply_s of the
  // last placement switch it acknowledged).
  mitigate::SkiRentalConfig costs(double measured_s3_s) const;
  // The job republished its layout: its cost estimates may have changed.
  void layout_updated(const JobLayout& layout);
  // The configured overheads changed (an operator's setting).
  void configure(const PlannerConfig& config) { config_ = config; }

  std::optional<Plan> s2(const Localisation& loc, double iteration_s, const std::string& why) const;
  // `pause_s`: what S3 costs on this job (costs().s3_pause_s). A placement is proposed only when the cost
  // model predicts it at least `min_gain` faster than the one in force (the model is rough; a remedy judged
  // by a pay margin must be predicted to clear it). Its predicted iteration is `iteration_s` (measured
  // now) scaled by the model's ratio (the localisation's times may be per unit of time, not per iteration),
  // or the model's own time without a measurement.
  std::optional<Plan> s3(const Localisation& loc, double iteration_s, double horizon_s, double pause_s, double min_gain,
                         const std::string& why) const;
  std::optional<Plan> s4(const FailSlow& f, double healthy_iteration_s, const std::string& why) const;
  // Back to `to` (the original configuration by default), in what differs; nullopt when nothing does.
  std::optional<Plan> back_to(const JobConfig& to, bool microbatches, bool placement, const std::string& why) const;

  void applied(const Plan& plan);  // the job acknowledged it on every rank

  const JobLayout& layout() const { return layout_; }
  const JobConfig& current() const { return current_; }
  const JobConfig& original() const { return original_; }
  bool split_in_force() const { return current_.microbatches != original_.microbatches; }
  bool moved() const { return current_.placement != original_.placement; }

 private:
  nlohmann::json placement_json(const mitigate::Placement& p) const;

  PlannerConfig config_;
  JobLayout layout_;
  JobConfig original_, current_;
};

}  // namespace greyhound::master
