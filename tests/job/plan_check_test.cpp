// The job's plan check (job/plan_check.h): every rule accepts what fits and rejects what does not, with the
// reason naming the field.
#include "job/plan_check.h"

#include <gtest/gtest.h>

namespace greyhound::job {
namespace {

// TP 2 x DP 3 x PP 2 on 4 nodes of 3 GPUs, 4 micro-batches per replica (12 in the global batch).
JobLayout layout(std::vector<std::string> caps = {"S2"}) {
  JobLayout l;
  l.tp = 2;
  l.dp = 3;
  l.pp = 2;
  l.world = 12;
  l.microbatches = {4, 4, 4};
  l.initial_microbatches = {4, 4, 4};
  l.capabilities = std::move(caps);
  l.gpus_per_node = 6;
  return l;
}

Plan s2(std::int64_t epoch, std::vector<int> mb) {
  Plan p;
  p.epoch = epoch;
  p.strategy = Strategy::kS2;
  p.microbatches = std::move(mb);
  return p;
}

TEST(PlanCheck, AcceptsAnS2PlanThatKeepsTheGlobalBatch) {
  const auto c = check_plan(layout(), s2(1, {6, 3, 3}), 0);
  EXPECT_EQ(c.verdict, Verdict::kAccept);
  EXPECT_EQ(c.reason, "");
}

TEST(PlanCheck, SameEpochIsNothingNewAndAnOlderOneIsStale) {
  EXPECT_EQ(check_plan(layout(), s2(3, {6, 3, 3}), 3).verdict, Verdict::kSeen);
  const auto c = check_plan(layout(), s2(2, {6, 3, 3}), 3);
  EXPECT_EQ(c.verdict, Verdict::kStale);
  EXPECT_EQ(c.reason, "epoch 2 is older than the last plan taken (3)");
}

TEST(PlanCheck, RejectsAVectorOfTheWrongLength) {
  const auto c = check_plan(layout(), s2(1, {6, 6}), 0);
  EXPECT_EQ(c.verdict, Verdict::kRejected);
  EXPECT_EQ(c.reason, "microbatches: 2 entries for 3 DP replicas");
}

TEST(PlanCheck, RejectsAChangedGlobalBatch) {
  const auto c = check_plan(layout(), s2(1, {6, 4, 4}), 0);
  EXPECT_EQ(c.verdict, Verdict::kRejected);
  EXPECT_EQ(c.reason, "microbatches: total 14 differs from the job's global batch of 12 micro-batches");
}

TEST(PlanCheck, TheGlobalBatchIsTheAllocationInForce) {
  JobLayout l = layout();
  l.microbatches = {6, 3, 3};  // after an applied plan: same total, other split
  EXPECT_EQ(check_plan(l, s2(2, {4, 4, 4}), 1).verdict, Verdict::kAccept);
}

TEST(PlanCheck, RejectsAnEntryBelowOne) {
  const auto c = check_plan(layout(), s2(1, {12, 0, 0}), 0);
  EXPECT_EQ(c.verdict, Verdict::kRejected);
  EXPECT_EQ(c.reason, "microbatches[1]: 0 is below 1");
}

TEST(PlanCheck, RejectsCountsTheJobsScheduleCannotRun) {
  JobLayout l = layout();
  l.microbatch_multiple = 2;  // an interleaved schedule on PP 2
  const auto c = check_plan(l, s2(1, {6, 3, 3}), 0);
  EXPECT_EQ(c.verdict, Verdict::kRejected);
  EXPECT_EQ(c.reason, "microbatches[1]: 3 is not a multiple of 2, which the job's pipeline schedule needs");
  EXPECT_EQ(check_plan(l, s2(1, {6, 4, 2}), 0).verdict, Verdict::kAccept);
  l.microbatch_multiple = 1;
  EXPECT_EQ(check_plan(l, s2(1, {6, 3, 3}), 0).verdict, Verdict::kAccept);
}

TEST(PlanCheck, RejectsAnS2PlanWithoutMicrobatches) {
  const auto c = check_plan(layout(), s2(1, {}), 0);
  EXPECT_EQ(c.verdict, Verdict::kRejected);
  EXPECT_EQ(c.reason, "microbatches: an S2 plan must give one entry per DP replica");
}

TEST(PlanCheck, AStrategyNotAdvertisedIsUnsupported) {
  Plan p;
  p.epoch = 1;
  p.strategy = Strategy::kS4;
  p.exclude_nodes = {1};
  const auto c = check_plan(layout(), p, 0);
  EXPECT_EQ(c.verdict, Verdict::kUnsupported);
  EXPECT_EQ(c.reason, "strategy S4 is not among this job's capabilities [S2]");
  EXPECT_EQ(check_plan(layout({}), s2(1, {6, 3, 3}), 0).verdict, Verdict::kUnsupported);
}

TEST(PlanCheck, RevertsAndS1AreAlwaysAcceptable) {
  Plan revert = s2(2, {4, 4, 4});
  revert.strategy = Strategy::kS3;
  revert.action = PlanAction::kRevert;
  EXPECT_EQ(check_plan(layout({}), revert, 1).verdict, Verdict::kAccept);
  Plan s1;
  s1.epoch = 2;
  s1.strategy = Strategy::kS1;
  s1.action = PlanAction::kRevert;
  s1.microbatches = {4, 4, 4};
  EXPECT_EQ(check_plan(layout({}), s1, 1).verdict, Verdict::kAccept);
  s1.action = PlanAction::kApply;
  s1.microbatches.clear();
  EXPECT_EQ(check_plan(layout({}), s1, 1).verdict, Verdict::kAccept);
  // ... but their micro-batches must still fit.
  revert.microbatches = {4, 4};
  EXPECT_EQ(check_plan(layout({}), revert, 1).verdict, Verdict::kRejected);
}

nlohmann::json placement(const JobLayout& l) {
  nlohmann::json out = nlohmann::json::array();
  for (int r = 0; r < l.world; ++r) {
    out.push_back({{"rank", r}, {"tp", r % l.tp}, {"dp", (r / l.tp) % l.dp}, {"pp", r / (l.tp * l.dp)}});
  }
  return out;
}

TEST(PlanCheck, S3PlacementMustPlaceEveryRankOnce) {
  const JobLayout l = layout({"S3"});
  Plan p;
  p.epoch = 1;
  p.strategy = Strategy::kS3;
  p.placement = placement(l);
  // The TP groups of ranks 0-1 (node 0) and 10-11 (node 1) trade roles.
  std::swap(p.placement[0]["rank"], p.placement[10]["rank"]);
  std::swap(p.placement[1]["rank"], p.placement[11]["rank"]);
  const auto ok = check_plan(l, p, 0);
  ASSERT_EQ(ok.verdict, Verdict::kAccept) << ok.reason;
  ASSERT_EQ(ok.placement.size(), 12u);
  EXPECT_EQ(ok.placement[0].rank, 10);
  EXPECT_EQ(ok.placement[0].pp, 0);
  EXPECT_EQ(ok.placement[11].rank, 1);
  EXPECT_EQ(ok.placement[11].pp, 1);

  p.placement[2]["rank"] = 11;
  EXPECT_EQ(check_plan(l, p, 0).reason, "placement[2]: rank 11 placed twice");
  // Whole TP groups per node: ranks 0 and 11 alone trading roles would split two TP groups across nodes.
  p.placement = placement(l);
  std::swap(p.placement[0]["rank"], p.placement[11]["rank"]);
  EXPECT_EQ(check_plan(l, p, 0).reason, "placement[1]: the TP group of dp 0, pp 0 spans nodes 1 and 0");
  JobLayout unknown_nodes = l;  // without gpus_per_node the job cannot tell, and takes it
  unknown_nodes.gpus_per_node = 0;
  EXPECT_EQ(check_plan(unknown_nodes, p, 0).verdict, Verdict::kAccept);
  p.placement = placement(l);
  p.placement[3]["pp"] = 2;
  EXPECT_EQ(check_plan(l, p, 0).reason, "placement[3]: outside the job's 2x3x2 layout");
  p.placement.erase(5);
  EXPECT_EQ(check_plan(l, p, 0).reason, "placement: 11 entries for 12 ranks");
  p.placement = nullptr;
  EXPECT_EQ(check_plan(l, p, 0).reason, "placement: an S3 plan must place every rank");
}

TEST(PlanCheck, S4ExclusionsMustBeInsideTheJob) {
  const JobLayout l = layout({"S4"});
  Plan p;
  p.epoch = 1;
  p.strategy = Strategy::kS4;
  EXPECT_EQ(check_plan(l, p, 0).reason, "exclude_nodes/exclude_ranks: an S4 plan must exclude something");
  p.exclude_nodes = {1};
  p.exclude_ranks = {7};
  EXPECT_EQ(check_plan(l, p, 0).verdict, Verdict::kAccept);
  p.exclude_nodes = {2};
  EXPECT_EQ(check_plan(l, p, 0).reason, "exclude_nodes: node 2 outside the job's 2 nodes");
  p.exclude_nodes = {};
  p.exclude_ranks = {12};
  EXPECT_EQ(check_plan(l, p, 0).reason, "exclude_ranks: rank 12 outside the job");
}

TEST(CheckLayout, AcceptsAConsistentLayoutAndNamesWhatIsWrong) {
  EXPECT_EQ(check_layout(layout()), "");
  JobLayout l = layout();
  l.world = 10;
  EXPECT_EQ(check_layout(l), "world: must be tp * dp * pp");
  l = layout();
  l.microbatches = {4, 4};
  EXPECT_EQ(check_layout(l), "microbatches: one per DP replica");
  l = layout();
  l.initial_microbatches = {4, 4, 5};
  EXPECT_EQ(check_layout(l), "initial_microbatches: must add up to the same global batch");
  l = layout({"S2", "S1"});
  EXPECT_EQ(check_layout(l), "capabilities: 'S1' is not S2, S3 or S4");
  l = layout();
  l.gpus_per_node = 5;
  EXPECT_EQ(check_layout(l), "gpus_per_node: must divide world and be a multiple of tp");
}

}  // namespace
}  // namespace greyhound::job
