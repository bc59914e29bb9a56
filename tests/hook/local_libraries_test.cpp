// The hook in a job whose NCCL and CUDA runtime were loaded with RTLD_LOCAL, as Python loads torch and
// what torch links: the job's calls reach the preloaded hook, which must then find the real functions in
// those libraries themselves (dlsym(RTLD_NEXT) does not see them). Seen on a GPU machine with torch 2.11:
// every NCCL call failed ("the real NCCL function is not loaded") and the job died at its first
// all-reduce. Here with the no-op NCCL and the CUDA stand-in, in a separate process (the hook initialises
// once per process).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "greyhound/ops.h"
#include "greyhound/ring.h"

namespace greyhound {
namespace {

TEST(HookLocalLibraries, CallsReachTheJobsOwnNcclAndTheHookTimesThemWithItsCudaRuntime) {
  char tmpl[] = "/tmp/gh-local-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  struct RemoveDir {
    std::string dir;
    ~RemoveDir() { std::system(("rm -rf " + dir).c_str()); }
  } remove_dir{dir};  // also when an assertion ends the test early
  const int calls = 8;
  const std::string cmd = "GREYHOUND_SHM_DIR=" + dir + " GREYHOUND_JOB=local GREYHOUND_RANK=0 LD_PRELOAD=" +
                          GREYHOUND_HOOK_PATH + " " + GREYHOUND_DLOPEN_JOB + " " + GREYHOUND_LOCAL_JOB + " " +
                          std::to_string(calls) + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[512];
  while (std::fgets(buf, sizeof buf, p) != nullptr) out += buf;
  const int status = pclose(p);
  ASSERT_TRUE(WIFEXITED(status)) << out;
  ASSERT_EQ(WEXITSTATUS(status), 0) << out;
  EXPECT_EQ(out.find("not loaded"), std::string::npos) << out;
  // Device profiling found the CUDA runtime (not kProfileStatusUnavailable).
  EXPECT_NE(out.find("profile_status " + std::to_string(kProfileStatusActive)), std::string::npos) << out;

  std::string err;
  auto ring = RingReader::open(dir + "/greyhound.local.0", &err);
  ASSERT_TRUE(ring) << err;
  std::vector<RecordPayload> recs;
  RingPollStats st;
  ring->poll(recs, 1u << 16, st, 0);
  int all_reduces = 0, timings = 0;
  for (const RecordPayload& r : recs) {
    const Op op = static_cast<Op>(r.op);
    if (op == Op::kAllReduce) {
      ++all_reduces;
      EXPECT_EQ(r.result, 0);  // passed through to the job's NCCL, which succeeded
    }
    if (op == Op::kTiming) ++timings;
  }
  EXPECT_EQ(all_reduces, calls);
  EXPECT_GE(timings, calls / 2);
}

}  // namespace
}  // namespace greyhound
