// The fault matrix, the cases of its own (docs/operations.md, "Fault matrix", lists every case and the test
// that covers it): an agent stalled while its ranks' rings overflow, and a full shm directory. Each case
// asserts what every case of the matrix does: the training finishes with the results it has without
// greyhound, its iterations are no slower than without greyhound beyond the healthy difference between the
// two runs (within 1 %, measured: docs/operations.md), and no event Redis acknowledged is lost.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "sim_run.h"

namespace greyhound {
namespace {

using nlohmann::json;
using itest::slurp;

class FaultMatrix : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = itest::make_temp_dir("gh-matrix");
    ASSERT_FALSE(root_.empty());
  }
  void TearDown() override { std::system(("rm -rf " + root_).c_str()); }
  std::string root_;
};

// Losses of a last-stage rank, by iteration.
std::map<long, double> losses(const itest::SimRun& r, int rank) {
  std::map<long, double> out;
  for (const auto& l : r.rank_iterations(rank)) out[l.index] = l.loss;
  return out;
}

void same_training(const itest::SimRun& with, const itest::SimRun& without, double rel) {
  for (int rank : {4, 5, 6, 7}) {  // the last pipeline stage (PP2) holds the loss
    const auto a = losses(with, rank), b = losses(without, rank);
    ASSERT_GT(a.size(), 40u) << rank;
    int compared = 0;
    for (const auto& [i, x] : a) {
      const auto it = b.find(i);
      if (it == b.end()) continue;
      ++compared;
      ASSERT_NEAR(x, it->second, std::abs(it->second) * rel) << "rank " << rank << " iteration " << i;
    }
    EXPECT_GT(compared, 40) << rank;
  }
}

void never_slower(const itest::SimRun& with, const itest::SimRun& without) {
  const double a = with.report["throughput_iter_per_min"].get<double>();
  const double b = without.report["throughput_iter_per_min"].get<double>();
  EXPECT_GE(a, b * 0.99) << "with greyhound " << a << " vs without " << b << " iterations/min";
  std::cerr << "[ note ] throughput with greyhound " << a << ", without " << b << " iterations/min\n";
}

std::vector<json> events_before(const itest::SimRun& r, const std::string& type, double t_s) {
  std::vector<json> out;
  for (const auto& e : r.events(type)) {
    if (e["t_s"].get<double>() < t_s) out.push_back(e);
  }
  return out;
}

TEST_F(FaultMatrix, AnAgentStalledWhileItsRingsOverflowCostsTheJobNothingAndDetectionResumes) {
  // Rings of 64 records (the least GREYHOUND_RING_RECORDS allows: about one iteration of a rank's calls);
  // the agent of node 0 (ranks 0 and 1) stopped (SIGSTOP) from 6 to 16 s, so its ranks lap it many
  // times over; then rank 1's GPU at 1/1.5 from 24 to 42 s.
  std::ofstream(root_ + "/faults.json")
      << R"({"faults":[{"kind":"gpu","rank":1,"start_s":24,"end_s":42,"slowdown":1.5}]})";
  const std::string common = "--duration-s 50 --faults " + root_ + "/faults.json ";
  const itest::SimRun r = itest::run_simcluster(
      root_, "stalled",
      common + "--mitigate --rank-env GREYHOUND_RING_RECORDS=64 --chaos '[{\"at_s\":6,\"action\":\"stop\",\"target\":"
               "\"agent:0\"},{\"at_s\":16,\"action\":\"cont\",\"target\":\"agent:0\"}]'",
      8, 2);
  const itest::SimRun ref = itest::run_simcluster(root_, "plain", common + "--no-greyhound", 8, 2);
  ASSERT_EQ(r.exit_code, 0) << r.log();
  ASSERT_EQ(ref.exit_code, 0) << ref.log();
  ASSERT_EQ(r.report["chaos"].size(), 2u) << r.report["chaos"].dump();
  for (const auto& line : r.report["chaos"]) EXPECT_EQ(line.get<std::string>().find("failed"), std::string::npos) << line;

  // The rings overflowed while the agent was stopped, and the agent says so.
  const std::string agent_log = slurp(r.dir + "/agent0.log");
  EXPECT_NE(agent_log.find("ring records lost since the last heartbeat"), std::string::npos) << agent_log.substr(0, 2000);
  // Nothing was taken for a fail-slow before the GPU's, and the GPU's was found and named.
  EXPECT_TRUE(events_before(r, "fail_slow_open", 24.0).empty()) << r.report["events"].dump(1);
  EXPECT_TRUE(events_before(r, "localised", 24.0).empty()) << r.report["events"].dump(1);
  bool named = false;
  for (const auto& e : r.events("localised")) {
    const double t = e["t_s"].get<double>();
    named |= t > 24.0 && t < 42.0 && e["detail"]["culprit"] == 1;
  }
  EXPECT_TRUE(named) << r.report["events"].dump(1);

  same_training(r, ref, 1e-4);  // an S2 split reorders the DP sums only
  never_slower(r, ref);
  int consumed = 0;
  EXPECT_EQ(itest::acknowledged_events_lost(r, &consumed), "");
  EXPECT_GE(consumed, 10);
}

TEST_F(FaultMatrix, AFullShmDirectoryLeavesTheJobRunningCorrectAndAtItsSpeed) {
  // The ranks' shm directory is a tmpfs with no space left (a private mount namespace: `unshare`, as root or
  // in a user namespace): no ring can be created. The hook says so once per rank and records nothing; the
  // agents find no rings; the job trains as it does without greyhound.
  const std::string shm = root_ + "/shm";
  std::system(("mkdir -p " + shm).c_str());
  const std::string unshare = geteuid() == 0 ? "unshare --mount" : "unshare --user --map-root-user --mount";
  const auto run = [&](const std::string& name, const std::string& args) {
    itest::SimRun r;
    r.dir = root_ + "/" + name;
    std::system(("mkdir -p " + r.dir).c_str());
    const std::string inner = "mount -t tmpfs -o size=256k,mode=0700 gh-full " + shm + " && { dd if=/dev/zero of=" +
                              shm + "/filler bs=4k >/dev/null 2>&1; df " + shm + "; } && exec " + GREYHOUND_SIMCLUSTER +
                              " --tp 2 --dp 2 --pp 2 --gpus-per-node 2 --microbatches 8 --duration-s 25 --quiet --job " +
                              name + " --work-dir " + r.dir + " --shm-dir " + shm + " --report " + r.dir +
                              "/report.json " + args;
    return itest::run_command(r, unshare + " sh -c '" + inner + "' > " + r.dir + "/simcluster.log 2>&1");
  };
  const itest::SimRun r = run("full", "--mitigate");
  const itest::SimRun ref = run("plain", "--no-greyhound");
  ASSERT_EQ(r.exit_code, 0) << r.log();
  ASSERT_EQ(ref.exit_code, 0) << ref.log();
  EXPECT_NE(r.log().find("100%"), std::string::npos) << "the tmpfs was full: " << r.log().substr(0, 1000);

  for (int rank = 0; rank < 8; ++rank) {
    const std::string err = slurp(r.dir + "/rank" + std::to_string(rank) + ".err");
    std::size_t warnings = 0;
    for (auto at = err.find("cannot create the record ring"); at != std::string::npos;
         at = err.find("cannot create the record ring", at + 1)) {
      ++warnings;
    }
    EXPECT_EQ(warnings, 1u) << "rank " << rank << ": " << err.substr(0, 1000);
    // The same weights as without greyhound, iteration by iteration.
    const auto with = r.rank_iterations(rank), without = ref.rank_iterations(rank);
    ASSERT_GT(with.size(), 20u) << rank;
    for (std::size_t i = 0; i < std::min(with.size(), without.size()); ++i) {
      ASSERT_EQ(with[i].checksum, without[i].checksum) << "rank " << rank << " iteration " << i;
    }
  }
  EXPECT_TRUE(r.events("fail_slow_open").empty()) << r.report["events"].dump(1);
  never_slower(r, ref);
  EXPECT_EQ(itest::acknowledged_events_lost(r), "");
}

}  // namespace
}  // namespace greyhound
