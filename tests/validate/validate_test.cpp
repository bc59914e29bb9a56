// The validation's pure pieces: pass plans (every link once, disjoint pairs, 2 / 3 / 4 passes), what the
// measurements say (hand-made cases), and NCCL's graph dump (fixtures in the format NCCL writes,
// src/graph/search.cc ncclTopoGetXmlFromGraphs).
#include <gtest/gtest.h>

#include <cmath>

#include <fstream>
#include <map>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "greyhound/validate/graph_dump.h"
#include "greyhound/validate/ring_order.h"
#include "greyhound/validate/interpret.h"
#include "greyhound/validate/pass_plan.h"

namespace greyhound::validate {
namespace {

std::vector<int> iota_order(int n, int scramble = 0) {
  std::vector<int> v(static_cast<std::size_t>(n));
  std::iota(v.begin(), v.end(), 0);
  // Ranks as given, not sorted: a fixed permutation when asked.
  if (scramble != 0) {
    for (std::size_t i = 0; i < v.size(); ++i) std::swap(v[i], v[(i * 7919 + static_cast<std::size_t>(scramble)) % v.size()]);
  }
  return v;
}

TEST(PassPlan, RingsOfEverySizeTakeTwoPassesWhenEvenThreeWhenOdd) {
  for (int n = 2; n <= 1024; ++n) {
    const std::vector<int> order = iota_order(n, n % 5);
    const auto plan = ring_passes(order);
    ASSERT_EQ(plan.size(), n % 2 == 0 ? 2u : 3u) << n;
    ASSERT_EQ(check_passes(plan, ring_links(order)), "") << n;
  }
  EXPECT_TRUE(ring_passes({7}).empty());
  EXPECT_TRUE(ring_passes({}).empty());
}

TEST(PassPlan, TreesOfEverySizeTakeAtMostFourPasses) {
  for (int n = 2; n <= 1024; ++n) {
    const std::vector<int> order = iota_order(n, n % 3);
    const auto plan = tree_passes(order);
    ASSERT_LE(plan.size(), 4u) << n;
    if (n >= 7) {
      ASSERT_EQ(plan.size(), 4u) << n;
    }
    ASSERT_EQ(check_passes(plan, tree_links(order)), "") << n;
    ASSERT_EQ(tree_links(order).size(), static_cast<std::size_t>(n - 1));
  }
  EXPECT_TRUE(tree_passes({3}).empty());
}

TEST(PassPlan, RanksAsGiven) {
  // The ring 3 -> 0 -> 1 -> 2 -> 3.
  const auto plan = ring_passes({3, 0, 1, 2});
  ASSERT_EQ(plan.size(), 2u);
  EXPECT_EQ(plan[0], (Pass{{3, 0}, {1, 2}}));
  EXPECT_EQ(plan[1], (Pass{{0, 1}, {2, 3}}));
  const auto odd = ring_passes({4, 2, 9});
  ASSERT_EQ(odd.size(), 3u);
  EXPECT_EQ(odd[0], (Pass{{4, 2}}));
  EXPECT_EQ(odd[1], (Pass{{2, 9}}));
  EXPECT_EQ(odd[2], (Pass{{9, 4}}));
  // Heap layout: 5 at the root, 6 and 7 under it, 8 under 6.
  const auto tree = tree_passes({5, 6, 7, 8});
  ASSERT_EQ(tree.size(), 3u);
  EXPECT_EQ(tree[0], (Pass{{5, 6}}));
  EXPECT_EQ(tree[1], (Pass{{6, 8}}));
  EXPECT_EQ(tree[2], (Pass{{5, 7}}));
}

TEST(PassPlan, CheckNamesWhatIsWrong) {
  const auto links = ring_links({0, 1, 2, 3});
  EXPECT_NE(check_passes({{{0, 1}, {1, 2}}, {{2, 3}, {3, 0}}}, links).find("rank 1 takes part in two transfers"),
            std::string::npos);
  EXPECT_NE(check_passes({{{0, 1}, {2, 3}}, {{1, 2}}}, links).find("link 3->0 timed 0 times"), std::string::npos);
  EXPECT_NE(check_passes({{{0, 1}, {2, 3}}, {{1, 2}, {3, 0}}, {{0, 2}}}, links).find("no link"), std::string::npos);
  EXPECT_NE(check_passes({{{1, 1}}}, links).find("sends to itself"), std::string::npos);
}

TEST(Interpret, ASlowGpuIsAboveTheMedianOfItsPeersByMoreThanTenPercent) {
  const auto v = judge_gemm({{0, 0, 10.0}, {1, 0, 10.4}, {2, 1, 9.8}, {3, 1, 15.0}});
  ASSERT_EQ(v.size(), 4u);
  EXPECT_FALSE(v[0].slow);
  EXPECT_FALSE(v[1].slow);
  EXPECT_FALSE(v[2].slow);
  EXPECT_TRUE(v[3].slow);
  EXPECT_DOUBLE_EQ(v[3].peers_ms, 10.0);
  EXPECT_DOUBLE_EQ(v[3].ratio, 1.5);
  // 10 % exactly is not more than 10 %; one rank alone is not judged.
  EXPECT_FALSE(judge_gemm({{0, 0, 10.0}, {1, 0, 11.0}})[1].slow);
  EXPECT_TRUE(judge_gemm({{0, 0, 10.0}, {1, 0, 11.01}})[1].slow);
  const auto alone = judge_gemm({{4, 2, 30.0}});
  EXPECT_FALSE(alone[0].judged);
  EXPECT_FALSE(alone[0].slow);
}

TEST(Interpret, GemmTimesWeighEveryTypeAlikeAndFp8OnlyWhereEveryGpuMeasuredIt) {
  // Every GPU measured all three: FP8 is compared too. A GPU at every median has the medians' sum.
  GemmTimes t = gemm_times({{0, 0, {10, 5, 2}}, {1, 0, {10, 5, 2}}, {2, 1, {10, 5, 2}}});
  EXPECT_TRUE(t.with_fp8);
  ASSERT_EQ(t.times.size(), 3u);
  EXPECT_DOUBLE_EQ(t.times[0].ms, 17);
  EXPECT_EQ(t.times[2].rank, 2);
  EXPECT_EQ(t.times[2].node, 1);
  // A GPU slower by 1.6x in everything is 1.6x its peers, whatever the types' times.
  t = gemm_times({{0, 0, {22, 1.6, 0.85}}, {1, 0, {22, 1.6, 0.85}}, {2, 0, {22, 1.6, 0.85}}, {3, 0, {35.2, 2.56, 1.36}}});
  EXPECT_NEAR(judge_gemm(t.times)[3].ratio, 1.6, 1e-9);
  // As an H100's times go (FP32 without TF32 takes over ten times FP16's), a GPU slow only in its FP8 or only in
  // its FP16 tensor cores is named: its weighted time is 1.5x or 1.27x its peers'. A plain sum would have
  // made them 1.05x and 1.04x, under the 10 % that names a GPU.
  const std::vector<double> h100 = {22, 1.6, 0.85};
  t = gemm_times({{0, 0, h100}, {1, 0, h100}, {2, 0, h100}, {3, 0, {22, 1.6, 0.85 * 2.5}}});
  EXPECT_NEAR(judge_gemm(t.times)[3].ratio, 1.5, 1e-9);
  EXPECT_TRUE(judge_gemm(t.times)[3].slow);
  t = gemm_times({{0, 0, h100}, {1, 0, h100}, {2, 0, h100}, {3, 0, {22, 1.6 * 1.8, 0.85}}});
  EXPECT_NEAR(judge_gemm(t.times)[3].ratio, 1 + 0.8 / 3, 1e-9);
  EXPECT_TRUE(judge_gemm(t.times)[3].slow);
  // One GPU without FP8 (a hook without it, an older device, a failure): every GPU compares without it.
  for (const std::vector<double>& other : {std::vector<double>{10, 5}, {10, 5, 0}, {10, 5, -1}, {10, 5, NAN}}) {
    t = gemm_times({{0, 0, {10, 5, 2}}, {1, 0, other}});
    EXPECT_FALSE(t.with_fp8);
    ASSERT_EQ(t.times.size(), 2u);
    EXPECT_DOUBLE_EQ(t.times[0].ms, 15);
    EXPECT_DOUBLE_EQ(t.times[1].ms, 15);
  }
  // A GPU missing FP32 or FP16 is left out (its time would be short) and does not decide about FP8.
  t = gemm_times({{0, 0, {10, 5, 2}}, {1, 0, {0, 5}}, {2, 0, {10, 0, 2}}, {3, 0, {10, 5, 2}}});
  EXPECT_TRUE(t.with_fp8);
  ASSERT_EQ(t.times.size(), 2u);
  EXPECT_EQ(t.times[0].rank, 0);
  EXPECT_EQ(t.times[1].rank, 3);
  EXPECT_TRUE(gemm_times({{0, 0, {}}, {1, 0, {5}}}).times.empty());
  EXPECT_FALSE(gemm_times({}).with_fp8);
  // One GPU alone is at its own medians.
  t = gemm_times({{7, 1, {10, 5, 2}}});
  ASSERT_EQ(t.times.size(), 1u);
  EXPECT_DOUBLE_EQ(t.times[0].ms, 17);
}

TEST(Interpret, ASlowLinkIsAboveTheMedianOfItsClassByMoreThanHalf) {
  // 32 MiB over two intra-node links (fast) and three inter-node ones, one of them congested.
  const double b = 32.0 * (1 << 20);
  const auto v = judge_links({{{0, 1}, 0, 0, b, 1.0},
                              {{2, 3}, 1, 1, b, 1.1},
                              {{1, 2}, 0, 1, b, 10.0},
                              {{3, 4}, 1, 2, b, 10.5},
                              {{5, 0}, 2, 0, b, 40.0}});
  ASSERT_EQ(v.size(), 5u);
  EXPECT_EQ(v[0].link_class, LinkClass::kIntraNode);
  EXPECT_EQ(v[2].link_class, LinkClass::kInterNode);
  for (std::size_t i = 0; i < 4; ++i) EXPECT_FALSE(v[i].slow) << i;  // intra-node ones not compared with the others
  EXPECT_TRUE(v[4].slow);
  EXPECT_DOUBLE_EQ(v[4].peers_ms, 10.25);
  EXPECT_NEAR(v[4].gb_per_s, b / 0.040 * 1e-9, 1e-9);
  EXPECT_STREQ(link_class_name(v[4].link_class), "inter-node");
  // Above the timer's noise as well: 2x its peers, but only 0.04 ms more, is not slow with a 0.05 ms floor;
  // the congested link (+29.75 ms) still is.
  const auto floor = judge_links({{{0, 1}, 0, 0, b, 0.04}, {{2, 3}, 1, 1, b, 0.04}, {{4, 5}, 2, 2, b, 0.08},
                                  {{1, 2}, 0, 1, b, 10.0}, {{3, 4}, 1, 2, b, 10.5}, {{5, 0}, 2, 0, b, 40.0}},
                                 kSlowLinkExcess, 0.05);
  EXPECT_GT(floor[2].ratio, 1.5);
  EXPECT_FALSE(floor[2].slow);
  EXPECT_TRUE(floor[5].slow);
  // Alone in its class: not judged.
  const auto one = judge_links({{{0, 1}, 0, 0, b, 1.0}, {{1, 2}, 0, 1, b, 50.0}});
  EXPECT_FALSE(one[1].judged);
  EXPECT_FALSE(one[1].slow);
}

std::string fixture(const std::string& name) {
  std::ifstream in(std::string(GREYHOUND_VALIDATE_DATA) + "/" + name);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::map<std::int64_t, int> topology(const std::string& name) {
  auto ranks = parse_topology_dump_ranks(fixture(name));
  EXPECT_TRUE(ranks) << ranks.error();
  return ranks ? *ranks : std::map<std::int64_t, int>{};
}

TEST(GraphDump, TheRingsOfEveryChannelInOrderWithTheRanksOfTheTopologyDump) {
  // Rank 0's node: devices 0-3 hold ranks 0, 1, 3, 2; the dump names devices, partly in hexadecimal.
  const auto ranks2 = topology("topo-dump-2nodes.xml");
  EXPECT_EQ(ranks2, (std::map<std::int64_t, int>{{0, 0}, {1, 1}, {2, 3}, {3, 2}}));
  auto rings = parse_graph_dump_rings(fixture("graph-dump-2nodes.xml"), ranks2);
  ASSERT_TRUE(rings) << rings.error();
  ASSERT_EQ(rings->size(), 2u);
  EXPECT_EQ((*rings)[0].devices, (std::vector<std::int64_t>{0, 1, 2, 3}));
  EXPECT_EQ((*rings)[0].ranks, (std::vector<int>{0, 1, 3, 2}));
  EXPECT_EQ((*rings)[1].ranks, (std::vector<int>{2, 3, 1, 0}));
  EXPECT_TRUE((*rings)[0].crosses_nodes);
  EXPECT_EQ((*rings)[1].channel, 1);
  // GPUs nested under PCI switches, with children of their own.
  const auto ranks1 = topology("topo-dump-1node.xml");
  EXPECT_EQ(ranks1.size(), 4u);
  rings = parse_graph_dump_rings(fixture("graph-dump-1node.xml"), ranks1);
  ASSERT_TRUE(rings) << rings.error();
  ASSERT_EQ(rings->size(), 1u);
  EXPECT_EQ((*rings)[0].ranks, (std::vector<int>{0, 2, 1, 3}));
  EXPECT_FALSE((*rings)[0].crosses_nodes);
  const auto plan = ring_passes((*rings)[0].ranks);
  EXPECT_EQ(check_passes(plan, ring_links({0, 2, 1, 3})), "");
}

TEST(GraphDump, WhatNccl228WroteOnAnH200) {
  // scripts/gpu-check on one H200 (NCCL 2.28, a one-rank communicator): 32 ring channels of device 0, no
  // network; the topology dump gives device 0 rank 0.
  const auto ranks = topology("nccl-2.28-h200-topo.xml");
  EXPECT_EQ(ranks, (std::map<std::int64_t, int>{{0, 0}}));
  const auto rings = parse_graph_dump_rings(fixture("nccl-2.28-h200-graph.xml"), ranks);
  ASSERT_TRUE(rings) << rings.error();
  ASSERT_EQ(rings->size(), 32u);
  for (const DumpedRing& r : *rings) {
    EXPECT_EQ(r.ranks, std::vector<int>{0});
    EXPECT_FALSE(r.crosses_nodes);
  }
}

TEST(GraphDump, WhatIsNotARingDumpIsRefusedWithItsReason) {
  const std::map<std::int64_t, int> ranks = {{0, 0}, {1, 1}, {2, 5}};
  const auto err = [&](const std::string& xml) {
    auto r = parse_graph_dump_rings(xml, ranks);
    return r ? std::string("parsed") : r.error();
  };
  EXPECT_NE(err("<graphs version=\"1\"><graph").find("not XML"), std::string::npos);
  EXPECT_NE(err("<system version=\"1\"/>").find("not <graphs>"), std::string::npos);
  EXPECT_NE(err("<graphs version=\"2\"/>").find("version '2'"), std::string::npos);
  EXPECT_NE(err("<graphs version=\"1\"><graph id=\"1\" pattern=\"1\"/></graphs>").find("no ring graph"), std::string::npos);
  EXPECT_NE(err("<graphs version=\"1\"><graph pattern=\"4\"><channel><gpu rank=\"0\"/></channel></graph></graphs>")
                .find("a <gpu> whose dev is ''"),
            std::string::npos);
  EXPECT_NE(err("<graphs version=\"1\"><graph pattern=\"4\"><channel><gpu dev=\"0xg\"/></channel></graph></graphs>")
                .find("whose dev is '0xg'"),
            std::string::npos);
  EXPECT_NE(err("<graphs version=\"1\"><graph pattern=\"4\"><channel><gpu dev=\"0x7\"/></channel></graph></graphs>")
                .find("channel 0: device 7 has no rank in the topology dump"),
            std::string::npos);
  EXPECT_EQ(err("<graphs version=\"1\"><graph pattern=\"4\"><channel><gpu dev=\"0x2\"/><gpu dev=\"0\"/></channel>"
                "</graph></graphs>"),
            "parsed");
  // A rank twice in one ring (a ring order with a repeated hop), and a long root or version quoted in part.
  EXPECT_NE(err("<graphs version=\"1\"><graph pattern=\"4\"><channel><gpu dev=\"1\"/><gpu dev=\"0\"/>"
                "<gpu dev=\"0x1\"/></channel></graph></graphs>")
                .find("channel 0: rank 1 appears twice in one ring"),
            std::string::npos);
  const std::string long_root = err("<" + std::string(5000, 'g') + "/>");
  EXPECT_NE(long_root.find("not <graphs>"), std::string::npos);
  EXPECT_LT(long_root.size(), 200u);
  EXPECT_LT(err("<graphs version=\"" + std::string(5000, '7') + "\"/>").size(), 200u);
  EXPECT_NE(err("<graphs version=\"1\"><graph pattern=\"4\"><channel><gpu dev=\"0x" + std::string(40, 'f') +
                "\"/></channel></graph></graphs>").find("whose dev is"),
            std::string::npos);
}

TEST(GraphDump, TheTreeGraphsPatternAndTheChainOfEachChannel) {
  // The tree graph (id 1) of the two-node fixture: balanced, its chain through devices 0, 2, 1, 3 (ranks 0,
  // 3, 1, 2), entering and leaving by the network.
  auto tree = parse_graph_dump_tree(fixture("graph-dump-2nodes.xml"), topology("topo-dump-2nodes.xml"));
  ASSERT_TRUE(tree) << tree.error();
  EXPECT_EQ(tree->pattern, NcclTreePattern::kBalanced);
  ASSERT_EQ(tree->chains.size(), 1u);
  EXPECT_EQ(tree->chains[0].devices, (std::vector<std::int64_t>{0, 2, 1, 3}));
  EXPECT_EQ(tree->chains[0].ranks, (std::vector<int>{0, 3, 1, 2}));
  EXPECT_TRUE(tree->chains[0].crosses_nodes);
  // What NCCL 2.28 wrote on one H200: pattern 3 (a plain tree), 32 channels of device 0. Its CollNet chain
  // graph (id 2) has pattern 3 too and is not the tree.
  tree = parse_graph_dump_tree(fixture("nccl-2.28-h200-graph.xml"), topology("nccl-2.28-h200-topo.xml"));
  ASSERT_TRUE(tree) << tree.error();
  EXPECT_EQ(tree->pattern, NcclTreePattern::kTree);
  ASSERT_EQ(tree->chains.size(), 32u);
  for (const DumpedRing& c : tree->chains) {
    EXPECT_EQ(c.ranks, std::vector<int>{0});
    EXPECT_FALSE(c.crosses_nodes);
  }
  // A dump of rings only: unavailable, not invalid.
  tree = parse_graph_dump_tree(fixture("graph-dump-1node.xml"), topology("topo-dump-1node.xml"));
  ASSERT_FALSE(tree);
  EXPECT_EQ(tree.status().code, Errc::kUnavailable) << tree.error();
  const std::map<std::int64_t, int> ranks = {{0, 0}, {1, 1}};
  const auto err = [&](const std::string& xml) {
    auto r = parse_graph_dump_tree(xml, ranks);
    return r ? "parsed " + std::string(nccl_tree_pattern_name(r->pattern)) : r.error();
  };
  EXPECT_EQ(err("<graphs version=\"1\"><graph id=\"2\" pattern=\"3\"><channel><gpu dev=\"0\"/></channel></graph></graphs>"),
            "graph dump: no tree graph (id 1)");
  EXPECT_EQ(err("<graphs version=\"1\"><graph id=\"1\" pattern=\"2\"><channel><gpu dev=\"1\"/><gpu dev=\"0\"/></channel>"
                "</graph></graphs>"),
            "parsed split");
  EXPECT_NE(err("<graphs version=\"1\"><graph id=\"1\" pattern=\"4\"><channel><gpu dev=\"0\"/></channel></graph></graphs>")
                .find("the tree graph (id 1) has pattern '4'"),
            std::string::npos);
  EXPECT_NE(err("<graphs version=\"1\"><graph id=\"1\" pattern=\"1\"/></graphs>").find("the tree graph has no GPU"),
            std::string::npos);
  EXPECT_NE(err("<graphs version=\"1\"><graph id=\"1\" pattern=\"1\"><channel><gpu dev=\"1\"/><gpu dev=\"0x1\"/>"
                "</channel></graph></graphs>")
                .find("tree channel 0: rank 1 appears twice in one chain"),
            std::string::npos);
  EXPECT_NE(err("<graphs version=\"1\"><graph id=\"1\" pattern=\"1\"><channel><gpu dev=\"5\"/></channel></graph></graphs>")
                .find("device 5 has no rank"),
            std::string::npos);
  EXPECT_NE(err("<graphs version=\"3\"/>").find("version '3'"), std::string::npos);
  // The pattern's names, and NCCL's numbers for it.
  for (const NcclTreePattern p : {NcclTreePattern::kBalanced, NcclTreePattern::kSplit, NcclTreePattern::kTree}) {
    EXPECT_EQ(parse_nccl_tree_pattern(nccl_tree_pattern_name(p)), p);
  }
  EXPECT_FALSE(parse_nccl_tree_pattern("ring"));
  EXPECT_FALSE(parse_nccl_tree_pattern(""));
  EXPECT_EQ(nccl_tree_pattern_of(1), NcclTreePattern::kBalanced);
  EXPECT_EQ(nccl_tree_pattern_of(2), NcclTreePattern::kSplit);
  EXPECT_EQ(nccl_tree_pattern_of(3), NcclTreePattern::kTree);
  for (long long x : {-1LL, 0LL, 4LL, 5LL, 6LL}) EXPECT_FALSE(nccl_tree_pattern_of(x)) << x;
}

TEST(TopologyDump, WhatHasNoRankForEachDeviceIsRefusedWithItsReason) {
  const auto err = [](const std::string& xml) {
    auto r = parse_topology_dump_ranks(xml);
    return r ? std::string("parsed") : r.error();
  };
  EXPECT_NE(err("<system").find("not XML"), std::string::npos);
  EXPECT_NE(err("<graphs version=\"1\"/>").find("not <system>"), std::string::npos);
  EXPECT_NE(err("<system version=\"1\"><cpu/></system>").find("no <gpu>"), std::string::npos);
  EXPECT_NE(err("<system><cpu><pci><gpu dev=\"0\" sm=\"90\"/></pci></cpu></system>").find("device 0: rank ''"),
            std::string::npos);
  EXPECT_NE(err("<system><gpu rank=\"0\"/></system>").find("whose dev is ''"), std::string::npos);
  EXPECT_NE(err("<system><gpu dev=\"0\" rank=\"0\"/><gpu dev=\"0\" rank=\"1\"/></system>").find("device 0 appears twice"),
            std::string::npos);
  EXPECT_NE(err("<system><gpu dev=\"0\" rank=\"3\"/><gpu dev=\"1\" rank=\"3\"/></system>").find("rank 3 appears twice"),
            std::string::npos);
  EXPECT_EQ(err("<system><gpu dev=\"1\" rank=\"7\"/></system>"), "parsed");
}


TEST(NcclRingOrder, EveryNodeFollowsTheDumpingNodesPartInNodeOrder) {
  // 8 ranks on 2 nodes of 4 (ranks 0-3, 4-7): the dumping node's part 0, 2, 1, 3 (positions 0, 2, 1, 3).
  auto order = nccl_ring_order({0, 0, 0, 0, 1, 1, 1, 1}, {0, 2, 1, 3}, true);
  ASSERT_TRUE(order) << order.error();
  EXPECT_EQ(*order, (std::vector<int>{0, 2, 1, 3, 4, 6, 5, 7}));
  // The dump of another rank (NCCL_GRAPH_DUMP_FILE_RANK=5) gives the same ring.
  order = nccl_ring_order({0, 0, 0, 0, 1, 1, 1, 1}, {4, 6, 5, 7}, true);
  ASSERT_TRUE(order) << order.error();
  EXPECT_EQ(*order, (std::vector<int>{0, 2, 1, 3, 4, 6, 5, 7}));
  // Nodes in the order of their lowest rank, whatever they are called; ranks interleaved across nodes.
  order = nccl_ring_order({7, 3, 7, 3, 5, 5}, {3, 1}, true);
  ASSERT_TRUE(order) << order.error();
  EXPECT_EQ(*order, (std::vector<int>{2, 0, 3, 1, 5, 4}));
  // One node: the part is the ring.
  order = nccl_ring_order({2, 2, 2}, {1, 0, 2}, false);
  ASSERT_TRUE(order) << order.error();
  EXPECT_EQ(*order, (std::vector<int>{1, 0, 2}));
  // One rank per node (a data-parallel group across nodes): node order.
  order = nccl_ring_order({4, 1, 3}, {2}, true);
  ASSERT_TRUE(order) << order.error();
  EXPECT_EQ(*order, (std::vector<int>{0, 1, 2}));
}

TEST(NcclRingOrder, WhatDoesNotDescribeTheCommunicatorIsRefusedWithItsReason) {
  const auto err = [](const std::vector<int>& node_of, const std::vector<int>& segment, bool crosses) {
    auto r = nccl_ring_order(node_of, segment, crosses);
    return r ? std::string("ordered") : r.error();
  };
  const std::vector<int> two_nodes = {0, 0, 1, 1};
  EXPECT_EQ(err(two_nodes, {}, true), "the dumped ring names no rank");
  EXPECT_EQ(err(two_nodes, {0, 4}, true), "the dumped ring names rank 4, not one of the communicator's 4");
  EXPECT_EQ(err(two_nodes, {0, -1}, true), "the dumped ring names rank -1, not one of the communicator's 4");
  EXPECT_EQ(err(two_nodes, {1, 1}, true), "the dumped ring names rank 1 twice");
  EXPECT_EQ(err(two_nodes, {0, 2}, true), "the dumped ring names ranks of nodes 0 and 1 (a channel lists one node's GPUs)");
  EXPECT_EQ(err(two_nodes, {1}, true), "the dumped ring names 1 of the 2 ranks of its node");
  EXPECT_EQ(err(two_nodes, {1, 0}, false), "the dumped ring stays on its node, but the communicator spans nodes");
  EXPECT_EQ(err({0, 0}, {1, 0}, true), "the dumped ring leaves its node, but every rank is on that node");
  EXPECT_EQ(err({0, 0, 1}, {0, 1}, true),
            "node 1 holds 1 of the communicator's ranks and node 0 2: its part of the ring is not known");
  EXPECT_EQ(err(two_nodes, {3, 2}, true), "ordered");
}

TEST(NcclTree, TheBinaryTreesOfNcclsTreesCc) {
  // ncclGetBtree's illustration for 14 nodes: 0 - 8; 8: 4, 12; 4: 2, 6; 12: 10, 13; 2: 1, 3; 6: 5, 7; 10: 9, 11.
  const std::vector<int> parent14 = {-1, 2, 4, 2, 8, 6, 4, 6, 0, 10, 12, 10, 8, 12};
  for (int r = 0; r < 14; ++r) EXPECT_EQ(nccl_btree_parent(14, r), parent14[static_cast<std::size_t>(r)]) << r;
  // ncclGetDtree: 12 nodes, the second tree mirrored (root 11: 3; 3: 1, 7; 7: 5, 9; 1: 0, 2; ...).
  EXPECT_EQ(nccl_dtree_parent(12, 11), -1);
  EXPECT_EQ(nccl_dtree_parent(12, 3), 11);
  EXPECT_EQ(nccl_dtree_parent(12, 7), 3);
  EXPECT_EQ(nccl_dtree_parent(12, 0), 1);
  EXPECT_EQ(nccl_dtree_parent(12, 10), 9);
  // 13 nodes: shifted by one (root 1: 9; 9: 5, 0; 5: 3, 7; 0: 11; 3: 2, 4; ...).
  EXPECT_EQ(nccl_dtree_parent(13, 1), -1);
  EXPECT_EQ(nccl_dtree_parent(13, 9), 1);
  EXPECT_EQ(nccl_dtree_parent(13, 0), 9);
  EXPECT_EQ(nccl_dtree_parent(13, 11), 0);
  EXPECT_EQ(nccl_dtree_parent(13, 12), 11);
  // Every node but the root under one parent, no cycle: a tree, for every size.
  for (int n = 1; n <= 1024; ++n) {
    for (const auto& parent : {nccl_btree_parent, nccl_dtree_parent}) {
      int roots = 0;
      for (int r = 0; r < n; ++r) {
        int hops = 0;
        for (int x = r; parent(n, x) >= 0 && hops <= n; x = parent(n, x)) ++hops;
        EXPECT_LE(hops, 11) << n << " " << r;  // depth: log2(n) + 1 at most
        roots += parent(n, r) < 0 ? 1 : 0;
      }
      EXPECT_EQ(roots, 1) << n;
    }
  }
}

TEST(NcclTree, AChainPerNodeAndTheDoubleTreeOfTheNodesHeadsInFewPasses) {
  // 4 nodes of 2 ranks, in ring order: chains 0->1, 2->3, 4->5, 6->7; the heads 0, 2, 4, 6 of nodes 0-3, their
  // second GPUs 1, 3, 5, 7. The first tree of 4 nodes: 0 - 2; 2: 1, 3; the second, mirrored: 3 - 1; 1: 0, 2.
  // Plain pattern: every link between heads (by child: 4->2, 0->4, 4->6; 2->0, 6->2, 2->4).
  const std::vector<int> order = {0, 1, 2, 3, 4, 5, 6, 7}, nodes = {0, 0, 1, 1, 2, 2, 3, 3};
  std::vector<Transfer> links = nccl_tree_links(order, nodes, NcclTreePattern::kTree);
  EXPECT_EQ(links, (std::vector<Transfer>{{0, 1}, {2, 3}, {4, 5}, {6, 7}, {4, 2}, {0, 4}, {4, 6}, {2, 0}, {6, 2},
                                          {2, 4}}));
  auto plan = nccl_tree_passes(order, nodes, NcclTreePattern::kTree);
  EXPECT_EQ(check_passes(plan, links), "");
  EXPECT_EQ(plan.size(), 5u);
  // Balanced (NCCL's first choice, the default): a child below its parent in the tree's numbering links to
  // the parent's second GPU. Node 1 under 2 in the first tree (5->2); node 2 under 1 in the second, whose
  // numbering is mirrored (3 - 1 = 2 below 3 - 2 = 1: the parent's second GPU, 3->4).
  links = nccl_tree_links(order, nodes);
  EXPECT_EQ(links, (std::vector<Transfer>{{0, 1}, {2, 3}, {4, 5}, {6, 7}, {5, 2}, {0, 4}, {4, 6}, {2, 0}, {6, 2},
                                          {3, 4}}));
  plan = nccl_tree_passes(order, nodes);
  EXPECT_EQ(check_passes(plan, links), "");
  EXPECT_EQ(plan.size(), 4u);
  // Split: every child through the parent's second GPU.
  EXPECT_EQ(nccl_tree_links(order, nodes, NcclTreePattern::kSplit),
            (std::vector<Transfer>{{0, 1}, {2, 3}, {4, 5}, {6, 7}, {5, 2}, {1, 4}, {5, 6}, {3, 0}, {7, 2}, {3, 4}}));
  // The nodes in the order the ring first reaches them; a node's ranks in ring order, its first the head. Two
  // nodes: the trees' roots are the two heads, so each sends to the other.
  EXPECT_EQ(nccl_tree_links({3, 2, 1, 0}, {1, 1, 0, 0}), (std::vector<Transfer>{{3, 2}, {1, 0}, {3, 1}, {1, 3}}));
  // One node: its chain. Sizes that do not match: nothing.
  EXPECT_EQ(nccl_tree_links({5, 4, 6}, {0, 0, 0}), (std::vector<Transfer>{{5, 4}, {4, 6}}));
  EXPECT_TRUE(nccl_tree_links({0, 1}, {0}).empty());
  // Every size up to 1,024 ranks in nodes of 1, 2, 3, 8 ranks (the last node partial), scrambled within
  // nodes: every link once, no rank twice in a pass, at most 15 passes.
  for (const int per_node : {1, 2, 3, 8}) {
    for (int n = 2; n <= 1024; n += (n < 64 ? 1 : 37)) {
      std::vector<int> o(static_cast<std::size_t>(n)), nd;
      std::iota(o.begin(), o.end(), 0);
      for (int i = 0; i < n; ++i) nd.push_back(i / per_node);
      for (std::size_t i = 0; i + 1 < o.size(); i += 2) {
        if (nd[i] == nd[i + 1]) std::swap(o[i], o[i + 1]);
      }
      const auto l = nccl_tree_links(o, nd);
      const int node_count = (n + per_node - 1) / per_node;
      // The chains' links, and each tree's node_count - 1, less those both trees share.
      EXPECT_GE(l.size(), static_cast<std::size_t>(n - node_count + node_count - 1)) << per_node << " " << n;
      for (const NcclTreePattern pattern : {NcclTreePattern::kBalanced, NcclTreePattern::kSplit, NcclTreePattern::kTree}) {
        const auto p = nccl_tree_passes(o, nd, pattern);
        EXPECT_EQ(check_passes(p, nccl_tree_links(o, nd, pattern)), "") << per_node << " " << n;
        EXPECT_LE(p.size(), 15u) << per_node << " " << n;
      }
    }
  }
}

}  // namespace
}  // namespace greyhound::validate
