#include "daemon/operator_plan.h"

#include <algorithm>
#include <numeric>

namespace greyhound::master {
namespace {

bool can(const JobLayout& l, const char* strategy) {
  return std::find(l.capabilities.begin(), l.capabilities.end(), strategy) != l.capabilities.end();
}

}  // namespace

OperatorPlanCheck check_operator_plan(const OperatorPlanRequest& req, const JobLayout& layout) {
  OperatorPlanCheck out;
  if (req.action == "release") return out;
  const std::string who = "operator's plan " + req.id + (req.reason.empty() ? "" : ": " + req.reason);
  const std::vector<int>& initial = layout.initial_microbatches.empty() ? layout.microbatches : layout.initial_microbatches;
  if (req.action == "revert") {
    out.plan = original_configuration_plan(layout);
    out.plan->reason = who;
    return out;
  }
  Plan p;
  p.reason = who;
  if (!req.microbatches.empty()) {
    if (!can(layout, "S2")) {
      out.error = "the job does not advertise S2: it cannot change its split";
      return out;
    }
    if (static_cast<int>(req.microbatches.size()) != layout.dp) {
      out.error = "microbatches: " + std::to_string(req.microbatches.size()) + " given, the job has " +
                  std::to_string(layout.dp) + " DP replicas";
      return out;
    }
    const long want = std::accumulate(initial.begin(), initial.end(), 0L);
    const long got = std::accumulate(req.microbatches.begin(), req.microbatches.end(), 0L);
    if (got != want) {
      out.error = "microbatches: they sum to " + std::to_string(got) + ", the job's global batch is " +
                  std::to_string(want) + " micro-batches";
      return out;
    }
    for (int m : req.microbatches) {
      if (!schedule_takes(layout, m)) {
        out.error = "microbatches: " + std::to_string(m) + " is not a multiple of " +
                    std::to_string(layout.microbatch_multiple) + ", which the job's pipeline schedule needs";
        return out;
      }
    }
    p.microbatches = req.microbatches;
    p.strategy = Strategy::kS2;
  }
  if (!req.placement.empty()) {
    if (!can(layout, "S3")) {
      out.error = "the job does not advertise S3 (it cannot move ranks)";
      return out;
    }
    if (layout.gpus_per_node <= 0) {
      out.error = "the job's layout names no gpus_per_node: a placement cannot be checked against its nodes";
      return out;
    }
    if (const std::string why = placement_error(layout, req.placement); !why.empty()) {
      out.error = why;
      return out;
    }
    p.placement = placement_json(req.placement);
    p.strategy = Strategy::kS3;
  }
  out.plan = std::move(p);
  return out;
}

}  // namespace greyhound::master
