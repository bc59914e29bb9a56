#include "daemon/job_clock.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace greyhound::master {
namespace {

constexpr std::int64_t kT0 = 1'800'000'000'000;  // a wall time, ms

TEST(JobClock, HasNoTimeBeforeItsFirstReading) {
  JobClock c;
  EXPECT_FALSE(c.at(kT0));
  EXPECT_FALSE(c.has_reading());
}

TEST(JobClock, CarriesTheReadingForwardOnTheWallClock) {
  JobClock c;
  c.observe(12.5, kT0);
  EXPECT_DOUBLE_EQ(*c.at(kT0), 12.5);
  EXPECT_DOUBLE_EQ(*c.at(kT0 + 2500), 15.0);
}

TEST(JobClock, KeepsTheFreshestReading) {
  JobClock c;
  c.observe(20.0, kT0 + 1000);
  c.observe(18.0, kT0);  // older by wall time: an event read late
  EXPECT_DOUBLE_EQ(*c.at(kT0 + 2000), 21.0);
  c.observe(21.5, kT0 + 1500);  // newer: its job time wins (the job paused for 0.5 s)
  EXPECT_DOUBLE_EQ(*c.at(kT0 + 2000), 22.0);
}

TEST(JobClock, KeepsCountingWhenReadingsStop) {
  // The pacing rank's iterations stop (its agent stalled): the clock goes on from the last one, it does not
  // fall back to an older time.
  JobClock c;
  c.observe(30.0, kT0);
  EXPECT_DOUBLE_EQ(*c.at(kT0 + 60'000), 90.0);
}

TEST(JobClock, NeverGoesBack) {
  JobClock c;
  c.observe(10.0, kT0);
  EXPECT_DOUBLE_EQ(*c.at(kT0 + 1000), 11.0);
  c.observe(10.6, kT0 + 1000);  // a rank running behind the estimate
  EXPECT_DOUBLE_EQ(*c.at(kT0 + 1000), 11.0);
  EXPECT_DOUBLE_EQ(*c.at(kT0 + 1200), 11.0);
  EXPECT_DOUBLE_EQ(*c.at(kT0 + 1600), 11.2);
  // A wall time before the reading (another host's clock ahead): no time since, not negative time.
  c.observe(12.0, kT0 + 5000);
  EXPECT_DOUBLE_EQ(*c.at(kT0 + 4000), 12.0);
}

TEST(JobClock, IgnoresReadingsThatAreNotTimes) {
  JobClock c;
  c.observe(std::numeric_limits<double>::quiet_NaN(), kT0);
  c.observe(std::numeric_limits<double>::infinity(), kT0);
  c.observe(-1.0, kT0);
  c.observe(5.0, 0);
  c.observe(5.0, -kT0);
  EXPECT_FALSE(c.has_reading());
  c.observe(5.0, kT0);
  c.observe(std::numeric_limits<double>::quiet_NaN(), kT0 + 10);
  EXPECT_DOUBLE_EQ(*c.at(kT0 + 1000), 6.0);
}

}  // namespace
}  // namespace greyhound::master
