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

// A temporary directory, removed with everything in it also when an assertion ends the test early.
struct TempDir {
  std::string path;
  explicit TempDir(const char* prefix) {
    std::string tmpl = std::string("/tmp/") + prefix + "-XXXXXX";
    if (mkdtemp(tmpl.data()) != nullptr) path = tmpl;
  }
  ~TempDir() {
    if (!path.empty()) std::system(("rm -rf " + path).c_str());
  }
};

TEST(HookLocalLibraries, CallsReachTheJobsOwnNcclAndTheHookTimesThemWithItsCudaRuntime) {
  const TempDir temp("gh-local");
  ASSERT_FALSE(temp.path.empty());
  const std::string& dir = temp.path;
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

// NCCL's dumps (src/hook/nccl_dumps.h): with NCCL_GRAPH_DUMP_FILE set (no topology dump), the rank that
// makes a communicator leaves copies of both dumps beside its ring for the agent, the job finds its graph dump
// where it asked for it, and no file of the hook's is left beside it; with the hook recording nothing (an
// unwritable shm dir: at exit) or disabled, the job's dump is still there; a device path is left to NCCL; a
// child process follows its parent's job's path unless it chose its own.
TEST(HookNcclDumps, TheJobsDumpIsWhereItAskedAndTheAgentGetsCopiesBesideTheRing) {
  const TempDir temp("gh-dumps");
  ASSERT_FALSE(temp.path.empty());
  const std::string& dir = temp.path;
  const auto run = [&](const std::string& case_dir, const std::string& env, const std::string& graph = "") {
    std::system(("mkdir -p " + case_dir + "/shm").c_str());
    const std::string cmd = env + " GREYHOUND_JOB=local GREYHOUND_RANK=0 NCCL_GRAPH_DUMP_FILE=" +
                            (graph.empty() ? case_dir + "/graph.xml" : graph) + " LD_PRELOAD=" + GREYHOUND_HOOK_PATH +
                            " " + GREYHOUND_DLOPEN_JOB + " " + GREYHOUND_LOCAL_JOB + " 2 > " + case_dir + "/out.txt 2>&1";
    const int status = std::system(cmd.c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  const auto files = [](const std::string& d) {
    std::string out;
    FILE* p = popen(("ls " + d).c_str(), "r");
    char buf[512];
    while (p != nullptr && std::fgets(buf, sizeof buf, p) != nullptr) out += buf;
    if (p != nullptr) pclose(p);
    return out;
  };
  const auto text = [](const std::string& path) {
    std::string out;
    if (FILE* f = std::fopen(path.c_str(), "r")) {
      char buf[512];
      while (std::fgets(buf, sizeof buf, f) != nullptr) out += buf;
      std::fclose(f);
    }
    return out;
  };
  const std::string rec = dir + "/recording";
  ASSERT_EQ(run(rec, "GREYHOUND_SHM_DIR=" + rec + "/shm"), 0) << text(rec + "/out.txt");
  EXPECT_NE(text(rec + "/graph.xml").find("<graphs version=\"1\">"), std::string::npos) << files(rec);
  EXPECT_EQ(files(rec), "graph.xml\nout.txt\nshm\n");  // no .greyhound.<pid> file, no topology dump
  const std::string shm = files(rec + "/shm");
  EXPECT_NE(shm.find("nccl-graph.greyhound.local.0."), std::string::npos) << shm;
  EXPECT_NE(shm.find("nccl-topo.greyhound.local.0."), std::string::npos) << shm;
  // Recording nothing (the ring cannot be made), or disabled: the job's dump all the same. (The test job
  // looks for its ring to switch profiling on, and ends with 13 without one.)
  const std::string pass = dir + "/pass-through";
  ASSERT_EQ(run(pass, "GREYHOUND_SHM_DIR=" + pass + "/no-such-dir"), 13) << text(pass + "/out.txt");
  EXPECT_EQ(files(pass), "graph.xml\nout.txt\nshm\n");
  const std::string off = dir + "/disabled";
  ASSERT_EQ(run(off, "GREYHOUND_DISABLE=1 GREYHOUND_SHM_DIR=" + off + "/shm"), 13) << text(off + "/out.txt");
  EXPECT_EQ(files(off), "graph.xml\nout.txt\nshm\n");
  EXPECT_EQ(files(off + "/shm"), "");
  // A path that is no plain file (a device, as /dev/stdout would be) is left to NCCL: no redirect, no copies.
  const std::string dev = dir + "/device";
  ASSERT_EQ(run(dev, "GREYHOUND_SHM_DIR=" + dev + "/shm", "/dev/null"), 0) << text(dev + "/out.txt");
  EXPECT_EQ(files(dev), "out.txt\nshm\n");
  EXPECT_EQ(files(dev + "/shm").find("nccl-"), std::string::npos) << files(dev + "/shm");
  // A process whose parent's hook redirected the dumps (its path still ".greyhound.<pid>") writes where the
  // parent's job asked; one that chose a path of its own keeps its choice.
  const std::string kid = dir + "/child";
  ASSERT_EQ(run(kid, "GREYHOUND_SHM_DIR=" + kid + "/shm GREYHOUND_NCCL_GRAPH_DUMP_FILE=" + kid + "/parent.xml",
                kid + "/parent.xml.greyhound.12345"),
            0)
      << text(kid + "/out.txt");
  EXPECT_EQ(files(kid), "out.txt\nparent.xml\nshm\n");
  const std::string own = dir + "/own-choice";
  ASSERT_EQ(run(own, "GREYHOUND_SHM_DIR=" + own + "/shm GREYHOUND_NCCL_GRAPH_DUMP_FILE=" + own + "/parent.xml"), 0)
      << text(own + "/out.txt");
  EXPECT_EQ(files(own), "graph.xml\nout.txt\nshm\n");
}

}  // namespace
}  // namespace greyhound
