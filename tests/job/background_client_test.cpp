// The job client opened with GREYHOUND_JOB_OPEN_BACKGROUND (greyhound/job.h) against a real redis-server on a
// private port: it follows the plan protocol as the synchronous client does, and no call on the training
// thread waits on Redis, whether Redis hangs (SIGSTOP: connections are accepted, nothing is answered), is
// stopped or comes back; what the job wrote meanwhile reaches Redis, in order, and close writes what waits;
// a write Redis refuses is reported once and holds nothing up; a plan is checked against the latest layout.
#include "greyhound/job.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "../support/store_fixture.h"
#include "two_node_layout.h"
#include "store/job_store.h"

namespace greyhound {
namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

class BackgroundClientTest : public greyhound::test_support::StoreFixture {
 protected:
  void SetUp() override {
    StoreFixture::SetUp();
    if (HasFatalFailure()) return;
    char error[256] = "unset";
    ASSERT_EQ(greyhound_job_open_v2("job1", server_->url().c_str(), GREYHOUND_JOB_OPEN_BACKGROUND, &client_, error,
                                    sizeof error),
              GREYHOUND_JOB_OK)
        << error;
  }
  void TearDown() override {
    resume();
    greyhound_job_close_v1(client_);
    StoreFixture::TearDown();
  }
  void hang() {
    ASSERT_EQ(::kill(server_->pid(), SIGSTOP), 0);
    hung_ = true;
  }
  void resume() {
    if (hung_) ::kill(server_->pid(), SIGCONT);
    hung_ = false;
  }
  int publish_layout(greyhound_job_client* c, std::vector<int32_t> mb = {4, 4},
                     uint32_t capabilities = GREYHOUND_JOB_CAP_S2) {
    greyhound_job_layout l = test_support::two_node_c_layout(mb, capabilities);
    l.initial_microbatches = uniform_.data();
    l.initial_microbatches_len = uniform_.size();
    return greyhound_job_publish_layout_v1(c, &l);
  }
  void publish(std::int64_t epoch, std::vector<int> mb) {
    Plan p;
    p.epoch = epoch;
    p.strategy = Strategy::kS2;
    p.microbatches = std::move(mb);
    p.reason = "test plan " + std::to_string(epoch);
    const auto published = store_->publish_plan(p);
    ASSERT_TRUE(published && *published) << "epoch " << epoch;
  }
  // Polls as a training loop does (every 20 ms) until something other than NO_PLAN comes, for up to 5 s.
  int poll_until_news(greyhound_job_plan* p) {
    const double until = now_s() + 5;
    int rc = GREYHOUND_JOB_NO_PLAN;
    while (now_s() < until) {
      rc = greyhound_job_poll_plan_v1(client_, p);
      if (rc != GREYHOUND_JOB_NO_PLAN && rc != GREYHOUND_JOB_ERR_UNAVAILABLE) return rc;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return rc;
  }
  // The acknowledgement `rank` has in the store (epoch 0: none yet), waiting up to 5 s for `epoch`.
  std::int64_t acked_epoch(int rank, std::int64_t epoch) {
    const double until = now_s() + 5;
    std::int64_t seen = 0;
    while (now_s() < until) {
      auto acks = store_->plan_acks();
      seen = 0;
      if (acks) {
        for (const auto& a : *acks) {
          if (a.value && a.value->rank == rank) seen = a.value->epoch;
        }
      }
      if (seen == epoch) return seen;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return seen;
  }

  greyhound_job_client* client_ = nullptr;
  bool hung_ = false;
  const std::vector<int32_t> uniform_ = {4, 4};
};

TEST_F(BackgroundClientTest, FollowsThePlanProtocolAsTheSynchronousClientDoes) {
  greyhound_job_plan p{};
  EXPECT_EQ(greyhound_job_poll_plan_v1(client_, &p), GREYHOUND_JOB_ERR_INVALID);  // nothing to check against yet
  EXPECT_STREQ(greyhound_job_last_error_v1(client_), "no layout published yet: plans cannot be checked");
  std::vector<int32_t> bad = {4};
  EXPECT_EQ(publish_layout(client_, bad), GREYHOUND_JOB_ERR_INVALID);  // checked at once, as before
  ASSERT_EQ(publish_layout(client_), GREYHOUND_JOB_OK);
  EXPECT_EQ(greyhound_job_ack_v1(client_, 0, 0, 1, GREYHOUND_JOB_ACK_APPLIED, ""), GREYHOUND_JOB_ERR_INVALID);
  EXPECT_STREQ(greyhound_job_last_error_v1(client_), "ack: epoch must be within 1..2^53");
  char err[64] = "";
  greyhound_job_client* other = nullptr;
  EXPECT_EQ(greyhound_job_open_v2("job1", "", 1u << 5, &other, err, sizeof err), GREYHOUND_JOB_ERR_INVALID);
  EXPECT_EQ(other, nullptr);
  EXPECT_STREQ(err, "flags: unknown bits");

  // The layout reaches Redis.
  const double until = now_s() + 5;
  while (now_s() < until) {
    auto l = store_->layout();
    if (l && *l) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  auto l = store_->layout();
  ASSERT_TRUE(l && *l);
  EXPECT_EQ((*l)->microbatches, (std::vector<int>{4, 4}));

  // A planted plan at epoch 1000 with a wrong total is turned down; the master's next plan, at epoch 1, is new.
  publish(1000, {5, 5});
  ASSERT_EQ(poll_until_news(&p), GREYHOUND_JOB_PLAN_REJECTED);
  EXPECT_EQ(p.epoch, 1000);
  EXPECT_NE(std::string(p.verdict), "");
  EXPECT_EQ(greyhound_job_ack_v1(client_, 0, 1000, 7, GREYHOUND_JOB_ACK_REJECTED, p.verdict), GREYHOUND_JOB_OK);
  publish(1, {5, 3});
  ASSERT_EQ(poll_until_news(&p), GREYHOUND_JOB_OK) << greyhound_job_last_error_v1(client_);
  EXPECT_EQ(p.epoch, 1);
  EXPECT_EQ(std::vector<int>(p.microbatches, p.microbatches + p.microbatches_len), (std::vector<int>{5, 3}));
  greyhound_job_plan last{};
  ASSERT_EQ(greyhound_job_last_plan_v1(client_, &last), GREYHOUND_JOB_OK);
  EXPECT_EQ(last.epoch, 1);
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_EQ(greyhound_job_ack_v2(client_, rank, 1, 8, GREYHOUND_JOB_ACK_APPLIED, "switched", 0.001), GREYHOUND_JOB_OK);
  }
  for (int rank = 0; rank < 4; ++rank) EXPECT_EQ(acked_epoch(rank, 1), 1) << "rank " << rank;
  // Nothing new: NO_PLAN, however often it is asked.
  ASSERT_EQ(publish_layout(client_, {5, 3}), GREYHOUND_JOB_OK);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(greyhound_job_poll_plan_v1(client_, &p), GREYHOUND_JOB_NO_PLAN);
  // The revert, judged against the layout just published.
  Plan revert;
  revert.epoch = 2;
  revert.strategy = Strategy::kS2;
  revert.action = PlanAction::kRevert;
  revert.microbatches = {4, 4};
  ASSERT_TRUE(store_->publish_plan(revert));
  ASSERT_EQ(poll_until_news(&p), GREYHOUND_JOB_OK) << greyhound_job_last_error_v1(client_);
  EXPECT_EQ(p.epoch, 2);
  EXPECT_EQ(p.action, GREYHOUND_JOB_ACTION_REVERT);
}

TEST_F(BackgroundClientTest, ARedisThatHangsOrStopsNeverHoldsTheTrainingThread) {
  ASSERT_EQ(publish_layout(client_), GREYHOUND_JOB_OK);
  // The synchronous client beside it, on the same hung Redis, shows what each call would have cost.
  greyhound_job_client* sync = nullptr;
  ASSERT_EQ(greyhound_job_open_v1("job1", server_->url().c_str(), &sync, nullptr, 0), GREYHOUND_JOB_OK);
  ASSERT_EQ(publish_layout(sync), GREYHOUND_JOB_OK);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the background layout written

  hang();
  greyhound_job_plan p{};
  double t = now_s();
  EXPECT_EQ(greyhound_job_poll_plan_v1(sync, &p), GREYHOUND_JOB_ERR_UNAVAILABLE);
  const double sync_poll_s = now_s() - t;
  EXPECT_GE(sync_poll_s, 0.25);  // its command timeout (300 ms)
  greyhound_job_close_v1(sync);

  // Ten seconds of a training loop at 50 ms per iteration: rank 0 publishes its layout, polls and every rank
  // acknowledges; 3 s in, Redis comes back for 1 s, then is stopped outright for 3 s, then restarted.
  double slowest_s = 0;
  int unavailable = 0;
  std::int64_t epoch = 0;
  const double start = now_s();
  bool resumed = false, stopped = false, restarted = false;
  while (now_s() - start < 8.0) {
    const double at = now_s() - start;
    if (!resumed && at >= 3.0) {
      resume();
      resumed = true;
    }
    if (!stopped && at >= 4.0) {
      server_->stop();
      stopped = true;
    }
    if (!restarted && at >= 7.0) {
      std::string err;
      ASSERT_TRUE(server_->restart(&err)) << err;
      restarted = true;
    }
    ++epoch;
    t = now_s();
    EXPECT_EQ(publish_layout(client_), GREYHOUND_JOB_OK);
    const int rc = greyhound_job_poll_plan_v1(client_, &p);
    EXPECT_TRUE(rc == GREYHOUND_JOB_NO_PLAN || rc == GREYHOUND_JOB_ERR_UNAVAILABLE) << rc;
    if (rc == GREYHOUND_JOB_ERR_UNAVAILABLE) {
      ++unavailable;
      EXPECT_NE(std::string(greyhound_job_last_error_v1(client_)), "");
    }
    for (int rank = 0; rank < 4; ++rank) {
      EXPECT_EQ(greyhound_job_ack_v1(client_, rank, epoch, epoch, GREYHOUND_JOB_ACK_APPLIED, ""), GREYHOUND_JOB_OK);
    }
    slowest_s = std::max(slowest_s, now_s() - t);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  // A call that waited on Redis would take at least a connect (200 ms) or command (300 ms) timeout; these only
  // move data in memory.
  EXPECT_LT(slowest_s, 0.15) << "slowest iteration's calls; a synchronous poll took " << sync_poll_s << " s";
  EXPECT_GT(unavailable, 0);  // Redis's absence was reported, not waited for

  // Redis back: what was queued arrives, in order (each rank's newest epoch is the last one written), and a
  // plan published now is read.
  for (int rank = 0; rank < 4; ++rank) EXPECT_EQ(acked_epoch(rank, epoch), epoch) << "rank " << rank;
  publish(epoch + 1, {5, 3});
  ASSERT_EQ(poll_until_news(&p), GREYHOUND_JOB_OK) << greyhound_job_last_error_v1(client_);
  EXPECT_EQ(p.epoch, epoch + 1);
}

TEST_F(BackgroundClientTest, CloseWritesWhatWaitsAsSoonAsRedisIsBack) {
  ASSERT_EQ(publish_layout(client_), GREYHOUND_JOB_OK);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  server_->stop();
  ASSERT_EQ(greyhound_job_ack_v1(client_, 2, 5, 40, GREYHOUND_JOB_ACK_APPLIED, "before close"), GREYHOUND_JOB_OK);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // tried and failed: the client backs off
  std::string err;
  ASSERT_TRUE(server_->restart(&err)) << err;
  greyhound_job_close_v1(client_);  // at once: within the backoff, yet written
  client_ = nullptr;
  EXPECT_EQ(acked_epoch(2, 5), 5);
}

TEST_F(BackgroundClientTest, AWriteRedisRefusesIsReportedOnceAndHoldsNothingUp) {
  ASSERT_EQ(publish_layout(client_), GREYHOUND_JOB_OK);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  raw({"SET", "gh:v1:{job1}:plan:acks", "not a hash"});  // every acknowledgement is refused (WRONGTYPE)
  ASSERT_EQ(greyhound_job_ack_v1(client_, 0, 3, 1, GREYHOUND_JOB_ACK_APPLIED, ""), GREYHOUND_JOB_OK);
  publish(1, {5, 3});
  greyhound_job_plan p{};
  int refused = 0, plans = 0;
  const double until = now_s() + 5;
  while (now_s() < until && (plans == 0 || refused == 0)) {
    const int rc = greyhound_job_poll_plan_v1(client_, &p);
    if (rc == GREYHOUND_JOB_ERR_REFUSED) {
      ++refused;
      EXPECT_NE(std::string(greyhound_job_last_error_v1(client_)).find("WRONGTYPE"), std::string::npos)
          << greyhound_job_last_error_v1(client_);
    }
    if (rc == GREYHOUND_JOB_OK) ++plans;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (int i = 0; i < 15; ++i) {  // and not again: dropped, not retried
    EXPECT_NE(greyhound_job_poll_plan_v1(client_, &p), GREYHOUND_JOB_ERR_REFUSED);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(refused, 1);  // reported once
  EXPECT_EQ(plans, 1);    // and the plan was read all the same
  EXPECT_EQ(p.epoch, 1);
}

TEST_F(BackgroundClientTest, APlanJudgedAgainstAnOlderLayoutIsCheckedAgainstTheLatest) {
  ASSERT_EQ(publish_layout(client_), GREYHOUND_JOB_OK);  // S2 advertised
  publish(1, {5, 3});
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // read and judged: it waits to be taken
  ASSERT_EQ(publish_layout(client_, {4, 4}, /*capabilities=*/0), GREYHOUND_JOB_OK);  // S2 withdrawn
  greyhound_job_plan p{};
  EXPECT_EQ(greyhound_job_poll_plan_v1(client_, &p), GREYHOUND_JOB_PLAN_UNSUPPORTED);
  EXPECT_EQ(p.epoch, 1);
  EXPECT_NE(std::string(p.verdict), "");
  greyhound_job_plan last{};
  EXPECT_EQ(greyhound_job_last_plan_v1(client_, &last), GREYHOUND_JOB_NO_PLAN);
}

}  // namespace
}  // namespace greyhound
