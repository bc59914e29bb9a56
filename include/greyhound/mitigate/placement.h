// Placement: which (dp, pp) role each TP group of a TP x DP x PP job plays on the nodes it runs on.
//
// A *slot* is one TP group: `tp` consecutive GPUs of one node (TP stays inside a node, on NVLink, and is
// never moved). With G GPUs per node there are G / tp slots per node; slot s lives on node
// s / (G / tp) and uses local GPUs (s % (G / tp)) * tp .. + tp - 1. A placement gives the role of every
// slot and is a permutation of the dp * pp roles. Megatron-LM's own order (global rank = tp + TP * (dp +
// DP * pp), ranks laid out on nodes in order) puts role (s % DP, s / DP) on slot s; S3 (TopologyPlanner)
// permutes roles between slots.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace greyhound::mitigate {

struct Role {
  int dp = 0;
  int pp = 0;
  friend bool operator==(const Role&, const Role&) = default;
};

using Placement = std::vector<Role>;  // indexed by slot

// The role of one process: its coordinates in the job. `rank` is the process's launch rank (node * G +
// local GPU), i.e. the GPU it runs on; `megatron_rank` is the global rank Megatron gives those coordinates.
struct RankRole {
  int rank = 0;
  int tp = 0;
  int dp = 0;
  int pp = 0;
  int megatron_rank = 0;
  friend bool operator==(const RankRole&, const RankRole&) = default;
};

// Megatron's default: slot s plays (s % dp, s / dp).
Placement megatron_placement(int dp, int pp);

// Why `placement` is not a permutation of the dp x pp roles (wrong size, a role out of range or
// repeated), or nullopt when it is one.
std::optional<std::string> placement_error(const Placement& placement, int dp, int pp);

// Role of every process (size slots * tp), in launch-rank order. Requires a valid placement and
// gpus_per_node % tp == 0.
std::vector<RankRole> rank_roles(const Placement& placement, int tp, int dp, int gpus_per_node);

}  // namespace greyhound::mitigate
