// NCCL's ring order as the agent reads it from the copies of NCCL's dumps the hook leaves beside a ring
// (agent/nccl_ring.h): the dumping member's node's part of ring channel 0 in communicator ranks; a dump of
// another communicator is refused; the copies are read only as this user's own files, then removed.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "agent/nccl_ring.h"
#include "greyhound/ring.h"

namespace {

using greyhound::Errc;
using greyhound::nccl_dump_copy_path;
using greyhound::agent::nccl_ring_of;
using greyhound::agent::take_nccl_ring;

std::string fixture(const std::string& name) {
  std::ifstream in(std::string(GREYHOUND_VALIDATE_DATA) + "/" + name);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(NcclRing, ChannelZeroOfTheDumpingNodeInCommunicatorRanks) {
  // Devices 0-3 hold ranks 0, 1, 3, 2; the ring enters and leaves by the network.
  auto ring = nccl_ring_of(fixture("graph-dump-2nodes.xml"), fixture("topo-dump-2nodes.xml"), 0, 8);
  ASSERT_TRUE(ring) << ring.error();
  EXPECT_EQ(ring->group_rank, 0);
  EXPECT_EQ(ring->segment, (std::vector<int>{0, 1, 3, 2}));
  EXPECT_TRUE(ring->crosses_nodes);
  EXPECT_EQ(ring->channels, 2);
  // With the tree graph (id 1): balanced, its chain through devices 0, 2, 1, 3.
  ASSERT_TRUE(ring->tree);
  EXPECT_EQ(ring->tree->pattern, greyhound::validate::NcclTreePattern::kBalanced);
  EXPECT_EQ(ring->tree->segment, (std::vector<int>{0, 3, 1, 2}));
  EXPECT_TRUE(ring->tree->crosses_nodes);
  // A dump without a tree graph: the ring alone, nothing wrong; a tree graph whose chain is not the ring's
  // ranks, or that cannot be read: the ring alone, and why.
  std::string tree_error = "stale";
  ring = nccl_ring_of(fixture("graph-dump-1node.xml"), fixture("topo-dump-1node.xml"), 0, 4, &tree_error);
  ASSERT_TRUE(ring) << ring.error();
  EXPECT_FALSE(ring->tree);
  EXPECT_EQ(tree_error, "");
  const std::string topo = "<system><gpu dev=\"0\" rank=\"0\"/><gpu dev=\"1\" rank=\"1\"/><gpu dev=\"2\" rank=\"2\"/></system>";
  const std::string rings = "<graph id=\"0\" pattern=\"4\"><channel><gpu dev=\"0\"/><gpu dev=\"1\"/></channel></graph>";
  ring = nccl_ring_of("<graphs version=\"1\">" + rings +
                          "<graph id=\"1\" pattern=\"1\"><channel><gpu dev=\"0\"/><gpu dev=\"2\"/></channel></graph></graphs>",
                      topo, 0, 3, &tree_error);
  ASSERT_TRUE(ring) << ring.error();
  EXPECT_FALSE(ring->tree);
  EXPECT_EQ(tree_error, "the tree graph's chain does not hold the ring's ranks");
  ring = nccl_ring_of("<graphs version=\"1\">" + rings +
                          "<graph id=\"1\" pattern=\"7\"><channel><gpu dev=\"0\"/><gpu dev=\"1\"/></channel></graph></graphs>",
                      topo, 0, 3, &tree_error);
  ASSERT_TRUE(ring) << ring.error();
  EXPECT_FALSE(ring->tree);
  EXPECT_EQ(tree_error, "graph dump: the tree graph (id 1) has pattern '7' (1, 2 or 3 is a tree)");
  ring = nccl_ring_of("<graphs version=\"1\">" + rings +
                          "<graph id=\"1\" pattern=\"3\"><channel><gpu dev=\"1\"/><gpu dev=\"0\"/></channel></graph></graphs>",
                      topo, 0, 3, &tree_error);
  ASSERT_TRUE(ring && ring->tree) << ring.error();
  EXPECT_EQ(ring->tree->pattern, greyhound::validate::NcclTreePattern::kTree);
  EXPECT_EQ(ring->tree->segment, (std::vector<int>{1, 0}));
  EXPECT_FALSE(ring->tree->crosses_nodes);
  EXPECT_EQ(tree_error, "");
  // A dump that does not hold the rank that dumped it, or names ranks beyond the group: another
  // communicator's (NCCL writes every communicator's at the same path).
  ring = nccl_ring_of(fixture("graph-dump-2nodes.xml"), fixture("topo-dump-2nodes.xml"), 5, 8);
  ASSERT_FALSE(ring);
  EXPECT_EQ(ring.error(), "the dump's ring does not hold rank 5, which dumped it (a dump of another communicator)");
  ring = nccl_ring_of(fixture("graph-dump-2nodes.xml"), fixture("topo-dump-2nodes.xml"), 0, 2);
  ASSERT_FALSE(ring);
  EXPECT_EQ(ring.error(), "rank 3 in a dump of a communicator of 2 (a dump of another communicator)");
  // What the graph-dump reader refuses, with its reason.
  ring = nccl_ring_of("<graphs version=\"1\"/>", fixture("topo-dump-2nodes.xml"), 0, 8);
  ASSERT_FALSE(ring);
  EXPECT_EQ(ring.error(), "graph dump: no ring graph (pattern 4)");
}

class TakeNcclRing : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gh-nccl-ring-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    ring_ = dir_ + "/greyhound.job.0";
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }
  void put(bool graph, const std::string& text) {
    const std::string p = nccl_dump_copy_path(ring_, 0xab, graph);
    std::ofstream(p) << text;
    chmod(p.c_str(), 0600);
  }
  std::string dir_, ring_;
};

TEST_F(TakeNcclRing, TheCopiesAreReadOnceThenRemoved) {
  EXPECT_EQ(nccl_dump_copy_path(ring_, 0xab, true), dir_ + "/nccl-graph.greyhound.job.0.00000000000000ab");
  EXPECT_EQ(nccl_dump_copy_path(ring_, 0xab, false), dir_ + "/nccl-topo.greyhound.job.0.00000000000000ab");
  auto ring = take_nccl_ring(ring_, 0xab, 0, 8);  // no copy: the usual case, not an error to log
  ASSERT_FALSE(ring);
  EXPECT_EQ(ring.status().code, Errc::kUnavailable);
  put(false, fixture("topo-dump-2nodes.xml"));
  put(true, fixture("graph-dump-2nodes.xml"));
  ring = take_nccl_ring(ring_, 0xab, 0, 8);
  ASSERT_TRUE(ring) << ring.error();
  EXPECT_EQ(ring->segment, (std::vector<int>{0, 1, 3, 2}));
  EXPECT_NE(access(nccl_dump_copy_path(ring_, 0xab, true).c_str(), F_OK), 0);
  EXPECT_NE(access(nccl_dump_copy_path(ring_, 0xab, false).c_str(), F_OK), 0);
  EXPECT_EQ(take_nccl_ring(ring_, 0xab, 0, 8).status().code, Errc::kUnavailable);
}

TEST_F(TakeNcclRing, ACopyThatIsNotThisUsersOwnFileIsRefused) {
  // A link planted in a shared directory, and a file others may write: refused with why, and removed.
  std::ofstream(dir_ + "/elsewhere") << fixture("graph-dump-2nodes.xml");
  ASSERT_EQ(symlink((dir_ + "/elsewhere").c_str(), nccl_dump_copy_path(ring_, 0xab, true).c_str()), 0);
  put(false, fixture("topo-dump-2nodes.xml"));
  auto ring = take_nccl_ring(ring_, 0xab, 0, 8);
  ASSERT_FALSE(ring);
  EXPECT_EQ(ring.status().code, Errc::kInvalid);
  EXPECT_NE(ring.error().find("cannot be opened"), std::string::npos) << ring.error();
  EXPECT_NE(access(nccl_dump_copy_path(ring_, 0xab, false).c_str(), F_OK), 0);
  EXPECT_EQ(access((dir_ + "/elsewhere").c_str(), F_OK), 0);  // what the link pointed at is left alone
  put(true, fixture("graph-dump-2nodes.xml"));
  put(false, fixture("topo-dump-2nodes.xml"));
  chmod(nccl_dump_copy_path(ring_, 0xab, false).c_str(), 0666);
  ring = take_nccl_ring(ring_, 0xab, 0, 8);
  ASSERT_FALSE(ring);
  EXPECT_NE(ring.error().find("nccl-topo.greyhound.job.0.00000000000000ab: "), std::string::npos) << ring.error();
}

}  // namespace
