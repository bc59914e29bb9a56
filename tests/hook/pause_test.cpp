// The pause gate through the hook (docs/validation.md): a rank traps at the first NCCL call of the marked
// iteration, drains, runs the tests it is given (GEMM on the cuBLAS stand-in, P2P through the no-op NCCL),
// reports and resumes when told or by itself at the deadline; it refuses a cut it is past, one inside an
// NCCL group and one while its stream captures a CUDA graph. The agent's side is played by a thread of the
// test process, through the ring's PauseControl, as the agent writes it.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <nccl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>

#include "greyhound/job.h"
#include "greyhound/ops.h"
#include "greyhound/ring.h"

namespace greyhound {
namespace {

std::uint64_t mono_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000ull + ts.tv_nsec;
}

// Waits (bounded) until `pc` reports `state` for request `id`.
bool wait_state(PauseControl* pc, std::uint64_t id, std::uint32_t state, double max_s = 10) {
  const std::uint64_t until = mono_ns() + static_cast<std::uint64_t>(max_s * 1e9);
  while (mono_ns() < until) {
    if (pc->state.load(std::memory_order_acquire) == state && pc->state_id.load() == id) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

void arm(PauseControl* pc, std::uint64_t id, std::uint64_t at, double deadline_s, std::uint32_t gemm_n,
         std::uint64_t group, bool with_transfer) {
  pc->id.store(0);
  pc->command.store(kPauseCmdArm);
  pc->at_iteration = at;
  pc->deadline_ns = mono_ns() + static_cast<std::uint64_t>(deadline_s * 1e9);
  pc->gemm_n = gemm_n;
  pc->repeats = 3;
  pc->n_sizes = 2;
  pc->sizes[0] = 1024;
  pc->sizes[1] = 4096;
  pc->n_transfers = with_transfer ? 1 : 0;
  pc->transfers[0] = PauseTransfer{group, 0, 1, 1, 0, {0, 0, 0, 0}};
  pc->id.store(id, std::memory_order_release);
}

// Runs `body` in a child process that has a ring (job "pause", rank 0, in a fresh dir) and one
// communicator; returns the child's exit status. `body` gets the ring's pause block and the communicator.
int in_child(const std::string& dir, const std::function<int(PauseControl*, ncclComm_t)>& body) {
  const pid_t pid = fork();
  if (pid == 0) {
    setenv("GREYHOUND_SHM_DIR", dir.c_str(), 1);
    setenv("GREYHOUND_JOB", "pause", 1);
    setenv("GREYHOUND_RANK", "0", 1);
    setenv("GREYHOUND_LOG_LEVEL", "info", 1);
    ncclUniqueId uid;
    ncclGetUniqueId(&uid);  // creates the ring
    ncclComm_t c = nullptr;
    ncclCommInitRank(&c, 2, uid, 0);
    std::string err;
    auto reader = RingReader::open(dir + "/greyhound.pause.0", &err);
    if (!reader) _exit(10);
    PauseControl* pc = reader->pause(&err);
    if (pc == nullptr) _exit(11);
    _exit(body(pc, c));
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// Plays the agent's part in pause `id` from a thread (trapped: run; done: resume) while this rank marks
// iterations first..last-1, one AllReduce each; 0, or 1 (never trapped) or 2 (no results). The iteration
// mark the rank had when it trapped goes to `trapped_at_mark`.
int pause_through(PauseControl* pc, ncclComm_t c, std::uint64_t id, int first, int last,
                  std::uint64_t* trapped_at_mark = nullptr) {
  float x = 1;
  std::atomic<int> failed{0};
  std::thread agent([&] {
    if (!wait_state(pc, id, kPauseTrapped)) { failed = 1; return; }
    if (trapped_at_mark != nullptr) *trapped_at_mark = pc->iteration_mark.load();
    pc->command.store(kPauseCmdRun, std::memory_order_release);
    if (!wait_state(pc, id, kPauseDone)) { failed = 2; return; }
    pc->command.store(kPauseCmdResume, std::memory_order_release);
  });
  for (int it = first; it < last; ++it) {
    greyhound_job_mark_iteration_v1(it);
    ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, c, nullptr);
  }
  agent.join();
  return failed;
}

class HookPause : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gh-pause-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }
  std::string dir_;
};

std::uint64_t group_of(const std::string& dir) {
  std::string err;
  auto r = RingReader::open(dir + "/greyhound.pause.0", &err);
  std::vector<RecordPayload> out;
  RingPollStats st;
  r->poll(out, 1 << 16, st, 0);
  for (const auto& p : out) {
    if (p.group_id != 0) return p.group_id;
  }
  return 0;
}

TEST_F(HookPause, TrapsAtTheMarkedIterationRunsTheTestsAndResumesWhenTold) {
  const int rc = in_child(dir_, [&](PauseControl* pc, ncclComm_t c) {
    float x = 1;
    greyhound_job_mark_iteration_v1(0);
    ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, c, nullptr);
    const std::uint64_t group = group_of(dir_);
    if (group == 0) return 20;
    arm(pc, 7, 2, 30, 40, group, true);
    std::uint64_t trapped_at_mark = 0;
    if (const int failed = pause_through(pc, c, 7, 1, 5, &trapped_at_mark); failed != 0) return 20 + failed;
    if (trapped_at_mark != 3) return 30;  // iteration 2 in progress
    if (!wait_state(pc, 7, kPauseResumed, 1) || pc->reason != kPauseWhyTold) return 31;
    if (!(pc->gemm_ms[0] > 0) || !(pc->gemm_ms[1] > 0) || !(pc->gemm_tflops[0] > 0)) return 32;
    if (!(pc->transfers[0].ms[0] >= 0) || pc->resumed_ns <= pc->trapped_ns) return 33;
    // FP8 through the cuBLASLt stand-in on the simulated 9.0 device, n rounded down to a multiple of 16.
    const PauseGemmFp8& fp8 = pause_fp8_of(*pc);
    if (fp8.id != 7 || fp8.status != kGemmFp8Done || fp8.compute_capability != 90) return 34;
    if (fp8.n != 32 || !(fp8.ms > 0) || !(fp8.tflops > 0)) return 35;
    return 0;
  });
  ASSERT_EQ(rc, 0);
  // The tests are not in the ring: five marked iterations of one AllReduce each, nothing else moved data.
  std::string err;
  auto r = RingReader::open(dir_ + "/greyhound.pause.0", &err);
  ASSERT_TRUE(r) << err;
  std::vector<RecordPayload> out;
  RingPollStats st;
  r->poll(out, 1 << 16, st, 0);
  int allreduce = 0, p2p = 0;
  for (const auto& p : out) {
    allreduce += static_cast<Op>(p.op) == Op::kAllReduce;
    p2p += static_cast<Op>(p.op) == Op::kSend || static_cast<Op>(p.op) == Op::kRecv;
  }
  EXPECT_EQ(allreduce, 5);
  EXPECT_EQ(p2p, 0);
}

// The stand-ins read their device model when they load: this test runs again in a process of its own, on
// a simulated device of compute capability 8.0 (an A100's), where no FP8 GEMM runs and the others do.
TEST_F(HookPause, OnADeviceBelowComputeCapability89TheFp8GemmIsReportedUnsupported) {
  if (std::getenv("GREYHOUND_PAUSE_TEST_CC80") == nullptr) {
    const pid_t pid = fork();
    if (pid == 0) {
      setenv("GREYHOUND_PAUSE_TEST_CC80", "1", 1);
      setenv("GREYHOUND_SIM_MODEL", R"({"compute_capability":80})", 1);
      execl("/proc/self/exe", "greyhound_hook_pause_tests",
            "--gtest_filter=HookPause.OnADeviceBelowComputeCapability89TheFp8GemmIsReportedUnsupported", nullptr);
      _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the run on a simulated 8.0 device failed";
    return;
  }
  const int rc = in_child(dir_, [&](PauseControl* pc, ncclComm_t c) {
    float x = 1;
    greyhound_job_mark_iteration_v1(0);
    ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, c, nullptr);
    arm(pc, 9, 1, 30, 32, 0, false);
    if (const int failed = pause_through(pc, c, 9, 1, 4); failed != 0) return 20 + failed;
    if (!(pc->gemm_ms[0] > 0) || !(pc->gemm_ms[1] > 0)) return 30;
    const PauseGemmFp8& fp8 = pause_fp8_of(*pc);
    if (fp8.id != 9 || fp8.status != kGemmFp8Unsupported || fp8.compute_capability != 80) return 31;
    if (fp8.ms != 0 || fp8.tflops != 0) return 32;
    return 0;
  });
  ASSERT_EQ(rc, 0);
}

// A pre-flight with --fail-on-slow: told to exit once its results are in, the rank's process ends at the cut
// with status 75, and its ring says so (the agent tells that exit from a fail-stop).
TEST_F(HookPause, ExitsWithItsStatusWhenTheVerdictSaysSo) {
  const int rc = in_child(dir_, [&](PauseControl* pc, ncclComm_t c) {
    float x = 1;
    greyhound_job_mark_iteration_v1(0);
    arm(pc, 11, 0, 30, 32, 0, false);
    std::thread agent([&] {
      if (!wait_state(pc, 11, kPauseTrapped)) return;
      pc->command.store(kPauseCmdRun, std::memory_order_release);
      if (!wait_state(pc, 11, kPauseDone)) return;
      pc->command.store(kPauseCmdExit, std::memory_order_release);
    });
    agent.detach();
    ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, c, nullptr);  // the cut: iteration 0's first call
    return 40;  // never here: the process ended at the cut
  });
  EXPECT_EQ(rc, kPauseExitStatus);
  std::string err;
  auto r = RingReader::open(dir_ + "/greyhound.pause.0", &err);
  ASSERT_TRUE(r) << err;
  EXPECT_EQ(r->writer_exit_status(), kPauseExitStatus);
}

TEST_F(HookPause, ResumesByItselfAtTheDeadline) {
  const int rc = in_child(dir_, [&](PauseControl* pc, ncclComm_t c) {
    float x = 1;
    greyhound_job_mark_iteration_v1(0);
    arm(pc, 9, 1, 1.0, 0, 0, false);  // nobody says run or resume
    ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, c, nullptr);  // iteration 0: before the cut
    greyhound_job_mark_iteration_v1(1);
    const std::uint64_t t0 = mono_ns();
    ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, c, nullptr);  // the cut
    const double waited = static_cast<double>(mono_ns() - t0) * 1e-9;
    if (pc->state.load() != kPauseResumed || pc->reason != kPauseWhyDeadline) return 20;
    if (waited < 0.9 || waited > 5.0) return 21;
    // Handled once: the next calls pass.
    const std::uint64_t t1 = mono_ns();
    greyhound_job_mark_iteration_v1(2);
    ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, c, nullptr);
    if (mono_ns() - t1 > 500'000'000ull) return 22;
    return 0;
  });
  EXPECT_EQ(rc, 0);
}

TEST_F(HookPause, RefusesACutItIsPastOrInsideAGroupOrWhileCapturing) {
  const int rc = in_child(dir_, [&](PauseControl* pc, ncclComm_t c) {
    float x = 1;
    // Past: iteration 1 marked and already issued a call when the pause for iteration 1 is armed.
    greyhound_job_mark_iteration_v1(1);
    ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, c, nullptr);
    arm(pc, 11, 1, 30, 0, 0, false);
    ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, c, nullptr);
    if (!wait_state(pc, 11, kPauseRefused, 1) || pc->reason != kPauseWhyPast) return 20;
    // Inside a group: the mark falls between ncclGroupStart and the first call.
    arm(pc, 12, 2, 30, 0, 0, false);
    ncclGroupStart();
    greyhound_job_mark_iteration_v1(2);
    ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, c, nullptr);
    ncclGroupEnd();
    if (!wait_state(pc, 12, kPauseRefused, 1) || pc->reason != kPauseWhyInGroup) return 21;
    // Capturing: the cut's call is on a stream that captures a CUDA graph.
    cudaStream_t s = nullptr;
    if (cudaStreamCreate(&s) != cudaSuccess) return 22;
    arm(pc, 13, 3, 30, 0, 0, false);
    cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
    greyhound_job_mark_iteration_v1(3);
    ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, c, s);
    cudaGraph_t g = nullptr;
    cudaStreamEndCapture(s, &g);
    if (!wait_state(pc, 13, kPauseRefused, 1) || pc->reason != kPauseWhyCapturing) return 23;
    // A request the agent aborted before the cut: the rank passes it without trapping.
    arm(pc, 14, 4, 30, 0, 0, false);
    pc->command.store(kPauseCmdAbort);
    greyhound_job_mark_iteration_v1(4);
    const std::uint64_t t0 = mono_ns();
    ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, c, nullptr);
    if (mono_ns() - t0 > 500'000'000ull || pc->state_id.load() == 14) return 24;
    return 0;
  });
  EXPECT_EQ(rc, 0);
}

}  // namespace
}  // namespace greyhound
