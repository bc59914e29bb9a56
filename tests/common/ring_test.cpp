#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <ctime>
#include <string>
#include <thread>
#include <vector>

#include "greyhound/ring.h"

namespace greyhound {
namespace {

class RingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gh-ring-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }

  std::unique_ptr<RingWriter> make(std::uint64_t capacity, const std::string& name = "greyhound.job.0") {
    std::string err;
    auto w = RingWriter::create(dir_, name, capacity, RingIdentity{"job", 0, 0}, &err);
    EXPECT_TRUE(w) << err;
    return w;
  }
  std::unique_ptr<RingReader> open(const std::string& name = "greyhound.job.0") {
    std::string err;
    auto r = RingReader::open(dir_ + "/" + name, &err);
    EXPECT_TRUE(r) << err;
    return r;
  }
  std::string dir_;
};

RecordPayload rec(std::uint64_t count) {
  RecordPayload p{};
  p.count = count;
  return p;
}

TEST_F(RingTest, ReadsInOrderWithSequenceNumbers) {
  auto w = make(64);
  auto r = open();
  for (int i = 0; i < 10; ++i) {
    auto p = rec(100 + i);
    w->append(p);
    EXPECT_EQ(p.seq, static_cast<std::uint64_t>(i));
  }
  std::vector<RecordPayload> out;
  RingPollStats st;
  EXPECT_EQ(r->poll(out, 1000, st, 0), 10u);
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(out[i].seq, static_cast<std::uint64_t>(i));
    EXPECT_EQ(out[i].count, static_cast<std::uint64_t>(100 + i));
  }
  EXPECT_EQ(st.lost, 0u);
  EXPECT_EQ(r->poll(out, 1000, st, 0), 0u);  // nothing new
}

TEST_F(RingTest, ModeIs0600AndCapacityPowerOfTwo) {
  auto w = make(1000);
  struct stat s {};
  ASSERT_EQ(stat((dir_ + "/greyhound.job.0").c_str(), &s), 0);
  EXPECT_EQ(s.st_mode & 0777, 0600u);
  EXPECT_EQ(open()->capacity(), 1024u);
}

TEST_F(RingTest, ReaderThatFallsBehindLearnsHowManyItLost) {
  auto w = make(64);
  auto r = open();  // positioned at seq 0
  for (int i = 0; i < 200; ++i) {
    auto p = rec(i);
    w->append(p);
  }
  std::vector<RecordPayload> out;
  RingPollStats st;
  EXPECT_EQ(r->poll(out, 1000, st, 0), 64u);
  EXPECT_EQ(st.lost, 136u);
  EXPECT_EQ(out.front().seq, 136u);
  EXPECT_EQ(out.back().seq, 199u);
  EXPECT_EQ(out.front().count, 136u);
}

TEST_F(RingTest, ReaderOpenedLateStartsAtOldestWithoutLoss) {
  auto w = make(64);
  for (int i = 0; i < 100; ++i) {
    auto p = rec(i);
    w->append(p);
  }
  auto r = open();
  std::vector<RecordPayload> out;
  RingPollStats st;
  EXPECT_EQ(r->poll(out, 1000, st, 0), 64u);
  EXPECT_EQ(st.lost, 0u);
  EXPECT_EQ(out.front().seq, 36u);
  r->seek_end();
  EXPECT_EQ(r->next_seq(), 100u);
}

TEST_F(RingTest, IncompleteRecordIsWaitedForThenCountedLost) {
  auto w = make(64);
  auto r = open();
  auto p = rec(1);
  w->append(p);                                                     // seq 0 complete
  w->header()->write_index.fetch_add(1, std::memory_order_relaxed);  // seq 1 reserved by a writer that died
  p = rec(3);
  w->append(p);  // seq 2 complete
  std::vector<RecordPayload> out;
  RingPollStats st;
  const std::uint64_t t0 = 5'000'000'000ull;
  EXPECT_EQ(r->poll(out, 100, st, t0, 1'000'000'000ull), 1u);               // stops before seq 1
  EXPECT_EQ(r->poll(out, 100, st, t0 + 500'000'000ull, 1'000'000'000ull), 0u);  // still within its grace time
  EXPECT_EQ(st.lost, 0u);
  EXPECT_EQ(r->poll(out, 100, st, t0 + 1'500'000'000ull, 1'000'000'000ull), 1u);  // gives up on seq 1
  EXPECT_EQ(st.lost, 1u);
  EXPECT_EQ(out.back().seq, 2u);
}

TEST_F(RingTest, WriterDropsRatherThanShareASlotAndCounts) {
  auto w = make(64);
  auto r = open();
  // Slot 0 is being written by a writer lapped by a whole ring (odd stamp of seq 0).
  auto* slot0 = reinterpret_cast<Record*>(reinterpret_cast<char*>(w->header()) + kRingHeaderSize);
  slot0->stamp.store(1, std::memory_order_relaxed);
  w->header()->write_index.store(64, std::memory_order_relaxed);
  auto p = rec(7);
  w->append(p);  // seq 64 maps to slot 0: dropped
  EXPECT_EQ(w->header()->dropped.load(), 1u);
  EXPECT_EQ(r->dropped(), 1u);
  EXPECT_EQ(slot0->stamp.load(), 1u);  // untouched
}

TEST_F(RingTest, OpenRejectsWhatIsNotARing) {
  {
    FILE* f = std::fopen((dir_ + "/junk").c_str(), "w");
    std::fputs(std::string(5000, 'x').c_str(), f);
    std::fclose(f);
  }
  std::string err;
  EXPECT_FALSE(RingReader::open(dir_ + "/junk", &err));
  EXPECT_NE(err.find("bad magic"), std::string::npos) << err;
  EXPECT_FALSE(RingReader::open(dir_ + "/missing", &err));
  EXPECT_NE(err.find("cannot open"), std::string::npos) << err;
}

// In a shared directory (/dev/shm) another user can plant a symlink at the name the hook's temporary file
// will have: creating the ring must not follow it (a hook running as root would truncate its target).
TEST_F(RingTest, CreateNeverFollowsALinkPlantedAtItsTemporaryName) {
  const std::string victim = dir_ + "/victim";
  {
    FILE* f = std::fopen(victim.c_str(), "w");
    std::fputs("precious", f);
    std::fclose(f);
  }
  const std::string tmp = dir_ + "/greyhound.job.0.tmp" + std::to_string(getpid());
  ASSERT_EQ(symlink(victim.c_str(), tmp.c_str()), 0);
  auto w = make(64);
  ASSERT_TRUE(w);
  struct stat st {};
  ASSERT_EQ(stat(victim.c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 8);  // untouched
  struct stat ring {};
  ASSERT_EQ(lstat((dir_ + "/greyhound.job.0").c_str(), &ring), 0);
  EXPECT_TRUE(S_ISREG(ring.st_mode));
  EXPECT_EQ(ring.st_mode & 0777, 0600u);
}

TEST_F(RingTest, OpenTrustsOnlyThisUsersOwnRegularFile) {
  auto w = make(64);
  const std::string path = dir_ + "/greyhound.job.0";
  std::string err;
  ASSERT_TRUE(RingReader::open(path, &err)) << err;

  // Another user's ring (the owner this reader expects is not the file's).
  EXPECT_FALSE(RingReader::open(path, &err, geteuid() + 1));
  EXPECT_NE(err.find("owned by uid " + std::to_string(geteuid())), std::string::npos) << err;

  // Writable by others: anyone could rewrite what the agent publishes.
  ASSERT_EQ(chmod(path.c_str(), 0620), 0);
  EXPECT_FALSE(RingReader::open(path, &err));
  EXPECT_NE(err.find("writable by other users (mode 0620)"), std::string::npos) << err;
  ASSERT_EQ(chmod(path.c_str(), 0600), 0);

  // A symlink to a good ring is not followed.
  ASSERT_EQ(symlink(path.c_str(), (dir_ + "/greyhound.job.1").c_str()), 0);
  EXPECT_FALSE(RingReader::open(dir_ + "/greyhound.job.1", &err));
  EXPECT_NE(err.find("symbolic link"), std::string::npos) << err;

  // A FIFO at a ring's name is refused at once, without blocking the opener.
  ASSERT_EQ(mkfifo((dir_ + "/greyhound.job.2").c_str(), 0600), 0);
  EXPECT_FALSE(RingReader::open(dir_ + "/greyhound.job.2", &err));
  EXPECT_NE(err.find("not a regular file"), std::string::npos) << err;

  // Listing leaves all three out and says why; the agent's lock file is not a ring and not reported.
  {
    FILE* f = std::fopen((dir_ + "/greyhound.job.agent.lock").c_str(), "w");
    std::fputs("123\n", f);
    std::fclose(f);
  }
  ASSERT_EQ(chmod(path.c_str(), 0660), 0);
  std::vector<std::string> refused;
  EXPECT_TRUE(list_ring_files(dir_, "job", &refused).empty());
  ASSERT_EQ(refused.size(), 3u);
  std::string all;
  for (const auto& why : refused) all += why + "\n";
  EXPECT_NE(all.find("greyhound.job.0: writable by other users"), std::string::npos) << all;
  EXPECT_NE(all.find("greyhound.job.1: is a symbolic link"), std::string::npos) << all;
  EXPECT_NE(all.find("greyhound.job.2: not a regular file"), std::string::npos) << all;
  ASSERT_EQ(chmod(path.c_str(), 0600), 0);
  refused.clear();
  EXPECT_EQ(list_ring_files(dir_, "job", &refused).size(), 1u);
  EXPECT_EQ(refused.size(), 2u);
}

// The agent maps the header writable by name, later: a file put at that name since is not written to.
TEST_F(RingTest, TheWritableHeaderIsTheFileThatWasRead) {
  auto w = make(64);
  std::string err;
  auto r = RingReader::open(dir_ + "/greyhound.job.0", &err);
  ASSERT_TRUE(r) << err;
  auto other = RingWriter::create(dir_, "other", 64, RingIdentity{"job", 0, 0}, &err);
  ASSERT_TRUE(other) << err;
  ASSERT_EQ(rename((dir_ + "/other").c_str(), (dir_ + "/greyhound.job.0").c_str()), 0);
  EXPECT_EQ(r->control(&err), nullptr);
  EXPECT_NE(err.find("replaced since it was opened"), std::string::npos) << err;
}

// A writer that exited but was not waited for yet (a zombie) is no live writer; its ring says whether it
// ended through exit() (the hook marks it) or died.
TEST_F(RingTest, AZombieWriterIsGoneAndTheRingSaysHowItEnded) {
  for (const bool normal : {true, false}) {
    const std::string name = normal ? "greyhound.job.1" : "greyhound.job.2";
    int ready[2];
    ASSERT_EQ(pipe(ready), 0);
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      std::string err;
      auto w = RingWriter::create(dir_, name, 64, RingIdentity{"job", normal ? 1 : 2, 0}, &err);
      if (w && normal) w->header()->life.exited.store(1);  // what the hook's exit handler does
      const char c = w ? 'y' : 'n';
      (void)!write(ready[1], &c, 1);
      _exit(0);
    }
    ::close(ready[1]);
    char c = 0;
    ASSERT_EQ(read(ready[0], &c, 1), 1);
    ::close(ready[0]);
    ASSERT_EQ(c, 'y');
    std::string err;
    auto r = RingReader::open(dir_ + "/" + name, &err);
    ASSERT_TRUE(r) << err;
    // Not reaped yet: a zombie, which kill(pid, 0) still finds.
    for (int i = 0; i < 200 && r->writer_alive(); ++i) usleep(10'000);
    EXPECT_FALSE(r->writer_alive());
    EXPECT_EQ(kill(child, 0), 0) << "still a zombie";
    EXPECT_EQ(r->writer_exited_normally(), normal);
    int status = 0;
    waitpid(child, &status, 0);
    EXPECT_FALSE(r->writer_alive());
  }
  // This process's own ring: alive, not exited.
  auto w = make(64);
  std::string err;
  auto r = RingReader::open(dir_ + "/greyhound.job.0", &err);
  ASSERT_TRUE(r) << err;
  EXPECT_TRUE(r->writer_alive());
  EXPECT_FALSE(r->writer_exited_normally());
}

// A header whose capacity would wrap the size computation (2^57 records of 128 bytes is 2^64 bytes) is
// refused, not mapped and read out of bounds.
TEST_F(RingTest, ACapacityThatWrapsTheFileSizeIsRefused) {
  auto w = make(64);
  for (const std::uint64_t cap : {1ull << 57, 1ull << 63, 128ull}) {
    w->header()->capacity = cap;
    std::string err;
    EXPECT_FALSE(RingReader::open(dir_ + "/greyhound.job.0", &err)) << cap;
    EXPECT_NE(err.find("file shorter than its capacity (" + std::to_string(cap) + " records)"), std::string::npos) << err;
  }
  w->header()->capacity = 64;
  std::string err;
  EXPECT_TRUE(RingReader::open(dir_ + "/greyhound.job.0", &err)) << err;
}

TEST_F(RingTest, ListsRingsOfOneJobByHeader) {
  std::string err;
  auto a = RingWriter::create(dir_, ring_file_name("a", "0"), 64, RingIdentity{"a", 0, 0}, &err);
  auto b = RingWriter::create(dir_, ring_file_name("a.b", "3"), 64, RingIdentity{"a.b", 3, 0}, &err);
  const auto only_a = list_ring_files(dir_, "a");
  ASSERT_EQ(only_a.size(), 1u);
  EXPECT_EQ(only_a[0], dir_ + "/greyhound.a.0");
  EXPECT_EQ(list_ring_files(dir_, "a.b").size(), 1u);
  EXPECT_EQ(list_ring_files(dir_, "").size(), 2u);
}

TEST_F(RingTest, FindsTheRingOfOneProcess) {
  std::string err;
  // Another process's ring sorts first: the pid, not the order, finds this one.
  auto other = RingWriter::create(dir_, ring_file_name("a", "0"), 64, RingIdentity{"a", 0, 0}, &err);
  ASSERT_TRUE(other) << err;
  other->header()->pid = getpid() + 1;
  auto mine = RingWriter::create(dir_, ring_file_name("a", "1"), 64, RingIdentity{"a", 1, 0}, &err);
  ASSERT_TRUE(mine) << err;
  const auto found = open_process_ring(dir_, "a", getpid());
  ASSERT_TRUE(found);
  EXPECT_EQ(found->header().rank, 1);
  EXPECT_FALSE(open_process_ring(dir_, "a", getpid() + 2)) << "no ring of that process";
  EXPECT_FALSE(open_process_ring(dir_, "b", getpid())) << "another job's rings are not searched";
  EXPECT_FALSE(open_process_ring(dir_ + "/absent", "a", getpid()));
}

TEST(RingNames, SanitisedJobNames) {
  EXPECT_EQ(sanitize_job_name("my job/../x"), "my_job_.._x");
  EXPECT_EQ(sanitize_job_name(""), "default");
  EXPECT_EQ(ring_file_name("j", "7"), "greyhound.j.7");
  EXPECT_EQ(sanitize_job_name(std::string(200, 'a')).size(), kRingJobMax - 1);
}

// Every field of a record is derived from one random word, so a torn record cannot pass the check.
RecordPayload consistent_record(std::uint64_t x) {
  RecordPayload p{};
  p.t_ns = x ^ 0x5555555555555555ull;
  p.group_id = x;
  p.count = x * 3;
  p.bytes = ~x;
  p.stream = x * 0x9e3779b97f4a7c15ull;
  p.aux = x + 17;
  p.group_rank = static_cast<std::int32_t>(x & 0x7fffffff);
  p.group_size = static_cast<std::int32_t>((x >> 32) & 0x7fffffff);
  p.peer = static_cast<std::int32_t>(x % 1000);
  p.root = static_cast<std::int32_t>(x % 999);
  p.tid = static_cast<std::uint32_t>(x >> 7);
  p.result = static_cast<std::int32_t>(x % 8);
  p.op = static_cast<std::uint8_t>(x);
  p.dtype = static_cast<std::uint8_t>(x >> 8);
  p.flags = static_cast<std::uint8_t>(x >> 16);
  p.color = static_cast<std::int32_t>(x % 77);
  p.dur_ns = x ^ 1;
  p.reserved = x ^ 3;
  return p;
}

bool consistent(const RecordPayload& p) {
  RecordPayload want = consistent_record(p.group_id);
  want.seq = p.seq;
  want.check = p.check;
  return std::memcmp(&want, &p, sizeof p) == 0;
}

TEST_F(RingTest, ConcurrentWritersAndAReaderInAnotherProcessSeeNoTornRecord) {
  constexpr std::uint64_t kPerThread = 400'000;
  constexpr int kThreads = 2;
  auto w = make(256);  // small: the writers lap the reader constantly
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // reader process
    std::string err;
    auto r = RingReader::open(dir_ + "/greyhound.job.0", &err);
    if (!r) _exit(10);
    r->seek_oldest();
    char c = 1;
    if (write(ready[1], &c, 1) != 1) _exit(11);
    std::vector<RecordPayload> out;
    RingPollStats st;
    std::uint64_t last = 0;
    bool first = true;
    const std::uint64_t total = kPerThread * kThreads;
    while (r->next_seq() < total) {
      out.clear();
      timespec ts{};
      clock_gettime(CLOCK_MONOTONIC, &ts);
      r->poll(out, 64, st, static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000ull + ts.tv_nsec);
      for (const auto& p : out) {
        if (!consistent(p)) _exit(20);            // torn
        if (!first && p.seq <= last) _exit(21);   // out of order
        first = false;
        last = p.seq;
      }
      if (out.empty()) sched_yield();
    }
    if (st.read + st.lost != total) _exit(22);
    if (st.read == 0) _exit(23);
    _exit(0);
  }
  char c = 0;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  std::vector<std::thread> writers;
  for (int t = 0; t < kThreads; ++t) {
    writers.emplace_back([&, t] {
      std::uint64_t x = 0x1234567ull + static_cast<std::uint64_t>(t) * 0x100000000ull;
      for (std::uint64_t i = 0; i < kPerThread; ++i) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        RecordPayload p = consistent_record(x);
        w->append(p);
      }
    });
  }
  for (auto& th : writers) th.join();
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "20 torn, 21 out of order, 22 read+lost != written, 23 read nothing";
  // Writers lapped by a whole ring while a slow writer still holds a slot drop (and count) instead of
  // sharing it; the reader counted those among its lost ones.
  EXPECT_LT(w->header()->dropped.load(), kPerThread * kThreads);
}

}  // namespace
}  // namespace greyhound
