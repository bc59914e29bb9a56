#include "daemon/pace.h"

#include <gtest/gtest.h>

#include <limits>
#include <set>

namespace greyhound::master {
namespace {

constexpr std::int64_t kT0 = 1'800'000'000'000;  // a wall time, ms

IterationUpdate iteration(int rank, std::int64_t end_unix_ms, double iter_ms = 500) {
  IterationUpdate u;
  u.rank = rank;
  u.index = 10;
  u.iter_ms = iter_ms;
  u.t_s = 5.0;
  u.t_unix_ms = end_unix_ms;
  return u;
}

TEST(Pace, NoReadingIsStale) {
  EXPECT_TRUE(pace_stale(std::nullopt, kT0));
  EXPECT_TRUE(pace_stale(iteration(0, 0), kT0));
}

TEST(Pace, AReadingGoesStaleAfterTwoSecondsOrFourIterations) {
  EXPECT_FALSE(pace_stale(iteration(0, kT0), kT0 + 2000));
  EXPECT_TRUE(pace_stale(iteration(0, kT0), kT0 + 2001));
  // A job with 5 s iterations: its last one ended 15 s ago is not stale, just over 20 s ago is.
  EXPECT_FALSE(pace_stale(iteration(0, kT0, 5000), kT0 + 15000));
  EXPECT_TRUE(pace_stale(iteration(0, kT0, 5000), kT0 + 20001));
  // A reading stamped after now (another host's clock ahead) is fresh; a nonsense iteration time counts as none.
  EXPECT_FALSE(pace_stale(iteration(0, kT0 + 500), kT0));
  EXPECT_TRUE(pace_stale(iteration(0, kT0 + kPaceFutureMs + 1), kT0));  // not believed
  EXPECT_TRUE(pace_stale(iteration(0, kT0, std::numeric_limits<double>::quiet_NaN()), kT0 + 2001));
  EXPECT_TRUE(pace_stale(iteration(0, kT0, -1e9), kT0 + 2001));
}

TEST(Pace, CandidatesSpreadOverTheJobAndLeaveTheCurrentRankOut) {
  std::vector<int> ranks;
  for (int r = 0; r < 16; ++r) ranks.push_back(r);
  EXPECT_EQ(pace_candidates(ranks, 0, 4), (std::vector<int>{4, 8, 12}));
  EXPECT_EQ(pace_candidates(ranks, 5, 4), (std::vector<int>{0, 4, 8, 12}));
  EXPECT_EQ(pace_candidates({0, 1, 2}, 1, 32), (std::vector<int>{0, 2}));
  EXPECT_TRUE(pace_candidates({}, 0, 32).empty());
  // Searches that found nothing shift the spread by one rank each, within one stride (4 here).
  EXPECT_EQ(pace_candidates(ranks, 0, 4, 1), (std::vector<int>{1, 5, 9, 13}));
  EXPECT_EQ(pace_candidates(ranks, 0, 4, 3), (std::vector<int>{3, 7, 11, 15}));
  EXPECT_EQ(pace_candidates(ranks, 0, 4, 4), (std::vector<int>{4, 8, 12}));
  std::set<int> seen;  // every rank within a stride's worth of searches
  for (std::size_t k = 0; k < 4; ++k) {
    for (int r : pace_candidates(ranks, 0, 4, k)) seen.insert(r);
  }
  EXPECT_EQ(seen.size(), 15u);
  EXPECT_EQ(pace_candidates({0, 1, 2, 3, 4}, -1, 2, 7), (std::vector<int>{1, 3}));  // 5 ranks, stride 2
  EXPECT_TRUE(pace_candidates(ranks, 0, 0).empty());
  std::vector<int> big;
  for (int r = 0; r < 10000; ++r) big.push_back(r);
  const auto c = pace_candidates(big, 0);
  EXPECT_EQ(c.size(), kPaceCandidates - 1);
  EXPECT_EQ(c.front(), 312);
  EXPECT_LT(c.back(), 10000);
}

TEST(Pace, TakesTheFreshestCandidateOnlyWhenItIsFreshAndNewer) {
  const std::int64_t now = kT0 + 10000;
  const auto stalled = iteration(0, kT0);  // rank 0's newest iteration ended 10 s ago
  const std::vector<IterationUpdate> read{iteration(4, now - 3000), iteration(8, now - 400), iteration(12, now - 900)};
  const auto p = fresher_pace(stalled, read, now);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->rank, 8);
  // Nothing fresh: keep the current rank.
  EXPECT_FALSE(fresher_pace(stalled, {iteration(4, now - 3000)}, now));
  EXPECT_FALSE(fresher_pace(stalled, {}, now));
  // With no reading at all from the current rank, any fresh one.
  EXPECT_EQ(fresher_pace(std::nullopt, read, now)->rank, 8);
  // A current reading as fresh as the best candidate stays.
  EXPECT_FALSE(fresher_pace(iteration(0, now - 400), read, now));
  // A candidate stamped far in the future is not believed.
  EXPECT_FALSE(fresher_pace(stalled, {iteration(4, now + kPaceFutureMs + 1)}, now));
}

TEST(Pace, SearchesThatFindNothingBackOffToThirtySeconds) {
  PaceSearch s;
  EXPECT_TRUE(s.due(100.0));  // the first search: at once
  std::vector<double> waits;
  double t = 100.0;
  for (int k = 0; k < 7; ++k) {
    s.started(t);
    s.missed();
    double next = t;
    while (!s.due(next)) next += 0.5;
    waits.push_back(next - t);
    t = next;
  }
  EXPECT_EQ(waits, (std::vector<double>{1, 2, 4, 8, 16, 30, 30}));
  EXPECT_EQ(s.misses(), 7u);
  // A fresh pace starts the waits over, yet the next search still waits its 30 s from the last one.
  s.started(t);
  s.reset();
  EXPECT_EQ(s.misses(), 0u);
  EXPECT_FALSE(s.due(t + 29.5));
  EXPECT_TRUE(s.due(t + 30));
  s.started(t + 30);
  EXPECT_FALSE(s.due(t + 30.5));
  EXPECT_TRUE(s.due(t + 31));
}

}  // namespace
}  // namespace greyhound::master
