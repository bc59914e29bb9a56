#include "job/plan_check.h"

#include <algorithm>

#include "greyhound/vocabulary.h"

namespace greyhound::job {
namespace {

std::string list(const std::vector<std::string>& v) {
  std::string out = "[";
  for (std::size_t i = 0; i < v.size(); ++i) out += (i ? "," : "") + v[i];
  return out + "]";
}

long total(const std::vector<int>& v) {
  long t = 0;
  for (int x : v) t += x;
  return t;
}

PlanCheck reject(Verdict v, std::string reason) {
  PlanCheck c;
  c.verdict = v;
  c.reason = std::move(reason);
  return c;
}

// Empty when the vector fits the layout, else why not.
std::string check_microbatches(const JobLayout& layout, const std::vector<int>& mb) {
  if (mb.size() != static_cast<std::size_t>(layout.dp)) {
    return "microbatches: " + std::to_string(mb.size()) + " entries for " + std::to_string(layout.dp) +
           " DP replicas";
  }
  for (std::size_t i = 0; i < mb.size(); ++i) {
    if (mb[i] < 1) return "microbatches[" + std::to_string(i) + "]: " + std::to_string(mb[i]) + " is below 1";
    if (!schedule_takes(layout, mb[i])) {
      return "microbatches[" + std::to_string(i) + "]: " + std::to_string(mb[i]) + " is not a multiple of " +
             std::to_string(layout.microbatch_multiple) + ", which the job's pipeline schedule needs";
    }
  }
  if (total(mb) != total(layout.microbatches)) {
    return "microbatches: total " + std::to_string(total(mb)) + " differs from the job's global batch of " +
           std::to_string(total(layout.microbatches)) + " micro-batches";
  }
  return {};
}

// Decodes and checks a placement; empty error when it is a permutation of the layout's roles with whole TP
// groups per node (placement_error).
std::string decode_placement(const JobLayout& layout, const nlohmann::json& j, std::vector<PlacementEntry>* out) {
  if (!j.is_array()) return "placement: must be an array";
  if (j.size() != static_cast<std::size_t>(layout.world)) {
    return "placement: " + std::to_string(j.size()) + " entries for " + std::to_string(layout.world) + " ranks";
  }
  std::vector<PlacementEntry> decoded;
  for (std::size_t i = 0; i < j.size(); ++i) {
    const std::string where = "placement[" + std::to_string(i) + "]";
    const auto& e = j[i];
    if (!e.is_object()) return where + ": must be an object";
    PlacementEntry p;
    const std::pair<const char*, int*> fields[] = {{"rank", &p.rank}, {"tp", &p.tp}, {"dp", &p.dp}, {"pp", &p.pp}};
    for (const auto& [name, dst] : fields) {
      if (!e.contains(name) || !e.at(name).is_number_integer()) return where + "." + name + ": must be an integer";
      const auto v = e.at(name).get<std::int64_t>();
      if (v < 0 || v > kMaxRank) return where + "." + name + ": out of range";
      *dst = static_cast<int>(v);
    }
    decoded.push_back(p);
  }
  if (auto why = placement_error(layout, decoded); !why.empty()) return why;
  *out = std::move(decoded);
  return {};
}

}  // namespace

std::string check_layout(const JobLayout& l) {
  if (auto why = layout_error(l); !why.empty()) return why;
  for (const auto& c : l.capabilities) {
    const auto s = parse_strategy(c);
    if (!s || *s == Strategy::kS1) return "capabilities: '" + c + "' is not S2, S3 or S4";
  }
  return {};
}

PlanCheck check_plan(const JobLayout& layout, const Plan& plan, std::int64_t last_epoch) {
  if (plan.epoch == last_epoch) return {Verdict::kSeen, {}, {}};
  if (plan.epoch < last_epoch) {
    return reject(Verdict::kStale, "epoch " + std::to_string(plan.epoch) + " is older than the last plan taken (" +
                                       std::to_string(last_epoch) + ")");
  }
  const Strategy strategy = plan.strategy;
  const bool revert = plan.action == PlanAction::kRevert;
  const std::string strategy_name(name(plan.strategy));
  const bool advertised =
      std::find(layout.capabilities.begin(), layout.capabilities.end(), strategy_name) != layout.capabilities.end();
  if (!revert && strategy != Strategy::kS1 && !advertised) {
    return reject(Verdict::kUnsupported, "strategy " + strategy_name + " is not among this job's capabilities " +
                                             list(layout.capabilities));
  }
  const bool needs_microbatches = !revert && strategy == Strategy::kS2;
  if (needs_microbatches && plan.microbatches.empty()) {
    return reject(Verdict::kRejected, "microbatches: an S2 plan must give one entry per DP replica");
  }
  if (!plan.microbatches.empty()) {
    if (auto why = check_microbatches(layout, plan.microbatches); !why.empty()) {
      return reject(Verdict::kRejected, why);
    }
  }
  PlanCheck ok{Verdict::kAccept, {}, {}};
  const bool has_placement = !plan.placement.is_null();
  if (!revert && strategy == Strategy::kS3 && !has_placement) {
    return reject(Verdict::kRejected, "placement: an S3 plan must place every rank");
  }
  if (has_placement) {
    if (auto why = decode_placement(layout, plan.placement, &ok.placement); !why.empty()) {
      return reject(Verdict::kRejected, why);
    }
  }
  if (!revert && strategy == Strategy::kS4 && plan.exclude_nodes.empty() && plan.exclude_ranks.empty()) {
    return reject(Verdict::kRejected, "exclude_nodes/exclude_ranks: an S4 plan must exclude something");
  }
  for (int r : plan.exclude_ranks) {
    if (r < 0 || r >= layout.world) return reject(Verdict::kRejected, "exclude_ranks: rank " + std::to_string(r) + " outside the job");
  }
  const int nodes = layout.gpus_per_node > 0 ? layout.world / layout.gpus_per_node : 0;
  for (int n : plan.exclude_nodes) {
    if (n < 0 || (nodes > 0 && n >= nodes)) {
      return reject(Verdict::kRejected, "exclude_nodes: node " + std::to_string(n) + " outside the job's " +
                                            std::to_string(nodes) + " nodes");
    }
  }
  return ok;
}

}  // namespace greyhound::job
