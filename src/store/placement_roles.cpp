#include "store/placement_roles.h"

namespace greyhound::store {

std::optional<mitigate::Placement> slot_placement(const std::vector<PlacementEntry>& entries, int tp, int dp, int pp) {
  if (tp <= 0 || dp <= 0 || pp <= 0) return std::nullopt;
  mitigate::Placement placed(static_cast<std::size_t>(dp) * static_cast<std::size_t>(pp));
  for (const PlacementEntry& e : entries) {
    if (e.rank >= 0 && e.rank % tp == 0 && static_cast<std::size_t>(e.rank / tp) < placed.size()) {
      placed[static_cast<std::size_t>(e.rank / tp)] = {e.dp, e.pp};
    }
  }
  if (mitigate::placement_error(placed, dp, pp)) return std::nullopt;
  return placed;
}

namespace {
mitigate::Placement slots_or_megatron(const JobLayout& l, const std::vector<PlacementEntry>& entries) {
  if (!entries.empty()) {
    if (auto p = slot_placement(entries, l.tp, l.dp, l.pp)) return *p;
  }
  return mitigate::megatron_placement(l.dp, l.pp);
}
}  // namespace

mitigate::Placement placement_in_force(const JobLayout& l) { return slots_or_megatron(l, l.placement); }

mitigate::Placement initial_placement(const JobLayout& l) { return slots_or_megatron(l, l.initial_placement); }

std::optional<mitigate::Placement> placement_of_plan(const nlohmann::json& placement, int tp, int dp, int pp) {
  if (!placement.is_array()) return std::nullopt;
  std::vector<PlacementEntry> entries;
  for (const auto& r : placement) {
    if (!r.is_object()) return std::nullopt;
    entries.push_back({r.value("rank", -1), r.value("tp", -1), r.value("dp", -1), r.value("pp", -1)});
  }
  return slot_placement(entries, tp, dp, pp);
}

nlohmann::json placement_json(const mitigate::Placement& placement, int tp, int dp, int gpus_per_node) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& r : mitigate::rank_roles(placement, tp, dp, gpus_per_node)) {
    out.push_back({{"rank", r.rank}, {"tp", r.tp}, {"dp", r.dp}, {"pp", r.pp}});
  }
  return out;
}

}  // namespace greyhound::store
