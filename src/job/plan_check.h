// The job's check of a mitigation plan against its own layout (docs/redis-keys.md, "Plan"): pure, values in,
// verdict out, so every rule is tested with plain values. The job client (job/job_client.h) runs it on each
// new plan it reads; a plan that fails it is never applied and never replaces the last good one.
//
// Rules, in the order they are checked (the first that fails gives the reason):
//   1. epoch: equal to the last one seen is nothing new (kSeen); older is stale (kStale).
//   2. strategy: a revert, or S1, is always acceptable; S2..S4 only when the layout advertises it
//      (kUnsupported otherwise).
//   3. micro-batches (S2 needs them; S1 and reverts may leave them empty = unchanged): one entry per DP
//      replica, every entry >= 1, and the same total as the allocation in force (the global batch is fixed).
//   4. placement (S3 apply needs it; a revert may carry one): one entry per rank, each rank and each
//      (tp, dp, pp) coordinate exactly once and within the layout, and, when the layout knows
//      gpus_per_node, whole TP groups per node (placement_error, store/messages.h: the rule the layout's
//      own placement meets too).
//   5. exclusions (S4 apply needs at least one): ranks within the world, nodes within the job when the
//      layout knows gpus_per_node.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "store/messages.h"

namespace greyhound::job {

enum class Verdict {
  kAccept,       // apply it
  kSeen,         // the plan already handled (same epoch): nothing to do
  kStale,        // an epoch older than the last one seen
  kUnsupported,  // a strategy this job did not advertise
  kRejected,     // does not fit this job (reason says why)
};

// One entry of an S3 placement: launch rank `rank` takes the role (tp, dp, pp) (store/messages.h).
using greyhound::PlacementEntry;

struct PlanCheck {
  Verdict verdict = Verdict::kRejected;
  std::string reason;                    // empty for kAccept and kSeen
  std::vector<PlacementEntry> placement; // kAccept: the plan's placement, decoded (empty: unchanged)
};

// `last_epoch`: the newest epoch this job has seen (0: none).
PlanCheck check_plan(const JobLayout& layout, const Plan& plan, std::int64_t last_epoch);

// Whether a layout is one a job may publish: the rules every reader enforces (layout_error, messages.h) and
// capabilities among "S2", "S3", "S4". Empty when it is, else the reason.
std::string check_layout(const JobLayout& layout);

}  // namespace greyhound::job
