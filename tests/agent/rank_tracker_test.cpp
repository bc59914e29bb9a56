// The agent's per-rank analysis on a synthetic ring: groups learnt from lifecycle records, iterations from
// the call pattern, a slowdown and its recovery, and a period change that restarts the detector.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "agent/rank_tracker.h"
#include "greyhound/ops.h"

namespace greyhound::agent {
namespace {

class RankTrackerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gh-tracker-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    std::string err;
    writer_ = RingWriter::create(dir_, "greyhound.t.3", 1 << 16, RingIdentity{"t", 3, 3}, &err);
    ASSERT_TRUE(writer_) << err;
  }
  void TearDown() override {
    writer_.reset();
    std::system(("rm -rf " + dir_).c_str());
  }
  void put(Op op, std::uint64_t t_ns, std::uint64_t group, std::uint64_t bytes, int peer = -1) {
    RecordPayload p{};
    p.op = static_cast<std::uint8_t>(op);
    p.t_ns = t_ns;
    p.group_id = group;
    p.group_rank = 1;
    p.group_size = 2;
    p.bytes = bytes;
    p.peer = peer;
    p.root = -1;
    writer_->append(p);
  }
  // One iteration of a TP/PP/DP-like pattern of `calls` calls spread over `ms`.
  std::uint64_t iteration(std::uint64_t t, double ms, int calls = 12) {
    const std::uint64_t step = static_cast<std::uint64_t>(ms * 1e6 / calls);
    for (int c = 0; c < calls - 2; ++c) put(Op::kAllReduce, t + c * step, 0xaa, 8192);
    put(Op::kSend, t + (calls - 2) * step, 0xbb, 8192, 0);
    put(Op::kAllReduce, t + (calls - 1) * step, 0xcc, 32768);
    return t + static_cast<std::uint64_t>(ms * 1e6);
  }
  std::string dir_;
  std::unique_ptr<RingWriter> writer_;
};

TEST_F(RankTrackerTest, LearnsGroupsIterationsAndASlowdownWithItsRecovery) {
  std::string err;
  RankTracker tracker(RingReader::open(dir_ + "/greyhound.t.3", &err), analysis::DetectionMethod::kBocdValidated);
  EXPECT_EQ(tracker.rank(), 3);
  put(Op::kCommInitRank, 1, 0xaa, 0);
  std::uint64_t t = 1'000'000;
  for (int i = 0; i < 60; ++i) t = iteration(t, 300.0);
  for (int i = 0; i < 30; ++i) t = iteration(t, 450.0);  // 1.5x
  for (int i = 0; i < 30; ++i) t = iteration(t, 300.0);
  RankObservation obs;
  tracker.poll(0, obs);
  ASSERT_EQ(obs.new_groups.size(), 3u);  // the CommInitRank group, and the two learnt from data calls
  EXPECT_EQ(obs.new_groups[0].group_id, 0xaau);
  EXPECT_EQ(obs.new_groups[0].created_by, "CommInitRank");
  EXPECT_EQ(tracker.period(), 12u);
  ASSERT_GT(obs.iterations.size(), 100u);
  EXPECT_NEAR(obs.iterations[10].iter_ms, 300.0, 0.01);
  ASSERT_EQ(obs.changes.size(), 2u);
  EXPECT_EQ(obs.changes[0].change.direction, analysis::ChangeDirection::kSlowdown);
  EXPECT_NEAR(obs.changes[0].change.ratio, 1.5, 0.02);
  EXPECT_LE(obs.changes[0].change.detected_index - obs.changes[0].change.index, 5u);
  // The onset's start time is the start of the first slow iteration, within one iteration.
  const std::uint64_t slow_start = 1'000'000 + 60ull * 300'000'000ull;
  EXPECT_NEAR(static_cast<double>(obs.changes[0].onset_start_t_ns), static_cast<double>(slow_start), 300e6 * 1.01);
  EXPECT_EQ(obs.changes[1].change.direction, analysis::ChangeDirection::kRecovery);
  EXPECT_EQ(tracker.op_counts().at(0xcc).at("AllReduce:32768"), 120u);
  EXPECT_EQ(tracker.records_read(), 1u + 120u * 12u);
}

TEST_F(RankTrackerTest, APeriodChangeIsNotASlowdown) {
  std::string err;
  RankTracker tracker(RingReader::open(dir_ + "/greyhound.t.3", &err), analysis::DetectionMethod::kBocdValidated);
  std::uint64_t t = 1'000'000;
  for (int i = 0; i < 60; ++i) t = iteration(t, 300.0, 12);
  // A micro-batch re-allocation: more calls per iteration, iterations a little longer.
  for (int i = 0; i < 60; ++i) t = iteration(t, 330.0, 16);
  RankObservation obs;
  tracker.poll(0, obs);
  EXPECT_TRUE(obs.period_changed);
  EXPECT_EQ(tracker.period(), 16u);
  EXPECT_TRUE(obs.changes.empty());
}

// A profile reports the least and greatest of the iterations that ended in its window: equal in a steady
// window, apart in one the pace moved in (what the master's localisation calls an unsteady window).
TEST_F(RankTrackerTest, AProfileReportsTheSpreadOfItsIterations) {
  std::string err;
  RankTracker tracker(RingReader::open(dir_ + "/greyhound.t.3", &err), analysis::DetectionMethod::kBocdValidated);
  std::uint64_t t = 1'000'000;
  for (int i = 0; i < 60; ++i) t = iteration(t, 300.0);
  RankObservation obs;
  tracker.poll(t, obs);
  // Steady: six iterations of 300 ms in the window.
  ASSERT_TRUE(tracker.start_profile(t, t + 1'850'000'000ull, &err)) << err;
  const std::uint64_t until = t + 1'850'000'000ull;
  for (int i = 0; i < 10; ++i) t = iteration(t, 300.0);
  tracker.poll(t, obs);
  auto prof = tracker.finish_profile(t);
  ASSERT_TRUE(prof);
  EXPECT_GE(prof->iterations, 5);
  EXPECT_NEAR(prof->iter_ms_min, 300.0, 0.01);
  EXPECT_NEAR(prof->iter_ms_max, 300.0, 0.01);
  EXPECT_GT(t, until);
  // The pace moves inside the window: three iterations of 300 ms, then of 345.
  ASSERT_TRUE(tracker.start_profile(t, t + 1'950'000'000ull, &err)) << err;
  for (int i = 0; i < 3; ++i) t = iteration(t, 300.0);
  for (int i = 0; i < 8; ++i) t = iteration(t, 345.0);
  tracker.poll(t, obs);
  prof = tracker.finish_profile(t);
  ASSERT_TRUE(prof);
  EXPECT_GE(prof->iterations, 5);
  EXPECT_NEAR(prof->iter_ms_min, 300.0, 0.01);
  EXPECT_NEAR(prof->iter_ms_max, 345.0, 0.01);
  EXPECT_GT(prof->iter_ms, prof->iter_ms_min);
  EXPECT_LT(prof->iter_ms, prof->iter_ms_max);
}

}  // namespace
}  // namespace greyhound::agent
