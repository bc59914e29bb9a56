// The master's planner: what the job runs, and the plans that change it (S2 from replica times with its
// prediction, S3 from the cost model, S4, the way back). When to act is the controller's (ski rental per
// fail-slow), tested in controller_test.cpp.
#include "daemon/planner.h"

#include <gtest/gtest.h>

namespace greyhound::master {
namespace {

JobLayout layout(std::vector<std::string> capabilities) {
  JobLayout l;
  l.tp = 2;
  l.dp = 2;
  l.pp = 2;
  l.world = 8;
  l.microbatches = {8, 8};
  l.capabilities = std::move(capabilities);
  return l;
}

Localisation slow_replica(double healthy_per_slot, double slow_per_slot) {
  Localisation loc;
  loc.cause = Cause::kComputation;
  loc.culprit = 3;
  loc.culprit_node = 0;
  loc.kind = "COMPUTE_STRAGGLER";
  loc.replica_ms_per_microbatch = {healthy_per_slot, slow_per_slot};
  loc.culprit_replica = 1;
  loc.replica_skew = slow_per_slot / ((healthy_per_slot + slow_per_slot) / 2);
  return loc;
}

// TP1 x DP2 x PP2 on 4 nodes of one GPU: Megatron puts (dp, pp) = (0,0), (1,0), (0,1), (1,1) on nodes
// 0..3, so the DP rings are nodes {0,1} and {2,3} and the PP edges 0-2 and 1-3.
JobLayout four_nodes(std::vector<std::string> capabilities) {
  JobLayout l;
  l.tp = 1;
  l.dp = 2;
  l.pp = 2;
  l.world = 4;
  l.gpus_per_node = 1;
  l.microbatches = {8, 8};
  l.initial_microbatches = {8, 8};
  l.capabilities = std::move(capabilities);
  return l;
}

TEST(Planner, S2SplitsByReplicaTimesAndPredictsTheIteration) {
  Planner p({}, layout({"S2"}));
  EXPECT_TRUE(p.available(Strategy::kS2, Cause::kComputation));
  EXPECT_TRUE(p.available(Strategy::kS2, Cause::kHost));
  EXPECT_FALSE(p.available(Strategy::kS2, Cause::kCommunication));  // S2 balances compute, not a link
  EXPECT_FALSE(p.available(Strategy::kS3, Cause::kCommunication));  // not offered by the job
  auto plan = p.s2(slow_replica(48, 72), 0.600, "why");
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->strategy, Strategy::kS2);
  EXPECT_EQ(plan->action, PlanAction::kApply);
  // 1F1B makespan (m + P - 1) t: [8,8] -> 9 x 72 = 648; [10,6] -> max(11 x 48, 7 x 72) = 528 (multiples of P).
  EXPECT_EQ(plan->microbatches, (std::vector<int>{10, 6}));
  EXPECT_NE(plan->reason.find("648.0 -> 528.0"), std::string::npos) << plan->reason;
  EXPECT_NEAR(plan->predicted_iteration_s, 0.600 * 528.0 / 648.0, 1e-9);
  EXPECT_FALSE(p.split_in_force());
  p.applied(*plan);
  EXPECT_TRUE(p.split_in_force());
  EXPECT_EQ(p.current().microbatches, (std::vector<int>{10, 6}));
  // The same times again: nothing better than what runs.
  EXPECT_FALSE(p.s2(slow_replica(48, 72), 0.5, "why"));
  // Back to the original.
  auto back = p.back_to(p.original(), true, true, "over");
  ASSERT_TRUE(back);
  EXPECT_EQ(back->action, PlanAction::kRevert);
  EXPECT_EQ(back->strategy, Strategy::kS1);
  EXPECT_EQ(back->microbatches, (std::vector<int>{8, 8}));
  EXPECT_TRUE(back->placement.is_null());  // the placement never moved
  p.applied(*back);
  EXPECT_FALSE(p.split_in_force());
  EXPECT_FALSE(p.back_to(p.original(), true, true, "over"));  // nothing differs
}

TEST(Planner, ALayoutWithASplitInForceStartsFromIt) {
  // A restarted master: the job's layout says [10,6] is in force, [8,8] the initial allocation.
  JobLayout l = layout({"S2"});
  l.microbatches = {10, 6};
  l.initial_microbatches = {8, 8};
  Planner p({}, l);
  EXPECT_TRUE(p.split_in_force());
  EXPECT_EQ(p.original().microbatches, (std::vector<int>{8, 8}));
  // Balanced replicas under [10,6]: [8,8] is better, and it is the original (a revert).
  auto plan = p.s2(slow_replica(48, 48), 0.5, "why");
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->microbatches, (std::vector<int>{8, 8}));
  EXPECT_EQ(plan->action, PlanAction::kRevert);
}

TEST(Planner, S2KeepsTheMultipleTheJobsScheduleNeeds) {
  // A 1.3x replica: per slot 48 and 62.4 ms, 16 micro-batches on PP 2; makespans (m + 1) t:
  // [8,8] 561.6, [10,6] max(528, 436.8) = 528, [9,7] max(480, 499.2) = 499.2, [12,4] 624.
  const Localisation loc = slow_replica(48, 62.4);
  // Not said: multiples of P while the split in force has them (the paper's constraint).
  auto unsaid = Planner({}, layout({"S2"})).s2(loc, 0.5, "why");
  ASSERT_TRUE(unsaid);
  EXPECT_EQ(unsaid->microbatches, (std::vector<int>{10, 6}));
  // A 1F1B schedule without interleaving takes any count.
  JobLayout any = layout({"S2"});
  any.microbatch_multiple = 1;
  auto fine = Planner({}, any).s2(loc, 0.5, "why");
  ASSERT_TRUE(fine);
  EXPECT_EQ(fine->microbatches, (std::vector<int>{9, 7}));
  EXPECT_NEAR(fine->predicted_iteration_s, 0.5 * 499.2 / 561.6, 1e-9);
  // An interleaved schedule on PP 2 says 2; a multiple of 4 leaves nothing better than [8,8].
  JobLayout interleaved = layout({"S2"});
  interleaved.microbatch_multiple = 2;
  auto two = Planner({}, interleaved).s2(loc, 0.5, "why");
  ASSERT_TRUE(two);
  EXPECT_EQ(two->microbatches, (std::vector<int>{10, 6}));
  JobLayout fours = layout({"S2"});
  fours.microbatch_multiple = 4;
  Planner p({}, fours);
  EXPECT_FALSE(p.s2(loc, 0.5, "why"));
  // The job republishes its layout saying otherwise: the planner follows it.
  p.layout_updated(any);
  auto after = p.s2(loc, 0.5, "why");
  ASSERT_TRUE(after);
  EXPECT_EQ(after->microbatches, (std::vector<int>{9, 7}));
}

TEST(Planner, NoFasterAllocationMeansNoPlan) {
  Planner p({}, layout({"S2"}));
  EXPECT_FALSE(p.s2(slow_replica(48, 48.5), 0.5, "why"));  // balanced per slot already
  Localisation unknown;
  EXPECT_FALSE(p.s2(unknown, 0.5, "why"));  // no replica times
}

TEST(Planner, S3MovesACongestedLinkOffTheDpRingOntoAPipelineEdge) {
  // The link between nodes 2 and 3 runs at a fifth: stage 1's gradient all-reduce takes 5x as long.
  Localisation loc;
  loc.cause = Cause::kCommunication;
  loc.slow_groups = {{0x22, 5.0}};
  loc.suspect_links = {{2, 3, 5.0}};
  loc.replica_ms_per_microbatch = {48, 48};
  loc.dp_transfer_ms = 100;
  loc.pp_transfer_ms = 10;
  PlannerConfig cfg;
  cfg.ski.s3_pause_s = 2.0;
  Planner p(cfg, four_nodes({"S2", "S3"}));
  EXPECT_TRUE(p.available(Strategy::kS3, Cause::kCommunication));
  EXPECT_FALSE(p.s3(loc, 0, 1.0, p.costs(0).s3_pause_s, 0.02, "why"));  // a 1 s horizon does not pay for a 2 s pause
  EXPECT_TRUE(p.s3(loc, 0, 1.0, 0.01, 0.02, "why"));  // ... but does for a 10 ms switch
  auto plan = p.s3(loc, 0, 100.0, p.costs(0).s3_pause_s, 0.02, "why");
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->strategy, Strategy::kS3);
  EXPECT_EQ(plan->action, PlanAction::kApply);
  EXPECT_TRUE(plan->microbatches.empty());
  ASSERT_TRUE(plan->placement.is_array());
  ASSERT_EQ(plan->placement.size(), 4u);
  // Every DP ring (the ranks of one stage) now avoids the link 2-3.
  std::vector<int> node_of_role(4, -1);
  for (const auto& r : plan->placement) node_of_role[r["dp"].get<int>() + 2 * r["pp"].get<int>()] = r["rank"].get<int>();
  for (int pp = 0; pp < 2; ++pp) {
    const int a = node_of_role[2 * pp], b = node_of_role[2 * pp + 1];
    EXPECT_FALSE(std::min(a, b) == 2 && std::max(a, b) == 3) << plan->placement.dump();
  }
  EXPECT_GT(plan->predicted_iteration_s, 0.43);
  EXPECT_LT(plan->predicted_iteration_s, 0.60);
  EXPECT_NE(plan->reason.find("cost model"), std::string::npos) << plan->reason;
  // Its prediction scales with the iteration measured now (the model's times may be per unit of time).
  auto at1 = p.s3(loc, 1.0, 100.0, p.costs(0).s3_pause_s, 0.02, "why");
  auto at2 = p.s3(loc, 2.0, 100.0, p.costs(0).s3_pause_s, 0.02, "why");
  ASSERT_TRUE(at1 && at2);
  const double ratio = at1->predicted_iteration_s;
  EXPECT_GT(ratio, 0.3);
  EXPECT_LT(ratio, 0.98);
  EXPECT_NEAR(at2->predicted_iteration_s, 2.0 * ratio, 1e-9);
  // Proposed only when predicted at least min_gain faster.
  EXPECT_TRUE(p.s3(loc, 1.0, 100.0, p.costs(0).s3_pause_s, 1.0 - ratio - 0.01, "why"));
  EXPECT_FALSE(p.s3(loc, 1.0, 100.0, p.costs(0).s3_pause_s, 1.0 - ratio + 0.01, "why"));

  // Applied; the way back puts Megatron's placement back.
  p.applied(*plan);
  EXPECT_TRUE(p.moved());
  auto back = p.back_to(p.original(), false, true, "over");
  ASSERT_TRUE(back);
  EXPECT_EQ(back->action, PlanAction::kRevert);
  ASSERT_TRUE(back->placement.is_array());
  for (const auto& r : back->placement) {
    EXPECT_EQ(r["rank"].get<int>(), r["dp"].get<int>() + 2 * r["pp"].get<int>()) << back->placement.dump();
  }
  p.applied(*back);
  EXPECT_FALSE(p.moved());
}

TEST(Planner, S3NeedsToKnowHowRanksFillNodes) {
  JobLayout l = four_nodes({"S3"});
  l.gpus_per_node = 0;
  Planner p({}, l);
  EXPECT_FALSE(p.available(Strategy::kS3, Cause::kCommunication));
  Localisation loc;
  loc.cause = Cause::kCommunication;
  loc.suspect_links = {{2, 3, 5.0}};
  loc.replica_ms_per_microbatch = {48, 48};
  EXPECT_FALSE(p.s3(loc, 0, 100.0, 1.0, 0.02, "why"));
}

TEST(Planner, RemedyCostsAreTheJobsOwnEstimatesThenWhatItMeasured) {
  PlannerConfig cfg;
  cfg.ski.s3_pause_s = 60;
  cfg.ski.s4_restart_s = 1800;
  JobLayout l = four_nodes({"S3", "S4"});
  Planner p(cfg, l);
  EXPECT_DOUBLE_EQ(p.costs(0).s3_pause_s, 60);  // the job says nothing: the configured overheads
  EXPECT_DOUBLE_EQ(p.costs(0).s4_restart_s, 1800);
  l.s3_estimate_s = 0.25;
  l.s4_estimate_s = 300;
  p.layout_updated(l);  // a later layout with the job's estimates
  EXPECT_DOUBLE_EQ(p.costs(0).s3_pause_s, 0.25);
  EXPECT_DOUBLE_EQ(p.costs(0).s4_restart_s, 300);
  EXPECT_DOUBLE_EQ(p.costs(0.01).s3_pause_s, 0.01);  // a switch the job timed beats its estimate
  EXPECT_DOUBLE_EQ(p.costs(0.01).s4_restart_s, 300);
  l.s3_estimate_s = 0;  // withdrawn
  p.layout_updated(l);
  EXPECT_DOUBLE_EQ(p.costs(0).s3_pause_s, 60);
  EXPECT_DOUBLE_EQ(p.costs(0).s2_solve_s, cfg.ski.s2_solve_s);
}

// A job that applies S3 by restarting (Megatron): S3 costs a restart unless the job says otherwise, is not
// offered over a split in force (the restart would drop it), and a job restarted with a placement starts
// from it.
TEST(Planner, S3ByRestartCostsARestartKeepsTheSplitAndStartsFromItsPlacement) {
  PlannerConfig cfg;
  cfg.ski.s3_pause_s = 60;
  cfg.ski.s4_restart_s = 1800;
  JobLayout l = four_nodes({"S2", "S3"});
  l.s3_by_restart = true;
  Planner p(cfg, l);
  EXPECT_TRUE(p.available(Strategy::kS3, Cause::kCommunication));
  EXPECT_DOUBLE_EQ(p.costs(0).s3_pause_s, 1800);
  EXPECT_DOUBLE_EQ(p.costs(0.01).s3_pause_s, 1800);  // an acknowledgement's apply_s timed the checkpoint only
  l.s4_estimate_s = 240;
  p.layout_updated(l);
  EXPECT_DOUBLE_EQ(p.costs(0).s3_pause_s, 240);
  l.s3_estimate_s = 200;
  p.layout_updated(l);
  EXPECT_DOUBLE_EQ(p.costs(0).s3_pause_s, 200);

  JobLayout split = l;
  split.microbatches = {9, 7};
  EXPECT_FALSE(Planner(cfg, split).available(Strategy::kS3, Cause::kCommunication));
  split.s3_by_restart = false;
  EXPECT_TRUE(Planner(cfg, split).available(Strategy::kS3, Cause::kCommunication));

  JobLayout restarted = l;  // restarted with nodes 1 and 2 traded: its own placement, nothing to revert
  restarted.placement = {{0, 0, 0, 0}, {1, 0, 0, 1}, {2, 0, 1, 0}, {3, 0, 1, 1}};
  restarted.initial_placement = restarted.placement;
  Planner q(cfg, restarted);
  EXPECT_FALSE(q.moved());
  EXPECT_EQ(q.original().placement, q.current().placement);
}

TEST(Planner, S4RestartsWithoutTheCulpritsNodeOrBothEndsOfALinkAndPredictsFewerReplicas) {
  Planner p({}, four_nodes({"S4"}));
  FailSlow gpu;
  gpu.id = 1;
  gpu.incident = 7;
  gpu.cause = Cause::kComputation;
  gpu.rank = 3;
  gpu.node = 0;
  auto plan = p.s4(gpu, 0.5, "why");
  ASSERT_TRUE(plan);
  // 3 GPUs left: one replica of TP1 x PP2, all 16 micro-batches on it: (16 + 1) / (8 + 1) of the healthy.
  EXPECT_NEAR(plan->predicted_iteration_s, 0.5 * 17.0 / 9.0, 1e-12);
  EXPECT_NE(plan->reason.find("back with 1 DP replica(s) of up to 16 micro-batches (was 2 of 8)"), std::string::npos)
      << plan->reason;
  EXPECT_EQ(plan->strategy, Strategy::kS4);
  EXPECT_EQ(plan->incident, 7);
  EXPECT_EQ(plan->exclude_ranks, (std::vector<int>{3}));
  EXPECT_EQ(plan->exclude_nodes, (std::vector<int>{0}));
  EXPECT_NE(plan->reason.find("without rank(s) [3] on node(s) [0]"), std::string::npos) << plan->reason;

  FailSlow link;
  link.cause = Cause::kCommunication;
  link.link_a = 2;
  link.link_b = 3;
  plan = p.s4(link, 0, "why");
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->predicted_iteration_s, 0);  // no healthy iteration known: no prediction
  EXPECT_EQ(plan->exclude_nodes, (std::vector<int>{2, 3}));
  EXPECT_TRUE(plan->exclude_ranks.empty());

  FailSlow nothing;
  nothing.cause = Cause::kCommunication;
  EXPECT_FALSE(p.s4(nothing, 0.5, "why"));  // nothing named: a restart would change nothing

  // A job with one replica has none left without a node.
  JobLayout one = four_nodes({"S4"});
  one.dp = 1;
  one.world = 2;
  one.microbatches = one.initial_microbatches = {8};
  EXPECT_FALSE(Planner({}, one).s4(gpu, 0.5, "why"));
}

TEST(Planner, S4KeepsAsManyReplicasAsFitAndTheGlobalBatch) {
  // TP1 x DP4 x PP2 on 4 nodes of 2 GPUs: without node 1, 6 GPUs hold 3 replicas; 32 micro-batches over 3:
  // the largest gets 11.
  JobLayout l = four_nodes({"S4"});
  l.dp = 4;
  l.world = 8;
  l.gpus_per_node = 2;
  l.microbatches = l.initial_microbatches = {8, 8, 8, 8};
  FailSlow gpu;
  gpu.cause = Cause::kComputation;
  gpu.rank = 2;
  gpu.node = 1;
  auto plan = Planner({}, l).s4(gpu, 1.0, "why");
  ASSERT_TRUE(plan);
  EXPECT_NEAR(plan->predicted_iteration_s, 12.0 / 9.0, 1e-12);
  EXPECT_NE(plan->reason.find("back with 3 DP replica(s) of up to 11 micro-batches (was 4 of 8)"), std::string::npos)
      << plan->reason;
}

TEST(Planner, AJobThatOffersNothingGetsNothing) {
  Planner p({}, layout({}));
  for (Strategy s : {Strategy::kS2, Strategy::kS3, Strategy::kS4}) {
    EXPECT_FALSE(p.available(s, Cause::kComputation));
  }
  EXPECT_TRUE(p.available(Strategy::kS1, Cause::kComputation));
}

}  // namespace
}  // namespace greyhound::master
