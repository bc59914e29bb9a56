// Device profiling through the hook: with the agent's flag set in the ring's control block, NCCL calls are
// timed with CUDA events (here the CPU stand-in of the CUDA runtime, whose events read the host clock) and
// reported as Timing records; a group is timed as one; the deadline switches it off by itself.
#include <gtest/gtest.h>
#include <nccl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "greyhound/ops.h"
#include "greyhound/ring.h"

namespace greyhound {
namespace {

std::vector<RecordPayload> read_all(const std::string& path) {
  std::string err;
  auto r = RingReader::open(path, &err);
  EXPECT_TRUE(r) << err;
  std::vector<RecordPayload> out;
  RingPollStats st;
  if (r) r->poll(out, 1u << 20, st, 0);
  return out;
}

std::uint64_t mono_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000ull + ts.tv_nsec;
}

TEST(HookProfile, CallsAndGroupsAreTimedWhileTheFlagIsSet) {
  char tmpl[] = "/tmp/gh-prof-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  const std::string ring = dir + "/greyhound.prof.0";
  const pid_t pid = fork();
  if (pid == 0) {
    setenv("GREYHOUND_SHM_DIR", dir.c_str(), 1);
    setenv("GREYHOUND_JOB", "prof", 1);
    setenv("GREYHOUND_RANK", "0", 1);
    ncclUniqueId id;
    ncclGetUniqueId(&id);  // creates the ring
    ncclComm_t c = nullptr;
    ncclCommInitRank(&c, 2, id, 0);
    std::string err;
    auto reader = RingReader::open(ring, &err);
    if (!reader) _exit(10);
    RingControl* ctl = reader->control(&err);
    if (ctl == nullptr) _exit(11);
    float x = 0;
    ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, c, nullptr);  // not profiled
    ctl->profile_until_ns.store(mono_ns() + 60'000'000'000ull);
    ctl->profile_flags.store(kProfileDevice);
    for (int i = 0; i < 3; ++i) ncclAllReduce(&x, &x, 256, ncclFloat32, ncclSum, c, nullptr);
    ncclGroupStart();
    ncclSend(&x, 1, ncclFloat32, 1, c, nullptr);
    ncclRecv(&x, 1, ncclFloat32, 1, c, nullptr);
    ncclGroupEnd();
    ncclBroadcast(&x, &x, 1, ncclFloat32, 0, c, nullptr);  // collects what is still pending
    if (ctl->profile_status.load() != kProfileStatusActive) _exit(12);
    ctl->profile_until_ns.store(mono_ns() - 1);  // deadline passed: no more timing
    ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, c, nullptr);
    ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, c, nullptr);
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 0);
  const auto recs = read_all(ring);
  std::vector<const RecordPayload*> timings;
  for (const auto& p : recs) {
    if (static_cast<Op>(p.op) == Op::kTiming) timings.push_back(&p);
  }
  // Three AllReduces, one group (measured at its GroupEnd), one Broadcast.
  ASSERT_EQ(timings.size(), 5u);
  for (const RecordPayload* t : timings) {
    const RecordPayload& measured = recs[t->aux];
    EXPECT_EQ(measured.seq, t->aux);
    EXPECT_EQ(t->measured_op, measured.op);
    EXPECT_LT(t->dur_ns, 1'000'000'000ull);
    EXPECT_GT(t->seq, t->aux);  // reported after the call it measures
  }
  EXPECT_EQ(static_cast<Op>(timings[0]->measured_op), Op::kAllReduce);
  EXPECT_EQ(timings[0]->bytes, 1024u);
  EXPECT_EQ(timings[0]->group_id, recs[timings[0]->aux].group_id);
  EXPECT_NE(timings[0]->group_id, 0u);
  EXPECT_EQ(static_cast<Op>(timings[3]->measured_op), Op::kGroupEnd);
  EXPECT_EQ(timings[3]->group_id, timings[0]->group_id);  // the group's first call's communicator
  EXPECT_EQ(timings[3]->peer, 1);
  EXPECT_EQ(static_cast<Op>(timings[4]->measured_op), Op::kBroadcast);
  // The last two AllReduces, after the deadline, have no Timing record.
  EXPECT_NE(static_cast<Op>(recs.back().op), Op::kTiming);
  EXPECT_EQ(static_cast<Op>(recs[recs.size() - 2].op), Op::kAllReduce);
  std::system(("rm -rf " + dir).c_str());
}

}  // namespace
}  // namespace greyhound
