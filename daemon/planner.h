// The master's Planner driver for one incident: the SkiRental controller fed once per iteration, and the
// plans its decisions turn into. Pure: time and iterations enter as values; the master publishes the plans
// and reports acknowledgements back.
//  - S2: the MicrobatchSolver on the replicas' times per pipeline slot (from the localisation).
//  - S3: the TopologyPlanner on a CostModel built from the localisation (needs the layout's gpus_per_node):
//    healthy stage time = the median replica's time per slot; the culprit's GPU slowed by its replica's
//    time over the median; suspect links slowed by their group's ratio; DP gradient and PP activation
//    volumes from the typical transfer times at a nominal bandwidth (1 GB/s between nodes, 10 GB/s inside
//    one; only ratios matter). Ski rental has already judged that the loss pays for the pause if S3 removes
//    it; the planner's own check (saving over a horizon > pause) then asks whether this placement removes
//    enough of it. Horizon: twice the incident's duration so far (it has lasted t, and is expected to last
//    about t more), so a placement must win back about half the slowdown.
//  - S4: restart from the checkpoint without the culprit (rank and node), or, for a communication cause,
//    without the nodes of the suspect links.
// A strategy that yields no plan is declined, and the controller carries on without it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "store/messages.h"
#include "daemon/localiser.h"
#include "greyhound/mitigate/placement.h"
#include "greyhound/mitigate/ski_rental.h"
#include "greyhound/thresholds.h"

namespace greyhound::master {

struct PlannerConfig {
  mitigate::SkiRentalConfig ski;
  double still_slow_skew = kPeerExcessRatio;  // a replica this much slower than the median per micro-batch: still there
};

class Planner {
 public:
  // Starts on a localised incident. nullopt (with *why) when the job cannot be helped (no layout, nothing
  // the job can apply for this cause).
  static std::optional<Planner> start(const PlannerConfig& config, const Incident& incident, const Localisation& loc,
                                      const JobLayout& layout, std::string* why);

  // A newer localisation (re-profiling): replica times and whether the fail-slow is still there.
  void update(const Localisation& loc);
  // One iteration ended. Returns a plan to publish (epoch filled by the caller) when the controller acts.
  std::optional<Plan> observe(double iteration_s);
  // The job acknowledged a plan (all ranks applied it), or could not.
  void applied(const Plan& plan);
  void rejected(const Plan& plan);

  bool fail_slow_present() const { return present_; }
  mitigate::Strategy strategy() const { return controller_.strategy(); }
  bool reverted_to_original() const { return current_ == original_ && placement_ == original_placement_; }
  bool was_mitigated() const { return mitigated_; }  // some plan other than the original was applied
  const std::vector<int>& original_microbatches() const { return original_; }

 private:
  Planner(const PlannerConfig& c, mitigate::SkiRental s, const Incident& i, const JobLayout& l);
  std::optional<Plan> s2_plan(const std::string& why);
  std::optional<Plan> s3_plan(const std::string& why);
  std::optional<Plan> s4_plan(const std::string& why);

  // The remedies a decision can become, one entry each (planner.cpp): a new remedy is one entry there, its
  // name in vocabulary.h and its rung, overhead and causes in SkiRental.
  struct Remedy {
    Strategy strategy;         // wire name, and the capability the job must advertise
    mitigate::Strategy rung;   // its rung on the ski-rental ladder
    bool (*applicable)(const JobLayout& layout, const Localisation& loc);  // beyond the capability
    std::optional<Plan> (Planner::*build)(const std::string& why);
  };
  static const std::vector<Remedy>& remedies();

  PlannerConfig config_;
  mitigate::SkiRental controller_;
  std::int64_t incident_;
  JobLayout layout_;
  std::vector<int> original_;  // the allocation before the incident
  std::vector<int> current_;   // what the job runs now
  std::vector<double> replica_ms_;
  Localisation loc_;                                // the latest
  mitigate::Placement original_placement_, placement_;
  double elapsed_s_ = 0;                            // iterations observed since the start
  bool present_ = true;
  bool mitigated_ = false;
};

}  // namespace greyhound::master
