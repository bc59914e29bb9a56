// The master's Validator, pure: what it chooses to test after a localisation, and what the measured
// times say (a slow GPU first, its own transfers not held against a link; else a slow link; else none).
#include "daemon/validator.h"

#include <gtest/gtest.h>

namespace greyhound::master {
namespace {

// TP2 x DP2 x PP2: DP groups {0,2} {1,3} (stage 0) and {4,6} {5,7} (stage 1); TP groups {0,1} {2,3} ...
std::vector<GroupMembers> groups() {
  return {{0x10, {0, 2}, "dp"}, {0x11, {1, 3}, "dp"}, {0x12, {4, 6}, "dp"}, {0x13, {5, 7}, "dp"},
          {0x20, {0, 1}, "tp"}, {0x21, {2, 3}, "tp"}, {0x22, {4, 5}, "tp"}, {0x23, {6, 7}, "tp"},
          {0x30, {0, 4}, "pp"}, {0x31, {1, 5}, "pp"}, {0x32, {2, 6}, "pp"}, {0x33, {3, 7}, "pp"}};
}

TEST(Validator, AComputeCulpritGetsGemmWithItsPeersAndTheSuspectGroupsRingPasses) {
  Localisation loc;
  loc.cause = Cause::kComputation;
  loc.culprit = 3;
  loc.group = 0x11;
  loc.slow_groups = {{0x21, 1.4}, {0x11, 1.9}};
  const ValidationPlan p = plan_validation(loc, groups());
  // The culprit, its group's other member, then its other groups' members: 3 peers.
  EXPECT_EQ(p.gemm_ranks, (std::vector<int>{3, 1, 2, 7}));
  ASSERT_EQ(p.p2p.size(), 2u);
  EXPECT_EQ(p.p2p[0].group, 0x11u);  // slowest first
  EXPECT_EQ(p.p2p[0].order, (std::vector<int>{1, 3}));
  ASSERT_EQ(p.p2p[0].passes.size(), 2u);
  EXPECT_EQ(p.p2p[0].passes[0], (validate::Pass{{1, 3}}));
  EXPECT_EQ(p.p2p[0].passes[1], (validate::Pass{{3, 1}}));
  EXPECT_FALSE(p.empty());
}

TEST(Validator, ALinkSuspectGetsPassesOnlyInTheGraphDumpsOrder) {
  Localisation loc;
  loc.cause = Cause::kCommunication;
  loc.culprit = 0;
  loc.slow_groups = {{0x10, 3.0}};
  std::vector<GroupMembers> g = {{0x10, {0, 1, 2, 3}, "dp"}};
  ValidationPlan p = plan_validation(loc, g, {{0x10, {0, 2, 1, 3}}});
  EXPECT_TRUE(p.gemm_ranks.empty());
  ASSERT_EQ(p.p2p.size(), 1u);
  EXPECT_EQ(p.p2p[0].order, (std::vector<int>{0, 2, 1, 3}));
  EXPECT_EQ(validate::check_passes(p.p2p[0].passes, validate::ring_links({0, 2, 1, 3})), "");
  // A dumped order that is not the group's members is not used.
  p = plan_validation(loc, g, {{0x10, {0, 2, 1, 9}}});
  EXPECT_EQ(p.p2p[0].order, (std::vector<int>{0, 1, 2, 3}));
  // At most max_groups groups.
  loc.slow_groups = {{0x10, 3.0}, {0x11, 2.0}, {0x12, 1.5}};
  ValidatorConfig c;
  c.max_groups = 2;
  EXPECT_EQ(plan_validation(loc, groups(), {}, c).p2p.size(), 2u);
  // Nothing suspect: nothing to test.
  EXPECT_TRUE(plan_validation(Localisation{}, groups()).empty());
}

constexpr double kMiB32 = 32.0 * (1 << 20);

TEST(Validator, ASlowGpuComesFirstAndItsOwnTransfersAreNotHeldAgainstALink) {
  // Rank 3 (node 1) 1.6x in GEMM; its transfers are slow too, the others' are not.
  const Validated v = judge_validation(
      {{3, 1, 16.0}, {1, 0, 10.0}, {2, 1, 10.2}, {7, 3, 9.9}},
      {{{1, 3}, 0, 1, kMiB32, 80.0}, {{3, 1}, 1, 0, kMiB32, 81.0}, {{0, 2}, 0, 1, kMiB32, 30.0},
       {{2, 0}, 1, 0, kMiB32, 31.0}, {{4, 6}, 2, 3, kMiB32, 30.5}});
  EXPECT_EQ(v.cause, ValidatedCause::kGpu);
  EXPECT_EQ(v.rank, 3);
  EXPECT_EQ(v.node, 1);
  EXPECT_NEAR(v.ratio, 1.6, 1e-9);
  EXPECT_EQ(v.links.size(), 3u);  // rank 3's two transfers left out
  for (const auto& l : v.links) EXPECT_FALSE(l.slow);
  EXPECT_NE(v.reason.find("rank 3's GEMM"), std::string::npos) << v.reason;
  EXPECT_STREQ(validated_cause_name(v.cause), "gpu");
}

TEST(Validator, ASlowLinkWhenNoGpuIsAndNoneWhenNothingIs) {
  Validated v = judge_validation({{0, 0, 10.0}, {1, 0, 10.1}, {2, 1, 9.9}},
                                 {{{0, 2}, 0, 1, kMiB32, 300.0}, {{1, 3}, 0, 1, kMiB32, 30.0},
                                  {{4, 6}, 2, 3, kMiB32, 31.0}, {{5, 7}, 2, 3, kMiB32, 29.0}});
  EXPECT_EQ(v.cause, ValidatedCause::kLink);
  EXPECT_EQ(v.node_a, 0);
  EXPECT_EQ(v.node_b, 1);
  EXPECT_NEAR(v.ratio, 10.0, 1e-9);
  EXPECT_NEAR(v.peers_gb_per_s / v.gb_per_s, 10.0, 1e-9);
  EXPECT_NE(v.reason.find("inter-node link 0-1"), std::string::npos) << v.reason;
  v = judge_validation({{0, 0, 10.0}, {1, 0, 10.1}, {2, 1, 9.9}},
                       {{{0, 2}, 0, 1, kMiB32, 31.0}, {{1, 3}, 0, 1, kMiB32, 30.0}, {{4, 6}, 2, 3, kMiB32, 30.5}});
  EXPECT_EQ(v.cause, ValidatedCause::kNone);
  EXPECT_NE(v.reason.find("no GPU of 3 and no transfer of 3"), std::string::npos) << v.reason;
}

}  // namespace
}  // namespace greyhound::master
