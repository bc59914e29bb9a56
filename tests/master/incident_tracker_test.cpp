#include <gtest/gtest.h>

#include "daemon/incident_tracker.h"

namespace greyhound::master {
namespace {

Event change(const char* type, int rank, double t_s, double before, double after, int node = 0) {
  Event e;
  e.type = type;
  e.t_s = t_s;
  e.detected_t_s = t_s + 1.5;
  e.source = "agent:" + std::to_string(node);
  e.rank = rank;
  e.node = node;
  e.before_ms = before;
  e.after_ms = after;
  e.ratio = after / before;
  return e;
}

TEST(IncidentTracker, OneIncidentForAJobWideSlowdownClosedByAMajorityOfRecoveries) {
  IncidentTracker t;
  Decision d;
  t.apply(change(event_type::kSlowdown, 3, 12.0, 260, 320), d);
  ASSERT_EQ(d.emit.size(), 1u);
  EXPECT_EQ(d.emit[0].type, event_type::kIncidentOpen);
  EXPECT_EQ(d.emit[0].incident, 1);
  EXPECT_EQ(d.emit[0].t_s, 13.5);  // when it was decided
  EXPECT_EQ(t.state().state, Phase::kSlow);
  EXPECT_EQ(t.state().open_incident, 1);
  for (int r : {0, 1, 2, 4, 5, 6, 7}) {
    Decision more;
    t.apply(change(event_type::kSlowdown, r, 11.9, 261, 321, r / 4), more);
    EXPECT_TRUE(more.emit.empty()) << r;  // joins the incident
    ASSERT_TRUE(more.incident);
  }
  EXPECT_EQ(t.open_incident()->ranks.size(), 8u);
  EXPECT_EQ(t.open_incident()->nodes, (std::vector<int>{0, 1}));
  EXPECT_EQ(t.open_incident()->onset_t_s, 11.9);
  for (int r : {0, 1, 2, 3}) {  // half: not yet closed
    Decision rec;
    t.apply(change(event_type::kRecovery, r, 24.1, 320, 261), rec);
    EXPECT_TRUE(rec.emit.empty());
  }
  EXPECT_EQ(t.state().state, Phase::kSlow);
  Decision close;
  t.apply(change(event_type::kRecovery, 4, 24.2, 320, 262, 1), close);
  ASSERT_EQ(close.emit.size(), 1u);
  EXPECT_EQ(close.emit[0].type, event_type::kIncidentClose);
  EXPECT_NEAR(close.emit[0].detail["duration_s"].get<double>(), 24.2 - 11.9, 1e-9);
  EXPECT_EQ(t.state().state, Phase::kHealthy);
  EXPECT_EQ(t.state().open_incident, -1);
  EXPECT_FALSE(t.open_incident());
  // A late slowdown report of the closed incident is not a new one.
  Decision late;
  t.apply(change(event_type::kSlowdown, 6, 12.0, 260, 320, 1), late);
  EXPECT_TRUE(late.emit.empty());
  EXPECT_EQ(t.state().incidents_total, 1);
  // A new slowdown after the close is.
  Decision next;
  t.apply(change(event_type::kSlowdown, 2, 40.0, 260, 400), next);
  ASSERT_EQ(next.emit.size(), 1u);
  EXPECT_EQ(next.emit[0].incident, 2);
}

TEST(IncidentTracker, CompoundSlowdownUpdatesAndPartialRecoveryDoesNotClose) {
  IncidentTracker t;
  Decision d;
  t.apply(change(event_type::kSlowdown, 0, 10, 100, 130), d);
  Decision worse;
  t.apply(change(event_type::kSlowdown, 0, 20, 130, 200), worse);  // 2x the level before the incident
  ASSERT_EQ(worse.emit.size(), 1u);
  EXPECT_EQ(worse.emit[0].type, event_type::kIncidentUpdate);
  EXPECT_NEAR(t.open_incident()->severity, 2.0, 1e-12);
  Decision partial;
  t.apply(change(event_type::kRecovery, 0, 30, 200, 135), partial);  // back to 1.35x only
  ASSERT_EQ(partial.emit.size(), 1u);
  EXPECT_EQ(partial.emit[0].type, event_type::kIncidentUpdate);
  EXPECT_EQ(t.state().state, Phase::kSlow);
  Decision full;
  t.apply(change(event_type::kRecovery, 0, 40, 135, 101), full);
  ASSERT_EQ(full.emit.size(), 1u);
  EXPECT_EQ(full.emit[0].type, event_type::kIncidentClose);
}

TEST(IncidentTracker, IgnoresWhatIsNotARankChangeFromAnAgent) {
  IncidentTracker t;
  Decision d;
  Event own = change(event_type::kSlowdown, 1, 5, 100, 150);
  own.source = "master";
  t.apply(own, d);
  Event start;
  start.type = event_type::kAgentStart;
  start.source = "agent:0";
  t.apply(start, d);
  Event orphan = change(event_type::kRecovery, 1, 5, 150, 100);
  t.apply(orphan, d);
  EXPECT_TRUE(d.emit.empty());
  EXPECT_EQ(t.state().events_processed, 3);
  EXPECT_EQ(t.state().state, Phase::kHealthy);
}

TEST(IncidentTracker, RestartsFromPersistedStateAndIncident) {
  IncidentTracker first;
  Decision d;
  first.apply(change(event_type::kSlowdown, 0, 10, 100, 150), d);
  // What the master stores, read back after a restart.
  std::string err;
  auto st = parse_master_state(to_json(first.state()).dump(), &err);
  auto inc = parse_incident(to_json(*first.open_incident()).dump(), &err);
  ASSERT_TRUE(st && inc) << err;
  IncidentTracker again(*st, inc);
  Decision rec;
  again.apply(change(event_type::kRecovery, 0, 20, 150, 100), rec);
  ASSERT_EQ(rec.emit.size(), 1u);
  EXPECT_EQ(rec.emit[0].type, event_type::kIncidentClose);
  EXPECT_EQ(rec.emit[0].incident, 1);
}

// A rank's process died: kept in the state the master stores (greyhoundctl status shows it), the latest 64,
// and it opens no incident.
TEST(IncidentTracker, FailStopsAreKeptInTheStateAcrossARestart) {
  IncidentTracker t;
  for (int i = 0; i < 70; ++i) {
    Event e;
    e.type = event_type::kFailStop;
    e.t_s = 10 + i;
    e.source = "agent:1";
    e.rank = i % 8;
    e.node = 1;
    e.detail = to_json(FailStopDetail{4000 + i, -1, 9.5 + i});
    Decision d;
    t.apply(e, d);
    EXPECT_TRUE(d.emit.empty());
  }
  EXPECT_FALSE(t.open_incident());
  std::string err;
  auto st = parse_master_state(to_json(t.state()).dump(), &err);
  ASSERT_TRUE(st) << err;
  EXPECT_EQ(st->fail_stops_total, 70);
  ASSERT_EQ(st->fail_stops.size(), kMaxFailStopsKept);
  EXPECT_EQ(st->fail_stops.back().rank, 69 % 8);
  EXPECT_EQ(st->fail_stops.back().node, 1);
  EXPECT_DOUBLE_EQ(st->fail_stops.back().t_s, 79);
  EXPECT_EQ(st->fail_stops.back().pid, 4069);
  EXPECT_DOUBLE_EQ(st->fail_stops.front().t_s, 16);  // the oldest six went
  // A state with more than it may hold is refused, not truncated silently.
  nlohmann::json j = to_json(t.state());
  j["fail_stops"].push_back(j["fail_stops"][0]);
  EXPECT_FALSE(parse_master_state(j.dump(), &err));
  EXPECT_NE(err.find("fail_stops: must be an array of at most 64"), std::string::npos) << err;
}

}  // namespace
}  // namespace greyhound::master
