// bench_topology: TopologyPlanner time and result on jobs of 16 to 128 TP groups (8 GPUs per node, TP 8,
// PP 4), with 1-3 congested DP-ring links (5 % of the healthy bandwidth) and, in the last case of each
// size, two straggler GPUs (1.5x). Prints current and predicted iteration times, TP groups moved and the
// median planning time of 5 runs. Usage: bench_topology
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "greyhound/mitigate/topology_planner.h"

namespace {

using namespace greyhound::mitigate;

struct Case {
  int dp;
  int links;
  bool stragglers;
};

}  // namespace

int main() {
  const Case cases[] = {{4, 1, false},  {4, 3, false},  {4, 1, true},  {16, 1, false},
                        {16, 3, false}, {16, 1, true},  {32, 1, false}, {32, 3, false}, {32, 1, true}};
  std::printf("S3 topology planner: TP 8 x DP x PP 4, one TP group per node, congested DP-ring links at 5 %%\n");
  std::printf("%9s %6s %10s %11s %13s %6s %10s\n", "TP groups", "links", "stragglers", "current (s)",
              "predicted (s)", "moved", "plan (ms)");
  for (const Case& c : cases) {
    const int pp = 4;
    const int nodes = c.dp * pp;
    ClusterState cluster{nodes, 8, {}, 50e9, 400e9, {}};
    // Congested links on the rings of stages 0, 2 and 2 (two on one ring: a plateau for single swaps);
    // the last is stage 2's wrap-around edge.
    const int ring_nodes[3][2] = {{1, 2}, {2 * c.dp + 1, 2 * c.dp + 2}, {3 * c.dp - 1, 2 * c.dp}};
    for (int l = 0; l < c.links; ++l) cluster.links.push_back({ring_nodes[l][0], ring_nodes[l][1], 2.5e9});
    if (c.stragglers) {
      cluster.gpu_slowdown.assign(static_cast<std::size_t>(nodes) * 8, 1.0);
      cluster.gpu_slowdown[3 * 8 + 5] = 1.5;                                 // node 3: replica 3 % dp, stage 0
      cluster.gpu_slowdown[static_cast<std::size_t>(c.dp + 3) * 8] = 1.5;   // node dp + 3: same replica, stage 1
    }
    JobShape job{8, c.dp, pp, {1, 1, 1, 1}, 0.1e9, {8e9, 8e9, 8e9, 8e9}, std::vector<std::int64_t>(c.dp, 8)};
    auto model = CostModel::create(cluster, job);
    if (!model) {
      std::fprintf(stderr, "bench_topology: %s\n", model.error().c_str());
      return 1;
    }
    TopologyPlanOptions opt;
    opt.horizon_s = 3600;
    std::vector<double> ms;
    TopologyPlan plan;
    for (int rep = 0; rep < 5; ++rep) {
      const auto t0 = std::chrono::steady_clock::now();
      auto r = TopologyPlanner(*model).plan(megatron_placement(c.dp, pp), opt);
      const auto t1 = std::chrono::steady_clock::now();
      plan = std::move(r).value();
      ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    }
    std::sort(ms.begin(), ms.end());
    std::printf("%9d %6d %10s %11.3f %13.3f %6d %10.2f\n", nodes, c.links, c.stragglers ? "2" : "0",
                plan.current_iteration_s, plan.predicted_iteration_s, plan.moved_slots, ms[ms.size() / 2]);
  }
  return 0;
}
