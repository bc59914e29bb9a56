// The mitigation strategies of the paper, ordered by action overhead, and their names in published plans.
// The plan record itself is the master's (`Plan` in src/store/messages.h, docs/redis-keys.md); the master's
// planner driver (daemon/planner.h) fills it from the decisions of SkiRental and the solvers here.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

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

}  // namespace greyhound::mitigate
