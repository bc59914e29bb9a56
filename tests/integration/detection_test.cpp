// The detection loop end to end on a real redis-server: greyhound-simcluster runs an 8-rank TP2 x DP2 x PP2
// minitrain over 2 virtual nodes with 2 agents and 1 master, and the tests read the report (iterations and
// every event of the job's stream) and the master's event log.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/simcluster/run_report.h"

namespace greyhound {
namespace {

using nlohmann::json;

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct SimRun {
  int exit_code = -1;
  json report;
  std::string dir;
  std::vector<sim::IterationLine> rank_iterations(int r) const {
    return sim::parse_iteration_log(slurp(dir + "/rank" + std::to_string(r) + ".out"));
  }
  std::vector<json> events(const std::string& type) const {
    std::vector<json> out;
    for (const auto& e : report["events"]) {
      if (e.value("type", "") == type) out.push_back(e);
    }
    return out;
  }
};

class Detection : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char tmpl[] = "/tmp/gh-detect-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
  }
  static void TearDownTestSuite() { std::system(("rm -rf " + root_).c_str()); }

  static SimRun run(const std::string& name, const std::string& faults, const std::string& extra, double duration_s) {
    SimRun r;
    r.dir = root_ + "/" + name;
    std::system(("mkdir -p " + r.dir).c_str());
    std::ofstream(r.dir + "/faults.in.json") << faults;
    const std::string cmd = std::string(GREYHOUND_SIMCLUSTER) +
                            " --tp 2 --dp 2 --pp 2 --gpus-per-node 4 --microbatches 4 --quiet --job " + name +
                            " --duration-s " + std::to_string(duration_s) + " --faults " + r.dir +
                            "/faults.in.json --work-dir " + r.dir + " --report " + r.dir + "/report.json " + extra +
                            " > " + r.dir + "/simcluster.log 2>&1";
    const int status = std::system(cmd.c_str());
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    std::ifstream in(r.dir + "/report.json");
    if (in) in >> r.report;
    return r;
  }

  // Iterations of rank 0 that ended in (from_s, to_s].
  static int iterations_between(const SimRun& r, double from_s, double to_s) {
    int n = 0;
    for (const auto& it : r.rank_iterations(0)) n += it.t_s > from_s && it.t_s <= to_s;
    return n;
  }
  static std::string root_;
};
std::string Detection::root_;

constexpr const char* kGpuFault =
    R"({"faults":[{"kind":"gpu","rank":3,"start_s":12,"end_s":24,"slowdown":1.5}]})";

TEST_F(Detection, GpuSlowdownIsDetectedAndRecoveredWithinFiveIterations) {
  const SimRun r = run("gpu", kGpuFault, "", 34);
  ASSERT_EQ(r.exit_code, 0) << slurp(r.dir + "/simcluster.log");
  const auto slow = r.events("slowdown");
  const auto rec = r.events("recovery");
  ASSERT_FALSE(slow.empty()) << r.report.dump(1);
  ASSERT_FALSE(rec.empty()) << r.report.dump(1);
  // Every rank reports; the first report comes within 5 iterations of the onset, by the detector's own
  // count (detected_index - index) and by wall clock (iterations of rank 0 between the fault and the event).
  std::set<int> ranks;
  double first_slow = 1e9, first_rec = 1e9;
  for (const auto& e : slow) {
    ranks.insert(e["rank"].get<int>());
    EXPECT_LE(e["detected_index"].get<long>() - e["index"].get<long>(), 5) << e.dump();
    EXPECT_GE(e["ratio"].get<double>(), 1.1) << e.dump();
    EXPECT_GT(e["t_s"].get<double>(), 12.0 - 0.5) << e.dump();  // onset no earlier than the fault's iteration
    first_slow = std::min(first_slow, e["detected_t_s"].get<double>());
  }
  EXPECT_EQ(ranks.size(), 8u);
  EXPECT_LE(iterations_between(r, 12.0, first_slow), 6) << "first slowdown event at t=" << first_slow;
  for (const auto& e : rec) {
    EXPECT_LE(e["detected_index"].get<long>() - e["index"].get<long>(), 5) << e.dump();
    EXPECT_LT(e["ratio"].get<double>(), 1.0 / 1.1) << e.dump();
    first_rec = std::min(first_rec, e["detected_t_s"].get<double>());
  }
  EXPECT_GT(first_rec, 24.0);
  EXPECT_LE(iterations_between(r, 24.0, first_rec), 6) << "first recovery event at t=" << first_rec;
  // One incident, opened during the fault and closed after it.
  const auto opened = r.events("incident_open");
  const auto closed = r.events("incident_close");
  ASSERT_EQ(opened.size(), 1u);
  ASSERT_EQ(closed.size(), 1u);
  EXPECT_GT(opened[0]["t_s"].get<double>(), 12.0);
  EXPECT_LT(opened[0]["t_s"].get<double>(), 24.0);
  EXPECT_GT(closed[0]["t_s"].get<double>(), 24.0);
  EXPECT_NEAR(closed[0]["detail"]["duration_s"].get<double>(), 12.0, 2.0);
  // The master's event log holds every agent event it consumed, once, in stream order.
  std::istringstream log(slurp(r.dir + "/master-events.jsonl"));
  std::string line, last_id;
  int consumed = 0;
  while (std::getline(log, line)) {
    const json j = json::parse(line);
    if (!j.contains("id")) continue;
    EXPECT_GT(j["id"].get<std::string>(), last_id.empty() ? std::string() : last_id);
    last_id = j["id"].get<std::string>();
    ++consumed;
  }
  EXPECT_GE(consumed, static_cast<int>(slow.size() + rec.size()));
}

TEST_F(Detection, HealthyRunRaisesNothing) {
  const SimRun r = run("healthy", R"({"faults":[]})", "", 34);
  ASSERT_EQ(r.exit_code, 0) << slurp(r.dir + "/simcluster.log");
  EXPECT_TRUE(r.events("slowdown").empty()) << r.report["events"].dump(1);
  EXPECT_TRUE(r.events("recovery").empty()) << r.report["events"].dump(1);
  EXPECT_TRUE(r.events("incident_open").empty());
  EXPECT_EQ(r.events("agent_start").size(), 2u);  // both agents ran
  EXPECT_GT(r.report["iterations"].size(), 80u);
}

}  // namespace
}  // namespace greyhound
