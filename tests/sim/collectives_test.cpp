// The NCCL/CUDA/cuBLAS stand-ins across real processes: data semantics of every collective and of
// Send/Recv, CommSplit, the timing model (a late rank makes the others wait; a GPU fault slows GEMMs),
// and failure modes (mismatched calls, a dead peer, a bad fault schedule).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "sim/sim_model.h"

namespace greyhound::sim {
namespace {

struct WorkerResult {
  int exit_code = -1;
  std::string out, err;
};

class StandIns : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gh-sim-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }

  // Runs n workers of `scenario` at once, reaping whichever exits first (a dead peer must be reaped for
  // its peers to notice it is gone).
  std::vector<WorkerResult> run(const std::string& scenario, int n, std::map<std::string, std::string> env = {}) {
    std::vector<pid_t> pids(static_cast<std::size_t>(n));
    for (int r = 0; r < n; ++r) {
      const std::string out = dir_ + "/" + scenario + std::to_string(r) + ".out";
      const std::string err = dir_ + "/" + scenario + std::to_string(r) + ".err";
      const pid_t pid = fork();
      if (pid == 0) {
        setenv("GREYHOUND_SIM_RANK", std::to_string(r).c_str(), 1);
        setenv("GREYHOUND_SIM_GPUS_PER_NODE", "2", 1);
        setenv("GREYHOUND_SIM_DIR", dir_.c_str(), 1);
        setenv("GREYHOUND_SIM_TIMEOUT_S", "60", 1);
        setenv("GREYHOUND_SIM_MODEL", R"({"launch_us": 0})", 1);
        for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
        if (!freopen(out.c_str(), "w", stdout) || !freopen(err.c_str(), "w", stderr)) _exit(3);
        const std::string rank = std::to_string(r), nranks = std::to_string(n);
        execl(GREYHOUND_SIM_WORKER, GREYHOUND_SIM_WORKER, scenario.c_str(), rank.c_str(), nranks.c_str(), dir_.c_str(),
              static_cast<char*>(nullptr));
        _exit(127);
      }
      pids[static_cast<std::size_t>(r)] = pid;
    }
    std::vector<WorkerResult> res(static_cast<std::size_t>(n));
    for (int done = 0; done < n; ++done) {
      int status = 0;
      const pid_t p = waitpid(-1, &status, 0);
      for (int r = 0; r < n; ++r) {
        if (pids[static_cast<std::size_t>(r)] == p) {
          res[static_cast<std::size_t>(r)].exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        }
      }
    }
    for (int r = 0; r < n; ++r) {
      auto slurp = [](const std::string& path) {
        std::ifstream in(path);
        std::stringstream ss;
        ss << in.rdbuf();
        return ss.str();
      };
      res[static_cast<std::size_t>(r)].out = slurp(dir_ + "/" + scenario + std::to_string(r) + ".out");
      res[static_cast<std::size_t>(r)].err = slurp(dir_ + "/" + scenario + std::to_string(r) + ".err");
    }
    return res;
  }
  std::string dir_;
};

void expect_all_ok(const std::vector<WorkerResult>& res) {
  for (std::size_t r = 0; r < res.size(); ++r) EXPECT_EQ(res[r].exit_code, 0) << "rank " << r << ":\n" << res[r].err;
}

TEST_F(StandIns, EveryCollectiveHasNcclSemantics) { expect_all_ok(run("collectives", 4)); }
TEST_F(StandIns, ThreeRanksToo) { expect_all_ok(run("collectives", 3)); }
TEST_F(StandIns, SendRecvInGroupsAndAlone) { expect_all_ok(run("p2p", 4)); }
TEST_F(StandIns, CommSplitByColourAndKey) { expect_all_ok(run("split", 5)); }

TEST_F(StandIns, LateRankMakesTheOthersWaitForItsArrivalPlusTheModeledDuration) {
  // No slack: rank 0's 300 ms of (unmodeled) sleep count in full (the modeled clock would otherwise absorb
  // up to GREYHOUND_SIM_SLACK_MS of it).
  const auto res = run("late_rank", 4, {{"GREYHOUND_SIM_SLACK_MS", "0"}});
  expect_all_ok(res);
  std::vector<double> enter, leave;
  for (const auto& r : res) {
    double a = 0, b = 0;
    ASSERT_EQ(std::sscanf(r.out.c_str(), "%lf %lf", &a, &b), 2) << r.out;
    enter.push_back(a);
    leave.push_back(b);
  }
  // 2 GPUs per node: ranks {0,1} on node 0, {2,3} on node 1; the ring crosses nodes.
  SimModel m;
  const std::vector<int> nodes = {0, 0, 1, 1};
  const double dur = collective_seconds(m, FaultSchedule{}, Op::kAllReduce, nodes, (1 << 16) * 4, 0);
  for (std::size_t r = 0; r < 4; ++r) {
    EXPECT_GE(leave[r], enter[0] + dur - 1e-4) << r;  // nobody leaves before the last arrival + duration
  }
  for (std::size_t r = 1; r < 4; ++r) EXPECT_GE(leave[r] - enter[r], 0.25) << r;  // waited for rank 0
}

TEST_F(StandIns, GpuFaultSlowsGemmsOfThatRankOnly) {
  const std::string faults = R"({"faults":[{"kind":"gpu","rank":1,"start_s":0,"end_s":1000,"slowdown":3}]})";
  const std::string model = R"({"launch_us": 0, "gemm_gflops": 0.01})";
  const auto res = run("gemm", 2, {{"GREYHOUND_SIM_FAULTS", faults}, {"GREYHOUND_SIM_MODEL", model}});
  expect_all_ok(res);
  const double healthy = 2.0 * 64 * 64 * 64 / 0.01e9;  // 52 ms
  const double t0 = std::atof(res[0].out.c_str()), t1 = std::atof(res[1].out.c_str());
  EXPECT_GE(t0, healthy - 1e-4);
  EXPECT_GE(t1, 3 * healthy - 1e-4);
  EXPECT_LT(t0, 2 * healthy);  // rank 0 is not slowed (generous bound: a 2-core machine is noisy)
}

TEST_F(StandIns, MismatchedCallsFailOnEveryRankWithoutHanging) {
  const auto res = run("mismatch", 3);
  expect_all_ok(res);
  EXPECT_NE(res[0].err.find("ranks disagree"), std::string::npos) << res[0].err;
}

TEST_F(StandIns, DeadPeerIsARemoteErrorNotAHang) { expect_all_ok(run("dead_peer", 3)); }

TEST_F(StandIns, BadFaultScheduleFailsFastNamingTheField) {
  const auto res = run("collectives", 1,
                       {{"GREYHOUND_SIM_FAULTS", R"({"faults":[{"kind":"gpu","rank":0,"start_s":1,"end_s":2}]})"}});
  EXPECT_EQ(res[0].exit_code, 2);
  EXPECT_NE(res[0].err.find("GREYHOUND_SIM_FAULTS: faults[0].slowdown: missing"), std::string::npos) << res[0].err;
  const auto res2 = run("collectives", 1, {{"GREYHOUND_SIM_MODEL", R"({"gemm_gflops": "fast"})"}});
  EXPECT_EQ(res2[0].exit_code, 2);
  EXPECT_NE(res2[0].err.find("GREYHOUND_SIM_MODEL.gemm_gflops"), std::string::npos) << res2[0].err;
}

}  // namespace
}  // namespace greyhound::sim
