// The master's /metrics text, pure: the exposition format's rules (a family's samples together, escaping,
// numbers) and what a job's controller and status put in it.
#include "daemon/metrics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

namespace greyhound::master {
namespace {

using nlohmann::json;

TEST(Metrics, NumbersAndLabelsAsPrometheusWritesThem) {
  EXPECT_EQ(prometheus_number(1), "1");
  EXPECT_EQ(prometheus_number(120), "120");
  EXPECT_EQ(prometheus_number(-3), "-3");
  EXPECT_EQ(prometheus_number(1e20), "1e+20");
  EXPECT_EQ(prometheus_number(0.1), "0.1");
  EXPECT_EQ(prometheus_number(1.0 / 3), "0.3333333333333333");
  EXPECT_EQ(prometheus_number(-2.5e-7), "-2.5e-07");
  EXPECT_EQ(prometheus_number(std::numeric_limits<double>::quiet_NaN()), "NaN");
  EXPECT_EQ(prometheus_number(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(prometheus_number(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(prometheus_label("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
}

TEST(Metrics, AFamilysSamplesStayTogetherUnderItsHelpAndType) {
  Exposition e;
  e.family("x_total", "counter", "Things\ncounted \\ here");
  e.family("y_seconds", "summary", "Time");
  e.sample("x_total", {{"job", "a"}}, 1);
  e.sample("y_seconds", {{"job", "a"}}, 2.5, "_sum");
  e.sample("y_seconds", {{"job", "a"}}, 2, "_count");
  e.sample("x_total", {{"job", "b\"q"}, {"cause", "host"}}, 3);
  e.family("x_total", "gauge", "declared again: ignored");
  e.sample("undeclared", {}, 1);  // a bug of the caller: left out, never a line outside its block
  EXPECT_EQ(e.text(),
            "# HELP x_total Things\\ncounted \\\\ here\n"
            "# TYPE x_total counter\n"
            "x_total{job=\"a\"} 1\n"
            "x_total{job=\"b\\\"q\",cause=\"host\"} 3\n"
            "# HELP y_seconds Time\n"
            "# TYPE y_seconds summary\n"
            "y_seconds_sum{job=\"a\"} 2.5\n"
            "y_seconds_count{job=\"a\"} 2\n");
}

TEST(Metrics, AJobsControllerAndStatusGiveItsSamples) {
  ControllerConfig cfg;
  Controller c(cfg, "tag");
  MasterState st;
  st.incidents_total = 4;
  st.events_processed = 120;
  FailSlow f;
  f.id = 7;
  f.cause = Cause::kHost;
  f.rank = 5;
  st.fail_slows.push_back(f);
  c.load(st, std::nullopt, 0, "0-0", Now{});
  Event dead;  // rank 5's process died
  dead.type = event_type::kFailStop;
  dead.t_s = 3;
  dead.source = "agent:1";
  dead.rank = 5;
  dead.node = 1;
  dead.detail = to_json(FailStopDetail{77, -1, 2.9});
  c.apply({{"1-0", dead, ""}}, Now{});
  c.adopt(Now{});
  const json status = json::parse(R"({
    "ranks": [{"rank": 0, "node": 0, "iter_ms": 440.5, "age_s": 0.2}, {"rank": 1, "node": 0}],
    "nodes": [{"node": 0, "alive": true, "heartbeat_age_s": 0.5, "records_read": 1000, "records_lost": 3,
               "events_dropped": 0, "redis_reconnects": 1},
              {"node": 1, "alive": false}]})");
  Exposition e;
  master_metrics(e, {1, 2});
  job_metrics(e, "j1", c, status);
  const std::string t = e.text();
  const auto has = [&](const std::string& line) { return t.find("\n" + line + "\n") != std::string::npos; };
  EXPECT_TRUE(has("greyhound_master_up 1")) << t;
  EXPECT_TRUE(has("greyhound_master_jobs 1"));
  EXPECT_TRUE(has("greyhound_master_redis_reconnects_total 2"));
  EXPECT_TRUE(has("greyhound_incidents_total{job=\"j1\"} 4"));
  EXPECT_TRUE(has("greyhound_incident_open{job=\"j1\"} 0"));
  EXPECT_TRUE(has("greyhound_events_processed_total{job=\"j1\"} 121")) << t;  // and the fail_stop
  EXPECT_TRUE(has("greyhound_fail_slows_open{job=\"j1\",cause=\"host\"} 1"));
  EXPECT_TRUE(has("greyhound_fail_slows_open{job=\"j1\",cause=\"communication\"} 0"));
  EXPECT_TRUE(has("greyhound_detections_total{job=\"j1\"} 0"));
  EXPECT_TRUE(has("greyhound_fail_stops_total{job=\"j1\",rank=\"5\"} 1")) << t;
  EXPECT_EQ(c.state().fail_stops_total, 1);
  EXPECT_TRUE(has("greyhound_detection_latency_seconds_count{job=\"j1\"} 0"));
  EXPECT_TRUE(has("greyhound_rank_iteration_seconds{job=\"j1\",rank=\"0\",node=\"0\"} 0.4405"));
  EXPECT_EQ(t.find("rank=\"1\""), std::string::npos) << "a rank without an iteration has no sample";
  EXPECT_TRUE(has("greyhound_agent_up{job=\"j1\",node=\"0\"} 1"));
  EXPECT_TRUE(has("greyhound_agent_up{job=\"j1\",node=\"1\"} 0"));
  EXPECT_TRUE(has("greyhound_ring_records_lost_total{job=\"j1\",node=\"0\"} 3"));
  EXPECT_TRUE(has("greyhound_agent_heartbeat_age_seconds{job=\"j1\",node=\"0\"} 0.5"));
  // Every family is described even without samples (a Grafana panel's query then names a known metric).
  EXPECT_NE(t.find("# TYPE greyhound_group_bus_bandwidth_gbps gauge"), std::string::npos);
  // A status that could not be read leaves the controller's samples.
  Exposition bare;
  job_metrics(bare, "j1", c, json());
  EXPECT_NE(bare.text().find("greyhound_incidents_total{job=\"j1\"} 4"), std::string::npos);
}

TEST(Metrics, GroupTimingsFromAProfileAreTheLeastMembersTimeAndNcclsBusBandwidth) {
  // An 8-rank AllReduce of 64 MiB: the member that waited least spends 20 % of a 1 s window in 10 calls.
  std::vector<ProfileView> views;
  for (int r = 0; r < 8; ++r) {
    ProfileView v;
    v.rank = r;
    v.group_share[0x42] = r == 3 ? 0.2 : 0.5;
    v.group_rate[0x42] = 10;
    views.push_back(v);
  }
  const GroupMembers g{0x42, {0, 1, 2, 3, 4, 5, 6, 7}, "8|AllReduce:67108864"};
  const std::map<std::uint64_t, GroupTraffic> traffic = {{0x42, {"AllReduce", 64.0 * (1 << 20)}}};
  const auto t = group_timings(views, {g, GroupMembers{0x43, {8, 9}, "x"}}, traffic);
  ASSERT_EQ(t.size(), 1u);  // the second group has no profiled member
  EXPECT_DOUBLE_EQ(t[0].seconds_per_call, 0.02);
  EXPECT_EQ(t[0].ranks, 8);
  // busBw = 64 MiB x 2 (8 - 1) / 8 / 20 ms
  EXPECT_NEAR(t[0].bus_gb_per_s, 64.0 * (1 << 20) * 1.75 / 0.02 * 1e-9, 1e-9);
  EXPECT_EQ(t[0].op, "AllReduce");
  // Without what it moves: the time alone.
  const auto bare = group_timings(views, {g}, {});
  ASSERT_EQ(bare.size(), 1u);
  EXPECT_EQ(bare[0].bus_gb_per_s, 0);
}

TEST(Metrics, GroupTrafficIsTheMeanBytesPerCallAndTheOpMovingMost) {
  GroupRecord r;
  r.id = 0x42;
  r.size = 2;
  r.members = {{0, 0}, {1, 1}};
  r.ops[0] = {{"AllReduce:1024", 10}, {"Broadcast:4", 90}, {"bad", 5}, {"Send:x", 1}};
  const auto t = group_traffic({r, GroupRecord{}});
  ASSERT_EQ(t.count(0x42), 1u);
  EXPECT_EQ(t.at(0x42).op, "AllReduce");  // 10 KiB against 360 bytes
  EXPECT_DOUBLE_EQ(t.at(0x42).bytes_per_call, (10 * 1024.0 + 90 * 4.0) / 100);  // the unreadable kinds left out
}

}  // namespace
}  // namespace greyhound::master
