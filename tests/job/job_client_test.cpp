// The job client's C API (greyhound/job.h) against a real redis-server started here (private port, temp dir):
// what it writes is read back with the job store, what the master publishes is read, checked and acked.
#include "greyhound/job.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "../support/store_fixture.h"
#include "two_node_layout.h"
#include "store/job_store.h"
#include "store/keys.h"

namespace greyhound {
namespace {

class JobClientTest : public greyhound::test_support::StoreFixture {
 protected:
  void SetUp() override {
    StoreFixture::SetUp();
    if (HasFatalFailure()) return;
    char error[256] = "unset";
    ASSERT_EQ(greyhound_job_open_v1("job1", server_->url().c_str(), &client_, error, sizeof error), GREYHOUND_JOB_OK)
        << error;
    EXPECT_STREQ(error, "");
  }
  void TearDown() override {
    greyhound_job_close_v1(client_);
    StoreFixture::TearDown();
  }
  // TP 1 x DP 2 x PP 2, 4 micro-batches per replica, S2 advertised.
  int publish_layout(std::vector<int32_t> mb = {4, 4}) {
    greyhound_job_layout l = test_support::two_node_c_layout(mb, GREYHOUND_JOB_CAP_S2);
    l.initial_microbatches = uniform_.data();
    l.initial_microbatches_len = uniform_.size();
    return greyhound_job_publish_layout_v1(client_, &l);
  }
  // TP 1 x DP 2 x PP 2 on two nodes of two GPUs, 4 and 4 micro-batches (in uniform_, which it points to).
  greyhound_job_layout two_nodes(uint32_t capabilities) { return test_support::two_node_c_layout(uniform_, capabilities); }
  // `latest_only`: written over the latest plan key alone (an epoch already published cannot be again).
  void run_split_under_lease(int lease_ms);
  void publish(std::int64_t epoch, const std::string& strategy, std::vector<int> mb, bool latest_only = false) {
    Plan p;
    p.epoch = epoch;
    p.strategy = *parse_strategy(strategy);
    p.microbatches = std::move(mb);
    p.reason = "test plan " + std::to_string(epoch);
    p.predicted_iteration_s = 0.25;
    if (latest_only) {
      raw({"SET", store::keys::plan("job1"), to_json(p).dump()});
      return;
    }
    const auto published = store_->publish_plan(p);
    ASSERT_TRUE(published) << published.error();
    ASSERT_TRUE(*published) << "epoch " << epoch << " is taken";
  }
  std::vector<int> vec(const int32_t* p, size_t n) { return std::vector<int>(p, p + n); }

  greyhound_job_client* client_ = nullptr;
  const std::vector<int32_t> uniform_ = {4, 4};
};

TEST_F(JobClientTest, PublishesTheLayoutAndCapabilities) {
  ASSERT_EQ(publish_layout(), GREYHOUND_JOB_OK) << greyhound_job_last_error_v1(client_);
  auto l = store_->layout();
  ASSERT_TRUE(l) << l.error();
  ASSERT_TRUE(*l);
  EXPECT_EQ((*l)->tp, 1);
  EXPECT_EQ((*l)->dp, 2);
  EXPECT_EQ((*l)->pp, 2);
  EXPECT_EQ((*l)->world, 4);
  EXPECT_EQ((*l)->microbatches, (std::vector<int>{4, 4}));
  EXPECT_EQ((*l)->initial_microbatches, (std::vector<int>{4, 4}));
  EXPECT_EQ((*l)->capabilities, (std::vector<std::string>{"S2"}));
  EXPECT_EQ((*l)->gpus_per_node, 2);
  EXPECT_GT((*l)->t_unix_ms, 0);
}

TEST_F(JobClientTest, TheJobsCostEstimatesGoWithEveryLayout) {
  ASSERT_EQ(greyhound_job_set_cost_estimate_v1(client_, GREYHOUND_JOB_S3, 0.012), GREYHOUND_JOB_OK);
  ASSERT_EQ(greyhound_job_set_cost_estimate_v1(client_, GREYHOUND_JOB_S4, 240), GREYHOUND_JOB_OK);
  EXPECT_EQ(greyhound_job_set_cost_estimate_v1(client_, GREYHOUND_JOB_S2, 1), GREYHOUND_JOB_ERR_INVALID);
  EXPECT_STREQ(greyhound_job_last_error_v1(client_), "strategy: only GREYHOUND_JOB_S3 and GREYHOUND_JOB_S4 have estimates");
  EXPECT_EQ(greyhound_job_set_cost_estimate_v1(client_, GREYHOUND_JOB_S3, -1), GREYHOUND_JOB_ERR_INVALID);
  EXPECT_EQ(greyhound_job_set_cost_estimate_v1(client_, GREYHOUND_JOB_S3, std::numeric_limits<double>::quiet_NaN()),
            GREYHOUND_JOB_ERR_INVALID);
  EXPECT_EQ(greyhound_job_set_cost_estimate_v1(client_, GREYHOUND_JOB_S4, 1e9), GREYHOUND_JOB_ERR_INVALID);
  EXPECT_EQ(greyhound_job_set_cost_estimate_v1(nullptr, GREYHOUND_JOB_S3, 1), GREYHOUND_JOB_ERR_INVALID);
  ASSERT_EQ(publish_layout(), GREYHOUND_JOB_OK) << greyhound_job_last_error_v1(client_);
  auto l = store_->layout();
  ASSERT_TRUE(l && *l);
  EXPECT_DOUBLE_EQ((*l)->s3_estimate_s, 0.012);  // the refused calls changed nothing
  EXPECT_DOUBLE_EQ((*l)->s4_estimate_s, 240);
  ASSERT_EQ(greyhound_job_set_cost_estimate_v1(client_, GREYHOUND_JOB_S3, 0), GREYHOUND_JOB_OK);  // withdrawn
  ASSERT_EQ(publish_layout(), GREYHOUND_JOB_OK);
  l = store_->layout();
  ASSERT_TRUE(l && *l);
  EXPECT_DOUBLE_EQ((*l)->s3_estimate_s, 0);
  EXPECT_DOUBLE_EQ((*l)->s4_estimate_s, 240);
}

TEST_F(JobClientTest, TheMultipleTheScheduleNeedsGoesWithEveryLayoutAndPlansKeepIt) {
  EXPECT_EQ(greyhound_job_set_microbatch_multiple_v1(client_, -1), GREYHOUND_JOB_ERR_INVALID);
  EXPECT_STREQ(greyhound_job_last_error_v1(client_), "multiple: must be from 0 (not said) to 65536");
  EXPECT_EQ(greyhound_job_set_microbatch_multiple_v1(client_, 65537), GREYHOUND_JOB_ERR_INVALID);
  EXPECT_EQ(greyhound_job_set_microbatch_multiple_v1(nullptr, 1), GREYHOUND_JOB_ERR_INVALID);
  ASSERT_EQ(publish_layout(), GREYHOUND_JOB_OK) << greyhound_job_last_error_v1(client_);
  auto l = store_->layout();
  ASSERT_TRUE(l && *l);
  EXPECT_EQ((*l)->microbatch_multiple, 0);  // not said, the refused calls changed nothing
  // An interleaved schedule on PP 2: a plan of odd counts is rejected with the reason.
  ASSERT_EQ(greyhound_job_set_microbatch_multiple_v1(client_, 2), GREYHOUND_JOB_OK);
  ASSERT_EQ(publish_layout(), GREYHOUND_JOB_OK) << greyhound_job_last_error_v1(client_);
  l = store_->layout();
  ASSERT_TRUE(l && *l);
  EXPECT_EQ((*l)->microbatch_multiple, 2);
  publish(1, "S2", {5, 3});
  greyhound_job_plan p{};
  EXPECT_EQ(greyhound_job_poll_plan_v1(client_, &p), GREYHOUND_JOB_PLAN_REJECTED);
  EXPECT_STREQ(p.verdict, "microbatches[0]: 5 is not a multiple of 2, which the job's pipeline schedule needs");
  publish(2, "S2", {6, 2});
  EXPECT_EQ(greyhound_job_poll_plan_v1(client_, &p), GREYHOUND_JOB_OK) << greyhound_job_last_error_v1(client_);
  // A layout whose counts the multiple does not divide is refused.
  EXPECT_EQ(publish_layout({5, 3}), GREYHOUND_JOB_ERR_INVALID);
  EXPECT_NE(std::string(greyhound_job_last_error_v1(client_)).find("not a multiple of microbatch_multiple 2"),
            std::string::npos);
  // 1: any count (1F1B without interleaving).
  ASSERT_EQ(greyhound_job_set_microbatch_multiple_v1(client_, 1), GREYHOUND_JOB_OK);
  ASSERT_EQ(publish_layout({5, 3}), GREYHOUND_JOB_OK) << greyhound_job_last_error_v1(client_);
  l = store_->layout();
  ASSERT_TRUE(l && *l);
  EXPECT_EQ((*l)->microbatch_multiple, 1);
  EXPECT_EQ((*l)->microbatches, (std::vector<int>{5, 3}));
}

TEST_F(JobClientTest, ReadsANewPlanOnceAndAcksAreReadBack) {
  greyhound_job_plan p{};
  EXPECT_EQ(greyhound_job_poll_plan_v1(client_, &p), GREYHOUND_JOB_ERR_INVALID);  // no layout yet
  ASSERT_EQ(publish_layout(), GREYHOUND_JOB_OK);
  EXPECT_EQ(greyhound_job_poll_plan_v1(client_, &p), GREYHOUND_JOB_NO_PLAN);
  publish(1, "S2", {6, 2});
  ASSERT_EQ(greyhound_job_poll_plan_v1(client_, &p), GREYHOUND_JOB_OK) << greyhound_job_last_error_v1(client_);
  EXPECT_EQ(p.epoch, 1);
  EXPECT_EQ(p.strategy, GREYHOUND_JOB_S2);
  EXPECT_EQ(p.action, GREYHOUND_JOB_ACTION_APPLY);
  EXPECT_EQ(vec(p.microbatches, p.microbatches_len), (std::vector<int>{6, 2}));
  EXPECT_EQ(p.placement_len, 0u);
  EXPECT_DOUBLE_EQ(p.predicted_iteration_s, 0.25);
  EXPECT_STREQ(p.reason, "test plan 1");
  EXPECT_STREQ(p.verdict, "");
  EXPECT_EQ(greyhound_job_poll_plan_v1(client_, &p), GREYHOUND_JOB_NO_PLAN);  // the same plan is not new

  for (int r = 0; r < 4; ++r) {
    ASSERT_EQ(greyhound_job_ack_v1(client_, r, 1, 17, GREYHOUND_JOB_ACK_APPLIED, nullptr), GREYHOUND_JOB_OK);
  }
  EXPECT_EQ(greyhound_job_ack_v1(client_, 0, 1, 17, 7, "x"), GREYHOUND_JOB_ERR_INVALID);
  EXPECT_EQ(greyhound_job_ack_v1(client_, 0, 0, 17, GREYHOUND_JOB_ACK_APPLIED, "x"), GREYHOUND_JOB_ERR_INVALID);
  ASSERT_EQ(greyhound_job_ack_v1(client_, 3, 1, 17, GREYHOUND_JOB_ACK_REJECTED, "no room"), GREYHOUND_JOB_OK);
  auto acks = store_->plan_acks();
  ASSERT_TRUE(acks) << acks.error();
  ASSERT_EQ(acks->size(), 4u);
  for (const auto& a : *acks) {
    ASSERT_TRUE(a.value) << a.error;
    EXPECT_EQ(a.value->epoch, 1);
    EXPECT_EQ(a.value->iteration, 17);
    EXPECT_EQ(a.value->status, a.value->rank == 3 ? AckStatus::kRejected : AckStatus::kApplied);
    EXPECT_EQ(a.value->detail, a.value->rank == 3 ? "no room" : "");
  }
}

// S3 through the C API: the layout names the placement in force (v2), an S3 plan's placement is decoded and
// checked against it, and the ack carries what applying it cost.
TEST_F(JobClientTest, TheLayoutNamesThePlacementAndAcksCarryTheirCost) {
  const greyhound_job_layout l = two_nodes(GREYHOUND_JOB_CAP_S2 | GREYHOUND_JOB_CAP_S3);
  // Launch ranks 1 and 2 trade roles (dp 1, pp 0) and (dp 0, pp 1).
  const greyhound_job_placement moved[] = {{0, 0, 0, 0}, {1, 0, 0, 1}, {2, 0, 1, 0}, {3, 0, 1, 1}};
  ASSERT_EQ(greyhound_job_publish_layout_v2(client_, &l, moved, 4), GREYHOUND_JOB_OK) << greyhound_job_last_error_v1(client_);
  auto read = store_->layout();
  ASSERT_TRUE(read && *read);
  EXPECT_EQ((*read)->capabilities, (std::vector<std::string>{"S2", "S3"}));
  EXPECT_EQ((*read)->placement, (std::vector<PlacementEntry>{{0, 0, 0, 0}, {1, 0, 0, 1}, {2, 0, 1, 0}, {3, 0, 1, 1}}));
  const greyhound_job_placement twice[] = {{0, 0, 0, 0}, {0, 0, 0, 1}, {2, 0, 1, 0}, {3, 0, 1, 1}};
  EXPECT_EQ(greyhound_job_publish_layout_v2(client_, &l, twice, 4), GREYHOUND_JOB_ERR_INVALID);
  EXPECT_STREQ(greyhound_job_last_error_v1(client_), "layout: placement[1]: rank 0 placed twice");
  EXPECT_EQ(greyhound_job_publish_layout_v2(client_, &l, nullptr, 4), GREYHOUND_JOB_ERR_INVALID);

  Plan s3;
  s3.epoch = 1;
  s3.strategy = Strategy::kS3;
  s3.placement = nlohmann::json::array();
  for (int r = 0; r < 4; ++r) s3.placement.push_back({{"rank", r}, {"tp", 0}, {"dp", r % 2}, {"pp", r / 2}});
  ASSERT_TRUE(store_->publish_plan(s3));
  greyhound_job_plan p{};
  ASSERT_EQ(greyhound_job_poll_plan_v1(client_, &p), GREYHOUND_JOB_OK) << greyhound_job_last_error_v1(client_);
  ASSERT_EQ(p.placement_len, 4u);
  EXPECT_EQ(p.placement[1].rank, 1);
  EXPECT_EQ(p.placement[1].dp, 1);
  EXPECT_EQ(p.placement[1].pp, 0);

  ASSERT_EQ(greyhound_job_ack_v2(client_, 1, 1, 9, GREYHOUND_JOB_ACK_APPLIED, "switched", 0.042), GREYHOUND_JOB_OK);
  EXPECT_EQ(greyhound_job_ack_v2(client_, 1, 1, 9, GREYHOUND_JOB_ACK_APPLIED, "", -1.0), GREYHOUND_JOB_ERR_INVALID);
  EXPECT_EQ(greyhound_job_ack_v2(client_, 1, 1, 9, GREYHOUND_JOB_ACK_APPLIED, "", std::numeric_limits<double>::infinity()), GREYHOUND_JOB_ERR_INVALID);
  auto acks = store_->plan_acks();
  ASSERT_TRUE(acks);
  ASSERT_EQ(acks->size(), 1u);
  ASSERT_TRUE((*acks)[0].value);
  EXPECT_DOUBLE_EQ((*acks)[0].value->apply_s, 0.042);
  EXPECT_EQ((*acks)[0].value->detail, "switched");
}

TEST_F(JobClientTest, AcksAndReasonsTheMasterWouldRejectAreRefusedHere) {
  const std::string long_text(kMaxTextBytes + 1, 'x');
  EXPECT_EQ(greyhound_job_ack_v1(client_, 0, 1, 17, GREYHOUND_JOB_ACK_APPLIED, long_text.c_str()), GREYHOUND_JOB_ERR_INVALID);
  EXPECT_NE(std::string(greyhound_job_last_error_v1(client_)).find("longer than 4096"), std::string::npos);
  EXPECT_EQ(greyhound_job_ack_v1(client_, 0, 1, 17, GREYHOUND_JOB_ACK_APPLIED, "bad \xff byte"), GREYHOUND_JOB_ERR_INVALID);
  EXPECT_NE(std::string(greyhound_job_last_error_v1(client_)).find("UTF-8"), std::string::npos);
  EXPECT_EQ(greyhound_job_ack_v1(client_, 0, 1, 17, GREYHOUND_JOB_ACK_APPLIED, "caf\xc3\xa9"), GREYHOUND_JOB_OK);
  const int nodes[] = {1};
  EXPECT_EQ(greyhound_job_request_restart_v1(client_, 0, 0, long_text.c_str(), nodes, 1, nullptr, 0),
            GREYHOUND_JOB_ERR_INVALID);
  auto acks = store_->plan_acks();
  ASSERT_TRUE(acks);
  ASSERT_EQ(acks->size(), 1u);
  EXPECT_TRUE((*acks)[0].value) << (*acks)[0].error;
}

// A job restarted (a new client, as a new process would have) does not take the plan its ranks have
// already acknowledged as new.
TEST_F(JobClientTest, ARestartedJobStartsAfterTheEpochItsRanksAcknowledged) {
  ASSERT_EQ(publish_layout(), GREYHOUND_JOB_OK);
  publish(3, "S2", {6, 2});
  greyhound_job_plan p{};
  ASSERT_EQ(greyhound_job_poll_plan_v1(client_, &p), GREYHOUND_JOB_OK);
  ASSERT_EQ(greyhound_job_ack_v1(client_, 0, 3, 10, GREYHOUND_JOB_ACK_APPLIED, nullptr), GREYHOUND_JOB_OK);
  greyhound_job_client* again = nullptr;
  char err[256] = "";
  ASSERT_EQ(greyhound_job_open_v1("job1", server_->url().c_str(), &again, err, sizeof err), GREYHOUND_JOB_OK) << err;
  std::swap(again, client_);
  ASSERT_EQ(publish_layout(), GREYHOUND_JOB_OK);
  EXPECT_EQ(greyhound_job_poll_plan_v1(client_, &p), GREYHOUND_JOB_NO_PLAN);
  publish(4, "S2", {5, 3});
  ASSERT_EQ(greyhound_job_poll_plan_v1(client_, &p), GREYHOUND_JOB_OK);
  EXPECT_EQ(p.epoch, 4);
  greyhound_job_close_v1(again);
}

TEST_F(JobClientTest, RejectsEachBadPlanOnceWithItsReasonAndKeepsTheLastGoodOne) {
  ASSERT_EQ(publish_layout(), GREYHOUND_JOB_OK);
  greyhound_job_plan p{};
  EXPECT_EQ(greyhound_job_last_plan_v1(client_, &p), GREYHOUND_JOB_NO_PLAN);
  publish(1, "S2", {6, 2});
  ASSERT_EQ(greyhound_job_poll_plan_v1(client_, &p), GREYHOUND_JOB_OK);

  struct Case {
    std::int64_t epoch;
    std::string strategy;
    std::vector<int> mb;
    int status;
    std::string reason;
  };
  const std::vector<Case> cases = {
      {2, "S2", {3, 3, 2}, GREYHOUND_JOB_PLAN_REJECTED, "microbatches: 3 entries for 2 DP replicas"},
      {3, "S2", {6, 4}, GREYHOUND_JOB_PLAN_REJECTED,
       "microbatches: total 10 differs from the job's global batch of 8 micro-batches"},
      {4, "S3", {}, GREYHOUND_JOB_PLAN_UNSUPPORTED, "strategy S3 is not among this job's capabilities [S2]"},
  };
  for (const auto& c : cases) {
    publish(c.epoch, c.strategy, c.mb);
    EXPECT_EQ(greyhound_job_poll_plan_v1(client_, &p), c.status) << c.epoch;
    EXPECT_EQ(p.epoch, c.epoch);
    EXPECT_EQ(p.verdict, c.reason);
    EXPECT_EQ(greyhound_job_last_error_v1(client_), c.reason);
    EXPECT_EQ(greyhound_job_poll_plan_v1(client_, &p), GREYHOUND_JOB_NO_PLAN) << "reported once: " << c.epoch;
  }
  // An epoch turned down is answered once, whatever its plan says later.
  publish(3, "S2", {5, 3}, /*latest_only=*/true);
  EXPECT_EQ(greyhound_job_poll_plan_v1(client_, &p), GREYHOUND_JOB_NO_PLAN);
  // An entry below 1 never parses as a plan: rejected under the epoch it names (newer than the last plan taken
  // and not answered yet), so that the job can acknowledge it, and reported once; one naming an epoch answered
  // already is rejected without one.
  raw({"SET", store::keys::plan("job1"), R"({"epoch":5,"strategy":"S2","microbatches":[8,0]})"});
  EXPECT_EQ(greyhound_job_poll_plan_v1(client_, &p), GREYHOUND_JOB_PLAN_REJECTED);
  EXPECT_EQ(p.epoch, 5);
  EXPECT_EQ(std::string(p.verdict), "gh:v1:{job1}:plan: microbatches: every entry must be >= 1");
  EXPECT_EQ(greyhound_job_poll_plan_v1(client_, &p), GREYHOUND_JOB_NO_PLAN);
  raw({"SET", store::keys::plan("job1"), R"({"epoch":6,"strategy":"S2","microbatches":[8,0]})"});  // same defect
  EXPECT_EQ(greyhound_job_poll_plan_v1(client_, &p), GREYHOUND_JOB_PLAN_REJECTED);
  EXPECT_EQ(p.epoch, 6);
  EXPECT_EQ(greyhound_job_poll_plan_v1(client_, &p), GREYHOUND_JOB_NO_PLAN);
  raw({"SET", store::keys::plan("job1"), R"({"epoch":5,"strategy":"S9"})"});
  EXPECT_EQ(greyhound_job_poll_plan_v1(client_, &p), GREYHOUND_JOB_PLAN_REJECTED);
  EXPECT_EQ(p.epoch, 0);
  EXPECT_EQ(greyhound_job_poll_plan_v1(client_, &p), GREYHOUND_JOB_NO_PLAN);
  // Malformed JSON names no epoch at all.
  raw({"SET", store::keys::plan("job1"), R"({"epoch":6,"strategy":)"});
  EXPECT_EQ(greyhound_job_poll_plan_v1(client_, &p), GREYHOUND_JOB_PLAN_REJECTED);
  EXPECT_EQ(p.epoch, 0);
  EXPECT_EQ(std::string(p.verdict).rfind("gh:v1:{job1}:plan: ", 0), 0u) << p.verdict;
  EXPECT_EQ(greyhound_job_poll_plan_v1(client_, &p), GREYHOUND_JOB_NO_PLAN);

  ASSERT_EQ(greyhound_job_last_plan_v1(client_, &p), GREYHOUND_JOB_OK);
  EXPECT_EQ(p.epoch, 1);
  EXPECT_EQ(vec(p.microbatches, p.microbatches_len), (std::vector<int>{6, 2}));

  // After the job applied plan 1 and re-published its layout, a revert is checked against the new allocation.
  ASSERT_EQ(publish_layout({6, 2}), GREYHOUND_JOB_OK);
  publish(7, "S1", {4, 4});
  ASSERT_EQ(greyhound_job_poll_plan_v1(client_, &p), GREYHOUND_JOB_OK) << greyhound_job_last_error_v1(client_);
  EXPECT_EQ(p.strategy, GREYHOUND_JOB_S1);
  ASSERT_EQ(greyhound_job_last_plan_v1(client_, &p), GREYHOUND_JOB_OK);
  EXPECT_EQ(p.epoch, 7);
  // Older than the last plan taken: stale, reported once.
  publish(2, "S2", {5, 3}, /*latest_only=*/true);
  EXPECT_EQ(greyhound_job_poll_plan_v1(client_, &p), GREYHOUND_JOB_PLAN_STALE);
  EXPECT_EQ(greyhound_job_last_error_v1(client_), std::string("epoch 2 is older than the last plan taken (7)"));
  EXPECT_EQ(greyhound_job_poll_plan_v1(client_, &p), GREYHOUND_JOB_NO_PLAN);
}

// Epoch poisoning: a plan planted at a high epoch that the job turns down (a wrong total) advances nothing,
// so the master's next plan, at its own next epoch, is taken; so it is by a job restarted after the job's
// ranks acknowledged the planted plan as rejected. Out-of-range epochs are refused by the writer too.
TEST_F(JobClientTest, APlanTurnedDownAtAHighEpochLeavesTheMastersNextPlanNew) {
  ASSERT_EQ(publish_layout(), GREYHOUND_JOB_OK);
  greyhound_job_plan p{};
  publish(1000, "S2", {6, 4}, /*latest_only=*/true);
  ASSERT_EQ(greyhound_job_poll_plan_v1(client_, &p), GREYHOUND_JOB_PLAN_REJECTED);
  EXPECT_EQ(p.epoch, 1000);
  for (int rank = 0; rank < 4; ++rank) {
    ASSERT_EQ(greyhound_job_ack_v1(client_, rank, 1000, 5, GREYHOUND_JOB_ACK_REJECTED, "wrong total"), GREYHOUND_JOB_OK);
  }
  EXPECT_EQ(greyhound_job_poll_plan_v1(client_, &p), GREYHOUND_JOB_NO_PLAN);
  greyhound_job_client* restarted = nullptr;
  char err[256] = "";
  ASSERT_EQ(greyhound_job_open_v1("job1", server_->url().c_str(), &restarted, err, sizeof err), GREYHOUND_JOB_OK) << err;
  greyhound_job_layout l = two_nodes(GREYHOUND_JOB_CAP_S2);
  ASSERT_EQ(greyhound_job_publish_layout_v1(restarted, &l), GREYHOUND_JOB_OK);
  EXPECT_EQ(greyhound_job_poll_plan_v1(restarted, &p), GREYHOUND_JOB_NO_PLAN) << "answered before the restart";
  publish(1, "S2", {6, 2});  // the master's next plan, at its own counter
  for (greyhound_job_client* c : {client_, restarted}) {
    ASSERT_EQ(greyhound_job_poll_plan_v1(c, &p), GREYHOUND_JOB_OK) << greyhound_job_last_error_v1(c);
    EXPECT_EQ(p.epoch, 1);
    EXPECT_EQ(vec(p.microbatches, p.microbatches_len), (std::vector<int>{6, 2}));
  }
  greyhound_job_close_v1(restarted);
  // A plan beyond any epoch a master publishes (2^52), even one that fits: turned down, and it
  // raises nothing: the master's next plan is still new.
  publish((std::int64_t{1} << 52) + 1, "S2", {4, 4}, /*latest_only=*/true);
  ASSERT_EQ(greyhound_job_poll_plan_v1(client_, &p), GREYHOUND_JOB_PLAN_REJECTED);
  EXPECT_STREQ(p.verdict, "epoch 4503599627370497 is beyond any a master publishes (2^52)");
  publish(2, "S2", {5, 3});
  ASSERT_EQ(greyhound_job_poll_plan_v1(client_, &p), GREYHOUND_JOB_OK) << greyhound_job_last_error_v1(client_);
  EXPECT_EQ(p.epoch, 2);
  const std::int64_t too_far = (std::int64_t{1} << 53) + 1;
  EXPECT_EQ(greyhound_job_ack_v1(client_, 0, too_far, 5, GREYHOUND_JOB_ACK_APPLIED, nullptr), GREYHOUND_JOB_ERR_INVALID);
  EXPECT_EQ(greyhound_job_ack_v1(client_, 0, 1, too_far, GREYHOUND_JOB_ACK_APPLIED, nullptr), GREYHOUND_JOB_ERR_INVALID);
  const int32_t nodes[] = {1};
  EXPECT_EQ(greyhound_job_request_restart_v1(client_, 0, INT64_MAX, "r", nodes, 1, nullptr, 0), GREYHOUND_JOB_ERR_INVALID);
  EXPECT_NE(std::string(greyhound_job_last_error_v1(client_)).find("within 0..2^53"), std::string::npos);
}

// Job names Redis keys cannot carry are refused with the reason, never rewritten (two names cut or rewritten
// alike would share one job's keys); a tp x dp x pp that overflows is refused before it is multiplied.
TEST_F(JobClientTest, BadJobNamesAndOverflowingLayoutsAreRefused) {
  for (const std::string& name : {std::string("a{b}:c"), std::string(64, 'x'), std::string("")}) {
    greyhound_job_client* c = nullptr;
    char err[256] = "";
    EXPECT_EQ(greyhound_job_open_v1(name.c_str(), server_->url().c_str(), &c, err, sizeof err), GREYHOUND_JOB_ERR_INVALID)
        << name;
    EXPECT_EQ(c, nullptr);
    EXPECT_NE(std::string(err).find("the job name"), std::string::npos) << err;
  }
  greyhound_job_layout l = two_nodes(GREYHOUND_JOB_CAP_S2);
  l.tp = 1718039348;
  l.dp = 2;
  l.pp = 2147418113;
  EXPECT_EQ(greyhound_job_publish_layout_v1(client_, &l), GREYHOUND_JOB_ERR_INVALID);
  EXPECT_NE(std::string(greyhound_job_last_error_v1(client_)).find("too large"), std::string::npos);
  l = two_nodes(GREYHOUND_JOB_CAP_S2);
  l.tp = 1 << 20;
  l.pp = 1 << 20;  // each within range, their product not
  EXPECT_EQ(greyhound_job_publish_layout_v1(client_, &l), GREYHOUND_JOB_ERR_INVALID);
}

TEST_F(JobClientTest, RaisesARestartRequest) {
  const int32_t nodes[] = {1};
  const int32_t ranks[] = {2, 3};
  ASSERT_EQ(publish_layout(), GREYHOUND_JOB_OK);
  ASSERT_EQ(greyhound_job_request_restart_v1(client_, 0, 4, "node 1 is slow", nodes, 1, ranks, 2), GREYHOUND_JOB_OK)
      << greyhound_job_last_error_v1(client_);
  auto r = store_->restart_request();
  ASSERT_TRUE(r) << r.error();
  ASSERT_TRUE(*r);
  EXPECT_EQ((*r)->rank, 0);
  EXPECT_EQ((*r)->epoch, 4);
  EXPECT_EQ((*r)->reason, "node 1 is slow");
  EXPECT_EQ((*r)->exclude_nodes, (std::vector<int>{1}));
  EXPECT_EQ((*r)->exclude_ranks, (std::vector<int>{2, 3}));
  // The job is going down: its layout goes with the request (the restarted job publishes its own).
  auto l = store_->layout();
  ASSERT_TRUE(l) << l.error();
  EXPECT_FALSE(*l);
  EXPECT_EQ(greyhound_job_request_restart_v1(client_, 0, 4, nullptr, nullptr, 1, nullptr, 0), GREYHOUND_JOB_ERR_INVALID);
}

// S3 by restart: the layout says so, the request carries the placement, the restarted job reads it back and
// publishes it as the placement it started with.
TEST_F(JobClientTest, AnS3RestartCarriesItsPlacementToTheRestartedJob) {
  const greyhound_job_layout l =
      two_nodes(GREYHOUND_JOB_CAP_S2 | GREYHOUND_JOB_CAP_S3_BY_RESTART | GREYHOUND_JOB_CAP_S4);
  size_t n = 99;
  greyhound_job_placement read[4] = {};
  ASSERT_EQ(greyhound_job_restart_placement_v1(client_, read, 4, &n), GREYHOUND_JOB_OK);  // no request yet
  EXPECT_EQ(n, 0u);
  ASSERT_EQ(greyhound_job_publish_layout_v1(client_, &l), GREYHOUND_JOB_OK) << greyhound_job_last_error_v1(client_);
  auto layout = store_->layout();
  ASSERT_TRUE(layout && *layout);
  EXPECT_EQ((*layout)->capabilities, (std::vector<std::string>{"S2", "S3", "S4"}));
  EXPECT_TRUE((*layout)->s3_by_restart);
  EXPECT_TRUE((*layout)->initial_placement.empty());

  const greyhound_job_placement moved[] = {{0, 0, 0, 0}, {1, 0, 0, 1}, {2, 0, 1, 0}, {3, 0, 1, 1}};
  const greyhound_job_placement twice[] = {{0, 0, 0, 0}, {0, 0, 0, 1}, {2, 0, 1, 0}, {3, 0, 1, 1}};
  const int32_t nodes[] = {1};
  EXPECT_EQ(greyhound_job_request_restart_v2(client_, 0, 3, "S3", nullptr, 0, nullptr, 0, twice, 4), GREYHOUND_JOB_ERR_INVALID);
  EXPECT_STREQ(greyhound_job_last_error_v1(client_), "restart: placement[1]: rank 0 placed twice");
  EXPECT_EQ(greyhound_job_request_restart_v2(client_, 0, 3, "S3", nullptr, 0, nullptr, 0, moved, 3), GREYHOUND_JOB_ERR_INVALID);
  EXPECT_EQ(greyhound_job_request_restart_v2(client_, 0, 3, "S3", nodes, 1, nullptr, 0, moved, 4), GREYHOUND_JOB_ERR_INVALID);
  EXPECT_EQ(greyhound_job_request_restart_v2(client_, 0, 3, "S3", nullptr, 0, nullptr, 0, nullptr, 4), GREYHOUND_JOB_ERR_INVALID);
  ASSERT_EQ(greyhound_job_request_restart_v2(client_, 0, 3, "S3 plan 3", nullptr, 0, nullptr, 0, moved, 4), GREYHOUND_JOB_OK)
      << greyhound_job_last_error_v1(client_);
  auto r = store_->restart_request();
  ASSERT_TRUE(r && *r);
  EXPECT_EQ((*r)->epoch, 3);
  EXPECT_EQ((*r)->placement, (std::vector<PlacementEntry>{{0, 0, 0, 0}, {1, 0, 0, 1}, {2, 0, 1, 0}, {3, 0, 1, 1}}));
  auto gone = store_->layout();
  ASSERT_TRUE(gone);
  EXPECT_FALSE(*gone);  // the job is going down

  // The restarted job (a new client) reads the placement back, and publishes it as the one it started with.
  greyhound_job_client* back = nullptr;
  char error[256];
  ASSERT_EQ(greyhound_job_open_v1("job1", server_->url().c_str(), &back, error, sizeof error), GREYHOUND_JOB_OK) << error;
  EXPECT_EQ(greyhound_job_restart_placement_v1(back, read, 2, &n), GREYHOUND_JOB_ERR_INVALID);
  EXPECT_EQ(n, 4u);
  ASSERT_EQ(greyhound_job_restart_placement_v1(back, read, 4, &n), GREYHOUND_JOB_OK) << greyhound_job_last_error_v1(back);
  ASSERT_EQ(n, 4u);
  EXPECT_EQ(read[1].rank, 1);
  EXPECT_EQ(read[1].dp, 0);
  EXPECT_EQ(read[1].pp, 1);
  ASSERT_EQ(greyhound_job_set_initial_placement_v1(back, read, n), GREYHOUND_JOB_OK);
  ASSERT_EQ(greyhound_job_publish_layout_v2(back, &l, read, n), GREYHOUND_JOB_OK) << greyhound_job_last_error_v1(back);
  layout = store_->layout();
  ASSERT_TRUE(layout && *layout);
  EXPECT_EQ((*layout)->initial_placement, (*layout)->placement);
  EXPECT_EQ((*layout)->placement, (*r)->placement);
  EXPECT_FALSE(departs_from_original(**layout));  // nothing in force to revert
  greyhound_job_close_v1(back);

  // An S4 restart carries no placement: the job after it takes Megatron's again.
  ASSERT_EQ(greyhound_job_request_restart_v2(client_, 0, 4, "S4", nodes, 1, nullptr, 0, nullptr, 0), GREYHOUND_JOB_OK);
  ASSERT_EQ(greyhound_job_restart_placement_v1(client_, read, 4, &n), GREYHOUND_JOB_OK);
  EXPECT_EQ(n, 0u);
  raw({"SET", store::keys::restart("job1"), "{\"rank\":0,\"placement\":[{\"rank\":-1}]}"});
  EXPECT_EQ(greyhound_job_restart_placement_v1(client_, read, 4, &n), GREYHOUND_JOB_ERR_INVALID);
  EXPECT_NE(std::string(greyhound_job_last_error_v1(client_)).find("placement[0]"), std::string::npos)
      << greyhound_job_last_error_v1(client_);
  EXPECT_EQ(n, 0u);
}

TEST_F(JobClientTest, AnAbsentRedisIsUnavailableNotFatal) {
  server_->kill_hard();
  EXPECT_EQ(publish_layout(), GREYHOUND_JOB_ERR_UNAVAILABLE);
  EXPECT_STRNE(greyhound_job_last_error_v1(client_), "");
  greyhound_job_plan p{};
  EXPECT_EQ(greyhound_job_poll_plan_v1(client_, &p), GREYHOUND_JOB_ERR_UNAVAILABLE);  // the layout was kept
  EXPECT_EQ(greyhound_job_ack_v1(client_, 0, 1, 3, GREYHOUND_JOB_ACK_APPLIED, ""), GREYHOUND_JOB_ERR_UNAVAILABLE);
}

// The plan lease: a job running a remedy that saw a master hold the lease, and then finds it lapsed, publishes
// the revert to its original configuration itself (epoch after the newest it saw) and returns it as a plan.
TEST_F(JobClientTest, ARemedyOutlivingEveryMasterIsRevertedByTheJob) {
  ASSERT_EQ(publish_layout(), GREYHOUND_JOB_OK);
  publish(1, "S2", {6, 2});
  greyhound_job_plan p{};
  ASSERT_EQ(greyhound_job_poll_plan_v1(client_, &p), GREYHOUND_JOB_OK);
  ASSERT_EQ(publish_layout({6, 2}), GREYHOUND_JOB_OK);  // applied: the layout names the split in force

  // No master ever held the lease (a plan from elsewhere): nothing is undone, however long it stands.
  EXPECT_EQ(greyhound_job_poll_plan_v1(client_, &p), GREYHOUND_JOB_NO_PLAN);
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  EXPECT_EQ(greyhound_job_poll_plan_v1(client_, &p), GREYHOUND_JOB_NO_PLAN);
  EXPECT_EQ((*store_->latest_plan())->epoch, 1);

  // A master holds it (seen at the next look, a second after the last), then is gone for the lease's length:
  // the first look that finds it lapsed starts the grace (a quarter of the lease, 375 ms; looks now come
  // every half of it), a look after it reverts.
  ASSERT_TRUE(store_->hold_plan_lease("run-a", 1500));
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  EXPECT_EQ(greyhound_job_poll_plan_v1(client_, &p), GREYHOUND_JOB_NO_PLAN);
  EXPECT_EQ(greyhound_job_poll_plan_v1(client_, &p), GREYHOUND_JOB_NO_PLAN);
  std::this_thread::sleep_for(std::chrono::milliseconds(650));  // 1.75 s after the lease was taken
  EXPECT_EQ(greyhound_job_poll_plan_v1(client_, &p), GREYHOUND_JOB_NO_PLAN);  // lapsed: the grace begins
  EXPECT_EQ((*store_->latest_plan())->epoch, 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  ASSERT_EQ(greyhound_job_poll_plan_v1(client_, &p), GREYHOUND_JOB_OK) << greyhound_job_last_error_v1(client_);
  EXPECT_EQ(p.epoch, 2);
  EXPECT_EQ(p.strategy, GREYHOUND_JOB_S1);
  EXPECT_EQ(p.action, GREYHOUND_JOB_ACTION_REVERT);
  EXPECT_EQ(vec(p.microbatches, p.microbatches_len), (std::vector<int>{4, 4}));
  EXPECT_NE(std::string(p.reason).find("plan lease lapsed"), std::string::npos) << p.reason;
  auto stored = store_->plan(2);
  ASSERT_TRUE(stored && *stored);
  EXPECT_EQ((*stored)->action, PlanAction::kRevert);
  EXPECT_EQ((*store_->latest_plan())->epoch, 2);
  ASSERT_EQ(publish_layout({4, 4}), GREYHOUND_JOB_OK);  // applied: the original configuration again

  // Back on the original configuration, a lapsed lease changes nothing.
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  EXPECT_EQ(greyhound_job_poll_plan_v1(client_, &p), GREYHOUND_JOB_NO_PLAN);
  EXPECT_EQ((*store_->latest_plan())->epoch, 2);
}

// A master holding the plan lease (`lease_ms` long) publishes the split [6,2] at epoch 1; the job takes it
// and runs it (its layout names it).
void JobClientTest::run_split_under_lease(int lease_ms) {
  ASSERT_EQ(publish_layout(), GREYHOUND_JOB_OK);
  ASSERT_TRUE(store_->hold_plan_lease("run-a", lease_ms));
  publish(1, "S2", {6, 2});
  greyhound_job_plan p{};
  ASSERT_EQ(greyhound_job_poll_plan_v1(client_, &p), GREYHOUND_JOB_OK);
  ASSERT_EQ(publish_layout({6, 2}), GREYHOUND_JOB_OK);
}

// A master that dies right after publishing: the job sees it holding the lease when it takes the plan (before
// it runs the plan and republishes its layout), so the lapse that follows is one the job acts on.
TEST_F(JobClientTest, AMasterDeadRightAfterPublishingIsSeenHoldingTheLeaseAtThePlan) {
  ASSERT_EQ(publish_layout(), GREYHOUND_JOB_OK);
  ASSERT_TRUE(store_->hold_plan_lease("run-a", 1200));
  publish(1, "S2", {6, 2});
  greyhound_job_plan p{};
  ASSERT_EQ(greyhound_job_poll_plan_v1(client_, &p), GREYHOUND_JOB_OK);
  std::this_thread::sleep_for(std::chrono::milliseconds(1300));  // lapsed before the job runs the plan
  ASSERT_EQ(publish_layout({6, 2}), GREYHOUND_JOB_OK);
  EXPECT_EQ(greyhound_job_poll_plan_v1(client_, &p), GREYHOUND_JOB_NO_PLAN);  // the first look: the grace
  std::this_thread::sleep_for(std::chrono::milliseconds(450));  // past the grace (300 ms)
  ASSERT_EQ(greyhound_job_poll_plan_v1(client_, &p), GREYHOUND_JOB_OK) << greyhound_job_last_error_v1(client_);
  EXPECT_EQ(p.epoch, 2);
  EXPECT_EQ(p.action, GREYHOUND_JOB_ACTION_REVERT);
}

// A plan taken while no lease is held (its publisher holds none: an older master) is not the job's to undo,
// even after an earlier plan's master was seen holding the lease.
TEST_F(JobClientTest, APlanPublishedWithoutALeaseIsNotUndoneByTheJob) {
  run_split_under_lease(1200);  // a grace of 300 ms
  greyhound_job_plan p{};
  EXPECT_EQ(greyhound_job_poll_plan_v1(client_, &p), GREYHOUND_JOB_NO_PLAN);  // a look: held
  raw({"DEL", store::keys::plan_lease("job1")});
  publish(2, "S2", {5, 3});
  std::this_thread::sleep_for(std::chrono::milliseconds(250));  // a look (every 150 ms): lapsed
  ASSERT_EQ(greyhound_job_poll_plan_v1(client_, &p), GREYHOUND_JOB_OK);
  EXPECT_EQ(p.epoch, 2);
  ASSERT_EQ(publish_layout({5, 3}), GREYHOUND_JOB_OK);
  for (int i = 0; i < 2; ++i) {  // looks past the grace: no revert of plan 2
    std::this_thread::sleep_for(std::chrono::milliseconds(450));
    EXPECT_EQ(greyhound_job_poll_plan_v1(client_, &p), GREYHOUND_JOB_NO_PLAN);
  }
  EXPECT_EQ((*store_->latest_plan())->epoch, 2);
}

// A revert Redis refuses to write (out of memory here; a read-only replica alike) is said once, with why, and
// written at a later look once Redis takes writes again.
TEST_F(JobClientTest, ARevertRedisRefusesIsReportedOnceAndWrittenLater) {
  run_split_under_lease(1000);  // a grace of 250 ms
  greyhound_job_plan p{};
  raw({"CONFIG", "SET", "maxmemory-policy", "noeviction"});
  raw({"CONFIG", "SET", "maxmemory", "1"});
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));  // lapsed
  EXPECT_EQ(greyhound_job_poll_plan_v1(client_, &p), GREYHOUND_JOB_NO_PLAN);  // the grace begins
  std::this_thread::sleep_for(std::chrono::milliseconds(400));  // past it (250 ms)
  EXPECT_EQ(greyhound_job_poll_plan_v1(client_, &p), GREYHOUND_JOB_ERR_REFUSED);
  const std::string why = greyhound_job_last_error_v1(client_);
  EXPECT_NE(why.find("the revert could not be written"), std::string::npos) << why;
  EXPECT_NE(why.find("OOM"), std::string::npos) << why;
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // another look (every 125 ms), refused again
  EXPECT_EQ(greyhound_job_poll_plan_v1(client_, &p), GREYHOUND_JOB_NO_PLAN);  // said once
  raw({"CONFIG", "SET", "maxmemory", "0"});
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ASSERT_EQ(greyhound_job_poll_plan_v1(client_, &p), GREYHOUND_JOB_OK) << greyhound_job_last_error_v1(client_);
  EXPECT_EQ(p.epoch, 2);
  EXPECT_EQ(p.action, GREYHOUND_JOB_ACTION_REVERT);
}

// While the lease is held, or when a master took the next epoch first, the job publishes nothing of its own.
TEST_F(JobClientTest, AHeldLeaseOrATakenEpochKeepsTheJobsHandsOff) {
  ASSERT_EQ(publish_layout(), GREYHOUND_JOB_OK);
  publish(1, "S2", {6, 2});
  greyhound_job_plan p{};
  ASSERT_EQ(greyhound_job_poll_plan_v1(client_, &p), GREYHOUND_JOB_OK);
  ASSERT_EQ(publish_layout({6, 2}), GREYHOUND_JOB_OK);
  ASSERT_TRUE(store_->hold_plan_lease("run-a", 60000));
  for (int i = 0; i < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1100));
    EXPECT_EQ(greyhound_job_poll_plan_v1(client_, &p), GREYHOUND_JOB_NO_PLAN);
  }
  EXPECT_EQ((*store_->latest_plan())->epoch, 1);
  // The lease gone (deleted), but a master's plan 2 is there first: that is the plan the job gets.
  raw({"DEL", store::keys::plan_lease("job1")});
  publish(2, "S2", {5, 3});
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  ASSERT_EQ(greyhound_job_poll_plan_v1(client_, &p), GREYHOUND_JOB_OK);
  EXPECT_EQ(p.epoch, 2);
  EXPECT_EQ(p.action, GREYHOUND_JOB_ACTION_APPLY);
  EXPECT_EQ(vec(p.microbatches, p.microbatches_len), (std::vector<int>{5, 3}));
  EXPECT_EQ((*store_->latest_plan())->microbatches, (std::vector<int>{5, 3}));
}

}  // namespace
}  // namespace greyhound
