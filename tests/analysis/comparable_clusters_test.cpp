#include "greyhound/analysis/comparable_clusters.h"

#include <gtest/gtest.h>

namespace greyhound::analysis {
namespace {

TEST(ComparableClusters, GroupsAboveTheirClusterMedianByMoreThanTheThresholdAreSuspects) {
  const std::vector<GroupTiming> groups = {
      {1, "dp:AllReduce:64MiB", 100}, {2, "dp:AllReduce:64MiB", 102}, {3, "dp:AllReduce:64MiB", 250},
      {4, "dp:AllReduce:64MiB", 98},  {5, "dp:AllReduce:64MiB", 111}, {6, "tp:AllReduce:1MiB", 10},
      {7, "tp:AllReduce:1MiB", 10.5}, {8, "pp:Send:4MiB", 40}};  // a lone signature has nothing to compare with
  const auto found = comparable_clusters(groups);
  ASSERT_EQ(found.size(), 2u);
  const ClusterFinding& dp = found[0].signature == "dp:AllReduce:64MiB" ? found[0] : found[1];
  const ClusterFinding& tp = found[0].signature == "dp:AllReduce:64MiB" ? found[1] : found[0];
  EXPECT_EQ(dp.groups, 5u);
  EXPECT_DOUBLE_EQ(dp.median_ms, 102);
  ASSERT_EQ(dp.slow_groups.size(), 1u);  // 111 is 8.8 % above 102: within the threshold
  EXPECT_EQ(dp.slow_groups[0], 3u);
  EXPECT_NEAR(dp.slow_ratios[0], 250.0 / 102.0, 1e-12);
  EXPECT_EQ(tp.groups, 2u);
  EXPECT_TRUE(tp.slow_groups.empty());
}

TEST(ComparableClusters, SlowestFirstAndTheThresholdIsStrict) {
  const std::vector<GroupTiming> groups = {{1, "s", 100}, {2, "s", 100}, {3, "s", 100}, {4, "s", 130},
                                           {5, "s", 160}, {6, "s", 110}, {7, "s", 100}};
  const auto found = comparable_clusters(groups, 0.10);
  ASSERT_EQ(found.size(), 1u);
  ASSERT_EQ(found[0].slow_groups.size(), 2u);  // 110 is exactly 10 % above: not a suspect
  EXPECT_EQ(found[0].slow_groups[0], 5u);
  EXPECT_EQ(found[0].slow_groups[1], 4u);
  EXPECT_TRUE(comparable_clusters(groups, 0.70)[0].slow_groups.empty());
  EXPECT_TRUE(comparable_clusters({}).empty());
}

}  // namespace
}  // namespace greyhound::analysis
