// TopologyPlanner (S3 of the paper): propose a new placement of the job's (dp, pp) roles on its nodes
// that moves congested links off DP rings (onto PP edges, which carry little traffic, or off the job's
// paths altogether) and gathers straggler GPUs into ceil(stragglers / slots per stage) inner stages;
// keep it only if the CostModel predicts a saving larger than the pause it costs.
//
// Search: local search over swaps of two slots' roles, started from the current placement and from a
// "gathered" placement (stragglers moved into the fewest inner stages, each to the nearest free slot).
// Each round applies the best swap by the key
//   (predicted iteration time, load (IterationEstimate::load_s), stages holding stragglers, stragglers
//    in the first/last stage, slots moved from the current placement, node distance moved)
// and stops when no swap improves it. Times within 1e-9 relative count as equal. The load lets the
// search cross plateaus of the max (two slow links on one ring: moving the first changes no maximum). Node distance is the
// sum over roles of |new node - old node|: among equal placements it keeps parameter exchanges between
// nearby nodes (usually the same rack). The proposal is never predicted slower than the current
// placement; it is `worthwhile` only if it is predicted faster and the time it saves over the horizon,
// horizon_s * (1 - predicted / current), exceeds pause_s.
//
// Cost: O(rounds * slots^3) model work (slots^2 / 2 swaps per round, O(slots) per estimate); fine for the
// tens to a few hundred TP groups of real jobs.
#pragma once

#include <string>

#include "greyhound/mitigate/cost_model.h"
#include "greyhound/mitigate/placement.h"
#include "greyhound/mitigate/result.h"

namespace greyhound::mitigate {

struct TopologyPlanOptions {
  double pause_s = 60.0;    // S3's action overhead (the measured pause; ~1 min in the paper)
  double horizon_s = 0.0;   // how long the fail-slow is expected to last from now
  double straggler_slowdown = 1.0;  // slots slower than this (strictly) count as stragglers when gathering
  int max_rounds = 0;       // 0: 4 * slots
};

struct TopologyPlan {
  Placement placement;               // the best placement found; == current when none is predicted faster
  double current_iteration_s = 0.0;
  double predicted_iteration_s = 0.0;  // of `placement`
  int moved_slots = 0;
  double saving_s = 0.0;             // horizon_s * (1 - predicted / current)
  bool worthwhile = false;           // predicted faster and saving_s > pause_s
  std::string reason;
};

class TopologyPlanner {
 public:
  explicit TopologyPlanner(const CostModel& model) : model_(model) {}  // keeps a reference

  // Errors: `current` is not a valid placement of the model's job, or options out of range.
  Result<TopologyPlan> plan(const Placement& current, const TopologyPlanOptions& options) const;

 private:
  const CostModel& model_;
};

}  // namespace greyhound::mitigate
