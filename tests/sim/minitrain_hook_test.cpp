// End to end on the tracking path: an 8-rank TP2 x DP2 x PP2 greyhound-minitrain on 2 virtual nodes,
// launched by greyhound-simcluster under libgreyhound.so. The rings must hold exactly the NCCL calls the
// job issued (its own call log), per rank and in order, with the right sizes and group ids; the training
// results must be bit-identical with the hook, without it, disabled, and with an unusable shm dir.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "greyhound/ops.h"
#include "greyhound/parallel_shape.h"
#include "greyhound/ring.h"
#include "sim/simcluster/run_report.h"

namespace greyhound {
namespace {

constexpr ParallelShape kShape{2, 2, 2};
constexpr int kT = kShape.tp, kD = kShape.dp, kP = kShape.pp, kWorld = kShape.world();

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Call {
  std::string op, comm;
  std::uint64_t count;
  int dtype, peer, root;
};

std::vector<Call> read_calls(const std::string& path) {
  std::vector<Call> out;
  std::istringstream in(slurp(path));
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    std::vector<std::string> f;
    std::stringstream ls(line);
    std::string cell;
    while (std::getline(ls, cell, ',')) f.push_back(cell);
    if (f.size() == 5) f.push_back("");  // trailing empty cell
    if (f.size() != 6) continue;
    out.push_back({f[0], f[1], std::stoull(f[2]), std::stoi(f[3]), std::stoi(f[4]), std::stoi(f[5])});
  }
  return out;
}

class MinitrainUnderHook : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char tmpl[] = "/tmp/gh-minitrain-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
  }
  static void TearDownTestSuite() { std::system(("rm -rf " + root_).c_str()); }

  // Runs the simulated job; returns simcluster's exit code. Work dir (logs, rings) is root_/name.
  static int run(const std::string& name, const std::string& extra) {
    const std::string w = root_ + "/" + name;
    const std::string cmd = std::string(GREYHOUND_SIMCLUSTER) +
                            " --tp 2 --dp 2 --pp 2 --gpus-per-node 4 --microbatches 4 --iterations 4 --quiet --keep"
                            " --job it --work-dir " + w + " --shm-dir " + w + " --report " + w + "/report.json " +
                            extra + " > " + root_ + "/" + name + ".log 2>&1";
    std::system(("mkdir -p " + w).c_str());
    const int status = std::system(cmd.c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  static std::vector<std::string> checksums(const std::string& name, int rank) {
    std::vector<std::string> out;
    for (const auto& it : sim::parse_iteration_log(slurp(root_ + "/" + name + "/rank" + std::to_string(rank) + ".out"))) {
      out.push_back(it.checksum);
    }
    return out;
  }
  static std::string root_;
};
std::string MinitrainUnderHook::root_;

// Which group a rank belongs to, per communicator name (Megatron order).
std::string group_key(const std::string& comm, int rank) {
  const auto [tp, dp, pp] = kShape.coords(rank);
  if (comm == "world") return "world";
  if (comm == "tp") return "tp:" + std::to_string(dp) + "," + std::to_string(pp);
  if (comm == "dp") return "dp:" + std::to_string(tp) + "," + std::to_string(pp);
  if (comm == "pp") return "pp:" + std::to_string(tp) + "," + std::to_string(dp);
  return "";
}

void check_records_match_calls(const std::string& dir) {
  std::map<std::string, std::set<std::uint64_t>> ids_of_group;  // group key -> ids seen on its members
  std::map<std::uint64_t, std::set<std::string>> groups_of_id;
  for (int r = 0; r < kWorld; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    const auto calls = read_calls(dir + "/calls." + std::to_string(r) + ".csv");
    std::string err;
    // Each virtual node (4 GPUs) has its own shm dir, as each host has its own /dev/shm.
    auto reader = RingReader::open(dir + "/node" + std::to_string(r / 4) + "/greyhound.it." + std::to_string(r), &err);
    ASSERT_TRUE(reader) << err;
    EXPECT_EQ(reader->header().rank, r);
    std::vector<RecordPayload> recs;
    RingPollStats st;
    reader->poll(recs, 1u << 20, st, 0);
    EXPECT_EQ(st.lost, 0u);
    EXPECT_EQ(reader->dropped(), 0u);
    ASSERT_GT(calls.size(), 50u);
    ASSERT_EQ(recs.size(), calls.size());
    for (std::size_t i = 0; i < calls.size(); ++i) {
      const Call& c = calls[i];
      const RecordPayload& p = recs[i];
      ASSERT_EQ(std::string(op_name(static_cast<Op>(p.op))), c.op) << "call " << i;
      EXPECT_EQ(p.seq, i);
      EXPECT_EQ(p.result, 0);
      if (op_moves_data(static_cast<Op>(p.op))) {
        EXPECT_EQ(p.count, c.count) << "call " << i;
        EXPECT_EQ(p.dtype, c.dtype) << "call " << i;
        EXPECT_EQ(p.bytes, c.count * 4) << "call " << i;  // float32
        EXPECT_EQ(p.peer, c.peer) << "call " << i;
        EXPECT_EQ(p.root, c.root) << "call " << i;
      }
      if (i > 0) {
        EXPECT_GE(p.t_ns, recs[i - 1].t_ns);
      }
      const std::string key = group_key(c.comm, r);
      if (!key.empty() && c.op != "CommDestroy") {
        ASSERT_NE(p.group_id, 0u) << "call " << i << " " << c.op << " on " << c.comm;
        ids_of_group[key].insert(p.group_id);
        groups_of_id[p.group_id].insert(key);
        const int size = c.comm == "world" ? kWorld : c.comm == "tp" ? kT : c.comm == "dp" ? kD : kP;
        EXPECT_EQ(p.group_size, size) << "call " << i;
      }
    }
  }
  // One id per group, the same on all its members; distinct groups, distinct ids.
  EXPECT_EQ(ids_of_group.size(), 1u + kD * kP + kT * kP + kT * kD);
  for (const auto& [key, ids] : ids_of_group) EXPECT_EQ(ids.size(), 1u) << key;
  for (const auto& [id, keys] : groups_of_id) EXPECT_EQ(keys.size(), 1u) << id;
}

TEST_F(MinitrainUnderHook, RecordsEqualTheCallsAndResultsAreUnchanged) {
  ASSERT_EQ(run("hook", "--call-log"), 0) << slurp(root_ + "/hook.log");
  check_records_match_calls(root_ + "/hook");
  ASSERT_EQ(run("plain", "--no-greyhound"), 0) << slurp(root_ + "/plain.log");
  EXPECT_TRUE(list_ring_files(root_ + "/plain/node0", "").empty());
  for (int r = 0; r < kWorld; ++r) {
    const auto with = checksums("hook", r);
    ASSERT_EQ(with.size(), 4u) << r;
    EXPECT_EQ(with, checksums("plain", r)) << "rank " << r;
  }
  // Data-parallel replicas hold identical weights (same tp, pp; different dp).
  EXPECT_EQ(checksums("hook", 0), checksums("hook", 2));
  EXPECT_NE(checksums("hook", 0), checksums("hook", 1));
}

TEST_F(MinitrainUnderHook, UniqueIdGroupsAndDistributedOptimizerAreRecordedToo) {
  ASSERT_EQ(run("uid", "--call-log --group-init uniqueid --dp-sync rs-ag"), 0) << slurp(root_ + "/uid.log");
  check_records_match_calls(root_ + "/uid");
  ASSERT_EQ(run("uid-plain", "--no-greyhound --group-init uniqueid --dp-sync rs-ag"), 0);
  for (int r = 0; r < kWorld; ++r) EXPECT_EQ(checksums("uid", r), checksums("uid-plain", r)) << r;
}

TEST_F(MinitrainUnderHook, DisabledAndUnwritableShmDirLeaveTheJobRunningAndCorrect) {
  ASSERT_EQ(run("ref", "--no-greyhound"), 0) << slurp(root_ + "/ref.log");
  ASSERT_EQ(run("disabled", "--rank-env GREYHOUND_DISABLE=1"), 0) << slurp(root_ + "/disabled.log");
  EXPECT_TRUE(list_ring_files(root_ + "/disabled/node0", "").empty());
  EXPECT_TRUE(list_ring_files(root_ + "/disabled/node1", "").empty());
  ASSERT_EQ(run("noshm", "--rank-env GREYHOUND_SHM_DIR=/proc/greyhound-cannot-write-here"), 0)
      << slurp(root_ + "/noshm.log");
  for (int r = 0; r < kWorld; ++r) {
    ASSERT_EQ(checksums("ref", r).size(), 4u);
    EXPECT_EQ(checksums("disabled", r), checksums("ref", r)) << r;
    EXPECT_EQ(checksums("noshm", r), checksums("ref", r)) << r;
    const std::string err = slurp(root_ + "/noshm/rank" + std::to_string(r) + ".err");
    std::size_t warnings = 0;
    for (std::size_t at = err.find("cannot create the record ring"); at != std::string::npos;
         at = err.find("cannot create the record ring", at + 1)) {
      ++warnings;
    }
    EXPECT_EQ(warnings, 1u) << err;
  }
}

}  // namespace
}  // namespace greyhound
