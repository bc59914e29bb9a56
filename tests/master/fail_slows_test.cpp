#include "daemon/fail_slows.h"

#include <gtest/gtest.h>

namespace greyhound::master {
namespace {

FailSlow on_rank(std::int64_t id, int rank, Cause cause) {
  FailSlow f;
  f.id = id;
  f.rank = rank;
  f.node = rank / 2;
  f.cause = cause;
  return f;
}

ValidatedReport verdict(const char* cause, int rank) {
  ValidatedReport v;
  v.id = "v1";
  v.cause = cause;
  v.rank = rank;
  v.node = rank / 2;
  return v;
}

TEST(FailSlows, AValidatedGpuSettlesTheCauseOfTheFailSlowsItValidatedOnThatRank) {
  std::vector<FailSlow> open{on_rank(1, 3, Cause::kHost), on_rank(2, 5, Cause::kHost), on_rank(3, 3, Cause::kHost)};
  FailSlow link;
  link.id = 4;
  link.cause = Cause::kCommunication;
  link.link_a = 0;
  link.link_b = 1;
  open.push_back(link);
  // A slow GEMM on rank 3, for fail-slows 1, 2 and 4 (3 was not validated by this pause).
  const auto changed = settle_cause(open, verdict("gpu", 3), {1, 2, 4});
  ASSERT_EQ(changed.size(), 1u);
  EXPECT_EQ(changed[0].id, 1);
  EXPECT_EQ(open[0].cause, Cause::kComputation);
  EXPECT_TRUE(open[0].cause_validated);
  EXPECT_EQ(open[1].cause, Cause::kHost);  // another rank
  EXPECT_FALSE(open[1].cause_validated);
  EXPECT_EQ(open[2].cause, Cause::kHost);  // not validated by it
  EXPECT_EQ(open[3].cause, Cause::kCommunication);
  // A GEMM as fast as its peers': the host. The same cause again is settled without a change.
  std::vector<FailSlow> gpu{on_rank(7, 2, Cause::kComputation)};
  EXPECT_EQ(settle_cause(gpu, verdict("host", 2), {7}).size(), 1u);
  EXPECT_EQ(gpu[0].cause, Cause::kHost);
  std::vector<FailSlow> host{on_rank(8, 2, Cause::kHost)};
  EXPECT_TRUE(settle_cause(host, verdict("host", 2), {8}).empty());
  EXPECT_TRUE(host[0].cause_validated);
  // No verdict on a GPU: nothing settled.
  std::vector<FailSlow> none{on_rank(9, 2, Cause::kHost)};
  EXPECT_TRUE(settle_cause(none, verdict("none", 2), {9}).empty());
  EXPECT_TRUE(settle_cause(none, verdict("link", 2), {9}).empty());
  ValidatedReport aborted = verdict("gpu", 2);
  aborted.aborted = true;
  EXPECT_TRUE(settle_cause(none, aborted, {9}).empty());
  EXPECT_FALSE(none[0].cause_validated);
  EXPECT_EQ(none[0].cause, Cause::kHost);
}

TEST(FailSlows, ASettledCauseIsNotSwappedByALaterProfile) {
  Localisation host;  // the next profile names rank 3's host
  host.cause = Cause::kHost;
  host.culprit = 3;
  host.culprit_node = 1;
  host.step_ms = 500;
  std::int64_t total = 2;
  std::vector<FailSlow> open{on_rank(1, 3, Cause::kComputation), on_rank(2, 3, Cause::kComputation)};
  open[1].id = 2;
  open[1].rank = 3;
  open[0].cause_validated = true;  // a validation measured rank 3's GPU slow
  std::vector<FailSlow> one{open[0]}, other{open[1]};
  track(one, total, host, std::nullopt, 1, 0, 10, true, FailSlowRules{});
  track(other, total, host, std::nullopt, 1, 0, 10, true, FailSlowRules{});
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].cause, Cause::kComputation);  // settled
  ASSERT_EQ(other.size(), 1u);
  EXPECT_EQ(other[0].cause, Cause::kHost);  // not settled: the latest profile's
}

}  // namespace
}  // namespace greyhound::master
