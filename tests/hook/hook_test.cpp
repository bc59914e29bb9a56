// libgreyhound.so in front of the no-op NCCL (tests/fixtures): what it records, what it passes through.
// The hook initialises once per process at the first NCCL call, so every case runs in a forked child
// with its own environment; the parent reads the rings the child left.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <nccl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "greyhound/ops.h"
#include "greyhound/ring.h"

extern "C" void nccl_fake_set(int result, int errno_value);

namespace greyhound {
namespace {

#define CHILD_CHECK(cond)                                                     \
  do {                                                                        \
    if (!(cond)) {                                                            \
      std::fprintf(stderr, "child check failed, line %d: %s\n", __LINE__, #cond); \
      return 1;                                                               \
    }                                                                         \
  } while (0)

struct ChildResult {
  int exit_code = -1;
  std::string stderr_text;
};

// Runs fn in a forked child with extra environment; collects its exit code and stderr.
ChildResult run_child(const std::map<std::string, std::string>& env, const std::function<int()>& fn) {
  int err_pipe[2];
  if (pipe(err_pipe) != 0) return {};
  const pid_t pid = fork();
  if (pid == 0) {
    close(err_pipe[0]);
    dup2(err_pipe[1], STDERR_FILENO);
    for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
    std::fflush(nullptr);
    _exit(fn());
  }
  close(err_pipe[1]);
  ChildResult r;
  char buf[4096];
  ssize_t n;
  while ((n = read(err_pipe[0], buf, sizeof buf)) > 0) r.stderr_text.append(buf, static_cast<std::size_t>(n));
  close(err_pipe[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

std::vector<RecordPayload> read_all(const std::string& path) {
  std::string err;
  auto r = RingReader::open(path, &err);
  EXPECT_TRUE(r) << err;
  std::vector<RecordPayload> out;
  if (!r) return out;
  RingPollStats st;
  r->poll(out, 1u << 20, st, 0);
  EXPECT_EQ(st.lost, 0u);
  return out;
}

std::vector<std::string> op_names(const std::vector<RecordPayload>& recs) {
  std::vector<std::string> v;
  for (const auto& p : recs) v.emplace_back(op_name(static_cast<Op>(p.op)));
  return v;
}

class HookTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gh-hook-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }
  std::map<std::string, std::string> env(int rank) const {
    return {{"GREYHOUND_SHM_DIR", dir_}, {"GREYHOUND_JOB", "hooktest"}, {"GREYHOUND_RANK", std::to_string(rank)},
            {"GREYHOUND_LOG_LEVEL", "warn"}};
  }
  std::string ring(int rank) const { return dir_ + "/greyhound.hooktest." + std::to_string(rank); }
  std::string dir_;
};

TEST_F(HookTest, RecordsEveryEntryPointWithItsFields) {
  const auto r = run_child(env(2), [] {
    ncclUniqueId id;
    CHILD_CHECK(ncclGetUniqueId(&id) == ncclSuccess);
    ncclComm_t c = nullptr;
    CHILD_CHECK(ncclCommInitRank(&c, 4, id, 2) == ncclSuccess);
    float buf[64];
    ncclAllReduce(buf, buf, 10, ncclFloat32, ncclSum, c, reinterpret_cast<cudaStream_t>(0x77));
    ncclAllGather(buf, buf, 3, ncclBfloat16, c, nullptr);
    ncclReduceScatter(buf, buf, 5, ncclFloat64, ncclMax, c, nullptr);
    ncclBroadcast(buf, buf, 7, ncclInt32, 1, c, nullptr);
    ncclBcast(buf, 2, ncclInt8, 3, c, nullptr);
    ncclReduce(buf, buf, 4, ncclFloat16, ncclMin, 3, c, nullptr);
    ncclAlltoAll(buf, buf, 6, ncclUint64, c, nullptr);
    ncclGather(buf, buf, 1, ncclUint8, 0, c, nullptr);
    ncclScatter(buf, buf, 9, ncclInt64, 2, c, nullptr);
    ncclGroupStart();
    ncclSend(buf, 8, ncclFloat32, 1, c, nullptr);
    ncclRecv(buf, 8, ncclFloat32, 3, c, nullptr);
    ncclGroupEnd();
    ncclComm_t child = nullptr;
    ncclCommSplit(c, 5, 1, &child, nullptr);
    ncclComm_t none = nullptr;
    ncclCommSplit(c, NCCL_SPLIT_NOCOLOR, 0, &none, nullptr);
    CHILD_CHECK(none == nullptr);
    ncclComm_t cfg = nullptr;
    ncclCommInitRankConfig(&cfg, 2, id, 1, nullptr);
    ncclComm_t scal = nullptr;
    ncclCommInitRankScalable(&scal, 3, 0, 1, &id, nullptr);
    ncclComm_t all[2];
    ncclCommInitAll(all, 2, nullptr);
    ncclComm_t shrunk = nullptr;
    int excluded[1] = {0};
    ncclCommShrink(c, excluded, 1, &shrunk, nullptr, 0);
    ncclAllReduce(buf, buf, 1, ncclFloat32, ncclSum, child, nullptr);
    ncclCommFinalize(child);
    ncclCommDestroy(child);
    ncclCommAbort(c);
    return 0;
  });
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  const auto recs = read_all(ring(2));
  const std::vector<std::string> want = {
      "GetUniqueId", "CommInitRank", "AllReduce", "AllGather", "ReduceScatter", "Broadcast", "Bcast", "Reduce",
      "AlltoAll", "Gather", "Scatter", "GroupStart", "Send", "Recv", "GroupEnd", "CommSplit", "CommSplit",
      "CommInitRankConfig", "CommInitRankScalable", "CommInitAll", "CommShrink", "AllReduce", "CommFinalize",
      "CommDestroy", "CommAbort"};
  ASSERT_EQ(op_names(recs), want);  // no GetUniqueId from inside CommInitRank: re-entrant calls pass through
  for (std::size_t i = 0; i < recs.size(); ++i) EXPECT_EQ(recs[i].seq, i);

  const std::uint64_t gid = recs[1].group_id;
  EXPECT_NE(gid, 0u);
  EXPECT_EQ(recs[0].group_id, gid);  // the unique id's group, known from GetUniqueId already
  EXPECT_EQ(recs[1].group_rank, 2);
  EXPECT_EQ(recs[1].group_size, 4);
  struct Want {
    std::size_t i;
    std::uint64_t count, bytes;
    int dtype, peer, root;
  };
  for (const Want& w : std::vector<Want>{{2, 10, 40, ncclFloat32, -1, -1},
                                          {3, 3, 6, ncclBfloat16, -1, -1},
                                          {4, 5, 40, ncclFloat64, -1, -1},
                                          {5, 7, 28, ncclInt32, -1, 1},
                                          {6, 2, 2, ncclInt8, -1, 3},
                                          {7, 4, 8, ncclFloat16, -1, 3},
                                          {8, 6, 48, ncclUint64, -1, -1},
                                          {9, 1, 1, ncclUint8, -1, 0},
                                          {10, 9, 72, ncclInt64, -1, 2},
                                          {12, 8, 32, ncclFloat32, 1, -1},
                                          {13, 8, 32, ncclFloat32, 3, -1}}) {
    const RecordPayload& p = recs[w.i];
    EXPECT_EQ(p.count, w.count) << w.i;
    EXPECT_EQ(p.bytes, w.bytes) << w.i;
    EXPECT_EQ(p.dtype, w.dtype) << w.i;
    EXPECT_EQ(p.peer, w.peer) << w.i;
    EXPECT_EQ(p.root, w.root) << w.i;
    EXPECT_EQ(p.group_id, gid) << w.i;
    EXPECT_EQ(p.group_rank, 2) << w.i;
    EXPECT_EQ(p.group_size, 4) << w.i;
    EXPECT_EQ(p.result, 0) << w.i;
    EXPECT_EQ(p.tid, static_cast<std::uint32_t>(recs[0].tid)) << w.i;
  }
  EXPECT_EQ(recs[2].stream, 0x77u);
  EXPECT_EQ(recs[11].flags & kRecordInGroup, 0);
  EXPECT_NE(recs[12].flags & kRecordInGroup, 0);
  EXPECT_NE(recs[13].flags & kRecordInGroup, 0);
  EXPECT_EQ(recs[14].flags & kRecordInGroup, 0);
  // Split: a new group under the parent, with rank and size asked from NCCL; no colour, no group.
  EXPECT_EQ(recs[15].aux, gid);
  EXPECT_EQ(recs[15].color, 5);
  EXPECT_NE(recs[15].group_id, 0u);
  EXPECT_NE(recs[15].group_id, gid);
  EXPECT_EQ(recs[15].group_rank, 1);  // fake split: rank = key % 4
  EXPECT_EQ(recs[15].group_size, 4);
  EXPECT_EQ(recs[16].group_id, 0u);
  EXPECT_EQ(recs[16].color, NCCL_SPLIT_NOCOLOR);
  EXPECT_EQ(recs[17].group_id, gid);  // same unique id, same group id
  EXPECT_EQ(recs[17].group_size, 2);
  EXPECT_NE(recs[18].group_id, 0u);
  EXPECT_EQ(recs[19].group_size, 2);
  EXPECT_EQ(recs[20].aux, gid);
  EXPECT_EQ(recs[20].group_size, 3);
  // Collectives on a communicator are numbered on it (1, 2, ...; the same on every member); sends and
  // receives (two members), a group's end (no communicator of its own) and lifecycle calls carry none.
  for (std::size_t i = 2; i <= 10; ++i) EXPECT_EQ(recs[i].group_seq, i - 1) << i;
  EXPECT_EQ(recs[12].group_seq, 0u);
  EXPECT_EQ(recs[13].group_seq, 0u);
  EXPECT_EQ(recs[14].group_seq, 0u);
  EXPECT_EQ(recs[1].group_seq, 0u);
  EXPECT_EQ(recs[15].group_seq, 0u);
  EXPECT_EQ(recs[21].group_seq, 1u);  // the split communicator's first
  EXPECT_EQ(recs[21].group_id, recs[15].group_id);  // collective on the split communicator
  EXPECT_EQ(recs[22].group_id, recs[15].group_id);
  EXPECT_EQ(recs[23].group_id, recs[15].group_id);
  EXPECT_EQ(recs[24].group_id, gid);
}

TEST_F(HookTest, GroupIdsAgreeAcrossMemberProcesses) {
  auto member = [](int rank) {
    return [rank] {
      ncclUniqueId id;
      std::memset(id.internal, 0x5a, sizeof id.internal);  // as if exchanged by the launcher
      ncclComm_t world = nullptr, a = nullptr, b = nullptr, c = nullptr;
      CHILD_CHECK(ncclCommInitRank(&world, 2, id, rank) == ncclSuccess);
      ncclCommSplit(world, 7, rank, &a, nullptr);
      ncclCommSplit(world, 7, rank, &b, nullptr);  // same colour, later split: another group
      ncclCommSplit(world, 8, rank, &c, nullptr);
      float x = 0;
      for (ncclComm_t comm : {world, a, b, c}) ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, comm, nullptr);
      return 0;
    };
  };
  ASSERT_EQ(run_child(env(0), member(0)).exit_code, 0);
  ASSERT_EQ(run_child(env(1), member(1)).exit_code, 0);
  const auto r0 = read_all(ring(0));
  const auto r1 = read_all(ring(1));
  ASSERT_EQ(r0.size(), 8u);
  ASSERT_EQ(r1.size(), 8u);
  std::set<std::uint64_t> distinct;
  for (std::size_t i = 0; i < r0.size(); ++i) {
    EXPECT_EQ(r0[i].group_id, r1[i].group_id) << "record " << i;
    distinct.insert(r0[i].group_id);
  }
  EXPECT_EQ(distinct.size(), 4u);  // world, two colour-7 splits, one colour-8 split
  for (std::size_t i = 4; i < 8; ++i) EXPECT_EQ(r0[i].group_id, r0[i - 4].group_id);
}

TEST_F(HookTest, ReturnCodeAndErrnoOfTheRealNcclPassThrough) {
  const auto r = run_child(env(0), [] {
    float x = 0;
    nccl_fake_set(ncclInvalidUsage, EAGAIN);
    errno = 0;
    CHILD_CHECK(ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, nullptr, nullptr) == ncclInvalidUsage);
    CHILD_CHECK(errno == EAGAIN);  // what NCCL left, even though the hook created its ring meanwhile
    nccl_fake_set(ncclRemoteError, ENOENT);
    CHILD_CHECK(ncclSend(&x, 1, ncclFloat32, 0, nullptr, nullptr) == ncclRemoteError);
    CHILD_CHECK(errno == ENOENT);
    return 0;
  });
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  const auto recs = read_all(ring(0));
  ASSERT_EQ(recs.size(), 2u);
  EXPECT_EQ(recs[0].result, ncclInvalidUsage);
  EXPECT_EQ(recs[1].result, ncclRemoteError);
  EXPECT_EQ(recs[0].group_id, 0u);  // unknown communicator: no group
}

// The ring says how its writer ended (the agent tells a fail-stop from a finished rank by it), and whether it
// is inside a call now (none, once the calls returned).
TEST_F(HookTest, TheRingSaysWhetherItsProcessExitedNormally) {
  // exit(0): finished; exit(3): failed (an uncaught exception ends so); _exit: no exit handler ran.
  for (const int how : {0, 3, -1}) {
    const int rank = how == 0 ? 1 : how == 3 ? 2 : 3;
    const auto r = run_child(env(rank), [how] {
      ncclUniqueId id;
      CHILD_CHECK(ncclGetUniqueId(&id) == ncclSuccess);
      ncclComm_t c = nullptr;
      CHILD_CHECK(ncclCommInitRank(&c, 4, id, 1) == ncclSuccess);
      float buf[8];
      ncclAllReduce(buf, buf, 8, ncclFloat32, ncclSum, c, nullptr);
      if (how >= 0) std::exit(how);  // exit handlers run: the hook marks its ring with the status
      return 0;                      // run_child leaves by _exit(): they do not
    });
    ASSERT_EQ(r.exit_code, how >= 0 ? how : 0) << r.stderr_text;
    std::string err;
    auto reader = RingReader::open(ring(rank), &err);
    ASSERT_TRUE(reader) << err;
    EXPECT_FALSE(reader->writer_alive());
    EXPECT_EQ(reader->writer_exited_normally(), how == 0) << how;
    EXPECT_EQ(reader->writer_exit_status(), how >= 0 ? std::optional<int>(how) : std::nullopt) << how;
    EXPECT_FALSE(reader->in_call());
    const auto recs = read_all(ring(rank));
    ASSERT_EQ(recs.size(), 3u);
    EXPECT_EQ(recs[2].group_seq, 1u);
  }
}

TEST_F(HookTest, DisableIsPurePassThrough) {
  auto e = env(0);
  e["GREYHOUND_DISABLE"] = "1";
  const auto r = run_child(e, [] {
    float x = 0;
    nccl_fake_set(ncclInternalError, 0);
    CHILD_CHECK(ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, nullptr, nullptr) == ncclInternalError);
    return 0;
  });
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_TRUE(list_ring_files(dir_, "").empty());
  EXPECT_EQ(r.stderr_text, "");
}

TEST_F(HookTest, UnwritableShmDirPassesThroughWithOneWarning) {
  auto e = env(0);
  e["GREYHOUND_SHM_DIR"] = dir_ + "/does/not/exist";
  const auto r = run_child(e, [] {
    float x = 0;
    for (int i = 0; i < 100; ++i) {
      CHILD_CHECK(ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, nullptr, nullptr) == ncclSuccess);
    }
    return 0;
  });
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  std::size_t lines = 0;
  for (char c : r.stderr_text) lines += c == '\n';
  EXPECT_EQ(lines, 1u) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("cannot create the record ring"), std::string::npos) << r.stderr_text;
}

TEST_F(HookTest, ForkedChildRecordsIntoItsOwnRing) {
  const auto r = run_child(env(3), [] {
    float x = 0;
    ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, nullptr, nullptr);
    const pid_t pid = fork();
    if (pid == 0) {
      ncclAllGather(&x, &x, 1, ncclFloat32, nullptr, nullptr);
      ncclAllGather(&x, &x, 1, ncclFloat32, nullptr, nullptr);
      _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    ncclReduce(&x, &x, 1, ncclFloat32, ncclSum, 0, nullptr, nullptr);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
  });
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_EQ(op_names(read_all(ring(3))), (std::vector<std::string>{"AllReduce", "Reduce"}));
  const auto files = list_ring_files(dir_, "hooktest");
  ASSERT_EQ(files.size(), 2u);
  const std::string child_ring = files[0] == ring(3) ? files[1] : files[0];
  EXPECT_NE(child_ring.find(ring(3) + ".p"), std::string::npos) << child_ring;
  EXPECT_EQ(op_names(read_all(child_ring)), (std::vector<std::string>{"AllGather", "AllGather"}));
}

TEST_F(HookTest, ThreadsRecordConcurrently) {
  const auto r = run_child(env(0), [] {
    std::vector<std::thread> ts;
    for (int t = 0; t < 4; ++t) {
      ts.emplace_back([] {
        float x = 0;
        for (int i = 0; i < 1000; ++i) ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, nullptr, nullptr);
      });
    }
    for (auto& t : ts) t.join();
    return 0;
  });
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  const auto recs = read_all(ring(0));
  ASSERT_EQ(recs.size(), 4000u);
  std::map<std::uint32_t, int> per_thread;
  for (const auto& p : recs) ++per_thread[p.tid];
  ASSERT_EQ(per_thread.size(), 4u);
  for (const auto& [tid, n] : per_thread) EXPECT_EQ(n, 1000) << tid;
}

// One thread at a time writes the in-call marker: a call that finds `writer` taken (another thread writing
// it) leaves the marker as it is, so that two calls beginning at once never mix their fields (ThreadSanitizer
// found them mixed in ThreadsRecordConcurrently); once `writer` is free, calls write and clear it again.
TEST_F(HookTest, ACallLeavesTheInCallMarkerToAThreadWritingIt) {
  const std::string path = ring(0);
  const auto r = run_child(env(0), [path] {
    float x = 0;
    CHILD_CHECK(ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, nullptr, nullptr) == ncclSuccess);  // makes the ring
    const int fd = ::open(path.c_str(), O_RDWR);
    CHILD_CHECK(fd >= 0);
    void* m = mmap(nullptr, sizeof(RingHeader), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    CHILD_CHECK(m != MAP_FAILED);
    RingInCall& in_call = static_cast<RingHeader*>(m)->in_call;
    CHILD_CHECK(in_call.writer.load() == 0 && in_call.enter_ns.load() == 0);
    in_call.writer.store(1);  // as another thread would while it writes
    in_call.enter_ns.store(12345);
    in_call.group_id = 0xfeed;
    CHILD_CHECK(ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, nullptr, nullptr) == ncclSuccess);
    CHILD_CHECK(in_call.enter_ns.load() == 12345 && in_call.group_id == 0xfeed);
    in_call.writer.store(0);
    CHILD_CHECK(ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, nullptr, nullptr) == ncclSuccess);
    CHILD_CHECK(in_call.enter_ns.load() == 0 && in_call.group_id != 0xfeed && in_call.writer.load() == 0);
    munmap(m, sizeof(RingHeader));
    close(fd);
    return 0;
  });
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_EQ(read_all(ring(0)).size(), 3u);
}

TEST_F(HookTest, ProfilingWithoutACudaRuntimeReportsUnavailableAndStillRecords) {
  const auto r = run_child(env(0), [this] {
    float x = 0;
    ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, nullptr, nullptr);  // creates the ring
    std::string err;
    auto reader = RingReader::open(ring(0), &err);
    CHILD_CHECK(reader != nullptr);
    RingControl* ctl = reader->control(&err);
    CHILD_CHECK(ctl != nullptr);
    ctl->profile_flags.store(kProfileDevice);
    for (int i = 0; i < 5; ++i) CHILD_CHECK(ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, nullptr, nullptr) == ncclSuccess);
    CHILD_CHECK(ctl->profile_status.load() == kProfileStatusUnavailable);
    return 0;
  });
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_EQ(read_all(ring(0)).size(), 6u);  // every call recorded, no Timing record
}

TEST(HookExports, OnlyNcclEntryPointsAndNoNcclOrCudaLink) {
  const std::string lib = GREYHOUND_HOOK_PATH;
  FILE* p = popen(("nm -D --defined-only " + lib + " | awk '{print $3}' | sort").c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::vector<std::string> names;
  char line[512];
  while (std::fgets(line, sizeof line, p)) {
    std::string s(line);
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
    if (!s.empty()) names.push_back(s);
  }
  ASSERT_EQ(pclose(p), 0);
  const std::vector<std::string> want = {
      "ncclAllGather",   "ncclAllReduce",    "ncclAlltoAll",      "ncclBcast",
      "ncclBroadcast",   "ncclCommAbort",    "ncclCommDestroy",   "ncclCommFinalize",
      "ncclCommInitAll", "ncclCommInitRank", "ncclCommInitRankConfig", "ncclCommInitRankScalable",
      "ncclCommShrink",  "ncclCommSplit",    "ncclGather",        "ncclGetUniqueId",
      "ncclGroupEnd",    "ncclGroupStart",   "ncclRecv",          "ncclReduce",
      "ncclReduceScatter", "ncclScatter",    "ncclSend"};
  EXPECT_EQ(names, want);

  p = popen(("readelf -d " + lib + " | grep NEEDED").c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string needed;
  while (std::fgets(line, sizeof line, p)) needed += line;
  pclose(p);
  EXPECT_EQ(needed.find("nccl"), std::string::npos) << needed;
  EXPECT_EQ(needed.find("cuda"), std::string::npos) << needed;
  EXPECT_EQ(needed.find("cublas"), std::string::npos) << needed;
}

}  // namespace
}  // namespace greyhound
