// greyhoundctl passes, run as a process: the contract ({"passes":[[[src,dst],...],...]}, ranks as
// given), NCCL's trees in each pattern, the graph dump's ring order and tree chain, and bad input answered with one error line and exit status 2.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "../support/command.h"

namespace {

using Outcome = greyhound::test::CommandOutcome;

Outcome run(const std::string& args) {
  return greyhound::test::run_command_line(std::string(GREYHOUNDCTL) + " passes " + args + " 2>&1");
}

TEST(CtlPasses, RingAndTreeOfTheRanksAsGiven) {
  Outcome o = run("--topology ring --ranks 3,0,1,2");
  ASSERT_EQ(o.status, 0) << o.out;
  EXPECT_EQ(o.out, "{\"passes\":[[[3,0],[1,2]],[[0,1],[2,3]]]}\n");
  o = run("--topology tree --ranks 5,6,7,8");
  ASSERT_EQ(o.status, 0) << o.out;
  EXPECT_EQ(o.out, "{\"passes\":[[[5,6]],[[6,8]],[[5,7]]]}\n");
  // With the node of each rank: NCCL's trees (chains 5->6, 7->8; the heads 5 and 7 send to each other).
  o = run("--topology tree --ranks 5,6,7,8 --nodes 0,0,1,1");
  ASSERT_EQ(o.status, 0) << o.out;
  EXPECT_EQ(o.out, "{\"passes\":[[[5,6],[7,8]],[[5,7]],[[7,5]]]}\n");
  // In the split pattern a child node links through its parent node's second GPU (6 -> 7, 8 -> 5); the plain
  // tree pattern through the first, as the balanced one does between two nodes.
  o = run("--topology tree --ranks 5,6,7,8 --nodes 0,0,1,1 --pattern split");
  ASSERT_EQ(o.status, 0) << o.out;
  EXPECT_EQ(o.out, "{\"passes\":[[[5,6],[7,8]],[[6,7],[8,5]]]}\n");
  o = run("--topology tree --ranks 5,6,7,8 --nodes 0,0,1,1 --pattern tree");
  ASSERT_EQ(o.status, 0) << o.out;
  EXPECT_EQ(o.out, "{\"passes\":[[[5,6],[7,8]],[[5,7]],[[7,5]]]}\n");
}

TEST(CtlPasses, TheRingOrderOfAGraphDump) {
  const std::string data = std::string(GREYHOUND_VALIDATE_DATA);
  Outcome o = run("--topology ring --graph-dump " + data + "/graph-dump-2nodes.xml --topo-dump " + data +
                  "/topo-dump-2nodes.xml --channel 1");
  ASSERT_EQ(o.status, 0) << o.out;
  EXPECT_EQ(o.out, "{\"passes\":[[[2,3],[1,0]],[[3,1],[0,2]]]}\n");
  // NCCL 2.28's dumps of a one-GPU communicator: a ring of one rank, with no link to time.
  o = run("--topology ring --graph-dump " + data + "/nccl-2.28-h200-graph.xml --topo-dump " + data +
          "/nccl-2.28-h200-topo.xml");
  EXPECT_EQ(o.status, 2) << o.out;
  EXPECT_NE(o.out.find("a ring of 1 rank(s) has no link to time"), std::string::npos) << o.out;
  // The tree graph's chain of a one-node communicator (devices 3, 1, 0, 2: ranks 3, 1, 0, 2).
  o = run("--topology tree --graph-dump " + data + "/graph-dump-1node-tree.xml --topo-dump " + data +
          "/topo-dump-1node.xml");
  ASSERT_EQ(o.status, 0) << o.out;
  EXPECT_EQ(o.out, "{\"passes\":[[[3,1],[0,2]],[[1,0]]]}\n");
  // A multi-node communicator's: the dump shows one node's chain only.
  o = run("--topology tree --graph-dump " + data + "/graph-dump-2nodes.xml --topo-dump " + data + "/topo-dump-2nodes.xml");
  EXPECT_EQ(o.status, 2) << o.out;
  EXPECT_NE(o.out.find("the tree spans nodes"), std::string::npos) << o.out;
  // A dump of rings only.
  o = run("--topology tree --graph-dump " + data + "/graph-dump-1node.xml --topo-dump " + data + "/topo-dump-1node.xml");
  EXPECT_EQ(o.status, 2) << o.out;
  EXPECT_NE(o.out.find("no tree graph (id 1)"), std::string::npos) << o.out;
  // The graph dump alone names devices, not ranks.
  o = run("--topology ring --graph-dump " + data + "/graph-dump-2nodes.xml");
  EXPECT_EQ(o.status, 2) << o.out;
  EXPECT_NE(o.out.find("--graph-dump and --topo-dump go together"), std::string::npos) << o.out;
  // A topology dump of another node: a device the graph names has no rank.
  o = run("--topology ring --graph-dump " + data + "/graph-dump-2nodes.xml --topo-dump " + data +
          "/nccl-2.28-h200-topo.xml");
  EXPECT_EQ(o.status, 2) << o.out;
  EXPECT_NE(o.out.find("device 1 has no rank in the topology dump"), std::string::npos) << o.out;
}

TEST(CtlPasses, BadInputIsOneLineAndExitStatus2) {
  for (const char* args : {"--topology star --ranks 0,1", "--topology ring", "--topology ring --ranks 0,x",
                           "--topology ring --ranks 0,1,0", "--topology tree --graph-dump /nonexistent",
                           "--topology ring --graph-dump /nonexistent --topo-dump /nonexistent", "--topology ring --ranks 0,1 --channel 2",
                           "--topology ring --ranks 4", "--topology ring --ranks 0,1 --topo-dump /nonexistent",
                           "--topology ring --ranks 0,1 --nodes 0,1", "--topology tree --ranks 0,1 --nodes 0",
                           "--topology tree --ranks 0,1 --nodes 0,x", "--topology tree --ranks 0,1 --pattern split",
                           "--topology tree --ranks 0,1 --nodes 0,1 --pattern ring"}) {
    const Outcome o = run(args);
    EXPECT_EQ(o.status, 2) << args << ": " << o.out;
    EXPECT_EQ(std::count(o.out.begin(), o.out.end(), '\n'), 1) << args << ": " << o.out;
  }
}

}  // namespace
