#include "greyhound/analysis/sliding_window_detector.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace ga = greyhound::analysis;

namespace {

std::vector<ga::SlowdownEvent> run(ga::SlidingWindowDetector& det, const std::vector<double>& v) {
  std::vector<ga::SlowdownEvent> events;
  for (std::size_t i = 0; i < v.size(); ++i) {
    const std::size_t before = events.size();
    EXPECT_TRUE(det.push(v[i], events));
    for (std::size_t e = before; e < events.size(); ++e) EXPECT_EQ(events[e].detected_index, i);
  }
  return events;
}

}  // namespace

TEST(SlidingWindowDetector, StepChangesAtEqualLatencyToBocd) {
  std::vector<double> v(250);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = 200.0 * (1.0 + 0.01 * std::sin(1.3 * double(i))) * (i >= 100 && i < 170 ? 1.4 : 1.0);
  ga::SlidingWindowDetector det;
  const auto events = run(det, v);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].direction, ga::ChangeDirection::kSlowdown);
  EXPECT_EQ(events[0].index, 100u);
  EXPECT_EQ(events[0].detected_index, 105u);  // 6 of the last 11 off the running median
  EXPECT_NEAR(events[0].ratio, 1.4, 0.03);
  EXPECT_EQ(events[1].direction, ga::ChangeDirection::kRecovery);
  EXPECT_EQ(events[1].index, 170u);
  EXPECT_EQ(events[1].detected_index, 175u);
}

TEST(SlidingWindowDetector, SpikesDoNotMoveTheMedians) {
  std::vector<double> v(300, 100.0);
  for (std::size_t i = 20; i < v.size(); i += 13) v[i] = 500.0;  // at most one in any 11
  for (std::size_t i = 150; i < 154; ++i) v[i] = 150.0;          // 4 slow + 1 spike: fewer than 6 of 11
  ga::SlidingWindowDetector det;
  EXPECT_TRUE(run(det, v).empty());
}

TEST(SlidingWindowDetector, SlowDriftIsAbsorbedByTheRunningMedian) {
  // The baseline's known weakness (the paper's false negatives): +30 % over 300 iterations is never 10 %
  // off the running median.
  std::vector<double> v(400);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = 100.0 * (1.0 + 0.3 * std::min(1.0, double(i) / 300.0));
  ga::SlidingWindowDetector det;
  EXPECT_TRUE(run(det, v).empty());
}
