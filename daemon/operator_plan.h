// An operator's manual plan (greyhoundctl plan; docs/operations.md, "Manual plans"), pure: the request
// checked against the job's layout like every plan greyhound makes, and the plan to publish.
//  - apply: micro-batches, one per DP replica, each >= 1, summing to the job's global batch (the job must
//    advertise S2); and/or a placement, one role per launch rank meeting placement_error (S3, with the
//    job's GPUs per node known). A placement makes it an S3 plan, a split alone an S2 one.
//  - revert: the job's initial split, and Megatron's placement when another is in force: a revert plan.
//  - release: no plan (the master's own remedies again).
#pragma once

#include <optional>
#include <string>

#include "store/messages.h"

namespace greyhound::master {

struct OperatorPlanCheck {
  std::optional<Plan> plan;  // to publish (no epoch yet); none for a release or a refusal
  std::string error;         // why it is refused ("" when it is not)
};
OperatorPlanCheck check_operator_plan(const OperatorPlanRequest& req, const JobLayout& layout);

}  // namespace greyhound::master
