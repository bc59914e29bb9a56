#include "sim/simcluster/restart_plan.h"

#include <algorithm>

namespace greyhound::sim {

Incarnation first_incarnation(int tp, int dp, int pp) {
  Incarnation inc;
  inc.dp = dp;
  for (int s = 0; s < tp * dp * pp; ++s) inc.slots.push_back(s);
  return inc;
}

std::vector<int> node_ids(const Incarnation& inc, int gpus_per_node) {
  std::vector<int> out;
  for (int s : inc.slots) {
    const int n = s / std::max(1, gpus_per_node);
    if (out.empty() || out.back() != n) out.push_back(n);  // slots are in cluster order
  }
  return out;
}

bool restart_without(const Incarnation& from, int tp, int pp, int gpus_per_node, int nodes,
                     const std::vector<int>& exclude_nodes, const std::vector<int>& exclude_ranks, int max_dp,
                     Incarnation* next, std::string* why, const std::function<bool(int)>& dp_allowed) {
  if (tp < 1 || pp < 1 || gpus_per_node < 1 || nodes < 1 || max_dp < 1) {
    *why = "tp, pp, GPUs per node, nodes and the DP limit must be >= 1";
    return false;
  }
  Incarnation n;
  n.index = from.index + 1;
  n.excluded_nodes = from.excluded_nodes;
  const std::vector<int> ids = node_ids(from, gpus_per_node);
  for (int x : exclude_nodes) {
    if (x < 0 || x >= static_cast<int>(ids.size())) {
      *why = "node " + std::to_string(x) + " is not one of the job's " + std::to_string(ids.size());
      return false;
    }
    n.excluded_nodes.insert(ids[static_cast<std::size_t>(x)]);
  }
  for (int r : exclude_ranks) {
    if (r < 0 || r >= static_cast<int>(from.slots.size())) {
      *why = "rank " + std::to_string(r) + " is not one of the job's " + std::to_string(from.slots.size());
      return false;
    }
    n.excluded_nodes.insert(from.slots[static_cast<std::size_t>(r)] / gpus_per_node);
  }
  std::vector<int> free;
  for (int s = 0; s < nodes * gpus_per_node; ++s) {
    if (n.excluded_nodes.count(s / gpus_per_node) == 0) free.push_back(s);
  }
  n.dp = std::min(max_dp, static_cast<int>(free.size()) / (tp * pp));
  while (n.dp >= 1 && dp_allowed && !dp_allowed(n.dp)) --n.dp;
  if (n.dp < 1) {
    *why = std::to_string(free.size()) + " GPUs are left outside the excluded nodes; one DP replica needs " +
           std::to_string(tp * pp) + (dp_allowed ? " (and a DP width the job accepts)" : "");
    return false;
  }
  n.slots.assign(free.begin(), free.begin() + n.dp * tp * pp);
  *next = std::move(n);
  return true;
}

}  // namespace greyhound::sim
