// The pieces of an S4 restart in the simulated cluster, without processes: where the restarted job runs
// (restart_plan.h) and minitrain's checkpoint files (minitrain/checkpoint.h).
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "sim/minitrain/checkpoint.h"
#include "sim/simcluster/restart_plan.h"

namespace greyhound::sim {
namespace {

TEST(RestartPlan, WithoutANodeAsManyReplicasAsFitOnTheLowestFreeSlots) {
  // TP2 x DP4 x PP2 on 8 nodes of 2: without node 1, 14 GPUs hold 3 replicas (12 ranks).
  const Incarnation first = first_incarnation(2, 4, 2);
  ASSERT_EQ(first.slots.size(), 16u);
  Incarnation next;
  std::string why;
  ASSERT_TRUE(restart_without(first, 2, 2, 2, 8, {1}, {}, 4, &next, &why)) << why;
  EXPECT_EQ(next.index, 1);
  EXPECT_EQ(next.dp, 3);
  EXPECT_EQ(next.slots, (std::vector<int>{0, 1, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13}));
  EXPECT_EQ(next.excluded_nodes, (std::set<int>{1}));

  // `next` numbers its nodes 0..5 (cluster nodes 0, 2, 3, 4, 5, 6): its node 1 is cluster node 2.
  EXPECT_EQ(node_ids(next, 2), (std::vector<int>{0, 2, 3, 4, 5, 6}));
  Incarnation by_node;
  ASSERT_TRUE(restart_without(next, 2, 2, 2, 8, {1}, {}, 4, &by_node, &why)) << why;
  EXPECT_EQ(by_node.excluded_nodes, (std::set<int>{1, 2}));
  EXPECT_EQ(by_node.slots, (std::vector<int>{0, 1, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}));
  // Excluding a rank excludes its node (rank 5 of `next` runs on slot 7, node 3); node 1 stays excluded.
  Incarnation third;
  ASSERT_TRUE(restart_without(next, 2, 2, 2, 8, {}, {5}, 4, &third, &why)) << why;
  EXPECT_EQ(third.excluded_nodes, (std::set<int>{1, 3}));
  EXPECT_EQ(third.dp, 3);
  EXPECT_EQ(third.slots, (std::vector<int>{0, 1, 4, 5, 8, 9, 10, 11, 12, 13, 14, 15}));
}

TEST(RestartPlan, NeverMoreReplicasThanTheJobHadAndNoneIsAnError) {
  Incarnation next;
  std::string why;
  // 8 ranks of 16 GPUs: losing a node still leaves room for both replicas, no more.
  ASSERT_TRUE(restart_without(first_incarnation(2, 2, 2), 2, 2, 2, 8, {0}, {}, 2, &next, &why)) << why;
  EXPECT_EQ(next.dp, 2);
  EXPECT_EQ(next.slots, (std::vector<int>{2, 3, 4, 5, 6, 7, 8, 9}));
  // TP2 x DP1 x PP2 on 2 nodes: without one, nothing fits.
  EXPECT_FALSE(restart_without(first_incarnation(2, 1, 2), 2, 2, 2, 2, {1}, {}, 1, &next, &why));
  EXPECT_NE(why.find("2 GPUs are left"), std::string::npos) << why;
  EXPECT_FALSE(restart_without(first_incarnation(2, 1, 2), 2, 2, 2, 2, {5}, {}, 1, &next, &why));
  EXPECT_NE(why.find("node 5 is not one of the job's 2"), std::string::npos) << why;
  // Only a DP width the job accepts (a distributed optimizer shards over DP): 3 fit, 2 is taken.
  ASSERT_TRUE(restart_without(first_incarnation(1, 4, 2), 1, 2, 2, 4, {1}, {}, 4, &next, &why,
                              [](int dp) { return 8192 % dp == 0; }))
      << why;
  EXPECT_EQ(next.dp, 2);
  EXPECT_FALSE(restart_without(first_incarnation(1, 4, 2), 1, 2, 2, 4, {1}, {}, 4, &next, &why,
                               [](int) { return false; }));
  EXPECT_NE(why.find("a DP width the job accepts"), std::string::npos) << why;
  EXPECT_FALSE(restart_without(first_incarnation(2, 1, 2), 2, 2, 2, 2, {}, {4}, 1, &next, &why));
  EXPECT_NE(why.find("rank 4"), std::string::npos) << why;
}

class CheckpointFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("greyhound-ckpt-" + std::to_string(getpid()));
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir() const { return dir_.string(); }
  std::filesystem::path dir_;
};

TEST_F(CheckpointFiles, ShardsAndMetaRoundTripAndLatestNamesTheNewest) {
  std::string path, err;
  EXPECT_FALSE(latest_checkpoint(dir(), &path, &err));
  EXPECT_EQ(err, "");  // none yet: not an error
  const CheckpointMeta meta{28, 2, 2, 4, 64, 2, 64, 7, 32, 1e-3};
  const std::string ckpt = checkpoint_path(dir(), 28);
  const std::vector<float> w = {1.5f, -2.0f, 3.25f};
  for (int t = 0; t < 2; ++t) {
    for (int p = 0; p < 2; ++p) ASSERT_TRUE(write_shard(ckpt, t, p, w, &err)) << err;
  }
  ASSERT_TRUE(commit_checkpoint(dir(), meta, &err)) << err;
  const auto got = latest_checkpoint(dir(), &path, &err);
  ASSERT_TRUE(got) << err;
  EXPECT_EQ(path, ckpt);
  EXPECT_EQ(got->next_iteration, 28);
  EXPECT_EQ(got->dp, 4);
  EXPECT_EQ(got->global_microbatches, 64);
  EXPECT_EQ(got->seed, 7u);
  EXPECT_EQ(got->rows, 32);
  EXPECT_DOUBLE_EQ(got->lr, 1e-3);
  std::vector<float> back(3);
  ASSERT_TRUE(read_shard(path, 1, 1, back, &err)) << err;
  EXPECT_EQ(back, w);
  std::vector<float> wrong(4);
  EXPECT_FALSE(read_shard(path, 1, 1, wrong, &err));
  EXPECT_NE(err.find("holds 12 bytes, the model needs 16"), std::string::npos) << err;
  EXPECT_FALSE(read_shard(path, 2, 0, back, &err));  // no such shard
}

TEST_F(CheckpointFiles, AJobOfAnotherShapeOrBatchCannotResume) {
  const CheckpointMeta saved{10, 2, 2, 4, 64, 2, 64, 1, 32, 1e-3};
  CheckpointMeta fewer = saved;
  fewer.dp = 3;  // fewer replicas: fine
  EXPECT_EQ(resume_mismatch(saved, fewer), "");
  CheckpointMeta other = fewer;
  other.global_microbatches = 48;
  other.pp = 4;
  other.rows = 16;
  other.lr = 2e-3;
  const std::string why = resume_mismatch(saved, other);
  EXPECT_NE(why.find("--pp 2 in the checkpoint, 4 in this job"), std::string::npos) << why;
  EXPECT_NE(why.find("global micro-batches 64 in the checkpoint, 48 in this job"), std::string::npos) << why;
  EXPECT_NE(why.find("--rows 32 in the checkpoint, 16 in this job"), std::string::npos) << why;
  EXPECT_NE(why.find("--lr"), std::string::npos) << why;
}

TEST_F(CheckpointFiles, AMalformedLatestOrMetaIsAnErrorNotAFreshStart) {
  std::filesystem::create_directories(dir_);
  std::string path, err;
  std::ofstream(dir_ / "latest") << "../elsewhere\n";
  EXPECT_FALSE(latest_checkpoint(dir(), &path, &err));
  EXPECT_NE(err.find("does not name a checkpoint"), std::string::npos) << err;
  std::ofstream(dir_ / "latest") << "iter-3\n";
  std::filesystem::create_directories(dir_ / "iter-3");
  std::ofstream(dir_ / "iter-3" / "meta.json") << "{\"next_iteration\": 3}";
  EXPECT_FALSE(latest_checkpoint(dir(), &path, &err));
  EXPECT_NE(err.find("meta.json"), std::string::npos) << err;
}

}  // namespace
}  // namespace greyhound::sim
