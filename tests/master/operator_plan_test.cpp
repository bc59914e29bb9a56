// An operator's manual plan checked against the job's layout (daemon/operator_plan.h), pure.
#include "daemon/operator_plan.h"

#include <gtest/gtest.h>

namespace greyhound::master {
namespace {

JobLayout layout() {
  JobLayout l;
  l.tp = 2;
  l.dp = 2;
  l.pp = 2;
  l.world = 8;
  l.microbatches = {6, 10};
  l.initial_microbatches = {8, 8};
  l.capabilities = {"S2", "S3"};
  l.gpus_per_node = 2;
  return l;
}

OperatorPlanRequest apply(std::vector<int> microbatches) {
  OperatorPlanRequest r;
  r.id = "op-1";
  r.action = "apply";
  r.microbatches = std::move(microbatches);
  r.reason = "a slow PSU";
  return r;
}

TEST(OperatorPlan, ASplitOfTheGlobalBatchOverEveryReplicaIsAnS2Plan) {
  const OperatorPlanCheck c = check_operator_plan(apply({4, 12}), layout());
  ASSERT_TRUE(c.plan) << c.error;
  EXPECT_EQ(c.plan->strategy, Strategy::kS2);
  EXPECT_EQ(c.plan->action, PlanAction::kApply);
  EXPECT_EQ(c.plan->microbatches, (std::vector<int>{4, 12}));
  EXPECT_TRUE(c.plan->placement.is_null());
  EXPECT_EQ(c.plan->reason, "operator's plan op-1: a slow PSU");
}

TEST(OperatorPlan, WhatTheJobCannotApplyIsRefusedWithTheReason) {
  EXPECT_NE(check_operator_plan(apply({6, 6}), layout()).error.find("global batch is 16"), std::string::npos);
  EXPECT_NE(check_operator_plan(apply({16}), layout()).error.find("2 DP replicas"), std::string::npos);
  JobLayout no_s2 = layout();
  no_s2.capabilities = {"S3"};
  EXPECT_NE(check_operator_plan(apply({4, 12}), no_s2).error.find("S2"), std::string::npos);
  OperatorPlanRequest p;
  p.id = "op-2";
  p.placement = megatron_placement(layout());
  p.placement[0].tp = 1;  // two ranks with one role
  const OperatorPlanCheck bad = check_operator_plan(p, layout());
  EXPECT_FALSE(bad.plan);
  EXPECT_NE(bad.error.find("placement"), std::string::npos) << bad.error;
  JobLayout interleaved = layout();
  interleaved.microbatch_multiple = 2;
  EXPECT_EQ(check_operator_plan(apply({5, 11}), interleaved).error,
            "microbatches: 5 is not a multiple of 2, which the job's pipeline schedule needs");
  EXPECT_TRUE(check_operator_plan(apply({4, 12}), interleaved).plan);
  JobLayout any = layout();
  any.microbatch_multiple = 1;
  EXPECT_TRUE(check_operator_plan(apply({5, 11}), any).plan);
  JobLayout unknown_nodes = layout();
  unknown_nodes.gpus_per_node = 0;
  EXPECT_NE(check_operator_plan(OperatorPlanRequest{"op-3", "apply", {}, megatron_placement(layout()), "", 0}, unknown_nodes)
                .error.find("gpus_per_node"),
            std::string::npos);
}

TEST(OperatorPlan, APlacementIsAnS3PlanARevertGoesBackAndAReleaseIsNoPlan) {
  OperatorPlanRequest p{"op-4", "apply", {}, megatron_placement(layout()), "", 0};
  std::swap(p.placement[0].dp, p.placement[2].dp);  // replicas 0 and 1 swap their first TP group
  std::swap(p.placement[1].dp, p.placement[3].dp);
  const OperatorPlanCheck s3 = check_operator_plan(p, layout());
  ASSERT_TRUE(s3.plan) << s3.error;
  EXPECT_EQ(s3.plan->strategy, Strategy::kS3);
  ASSERT_TRUE(s3.plan->placement.is_array());
  EXPECT_EQ(s3.plan->placement.size(), 8u);

  JobLayout moved = layout();
  moved.placement = p.placement;
  const OperatorPlanCheck back = check_operator_plan(OperatorPlanRequest{"op-5", "revert", {}, {}, "", 0}, moved);
  ASSERT_TRUE(back.plan) << back.error;
  EXPECT_EQ(back.plan->action, PlanAction::kRevert);
  EXPECT_EQ(back.plan->microbatches, (std::vector<int>{8, 8}));
  ASSERT_TRUE(back.plan->placement.is_array());
  EXPECT_EQ(back.plan->placement[0]["dp"], 0);

  const OperatorPlanCheck release = check_operator_plan(OperatorPlanRequest{"op-6", "release", {}, {}, "", 0}, layout());
  EXPECT_FALSE(release.plan);
  EXPECT_TRUE(release.error.empty());
}

}  // namespace
}  // namespace greyhound::master
