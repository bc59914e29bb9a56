#include "greyhound/analysis/changepoint_validation.h"

#include <gtest/gtest.h>

#include <vector>

namespace ga = greyhound::analysis;

TEST(ChangepointValidation, TenPercentBothWays) {
  std::vector<double> scratch;
  const ga::ValidationParams p;  // 10 %, fastest quarter
  const std::vector<double> before(32, 100.0);
  auto check = [&](double after_level) { return ga::validate_change(before, std::vector<double>(6, after_level), p, scratch); };

  const auto up = check(110.0);
  EXPECT_TRUE(up.significant);
  EXPECT_EQ(up.direction, ga::ChangeDirection::kSlowdown);
  EXPECT_DOUBLE_EQ(up.before, 100.0);
  EXPECT_DOUBLE_EQ(up.after, 110.0);
  EXPECT_DOUBLE_EQ(up.ratio, 1.1);
  EXPECT_FALSE(check(109.0).significant);
  // Symmetric: the recovery from a 10 % slowdown (-9.1 % of the slow level) stands too.
  const auto down = check(100.0 / 1.1);
  EXPECT_TRUE(down.significant);
  EXPECT_EQ(down.direction, ga::ChangeDirection::kRecovery);
  EXPECT_FALSE(check(100.0 / 1.09).significant);
}

TEST(ChangepointValidation, FastestQuarterIgnoresInterference) {
  std::vector<double> scratch;
  const std::vector<double> before(40, 100.0);
  // Two GC pauses and a stall in six iterations after a candidate changepoint: not a slowdown.
  const std::vector<double> after{100, 300, 101, 250, 99, 4000};
  ga::ValidationParams fastest_quarter;
  EXPECT_FALSE(ga::validate_change(before, after, fastest_quarter, scratch).significant);
  ga::ValidationParams plain_mean;  // the paper's mean
  plain_mean.trim_low = 0.0;
  plain_mean.trim_high = 0.0;
  EXPECT_TRUE(ga::validate_change(before, after, plain_mean, scratch).significant);
  // A real 1.3x slowdown with the same interference on top still stands.
  const std::vector<double> slow{130, 390, 131, 325, 129, 5200};
  const auto c = ga::validate_change(before, slow, fastest_quarter, scratch);
  EXPECT_TRUE(c.significant);
  EXPECT_DOUBLE_EQ(c.after, 129.5);
}
