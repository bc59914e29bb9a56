// Where a simulated job runs after an S4 restart (greyhound-simcluster plays the cluster scheduler). Pure.
//
// The cluster has `nodes` virtual nodes of G GPUs; slot s is GPU s % G of node s / G (the launch rank of
// the first incarnation). Each incarnation of the job runs TP x dp x PP ranks on some of those slots; rank r
// of an incarnation runs on slots[r], so faults, which name slots and nodes, stay on their hardware.
// A restart excludes nodes (those the request names, and the nodes of the ranks it names) for good, and
// starts the job on the lowest free slots with as many DP replicas as fit (never more than the first
// incarnation's, and only a count the job accepts), so TP groups stay inside nodes and the pipeline's
// stages keep their node order.
//
// Node numbers: as a job's own scheduler numbers its allocation, an incarnation numbers the nodes it runs
// on 0, 1, ... in cluster order (node_ids); its agents, and so greyhound's findings and restart requests,
// use those numbers. The stand-ins keep the cluster's (faults name cluster nodes).
#pragma once

#include <functional>
#include <set>
#include <string>
#include <vector>

namespace greyhound::sim {

struct Incarnation {
  int index = 0;               // 0: the job as launched
  int dp = 0;                  // DP replicas
  std::vector<int> slots;      // by rank
  std::set<int> excluded_nodes;
};

// The first incarnation: dp replicas on slots 0 .. T*dp*P - 1.
Incarnation first_incarnation(int tp, int dp, int pp);

// The cluster nodes an incarnation runs on, in order: its node i is node_ids(...)[i].
std::vector<int> node_ids(const Incarnation& inc, int gpus_per_node);

// The incarnation after `from` restarts without `exclude_nodes` (numbered as `from` numbers its nodes) and
// the nodes of `exclude_ranks` (ranks of `from`), with the largest DP width up to max_dp that fits and
// `dp_allowed` accepts (none given: any). Returns false with *why when none fits on what is left, or an
// entry is out of range.
bool restart_without(const Incarnation& from, int tp, int pp, int gpus_per_node, int nodes,
                     const std::vector<int>& exclude_nodes, const std::vector<int>& exclude_ranks, int max_dp,
                     Incarnation* next, std::string* why, const std::function<bool(int)>& dp_allowed = {});

}  // namespace greyhound::sim
