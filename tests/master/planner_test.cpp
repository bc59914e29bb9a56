// The master's planner driver: the ski-rental controller fed per iteration, S2 plans from replica times,
// the revert after the fail-slow ends.
#include "daemon/planner.h"

#include <gtest/gtest.h>

namespace greyhound::master {
namespace {

Incident incident(double healthy_ms) {
  Incident i;
  i.id = 7;
  i.before_ms = healthy_ms;
  i.after_ms = healthy_ms * 1.36;
  return i;
}

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

TEST(Planner, RebalancesMicrobatchesOnceTheLossPaysForItThenRevertsAfterRecovery) {
  PlannerConfig cfg;
  std::string why;
  auto p = Planner::start(cfg, incident(430), slow_replica(48, 72), layout({"S2"}), &why);
  ASSERT_TRUE(p) << why;
  // S2 costs one iteration (+ solve time): the first slow iteration loses 0.157 s, less than 0.587 s; the
  // fourth brings the loss to 0.628 s >= the overhead.
  std::optional<Plan> plan;
  int iterations = 0;
  while (!plan && iterations < 20) {
    plan = p->observe(0.587);
    ++iterations;
  }
  ASSERT_TRUE(plan);
  EXPECT_EQ(iterations, 4);
  EXPECT_EQ(plan->strategy, Strategy::kS2);
  EXPECT_EQ(plan->action, PlanAction::kApply);
  EXPECT_EQ(plan->incident, 7);
  // Makespan per replica m_i * t_i: [8,8] -> 576; [10,6] -> max(480, 432) = 480 (m_i multiples of P = 2).
  EXPECT_EQ(plan->microbatches, (std::vector<int>{10, 6}));
  EXPECT_NE(plan->reason.find("576.0 -> 480.0"), std::string::npos) << plan->reason;
  EXPECT_EQ(p->strategy(), mitigate::Strategy::kS2Microbatches);

  p->applied(*plan);
  EXPECT_TRUE(p->was_mitigated());
  EXPECT_FALSE(p->reverted_to_original());
  for (int i = 0; i < 10; ++i) EXPECT_FALSE(p->observe(0.460)) << i;  // within 10 % of healthy: S2 holds

  // The fault ends: the replicas are even again, and [10,6] now costs ~10 % more than [8,8] would.
  Localisation healed;
  healed.replica_ms_per_microbatch = {48, 48};
  healed.replica_skew = 1.0;
  p->update(healed);
  EXPECT_FALSE(p->fail_slow_present());
  std::optional<Plan> revert;
  for (int i = 0; i < 200 && !revert; ++i) revert = p->observe(0.480);
  ASSERT_TRUE(revert);
  EXPECT_EQ(revert->action, PlanAction::kRevert);
  EXPECT_EQ(revert->microbatches, (std::vector<int>{8, 8}));
  p->applied(*revert);
  EXPECT_TRUE(p->reverted_to_original());
  EXPECT_TRUE(p->was_mitigated());
}

TEST(Planner, StartedWhileAnEarlierPlanIsInForceItRevertsAfterRecovery) {
  // A restarted master: the job's layout says [10,6] is in force, [8,8] the initial allocation.
  JobLayout l = layout({"S2"});
  l.microbatches = {10, 6};
  l.initial_microbatches = {8, 8};
  auto p = Planner::start({}, incident(430), slow_replica(48, 48), l, nullptr);
  ASSERT_TRUE(p);
  EXPECT_TRUE(p->was_mitigated());
  EXPECT_FALSE(p->reverted_to_original());
  EXPECT_EQ(p->strategy(), mitigate::Strategy::kS2Microbatches);
  for (int i = 0; i < 10; ++i) EXPECT_FALSE(p->observe(0.460)) << i;  // S2 holds the iteration
  Localisation healed;
  healed.replica_ms_per_microbatch = {48, 48};
  healed.replica_skew = 1.0;
  p->update(healed);
  std::optional<Plan> revert;
  for (int i = 0; i < 200 && !revert; ++i) revert = p->observe(0.480);
  ASSERT_TRUE(revert);
  EXPECT_EQ(revert->action, PlanAction::kRevert);
  EXPECT_EQ(revert->microbatches, (std::vector<int>{8, 8}));
}

TEST(Planner, NoFasterAllocationDeclinesS2AndNothingIsPublished) {
  // Replicas already balanced per slot: the solver finds nothing better than [8,8].
  auto p = Planner::start({}, incident(430), slow_replica(48, 48.5), layout({"S2"}), nullptr);
  ASSERT_TRUE(p);
  for (int i = 0; i < 50; ++i) EXPECT_FALSE(p->observe(0.587)) << i;
  EXPECT_EQ(p->strategy(), mitigate::Strategy::kS1Ignore);
  EXPECT_FALSE(p->was_mitigated());
}

TEST(Planner, AJobThatCanApplyNothingIsNotPlannedFor) {
  std::string why;
  EXPECT_FALSE(Planner::start({}, incident(430), slow_replica(48, 72), layout({}), &why));
  EXPECT_NE(why.find("none of S2, S3, S4"), std::string::npos);
  // A congested link: S2 cannot help; with only S2 on offer nothing is ever published.
  Localisation link;
  link.cause = Cause::kCommunication;
  link.slow_groups = {{0x22, 3.0}};
  link.replica_ms_per_microbatch = {48, 60};
  auto p = Planner::start({}, incident(430), link, layout({"S2"}), &why);
  ASSERT_TRUE(p) << why;
  for (int i = 0; i < 100; ++i) EXPECT_FALSE(p->observe(0.700)) << i;
  EXPECT_EQ(p->strategy(), mitigate::Strategy::kS1Ignore);
}

TEST(Planner, ARejectedPlanMarksTheStrategyUnavailable) {
  auto p = Planner::start({}, incident(430), slow_replica(48, 72), layout({"S2"}), nullptr);
  ASSERT_TRUE(p);
  std::optional<Plan> plan;
  for (int i = 0; i < 20 && !plan; ++i) plan = p->observe(0.587);
  ASSERT_TRUE(plan);
  p->rejected(*plan);
  EXPECT_EQ(p->strategy(), mitigate::Strategy::kS1Ignore);
  for (int i = 0; i < 50; ++i) EXPECT_FALSE(p->observe(0.587)) << i;
}

}  // namespace
}  // namespace greyhound::master

namespace greyhound::master {
namespace {

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
  std::string why;
  auto p = Planner::start(cfg, incident(430), loc, four_nodes({"S2", "S3"}), &why);
  ASSERT_TRUE(p) << why;
  std::optional<Plan> plan;
  int iterations = 0;
  while (!plan && iterations < 100) {
    plan = p->observe(0.900);
    ++iterations;
  }
  ASSERT_TRUE(plan);
  EXPECT_EQ(iterations, 5);  // S2 is skipped for a link; 5 x 0.47 s of loss pays the 2 s pause
  EXPECT_EQ(plan->strategy, Strategy::kS3);
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

  // Applied; once the link heals, the revert puts Megatron's placement back.
  p->applied(*plan);
  EXPECT_TRUE(p->was_mitigated());
  EXPECT_FALSE(p->reverted_to_original());
  Localisation healed;
  healed.replica_ms_per_microbatch = {48, 48};
  p->update(healed);
  std::optional<Plan> revert;
  for (int i = 0; i < 200 && !revert; ++i) revert = p->observe(0.470);
  ASSERT_TRUE(revert);
  EXPECT_EQ(revert->action, PlanAction::kRevert);
  ASSERT_TRUE(revert->placement.is_array());
  for (const auto& r : revert->placement) {
    EXPECT_EQ(r["rank"].get<int>(), r["dp"].get<int>() + 2 * r["pp"].get<int>()) << revert->placement.dump();
  }
  p->applied(*revert);
  EXPECT_TRUE(p->reverted_to_original());
}

TEST(Planner, S3NeedsToKnowHowRanksFillNodes) {
  JobLayout l = four_nodes({"S3"});
  l.gpus_per_node = 0;
  Localisation loc;
  loc.cause = Cause::kCommunication;
  loc.suspect_links = {{2, 3, 5.0}};
  std::string why;
  EXPECT_FALSE(Planner::start({}, incident(430), loc, l, &why));
}

TEST(Planner, S4RestartsWithoutTheCulpritsNode) {
  PlannerConfig cfg;
  cfg.ski.s4_restart_s = 1.0;
  auto p = Planner::start(cfg, incident(430), slow_replica(48, 72), layout({"S4"}), nullptr);
  ASSERT_TRUE(p);
  std::optional<Plan> plan;
  for (int i = 0; i < 100 && !plan; ++i) plan = p->observe(0.587);
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->strategy, Strategy::kS4);
  EXPECT_EQ(plan->exclude_ranks, (std::vector<int>{3}));
  EXPECT_EQ(plan->exclude_nodes, (std::vector<int>{0}));
  EXPECT_NE(plan->reason.find("without rank(s) [3] on node(s) [0]"), std::string::npos) << plan->reason;
}

TEST(Planner, S4ForALinkExcludesBothEndsAndNothingNamedMeansNoRestart) {
  PlannerConfig cfg;
  cfg.ski.s4_restart_s = 1.0;
  Localisation link;
  link.cause = Cause::kCommunication;
  link.suspect_links = {{2, 3, 5.0}};
  auto p = Planner::start(cfg, incident(430), link, four_nodes({"S4"}), nullptr);
  ASSERT_TRUE(p);
  std::optional<Plan> plan;
  for (int i = 0; i < 100 && !plan; ++i) plan = p->observe(0.9);
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->exclude_nodes, (std::vector<int>{2, 3}));
  EXPECT_TRUE(plan->exclude_ranks.empty());

  Localisation nothing;
  nothing.cause = Cause::kCommunication;
  auto q = Planner::start(cfg, incident(430), nothing, four_nodes({"S4"}), nullptr);
  ASSERT_TRUE(q);
  for (int i = 0; i < 100; ++i) EXPECT_FALSE(q->observe(0.9)) << i;
}

}  // namespace
}  // namespace greyhound::master
