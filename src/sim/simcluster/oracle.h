// The oracle of greyhound-simcluster --oracle: the remedy greyhound's planner would pick if it knew the fault
// schedule, in force from the fault's onset, with no detection, no profile and no ski rental. It bounds what
// greyhound can reach with the same remedies (S2 has no pause, so the oracle pays nothing for it). Pure: the
// schedule, the job clock and the allocation in force in; plans out. The launcher does the I/O.
//
// Its model of a fault's cost is relative: a healthy replica takes 1 per micro-batch, a replica takes the
// largest slowdown among its ranks (a rank's GPU slowdown times its CPU slowdown: faults compound as in the
// stand-ins). A CPU slowdown stretches only the launch cost of kernels in the stand-ins, so for CPU faults
// this overstates the replica's time (the oracle then moves more micro-batches than the measured times
// would); GPU slowdowns stretch all of a rank's compute, which dominates a micro-batch.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "greyhound/mitigate/placement.h"
#include "greyhound/parallel_shape.h"
#include "greyhound/result.h"
#include "sim/fault_schedule.h"
#include "store/messages.h"

namespace greyhound::sim {

// The job as the oracle plans for it: its shape, the allocation it started with and what it can apply
// (the layout's capabilities: "S2", "S3", "S4").
struct OracleJob {
  ParallelShape shape;
  std::vector<int> initial_microbatches;  // by DP index
  std::vector<std::string> capabilities;
  int gpus_per_node = 0;                   // 0: unknown (no S3)
  int microbatch_multiple = 0;             // the layout's: what the job's schedule needs (0: not said)
};



// Per DP replica (dp order), its time per micro-batch at job time t_s relative to a healthy replica.
std::vector<double> replica_slowdowns(const ParallelShape& shape, const FaultSchedule& faults, double t_s);

// The job times at which the set of active faults changes (every start and end), sorted, without repeats.
std::vector<double> fault_change_times(const FaultSchedule& faults);

// The plan for the faults active at t_s when `in_force` runs (epoch left 0 for the caller to number):
//  - some replica slower than another: S2, the MicrobatchSolver's split of the same global batch over the
//    relative replica times minimising the 1F1B makespan max (m + P - 1) t (fewest moves from `in_force`;
//    in the job's microbatch_multiple, else in multiples of the pipeline depth when `in_force` is, as the
//    master's planner does), when that
//    makespan is at least 1 % below `in_force`'s (else nothing) and the job advertises S2; a split equal
//    to the initial one is published as a revert;
//  - no replica slower: a revert to the initial split when `in_force` differs from it, else nothing;
//  - congested links: see oracle_link_plan (nothing yet).
// Errors: a job without S2 where S2 would be planned is no error (nothing is planned); the error cases are
// an allocation of the wrong length or sum, and what MicrobatchSolver refuses (its sentence).
Result<std::optional<Plan>> oracle_plan(const OracleJob& job, const FaultSchedule& faults, double t_s,
                                        const std::vector<int>& in_force);

// For link faults, S3 (for a job that advertises "S3" and names its GPUs per node, whole TP groups per
// node): the TopologyPlanner's placement for the links congested at t_s, from `in_force`, with no pause
// (the oracle pays nothing) and a horizon of an hour, when it predicts the iteration faster; with no link
// congested, a revert to Megatron's placement when another is in force. Its cost model is nominal, in the
// sim's proportions: 50 ms of compute per micro-batch and stage, 1 GB/s between nodes and 10 GB/s inside
// one, the DP sync 8 MB per slot, a PP edge 1 MB per micro-batch each way (healthy: 8 and 1 ms), each
// congested link at its bandwidth_factor of 1 GB/s. Nothing when no placement is predicted faster.
std::optional<Plan> oracle_link_plan(const OracleJob& job, const FaultSchedule& faults, double t_s,
                                     const std::vector<int>& in_force_microbatches,
                                     const mitigate::Placement& in_force_placement);

// How the job answered plan `plan` once every one of its `world` ranks acknowledged it (plan_applied when
// all applied, else plan_rejected: the same event types as the master's); nullopt while some rank has not.
struct OracleOutcome {
  std::string event_type;  // event_type::kPlanApplied or kPlanRejected
  PlanOutcome outcome;
};
std::optional<OracleOutcome> oracle_outcome(const Plan& plan, const std::vector<PlanAck>& acks, int world);

}  // namespace greyhound::sim
