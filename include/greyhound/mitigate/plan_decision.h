// The mitigation strategies of the paper and the one plain record of a decision the planner hands to the
// master, which versions it (epoch), publishes it (docs/redis-keys.md) and waits for acknowledgements.
// Nothing here does I/O; the master owns serialisation.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "greyhound/mitigate/placement.h"

namespace greyhound::mitigate {

// Ordered by action overhead: each level is more effective and more expensive than the one before.
enum class Strategy : std::uint8_t {
  kS1Ignore = 1,        // wait it out: no overhead, no effect
  kS2Microbatches = 2,  // re-split the global batch's micro-batches across DP groups (computation only)
  kS3Topology = 3,      // permute (dp, pp) roles of nodes: congested links onto PP edges, stragglers together
  kS4Restart = 4,       // checkpoint and restart without the slow part
};

std::string_view strategy_name(Strategy s) noexcept;  // "S1", "S2", "S3", "S4"
std::optional<Strategy> strategy_from_name(std::string_view name) noexcept;

struct PlanDecision {
  Strategy strategy = Strategy::kS1Ignore;
  std::string reason;                     // one sentence: the evidence and the rule that chose this
  std::vector<std::int64_t> microbatches; // S2: micro-batches per DP index (sum = global M); empty = even split
  std::vector<RankRole> placement;        // S3: role of every launch rank; empty = Megatron's default
  std::vector<int> exclude_nodes;         // S4: nodes to restart without; empty otherwise
  double predicted_iteration_s = 0.0;     // the model's prediction for the new configuration; 0 = none
};

}  // namespace greyhound::mitigate
