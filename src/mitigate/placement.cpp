#include "greyhound/mitigate/placement.h"

#include "greyhound/parallel_shape.h"

namespace greyhound::mitigate {

Placement megatron_placement(int dp, int pp) {
  Placement p;
  if (dp <= 0 || pp <= 0) return p;
  p.reserve(static_cast<std::size_t>(dp) * static_cast<std::size_t>(pp));
  for (int s = 0; s < dp * pp; ++s) p.push_back(Role{s % dp, s / dp});
  return p;
}

std::optional<std::string> placement_error(const Placement& placement, int dp, int pp) {
  if (dp <= 0 || pp <= 0) return "dp and pp must be >= 1";
  const std::size_t slots = static_cast<std::size_t>(dp) * static_cast<std::size_t>(pp);
  if (placement.size() != slots) {
    return "placement has " + std::to_string(placement.size()) + " slots, expected dp * pp = " +
           std::to_string(slots);
  }
  std::vector<int> slot_of_role(slots, -1);
  for (std::size_t s = 0; s < slots; ++s) {
    const Role r = placement[s];
    if (r.dp < 0 || r.dp >= dp || r.pp < 0 || r.pp >= pp) {
      return "slot " + std::to_string(s) + " has role (dp " + std::to_string(r.dp) + ", pp " +
             std::to_string(r.pp) + ") outside " + std::to_string(dp) + " x " + std::to_string(pp);
    }
    int& seen = slot_of_role[static_cast<std::size_t>(r.dp + dp * r.pp)];
    if (seen >= 0) {
      return "role (dp " + std::to_string(r.dp) + ", pp " + std::to_string(r.pp) + ") is on slots " +
             std::to_string(seen) + " and " + std::to_string(s);
    }
    seen = static_cast<int>(s);
  }
  return std::nullopt;
}

std::vector<RankRole> rank_roles(const Placement& placement, int tp, int dp, int gpus_per_node) {
  std::vector<RankRole> out;
  if (tp <= 0 || gpus_per_node <= 0 || gpus_per_node % tp != 0) return out;
  out.reserve(placement.size() * static_cast<std::size_t>(tp));
  // Megatron's rank does not depend on the number of stages: pp = 1 stands in for it.
  const ParallelShape shape{tp, dp, 1};
  // Slots are numbered node by node, so slot s covers launch ranks s * tp .. s * tp + tp - 1.
  for (std::size_t s = 0; s < placement.size(); ++s) {
    for (int t = 0; t < tp; ++t) {
      const Role r = placement[s];
      out.push_back(RankRole{static_cast<int>(s) * tp + t, t, r.dp, r.pp, shape.rank({t, r.dp, r.pp})});
    }
  }
  return out;
}

}  // namespace greyhound::mitigate
