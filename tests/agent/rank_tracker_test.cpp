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
  // A call's record; its seq.
  std::uint64_t put(Op op, std::uint64_t t_ns, std::uint64_t group, std::uint64_t bytes, int peer = -1) {
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
    return p.seq;
  }
  std::uint64_t call(Op op, std::uint64_t t_ns, std::uint64_t group) { return put(op, t_ns, group, 1 << 20); }
  // The Timing record the hook writes for a call later (its device time).
  void timing(std::uint64_t measured_seq, std::uint64_t t_ns, std::uint64_t group, double ms) {
    RecordPayload p{};
    p.op = static_cast<std::uint8_t>(Op::kTiming);
    p.measured_op = static_cast<std::uint8_t>(Op::kAllReduce);
    p.t_ns = t_ns;
    p.group_id = group;
    p.aux = measured_seq;
    p.dur_ns = static_cast<std::uint64_t>(ms * 1e6);
    p.peer = -1;
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

// A profile counts the device times of the calls that began in its window, whenever their Timing records
// come: a long call at its end (a replica waiting for the others in its gradient all-reduce) is waited for,
// past the window, rather than left out of its group's mean time per call; a call that began before the
// window is not counted though its Timing record comes in it. The wait ends at the grace (one and a half
// iterations) if the record never comes.
TEST_F(RankTrackerTest, AProfileCountsTheCallsThatBeganInItsWindowWheneverTheirDeviceTimesCome) {
  std::string err;
  RankTracker tracker(RingReader::open(dir_ + "/greyhound.t.3", &err), analysis::DetectionMethod::kBocdValidated);
  std::uint64_t t = 1'000'000;
  for (int i = 0; i < 60; ++i) t = iteration(t, 300.0);
  RankObservation obs;
  tracker.poll(t, obs);
  const std::uint64_t ms = 1'000'000;
  const std::uint64_t before = call(Op::kAllReduce, t - 20 * ms, 0xdd);  // began before the window
  const std::uint64_t start = t, until = t + 1000 * ms;
  ASSERT_TRUE(tracker.start_profile(start, until, &err)) << err;
  timing(before, start + 10 * ms, 0xdd, 999.0);
  const std::uint64_t b = call(Op::kAllReduce, start + 100 * ms, 0xdd);
  timing(b, start + 200 * ms, 0xdd, 50.0);
  const std::uint64_t c = call(Op::kAllReduce, until - 10 * ms, 0xdd);  // its device time comes after the end
  tracker.poll(until + 50 * ms, obs);
  EXPECT_FALSE(tracker.finish_profile(until + 50 * ms)) << "reported before the last call's device time came";
  EXPECT_TRUE(tracker.profiling());
  timing(c, until + 300 * ms, 0xdd, 400.0);
  tracker.poll(until + 310 * ms, obs);
  auto prof = tracker.finish_profile(until + 310 * ms);
  ASSERT_TRUE(prof);
  EXPECT_FALSE(tracker.profiling());
  ASSERT_EQ(prof->groups.count(0xdd), 1u);
  EXPECT_EQ(prof->timings, 2u);
  EXPECT_NEAR(prof->window_s, 1.0, 1e-9);
  EXPECT_NEAR(prof->groups.at(0xdd).first, 0.45, 1e-9);   // (50 + 400) ms of a 1 s window
  EXPECT_NEAR(prof->groups.at(0xdd).second, 2.0, 1e-9);   // calls per second
  // A device time that never comes: the report waits one and a half iterations (300 ms each) past the end.
  const std::uint64_t start2 = until + 400 * ms, until2 = start2 + 1000 * ms;
  ASSERT_TRUE(tracker.start_profile(start2, until2, &err)) << err;
  const std::uint64_t d = call(Op::kAllReduce, start2 + 100 * ms, 0xdd);
  timing(d, start2 + 150 * ms, 0xdd, 20.0);
  call(Op::kAllReduce, until2 - 5 * ms, 0xdd);
  tracker.poll(until2 + 10 * ms, obs);
  EXPECT_EQ(profile_grace_ns(300.0), 450 * ms);
  EXPECT_FALSE(tracker.finish_profile(until2 + 440 * ms));
  prof = tracker.finish_profile(until2 + 460 * ms);
  ASSERT_TRUE(prof);
  EXPECT_EQ(prof->timings, 1u);
  EXPECT_NEAR(prof->groups.at(0xdd).first, 0.02, 1e-9);
  // A call the hook could not time (its event pool ran out: timings_dropped) is not waited for.
  const std::uint64_t start3 = until2 + 500 * ms, until3 = start3 + 1000 * ms;
  ASSERT_TRUE(tracker.start_profile(start3, until3, &err)) << err;
  const std::uint64_t e = call(Op::kAllReduce, start3 + 100 * ms, 0xdd);
  timing(e, start3 + 150 * ms, 0xdd, 30.0);
  call(Op::kAllReduce, until3 - 5 * ms, 0xdd);
  writer_->header()->control.timings_dropped.fetch_add(1);
  tracker.poll(until3 + 10 * ms, obs);
  prof = tracker.finish_profile(until3 + 10 * ms);
  ASSERT_TRUE(prof);
  EXPECT_NEAR(prof->groups.at(0xdd).first, 0.03, 1e-9);
  // A call that began in the window and is still running (a blocking one, whose record comes when it
  // returns: the ring's in-call marker shows it) is waited for too.
  const std::uint64_t start4 = until3 + 500 * ms, until4 = start4 + 1000 * ms;
  ASSERT_TRUE(tracker.start_profile(start4, until4, &err)) << err;
  RingInCall& in_call = writer_->header()->in_call;
  in_call.op = static_cast<std::uint32_t>(Op::kAllReduce);
  in_call.enter_ns.store(until4 - 100 * ms);
  tracker.poll(until4 + 10 * ms, obs);
  EXPECT_FALSE(tracker.finish_profile(until4 + 10 * ms));
  in_call.enter_ns.store(0);
  const std::uint64_t f = call(Op::kAllReduce, until4 - 100 * ms, 0xdd);
  tracker.poll(until4 + 200 * ms, obs);
  EXPECT_FALSE(tracker.finish_profile(until4 + 200 * ms));  // its device time is still to come
  timing(f, until4 + 250 * ms, 0xdd, 300.0);
  tracker.poll(until4 + 260 * ms, obs);
  prof = tracker.finish_profile(until4 + 260 * ms);
  ASSERT_TRUE(prof);
  EXPECT_NEAR(prof->groups.at(0xdd).first, 0.3, 1e-9);
  // The grace's bounds.
  EXPECT_EQ(profile_grace_ns(0.0), 1000 * ms);
  EXPECT_EQ(profile_grace_ns(10.0), 250 * ms);
  EXPECT_EQ(profile_grace_ns(60'000.0), 3000 * ms);
}

}  // namespace
}  // namespace greyhound::agent
