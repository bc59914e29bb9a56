// The job driver against a real redis-server (private port, temp dir): the plan lease it holds, and what it
// does when the job took a plan epoch itself (docs/redis-keys.md, "Plan lease"). Plans come from an
// operator's requests here (no agents, no events: the driver serves them within a second).
#include "daemon/job_driver.h"
#include "daemon/master.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "../support/store_fixture.h"
#include "store/keys.h"

namespace greyhound::master {
namespace {

class JobDriverTest : public test_support::StoreFixture {
 protected:
  void SetUp() override {
    StoreFixture::SetUp();
    if (HasFatalFailure()) return;
    ASSERT_TRUE(store_->write_layout(two_node_layout()));
    start_driver("run-test");
  }
  // A master's driver for the job (a new one: as after a restart), mitigating, with a plan lease of 2 s.
  void start_driver(const std::string& run_tag) {
    ControllerConfig cfg;
    cfg.mitigate = true;
    cfg.plan_lease_s = 2;
    driver_ = std::make_unique<JobDriver>(*redis_, job_, cfg, run_tag, log_, 64);
  }
  void TearDown() override {
    driver_.reset();
    StoreFixture::TearDown();
  }
  void request(const std::string& id, std::vector<int> mb) {
    OperatorPlanRequest r;
    r.id = id;
    r.action = "apply";
    r.microbatches = std::move(mb);
    r.t_unix_ms = unix_ms_now();
    ASSERT_TRUE(store_->write_operator_plan(r));
  }
  // Ticks (every 50 ms) until the operator's request `id` is answered, or `s` seconds passed.
  std::optional<OperatorPlanReport> answered(const std::string& id, double s = 5) {
    for (int i = 0; i < s * 20; ++i) {
      driver_->tick();
      if (auto a = store_->operator_plan_result(); a && *a && (*a)->id == id) return **a;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return std::nullopt;
  }
  // The job applied plan `epoch`: every rank acknowledges it, the layout names the split in force.
  void apply(std::int64_t epoch, std::vector<int> mb) {
    for (int r = 0; r < 4; ++r) {
      PlanAck ack;
      ack.rank = r;
      ack.epoch = epoch;
      ack.iteration = 10 * epoch;
      ack.status = AckStatus::kApplied;
      ack.t_unix_ms = unix_ms_now();
      ASSERT_TRUE(store_->write_ack(ack));
    }
    JobLayout l = **store_->layout();
    l.microbatches = std::move(mb);
    ASSERT_TRUE(store_->write_layout(l));
  }
  // The job reverts to its original configuration itself at `epoch` (the plan lease lapsed) and applies it.
  void job_reverts(std::int64_t epoch) {
    Plan revert = original_configuration_plan(**store_->layout());
    revert.epoch = epoch;
    revert.reason = "the plan lease lapsed";
    revert.t_unix_ms = unix_ms_now();
    auto written = store_->publish_plan_unleased(revert);
    ASSERT_TRUE(written && *written);
    apply(epoch, {4, 4});
  }
  std::vector<nlohmann::json> plan_events() {
    std::vector<nlohmann::json> out;
    auto entries = store_->read_events("0-0", 1000);
    if (!entries) return out;
    for (const auto& e : *entries) {
      if (e.value && e.value->type == event_type::kPlan) out.push_back(e.value->detail);
    }
    return out;
  }

  EventLog log_{""};
  std::unique_ptr<JobDriver> driver_;
};

TEST_F(JobDriverTest, HoldsThePlanLeaseWhileItServesTheJob) {
  EXPECT_FALSE(*store_->plan_lease_held());
  driver_->tick();
  EXPECT_TRUE(*store_->plan_lease_held());
  auto ttl = redis_->command({"PTTL", store::keys::plan_lease(job_)});
  ASSERT_TRUE(ttl && ttl->type == RedisReply::Type::kInteger);
  EXPECT_GT(ttl->integer, 1500);
  EXPECT_LE(ttl->integer, 2000);
  driver_.reset();  // no master serves the job: the lease lapses after its 2 s
  std::this_thread::sleep_for(std::chrono::milliseconds(2100));
  EXPECT_FALSE(*store_->plan_lease_held());
}

// The job reverted the operator's split while the lease had lapsed (it published epoch 2 itself). The master
// comes back (a new driver, as after a restart): it records that plan's event, late, and its next plan is 3.
TEST_F(JobDriverTest, ARestartedMasterContinuesAfterTheJobsOwnRevert) {
  request("op-1", {6, 2});
  auto a = answered("op-1");
  ASSERT_TRUE(a);
  ASSERT_EQ(a->state, "published") << a->reason;
  EXPECT_EQ(a->epoch, 1);
  apply(1, {6, 2});
  for (int i = 0; i < 3; ++i) driver_->tick();
  driver_.reset();
  redis_->command({"DEL", store::keys::plan_lease(job_)});  // lapsed
  job_reverts(2);

  start_driver("run-test-2");
  request("op-2", {5, 3});
  a = answered("op-2");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->state, "published") << a->reason;
  EXPECT_EQ(a->epoch, 3);
  const auto events = plan_events();
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[1]["epoch"], 2);
  EXPECT_EQ(events[1]["action"], "revert");
  EXPECT_EQ(events[1].value("recorded_late", false), true);
  EXPECT_EQ(events[2]["epoch"], 3);
}

// A restarted master whose job's plan key names no epoch (malformed) while plan:1 and plan:2 exist: each
// epoch it finds taken moves it past that one (before, it proposed the same epoch again for ever, published
// nothing, and kept renewing the lease, so the job never reverted either).
TEST_F(JobDriverTest, AMalformedPlanKeyDoesNotMakeTheMasterProposeATakenEpochForEver) {
  request("op-1", {6, 2});
  auto a = answered("op-1");
  ASSERT_TRUE(a && a->epoch == 1);
  apply(1, {6, 2});
  driver_.reset();
  redis_->command({"DEL", store::keys::plan_lease(job_)});
  job_reverts(2);
  redis_->command({"SET", store::keys::plan(job_), "{not json"});
  redis_->command({"DEL", store::keys::master(job_)});  // no state to start from either

  start_driver("run-test-2");
  request("op-2", {5, 3});
  a = answered("op-2");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->state, "published") << a->reason;
  EXPECT_EQ(a->epoch, 3);
  EXPECT_EQ((*store_->plan(2))->action, PlanAction::kRevert);  // neither earlier plan was overwritten
  EXPECT_EQ((*store_->plan(1))->microbatches, (std::vector<int>{6, 2}));
}

// A plan planted at the highest epoch a reader takes (2^53) before the master starts: continuing from it would
// publish an epoch no job reads, for ever. The master does not continue from an epoch beyond any it reaches
// (2^52), and no writer publishes an epoch a reader refuses.
TEST_F(JobDriverTest, APlantedPlanAtTheTopEpochDoesNotDisableTheMastersPlans) {
  driver_.reset();
  Plan planted;
  planted.epoch = kMaxCount;
  planted.strategy = Strategy::kS2;
  planted.microbatches = {7, 1};
  ASSERT_TRUE(store_->publish_plan(planted));
  ASSERT_EQ((*store_->latest_plan())->epoch, kMaxCount);
  Plan beyond = planted;
  beyond.epoch = kMaxCount + 1;
  auto refused = store_->publish_plan(beyond);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.code(), Errc::kInvalid);
  EXPECT_FALSE(store_->publish_plan_unleased(beyond));
  beyond.epoch = 0;
  EXPECT_FALSE(store_->publish_plan(beyond));

  start_driver("run-test-2");
  request("op-1", {6, 2});
  auto a = answered("op-1");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->state, "published") << a->reason;
  EXPECT_EQ(a->epoch, 1);  // plan:1 is free: the master's own count
  EXPECT_EQ((*store_->latest_plan())->microbatches, (std::vector<int>{6, 2}));
}

// The same while the master lives on, stalled past its lease: the job took epoch 2. The driver notices the
// lapse when it renews the lease, or at the latest when its plan 2 is refused, and publishes 3 instead.
TEST_F(JobDriverTest, AMasterStalledPastItsLeaseContinuesAfterTheJobsOwnRevert) {
  request("op-1", {6, 2});
  auto a = answered("op-1");
  ASSERT_TRUE(a && a->epoch == 1);
  apply(1, {6, 2});
  for (int i = 0; i < 3; ++i) driver_->tick();
  redis_->command({"DEL", store::keys::plan_lease(job_)});
  job_reverts(2);
  request("op-2", {5, 3});  // served at once: the driver does not know it was away (no 2 s passed)
  a = answered("op-2");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->state, "published") << a->reason;
  EXPECT_EQ(a->epoch, 3);
  EXPECT_EQ((*store_->plan(2))->action, PlanAction::kRevert);  // the job's plan stands
  EXPECT_EQ((*store_->latest_plan())->microbatches, (std::vector<int>{5, 3}));
  const auto events = plan_events();
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[1]["epoch"], 2);
  EXPECT_EQ(events[1].value("recorded_late", false), true);

  // Stalled past the lease, during which the job reverted plan 3 itself (epoch 4): at its next step the
  // driver says so and loads the state again, which records the job's plan 4 (late) before it publishes.
  std::this_thread::sleep_for(std::chrono::milliseconds(2100));
  EXPECT_FALSE(*store_->plan_lease_held());
  apply(3, {5, 3});
  job_reverts(4);
  driver_->tick();
  EXPECT_TRUE(*store_->plan_lease_held());
  const auto after = plan_events();
  ASSERT_EQ(after.size(), 4u) << "the reload records the job's plan at once";
  EXPECT_EQ(after[3]["epoch"], 4);
  EXPECT_EQ(after[3].value("recorded_late", false), true);
}

// A master serving every job of a pattern (--jobs) leaves a registered job without a live agent dormant for
// 30 s, unless a master held its plan lease until lately: restarted together with the agents, it must renew
// the lease at once, or the job takes the gap for every master gone and reverts the remedy in force.
class MasterJobsTest : public greyhound::test_support::StoreFixture {};

TEST_F(MasterJobsTest, AJobWhosePlanLeaseIsHeldIsServedBeforeItsAgentsAreBack) {
  raw({"SADD", store::keys::jobs(), "leased", "idle"});
  store::JobStore leased(*redis_, "leased");
  ASSERT_TRUE(leased.hold_plan_lease("run-before", 30000));
  MasterConfig cfg;
  cfg.jobs_pattern = "*";
  cfg.redis = parse_redis_url(server_->url());
  Master m(cfg);
  m.tick();
  EXPECT_NE(m.driver("leased"), nullptr) << "a job with a remedy looked after: served, its lease renewed";
  EXPECT_EQ(m.driver("idle"), nullptr) << "a job of the past: dormant";
}

// The master's HTTP answers come from memory: a request reads nothing from Redis (with Redis hung, it is
// answered at once), and the jobs' statuses are snapshots the loop reads while they are wanted, spaced so that
// even a ranks set planted with 200,000 members (read up to 65,536 without a layout) takes at most a tenth of
// the loop (more than 2.5 s without a reading, where once a second would read again); a snapshot too old is
// not served.
TEST_F(MasterJobsTest, HttpAnswersReadNothingAndTheLoopReadsStatusesBoundedly) {
  MasterConfig cfg;
  cfg.job = job_;
  cfg.redis = parse_redis_url(server_->url());
  Master m(cfg);
  auto get = [&](const std::string& path) {
    HttpRequest r;
    r.method = "GET";
    r.path = path;
    return m.http(r);
  };
  m.tick();
  auto first = get("/status");
  EXPECT_EQ(first.status, 503) << first.body;  // wanted from now on; not read by the request
  EXPECT_NE(first.body.find("is being read: try again in a second"), std::string::npos) << first.body;
  m.tick();
  auto status = get("/status");
  ASSERT_EQ(status.status, 200) << status.body;
  EXPECT_EQ(nlohmann::json::parse(status.body)["job"], job_);

  // Redis hung: answered from memory, none of the 1 s command timeouts of the master's client.
  ASSERT_EQ(::kill(server_->pid(), SIGSTOP), 0);
  const auto t0 = std::chrono::steady_clock::now();
  const auto metrics = get("/metrics");
  const auto again = get("/status");
  const double took_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ::kill(server_->pid(), SIGCONT);
  EXPECT_EQ(metrics.status, 200);
  EXPECT_EQ(again.status, 200);
  EXPECT_LT(took_s, 0.5);
  EXPECT_NE(metrics.body.find("\ngreyhound_master_status_read_seconds "), std::string::npos) << metrics.body;
  // A snapshot the loop has not renewed for 3 s (Redis away, the loop held) is not served as the status.
  std::this_thread::sleep_for(std::chrono::milliseconds(3200));
  EXPECT_EQ(get("/status").status, 503);  // (and /metrics leaves its samples out: the same fresh_status)
  m.tick();
  EXPECT_EQ(get("/status").status, 200);

  // A planted ranks set, the job without a layout: the reading costs what it costs, and the loop reads it
  // again only after ten times that.
  std::vector<std::string> sadd = {"SADD", store::keys::ranks(job_)};
  for (int r = 0; r < 200000; ++r) sadd.push_back(std::to_string(r));
  raw(sadd);
  auto read_s = [&]() {
    const std::string text = get("/metrics").body;
    const std::string name = "\ngreyhound_master_status_read_seconds ";
    const auto at = text.find(name);
    return at == std::string::npos ? -1.0 : std::stod(text.substr(at + name.size()));
  };
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  m.tick();  // due: read
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));  // the /metrics cache
  const double cost = read_s();
  ASSERT_GT(cost, 0);
  const auto t1 = std::chrono::steady_clock::now();
  int ticks = 0;
  while (std::chrono::steady_clock::now() - t1 < std::chrono::milliseconds(std::max(2500, static_cast<int>(cost * 3e3)))) {
    m.tick();
    ++ticks;
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  EXPECT_EQ(read_s(), cost) << "read again within ten times its cost (" << ticks << " ticks)";
  std::printf("status read with 200,000 planted members: %.3f s; not again for %.1f s\n", cost,
              std::max(1.0, cost * 10));
}

// --ha with values planted where only masters write: the job's leader key and the masters' lease.
class MasterHaTest : public JobDriverTest {
 protected:
  MasterConfig ha_config() {
    MasterConfig cfg;
    cfg.job = job_;
    cfg.redis = parse_redis_url(server_->url());
    cfg.ha = true;
    cfg.id = "m0";
    cfg.lease_ms = 1000;
    cfg.controller.mitigate = true;
    return cfg;
  }
  std::string healthz(Master& m) {
    HttpRequest r;
    r.method = "GET";
    r.path = "/healthz";
    return m.http(r).body;
  }
  // Ticks `m` (every 50 ms) until the operator's request `id` is answered, for at most `s` seconds.
  std::optional<OperatorPlanReport> answered_by(Master& m, const std::string& id, double s) {
    for (int i = 0; i < s * 20; ++i) {
      m.tick();
      if (auto a = store_->operator_plan_result(); a && *a && (*a)->id == id) return **a;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return std::nullopt;
  }
  std::int64_t leader_epoch() {
    auto r = redis_->command({"GET", store::keys::leader(job_)});
    return r && !r->is_error() && !r->str.empty() ? std::stoll(r->str) : -1;
  }
  double taken_over(Master& m) {
    HttpRequest r;
    r.method = "GET";
    r.path = "/metrics";
    const std::string text = m.http(r).body;
    const std::string name = "greyhound_master_leader_values_taken_over_total ";
    const auto at = text.find("\n" + name);
    return at == std::string::npos ? -1 : std::stod(text.substr(at + 1 + name.size()));
  }
};

// A leader key planted with a newer epoch while the master leads fenced every write for ever, the lease
// renewed and /healthz ok. Now the master stands down at its first fenced write, raises the epoch counter past
// the planted epoch and leads again at once; planted values that are no epoch (nan, 1e308, negative, 20 digits)
// are taken over at the next write, and counted.
TEST_F(MasterHaTest, APlantedLeaderKeyNeitherFreezesNorFencesTheMasterForLong) {
  Master m(ha_config());
  request("op-1", {6, 2});
  auto a = answered_by(m, "op-1", 5);
  ASSERT_TRUE(a) << "the master leads and answers";
  EXPECT_EQ(a->state, "published");
  apply(a->epoch, {6, 2});  // nothing in flight when the next request comes
  EXPECT_NE(healthz(m).find("ok: leading"), std::string::npos) << healthz(m);
  const std::int64_t before = leader_epoch();

  raw({"SET", store::keys::leader(job_), "99999"});
  request("op-2", {5, 3});
  a = answered_by(m, "op-2", 2.0);  // two lease periods
  ASSERT_TRUE(a) << "fenced for good";
  EXPECT_EQ(a->state, "published");
  apply(a->epoch, {5, 3});
  EXPECT_GT(leader_epoch(), 99999) << "led again at an epoch past the planted one (was " << before << ")";
  EXPECT_NE(healthz(m).find("ok: leading"), std::string::npos) << healthz(m);

  int n = 3;
  for (const char* planted : {"nan", "1e308", "-5", "99999999999999999999"}) {
    raw({"SET", store::keys::leader(job_), planted});
    const std::string id = "op-" + std::to_string(n++);
    const std::vector<int> split = n % 2 ? std::vector<int>{4, 4} : std::vector<int>{6, 2};
    request(id, split);
    a = answered_by(m, id, 2.0);
    ASSERT_TRUE(a) << planted;
    EXPECT_EQ(a->state, "published") << planted;
    apply(a->epoch, split);
    EXPECT_LT(leader_epoch(), 99999999) << planted << " is taken over, not trusted";
  }
  EXPECT_EQ(taken_over(m), 4);
}

// A lease value no master writes (not "<epoch> <token>", or with no TTL), or an epoch counter that is no
// number, kept every master standing by (or failing) for ever; now a master takes it over and leads.
TEST_F(MasterHaTest, APlantedLeaseOrEpochCounterIsTakenOver) {
  const std::string lease = store::keys::master_lease("job:" + job_);
  for (const std::string value : {"evil", "7 someone x"}) {
    raw({"SET", lease, value});  // no TTL: no master wrote it
    raw({"SET", store::keys::master_epoch(), "not a number"});
    const std::vector<std::string> planted = {"SET", lease, value};
    Master m(ha_config());
    const std::string id = "op-lease-" + std::to_string(value.size());
    request(id, {6, 2});
    auto a = answered_by(m, id, 2.0);
    ASSERT_TRUE(a) << planted[2];
    EXPECT_NE(healthz(m).find("ok: leading"), std::string::npos) << healthz(m);
    EXPECT_EQ(taken_over(m), 1) << planted[2];
    m.stop();
  }
}

}  // namespace
}  // namespace greyhound::master
