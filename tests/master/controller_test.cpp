// The master's Controller driven with plain sequences: events, reports, acknowledgements and `now` in,
// intents out. No Redis, no clock.
#include "daemon/controller.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <optional>
#include <string>
#include <vector>

namespace greyhound::master {
namespace {

using store::Entry;

Now at(double s, double job_s = -1) {
  Now n;
  n.mono_s = s;
  n.job_s = job_s >= 0 ? job_s : s;
  n.unix_ms = 1'700'000'000'000 + static_cast<std::int64_t>(s * 1000);
  return n;
}

Event change(const char* type, int rank, double t_s, double before_ms, double after_ms) {
  Event e;
  e.type = type;
  e.t_s = t_s;
  e.source = "agent:" + std::to_string(rank / 2);
  e.rank = rank;
  e.node = rank / 2;
  e.before_ms = before_ms;
  e.after_ms = after_ms;
  e.ratio = after_ms / before_ms;
  return e;
}

Event profile(int rank, const std::string& request, int iterations = 5, double iter_ms = 400) {
  Event e;
  e.type = event_type::kProfile;
  e.t_s = 1;
  e.source = "agent:" + std::to_string(rank / 2);
  e.rank = rank;
  e.node = rank / 2;
  ProfileReport p;
  p.request = request;
  p.window_s = 3;
  p.iterations = iterations;
  p.iter_ms = iter_ms;
  p.comm_share = 0.2;
  p.groups[rank < 2 ? 0x10 : 0x11] = {0.1, 5};  // each rank in one group of two
  e.detail = to_json(p);
  return e;
}

JobLayout layout(std::vector<int> microbatches, std::vector<int> initial) {
  JobLayout l;
  l.tp = 1;
  l.dp = 2;
  l.pp = 2;
  l.world = 4;
  l.microbatches = std::move(microbatches);
  l.initial_microbatches = std::move(initial);
  l.capabilities = {"S2"};
  return l;
}

std::vector<GroupMembers> two_groups() {
  return {GroupMembers{0x10, {0, 1}, "2|AllReduce:8"}, GroupMembers{0x11, {2, 3}, "2|AllReduce:8"}};
}

JobInputs registry() {
  JobInputs in;
  in.agents = {0, 1};
  in.ranks = {0, 1, 2, 3};
  return in;
}

std::vector<std::string> types(const std::vector<Event>& events) {
  std::vector<std::string> out;
  for (const Event& e : events) out.push_back(e.type);
  return out;
}

// Feeds stream entries, commits (as the driver would once Redis took them) and returns the commit.
class Driven {
 public:
  explicit Driven(ControllerConfig cfg = {}) : c(std::move(cfg), "tag") {}
  store::MasterCommit feed(const std::vector<Event>& events, const Now& now) {
    std::vector<Entry<Event>> entries;
    for (const Event& e : events) entries.push_back({std::to_string(++id) + "-0", e, ""});
    store::MasterCommit commit = c.apply(entries, now);
    c.adopt(now);
    return commit;
  }
  Controller c;
  int id = 0;
};

ControllerConfig no_baselines() {
  ControllerConfig cfg;
  cfg.baseline_every_s = 0;
  return cfg;
}

// Every rank of a large job reports the job's slowdown: the commit holds the incident once, with every rank
// (it held a snapshot per report, each as long as the ranks so far: quadratic in the job's size).
TEST(Controller, ASlowdownReportedByThousandsOfRanksCommitsTheIncidentOnce) {
  Driven d(no_baselines());
  d.c.load(MasterState{}, std::nullopt, 0, "0-0", at(0));
  std::vector<Event> reports;
  for (int r = 0; r < 2000; ++r) reports.push_back(change(event_type::kSlowdown, r, 20, 300, 400));
  const auto commit = d.feed(reports, at(21));
  ASSERT_EQ(commit.incidents.size(), 1u);
  EXPECT_EQ(commit.incidents[0].ranks.size(), 2000u);
  EXPECT_EQ(commit.incidents[0].nodes.size(), 1000u);
  EXPECT_EQ(types(commit.events), std::vector<std::string>{"incident_open"});
}

TEST(Controller, IncidentLifecycleWithPauseFreeLocalisation) {
  Driven d(no_baselines());
  d.c.load(MasterState{}, std::nullopt, 0, "0-0", at(0));
  EXPECT_FALSE(d.c.needs(at(0)).registry);

  auto commit = d.feed({change(event_type::kSlowdown, 3, 20, 300, 400)}, at(21));
  EXPECT_EQ(commit.state.cursor, "1-0");
  EXPECT_EQ(commit.state.state, Phase::kSlow);
  EXPECT_EQ(types(commit.events), std::vector<std::string>{"incident_open"});
  ASSERT_EQ(commit.incidents.size(), 1u);
  EXPECT_EQ(d.c.cursor(), "1-0");

  // The open incident asks for a profiling window on every agent.
  ASSERT_TRUE(d.c.needs(at(21)).registry);
  Intents it = d.c.step(at(21), registry());
  ASSERT_TRUE(it.profile);
  EXPECT_EQ(it.profile->command.cmd, "profile");
  EXPECT_EQ(it.profile->command.id, "profile-1-1.tag");
  EXPECT_DOUBLE_EQ(it.profile->command.duration_s, kDefaultProfileWindowS);
  EXPECT_EQ(it.profile->nodes, (std::vector<int>{0, 1}));
  EXPECT_TRUE(it.persist_state);
  EXPECT_EQ(d.c.state().state, Phase::kProfiling);
  EXPECT_FALSE(d.c.needs(at(22)).groups);

  // Reports for another request are not this window's; all four for it complete it.
  d.feed({profile(0, "profile-9-9.old"), profile(0, "profile-1-1.tag"), profile(1, "profile-1-1.tag")}, at(24));
  EXPECT_FALSE(d.c.needs(at(24)).groups);
  d.feed({profile(2, "profile-1-1.tag"), profile(3, "profile-1-1.tag")}, at(24.5));
  const Needs n = d.c.needs(at(24.5));
  EXPECT_TRUE(n.groups);
  EXPECT_TRUE(n.layout);
  it = d.c.step(at(24.5), JobInputs{});
  ASSERT_EQ(types(it.events), std::vector<std::string>{"localised"});
  std::string err;
  auto loc = parse_localisation_report(it.events[0].detail, &err);
  ASSERT_TRUE(loc) << err;
  EXPECT_EQ(loc->request, "profile-1-1.tag");
  EXPECT_EQ(loc->ranks_profiled, 4);
  EXPECT_EQ(loc->ranks_expected, 4);
  EXPECT_EQ(it.events[0].incident, 1);
  EXPECT_EQ(d.c.state().state, Phase::kSlow);  // localised, nothing to mitigate with
  EXPECT_FALSE(d.c.profiling());

  // The rank recovers: the incident closes.
  commit = d.feed({change(event_type::kRecovery, 3, 60, 400, 302)}, at(61));
  EXPECT_EQ(types(commit.events), std::vector<std::string>{"incident_close"});
  EXPECT_EQ(commit.state.state, Phase::kHealthy);
  EXPECT_FALSE(d.c.open_incident());
}

TEST(Controller, ProfilingWindowEndsAtItsDeadlineWithTheReportsItHas) {
  ControllerConfig cfg = no_baselines();
  cfg.profile_s = 2;
  cfg.profile_grace_s = 1;
  Driven d(cfg);
  d.c.load(MasterState{}, std::nullopt, 0, "0-0", at(0));
  d.feed({change(event_type::kSlowdown, 1, 5, 300, 400)}, at(5));
  ASSERT_TRUE(d.c.step(at(5), registry()).profile);
  d.feed({profile(0, "profile-1-1.tag"), profile(1, "profile-1-1.tag")}, at(7));
  EXPECT_FALSE(d.c.needs(at(7.99)).groups);
  EXPECT_TRUE(d.c.step(at(7.99), JobInputs{}).events.empty());
  ASSERT_TRUE(d.c.needs(at(8.0)).groups);
  Intents it = d.c.step(at(8.0), JobInputs{});
  ASSERT_EQ(types(it.events), std::vector<std::string>{"localised"});
  std::string err;
  auto loc = parse_localisation_report(it.events[0].detail, &err);
  ASSERT_TRUE(loc) << err;
  EXPECT_EQ(loc->ranks_profiled, 2);
  EXPECT_EQ(loc->ranks_expected, 4);
}

TEST(Controller, BaselineScheduleAndDiscardOnAnOverlappingOnset) {
  ControllerConfig cfg;
  cfg.baseline_after_s = 10;
  cfg.baseline_every_s = 100;
  cfg.reprofile_s = 6;
  Driven d(cfg);
  d.c.load(MasterState{}, std::nullopt, 0, "0-0", at(0));
  EXPECT_FALSE(d.c.needs(at(9.9)).registry);
  ASSERT_TRUE(d.c.needs(at(10)).registry);
  Intents it = d.c.step(at(10), registry());
  ASSERT_TRUE(it.profile);
  EXPECT_EQ(it.profile->command.id, "baseline-0-1.tag");
  EXPECT_FALSE(it.persist_state);  // healthy: no phase to record
  d.feed({profile(0, "baseline-0-1.tag"), profile(1, "baseline-0-1.tag"), profile(2, "baseline-0-1.tag"),
          profile(3, "baseline-0-1.tag")},
         at(13, 13));
  JobInputs in;
  in.groups = two_groups();
  it = d.c.step(at(13, 13), in);
  ASSERT_EQ(types(it.events), std::vector<std::string>{"baseline"});
  std::string err;
  auto b = parse_baseline_report(it.events[0].detail, &err);
  ASSERT_TRUE(b) << err;
  EXPECT_EQ(b->request, "baseline-0-1.tag");
  EXPECT_EQ(b->ranks_profiled, 4);
  EXPECT_EQ(b->groups, 2);
  EXPECT_DOUBLE_EQ(b->iter_ms, 400);
  EXPECT_TRUE(d.c.has_baseline());
  // Not again before baseline_every_s.
  EXPECT_FALSE(d.c.needs(at(50)).registry);
  EXPECT_TRUE(d.c.needs(at(113)).registry);

  // A slowdown whose onset (12 s job time) lies inside the baseline's window: the baseline is not healthy.
  d.feed({change(event_type::kSlowdown, 2, 12, 300, 420)}, at(14, 14));
  EXPECT_FALSE(d.c.has_baseline());
}

TEST(Controller, AnIncompleteBaselineIsRetriedAtTheNextChance) {
  ControllerConfig cfg;
  cfg.baseline_after_s = 10;
  cfg.baseline_every_s = 100;
  Driven d(cfg);
  d.c.load(MasterState{}, std::nullopt, 0, "0-0", at(0));
  ASSERT_TRUE(d.c.step(at(10), registry()).profile);
  d.feed({profile(0, "baseline-0-1.tag"), profile(1, "baseline-0-1.tag", 0, 0)}, at(12));
  EXPECT_FALSE(d.c.needs(at(16.9)).groups);
  // Deadline passed (window 3 s + grace 4 s): incomplete, none taken; the last window began more than
  // reprofile_s ago, so the next one starts at once.
  JobInputs in = registry();
  in.groups = two_groups();
  Intents it = d.c.step(at(17.1), in);
  EXPECT_TRUE(it.events.empty());
  EXPECT_FALSE(d.c.has_baseline());
  ASSERT_TRUE(it.profile);
  EXPECT_EQ(it.profile->command.id, "baseline-0-2.tag");
}

// A master (re)started on a job whose incident 2 (rank 3, 300 -> 400 ms) is open with no fail-slow tracked,
// its state's cursor at 7-0 and the store's latest plan epoch 5.
void load_mid_incident(Driven& d) {
  MasterState st;
  st.cursor = "7-0";
  st.state = Phase::kMitigating;
  st.open_incident = 2;
  st.incidents_total = 2;
  Incident open;
  open.id = 2;
  open.onset_t_s = 30;
  open.detected_t_s = 32;
  open.before_ms = 300;
  open.after_ms = 400;
  open.severity = 4.0 / 3;
  open.ranks = {3};
  d.c.load(st, open, 5, "7-0", at(100));
}

// A master restarted with an incident open and a remedy in force (the layout says so): it profiles again,
// and when the incident closes it reverts to the initial allocation with the next epoch after the store's.
TEST(Controller, RestartResumesTheOpenIncidentAndRevertsOnClose) {
  ControllerConfig cfg = no_baselines();
  cfg.mitigate = true;
  cfg.ack_timeout_s = 20;
  Driven d(cfg);
  d.id = 7;
  load_mid_incident(d);
  ASSERT_TRUE(d.c.needs(at(100)).registry);
  Intents it = d.c.step(at(100), registry());
  ASSERT_TRUE(it.profile);
  EXPECT_EQ(it.profile->command.id, "profile-2-1.tag");

  auto commit = d.feed({change(event_type::kRecovery, 3, 110, 400, 301)}, at(111));
  EXPECT_EQ(commit.state.cursor, "8-0");
  EXPECT_EQ(types(commit.events), std::vector<std::string>{"incident_close"});
  ASSERT_TRUE(d.c.needs(at(111)).layout);
  JobInputs in;
  in.layout = layout({5, 3}, {4, 4});
  it = d.c.step(at(111), in);
  ASSERT_TRUE(it.plan);
  EXPECT_EQ(it.plan->epoch, 6);
  EXPECT_EQ(it.plan->strategy, Strategy::kS1);
  EXPECT_EQ(it.plan->action, PlanAction::kRevert);
  EXPECT_EQ(it.plan->microbatches, (std::vector<int>{4, 4}));
  EXPECT_EQ(it.plan->incident, 2);
  it = d.c.plan_published(*it.plan, at(111.1));
  ASSERT_EQ(types(it.events), std::vector<std::string>{"plan"});
  EXPECT_EQ(d.c.plan_in_flight(), 6);
  EXPECT_EQ(d.c.state().plans_recorded, 6);  // committed with its event

  // Ack quorum: every rank of the layout must answer.
  EXPECT_TRUE(d.c.needs(at(112)).acks);
  auto ack = [](int rank, std::int64_t epoch, AckStatus status) {
    PlanAck a;
    a.rank = rank;
    a.epoch = epoch;
    a.iteration = 80 + rank;
    a.status = status;
    return a;
  };
  in = JobInputs{};
  in.acks_read = true;
  in.acks = {ack(0, 6, AckStatus::kApplied), ack(1, 6, AckStatus::kApplied), ack(2, 6, AckStatus::kApplied),
             ack(3, 5, AckStatus::kApplied)};
  EXPECT_TRUE(d.c.step(at(112), in).events.empty());
  in.acks[3] = ack(3, 6, AckStatus::kApplied);
  it = d.c.step(at(113), in);
  ASSERT_EQ(types(it.events), std::vector<std::string>{"plan_applied"});
  std::string err;
  auto o = parse_plan_outcome(it.events[0].detail, &err);
  ASSERT_TRUE(o) << err;
  EXPECT_EQ(o->epoch, 6);
  EXPECT_EQ(o->applied, 4);
  EXPECT_EQ(o->ranks, 4);
  EXPECT_EQ(o->from_iteration, 83);
  EXPECT_FALSE(d.c.plan_in_flight());
}

TEST(Controller, AcksThatRefuseOrNeverComeEndThePlan) {
  ControllerConfig cfg = no_baselines();
  cfg.mitigate = true;
  cfg.ack_timeout_s = 20;
  for (const bool refuse : {true, false}) {
    Driven d(cfg);
    d.c.load(MasterState{}, std::nullopt, 0, "0-0", at(0));
    d.feed({change(event_type::kSlowdown, 3, 20, 300, 400)}, at(21));
    d.feed({change(event_type::kRecovery, 3, 40, 400, 300)}, at(41));
    JobInputs in;
    in.layout = layout({5, 3}, {4, 4});
    Intents it = d.c.step(at(41), in);
    ASSERT_TRUE(it.plan);
    EXPECT_EQ(it.plan->epoch, 1);
    d.c.plan_published(*it.plan, at(41));
    in = JobInputs{};
    in.acks_read = true;
    if (refuse) {
      for (int r = 0; r < 4; ++r) {
        PlanAck a;
        a.rank = r;
        a.epoch = 1;
        a.status = r == 2 ? AckStatus::kRejected : AckStatus::kApplied;
        in.acks.push_back(a);
      }
      it = d.c.step(at(42), in);
      ASSERT_EQ(types(it.events), std::vector<std::string>{"plan_rejected"});
    } else {
      EXPECT_TRUE(d.c.step(at(60.9), in).events.empty());
      it = d.c.step(at(61), in);
      ASSERT_EQ(types(it.events), std::vector<std::string>{"plan_timeout"});
    }
    EXPECT_FALSE(d.c.plan_in_flight());
  }
}

// An earlier run committed an incident's close (with its state) and died before reverting: the close, read
// from the stream up to the id the stream had at load, puts the original configuration back. A close this
// run reads back after its own commits is not acted on twice.
TEST(Controller, AnEarlierRunsCloseStillReverts) {
  ControllerConfig cfg = no_baselines();
  cfg.mitigate = true;
  Driven d(cfg);
  MasterState st;
  st.cursor = "7-0";
  st.incidents_total = 1;
  d.id = 7;
  d.c.load(st, std::nullopt, 4, "8-0", at(50));
  Event close;
  close.type = event_type::kIncidentClose;
  close.t_s = 49;
  close.source = "master";
  close.incident = 1;
  d.feed({close}, at(50));
  ASSERT_TRUE(d.c.needs(at(50)).layout);
  JobInputs in;
  in.layout = layout({5, 3}, {4, 4});
  Intents it = d.c.step(at(50), in);
  ASSERT_TRUE(it.plan);
  EXPECT_EQ(it.plan->action, PlanAction::kRevert);
  EXPECT_EQ(it.plan->epoch, 5);
  d.c.plan_published(*it.plan, at(50));
  // Later master closes (id 9-0 on) are this run's own: no second revert.
  d.feed({close}, at(60));
  EXPECT_FALSE(d.c.needs(at(60)).layout);
}

TEST(Controller, AnUnreadableAckHashIsNoSilenceOfTheJob) {
  ControllerConfig cfg = no_baselines();
  cfg.mitigate = true;
  cfg.ack_timeout_s = 20;
  Driven d(cfg);
  d.c.load(MasterState{}, std::nullopt, 0, "0-0", at(0));
  d.feed({change(event_type::kSlowdown, 3, 20, 300, 400)}, at(21));
  d.feed({change(event_type::kRecovery, 3, 40, 400, 300)}, at(41));
  JobInputs in;
  in.layout = layout({5, 3}, {4, 4});
  Intents it = d.c.step(at(41), in);
  ASSERT_TRUE(it.plan);
  d.c.plan_published(*it.plan, at(41));
  EXPECT_TRUE(d.c.step(at(70), JobInputs{}).events.empty());  // past the deadline, but nothing could be read
  EXPECT_TRUE(d.c.plan_in_flight());
  in = JobInputs{};
  in.acks_read = true;
  ASSERT_EQ(types(d.c.step(at(71), in).events), std::vector<std::string>{"plan_timeout"});
}

TEST(Controller, APlanThatCouldNotBePublishedGivesItsEpochBack) {
  ControllerConfig cfg = no_baselines();
  cfg.mitigate = true;
  Driven d(cfg);
  d.c.load(MasterState{}, std::nullopt, 3, "0-0", at(0));
  d.feed({change(event_type::kSlowdown, 3, 20, 300, 400)}, at(21));
  d.feed({change(event_type::kRecovery, 3, 40, 400, 300)}, at(41));
  JobInputs in;
  in.layout = layout({5, 3}, {4, 4});
  Intents it = d.c.step(at(41), in);
  ASSERT_TRUE(it.plan);
  EXPECT_EQ(it.plan->epoch, 4);
  d.c.plan_failed(*it.plan);
  EXPECT_FALSE(d.c.plan_in_flight());
}

TEST(Controller, ACommitThatFailedIsNotAdopted) {
  Driven d(no_baselines());
  d.c.load(MasterState{}, std::nullopt, 0, "0-0", at(0));
  std::vector<Entry<Event>> entries = {{"1-0", change(event_type::kSlowdown, 3, 20, 300, 400), ""},
                                       {"2-0", std::nullopt, "t_s: missing"}};
  const store::MasterCommit c = d.c.apply(entries, at(21));
  EXPECT_EQ(c.state.cursor, "2-0");
  EXPECT_EQ(c.state.events_rejected, 1);
  EXPECT_EQ(d.c.cursor(), "0-0");  // not adopted yet
  d.c.discard();
  EXPECT_FALSE(d.c.loaded());
  d.c.load(MasterState{}, std::nullopt, 0, "0-0", at(22));
  EXPECT_EQ(d.c.cursor(), "0-0");
  EXPECT_FALSE(d.c.open_incident());
}

TEST(Controller, TwoJobsAtOnceStayIndependent) {
  Driven a(no_baselines()), b(no_baselines());
  a.c.load(MasterState{}, std::nullopt, 0, "0-0", at(0));
  b.c.load(MasterState{}, std::nullopt, 0, "0-0", at(0));
  a.feed({change(event_type::kSlowdown, 1, 10, 300, 420)}, at(11));
  b.feed({change(event_type::kRecovery, 1, 10, 420, 300)}, at(11));  // a recovery with nothing open: ignored
  EXPECT_TRUE(a.c.open_incident());
  EXPECT_FALSE(b.c.open_incident());
  EXPECT_TRUE(a.c.needs(at(11)).registry);
  EXPECT_FALSE(b.c.needs(at(11)).registry);
  EXPECT_TRUE(a.c.step(at(11), registry()).profile);
  EXPECT_FALSE(b.c.step(at(11), registry()).profile);
  EXPECT_EQ(a.c.state().incidents_total, 1);
  EXPECT_EQ(b.c.state().incidents_total, 0);
}

// A TP1 x DP2 x PP2 job on nodes of ranks {0,2} and {1,3}: the DP groups {0,1} (stage 0) and {2,3} (stage 1)
// both cross the link 0-1. `shares`: each rank's share of the window inside its DP group.
Event dp_profile(int rank, const std::string& request, double share, double iter_ms = 500) {
  Event e = profile(rank, request, 10, iter_ms);
  e.node = rank % 2;
  e.source = "agent:" + std::to_string(e.node);
  ProfileReport p;
  p.request = request;
  p.window_s = 3;
  p.iterations = 10;
  p.iter_ms = iter_ms;
  p.comm_share = share;
  p.groups[rank < 2 ? 0x10 : 0x11] = {share, 5};
  e.detail = to_json(p);
  return e;
}

std::vector<Event> dp_profiles(const std::string& request, std::array<double, 4> shares, double iter_ms = 500) {
  std::vector<Event> out;
  for (int r = 0; r < 4; ++r) out.push_back(dp_profile(r, request, shares[static_cast<std::size_t>(r)], iter_ms));
  return out;
}

IterationUpdate pace(std::int64_t index, double iter_ms) {
  IterationUpdate u;
  u.index = index;
  u.iter_ms = iter_ms;
  return u;
}

// Drives a mitigating controller to a localised slow GPU (rank 3) with a congested link 0-1 at once, and
// the S2 split for the GPU in force. Returns the epoch of that plan.
struct TwoFaults {
  Driven d;
  std::int64_t index = 100;
  double t = 0;
  bool marks = false;  // the job marks its iterations (it can be paused)
  explicit TwoFaults(ControllerConfig cfg) : d(cfg) {}

  // A fresh job (8 and 8 micro-batches) whose rank 3 reports a slowdown from job time 1; nothing stepped since.
  void rank3_slows() {
    d.c.load(MasterState{}, std::nullopt, 0, "0-0", at(0));
    JobInputs in = registry();
    in.layout = layout({8, 8}, {8, 8});
    step(in, 400);
    d.feed({change(event_type::kSlowdown, 3, 1, 400, 500)}, at(1, 1));
  }

  Intents step(JobInputs in, double iter_ms) {
    in.pace = pace(++index, iter_ms);
    if (marks) in.pace->mark = index;
    t += 0.5;
    return d.c.step(at(t, t), in);
  }
  void ack_all(std::int64_t epoch) {
    JobInputs in;
    in.acks_read = true;
    for (int r = 0; r < 4; ++r) {
      PlanAck a;
      a.rank = r;
      a.epoch = epoch;
      a.status = AckStatus::kApplied;
      in.acks.push_back(a);
    }
    in.layout = std::nullopt;
    last = step(in, 500);
  }
  Intents last;
};

ControllerConfig mitigating() {
  ControllerConfig cfg;
  cfg.mitigate = true;
  cfg.baseline_after_s = 1;
  cfg.baseline_every_s = 1000;
  cfg.profile_grace_s = 1;
  return cfg;
}

// An early profile (ControllerConfig::suspect_iterations): a healthy job whose iterations turn slow is
// profiled before any agent decides a slowdown, the profile is held, and the incident is localised from it
// at the step it opens, without a window of its own.
struct EarlyJob {
  TwoFaults f{no_baselines()};
  JobInputs done;
  static constexpr double kJobOffsetS = 100;  // job time runs ahead of the steady clock: the two are not mixed
  EarlyJob() {
    f.d.c.load(MasterState{}, std::nullopt, 0, "0-0", at(0));
    done.groups = two_groups();
    done.layout = layout({8, 8}, {8, 8});
  }
  Now now() const { return at(f.t, job()); }
  double job() const { return f.t + kJobOffsetS; }
  // One step, the pacing rank `advance` iterations on, the latest at iter_ms.
  Intents step(JobInputs in, double iter_ms, int advance = 1) {
    f.index += advance;
    in.pace = pace(f.index, iter_ms);
    f.t += 0.5;
    return f.d.c.step(now(), in);
  }
  // Healthy iterations (one slower by 30 % among them is no suspicion), then two 25 % slower: the early
  // profile's request.
  std::string suspect() {
    for (int i = 0; i < 16; ++i) EXPECT_FALSE(step(registry(), i == 10 ? 520 : 400).profile) << i;
    EXPECT_FALSE(step(registry(), 500).profile);
    const Intents it = step(registry(), 500);
    EXPECT_TRUE(it.profile);
    return it.profile ? it.profile->command.id : "";
  }
  // Rank 3 late in its group (its GPU is slow): the reports of every rank (or of the first `ranks`).
  Intents report(const std::string& req, std::size_t ranks = 4) {
    std::vector<Event> reports = dp_profiles(req, {0.20, 0.20, 0.45, 0.02});
    reports.resize(ranks);
    f.d.feed(reports, now());
    return step(done, 500);
  }
  // Rank 3's agent decides a slowdown that began at job time onset_s.
  Intents decided(double onset_s) {
    Event e = change(event_type::kSlowdown, 3, onset_s, 400, 500);
    e.detected_t_s = job();
    f.d.feed({e}, now());
    return step(registry(), 500);
  }
};

std::string localised_request(const Intents& it) {
  for (const Event& e : it.events) {
    if (e.type != event_type::kLocalised) continue;
    std::string err;
    auto loc = parse_localisation_report(e.detail, &err);
    return loc ? loc->request + " rank " + std::to_string(loc->culprit) : err;
  }
  return "none";
}

TEST(Controller, AnEarlyProfileLocalisesTheIncidentAtOnceWhenItOpens) {
  EarlyJob j;
  const double onset = j.job();  // the first slow iteration began about here
  const std::string req = j.suspect();
  EXPECT_EQ(req.rfind("early-", 0), 0u) << req;
  EXPECT_FALSE(j.f.d.c.open_incident());
  // Its reports complete it with no incident open: held, nothing reported, nothing opened.
  Intents it = j.report(req);
  EXPECT_TRUE(it.events.empty());
  EXPECT_FALSE(j.f.d.c.profiling());
  EXPECT_TRUE(j.f.d.c.fail_slows().empty());
  // An iteration later rank 3's agent decides the slowdown (its onset back-dated before the window): the
  // incident is localised at the step it opens, from the early profile, and no window is asked for.
  j.step(registry(), 500);
  it = j.decided(onset);
  EXPECT_FALSE(it.profile);
  EXPECT_EQ(localised_request(it), req + " rank 3");
  ASSERT_EQ(j.f.d.c.fail_slows().size(), 1u);
  EXPECT_EQ(j.f.d.c.fail_slows()[0].rank, 3);
  EXPECT_EQ(j.f.d.c.stats().early_profiles, 1);
  EXPECT_EQ(j.f.d.c.stats().early_localisations, 1);
  EXPECT_NEAR(j.f.d.c.stats().localisation.sum_s, 0.5, 1e-9);  // localised at the step after its detection
}

TEST(Controller, TheStepWhoseReadingCompletesTheStreakStartsTheEarlyProfile) {
  // The driver reads the registry only when needs() asks for it: needs() asks one slow reading ahead, so the
  // profile starts at the step of the second slow reading, not at the poll after it.
  EarlyJob j;
  auto as_needed = [&](double iter_ms) {
    const bool reg = j.f.d.c.needs(at(j.f.t + 0.5, j.job() + 0.5)).registry;
    return j.step(reg ? registry() : JobInputs{}, iter_ms);
  };
  for (int i = 0; i < 16; ++i) EXPECT_FALSE(as_needed(400).profile) << i;
  EXPECT_FALSE(j.f.d.c.needs(at(j.f.t + 0.5, j.job() + 0.5)).registry) << "healthy: no registry read";
  EXPECT_FALSE(as_needed(500).profile);
  EXPECT_TRUE(as_needed(500).profile);
  EXPECT_EQ(j.f.d.c.stats().early_profiles, 1);
}

TEST(Controller, AnEarlyProfileInProgressServesTheIncidentThatOpensMeanwhile) {
  EarlyJob j;
  const double onset = j.job();
  const std::string req = j.suspect();
  Intents it = j.decided(onset);
  EXPECT_FALSE(it.profile);  // the early window is still on: no second one
  EXPECT_TRUE(j.f.d.c.profiling());
  it = j.report(req);
  EXPECT_EQ(localised_request(it), req + " rank 3");
  EXPECT_EQ(j.f.d.c.stats().early_localisations, 0);  // it was no held profile: localised as any window is
}

TEST(Controller, AnEarlyProfileIsNotUsedForASlowdownThatBeganAfterItsWindowDidNorOnceStale) {
  {
    // The incident's onset is after the window began: part of the window was healthy.
    EarlyJob j;
    const std::string req = j.suspect();
    j.report(req);
    const double onset = j.job();
    Intents it = j.decided(onset);
    ASSERT_TRUE(it.profile);
    EXPECT_EQ(it.profile->command.id.rfind("profile-", 0), 0u) << it.profile->command.id;
    EXPECT_EQ(localised_request(it), "none");
    EXPECT_EQ(j.f.d.c.stats().early_localisations, 0);
  }
  {
    // The iterations came back to the level and nothing was decided: 20 iterations after its end the held
    // profile goes, and a later incident gets a window of its own.
    EarlyJob j;
    const double onset = j.job();
    const std::string req = j.suspect();
    j.report(req);
    for (int i = 0; i < 25; ++i) EXPECT_FALSE(j.step(registry(), 400).profile) << i;
    Intents it = j.decided(onset);
    ASSERT_TRUE(it.profile);
    EXPECT_EQ(it.profile->command.id.rfind("profile-", 0), 0u) << it.profile->command.id;
    EXPECT_EQ(j.f.d.c.stats().early_localisations, 0);
  }
  {
    // The incident opens while the early window runs, with an onset after it began: a window of its own.
    EarlyJob j;
    const std::string req = j.suspect();
    Intents it = j.decided(j.job() + 0.2);  // the window began at job(), at the step that asked for it
    ASSERT_TRUE(it.profile);
    EXPECT_EQ(it.profile->command.id.rfind("profile-", 0), 0u) << it.profile->command.id;
    it = j.report(req);  // the early window's reports are no one's now
    EXPECT_EQ(localised_request(it), "none");
  }
  {
    // Not every rank reported (the slow rank's agent may be behind): not held, and the incident gets a
    // window of its own.
    EarlyJob j;
    const double onset = j.job();
    const std::string req = j.suspect();
    for (int i = 0; i < 12; ++i) j.step(JobInputs{}, 500);  // past the window's deadline
    j.report(req, 3);
    Intents it = j.decided(onset);
    ASSERT_TRUE(it.profile);
    EXPECT_EQ(it.profile->command.id.rfind("profile-", 0), 0u) << it.profile->command.id;
  }
  {
    // One slow reading after polls the master missed is one slow iteration, not three.
    EarlyJob j;
    for (int i = 0; i < 16; ++i) j.step(registry(), 400);
    EXPECT_FALSE(j.step(registry(), 500, 3).profile);
    EXPECT_FALSE(j.step(registry(), 400).profile);
    EXPECT_EQ(j.f.d.c.stats().early_profiles, 0);
  }
  {
    // An operator's plan holds the configuration: no remedy could follow, so slow iterations profile
    // nothing; once it is released they do again.
    EarlyJob j;
    OperatorPlanRequest op;
    op.id = "op-1";
    op.microbatches = {6, 10};
    j.f.d.c.offer_operator_plan(op, "published", j.now());
    ASSERT_TRUE(j.f.d.c.operator_hold());
    for (int i = 0; i < 16; ++i) j.step(registry(), 400);
    for (int i = 0; i < 6; ++i) EXPECT_FALSE(j.step(registry(), 500).profile) << i;
    EXPECT_EQ(j.f.d.c.stats().early_profiles, 0);
    OperatorPlanRequest release;
    release.id = "op-2";
    release.action = "release";
    j.f.d.c.offer_operator_plan(release, "", j.now());
    ASSERT_FALSE(j.f.d.c.operator_hold());
    bool profiled = false;
    for (int i = 0; i < 4 && !profiled; ++i) profiled = j.step(registry(), 500).profile.has_value();
    EXPECT_TRUE(profiled);
    EXPECT_EQ(j.f.d.c.stats().early_profiles, 1);
  }
  {
    // Switched off: slow iterations alone profile nothing.
    ControllerConfig cfg = no_baselines();
    cfg.suspect_iterations = 0;
    TwoFaults f(cfg);
    f.d.c.load(MasterState{}, std::nullopt, 0, "0-0", at(0));
    for (int i = 0; i < 16; ++i) f.step(registry(), 400);
    for (int i = 0; i < 10; ++i) EXPECT_FALSE(f.step(registry(), 500).profile) << i;
    EXPECT_EQ(f.d.c.stats().early_profiles, 0);
  }
}

TEST(Controller, ASplitForAGpuThatRecoveredIsRevertedWhileTheLinkStaysOpen) {
  TwoFaults f(mitigating());
  Driven& d = f.d;
  d.c.load(MasterState{}, std::nullopt, 0, "0-0", at(0));
  JobInputs in = registry();
  in.layout = layout({8, 8}, {8, 8});
  // A healthy baseline first: the DP groups' least member time is 0.05 of a 400 ms iteration.
  Intents it = f.step(in, 400);
  f.t = 2;
  it = f.step(registry(), 400);
  ASSERT_TRUE(it.profile);
  const std::string base = it.profile->command.id;
  d.feed(dp_profiles(base, {0.05, 0.05, 0.05, 0.05}, 400), at(f.t, f.t));
  JobInputs g;
  g.groups = two_groups();
  it = f.step(g, 400);
  ASSERT_TRUE(d.c.has_baseline());

  // Rank 3's GPU slows (it arrives last in {2,3}; rank 2 waits) and the link 0-1 is congested (both members
  // of {0,1} spend 5x its baseline in it, nobody late).
  d.feed({change(event_type::kSlowdown, 3, f.t, 400, 500)}, at(f.t, f.t));
  it = f.step(registry(), 500);
  ASSERT_TRUE(it.profile);
  const std::string req = it.profile->command.id;
  d.feed(dp_profiles(req, {0.20, 0.20, 0.45, 0.02}), at(f.t, f.t));
  JobInputs done;
  done.groups = two_groups();
  done.layout = layout({8, 8}, {8, 8});
  it = f.step(done, 500);
  std::vector<std::string> ty = types(it.events);
  ASSERT_EQ(std::count(ty.begin(), ty.end(), "fail_slow_open"), 2) << it.events.size();
  ASSERT_EQ(d.c.fail_slows().size(), 2u);
  int gpu = -1, link = -1;
  for (const FailSlow& x : d.c.fail_slows()) {
    if (x.cause == Cause::kComputation) gpu = static_cast<int>(x.id);
    if (x.cause == Cause::kCommunication) link = static_cast<int>(x.id);
  }
  ASSERT_GT(gpu, 0);
  ASSERT_GT(link, 0);
  EXPECT_EQ(d.c.fail_slows()[static_cast<std::size_t>(gpu == 1 ? 0 : 1)].rank, 3);

  // The GPU's loss pays for S2 within a few iterations: a split with its prediction.
  std::optional<Plan> plan;
  for (int i = 0; i < 10 && !plan; ++i) plan = f.step(JobInputs{}, 500).plan;
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->strategy, Strategy::kS2);
  EXPECT_EQ(plan->microbatches, (std::vector<int>{10, 6}));
  EXPECT_GT(plan->predicted_iteration_s, 0.4);
  EXPECT_LT(plan->predicted_iteration_s, 0.5);
  d.c.plan_published(*plan, at(f.t, f.t));
  f.ack_all(plan->epoch);
  ASSERT_EQ(types(f.last.events), std::vector<std::string>{"plan_applied"});
  // Measured: faster than the 500 ms before it, so it pays.
  for (int i = 0; i < 5; ++i) f.last = f.step(JobInputs{}, 455);
  EXPECT_FALSE(d.c.checking());

  // The GPU recovers; the link does not. The next profile shows rank 3 no longer late and the replicas
  // even per slot, the link still slow: the GPU's fail-slow ends and the split reverts at once.
  std::optional<ProfileRequest> next;
  for (int i = 0; i < 40 && !next; ++i) next = f.step(registry(), 455).profile;
  ASSERT_TRUE(next);
  d.feed(dp_profiles(next->command.id, {0.20, 0.20, 0.06, 0.05}), at(f.t, f.t));
  it = f.step(done, 455);
  ty = types(it.events);
  EXPECT_EQ(std::count(ty.begin(), ty.end(), "fail_slow_end"), 1);
  ASSERT_EQ(d.c.fail_slows().size(), 1u);
  EXPECT_EQ(d.c.fail_slows()[0].cause, Cause::kCommunication);
  EXPECT_EQ(d.c.fail_slows()[0].link_a, 0);
  EXPECT_EQ(d.c.fail_slows()[0].link_b, 1);
  ASSERT_TRUE(it.plan);
  EXPECT_EQ(it.plan->action, PlanAction::kRevert);
  EXPECT_EQ(it.plan->microbatches, (std::vector<int>{8, 8}));
  EXPECT_TRUE(d.c.open_incident());  // the link keeps it open
}

// A TP1 x DP2 x PP2 job of four one-GPU nodes (rank r on node r) advertising S3, whose DP groups {0,1} and
// {2,3} cross the links 0-1 and 2-3; baselined healthy (5 % of the window in each DP group).
struct LinkJob {
  TwoFaults f;
  JobLayout l;
  const std::vector<GroupMembers> groups = {GroupMembers{0x10, {0, 1}, "2|AllReduce:8"},
                                            GroupMembers{0x11, {2, 3}, "2|AllReduce:8"}};
  explicit LinkJob(double s3_estimate_s, std::vector<std::string> capabilities = {"S3"},
                   ControllerConfig cfg = mitigating())
      : f(std::move(cfg)) {
    Driven& d = f.d;
    d.c.load(MasterState{}, std::nullopt, 0, "0-0", at(0));
    l = layout({8, 8}, {8, 8});
    l.capabilities = std::move(capabilities);
    l.gpus_per_node = 1;
    JobInputs in = registry();
    in.layout = l;
    f.step(in, 400);
    f.t = 2;
    Intents it = f.step(registry(), 400);
    EXPECT_TRUE(it.profile);
    if (!it.profile) return;
    d.feed(profiles(it.profile->command.id, {0.05, 0.05, 0.05, 0.05}), at(f.t, f.t));
    JobInputs g;
    g.groups = groups;
    f.step(g, 400);
    EXPECT_TRUE(d.c.has_baseline());
    l.s3_estimate_s = s3_estimate_s;  // in a layout published after the planner started
    JobInputs later;
    later.layout = l;
    f.step(later, 400);
  }
  std::vector<Event> profiles(const std::string& req, std::array<double, 4> shares) const {
    std::vector<Event> out = dp_profiles(req, shares, 400);
    for (Event& e : out) {
      e.node = e.rank;
      e.source = "agent:" + std::to_string(e.rank);
    }
    return out;
  }
  // A slowdown, and the profile it asks for with these shares: the step after it.
  Intents localise(std::array<double, 4> shares, double iter_ms) {
    f.d.feed({change(event_type::kSlowdown, 0, f.t, 400, 500)}, at(f.t, f.t));
    Intents it = f.step(registry(), iter_ms);
    EXPECT_TRUE(it.profile);
    if (!it.profile) return it;
    f.d.feed(profiles(it.profile->command.id, shares), at(f.t, f.t));
    JobInputs done;
    done.groups = groups;
    done.layout = l;
    return f.step(done, iter_ms);
  }
  // The job says it applies S3 by restarting (s3_by_restart); links 0-1 and 2-3 congested: two fail-slows
  // and the S3 plan that moves both (nullopt if none comes), not yet published.
  std::optional<Plan> s3_by_restart_plan() {
    l.s3_by_restart = true;
    JobInputs told;
    told.layout = l;
    f.step(told, 400);
    Intents it = localise({0.45, 0.45, 0.45, 0.45}, 500);
    EXPECT_EQ(f.d.c.fail_slows().size(), 2u);
    std::optional<Plan> s3 = it.plan;
    for (int i = 0; i < 5 && !s3; ++i) s3 = f.step(JobInputs{}, 500).plan;
    return s3;
  }
  // Links 0-1 and 2-3 congested: two fail-slows, and the S3 plan that moves both, published and applied.
  bool both_links_moved_off() {
    Intents it = localise({0.45, 0.45, 0.45, 0.45}, 500);
    EXPECT_EQ(f.d.c.fail_slows().size(), 2u);
    std::optional<Plan> s3 = it.plan;
    for (int i = 0; i < 5 && !s3; ++i) s3 = f.step(JobInputs{}, 500).plan;
    if (!s3 || s3->strategy != Strategy::kS3) return false;
    f.d.c.plan_published(*s3, at(f.t, f.t));
    f.ack_all(s3->epoch);
    return true;
  }
};

// The link 0-1 congested: {0,1} spends 9x its baseline in its all-reduce, nobody late. How many iterations
// after the localisation S3 is planned (0: not within `within`), with the job's S3 estimate `estimate_s`
// (0: none; the configured 60 s pause stands).
int iterations_to_s3(double estimate_s, int within) {
  LinkJob j(estimate_s);
  Intents it = j.localise({0.45, 0.45, 0.05, 0.05}, 500);
  const std::vector<std::string> ty = types(it.events);
  EXPECT_EQ(std::count(ty.begin(), ty.end(), "fail_slow_open"), 1);
  if (it.plan) return it.plan->strategy == Strategy::kS3 ? 1 : -1;
  for (int i = 1; i <= within; ++i) {
    if (auto p = j.f.step(JobInputs{}, 500).plan) {
      EXPECT_EQ(p->strategy, Strategy::kS3);
      EXPECT_TRUE(p->placement.is_array());
      return i + 1;
    }
  }
  return 0;
}

// A window the job's pace moved in (here its iterations 450 to 500 ms: a fault began or ended inside it) shows
// two states at once: its congested-looking link opens no fail-slow, and the planner does not work from it.
// The next window decides: a steady one opens it (its onset not put back to the held window's time), and so
// does a second unsteady one (a job whose pace keeps moving is not held back for ever).
struct PaceJob {
  LinkJob j{0};
  JobInputs done;
  PaceJob() {
    done.groups = j.groups;
    done.layout = j.l;
  }
  // The next window's reports, every rank's iterations from `least` to `greatest` ms, the link 0-1 slow.
  Intents window(const std::string& request, double least, double greatest) {
    std::vector<Event> reports = j.profiles(request, {0.45, 0.45, 0.05, 0.05});
    for (Event& e : reports) {
      e.detail["iter_ms_min"] = least;
      e.detail["iter_ms_max"] = greatest;
    }
    j.f.d.feed(reports, at(j.f.t, j.f.t));
    return j.f.step(done, 500);
  }
  std::string next_request(int* steps = nullptr) {
    for (int i = 1; i <= 40; ++i) {
      if (auto p = j.f.step(registry(), 500).profile) {
        if (steps) *steps = i;
        return p->command.id;
      }
    }
    return "";
  }
  // A slowdown at job time `onset` and the first window, unsteady: held back.
  Intents held(double& onset) {
    onset = j.f.t;
    j.f.d.feed({change(event_type::kSlowdown, 0, j.f.t, 400, 500)}, at(j.f.t, j.f.t));
    const Intents it = j.f.step(registry(), 500);
    EXPECT_TRUE(it.profile);
    return it.profile ? window(it.profile->command.id, 450, 500) : it;
  }
};

TEST(Controller, AWindowThePaceMovedInOpensNoFailSlowTheNextSteadyOneDoes) {
  PaceJob p;
  Controller& c = p.j.f.d.c;
  double onset = 0;
  Intents it = p.held(onset);
  const double held_t = p.j.f.t;
  std::vector<std::string> ty = types(it.events);
  ASSERT_EQ(std::count(ty.begin(), ty.end(), "localised"), 1);
  EXPECT_EQ(std::count(ty.begin(), ty.end(), "fail_slow_open"), 0);
  EXPECT_TRUE(c.fail_slows().empty());
  for (const Event& e : it.events) {
    if (e.type != event_type::kLocalised) continue;
    std::string err;
    const auto loc = parse_localisation_report(e.detail, &err);
    ASSERT_TRUE(loc) << err;
    EXPECT_EQ(loc->cause, Cause::kCommunication);  // what it shows is reported, not acted on
    EXPECT_NEAR(loc->pace_spread, 500.0 / 450.0, 1e-9);
  }
  EXPECT_FALSE(c.current_localisation());  // nor is it what the planner works from
  EXPECT_EQ(c.stats().unsteady_windows, 1);
  // The next window, asked for an iteration later (not after the 6 s an incident with nothing found waits):
  // one state (iterations 499-501 ms), the same link slow: opened, with the onset the incident had (not the
  // held window's time).
  int steps = 0;
  const std::string next = p.next_request(&steps);
  ASSERT_FALSE(next.empty());
  EXPECT_LE(steps, 2);  // steps of 0.5 s
  it = p.window(next, 499, 501);
  ty = types(it.events);
  EXPECT_EQ(std::count(ty.begin(), ty.end(), "fail_slow_open"), 1);
  ASSERT_EQ(c.fail_slows().size(), 1u);
  EXPECT_EQ(c.fail_slows()[0].cause, Cause::kCommunication);
  EXPECT_LT(c.fail_slows()[0].onset_t_s, held_t);
  EXPECT_NEAR(c.fail_slows()[0].onset_t_s, onset, 1e-9);
  EXPECT_TRUE(c.current_localisation());
  EXPECT_EQ(c.stats().unsteady_windows, 1);
}

TEST(Controller, OnlyTheFirstOfUnsteadyWindowsInARowIsHeldBack) {
  PaceJob p;
  Controller& c = p.j.f.d.c;
  double onset = 0;
  p.held(onset);
  EXPECT_TRUE(c.fail_slows().empty());
  const std::string next = p.next_request();
  ASSERT_FALSE(next.empty());
  const Intents it = p.window(next, 440, 500);  // the pace still moving: judged on what it shows
  const std::vector<std::string> ty = types(it.events);
  EXPECT_EQ(std::count(ty.begin(), ty.end(), "fail_slow_open"), 1);
  ASSERT_EQ(c.fail_slows().size(), 1u);
  EXPECT_EQ(c.fail_slows()[0].cause, Cause::kCommunication);
  EXPECT_TRUE(c.current_localisation());
  EXPECT_EQ(c.stats().unsteady_windows, 1);
}

// The groups' gauges (/metrics) keep the latest profile that timed the groups: a window that timed none of
// them (communicators being replaced) does not empty them.
TEST(Controller, TheGroupGaugesKeepTheLatestProfileThatTimedThem) {
  LinkJob j(0);
  TwoFaults& f = j.f;
  j.localise({0.45, 0.45, 0.05, 0.05}, 500);
  ASSERT_EQ(f.d.c.stats().groups.size(), 2u);
  const double before = f.d.c.stats().groups[0].seconds_per_call;
  EXPECT_GT(before, 0);
  std::optional<ProfileRequest> next;
  for (int i = 0; i < 40 && !next; ++i) next = f.step(registry(), 500).profile;
  ASSERT_TRUE(next);
  std::vector<Event> reports = j.profiles(next->command.id, {0.45, 0.45, 0.05, 0.05});
  for (Event& e : reports) e.detail["groups"] = nlohmann::json::object();
  f.d.feed(reports, at(f.t, f.t));
  JobInputs done;
  done.groups = j.groups;
  done.layout = j.l;
  const Intents it = f.step(done, 500);
  const std::vector<std::string> ty = types(it.events);
  ASSERT_EQ(std::count(ty.begin(), ty.end(), "localised"), 1);
  ASSERT_EQ(f.d.c.stats().groups.size(), 2u);
  EXPECT_DOUBLE_EQ(f.d.c.stats().groups[0].seconds_per_call, before);
}

TEST(Controller, APlacementStaysForTheFailSlowsLeftWhenOneItServedEnds) {
  // Links 0-1 and 2-3 congested: S3 moves both. Then 2-3 recovers: the placement stays for 0-1 (it is no
  // worse for it), it is not reverted.
  LinkJob j(0.01);
  TwoFaults& f = j.f;
  ASSERT_TRUE(j.both_links_moved_off());
  Intents it;
  for (int i = 0; i < 6; ++i) f.step(JobInputs{}, 420);  // measured: it pays
  // 2-3 back at its baseline, 0-1 still slow: the latter's fail-slow alone keeps the placement.
  std::optional<ProfileRequest> next;
  for (int i = 0; i < 40 && !next; ++i) next = f.step(registry(), 420).profile;
  ASSERT_TRUE(next);
  f.d.feed(j.profiles(next->command.id, {0.45, 0.45, 0.05, 0.05}), at(f.t, f.t));
  JobInputs done;
  done.groups = j.groups;
  done.layout = j.l;
  it = f.step(done, 420);
  ASSERT_EQ(f.d.c.fail_slows().size(), 1u);
  EXPECT_EQ(f.d.c.fail_slows()[0].link_a, 0);
  for (int i = 0; i < 10; ++i) {
    if (it.plan) {
      EXPECT_NE(it.plan->action, PlanAction::kRevert) << "reverted while link 0-1 is still congested: " << it.plan->reason;
    }
    it = f.step(JobInputs{}, 420);
  }
}

// A job that applies S3 by restarting (s3_by_restart, a Megatron job): its acknowledged S3 plan takes it
// down like an S4 restart, and it comes back in the same shape with the plan's placement as its own, which
// nothing reverts (a revert would be a second restart).
TEST(Controller, AnS3AppliedByARestartIsTheJobsNewPlacementNotARemedyToRevert) {
  LinkJob j(0.01);
  TwoFaults& f = j.f;
  Driven& d = f.d;
  const std::optional<Plan> s3 = j.s3_by_restart_plan();
  ASSERT_TRUE(s3);
  ASSERT_EQ(s3->strategy, Strategy::kS3);
  Intents it;
  d.c.plan_published(*s3, at(f.t, f.t));
  f.ack_all(s3->epoch);
  const std::vector<std::string> ty = types(f.last.events);
  EXPECT_NE(std::find(ty.begin(), ty.end(), "plan_applied"), ty.end());
  EXPECT_EQ(std::count(ty.begin(), ty.end(), "fail_slow_end"), 2);
  EXPECT_NE(std::find(ty.begin(), ty.end(), "incident_close"), ty.end());
  EXPECT_TRUE(d.c.restarting());
  // Down for its checkpoint and restart: nothing is profiled or planned, however long it takes.
  for (int i = 0; i < 30; ++i) {
    f.t += 0.5;
    const Intents down = d.c.step(at(f.t, f.t), registry());
    EXPECT_FALSE(down.profile) << i;
    EXPECT_FALSE(down.plan) << i;
    EXPECT_TRUE(d.c.needs(at(f.t, f.t)).layout);
  }
  // Back with the plan's placement, which it started with.
  JobInputs back = registry();
  back.layout = j.l;
  std::vector<PlacementEntry> placed;
  for (const auto& e : s3->placement) placed.push_back({e.at("rank"), e.at("tp"), e.at("dp"), e.at("pp")});
  ASSERT_EQ(placed.size(), 4u);
  ASSERT_NE(placed, megatron_placement(j.l));
  back.layout->placement = placed;
  back.layout->initial_placement = placed;
  it = f.step(back, 400);
  ASSERT_EQ(types(it.events), std::vector<std::string>{"job_restart"});
  std::string err;
  const auto r = parse_job_restart(it.events[0].detail, &err);
  ASSERT_TRUE(r) << err;
  EXPECT_EQ(r->strategy, Strategy::kS3);
  EXPECT_EQ(r->epoch, s3->epoch);
  EXPECT_EQ(r->world, 4);
  EXPECT_FALSE(d.c.restarting());
  EXPECT_TRUE(d.c.planning());
  ASSERT_TRUE(d.c.planner());
  EXPECT_FALSE(d.c.planner()->moved());
  for (int i = 0; i < 40; ++i) {
    it = f.step(registry(), 400);
    EXPECT_FALSE(it.plan) << "a plan for a healthy job: " << it.plan->reason;
  }
}

// The same S3 plan timed out (the job's checkpoint outlasted the acknowledgement deadline) but the job
// restarted with it all the same: its layout, back with another initial placement, is that restart.
TEST(Controller, AnS3RestartWhosePlanTimedOutIsSeenInTheLayoutItComesBackWith) {
  LinkJob j(0.01);
  TwoFaults& f = j.f;
  Driven& d = f.d;
  const std::optional<Plan> s3 = j.s3_by_restart_plan();
  ASSERT_TRUE(s3);
  ASSERT_EQ(s3->strategy, Strategy::kS3);
  Intents it;
  d.c.plan_published(*s3, at(f.t, f.t));
  f.t += 100;  // past the acknowledgement deadline, no acknowledgement
  JobInputs none;
  none.acks_read = true;
  it = d.c.step(at(f.t, f.t), none);
  ASSERT_EQ(types(it.events), std::vector<std::string>{"plan_timeout"});
  EXPECT_TRUE(d.c.needs(at(f.t, f.t)).layout);  // watching for the restarted job's layout
  EXPECT_EQ(d.c.fail_slows().size(), 2u);
  // Republished unchanged (the job did not restart): nothing happens.
  JobInputs same = registry();
  same.layout = j.l;
  it = f.step(same, 500);
  const auto unchanged = types(it.events);
  EXPECT_EQ(std::count(unchanged.begin(), unchanged.end(), "job_restart"), 0);
  EXPECT_FALSE(d.c.restarting());
  EXPECT_EQ(d.c.fail_slows().size(), 2u);
  // Back with the plan's placement as its own.
  JobInputs back = registry();
  back.layout = j.l;
  for (const auto& e : s3->placement) back.layout->placement.push_back({e.at("rank"), e.at("tp"), e.at("dp"), e.at("pp")});
  back.layout->initial_placement = back.layout->placement;
  it = f.step(back, 400);
  const auto ty = types(it.events);
  EXPECT_EQ(std::count(ty.begin(), ty.end(), "fail_slow_end"), 2);
  ASSERT_NE(std::find(ty.begin(), ty.end(), "job_restart"), ty.end());
  const Event& restart = *std::find_if(it.events.begin(), it.events.end(), [](const Event& e) { return e.type == "job_restart"; });
  std::string err;
  const auto r = parse_job_restart(restart.detail, &err);
  ASSERT_TRUE(r) << err;
  EXPECT_EQ(r->strategy, Strategy::kS3);
  EXPECT_EQ(r->epoch, 0);
  EXPECT_FALSE(d.c.restarting());
  EXPECT_TRUE(d.c.fail_slows().empty());
  ASSERT_TRUE(d.c.planner());
  EXPECT_FALSE(d.c.planner()->moved());
}

TEST(Controller, APlacementThatDidNotPayIsNotAppliedAgainWhenItsLinksComeBackInTheIncident) {
  // Links 0-1 and 2-3 congested: S3 moves both, the iterations are slower under it, it is undone and the
  // undo confirms it. Then 2-3's fail-slow ends and opens again in the same incident (a link that comes and
  // goes): a new fail-slow, but the same placement from the same configuration is not applied again (a
  // DP 8 run re-applied one 25 s after its undo and paid for its switch twice).
  LinkJob j(0.01);
  TwoFaults& f = j.f;
  ASSERT_TRUE(j.both_links_moved_off());
  Intents it;
  std::optional<Plan> undo;
  for (int i = 0; i < 8 && !undo; ++i) undo = f.step(JobInputs{}, 560).plan;  // slower under it
  ASSERT_TRUE(undo);
  EXPECT_NE(undo->reason.find("does not pay"), std::string::npos) << undo->reason;
  f.d.c.plan_published(*undo, at(f.t, f.t));
  f.ack_all(undo->epoch);
  for (int i = 0; i < 6; ++i) EXPECT_FALSE(f.step(JobInputs{}, 500).plan) << i;  // confirmed without it
  for (const FailSlow& x : f.d.c.fail_slows()) EXPECT_FALSE(x.account.s3) << x.id;
  std::set<std::int64_t> before;
  for (const FailSlow& x : f.d.c.fail_slows()) before.insert(x.id);
  // Link 2-3 back at its baseline: its fail-slow ends (0-1's keeps the incident open).
  JobInputs done;
  done.groups = j.groups;
  done.layout = j.l;
  std::optional<ProfileRequest> next;
  for (int i = 0; i < 60 && !next; ++i) next = f.step(registry(), 500).profile;
  ASSERT_TRUE(next);
  f.d.feed(j.profiles(next->command.id, {0.45, 0.45, 0.05, 0.05}), at(f.t, f.t));
  f.step(done, 500);
  ASSERT_EQ(f.d.c.fail_slows().size(), 1u);
  ASSERT_TRUE(f.d.c.open_incident());
  // ... and congested again: a new fail-slow for it.
  next.reset();
  for (int i = 0; i < 60 && !next; ++i) next = f.step(registry(), 500).profile;
  ASSERT_TRUE(next);
  f.d.feed(j.profiles(next->command.id, {0.45, 0.45, 0.45, 0.45}), at(f.t, f.t));
  it = f.step(done, 500);
  ASSERT_EQ(f.d.c.fail_slows().size(), 2u);
  EXPECT_EQ(before.count(f.d.c.fail_slows()[1].id), 0u) << "a new fail-slow";
  for (int i = 0; i < 40; ++i) {
    if (it.plan) {
      EXPECT_NE(it.plan->strategy, Strategy::kS3) << "the placement that did not pay, again: " << it.plan->reason;
    }
    it = f.step(JobInputs{}, 500);
  }
  for (const FailSlow& x : f.d.c.fail_slows()) EXPECT_FALSE(x.account.s3) << x.id;
}

TEST(Controller, ASlowGpuThatClimbsToS3KeepsItsSplit) {
  // Rank 3's GPU slow (rank 2 waits for it in {2,3}) and the link 0-1 congested, on a job that applies S2
  // and S3 and says its switch costs 10 ms: the link gets a placement, and the GPU's loss pays for S2 and
  // then at once for S3. At S3 it still gets its split (S3 finds no better placement for it) and keeps it
  // while it is slow.
  LinkJob j(0.01, {"S2", "S3"});
  TwoFaults& f = j.f;
  for (int i = 0; i < 6; ++i) f.step(JobInputs{}, 500);  // slow since a few iterations before the report
  Intents it = j.localise({0.45, 0.45, 0.60, 0.02}, 500);
  ASSERT_EQ(f.d.c.fail_slows().size(), 2u);
  // Iterations: 500 ms, 60 ms less under the placement, 30 ms less under the split (each pays).
  bool split = false, placed = false;
  for (int i = 0; i < 40; ++i) {
    if (it.plan) {
      const Plan p = *it.plan;
      EXPECT_FALSE(p.action == PlanAction::kRevert && !p.microbatches.empty() && split)
          << "the split reverted while the GPU is still slow: " << p.reason;
      if (!p.microbatches.empty()) split = p.action == PlanAction::kApply;
      if (p.placement.is_array()) placed = p.action == PlanAction::kApply;
      f.d.c.plan_published(p, at(f.t, f.t));
      f.ack_all(p.epoch);
    }
    it = f.step(JobInputs{}, 500 - (placed ? 60 : 0) - (split ? 30 : 0));
  }
  EXPECT_TRUE(split);
  EXPECT_TRUE(placed);
  int at_s3 = 0;
  for (const FailSlow& x : f.d.c.fail_slows()) at_s3 += x.cause == Cause::kComputation && x.account.rung == Strategy::kS3;
  EXPECT_EQ(at_s3, 1) << "the GPU's account climbed to S3";
}

// Under --validate auto the link is confirmed by a pause before S3: how many iterations after the
// localisation the pause is armed, or (a job that marks no iterations cannot be paused) S3 planned; 0: not
// within `within`. A pause is expected to cost `pause_s`.
int iterations_to_confirm(double pause_s, bool marks, int within) {
  ControllerConfig cfg = mitigating();
  cfg.validate = ValidateMode::kAuto;
  cfg.pause.expected_pause_s = pause_s;
  LinkJob j(0.2, {"S3"}, cfg);
  j.f.marks = marks;
  Intents it = j.localise({0.45, 0.45, 0.05, 0.05}, 500);
  for (int i = 1; i <= within; ++i) {
    for (const ProfileRequest& c : it.commands) {
      if (c.command.cmd == "pause") return marks ? i : -1;
    }
    if (it.plan) {
      EXPECT_FALSE(marks) << "S3 before its validation: " << it.plan->reason;
      return i;
    }
    it = j.f.step(JobInputs{}, 500);
  }
  return 0;
}

TEST(Controller, AutoValidationChargesItsPauseToTheS3ItConfirms) {
  // 0.1 s lost per iteration. S3 costs 0.2 s on this job; confirming it first, 2 s more: 20 more iterations
  // of loss before the account climbs to S3 and the pause is armed.
  const int cheap = iterations_to_confirm(0.01, true, 60);
  const int dear = iterations_to_confirm(2.0, true, 60);
  ASSERT_GE(cheap, 1);
  EXPECT_LE(cheap, 4);
  ASSERT_GE(dear, 1) << "the pause was never armed";
  EXPECT_GE(dear - cheap, 19);
  EXPECT_LE(dear - cheap, 21);
  // A job that cannot be paused (it marks no iterations) gets no pause, and S3 is not charged one.
  const int unpaused = iterations_to_confirm(2.0, false, 60);
  EXPECT_GE(unpaused, 1);
  EXPECT_LE(unpaused, cheap + 1);
}

// A slow GPU whose account climbs to S3 on a job where no placement would be faster: S3 is declined
// without a validation pause (a pause only confirms a remedy that would be applied).
TEST(Controller, NoValidationPauseForAnS3ThatNoPlacementWouldPay) {
  ControllerConfig cfg = mitigating();
  cfg.validate = ValidateMode::kAuto;
  cfg.pause.expected_pause_s = 0.01;
  LinkJob j(0.01, {"S2", "S3"}, cfg);
  TwoFaults& f = j.f;
  f.marks = true;
  for (int i = 0; i < 6; ++i) f.step(JobInputs{}, 500);  // slow since a few iterations before the report
  Intents it = j.localise({0.05, 0.05, 0.60, 0.02}, 500);
  ASSERT_EQ(f.d.c.fail_slows().size(), 1u);
  ASSERT_EQ(f.d.c.fail_slows()[0].cause, Cause::kComputation);
  bool split = false;
  for (int i = 0; i < 40; ++i) {
    for (const ProfileRequest& c : it.commands) EXPECT_NE(c.command.cmd, "pause") << "paused at step " << i;
    if (it.plan) {
      EXPECT_FALSE(it.plan->placement.is_array()) << it.plan->reason;
      if (!it.plan->microbatches.empty()) split = it.plan->action == PlanAction::kApply;
      f.d.c.plan_published(*it.plan, at(f.t, f.t));
      f.ack_all(it.plan->epoch);
    }
    it = f.step(JobInputs{}, split ? 470 : 500);
  }
  EXPECT_TRUE(split);
  // The profile S3 found no placement on measured the job before the split: S3 is declined on one of the
  // configuration in force.
  std::optional<ProfileRequest> next;
  for (int i = 0; i < 40 && !next; ++i) next = f.step(registry(), 470).profile;
  ASSERT_TRUE(next);
  f.d.feed(j.profiles(next->command.id, {0.05, 0.05, 0.60, 0.02}), at(f.t, f.t));
  JobInputs done;
  done.groups = j.groups;
  done.layout = j.l;
  it = f.step(done, 470);
  for (int i = 0; i < 10; ++i) {
    for (const ProfileRequest& c : it.commands) EXPECT_NE(c.command.cmd, "pause") << "paused after the split";
    if (it.plan) {
      EXPECT_FALSE(it.plan->placement.is_array()) << it.plan->reason;
    }
    it = f.step(JobInputs{}, 470);
  }
  EXPECT_FALSE(f.d.c.fail_slows()[0].account.s3) << "S3 declined for the GPU";
}

// The pause is no iteration of the job: the iteration that held it adds to no fail-slow's loss (its time is
// the remedy's price, charged before the climb).
TEST(Controller, AValidationPauseIsNotCountedAsTheFailSlowsLoss) {
  ControllerConfig cfg = mitigating();
  cfg.validate = ValidateMode::kAuto;
  cfg.pause.expected_pause_s = 0.01;
  LinkJob j(0.2, {"S3"}, cfg);
  TwoFaults& f = j.f;
  f.marks = true;
  Intents it = j.localise({0.45, 0.45, 0.05, 0.05}, 500);
  std::optional<ProfileRequest> pause;
  for (int i = 0; i < 10 && !pause; ++i) {
    for (const ProfileRequest& c : it.commands) {
      if (c.command.cmd == "pause") pause = c;
    }
    if (!pause) it = f.step(JobInputs{}, 500);
  }
  ASSERT_TRUE(pause);
  auto report = [&](int rank, const char* state, double paused_ms) {
    PauseReport r;
    r.id = pause->command.id;
    r.state = state;
    r.reason = "deadline";
    r.paused_ms = paused_ms;
    Event e;
    e.type = event_type::kPause;
    e.t_s = f.t;
    e.rank = rank;
    e.node = rank;
    e.source = "agent:" + std::to_string(rank);
    e.detail = to_json(r);
    return e;
  };
  std::vector<Event> trapped, resumed;
  for (int r = 0; r < 4; ++r) {
    trapped.push_back(report(r, "trapped", 0));
    resumed.push_back(report(r, "resumed", 3000));  // each stood still 3 s (its deadline: the pause is lost)
  }
  // Armed, no rank trapped yet: the job runs on, and the master steps at its usual pace.
  EXPECT_TRUE(f.d.c.validating());
  EXPECT_FALSE(f.d.c.pause_standing());
  // While the ranks stand still the job reports no new iteration (the same index again).
  f.d.feed(trapped, at(f.t, f.t));
  --f.index;
  f.step(JobInputs{}, 500);
  EXPECT_TRUE(f.d.c.pause_standing()) << "ranks trapped: the master steps faster until they have resumed";
  f.d.feed(resumed, at(f.t, f.t));
  bool validated = false;
  for (int i = 0; i < 3 && !validated; ++i) {
    --f.index;
    const std::vector<std::string> ty = types(f.step(JobInputs{}, 500).events);
    validated = std::count(ty.begin(), ty.end(), "validated") == 1;
  }
  ASSERT_TRUE(validated);
  EXPECT_FALSE(f.d.c.pause_standing()) << "every rank resumed: the usual pace again";
  ASSERT_EQ(f.d.c.fail_slows().size(), 1u);
  const double before = f.d.c.fail_slows()[0].account.loss_s;  // the accounts as of the verdict
  // The iteration that held the pause, then ordinary ones until the accounts are saved again.
  int k = 1;
  for (bool saved = f.step(JobInputs{}, 3500).persist_state; !saved && k < 30; ++k) {
    saved = f.step(JobInputs{}, 500).persist_state;
  }
  ASSERT_LT(k, 30);
  // k iterations 0.1 s slower than the healthy 0.4 s each, the pause not among them (it would add 3 s).
  EXPECT_NEAR(f.d.c.fail_slows()[0].account.loss_s - before, 0.1 * k, 0.01) << k << " iterations";
}

// The driver paces the job from another rank when the pacing rank's iterations stop reaching Redis
// (daemon/pace.h). Each rank's agent counts its own iterations, so the new rank's index says nothing of how
// many iterations passed: the first reading from it is a first look, and the accounts go on one iteration at a
// time (before, a new rank 1,000 iterations ahead counted as 64 slow iterations at once).
TEST(Controller, AnotherPacingRankIsAFirstLookNotAJumpOfIterations) {
  LinkJob j(0.2, {});  // a job that can apply no remedy: the accounts only
  TwoFaults& f = j.f;
  j.localise({0.45, 0.45, 0.05, 0.05}, 500);
  ASSERT_EQ(f.d.c.fail_slows().size(), 1u);
  // Accounts saved once more, then the pace comes from rank 2, whose agent is 1,000 iterations ahead.
  for (int k = 0; k < 30 && !f.step(JobInputs{}, 500).persist_state; ++k) {
  }
  const double before = f.d.c.fail_slows()[0].account.loss_s;
  f.index += 1000;
  int k = 0;
  bool saved = false;
  for (; !saved && k < 30; ++k) {
    JobInputs in;
    in.pace = pace(++f.index, 500);
    in.pace->rank = 2;
    f.t += 0.5;
    saved = f.d.c.step(at(f.t, f.t), in).persist_state;
  }
  ASSERT_TRUE(saved);
  // k readings from rank 2: the first a first look, then k - 1 iterations 0.1 s slower than the healthy 0.4 s.
  EXPECT_NEAR(f.d.c.fail_slows()[0].account.loss_s - before, 0.1 * (k - 1), 0.01) << k << " readings";
}

// A master that died between publishing plans and committing their events: the next one records them,
// marked, once, oldest first; plans whose events are in the stream are not written again.
TEST(Controller, PlansAnEarlierMasterDidNotRecordGetTheirEventsOnce) {
  Driven d;
  MasterState st;
  st.plans_recorded = 4;
  d.c.load(st, std::nullopt, 6, "9-0", at(50));
  std::vector<Plan> plans;
  for (std::int64_t e = 4; e <= 6; ++e) {
    Plan p;
    p.epoch = e;
    p.strategy = Strategy::kS2;
    p.microbatches = {10, 6};
    p.t_unix_ms = 1'800'000'000'000 + e;
    plans.push_back(p);
  }
  const Now now = at(50);  // wall time 1'700'000'050'000 ms, job time 50 s
  for (Plan& p : plans) p.t_unix_ms = now.unix_ms - 10'000 + p.epoch * 1000;
  Intents it = d.c.record_plans_late(plans, 4, now);
  ASSERT_EQ(types(it.events), (std::vector<std::string>{"plan", "plan"}));
  EXPECT_EQ(it.events[0].detail["epoch"], 5);
  EXPECT_EQ(it.events[1].detail["epoch"], 6);
  EXPECT_EQ(it.events[1].detail["recorded_late"], true);
  EXPECT_EQ(it.events[1].t_unix_ms, now.unix_ms - 4000);  // when it was published, in wall time
  EXPECT_DOUBLE_EQ(it.events[1].t_s, 46.0);                // and in job time
  EXPECT_DOUBLE_EQ(it.events[0].t_s, 45.0);
  EXPECT_EQ(it.events[1].source, "master");
  EXPECT_TRUE(it.persist_state);
  EXPECT_EQ(d.c.state().plans_recorded, 6);
  EXPECT_TRUE(d.c.record_plans_late(plans, 4, at(51)).events.empty());
}

// A plan event a failed commit left to send counts as recorded (the driver passes its epoch): not written twice.
TEST(Controller, APlanEventWaitingToBeSentIsNotRecordedLateAgain) {
  Driven d;
  MasterState st;
  st.plans_recorded = 4;
  d.c.load(st, std::nullopt, 6, "9-0", at(50));
  Plan p5, p6;
  p5.epoch = 5;
  p6.epoch = 6;
  Intents it = d.c.record_plans_late({p5, p6}, 5, at(50));
  ASSERT_EQ(types(it.events), std::vector<std::string>{"plan"});
  EXPECT_EQ(it.events[0].detail["epoch"], 6);
  // Nothing missing, but the state learns that 5 is recorded (so a reload after its commit skips it too).
  Driven e;
  e.c.load(st, std::nullopt, 5, "9-0", at(50));
  it = e.c.record_plans_late({p5}, 5, at(50));
  EXPECT_TRUE(it.events.empty());
  EXPECT_TRUE(it.persist_state);
  EXPECT_EQ(e.c.state().plans_recorded, 5);
}

// A master restarted while a plan was being applied finds the incident open with no fail-slow; a profile that
// then measures no iteration (the job switching configuration) is followed by the next one after the job's
// re-profile gap in iterations, not the 6 s an incident with nothing found waits (a remedy may be in force
// that nothing tracks: every second of it after the fault ends is lost).
TEST(Controller, AnUnmeasuredProfileOfAnUnsettledIncidentIsRepeatedAtTheJobsPace) {
  ControllerConfig cfg = mitigating();
  cfg.profile_grace_s = 0.5;
  Driven d(cfg);
  load_mid_incident(d);
  JobInputs in = registry();
  in.pace = pace(50, 400);
  Intents it = d.c.step(at(100), in);
  ASSERT_TRUE(it.profile);
  // Every rank's report: no iteration measured in the window.
  d.feed(dp_profiles(it.profile->command.id, {0.05, 0.05, 0.05, 0.05}, 0), at(103));
  JobInputs g;
  g.groups = {GroupMembers{0x10, {0, 1}, "2|AllReduce:8"}, GroupMembers{0x11, {2, 3}, "2|AllReduce:8"}};
  g.pace = pace(57, 400);
  it = d.c.step(at(103), g);
  EXPECT_FALSE(it.profile);
  // The next profile within about one 400 ms iteration of the last one's end, not 6 s later.
  auto next_profile = [&](double from, std::string* id) -> std::optional<double> {
    for (double t = from; t < from + 8; t += 0.1) {
      JobInputs r = registry();
      r.pace = pace(58 + static_cast<std::int64_t>((t - 103) / 0.4), 400);
      if (auto i = d.c.step(at(t), r); i.profile) {
        *id = i.profile->command.id;
        return t;
      }
    }
    return std::nullopt;
  };
  std::string id;
  const auto next = next_profile(103.1, &id);
  ASSERT_TRUE(next);
  EXPECT_LT(*next, 104.0);
  // Once only: a second profile in a row that measures nothing is followed by the next after the usual 6 s
  // (a job whose profiles keep measuring nothing is not profiled back to back).
  d.feed(dp_profiles(id, {0.05, 0.05, 0.05, 0.05}, 0), at(*next + 3));
  g.pace = pace(70, 400);
  d.c.step(at(*next + 3), g);
  const auto third = next_profile(*next + 3.1, &id);
  ASSERT_TRUE(third);
  EXPECT_GE(*third, *next + 3 + 5.9);
}

TEST(Controller, S3IsChargedTheJobsOwnEstimateOfItsSwitch) {
  // Configured: 60 s of pause, 0.1 s lost per iteration: not within 50 iterations.
  EXPECT_EQ(iterations_to_s3(0, 50), 0);
  // The job says its switch costs 0.2 s: two iterations of loss (plus the one since the onset) pay for it.
  const int n = iterations_to_s3(0.2, 50);
  EXPECT_GE(n, 1);
  EXPECT_LE(n, 3);
}

// The first profiling window after an incident opens, on a controller given these settings (in turn).
double first_window(const std::vector<JobSettings>& settings) {
  ControllerConfig cfg = mitigating();
  cfg.profile_iterations = 3;
  TwoFaults f(cfg);
  Driven& d = f.d;
  d.c.load(MasterState{}, std::nullopt, 0, "0-0", at(0));
  JobInputs in = registry();
  in.layout = layout({8, 8}, {8, 8});
  f.step(in, 400);
  for (const JobSettings& s : settings) d.c.apply_settings(s);
  d.feed({change(event_type::kSlowdown, 3, f.t, 400, 500)}, at(f.t, f.t));
  const auto it = f.step(registry(), 400);
  EXPECT_TRUE(it.profile);
  return it.profile ? it.profile->command.duration_s : -1;
}

TEST(Controller, AnOperatorsSettingsChangeTheProfileWindowAndGoBackWhenUnset) {
  EXPECT_NEAR(first_window({}), 1.2, 1e-9);  // 3 iterations of 0.4 s, the master's flag
  JobSettings six;
  six.version = 1;
  six.profile_iterations = 6;
  EXPECT_NEAR(first_window({six}), 2.4, 1e-9);
  JobSettings none;
  none.version = 2;  // unset: the master's own flag again
  EXPECT_NEAR(first_window({six, none}), 1.2, 1e-9);
}

TEST(Controller, ARemedyThatDoesNotPayIsUndoneAndNotTriedAgain) {
  TwoFaults f(mitigating());
  Driven& d = f.d;
  f.rank3_slows();
  Intents it = f.step(registry(), 500);
  ASSERT_TRUE(it.profile);
  d.feed(dp_profiles(it.profile->command.id, {0.25, 0.05, 0.30, 0.02}), at(f.t, f.t));
  JobInputs done;
  done.groups = two_groups();
  done.layout = layout({8, 8}, {8, 8});
  it = f.step(done, 500);
  ASSERT_EQ(d.c.fail_slows().size(), 1u);
  std::optional<Plan> plan;
  for (int i = 0; i < 10 && !plan; ++i) plan = f.step(JobInputs{}, 500).plan;
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->strategy, Strategy::kS2);
  d.c.plan_published(*plan, at(f.t, f.t));
  f.ack_all(plan->epoch);
  EXPECT_TRUE(d.c.checking());
  // Under the split the iterations are no faster: one to settle, then check_iterations of them.
  std::optional<Plan> undo;
  std::vector<std::string> seen;
  for (int i = 0; i < 6 && !undo; ++i) {
    it = f.step(JobInputs{}, 505);
    for (const auto& t : types(it.events)) seen.push_back(t);
    undo = it.plan;
  }
  ASSERT_TRUE(undo);
  EXPECT_NE(std::find(seen.begin(), seen.end(), "remedy_check"), seen.end());
  EXPECT_EQ(undo->action, PlanAction::kRevert);
  EXPECT_EQ(undo->microbatches, (std::vector<int>{8, 8}));
  EXPECT_NE(undo->reason.find("does not pay"), std::string::npos) << undo->reason;
  d.c.plan_published(*undo, at(f.t, f.t));
  f.ack_all(undo->epoch);
  // Not tried again for this fail-slow, however long it lasts.
  for (int i = 0; i < 50; ++i) EXPECT_FALSE(f.step(JobInputs{}, 500).plan) << i;
  ASSERT_EQ(d.c.fail_slows().size(), 1u);
  EXPECT_FALSE(d.c.fail_slows()[0].account.s2);

  // The account is in the state the driver commits: a restarted master continues it.
  Driven again(mitigating());
  again.c.load(d.c.state(), d.c.open_incident(), 10, "0-0", at(100));
  ASSERT_EQ(again.c.fail_slows().size(), 1u);
  EXPECT_FALSE(again.c.fail_slows()[0].account.s2);
  EXPECT_GT(again.c.fail_slows()[0].account.loss_s, 1.0);
}

// One window's replica times do not decline S2 for good. Rank 3's GPU slow; its first profiles show its
// replica hardly slower (a loaded machine's window: no split beats the even one). When a later profile shows
// the replica slow, the split comes; when kS2NothingBetterToDecline of them found nothing, S2 is declined.
TEST(Controller, S2IsDeclinedOnlyWhenSeveralLocalisationsFoundNoBetterSplit) {
  for (const bool shows_later : {true, false}) {
    SCOPED_TRACE(shows_later ? "a later profile shows the slow replica" : "no profile shows it");
    TwoFaults f(mitigating());
    Driven& d = f.d;
    f.rank3_slows();
    JobInputs done;
    done.groups = two_groups();
    done.layout = layout({8, 8}, {8, 8});
    int at_s2 = 0;  // localisations of the fail-slow that left its account wanting S2 (or declined it)
    int declined_at = 0;  // ... the one after which S2 was declined
    std::int64_t id = 0;
    std::optional<Plan> plan;
    bool declined_early = false;
    Intents it = f.step(registry(), 500);
    for (int i = 0; i < 300 && !plan && at_s2 < kS2NothingBetterToDecline + 2; ++i) {
      if (it.profile) {
        // Rank 3 late in {2,3} by 13 % of the step: replica 1 (ranks 1, 3) at 1.09x replica 0 per slot (no
        // split beats 8/8), else at 1.33x.
        const bool weak = at_s2 < kS2NothingBetterToDecline - 1 || !shows_later;
        d.feed(dp_profiles(it.profile->command.id, weak ? std::array<double, 4>{0.25, 0.25, 0.35, 0.22}
                                                       : std::array<double, 4>{0.25, 0.05, 0.30, 0.02}),
               at(f.t, f.t));
        it = f.step(done, 500);
        ASSERT_EQ(d.c.fail_slows().size(), 1u) << at_s2;
        if (id == 0) id = d.c.fail_slows()[0].id;
        ASSERT_EQ(d.c.fail_slows()[0].id, id) << "the fail-slow ended and reopened (a fresh account)";
        const SkiAccount& a = d.c.fail_slows()[0].account;
        at_s2 += a.rung == Strategy::kS2 || !a.s2;
        if (at_s2 == 1) {
          EXPECT_TRUE(a.s2);
        }
        if (at_s2 < kS2NothingBetterToDecline) declined_early = declined_early || !a.s2;
        if (!a.s2 && declined_at == 0) declined_at = at_s2;
      } else {
        it = f.step(registry(), 500);
      }
      plan = it.plan;
    }
    EXPECT_FALSE(declined_early) << "S2 declined on fewer than " << kS2NothingBetterToDecline << " localisations";
    ASSERT_EQ(d.c.fail_slows().size(), 1u);
    if (shows_later) {
      ASSERT_TRUE(plan);
      EXPECT_EQ(at_s2, kS2NothingBetterToDecline);
      EXPECT_EQ(plan->strategy, Strategy::kS2);
      EXPECT_EQ(plan->action, PlanAction::kApply);
      EXPECT_GT(plan->microbatches.at(0), plan->microbatches.at(1));
    } else {
      EXPECT_FALSE(plan) << plan->reason;
      EXPECT_EQ(declined_at, kS2NothingBetterToDecline);
      EXPECT_FALSE(d.c.fail_slows()[0].account.s2);
    }
  }
}

// A job that offers only S4 (TP1 x DP2 x PP2, GPUs per node unknown): rank 3's GPU slows.
struct S4Job {
  TwoFaults f;
  explicit S4Job(double slow_ms) : f(config()) {
    Driven& d = f.d;
    d.c.load(MasterState{}, std::nullopt, 0, "0-0", at(0));
    JobInputs in = registry();
    in.layout = s4_layout();
    f.step(in, 400);
    d.feed({change(event_type::kSlowdown, 3, 1, 400, slow_ms)}, at(1, 1));
    Intents it = f.step(registry(), slow_ms);
    EXPECT_TRUE(it.profile);
    if (!it.profile) return;
    d.feed(dp_profiles(it.profile->command.id, {0.25, 0.05, 0.30, 0.02}, slow_ms), at(f.t, f.t));
    JobInputs done;
    done.groups = two_groups();
    done.layout = s4_layout();
    f.step(done, slow_ms);
    EXPECT_EQ(d.c.fail_slows().size(), 1u);
  }
  static ControllerConfig config() {
    ControllerConfig cfg = mitigating();
    cfg.planner.ski.s4_restart_s = 1;  // pays after a few slow iterations
    return cfg;
  }
  static JobLayout s4_layout() {
    JobLayout l = layout({8, 8}, {8, 8});
    l.capabilities = {"S4"};
    return l;
  }
  // Steps the slow job until the S4 plan comes (nullopt if it never does).
  std::optional<Plan> until_s4() {
    std::optional<Plan> plan;
    for (int i = 0; i < 20 && !plan; ++i) plan = f.step(JobInputs{}, 1000).plan;
    return plan;
  }
  // The job back with one replica (ranks 0 and 1) and all 16 micro-batches on it.
  static JobInputs back_with_one_replica() {
    JobInputs back = registry();
    back.layout = layout({16}, {16});
    back.layout->dp = 1;
    back.layout->world = 2;
    return back;
  }
};

TEST(Controller, S4RestartEndsTheOldJobsFailSlowsAndStartsAgainOnItsNewLayout) {
  S4Job job(1000);
  TwoFaults& f = job.f;
  Driven& d = f.d;
  const std::optional<Plan> plan = job.until_s4();
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->strategy, Strategy::kS4);
  EXPECT_EQ(plan->exclude_ranks, (std::vector<int>{3}));
  // One replica is left for 16 micro-batches: (16 + 1) / (8 + 1) of the healthy 400 ms, which beats 1000 ms.
  EXPECT_NEAR(plan->predicted_iteration_s, 0.4 * 17.0 / 9.0, 0.02);
  d.c.plan_published(*plan, at(f.t, f.t));
  f.ack_all(plan->epoch);
  const std::vector<std::string> ty = types(f.last.events);
  EXPECT_NE(std::find(ty.begin(), ty.end(), "plan_applied"), ty.end());
  EXPECT_NE(std::find(ty.begin(), ty.end(), "fail_slow_end"), ty.end());
  EXPECT_NE(std::find(ty.begin(), ty.end(), "incident_close"), ty.end());
  EXPECT_TRUE(d.c.restarting());
  EXPECT_TRUE(d.c.fail_slows().empty());
  EXPECT_FALSE(d.c.open_incident());
  EXPECT_FALSE(d.c.planning());

  // Down: nothing is profiled (no baseline of a job that is not running), however long it takes.
  for (int i = 0; i < 30; ++i) {
    JobInputs in = registry();
    in.pace = std::nullopt;
    f.t += 0.5;
    EXPECT_FALSE(d.c.step(at(f.t, f.t), in).profile) << i;
    EXPECT_TRUE(d.c.needs(at(f.t, f.t)).layout);
  }
  // Back with one replica (ranks 0 and 1) and all 16 micro-batches on it.
  Intents it = f.step(S4Job::back_with_one_replica(), 760);
  ASSERT_EQ(types(it.events), std::vector<std::string>{"job_restart"});
  std::string err;
  const auto r = parse_job_restart(it.events[0].detail, &err);
  ASSERT_TRUE(r) << err;
  EXPECT_EQ(r->epoch, plan->epoch);
  EXPECT_EQ(r->world_before, 4);
  EXPECT_EQ(r->world, 2);
  EXPECT_EQ(r->dp, 1);
  EXPECT_EQ(r->microbatches, (std::vector<int>{16}));
  EXPECT_FALSE(d.c.restarting());
  EXPECT_TRUE(d.c.planning());

  // Its baseline expects the layout's two ranks, though the registry still lists the old job's four.
  std::optional<ProfileRequest> base;
  for (int i = 0; i < 10 && !base; ++i) base = f.step(registry(), 760).profile;
  ASSERT_TRUE(base);
  d.feed({profile(0, base->command.id, 5, 760), profile(1, base->command.id, 5, 760)}, at(f.t, f.t));
  JobInputs g;
  g.groups = two_groups();
  f.step(g, 760);
  EXPECT_TRUE(d.c.has_baseline());
}

TEST(Controller, AJobBackInAnotherShapeRestartedEvenWithoutItsS4PlanApplied) {
  // The S4 plan timed out (an acknowledgement was lost) but the job restarted all the same.
  S4Job job(1000);
  TwoFaults& f = job.f;
  Driven& d = f.d;
  const std::optional<Plan> plan = job.until_s4();
  ASSERT_TRUE(plan);
  d.c.plan_published(*plan, at(f.t, f.t));
  f.t += 100;  // past the acknowledgement deadline, no acknowledgement
  JobInputs none;
  none.acks_read = true;
  Intents it = d.c.step(at(f.t, f.t), none);
  ASSERT_EQ(types(it.events), std::vector<std::string>{"plan_timeout"});
  EXPECT_TRUE(d.c.needs(at(f.t, f.t)).layout);  // watching for the restarted job's layout
  EXPECT_EQ(d.c.fail_slows().size(), 1u);
  it = f.step(S4Job::back_with_one_replica(), 760);
  const auto ty = types(it.events);
  EXPECT_NE(std::find(ty.begin(), ty.end(), "fail_slow_end"), ty.end());
  EXPECT_NE(std::find(ty.begin(), ty.end(), "job_restart"), ty.end());
  EXPECT_TRUE(d.c.fail_slows().empty());
  EXPECT_FALSE(d.c.open_incident());
  EXPECT_FALSE(d.c.restarting());
  EXPECT_TRUE(d.c.planning());
}

TEST(Controller, S4IsDeclinedWhenFewerReplicasWouldBeNoFaster) {
  // 700 ms now against (16 + 1) / (8 + 1) x 400 = 756 ms with one replica left: no restart.
  S4Job job(700);
  for (int i = 0; i < 60; ++i) EXPECT_FALSE(job.f.step(JobInputs{}, 700).plan) << i;
  ASSERT_EQ(job.f.d.c.fail_slows().size(), 1u);
  EXPECT_FALSE(job.f.d.c.fail_slows()[0].account.s4);
}

TEST(Controller, ComparableGroupsFromTheRegistry) {
  GroupRecord g;
  g.id = 0x10;
  g.size = 2;
  g.members = {{0, 4}, {1, 6}};
  g.ops[4] = {{"AllReduce:8192", 3}, {"Broadcast:4", 1}};
  GroupRecord partial = g;
  partial.id = 0x11;
  partial.members.erase(1);
  const auto out = comparable_groups({g, partial});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].group, 0x10u);
  EXPECT_EQ(out[0].members, (std::vector<int>{4, 6}));
  EXPECT_EQ(out[0].signature, "2|AllReduce:8192|Broadcast:4");
  EXPECT_TRUE(out[0].nccl_order.empty());  // no member's graph dump
}

// NCCL's ring order over a group, from the dumping member's node's part (in group ranks) and every member's
// node: the members in that order; a dump that does not describe the group is left out, with why.
TEST(Controller, ComparableGroupsCarryNcclsRingOrderFromAMembersGraphDump) {
  GroupRecord g;
  g.id = 0x20;
  g.size = 4;
  g.members = {{0, 10}, {1, 11}, {2, 12}, {3, 13}};
  g.nodes = {{0, 5}, {1, 5}, {2, 6}, {3, 6}};
  g.nccl_ring = NcclRingDump{0, {1, 0}, true, 2, std::nullopt};
  std::vector<std::string> notes;
  auto out = comparable_groups({g}, &notes);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].members, (std::vector<int>{10, 11, 12, 13}));
  EXPECT_EQ(out[0].nccl_order, (std::vector<int>{11, 10, 13, 12}));
  EXPECT_EQ(out[0].nodes, (std::vector<int>{5, 5, 6, 6}));
  EXPECT_TRUE(notes.empty());
  // A member's node unknown, or a part that is not its node's: group-rank order, and why.
  GroupRecord no_node = g;
  no_node.nodes.erase(3);
  GroupRecord wrong = g;
  wrong.id = 0x21;
  wrong.nccl_ring = NcclRingDump{0, {0, 2}, true, 2, std::nullopt};
  out = comparable_groups({no_node, wrong}, &notes);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_TRUE(out[0].nccl_order.empty());
  EXPECT_TRUE(out[0].nodes.empty());  // not all known
  EXPECT_TRUE(out[1].nccl_order.empty());
  EXPECT_EQ(notes, (std::vector<std::string>{
                       "group 0000000000000020: NCCL's ring order left out: the nodes of its members are not all known",
                       "group 0000000000000021: NCCL's ring order left out: the dumped ring names ranks of nodes 5 and 6 "
                       "(a channel lists one node's GPUs)"}));
}

// NCCL's trees over a group, from the same dump's tree graph: each node's chain at the dumping node's
// positions, the nodes in node order, and the graph's pattern; a chain that does not fit is left out, with why.
TEST(Controller, ComparableGroupsCarryNcclsTreeChainsFromAMembersGraphDump) {
  GroupRecord g;
  g.id = 0x22;
  g.size = 6;
  g.members = {{0, 20}, {1, 21}, {2, 22}, {3, 23}, {4, 24}, {5, 25}};
  g.nodes = {{0, 1}, {1, 1}, {2, 1}, {3, 2}, {4, 2}, {5, 2}};
  g.nccl_ring = NcclRingDump{3, {5, 4, 3}, true, 2, NcclTreeChain{validate::NcclTreePattern::kSplit, {4, 3, 5}, true}};
  std::vector<std::string> notes;
  auto out = comparable_groups({g}, &notes);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].nccl_order, (std::vector<int>{22, 21, 20, 25, 24, 23}));
  EXPECT_EQ(out[0].nccl_tree_order, (std::vector<int>{21, 20, 22, 24, 23, 25}));
  EXPECT_EQ(out[0].nccl_tree_pattern, validate::NcclTreePattern::kSplit);
  EXPECT_TRUE(notes.empty());
  // No tree graph: no chains, the balanced pattern.
  GroupRecord rings_only = g;
  rings_only.nccl_ring->tree.reset();
  out = comparable_groups({rings_only}, &notes);
  EXPECT_TRUE(out.at(0).nccl_tree_order.empty());
  EXPECT_EQ(out.at(0).nccl_tree_pattern, validate::NcclTreePattern::kBalanced);
  // A chain that enters by the network in a one-node group: left out, with why; the ring stays.
  GroupRecord one_node = g;
  one_node.nodes = {{0, 1}, {1, 1}, {2, 1}, {3, 1}, {4, 1}, {5, 1}};
  one_node.nccl_ring = NcclRingDump{0, {0, 1, 2, 3, 4, 5}, false, 1,
                                    NcclTreeChain{validate::NcclTreePattern::kTree, {5, 4, 3, 2, 1, 0}, true}};
  out = comparable_groups({one_node}, &notes);
  EXPECT_EQ(out.at(0).nccl_order, (std::vector<int>{20, 21, 22, 23, 24, 25}));
  EXPECT_TRUE(out.at(0).nccl_tree_order.empty());
  EXPECT_EQ(out.at(0).nccl_tree_pattern, validate::NcclTreePattern::kBalanced);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_EQ(notes[0].rfind("group 0000000000000022: NCCL's tree chains left out: ", 0), 0u) << notes[0];
}

// A pre-flight request is served once: answered "waiting" at once, a pause of every rank planned once the
// job's ranks and groups have held still a second, at its first iteration (0) while its pace is unknown.
// The same request again, or one the store shows answered already, is ignored.
TEST(Controller, APreflightIsServedOnceAtTheJobsFirstIteration) {
  Controller c(ControllerConfig{}, "t");
  c.load(MasterState{}, std::nullopt, 0, "0-0", at(0));
  PreflightRequest req;
  req.id = "pf-1";
  Intents it = c.offer_preflight(req, false, at(0));
  ASSERT_TRUE(it.preflight);
  EXPECT_EQ(it.preflight->state, "waiting");
  EXPECT_TRUE(c.preflight_pending());
  EXPECT_TRUE(c.offer_preflight(req, false, at(0.1)).empty()) << "the same request again";
  EXPECT_TRUE(c.needs(at(0.1)).registry && c.needs(at(0.1)).groups);

  JobInputs none;  // nothing registered yet
  it = c.step(at(0.2), none);
  EXPECT_TRUE(it.commands.empty());
  JobInputs in = registry();
  in.groups = two_groups();
  in.groups.push_back(GroupMembers{0x20, {0, 2}, "2|AllReduce:8"});
  in.groups.push_back(GroupMembers{0x21, {1, 3}, "2|AllReduce:8"});
  it = c.step(at(0.5), in);
  EXPECT_TRUE(it.commands.empty()) << "the ranks and groups must hold still a second first";
  it = c.step(at(1.6), in);
  ASSERT_EQ(it.commands.size(), 1u);
  const Command& pause = it.commands[0].command;
  EXPECT_EQ(pause.cmd, "pause");
  ASSERT_TRUE(pause.pause);
  EXPECT_EQ(pause.pause->at_iteration, 0);
  EXPECT_EQ(pause.pause->ranks.size(), 4u);
  for (const auto& [rank, tests] : pause.pause->ranks) {
    EXPECT_TRUE(tests.gemm) << rank;
    EXPECT_FALSE(tests.transfers.empty()) << rank;
  }
  EXPECT_EQ(it.commands[0].nodes, (std::vector<int>{0, 1}));
  ASSERT_TRUE(it.preflight);
  EXPECT_EQ(it.preflight->state, "running");
  EXPECT_EQ(it.preflight->groups_tested, 4);
  EXPECT_TRUE(c.validating());

  Controller later(ControllerConfig{}, "u");  // a restarted master: the store shows the request answered
  later.load(MasterState{}, std::nullopt, 0, "0-0", at(0));
  EXPECT_TRUE(later.offer_preflight(req, true, at(0)).empty());
  EXPECT_FALSE(later.preflight_pending());
}

// An operator's plan: checked against the layout and proposed at the next step, answered once published;
// it holds the configuration until released (or gone from the store); one the layout refuses is answered
// with the reason and proposes nothing.
TEST(Controller, AnOperatorsPlanIsPublishedOnceAndHoldsUntilReleased) {
  Controller c(ControllerConfig{}, "t");
  c.load(MasterState{}, std::nullopt, 0, "0-0", at(0));
  OperatorPlanRequest req;
  req.id = "op-1";
  req.microbatches = {2, 6};
  EXPECT_TRUE(c.offer_operator_plan(req, "", at(0)).empty());
  EXPECT_TRUE(c.operator_hold());
  EXPECT_TRUE(c.needs(at(0.1)).layout);
  JobInputs in;
  in.layout = layout({4, 4}, {4, 4});
  Intents it = c.step(at(0.2), in);
  ASSERT_TRUE(it.plan);
  EXPECT_EQ(it.plan->microbatches, (std::vector<int>{2, 6}));
  EXPECT_EQ(it.plan->reason, "operator's plan op-1");
  Intents published = c.plan_published(*it.plan, at(0.3));
  ASSERT_TRUE(published.operator_plan);
  EXPECT_EQ(published.operator_plan->state, "published");
  EXPECT_EQ(published.operator_plan->epoch, it.plan->epoch);
  EXPECT_TRUE(c.offer_operator_plan(req, "published", at(1)).empty()) << "answered: not served again";
  EXPECT_FALSE(c.step(at(1.1), JobInputs{}).plan);

  OperatorPlanRequest bad;
  bad.id = "op-2";
  bad.microbatches = {2, 2};
  c.offer_operator_plan(bad, "", at(2));
  JobInputs acks;
  acks.layout = layout({2, 6}, {4, 4});
  for (int r = 0; r < 4; ++r) acks.acks.push_back(PlanAck{r, it.plan->epoch, 10, AckStatus::kApplied, "", 0, 0});
  acks.acks_read = true;
  Intents refused;
  for (double t = 2.1; t < 4 && !refused.operator_plan; t += 0.5) refused = c.step(at(t), acks);
  ASSERT_TRUE(refused.operator_plan);
  EXPECT_EQ(refused.operator_plan->state, "refused");
  EXPECT_NE(refused.operator_plan->reason.find("global batch is 8"), std::string::npos) << refused.operator_plan->reason;
  EXPECT_FALSE(refused.plan);
  EXPECT_TRUE(c.operator_hold()) << "a refused plan changes nothing: the one before it still holds";
  c.offer_operator_plan(bad, "refused", at(4.5));
  EXPECT_TRUE(c.operator_hold());

  {  // A first request that is refused holds nothing, then or after a restart of the master.
    Controller d(ControllerConfig{}, "v");
    d.load(MasterState{}, std::nullopt, 0, "0-0", at(0));
    d.offer_operator_plan(bad, "", at(0));
    EXPECT_TRUE(d.operator_hold());  // until it is checked
    Intents r = d.step(at(0.1), acks);
    ASSERT_TRUE(r.operator_plan);
    EXPECT_EQ(r.operator_plan->state, "refused");
    EXPECT_FALSE(d.operator_hold());
    Controller e(ControllerConfig{}, "w");
    e.load(MasterState{}, std::nullopt, 0, "0-0", at(0));
    e.offer_operator_plan(bad, "refused", at(0));
    EXPECT_FALSE(e.operator_hold());
  }
  OperatorPlanRequest release;
  release.id = "op-3";
  release.action = "release";
  const Intents released = c.offer_operator_plan(release, "", at(5));
  ASSERT_TRUE(released.operator_plan);
  EXPECT_EQ(released.operator_plan->state, "released");
  EXPECT_FALSE(c.operator_hold());
  c.offer_operator_plan(req, "published", at(6));
  EXPECT_TRUE(c.operator_hold());
  c.offer_operator_plan(std::nullopt, "", at(7));  // gone from the store
  EXPECT_FALSE(c.operator_hold());
}

}  // namespace
}  // namespace greyhound::master
