// The master's Validator, pure: what it chooses to test after a localisation, and what the measured
// times say (a slow GPU first, its own transfers not held against a link; else a slow link; else none).
#include "daemon/validator.h"

#include <gtest/gtest.h>

#include <set>

namespace greyhound::master {
namespace {

// TP2 x DP2 x PP2: DP groups {0,2} {1,3} (stage 0) and {4,6} {5,7} (stage 1); TP groups {0,1} {2,3} ...
std::vector<GroupMembers> groups() {
  return {{0x10, {0, 2}, "dp"}, {0x11, {1, 3}, "dp"}, {0x12, {4, 6}, "dp"}, {0x13, {5, 7}, "dp"},
          {0x20, {0, 1}, "tp"}, {0x21, {2, 3}, "tp"}, {0x22, {4, 5}, "tp"}, {0x23, {6, 7}, "tp"},
          {0x30, {0, 4}, "pp"}, {0x31, {1, 5}, "pp"}, {0x32, {2, 6}, "pp"}, {0x33, {3, 7}, "pp"}};
}

TEST(Validator, AComputeCulpritGetsGemmWithItsPeersAndTheSuspectGroupsRingPasses) {
  Localisation loc;
  loc.cause = Cause::kComputation;
  loc.culprit = 3;
  loc.group = 0x11;
  loc.slow_groups = {{0x21, 1.4}, {0x11, 1.9}};
  ValidatorConfig only_peers;
  only_peers.gemm_all = false;
  only_peers.p2p_all = false;
  const ValidationPlan peers = plan_validation(loc, groups(), only_peers);
  // The culprit, its group's other member, then its other groups' members: 3 peers.
  EXPECT_EQ(peers.gemm_ranks, (std::vector<int>{3, 1, 2, 7}));
  // By default every other GPU as well (they run in parallel).
  const ValidationPlan all = plan_validation(loc, groups());
  EXPECT_EQ(all.gemm_ranks, (std::vector<int>{3, 1, 2, 7, 0, 4, 5, 6}));
  // ... and every group's ring passes after the suspects and references.
  ASSERT_EQ(all.p2p.size(), 12u);
  EXPECT_EQ(all.p2p[0].group, 0x11u);
  EXPECT_EQ(all.p2p[4].group, 0x13u);
  const ValidationPlan& p = peers;
  ASSERT_EQ(p.p2p.size(), 4u);
  EXPECT_EQ(p.p2p[0].group, 0x11u);  // slowest first
  EXPECT_EQ(p.p2p[1].group, 0x21u);
  // Then as many references: comparable with the first suspect (DP groups), not suspect themselves.
  EXPECT_EQ(p.reference_groups, (std::vector<std::uint64_t>{0x10, 0x12}));
  EXPECT_EQ(p.p2p[2].group, 0x10u);
  EXPECT_EQ(p.p2p[0].order, (std::vector<int>{1, 3}));
  ASSERT_EQ(p.p2p[0].passes.size(), 2u);
  EXPECT_EQ(p.p2p[0].passes[0], (validate::Pass{{1, 3}}));
  EXPECT_EQ(p.p2p[0].passes[1], (validate::Pass{{3, 1}}));
  EXPECT_FALSE(p.empty());
}

TEST(Validator, ALinkSuspectGetsPassesOnlyInTheGraphDumpsOrder) {
  Localisation loc;
  loc.cause = Cause::kCommunication;
  loc.culprit = 0;
  loc.slow_groups = {{0x10, 3.0}};
  std::vector<GroupMembers> g = {{0x10, {0, 1, 2, 3}, "dp", {0, 2, 1, 3}}};
  ValidatorConfig c;
  c.p2p_all = false;
  ValidationPlan p = plan_validation(loc, g, c);
  EXPECT_TRUE(p.gemm_ranks.empty());
  ASSERT_EQ(p.p2p.size(), 1u);
  EXPECT_EQ(p.p2p[0].order, (std::vector<int>{0, 2, 1, 3}));
  ASSERT_GE(p.p2p[0].passes.size(), 2u);  // the ring's 2 first
  EXPECT_EQ(validate::check_passes({p.p2p[0].passes.begin(), p.p2p[0].passes.begin() + 2},
                                   validate::ring_links({0, 2, 1, 3})),
            "");
  // A dumped order that is not the group's members is not used.
  g[0].nccl_order = {0, 2, 1, 9};
  p = plan_validation(loc, g, c);
  EXPECT_EQ(p.p2p[0].order, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_TRUE(p.reference_groups.empty());  // no other group to compare with
  // At most max_groups suspect groups, and the reference.
  loc.slow_groups = {{0x10, 3.0}, {0x11, 2.0}, {0x12, 1.5}};
  c.max_groups = 2;
  p = plan_validation(loc, groups(), c);
  ASSERT_EQ(p.p2p.size(), 3u);
  EXPECT_EQ(p.reference_groups, (std::vector<std::uint64_t>{0x13}));  // 0x12 is suspect too, no other DP group
  EXPECT_EQ(p.p2p[2].group, 0x13u);
  // Suspects whose comparable groups are all suspect: groups of their size whose rings cross nodes alike.
  loc.slow_groups = {{0x12, 3.0}, {0x13, 3.0}};
  std::vector<GroupMembers> g2 = groups();
  g2[2].signature = g2[3].signature = "dp-last-stage";
  const std::map<int, int> node_of = {{0, 0}, {1, 0}, {2, 1}, {3, 1}, {4, 2}, {5, 2}, {6, 3}, {7, 3}};
  ValidatorConfig c2;
  c2.p2p_all = false;
  p = plan_validation(loc, g2, c2, node_of);
  EXPECT_EQ(p.reference_groups, (std::vector<std::uint64_t>{0x10, 0x11}));  // the other DP groups cross nodes
  p = plan_validation(loc, g2, c2);  // nodes unknown: none
  EXPECT_TRUE(p.reference_groups.empty());
  // Nothing suspect: nothing to test.
  EXPECT_TRUE(plan_validation(Localisation{}, groups()).empty());
}

constexpr double kMiB32 = 32.0 * (1 << 20);

TEST(Validator, ALinkProbeSendsEachWayOverItAgainstOtherPairsOfNodes) {
  // Nodes of two ranks (rank r on node r / 2) and a world group of all eight.
  std::vector<GroupMembers> g = groups();
  g.push_back({0x99, {0, 1, 2, 3, 4, 5, 6, 7}, "world"});
  std::map<int, int> node_of;
  for (int r = 0; r < 8; ++r) node_of[r] = r / 2;
  const ValidationPlan p = plan_link_probe(0, 1, g, node_of, {});
  ASSERT_EQ(p.p2p.size(), 2u);  // the link, and the one other pair of nodes (2-3)
  EXPECT_EQ(p.p2p[0].group, 0x99u);  // the largest group holding both ends
  EXPECT_EQ(p.p2p[0].order, (std::vector<int>{0, 2}));
  ASSERT_EQ(p.p2p[0].passes.size(), 1u);  // 0 -> 2, once
  EXPECT_EQ(p.p2p[0].passes[0], (validate::Pass{{0, 2}}));
  EXPECT_EQ(p.repeats, 1);
  EXPECT_EQ(p.p2p[1].order, (std::vector<int>{4, 6}));
  EXPECT_EQ(p.reference_groups, (std::vector<std::uint64_t>{0x99}));
  EXPECT_TRUE(p.gemm_ranks.empty());
  EXPECT_NE(p.why.find("link 0-1"), std::string::npos) << p.why;
  // Each transfer reaches both ends in the pause.
  const PauseSpec spec = pause_spec(p, g, {0, 1, 2, 3, 4, 5, 6, 7}, 10, PauseSettings{});
  EXPECT_EQ(spec.repeats, 1);
  ASSERT_EQ(spec.ranks.at(0).transfers.size(), 1u);
  EXPECT_EQ(spec.ranks.at(0).transfers[0].peer, 2);
  EXPECT_TRUE(spec.ranks.at(0).transfers[0].send);
  ASSERT_EQ(spec.ranks.at(2).transfers.size(), 1u);
  EXPECT_FALSE(spec.ranks.at(2).transfers[0].send);
  EXPECT_TRUE(spec.ranks.at(1).transfers.empty());
  // A known slow link makes no reference; with none left, or no group holding both ends, no probe.
  EXPECT_TRUE(plan_link_probe(0, 1, g, node_of, {{2, 3}}).empty());
  EXPECT_TRUE(plan_link_probe(0, 1, groups(), node_of, {}).empty());  // {0,2} holds both, but no other pair
  EXPECT_TRUE(plan_link_probe(0, 9, g, node_of, {}).empty());
}

TEST(Validator, ASlowGpuComesFirstAndItsOwnTransfersAreNotHeldAgainstALink) {
  // Rank 3 (node 1) 1.6x in GEMM; its transfers are slow too, the others' are not.
  const Validated v = judge_validation(
      {{3, 1, 16.0}, {1, 0, 10.0}, {2, 1, 10.2}, {7, 3, 9.9}},
      {{{1, 3}, 0, 1, kMiB32, 80.0}, {{3, 1}, 1, 0, kMiB32, 81.0}, {{0, 2}, 0, 1, kMiB32, 30.0},
       {{2, 0}, 1, 0, kMiB32, 31.0}, {{4, 6}, 2, 3, kMiB32, 30.5}});
  EXPECT_EQ(v.cause, ValidatedCause::kGpu);
  EXPECT_EQ(v.rank, 3);
  EXPECT_EQ(v.node, 1);
  EXPECT_NEAR(v.ratio, 1.6, 1e-9);
  EXPECT_EQ(v.links.size(), 3u);  // rank 3's two transfers left out
  for (const auto& l : v.links) EXPECT_FALSE(l.slow);
  EXPECT_NE(v.reason.find("rank 3's GEMM"), std::string::npos) << v.reason;
  EXPECT_STREQ(validated_cause_name(v.cause), "gpu");
}

TEST(Validator, ASlowLinkWhenNoGpuIsAndNoneWhenNothingIs) {
  Validated v = judge_validation({{0, 0, 10.0}, {1, 0, 10.1}, {2, 1, 9.9}},
                                 {{{0, 2}, 0, 1, kMiB32, 300.0}, {{1, 3}, 0, 1, kMiB32, 30.0},
                                  {{4, 6}, 2, 3, kMiB32, 31.0}, {{5, 7}, 2, 3, kMiB32, 29.0}});
  EXPECT_EQ(v.cause, ValidatedCause::kLink);
  EXPECT_EQ(v.node_a, 0);
  EXPECT_EQ(v.node_b, 1);
  EXPECT_NEAR(v.ratio, 10.0, 1e-9);
  EXPECT_NEAR(v.peers_gb_per_s / v.gb_per_s, 10.0, 1e-9);
  EXPECT_NE(v.reason.find("inter-node link 0-1"), std::string::npos) << v.reason;
  v = judge_validation({{0, 0, 10.0}, {1, 0, 10.1}, {2, 1, 9.9}},
                       {{{0, 2}, 0, 1, kMiB32, 31.0}, {{1, 3}, 0, 1, kMiB32, 30.0}, {{4, 6}, 2, 3, kMiB32, 30.5}});
  EXPECT_EQ(v.cause, ValidatedCause::kNone);
  EXPECT_NE(v.reason.find("no GPU of 3 and no transfer of 3"), std::string::npos) << v.reason;
}

TEST(Validator, TheNamedRankWhoseGemmIsFastIsItsHostAndItsTransfersAreNotHeldAgainstALink) {
  // Rank 5's host is contended: its GEMM is as fast as its peers', its transfers late.
  const std::vector<validate::GemmTime> gemm = {{5, 2, 10.1}, {4, 2, 10.0}, {6, 3, 9.9}, {7, 3, 10.0}};
  const std::vector<validate::TransferTime> transfers = {{{4, 5}, 2, 2, kMiB32, 9.0}, {{6, 7}, 3, 3, kMiB32, 1.0},
                                                         {{0, 1}, 0, 0, kMiB32, 1.1}};
  Validated v = judge_validation(gemm, transfers, 0, 5);
  EXPECT_EQ(v.cause, ValidatedCause::kHost);
  EXPECT_EQ(v.rank, 5);
  EXPECT_EQ(v.node, 2);
  EXPECT_EQ(v.links.size(), 2u);  // rank 5's transfer left out
  EXPECT_STREQ(validated_cause_name(v.cause), "host");
  // Not named: its late transfer is a slow intra-node link.
  v = judge_validation(gemm, transfers);
  EXPECT_EQ(v.cause, ValidatedCause::kLink);
  // Named, but its GEMM is slow: a GPU.
  v = judge_validation({{5, 2, 16.0}, {4, 2, 10.0}, {6, 3, 9.9}, {7, 3, 10.0}}, transfers, 0, 5);
  EXPECT_EQ(v.cause, ValidatedCause::kGpu);
}

// The pause of a plan: every rank of the job pauses; GEMM on the plan's ranks; each transfer given to both
// ends, as ranks of the group, in pass order.
TEST(Validator, APauseSpecGivesEachTransferToBothEndsInPassOrder) {
  ValidationPlan plan;
  plan.gemm_ranks = {3, 1};
  P2pTest t;
  t.group = 0x11;
  t.order = {1, 3};
  t.passes = validate::ring_passes(t.order);
  plan.p2p.push_back(t);
  PauseSettings s;
  s.gemm_n = 64;
  s.sizes = {1024, 2048};
  const PauseSpec spec = pause_spec(plan, groups(), {0, 1, 2, 3, 4, 5, 6, 7}, 40, s);
  EXPECT_EQ(spec.at_iteration, 40);
  EXPECT_EQ(spec.gemm_n, 64);
  EXPECT_EQ(spec.sizes, (std::vector<std::uint64_t>{1024, 2048}));
  ASSERT_EQ(spec.ranks.size(), 8u);
  EXPECT_TRUE(spec.ranks.at(3).gemm);
  EXPECT_TRUE(spec.ranks.at(1).gemm);
  EXPECT_FALSE(spec.ranks.at(0).gemm);
  EXPECT_TRUE(spec.ranks.at(0).transfers.empty());
  // Group 0x11 is {1, 3}: rank 1 is its rank 0, rank 3 its rank 1. Pass 0 sends 1 -> 3, pass 1 3 -> 1.
  EXPECT_EQ(spec.ranks.at(1).transfers,
            (std::vector<PauseTransferSpec>{{0x11, 0, 1, true}, {0x11, 1, 1, false}}));
  EXPECT_EQ(spec.ranks.at(3).transfers,
            (std::vector<PauseTransferSpec>{{0x11, 0, 0, false}, {0x11, 1, 0, true}}));
  // Nothing to GEMM: no GEMM size.
  plan.gemm_ranks.clear();
  EXPECT_EQ(pause_spec(plan, groups(), {0, 1, 2, 3}, 1, s).gemm_n, 0);
}

PauseReport report(const std::string& id, const std::string& state, const std::string& reason = "") {
  PauseReport r;
  r.id = id;
  r.state = state;
  r.reason = reason;
  return r;
}

// The verdict of a pause of `plan` over ranks 0-7 (rank r on node r), every transfer taking 1 ms but those
// between ranks `a` and `b`, 10 ms: a congested link between their nodes.
ValidatedReport verdict_with_slow_link(const ValidationPlan& plan, const std::vector<GroupMembers>& g,
                                       const Localisation& loc, int a, int b) {
  PauseSettings s;
  s.sizes = {1000};
  const std::vector<int> ranks = {0, 1, 2, 3, 4, 5, 6, 7};
  const PauseSpec spec = pause_spec(plan, g, ranks, 10, s);
  ValidationRun run("v", plan, spec, g, loc, 1.0, 100.0, 8.0);
  for (int r : ranks) run.report(r, r, report("v", "trapped"), 100.1);
  EXPECT_EQ(run.step(100.2).command.value_or(""), "pause_run");
  for (int r : ranks) {
    PauseReport d = report("v", "done");
    for (const PauseTransferSpec& x : spec.ranks.at(r).transfers) {
      const bool slow = (r == a && x.peer == b) || (r == b && x.peer == a);
      d.transfers.push_back({x, {slow ? 10.0 : 1.0}});
    }
    run.report(r, r, d, 100.5);
  }
  run.step(100.6);
  return run.outcome();
}

// NCCL picks ring or tree per collective at run time: a group is timed in its ring passes, then in its tree
// passes (over the same order) less the transfers the ring passes time already.
TEST(Validator, EachGroupIsTimedInItsRingPassesThenInItsTreesOtherLinks) {
  Localisation loc;
  loc.cause = Cause::kCommunication;
  loc.culprit = 0;
  loc.slow_groups = {{0x40, 2.0}};
  const std::vector<GroupMembers> g = {{0x40, {0, 1, 2, 3, 4, 5, 6, 7}, "dp"}};
  ValidatorConfig c;
  c.p2p_all = false;
  const ValidationPlan p = plan_validation(loc, g, c);
  ASSERT_EQ(p.p2p.size(), 1u);
  const P2pTest& t = p.p2p[0];
  ASSERT_EQ(t.passes.size(), 6u);  // the ring's 2, then the tree's 4
  const std::vector<validate::Pass> ring(t.passes.begin(), t.passes.begin() + 2);
  const std::vector<validate::Pass> tree(t.passes.begin() + 2, t.passes.end());
  EXPECT_EQ(ring, validate::ring_passes(t.order));
  // The tree of 8 in heap order: 0->1 0->2 1->3 1->4 2->5 2->6 3->7; 0->1 is a ring link.
  std::vector<validate::Transfer> rest;
  for (const validate::Transfer& x : validate::tree_links(t.order)) {
    if (!(x == validate::Transfer{0, 1})) rest.push_back(x);
  }
  EXPECT_EQ(rest.size(), 6u);
  EXPECT_EQ(tree.size(), 4u);
  EXPECT_EQ(validate::check_passes(tree, rest), "");  // each once, no rank twice in a pass
  // Rings only, trees only.
  ValidatorConfig rings = c;
  rings.trees = false;
  EXPECT_EQ(plan_validation(loc, g, rings).p2p.at(0).passes, validate::ring_passes(t.order));
  ValidatorConfig trees = c;
  trees.rings = false;
  const ValidationPlan only_trees = plan_validation(loc, g, trees);
  EXPECT_EQ(only_trees.p2p.at(0).passes, validate::tree_passes(t.order));
  // A ring of 3 sends 2 -> 0; its tree's 0 -> 2 is timed as well. A group of 2: its ring is its tree.
  const ValidationPlan three = plan_validation(loc, {{0x40, {4, 5, 6}, "dp"}}, c);
  ASSERT_EQ(three.p2p.at(0).passes.size(), 4u);
  EXPECT_EQ(three.p2p.at(0).passes[3], (validate::Pass{{4, 6}}));
  EXPECT_EQ(plan_validation(loc, {{0x40, {4, 5}, "dp"}}, c).p2p.at(0).passes.size(), 2u);

  // In a pause: rank r on node r, the link between nodes 2 and 5 slow. Only the tree's 2 -> 5 crosses it:
  // found with the trees, not without them.
  const ValidatedReport with_trees = verdict_with_slow_link(p, g, loc, 2, 5);
  EXPECT_EQ(with_trees.cause, "link") << with_trees.reason;
  EXPECT_EQ(std::minmax(with_trees.node_a, with_trees.node_b), std::minmax(2, 5));
  EXPECT_EQ(with_trees.links.size(), 14u);  // 8 ring transfers, 6 of the tree
  const ValidatedReport without = verdict_with_slow_link(plan_validation(loc, g, rings), g, loc, 2, 5);
  EXPECT_EQ(without.cause, "none") << without.reason;
}

// --validate-topologies: ring, tree or both; anything else leaves the configuration as it was.
TEST(Validator, TopologiesAreRingTreeOrBoth) {
  ValidatorConfig c;
  ASSERT_TRUE(parse_validate_topologies("ring", &c));
  EXPECT_TRUE(c.rings);
  EXPECT_FALSE(c.trees);
  ASSERT_TRUE(parse_validate_topologies("tree", &c));
  EXPECT_FALSE(c.rings);
  EXPECT_TRUE(c.trees);
  ASSERT_TRUE(parse_validate_topologies("tree,ring", &c));
  EXPECT_TRUE(c.rings && c.trees);
  c.trees = false;
  for (const char* bad : {"", "ring,", ",tree", "rings", "ring,star", "Ring"}) {
    EXPECT_FALSE(parse_validate_topologies(bad, &c)) << bad;
    EXPECT_TRUE(c.rings && !c.trees) << bad;
  }
}

// With the members' nodes known, the trees are NCCL's: a chain per node and the double binary tree of the
// nodes' heads. Rank r on node r of 8: the first tree sends 0 -> 4, which neither the ring (i -> i + 1) nor the
// tree in heap layout over the ring's order sends, so a congested link between nodes 0 and 4 is found only
// with NCCL's trees.
TEST(Validator, WithTheMembersNodesKnownTheTreesAreNcclsDoubleBinaryTree) {
  Localisation loc;
  loc.cause = Cause::kCommunication;
  loc.culprit = 0;
  loc.slow_groups = {{0x40, 2.0}};
  GroupMembers known{0x40, {0, 1, 2, 3, 4, 5, 6, 7}, "dp"};
  known.nodes = {0, 1, 2, 3, 4, 5, 6, 7};
  ValidatorConfig c;
  c.p2p_all = false;
  const ValidationPlan p = plan_validation(loc, {known}, c);
  ASSERT_EQ(p.p2p.size(), 1u);
  const P2pTest& t = p.p2p[0];
  std::vector<validate::Transfer> rest;  // NCCL's tree links the ring does not time
  for (const validate::Transfer& x : validate::nccl_tree_links(t.order, known.nodes)) {
    const auto ring = validate::ring_links(t.order);
    if (std::find(ring.begin(), ring.end(), x) == ring.end()) rest.push_back(x);
  }
  const std::vector<validate::Pass> tree(t.passes.begin() + 2, t.passes.end());
  EXPECT_EQ(validate::check_passes(tree, rest), "");
  // The same group, nodes unknown to it but known to the caller (node_of): the same plan.
  const GroupMembers unknown{0x40, {0, 1, 2, 3, 4, 5, 6, 7}, "dp"};
  std::map<int, int> node_of;
  for (int r = 0; r < 8; ++r) node_of[r] = r;
  EXPECT_EQ(plan_validation(loc, {unknown}, c, node_of).p2p.at(0).passes, t.passes);

  const ValidatedReport nccl = verdict_with_slow_link(p, {known}, loc, 0, 4);
  EXPECT_EQ(nccl.cause, "link") << nccl.reason;
  EXPECT_EQ(std::minmax(nccl.node_a, nccl.node_b), std::minmax(0, 4));
  const ValidatedReport heap = verdict_with_slow_link(plan_validation(loc, {unknown}, c), {unknown}, loc, 0, 4);
  EXPECT_EQ(heap.cause, "none") << heap.reason;
}

// NCCL's tree graph gave the chains through the nodes and the pattern: the tree passes follow them, not the
// ring's order. 2 nodes of 2 (ranks 0, 1 on node 0; 2, 3 on node 1), the ring 1 0 3 2, the chains 0 1 and 2 3,
// the plain tree pattern: the tree sends 0 -> 1 and 2 -> 3 inside the nodes and 0 -> 2, 2 -> 0 between their
// heads; over the ring's order it would send 1 -> 0 and 3 -> 2 inside the nodes and 1 -> 3, 3 -> 1 between
// theirs (node 1 is above node 0 in the first tree and below it in the second: in the balanced pattern both
// link through the parent node's first GPU).
TEST(Validator, NcclsTreeGraphGivesTheTreesChainsAndPattern) {
  Localisation loc;
  loc.cause = Cause::kCommunication;
  loc.culprit = 0;
  loc.slow_groups = {{0x50, 2.0}};
  GroupMembers g{0x50, {0, 1, 2, 3}, "dp"};
  g.nodes = {0, 0, 1, 1};
  g.nccl_order = {1, 0, 3, 2};
  g.nccl_tree_order = {0, 1, 2, 3};
  g.nccl_tree_pattern = validate::NcclTreePattern::kTree;
  ValidatorConfig c;
  c.p2p_all = false;
  c.rings = false;
  const auto sent = [](const ValidationPlan& p) {
    std::set<std::pair<int, int>> out;
    for (const validate::Pass& pass : p.p2p.at(0).passes) {
      for (const validate::Transfer& x : pass) out.insert({x.src, x.dst});
    }
    return out;
  };
  const ValidationPlan p = plan_validation(loc, {g}, c);
  EXPECT_EQ(p.p2p.at(0).order, (std::vector<int>{1, 0, 3, 2}));  // the ring's order
  EXPECT_EQ(sent(p), (std::set<std::pair<int, int>>{{0, 1}, {2, 3}, {0, 2}, {2, 0}}));
  // Without the tree graph: the balanced pattern over the ring's order.
  GroupMembers ring_only = g;
  ring_only.nccl_tree_order.clear();
  ring_only.nccl_tree_pattern = validate::NcclTreePattern::kBalanced;
  EXPECT_EQ(sent(plan_validation(loc, {ring_only}, c)), (std::set<std::pair<int, int>>{{1, 0}, {3, 2}, {1, 3}, {3, 1}}));
  // A tree order that is not the group's members is not used.
  GroupMembers stale = g;
  stale.nccl_tree_order = {0, 1, 2, 9};
  stale.nccl_tree_pattern = validate::NcclTreePattern::kBalanced;
  EXPECT_EQ(sent(plan_validation(loc, {stale}, c)), sent(plan_validation(loc, {ring_only}, c)));
}

// One validation pause from arming to the verdict: run once every rank is at the cut, resume once every
// rank's results are in, the verdict from the measured times.
TEST(Validator, AValidationRunArmsRunsResumesAndJudges) {
  Localisation loc;
  loc.cause = Cause::kHost;
  loc.culprit = 3;
  ValidationPlan plan;
  plan.gemm_ranks = {3, 1, 2};
  PauseSettings s;
  s.sizes = {1000};
  const PauseSpec spec = pause_spec(plan, groups(), {1, 2, 3}, 10, s);
  ValidationRun run("v1", plan, spec, groups(), loc, 12.5, 100.0, 8.0);
  EXPECT_FALSE(run.step(100.1).command);
  run.report(1, 0, report("v1", "trapped"), 100.2);
  run.report(2, 1, report("v1", "trapped"), 100.3);
  run.report(9, 1, report("v1", "trapped"), 100.3);     // not a rank of the pause
  run.report(3, 1, report("other", "trapped"), 100.3);  // another pause
  EXPECT_FALSE(run.step(100.4).command);
  run.report(3, 1, report("v1", "trapped"), 100.5);
  ValidationRun::Step st = run.step(100.6);
  ASSERT_TRUE(st.command);
  EXPECT_EQ(*st.command, "pause_run");
  EXPECT_FALSE(run.step(100.7).command);  // once
  for (int r : {1, 2, 3}) {
    PauseReport d = report("v1", "done");
    d.gemm_ms = {r == 3 ? 10.0 : 10.2, 5.0};
    run.report(r, r == 1 ? 0 : 1, d, 101.0);
  }
  st = run.step(101.1);
  ASSERT_TRUE(st.command);
  EXPECT_EQ(*st.command, "pause_resume");
  EXPECT_FALSE(st.finished);
  for (int r : {1, 2, 3}) {
    PauseReport d = report("v1", "resumed", "told");
    d.paused_ms = 900 + r;
    run.report(r, -1, d, 101.2);
  }
  st = run.step(101.3);
  EXPECT_TRUE(st.finished);
  const ValidatedReport v = run.outcome();
  EXPECT_FALSE(v.aborted);
  // The profile named rank 3's host; its GEMM is as fast as its peers': the host it is.
  EXPECT_EQ(v.cause, "host");
  EXPECT_EQ(v.rank, 3);
  EXPECT_EQ(v.node, 1);
  EXPECT_NEAR(v.pause_s, 0.903, 1e-9);
  EXPECT_NEAR(v.tests_s, 0.4, 1e-9);
  EXPECT_EQ(v.localised_t_s, 12.5);
  EXPECT_EQ(v.ranks, 3);
  EXPECT_EQ(v.gpus.size(), 3u);
}

TEST(Validator, AValidationRunAbortsOnARefusalOrARankThatDoesNotArrive) {
  ValidationPlan plan;
  plan.gemm_ranks = {0, 1, 2};
  const PauseSpec spec = pause_spec(plan, groups(), {0, 1, 2}, 10, PauseSettings{});
  {
    ValidationRun run("v2", plan, spec, groups(), Localisation{}, 0, 100.0, 8.0);
    run.report(0, 0, report("v2", "trapped"), 100.1);
    run.report(1, 0, report("v2", "refused", "past"), 100.2);
    ValidationRun::Step st = run.step(100.3);
    ASSERT_TRUE(st.command);
    EXPECT_EQ(*st.command, "pause_abort");
    run.report(0, 0, report("v2", "resumed", "aborted"), 100.4);
    EXPECT_TRUE(run.step(100.5).finished);
    const ValidatedReport v = run.outcome();
    EXPECT_TRUE(v.aborted);
    EXPECT_EQ(v.cause, "none");
    EXPECT_NE(v.reason.find("rank 1 cannot reach the cut (past)"), std::string::npos) << v.reason;
  }
  {
    ValidationRun run("v3", plan, spec, groups(), Localisation{}, 0, 100.0, 8.0);
    run.report(0, 0, report("v3", "trapped"), 100.1);
    run.report(1, 0, report("v3", "trapped"), 100.1);
    EXPECT_FALSE(run.step(107.9).command);
    ValidationRun::Step st = run.step(108.0);  // rank 2 never arrived
    ASSERT_TRUE(st.command);
    EXPECT_EQ(*st.command, "pause_abort");
    EXPECT_FALSE(st.finished);
    EXPECT_TRUE(run.step(113.1).finished);  // the trapped ranks did not say they resumed: a grace, then over
    EXPECT_NE(run.outcome().reason.find("1 of 3 ranks did not reach the cut"), std::string::npos);
  }
  {
    // The arm timeout never exceeds half the ranks' own deadline.
    ValidationRun run("v4", plan, spec, groups(), Localisation{}, 0, 100.0, 1000.0);
    EXPECT_FALSE(run.step(114.9).command);
    EXPECT_TRUE(run.step(115.0).command);
  }
}

// Pre-flight: every rank's GEMM, every group's ring once (a group with the members of one tested already is
// not tested again; a group of one rank has nothing to send).
TEST(Validator, APreflightTestsEveryGpuAndEveryGroupOnce) {
  std::vector<GroupMembers> g = groups();
  g.push_back({0x40, {2, 0}, "dp-again"});  // the members of 0x10 in another order
  g.push_back({0x41, {7}, "alone"});
  for (GroupMembers& x : g) {
    if (x.group == 0x30) x.nccl_order = {4, 0};
  }
  const ValidationPlan plan = plan_preflight(g);
  EXPECT_EQ(plan.gemm_ranks, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  ASSERT_EQ(plan.p2p.size(), 12u);
  std::set<std::uint64_t> tested;
  for (const P2pTest& t : plan.p2p) {
    tested.insert(t.group);
    EXPECT_FALSE(t.passes.empty()) << t.group;
  }
  EXPECT_EQ(tested.count(0x40), 0u);
  EXPECT_EQ(tested.count(0x41), 0u);
  EXPECT_EQ(plan.p2p[8].order, (std::vector<int>{4, 0}));  // NCCL's ring order, when the graph dump gives it
  // One GPU alone has nothing to be compared with: no GEMM.
  EXPECT_TRUE(plan_preflight({{0x1, {0}, "x"}}).gemm_ranks.empty());
}

TEST(Validator, APreflightReportNamesEverySlowGpuAndEachSlowLinkOnce) {
  ValidatedReport v;
  v.id = "preflight-1.x";
  v.cause = "gpu";
  v.at_iteration = 0;
  v.ranks = 8;
  v.pause_s = 1.5;
  for (int r = 0; r < 8; ++r) {
    v.gpus.push_back({r, r / 2, r == 5 || r == 1 ? 16.0 : 10.0, 10.0, r == 5 || r == 1 ? 1.6 : 1.0, 1.0, r == 5 || r == 1, 0.0, ""});
  }
  v.links.push_back({2, 4, 1, 2, "inter-node", 20, 1, 20, 0.05, true});
  v.links.push_back({5, 3, 2, 1, "inter-node", 10, 1, 10, 0.1, true});  // the same link, the other way
  v.links.push_back({0, 2, 0, 1, "inter-node", 1, 1, 1, 1, false});
  v.links.push_back({6, 7, 3, 3, "intra-node", 1, 0, 0, 1, false});  // alone in its class: not judged
  PreflightRequest req;
  req.id = "pf-1";
  req.fail_on_slow = true;
  const PreflightReport r = preflight_report(v, req, 12);
  EXPECT_EQ(r.id, "pf-1");
  EXPECT_EQ(r.state, "slow");
  EXPECT_TRUE(r.fail_on_slow);
  EXPECT_EQ(r.pause, "preflight-1.x");
  ASSERT_EQ(r.slow_gpus.size(), 2u);
  EXPECT_EQ(r.slow_gpus[0].rank, 1);
  EXPECT_EQ(r.slow_gpus[1].rank, 5);
  ASSERT_EQ(r.slow_links.size(), 1u);
  EXPECT_EQ(r.slow_links[0].node_a, 1);
  EXPECT_EQ(r.slow_links[0].node_b, 2);
  EXPECT_EQ(r.slow_links[0].transfers, 2);
  EXPECT_DOUBLE_EQ(r.slow_links[0].ratio, 20);
  EXPECT_DOUBLE_EQ(r.slow_links[0].peers_gb_per_s, 1.0);
  EXPECT_EQ(r.gpus_tested, 8);
  EXPECT_EQ(r.transfers_tested, 3);
  EXPECT_EQ(r.groups_tested, 12);
  // Nothing slow: passed; an aborted pause: failed, with its reason.
  for (auto& g : v.gpus) g.slow = false;
  for (auto& l : v.links) l.slow = false;
  EXPECT_EQ(preflight_report(v, req, 12).state, "passed");
  v.aborted = true;
  v.reason = "1 of 8 ranks did not reach the cut in time";
  const PreflightReport f = preflight_report(v, req, 12);
  EXPECT_EQ(f.state, "failed");
  EXPECT_NE(f.reason.find("did not reach the cut"), std::string::npos);
}

// --fail-on-slow: once every result is in, the ranks are told to exit when the tests find something slow, and
// to resume when they do not.
TEST(Validator, AFailOnSlowPreflightTellsRanksToExitOnlyWhenSomethingIsSlow) {
  ValidationPlan plan;
  plan.gemm_ranks = {0, 1, 2};
  PauseSettings s;
  s.sizes = {1000};
  const PauseSpec spec = pause_spec(plan, groups(), {0, 1, 2}, 0, s);
  for (const bool slow : {true, false}) {
    ValidationRun run("pf", plan, spec, groups(), Localisation{}, 0, 100.0, 8.0);
    run.exit_on_slow();
    for (int r : {0, 1, 2}) run.report(r, r, report("pf", "trapped"), 100.1);
    ASSERT_EQ(*run.step(100.2).command, "pause_run");
    for (int r : {0, 1, 2}) {
      PauseReport d = report("pf", "done");
      d.gemm_ms = {slow && r == 2 ? 16.0 : 10.0, 5.0};
      run.report(r, r, d, 100.5);
    }
    const ValidationRun::Step st = run.step(100.6);
    ASSERT_TRUE(st.command);
    EXPECT_EQ(*st.command, slow ? "pause_exit" : "pause_resume");
    EXPECT_EQ(run.told_to_exit(), slow);
    // Ranks that exit say nothing more: the pause is over after the grace.
    EXPECT_TRUE(run.step(105.7).finished);
    EXPECT_FALSE(run.outcome().aborted);
  }
}

// The FP8 GEMM counts where every GPU tested ran it: a GPU slow only there is named, with its FP8 throughput
// as evidence; with one GPU that could not run it (an older device beside newer ones), all compare without.
TEST(Validator, TheFp8GemmCountsOnlyWhereEveryGpuTestedMeasuredIt) {
  ValidationPlan plan;
  plan.gemm_ranks = {0, 1, 2};
  PauseSettings s;
  s.sizes = {1000};
  const PauseSpec spec = pause_spec(plan, groups(), {0, 1, 2}, 0, s);
  for (const bool all_fp8 : {true, false}) {
    ValidationRun run("v8", plan, spec, groups(), Localisation{}, 0, 100.0, 8.0);
    for (int r : {0, 1, 2}) run.report(r, r, report("v8", "trapped"), 100.1);
    ASSERT_EQ(*run.step(100.2).command, "pause_run");
    for (int r : {0, 1, 2}) {
      PauseReport d = report("v8", "done");
      // Rank 2 is 2.5x slower in FP8 only: (1 + 1 + 2.5) / 3 = 1.5x its peers, the types weighed alike.
      const bool fp8 = all_fp8 || r != 0;
      d.gemm_ms = {10.0, 5.0};
      d.gemm_tflops = {40.0, 80.0};
      d.gemm_fp8 = fp8 ? "done" : "unsupported";
      d.gemm_fp8_ms = fp8 ? (r == 2 ? 5.0 : 2.0) : 0.0;
      d.gemm_fp8_tflops = fp8 ? (r == 2 ? 200.0 : 500.0) : 0.0;
      run.report(r, r, d, 100.5);
    }
    run.step(100.6);
    for (int r : {0, 1, 2}) run.report(r, r, report("v8", "resumed"), 100.7);
    ASSERT_TRUE(run.step(100.8).finished);
    const ValidatedReport v = run.outcome();
    ASSERT_FALSE(v.aborted) << v.reason;
    ASSERT_EQ(v.gpus.size(), 3u);
    if (all_fp8) {
      EXPECT_EQ(v.gemm_types, (std::vector<std::string>{"fp32", "fp16", "fp8"}));
      EXPECT_EQ(v.cause, "gpu");
      EXPECT_EQ(v.rank, 2);
      EXPECT_TRUE(v.gpus[2].slow);
      EXPECT_NEAR(v.gpus[2].ratio, 1.5, 1e-9);
      EXPECT_NEAR(v.gpus[2].ms, 25.5, 1e-9);  // 1.5 x (10 + 5 + 2)
      EXPECT_DOUBLE_EQ(v.gpus[2].fp8_tflops, 200.0);
      EXPECT_DOUBLE_EQ(v.gpus[2].tflops, 40.0);
      EXPECT_EQ(v.gpus[2].fp8, "done");
    } else {
      EXPECT_EQ(v.gemm_types, (std::vector<std::string>{"fp32", "fp16"}));
      EXPECT_EQ(v.cause, "none");
      for (const auto& g : v.gpus) EXPECT_DOUBLE_EQ(g.ms, 15.0);
      EXPECT_DOUBLE_EQ(v.gpus[0].fp8_tflops, 0.0);
      EXPECT_EQ(v.gpus[0].fp8, "unsupported");  // why the FP8 GEMM did not count
    }
  }
}

}  // namespace
}  // namespace greyhound::master
