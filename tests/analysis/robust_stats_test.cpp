#include "greyhound/analysis/robust_stats.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace ga = greyhound::analysis;

TEST(RobustStats, Median) {
  std::vector<double> scratch;
  EXPECT_DOUBLE_EQ(ga::median(std::vector<double>{5, 1, 3}, scratch), 3.0);
  EXPECT_DOUBLE_EQ(ga::median(std::vector<double>{4, 1, 3, 2}, scratch), 2.5);
  EXPECT_DOUBLE_EQ(ga::median(std::vector<double>{7}, scratch), 7.0);
  EXPECT_TRUE(std::isnan(ga::median(std::vector<double>{}, scratch)));
}

TEST(RobustStats, TrimmedMean) {
  std::vector<double> scratch;
  const std::vector<double> v{8, 1, 7, 2, 6, 3, 5, 4};
  EXPECT_DOUBLE_EQ(ga::trimmed_mean(v, 0.0, 0.0, scratch), 4.5);    // plain mean
  EXPECT_DOUBLE_EQ(ga::trimmed_mean(v, 0.25, 0.25, scratch), 4.5);  // (3 + 4 + 5 + 6) / 4
  EXPECT_DOUBLE_EQ(ga::trimmed_mean(v, 0.0, 0.75, scratch), 1.5);   // fastest quarter: (1 + 2) / 2
  EXPECT_DOUBLE_EQ(ga::trimmed_mean(v, 0.0, 0.5, scratch), 2.5);    // lower half
  // At least one value is kept.
  EXPECT_DOUBLE_EQ(ga::trimmed_mean(std::vector<double>{3, 9, 6}, 0.0, 1.0, scratch), 3.0);
  EXPECT_DOUBLE_EQ(ga::trimmed_mean(std::vector<double>{3, 9, 6}, 0.0, 0.75, scratch), 3.0);   // drops floor(2.25)
  EXPECT_DOUBLE_EQ(ga::trimmed_mean(std::vector<double>{3, 9, 6, 12}, 0.0, 0.75, scratch), 3.0);
  EXPECT_TRUE(std::isnan(ga::trimmed_mean(std::vector<double>{}, 0.0, 0.75, scratch)));
}
