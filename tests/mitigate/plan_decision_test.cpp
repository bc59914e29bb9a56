// Strategy names are part of the plan format the master publishes: pin them.
#include "greyhound/mitigate/plan_decision.h"

#include <gtest/gtest.h>

namespace greyhound::mitigate {
namespace {

TEST(Strategy, NamesRoundTrip) {
  EXPECT_EQ(strategy_name(Strategy::kS1Ignore), "S1");
  EXPECT_EQ(strategy_name(Strategy::kS2Microbatches), "S2");
  EXPECT_EQ(strategy_name(Strategy::kS3Topology), "S3");
  EXPECT_EQ(strategy_name(Strategy::kS4Restart), "S4");
  for (Strategy s : {Strategy::kS1Ignore, Strategy::kS2Microbatches, Strategy::kS3Topology, Strategy::kS4Restart}) {
    EXPECT_EQ(strategy_from_name(strategy_name(s)), s);
  }
  EXPECT_EQ(strategy_from_name("S5"), std::nullopt);
  EXPECT_EQ(strategy_from_name("s1"), std::nullopt);
  EXPECT_EQ(static_cast<int>(Strategy::kS3Topology), 3);  // levels are ordered by overhead
}

}  // namespace
}  // namespace greyhound::mitigate
