// CostModel and TopologyPlanner: the paper's two S3 examples, the model's formulas on hand-computed cases,
// and "never proposes a placement the model says is worse" on random clusters.
#include "greyhound/mitigate/cost_model.h"
#include "greyhound/mitigate/topology_planner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

namespace greyhound::mitigate {
namespace {

constexpr double kGBps = 1e9;

// One TP group per node (TP = GPUs per node), as in both of the paper's examples.
CostModel make_model(int dp, int pp, std::vector<double> node_slowdown, std::vector<NodeLink> links,
                     double gradient_bytes, double activation_bytes, std::int64_t microbatches = 4) {
  ClusterState c;
  c.nodes = dp * pp;
  c.gpus_per_node = 8;
  for (double s : node_slowdown) c.gpu_slowdown.insert(c.gpu_slowdown.end(), 8, s);
  c.inter_node_bytes_per_s = 50 * kGBps;
  c.intra_node_bytes_per_s = 400 * kGBps;
  c.links = std::move(links);
  JobShape j;
  j.tp = 8;
  j.dp = dp;
  j.pp = pp;
  j.stage_compute_s.assign(static_cast<std::size_t>(pp), 1.0);
  j.gradient_bytes.assign(static_cast<std::size_t>(pp), gradient_bytes);
  j.activation_bytes = activation_bytes;
  j.microbatches.assign(static_cast<std::size_t>(dp), microbatches);
  auto m = CostModel::create(std::move(c), std::move(j));
  EXPECT_TRUE(m.ok()) << m.error();
  return std::move(m).value();
}

Placement swapped(Placement p, int a, int b) {
  std::swap(p[static_cast<std::size_t>(a)], p[static_cast<std::size_t>(b)]);
  return p;
}

TEST(CostModel, Figure12PipelineTimes) {
  // Micro-batch 1 s healthy, 1.5 s on a straggler; 3 stages, 4 micro-batches per replica, DP 2.
  const Placement megatron = megatron_placement(2, 3);  // node k plays (k % 2, k / 2)
  EXPECT_EQ(make_model(2, 3, {1, 1, 1, 1, 1, 1}, {}, 0, 0).estimate(megatron).iteration_s, 6.0);
  // Stragglers on nodes 0 and 2: replica 0's stages 0 and 1 (spread over two stages).
  const CostModel spread = make_model(2, 3, {1.5, 1, 1.5, 1, 1, 1}, {}, 0, 0);
  EXPECT_EQ(spread.estimate(megatron).iteration_s, 8.5);
  EXPECT_EQ(spread.estimate(megatron).slowest_replica, 0);
  // Gathered into stage 1 (node 0 takes node 3's role (1, 1)).
  EXPECT_EQ(spread.estimate(swapped(megatron, 0, 3)).iteration_s, 8.0);
}

TEST(CostModel, RingAllReduceRunsAtItsSlowestLink) {
  // DP 4 x PP 1: one ring 0-1-2-3-0, 12 GB of gradients: 2 * 3/4 * 12 GB / 50 GB/s = 0.36 s.
  const CostModel healthy = make_model(4, 1, {1, 1, 1, 1}, {}, 12 * kGBps, 0, 1);
  const auto e = healthy.estimate(megatron_placement(4, 1));
  EXPECT_DOUBLE_EQ(e.dp_sync_s, 0.36);
  EXPECT_DOUBLE_EQ(e.iteration_s, 1.36);
  EXPECT_EQ(e.slowest_sync_stage, 0);
  // Link 3-0 at 5 GB/s closes the ring: 3.6 s. Link 0-2 is not on the ring 0-1-2-3: no effect.
  EXPECT_DOUBLE_EQ(make_model(4, 1, {1, 1, 1, 1}, {{3, 0, 5 * kGBps}}, 12 * kGBps, 0, 1)
                       .estimate(megatron_placement(4, 1)).dp_sync_s, 3.6);
  EXPECT_DOUBLE_EQ(make_model(4, 1, {1, 1, 1, 1}, {{0, 2, 5 * kGBps}}, 12 * kGBps, 0, 1)
                       .estimate(megatron_placement(4, 1)).dp_sync_s, 0.36);
}

TEST(CostModel, PipelineEdgesCarryActivations) {
  // DP 1 x PP 2, 4 micro-batches, 1 GB each way per micro-batch over 5 GB/s: a 0.4 s edge element.
  const CostModel m = make_model(1, 2, {1, 1}, {{0, 1, 5 * kGBps}}, 0, 1 * kGBps);
  EXPECT_DOUBLE_EQ(m.estimate(megatron_placement(1, 2)).iteration_s, 1.0 + 0.4 + 1.0 + 3 * 1.0);
  // An edge slower than the stages becomes the bottleneck: 0.2 GB/s -> 10 s per micro-batch.
  const CostModel slow = make_model(1, 2, {1, 1}, {{0, 1, 0.2 * kGBps}}, 0, 1 * kGBps);
  EXPECT_DOUBLE_EQ(slow.estimate(megatron_placement(1, 2)).iteration_s, 1.0 + 10.0 + 1.0 + 3 * 10.0);
  // Per-replica micro-batch counts (S2) change the steady-state term only.
  EXPECT_DOUBLE_EQ(m.estimate(megatron_placement(1, 2), std::vector<std::int64_t>{8}).iteration_s, 2.4 + 7.0);
  EXPECT_EQ(m.replica_microbatch_s(megatron_placement(1, 2)), (std::vector<double>{1.0}));
}

TEST(CostModel, SlotsInsideANodeAndRankRoles) {
  // 2 nodes x 8 GPUs, TP 4: 4 slots, 2 per node; DP 2 x PP 2.
  ClusterState c{2, 8, {}, 50 * kGBps, 400 * kGBps, {}};
  c.gpu_slowdown.assign(16, 1.0);
  c.gpu_slowdown[13] = 2.0;  // node 1, local GPU 5: slot 3
  JobShape j{4, 2, 2, {1.0, 1.0}, 0.0, {8 * kGBps, 8 * kGBps}, {4, 4}};
  const auto m = CostModel::create(c, j);
  ASSERT_TRUE(m.ok()) << m.error();
  EXPECT_EQ(m->slots_per_node(), 2);
  EXPECT_EQ(m->node_of_slot(3), 1);
  EXPECT_EQ(m->slot_slowdown(3), 2.0);
  EXPECT_EQ(m->slot_slowdown(2), 1.0);
  // Megatron: slots 0, 1 on node 0 are stage 0 (dp 0, 1): its ring stays inside node 0 (400 GB/s).
  EXPECT_EQ(m->bandwidth(0, 1), 400 * kGBps);
  EXPECT_EQ(m->bandwidth(1, 2), 50 * kGBps);
  const auto e = m->estimate(megatron_placement(2, 2));
  EXPECT_DOUBLE_EQ(e.dp_sync_s, 8.0 / 400.0);
  EXPECT_DOUBLE_EQ(e.pipeline_s, 1.0 + 2.0 + 3 * 2.0);  // replica 1 has the slow slot 3 at stage 1

  const auto roles = rank_roles(megatron_placement(2, 2), 4, 2, 8);
  ASSERT_EQ(roles.size(), 16u);
  for (const auto& r : roles) EXPECT_EQ(r.megatron_rank, r.rank);  // Megatron's order is the launch order
  EXPECT_EQ(roles[13], (RankRole{13, 1, 1, 1, 13}));
  const auto moved = rank_roles(swapped(megatron_placement(2, 2), 0, 3), 4, 2, 8);
  EXPECT_EQ(moved[1], (RankRole{1, 1, 1, 1, 13}));  // launch rank 1 now plays Megatron rank 13's part
}

TEST(CostModel, RejectsInconsistentInput) {
  ClusterState c{2, 8, {}, 50 * kGBps, 400 * kGBps, {}};
  JobShape j{8, 2, 1, {1.0}, 0.0, {}, {4, 4}};
  EXPECT_TRUE(CostModel::create(c, j).ok());
  JobShape wrong_slots = j;
  wrong_slots.dp = 3;
  wrong_slots.microbatches = {4, 4, 4};
  EXPECT_EQ(CostModel::create(c, wrong_slots).error(), "dp x pp = 3 but the nodes hold 2 TP groups");
  JobShape bad_tp = j;
  bad_tp.tp = 3;
  EXPECT_EQ(CostModel::create(c, bad_tp).error(), "tp 3 does not divide gpus_per_node 8 (TP stays inside a node)");
  ClusterState bad_link = c;
  bad_link.links = {{0, 0, 1.0}};
  EXPECT_EQ(CostModel::create(bad_link, j).error(), "link 0-0 does not join two different nodes of the cluster");
  JobShape no_mb = j;
  no_mb.microbatches = {4, 0};
  EXPECT_EQ(CostModel::create(c, no_mb).error(), "every DP replica needs at least one micro-batch");
  EXPECT_EQ(placement_error({{0, 0}, {0, 0}}, 2, 1), "role (dp 0, pp 0) is on slots 0 and 1");
  EXPECT_EQ(placement_error({{0, 0}}, 2, 1), "placement has 1 slots, expected dp * pp = 2");
}

TopologyPlan plan_or_die(const CostModel& m, const Placement& p, double horizon_s) {
  TopologyPlanOptions o;
  o.horizon_s = horizon_s;
  auto r = TopologyPlanner(m).plan(p, o);
  EXPECT_TRUE(r.ok()) << r.error();
  return std::move(r).value();
}

TEST(TopologyPlanner, PaperLinkSwapBetweenNodes3And4) {
  // Paper: 4 nodes (numbered 1..4) in Megatron order, DP 2 x PP 2; the link between nodes 3 and 4 carries
  // stage 2's DP traffic. Swapping the roles of nodes 2 and 3 puts it on a PP edge. 0-based here: link
  // 2-3, swap 1 <-> 2. PP traffic is negligible next to the 10 GB gradient sync, as in the paper.
  const CostModel m = make_model(2, 2, {1, 1, 1, 1}, {{2, 3, 5 * kGBps}}, 10 * kGBps, 0);
  const Placement megatron = megatron_placement(2, 2);
  EXPECT_DOUBLE_EQ(m.estimate(megatron).iteration_s, 5.0 + 2.0);  // ring of stage 1 at 5 GB/s
  const TopologyPlan plan = plan_or_die(m, megatron, 600);
  EXPECT_EQ(plan.placement, swapped(megatron, 1, 2));
  EXPECT_DOUBLE_EQ(plan.current_iteration_s, 7.0);
  EXPECT_DOUBLE_EQ(plan.predicted_iteration_s, 5.2);  // healthy: 5 s pipeline + 0.2 s sync
  EXPECT_EQ(plan.moved_slots, 2);
  EXPECT_TRUE(plan.worthwhile);
  EXPECT_DOUBLE_EQ(plan.saving_s, 600 * (1 - 5.2 / 7.0));
  // Nodes 2 and 3 now form replica 1's pipeline: the link is a PP edge.
  EXPECT_EQ(plan.placement[2], (Role{1, 0}));
  EXPECT_EQ(plan.placement[3], (Role{1, 1}));
}

TEST(TopologyPlanner, AvoidsTheLinkWhenItsPipelineTrafficCounts) {
  // Same cluster, but 200 MB of activations per micro-batch make even a PP edge on the congested link
  // cost 0.08 s. The model then prefers a placement that uses the link for nothing, and says so.
  const CostModel m = make_model(2, 2, {1, 1, 1, 1}, {{2, 3, 5 * kGBps}}, 10 * kGBps, 0.2 * kGBps);
  const Placement megatron = megatron_placement(2, 2);
  const double paper_swap = m.estimate(swapped(megatron, 1, 2)).iteration_s;
  const TopologyPlan plan = plan_or_die(m, megatron, 600);
  EXPECT_LT(plan.predicted_iteration_s, paper_swap);
  EXPECT_EQ(plan.moved_slots, 2);
  const Role r2 = plan.placement[2];
  const Role r3 = plan.placement[3];
  EXPECT_NE(r2.dp, r3.dp);  // not on one DP ring
  EXPECT_NE(r2.pp, r3.pp);  // not neighbours in one pipeline (different replicas)
}

TEST(TopologyPlanner, Figure12GathersStragglersIntoOneInnerStage) {
  const CostModel m = make_model(2, 3, {1.5, 1, 1.5, 1, 1, 1}, {}, 0, 0);
  const Placement megatron = megatron_placement(2, 3);
  const TopologyPlan plan = plan_or_die(m, megatron, 3600);
  EXPECT_DOUBLE_EQ(plan.current_iteration_s, 8.5);
  EXPECT_DOUBLE_EQ(plan.predicted_iteration_s, 8.0);
  EXPECT_EQ(plan.placement, swapped(megatron, 0, 3));
  EXPECT_EQ(plan.placement[0].pp, 1);  // both stragglers in the inner stage 1
  EXPECT_EQ(plan.placement[2].pp, 1);
  EXPECT_TRUE(plan.worthwhile);
}

TEST(TopologyPlanner, CrossesPlateausOfTheSlowestRing) {
  // DP 4 x PP 2 on 8 nodes: ring 0-1-2-3 (stage 0) has one congested link, ring 4-5-6-7 (stage 1) two.
  // No single swap lowers the slowest ring (stage 1 keeps one bad link), yet the links can all be taken
  // off the rings; the search gets there through the load tie-break.
  const CostModel m = make_model(4, 2, std::vector<double>(8, 1.0),
                                 {{0, 1, 5 * kGBps}, {4, 5, 5 * kGBps}, {6, 7, 5 * kGBps}}, 10 * kGBps, 0);
  const CostModel healthy = make_model(4, 2, std::vector<double>(8, 1.0), {}, 10 * kGBps, 0);
  const Placement megatron = megatron_placement(4, 2);
  const double slow = m.estimate(megatron).iteration_s;
  for (int a = 0; a < 8; ++a) {
    for (int b = a + 1; b < 8; ++b) EXPECT_GE(m.estimate(swapped(megatron, a, b)).iteration_s, slow);
  }
  const TopologyPlan plan = plan_or_die(m, megatron, 3600);
  EXPECT_DOUBLE_EQ(plan.predicted_iteration_s, healthy.estimate(megatron).iteration_s);
  EXPECT_TRUE(plan.worthwhile);
}

TEST(TopologyPlanner, PrefersOneStageAmongEquallyFastPlacements) {
  // DP 2 x PP 4, 4 micro-batches of 1 s: 7 s healthy. Stragglers (1.5 s) on nodes 2 (0, 1) and 4 (0, 2),
  // both in replica 0: 5 + 3 x 1.5 = 9.5 s; one per replica: 4.5 + 3 x 1.5 = 9 s. Three swaps of
  // neighbouring nodes (2-3, 3-4, 4-5) reach 9 s; only 3 <-> 4 also puts both stragglers in one stage.
  const CostModel m = make_model(2, 4, {1, 1, 1.5, 1, 1.5, 1, 1, 1}, {}, 0, 0);
  const Placement megatron = megatron_placement(2, 4);
  EXPECT_DOUBLE_EQ(m.estimate(megatron).iteration_s, 9.5);
  EXPECT_DOUBLE_EQ(m.estimate(swapped(megatron, 2, 3)).iteration_s, 9.0);
  EXPECT_DOUBLE_EQ(m.estimate(swapped(megatron, 4, 5)).iteration_s, 9.0);
  const TopologyPlan plan = plan_or_die(m, megatron, 3600);
  EXPECT_DOUBLE_EQ(plan.predicted_iteration_s, 9.0);
  EXPECT_EQ(plan.placement, swapped(megatron, 3, 4));
}

TEST(TopologyPlanner, DoesNotMoveForTieBreaksAlone) {
  // One straggler in the first of 3 stages: the gathered seed moves it to the inner stage, which the
  // model predicts no faster; the planner proposes nothing.
  const CostModel m = make_model(2, 3, {1.5, 1, 1, 1, 1, 1}, {}, 0, 0);
  const TopologyPlan plan = plan_or_die(m, megatron_placement(2, 3), 3600);
  EXPECT_EQ(plan.moved_slots, 0);
  EXPECT_EQ(plan.placement, megatron_placement(2, 3));
  EXPECT_FALSE(plan.worthwhile);
}

TEST(TopologyPlanner, KeepsTheCurrentPlacementWhenNothingIsFaster) {
  const CostModel healthy = make_model(2, 2, {1, 1, 1, 1}, {}, 10 * kGBps, 0);
  const TopologyPlan plan = plan_or_die(healthy, megatron_placement(2, 2), 3600);
  EXPECT_EQ(plan.placement, megatron_placement(2, 2));
  EXPECT_EQ(plan.moved_slots, 0);
  EXPECT_FALSE(plan.worthwhile);
  EXPECT_EQ(plan.reason, "no placement is predicted faster than the current 5.2 s");
  // A single straggler cannot be helped by moving it: some replica always holds it.
  const CostModel one = make_model(2, 2, {1, 1, 1.5, 1}, {}, 10 * kGBps, 0);
  EXPECT_EQ(plan_or_die(one, megatron_placement(2, 2), 3600).moved_slots, 0);
}

TEST(TopologyPlanner, NotWorthwhileWhenTheSavingDoesNotPayThePause) {
  const CostModel m = make_model(2, 2, {1, 1, 1, 1}, {{2, 3, 5 * kGBps}}, 10 * kGBps, 0);
  // 1.8 s saved per 7 s iteration: 60 s of saving needs a horizon above 233.3 s.
  const TopologyPlan short_plan = plan_or_die(m, megatron_placement(2, 2), 233);
  EXPECT_FALSE(short_plan.worthwhile);
  EXPECT_LT(short_plan.predicted_iteration_s, short_plan.current_iteration_s);
  EXPECT_TRUE(plan_or_die(m, megatron_placement(2, 2), 234).worthwhile);
}

TEST(TopologyPlanner, RejectsAnInvalidCurrentPlacement) {
  const CostModel m = make_model(2, 2, {1, 1, 1, 1}, {}, 0, 0);
  const auto r = TopologyPlanner(m).plan({{0, 0}, {0, 0}, {0, 1}, {1, 1}}, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error(), "role (dp 0, pp 0) is on slots 0 and 1");
}

TEST(TopologyPlanner, NeverProposesAPlacementTheModelSaysIsWorse) {
  std::mt19937_64 rng(99);
  int improved = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const int dp = std::uniform_int_distribution<int>(1, 4)(rng);
    const int pp = std::uniform_int_distribution<int>(1, 4)(rng);
    const int nodes = dp * pp;
    std::vector<double> slow(static_cast<std::size_t>(nodes), 1.0);
    for (auto& s : slow) {
      if (std::uniform_int_distribution<int>(0, 4)(rng) == 0) s = std::uniform_real_distribution<double>(1.1, 2.5)(rng);
    }
    std::vector<NodeLink> links;
    if (nodes > 1) {
      for (int l = std::uniform_int_distribution<int>(0, 3)(rng); l > 0; --l) {
        const int a = std::uniform_int_distribution<int>(0, nodes - 1)(rng);
        const int b = (a + std::uniform_int_distribution<int>(1, nodes - 1)(rng)) % nodes;
        links.push_back({a, b, std::uniform_real_distribution<double>(1, 40)(rng) * kGBps});
      }
    }
    const CostModel m = make_model(dp, pp, slow, links, std::uniform_real_distribution<double>(0, 20)(rng) * kGBps,
                                   std::uniform_real_distribution<double>(0, 0.5)(rng) * kGBps,
                                   std::uniform_int_distribution<std::int64_t>(1, 8)(rng));
    Placement current = megatron_placement(dp, pp);
    std::shuffle(current.begin(), current.end(), rng);
    const double horizon = std::uniform_real_distribution<double>(0, 3600)(rng);
    const TopologyPlan plan = plan_or_die(m, current, horizon);
    ASSERT_FALSE(placement_error(plan.placement, dp, pp).has_value());
    const double now = m.estimate(current).iteration_s;
    const double predicted = m.estimate(plan.placement).iteration_s;
    ASSERT_EQ(plan.current_iteration_s, now);
    ASSERT_EQ(plan.predicted_iteration_s, predicted);
    ASSERT_LE(predicted, now) << "trial " << trial;
    if (plan.moved_slots == 0) {
      ASSERT_EQ(plan.placement, current);
    }
    if (plan.worthwhile) {
      ASSERT_LT(predicted, now);
      ASSERT_GT(plan.saving_s, 60.0);
      ++improved;
    }
  }
  EXPECT_GT(improved, 30);  // the property is exercised on real proposals, not only on "keep"
}

TEST(TopologyPlanner, FindsTheBestPermutationOnSmallClusters) {
  // Brute force over every placement of up to 6 TP groups: the local search reaches the optimum.
  std::mt19937_64 rng(5);
  const auto by_role = [](const Role& a, const Role& b) { return a.pp < b.pp || (a.pp == b.pp && a.dp < b.dp); };
  int checked = 0;
  while (checked < 250) {
    const int dp = std::uniform_int_distribution<int>(1, 3)(rng);
    const int pp = std::uniform_int_distribution<int>(1, 3)(rng);
    if (dp * pp < 2 || dp * pp > 6) continue;
    std::vector<double> slow(static_cast<std::size_t>(dp * pp), 1.0);
    for (auto& s : slow) {
      if (std::uniform_int_distribution<int>(0, 3)(rng) == 0) s = std::uniform_real_distribution<double>(1.1, 2.5)(rng);
    }
    std::vector<NodeLink> links;
    for (int l = std::uniform_int_distribution<int>(0, 3)(rng); l > 0; --l) {
      const int a = std::uniform_int_distribution<int>(0, dp * pp - 1)(rng);
      const int b = (a + std::uniform_int_distribution<int>(1, dp * pp - 1)(rng)) % (dp * pp);
      links.push_back({a, b, std::uniform_real_distribution<double>(1, 40)(rng) * kGBps});
    }
    const CostModel m = make_model(dp, pp, slow, links, std::uniform_real_distribution<double>(0, 20)(rng) * kGBps,
                                   std::uniform_real_distribution<double>(0, 0.5)(rng) * kGBps,
                                   std::uniform_int_distribution<std::int64_t>(1, 8)(rng));
    const TopologyPlan plan = plan_or_die(m, megatron_placement(dp, pp), 1e9);
    Placement p = megatron_placement(dp, pp);
    std::sort(p.begin(), p.end(), by_role);
    double best = m.estimate(p).iteration_s;
    while (std::next_permutation(p.begin(), p.end(), by_role)) best = std::min(best, m.estimate(p).iteration_s);
    ASSERT_LE(plan.predicted_iteration_s, best * (1 + 1e-9)) << "instance " << checked;
    ++checked;
  }
}

}  // namespace
}  // namespace greyhound::mitigate
