// The master's pause-free localisation on hand-built profiles of a TP2 x DP2 x PP2 job (Megatron order:
// rank = tp + 2 * (dp + 2 * pp)).
#include "daemon/localiser.h"

#include <gtest/gtest.h>

#include "common/record_json.h"
#include "greyhound/parallel_shape.h"

namespace greyhound::master {
namespace {

constexpr std::uint64_t kTp[4] = {0x10, 0x11, 0x12, 0x13};  // {0,1} {2,3} {4,5} {6,7}
constexpr std::uint64_t kDp[4] = {0x20, 0x21, 0x22, 0x23};  // {0,2} {1,3} {4,6} {5,7}
constexpr std::uint64_t kPp[4] = {0x30, 0x31, 0x32, 0x33};  // {0,4} {1,5} {2,6} {3,7}

std::vector<GroupMembers> groups() {
  return {{kTp[0], {0, 1}, "2|AllReduce"}, {kTp[1], {2, 3}, "2|AllReduce"}, {kTp[2], {4, 5}, "2|AllReduce"},
          {kTp[3], {6, 7}, "2|AllReduce"}, {kDp[0], {0, 2}, "2|AllReduce"}, {kDp[1], {1, 3}, "2|AllReduce"},
          {kDp[2], {4, 6}, "2|AllReduce"}, {kDp[3], {5, 7}, "2|AllReduce"}, {kPp[0], {0, 4}, "2|Recv|Send"},
          {kPp[1], {1, 5}, "2|Recv|Send"}, {kPp[2], {2, 6}, "2|Recv|Send"}, {kPp[3], {3, 7}, "2|Recv|Send"}};
}

JobLayout layout(std::vector<int> microbatches) {
  JobLayout l;
  l.tp = l.dp = l.pp = 2;
  l.world = 8;
  l.microbatches = std::move(microbatches);
  l.capabilities = {"S2"};
  return l;
}

constexpr ParallelShape kShape{2, 2, 2};  // the layout's
int dp_of(int r) { return kShape.coords(r).dp; }
int tp_of(int r) { return kShape.coords(r).tp; }
int pp_of(int r) { return kShape.coords(r).pp; }

// Shares of the window inside each group; comm_share is their sum. Call rates are equal within a kind: per
// iteration 40 TP AllReduces, one DP AllReduce and 16 pipeline transfers.
ProfileView profile(int rank, double tp, double dp, double pp, double iter_ms = 500) {
  ProfileView v;
  v.rank = rank;
  v.node = rank / 4;
  v.iterations = 10;
  v.iter_ms = iter_ms;
  v.comm_share = tp + dp + pp;
  v.group_share[kTp[rank / 2]] = tp;
  v.group_share[kDp[tp_of(rank) + 2 * pp_of(rank)]] = dp;
  v.group_share[kPp[rank % 4]] = pp;
  v.group_rate[kTp[rank / 2]] = 40 / (iter_ms * 1e-3);
  v.group_rate[kDp[tp_of(rank) + 2 * pp_of(rank)]] = 1 / (iter_ms * 1e-3);
  v.group_rate[kPp[rank % 4]] = 16 / (iter_ms * 1e-3);
  return v;
}

// Rank 3 computes slowly. Its TP peer (rank 2) waits for it in every layer's AllReduce; all of replica 1
// reaches the DP gradient AllReduce late, so replica 0 waits there. `pp6`: rank 6's share in PP group {2,6}.
std::vector<ProfileView> slow_gpu_profiles(double pp6 = 0.05) {
  std::vector<ProfileView> p;
  for (int r = 0; r < 8; ++r) {
    const double dp = dp_of(r) == 0 ? 0.20 : 0.02;
    double tp = 0.10;
    if (r == 2) tp = 0.18;
    if (r == 3) tp = 0.02;
    p.push_back(profile(r, tp, dp, r == 6 ? pp6 : 0.05));
  }
  return p;
}

TEST(Localiser, NamesTheSlowGpuNotTheRanksThatWaitForIt) {
  // Rank 2 is the late arrival of its DP group {0,2}, with the same score as rank 3 in {1,3}: only the vote across groups
  // separates them.
  const std::vector<ProfileView> p = slow_gpu_profiles();
  const Localisation loc = localise(p, groups(), layout({8, 8}));
  EXPECT_EQ(loc.culprit, 3);
  EXPECT_EQ(loc.culprit_node, 0);
  EXPECT_EQ(loc.kind, "COMPUTE_STRAGGLER");
  EXPECT_EQ(loc.cause, Cause::kComputation);
  EXPECT_EQ(loc.severity, "warning");  // 10 iterations: a critical needs 20
  EXPECT_NEAR(loc.score, 0.18, 1e-9);  // its best group: DP {1,3}, (0.20 - 0.02) of the step
  EXPECT_EQ(loc.group, kDp[1]);
  EXPECT_EQ(loc.ranks_profiled, 8);
  // Replica times per pipeline slot: (step - DP wait) / (m + P - 1).
  ASSERT_EQ(loc.replica_ms_per_microbatch.size(), 2u);
  EXPECT_NEAR(loc.replica_ms_per_microbatch[0], 400.0 / 9, 1e-9);
  EXPECT_NEAR(loc.replica_ms_per_microbatch[1], 490.0 / 9, 1e-9);
  EXPECT_EQ(loc.culprit_replica, 1);
  EXPECT_NEAR(loc.replica_skew, 490.0 / 445.0, 1e-9);
  const auto j = to_json(loc.report());
  EXPECT_EQ(j["culprit"], 3);
  EXPECT_EQ(j["group"], group_id_hex(kDp[1]));
  EXPECT_EQ(j["replica_ms_per_microbatch"].size(), 2u);
}

TEST(Localiser, ReplicaTimesUseTheDpGroupsTheRanksMeasureWhenOldOnesWithTheSameMembersRemain) {
  // A placement switch and its revert made new communicators: the registry holds the old DP groups as well
  // (same members, other ids, listed last). The profiles measure the new ones.
  std::vector<GroupMembers> g = groups();
  for (int i = 0; i < 4; ++i) {
    GroupMembers old = g[static_cast<std::size_t>(4 + i)];
    old.group = 0x90 + static_cast<std::uint64_t>(i);
    g.push_back(old);
  }
  const Localisation loc = localise(slow_gpu_profiles(), g, layout({8, 8}));
  ASSERT_EQ(loc.replica_ms_per_microbatch.size(), 2u);
  EXPECT_NEAR(loc.replica_ms_per_microbatch[0], 400.0 / 9, 1e-9);
  EXPECT_NEAR(loc.replica_ms_per_microbatch[1], 490.0 / 9, 1e-9);
  EXPECT_EQ(loc.culprit, 3);
}

TEST(Localiser, TheSlowGpusOwnPipelineIsExplainedNotSuspect) {
  // As above, and rank 6 (the next stage of rank 2, in the culprit's replica) waits in its Recv for rank 2,
  // which waits for rank 3: PP group {2,6} spends 1.7x the other PP groups. With the layout that is the slow
  // GPU's pipeline, not a link; without it, {2,6} stays a suspect (and with it the link 0-1 it crosses).
  const std::vector<ProfileView> p = slow_gpu_profiles(0.12);
  const Localisation loc = localise(p, groups(), layout({8, 8}));
  EXPECT_EQ(loc.culprit, 3);
  EXPECT_EQ(loc.cause, Cause::kComputation);
  EXPECT_TRUE(loc.slow_groups.empty());
  EXPECT_TRUE(loc.suspect_links.empty());

  const Localisation blind = localise(p, groups(), std::nullopt);
  EXPECT_EQ(blind.culprit, 3);
  ASSERT_EQ(blind.slow_groups.size(), 1u);
  EXPECT_EQ(blind.slow_groups[0].first, kPp[2]);
  ASSERT_EQ(blind.suspect_links.size(), 1u);
  EXPECT_EQ(blind.suspect_links[0].node_a, 0);
  EXPECT_EQ(blind.suspect_links[0].node_b, 1);
}

// Rank 5's host is contended (its launches are slow): it arrives last in all its groups, TP {4,5}, DP {5,7}
// and PP {1,5}, and its own time inside each call carries its launch delays (0.07 of the step in TP, where
// the others spend 0.01). Its peers wait for it: rank 4 in TP, rank 7 in DP, rank 1 in PP. Its extra time
// outside NCCL does not cover the gap (not a compute straggler). `pp04`: the share of PP group {0,4}, which
// crosses the same link 0-1 as rank 5's PP group.
std::vector<ProfileView> contended_host_profiles(double pp04 = 0.06) {
  std::vector<ProfileView> p;
  for (int r = 0; r < 8; ++r) {
    double tp = 0.01, dp = 0.014, pp = r == 0 || r == 4 ? pp04 : 0.06;
    if (r == 5) tp = 0.07, dp = 0.02, pp = 0.07;
    if (r == 4) tp = 0.25;
    if (r == 7) dp = 0.27;
    if (r == 1) pp = 0.36;
    p.push_back(profile(r, tp, dp, pp, 596));
  }
  return p;
}

std::vector<ProfileView> healthy_profiles() {
  std::vector<ProfileView> p;
  for (int r = 0; r < 8; ++r) p.push_back(profile(r, 0.01, 0.02, 0.08, 443));
  return p;
}

TEST(Localiser, AContendedHostIsAHostStragglerNotALink) {
  const auto baseline = group_baseline(healthy_profiles(), groups());
  ASSERT_TRUE(baseline);
  const Localisation loc = localise(contended_host_profiles(), groups(), layout({8, 8}), &*baseline);
  EXPECT_EQ(loc.culprit, 5);
  EXPECT_EQ(loc.kind, "STRAGGLER");  // its compute excess does not explain the gap
  EXPECT_EQ(loc.cause, Cause::kHost);
  EXPECT_TRUE(loc.suspect_links.empty());  // its own groups and its replica's are explained
  EXPECT_EQ(loc.culprit_replica, 0);
  // Without a baseline the other groups crossing its link compare with their comparable groups: the same.
  const Localisation blind = localise(contended_host_profiles(), groups(), layout({8, 8}));
  EXPECT_EQ(blind.cause, Cause::kHost);
  EXPECT_EQ(to_json(loc.report())["cause"], "host");
}

TEST(Localiser, ALateRankOnACongestedLinkIsNoHostStraggler) {
  // The same lateness, but PP group {0,4}, which crosses rank 5's link 0-1 and does not contain it, now
  // spends 3x its baseline even in its least waiting member: that link is slow, so the cause is not the host.
  const auto baseline = group_baseline(healthy_profiles(), groups());
  ASSERT_TRUE(baseline);
  const Localisation loc = localise(contended_host_profiles(0.35), groups(), layout({8, 8}), &*baseline);
  EXPECT_EQ(loc.culprit, 5);
  EXPECT_EQ(loc.cause, Cause::kCommunication);
  EXPECT_FALSE(loc.suspect_links.empty());
}

TEST(Localiser, ACongestedLinkIsACommunicationSuspectWithoutACulprit) {
  // DP group {4,6} crosses a congested link: both members spend 3x the time of the other DP groups inside
  // it; nobody arrives late anywhere.
  std::vector<ProfileView> p;
  for (int r = 0; r < 8; ++r) p.push_back(profile(r, 0.10, r == 4 || r == 6 ? 0.30 : 0.10, 0.05));
  const Localisation loc = localise(p, groups(), layout({8, 8}));
  EXPECT_EQ(loc.culprit, -1);
  EXPECT_EQ(loc.kind, "NONE");
  EXPECT_EQ(loc.cause, Cause::kCommunication);
  ASSERT_EQ(loc.slow_groups.size(), 1u);
  EXPECT_EQ(loc.slow_groups[0].first, kDp[2]);
  EXPECT_NEAR(loc.slow_groups[0].second, 3.0, 1e-9);
  EXPECT_TRUE(loc.suspect_links.empty());  // ranks 4 and 6 share node 1: no inter-node link to suspect
  // Typical transfer times: the least member time of each DP / PP group, median over the groups.
  EXPECT_NEAR(loc.dp_transfer_ms, 50, 1e-9);
  EXPECT_NEAR(loc.pp_transfer_ms, 25, 1e-9);

  // Were rank 6 on node 2, the group's ring would cross the link 1-2 (both ways).
  p[6].node = 2;
  const Localisation crossing = localise(p, groups(), layout({8, 8}));
  ASSERT_EQ(crossing.suspect_links.size(), 1u);
  EXPECT_EQ(crossing.suspect_links[0].node_a, 1);
  EXPECT_EQ(crossing.suspect_links[0].node_b, 2);
  EXPECT_NEAR(crossing.suspect_links[0].ratio, 3.0, 1e-9);
  EXPECT_EQ(to_json(crossing.report())["suspect_links"][0]["nodes"], nlohmann::json::array({1, 2}));
}

TEST(Localiser, AGroupSlightlyOverItsPeersButCostingNothingIsNoSuspect) {
  // A healthy job: TP group {0,1} spends 13 % more than the other TP groups, but 0.45 ms of a 500 ms
  // iteration (below 2 % of it): noise, not a congested link. Three times as much of the iteration is one.
  std::vector<ProfileView> p;
  for (int r = 0; r < 8; ++r) p.push_back(profile(r, r < 2 ? 0.0079 : 0.007, 0.10, 0.05));
  const Localisation loc = localise(p, groups(), layout({8, 8}));
  EXPECT_TRUE(loc.slow_groups.empty());
  EXPECT_EQ(loc.cause, Cause::kUnknown);

  for (int r = 0; r < 8; ++r) p[static_cast<std::size_t>(r)] = profile(r, r < 2 ? 0.079 : 0.05, 0.10, 0.05);
  const Localisation material = localise(p, groups(), layout({8, 8}));
  ASSERT_EQ(material.slow_groups.size(), 1u);
  EXPECT_EQ(material.slow_groups[0].first, kTp[0]);
  EXPECT_NEAR(material.slow_groups[0].second, 0.079 / 0.05, 1e-9);
  EXPECT_EQ(material.cause, Cause::kCommunication);
}

TEST(Localiser, GroupsWithDifferentCallRatesAreNotCompared) {
  // The same profile, but the suspect group makes twice the calls per second: it does different work, so
  // it is no suspect.
  std::vector<ProfileView> p;
  for (int r = 0; r < 8; ++r) {
    p.push_back(profile(r, 0.10, r == 4 || r == 6 ? 0.30 : 0.10, 0.05));
    if (r == 4 || r == 6) p.back().group_rate[kDp[2]] = 4;
  }
  const Localisation loc = localise(p, groups(), layout({8, 8}));
  EXPECT_TRUE(loc.slow_groups.empty());
  EXPECT_EQ(loc.cause, Cause::kUnknown);
}

TEST(Localiser, GroupsMakingTheSameCallsPerIterationAreComparedWhateverTheWindowsEdges) {
  // The suspect group's members counted 2.05 calls per second in the window, its peers 1.95: one call per
  // 500 ms iteration either way (a window's edges move a count by a call), so they are compared and the
  // slow one is a suspect. (In 10 % rate buckets the two fell apart: 7 and 8.)
  std::vector<ProfileView> p;
  for (int r = 0; r < 8; ++r) {
    p.push_back(profile(r, 0.10, r == 4 || r == 6 ? 0.30 : 0.10, 0.05));
    for (auto& [gid, rate] : p.back().group_rate) {
      if (rate == 2) rate = r == 4 || r == 6 ? 2.05 : 1.95;
    }
  }
  const Localisation loc = localise(p, groups(), layout({8, 8}));
  ASSERT_EQ(loc.slow_groups.size(), 1u);
  EXPECT_EQ(loc.slow_groups[0].first, kDp[2]);
}

TEST(Localiser, AfterRebalancingTheDpArrivalOrderNamesNobody) {
  // Micro-batches [10, 6]: replica 0 does more work and reaches the DP AllReduce last by design. Its
  // time per pipeline slot equals replica 1's: (500 - 0) / 11 == (500 - 500 * 4 / 11) / 7.
  std::vector<ProfileView> p;
  for (int r = 0; r < 8; ++r) p.push_back(profile(r, 0.10, dp_of(r) == 0 ? 0.0 : 4.0 / 11, 0.05));
  const Localisation loc = localise(p, groups(), layout({10, 6}));
  EXPECT_EQ(loc.culprit, -1);
  EXPECT_EQ(loc.cause, Cause::kUnknown);
  ASSERT_EQ(loc.replica_ms_per_microbatch.size(), 2u);
  EXPECT_NEAR(loc.replica_skew, 1.0, 1e-9);
  // The same profiles with an even split are a straggler finding in the DP groups.
  EXPECT_GE(localise(p, groups(), layout({8, 8})).culprit, 0);
}

TEST(Localiser, ATimePerIterationCountsTheGroupsCallsNotTheOnesTheWindowHappenedToHold) {
  // Micro-batches [10, 6]: replica 1 waits 500 * 4 / 11 ms per iteration in its one DP AllReduce. The window
  // was three iterations (1.5 s) and held only two of those waits: 1.33 calls/s, share 2 * 181.8 / 1500. By
  // the share its wait read 121.2 ms and its time per pipeline slot (500 - 121.2) / 7 = 54.1 against replica
  // 0's 500 / 11 = 45.5, a 1.19x straggler; one call per iteration at 136.4 ms a call reads it as it is.
  const double wait_ms = 500.0 * 4 / 11, rate = 2 / 1.5, share = 2 * wait_ms / 1500;
  std::vector<ProfileView> p;
  for (int r = 0; r < 8; ++r) {
    p.push_back(profile(r, 0.10, dp_of(r) == 0 ? 0.0 : share, 0.05));
    p.back().iterations = 3;
    p.back().group_rate[kDp[tp_of(r) + 2 * pp_of(r)]] = rate;
  }
  Localisation loc = localise(p, groups(), layout({10, 6}));
  ASSERT_EQ(loc.replica_ms_per_microbatch.size(), 2u);
  EXPECT_NEAR(loc.replica_ms_per_microbatch[0], 500.0 / 11, 1e-9);
  EXPECT_NEAR(loc.replica_ms_per_microbatch[1], 500.0 / 11, 1e-9);
  EXPECT_NEAR(loc.replica_skew, 1.0, 1e-9);
  // Each rank's compute per micro-batch is the iteration less its NCCL time per iteration the same way.
  ASSERT_EQ(loc.compute_ms_per_microbatch.size(), 8u);
  EXPECT_NEAR(loc.compute_ms_per_microbatch[2], (500.0 - 50 - wait_ms - 25) / 6, 1e-9);
  EXPECT_NEAR(loc.compute_ms_per_microbatch[0], (500.0 - 50 - 0 - 25) / 10, 1e-9);
  // The straggler policy sees the same times: replica 1's ranks wait longer in the DP groups, none is late
  // by design (DP groups do not vote under an uneven split) and the TP/PP groups are even: no culprit.
  EXPECT_EQ(loc.culprit, -1);

  // A group called less than every other iteration (0.6 calls/s at 500 ms: 0.3 per iteration) keeps its
  // share of the window: (500 - 0.2424 * 500) / 7.
  for (ProfileView& v : p) v.group_rate[kDp[tp_of(v.rank) + 2 * pp_of(v.rank)]] = 0.6;
  loc = localise(p, groups(), layout({10, 6}));
  ASSERT_EQ(loc.replica_ms_per_microbatch.size(), 2u);
  EXPECT_NEAR(loc.replica_ms_per_microbatch[1], (500 - share * 500) / 7, 1e-9);
}

TEST(Localiser, UnderAPlacementTheDpGroupsAndReplicasAreThePlacementsNotTheLaunchOrders) {
  // An S3 placement swapped the stages of replica 0's TP groups: launch ranks 0,1 now hold stage 1, launch
  // ranks 4,5 stage 0. So the DP groups are {2,4} {3,5} {0,6} {1,7}, not {0,2} {1,3} {4,6} {5,7}. With
  // micro-batches [10, 6] replica 0 reaches the DP AllReduce last by design, as without the placement.
  JobLayout l = layout({10, 6});
  for (int r = 0; r < 8; ++r) {
    RankCoords c = kShape.coords(r);
    if (dp_of(r) == 0) c.pp = 1 - c.pp;
    l.placement.push_back({r, c.tp, c.dp, c.pp});
  }
  ASSERT_EQ(placement_error(l, l.placement), "");
  const auto role = [&](int r) { return l.placement[static_cast<std::size_t>(r)]; };
  std::vector<GroupMembers> g;
  std::map<std::pair<int, int>, std::vector<int>> tp, dp, pp;
  for (int r = 0; r < 8; ++r) {
    tp[{role(r).dp, role(r).pp}].push_back(r);
    dp[{role(r).tp, role(r).pp}].push_back(r);
    pp[{role(r).tp, role(r).dp}].push_back(r);
  }
  std::uint64_t id = 0x100;
  std::map<int, std::uint64_t> tp_of_rank, dp_of_rank, pp_of_rank;
  const auto add = [&](const std::map<std::pair<int, int>, std::vector<int>>& m, std::map<int, std::uint64_t>& of,
                       const char* sig) {
    for (const auto& [key, members] : m) {
      g.push_back({++id, members, sig});
      for (int r : members) of[r] = id;
    }
  };
  add(tp, tp_of_rank, "2|AllReduce");
  add(dp, dp_of_rank, "2|AllReduce");
  add(pp, pp_of_rank, "2|Recv|Send");
  std::vector<ProfileView> p;
  for (int r = 0; r < 8; ++r) {
    ProfileView v;
    v.rank = r;
    v.node = r / 4;
    v.iterations = 10;
    v.iter_ms = 500;
    const double dp_share = role(r).dp == 0 ? 0.0 : 4.0 / 11;
    v.comm_share = 0.10 + dp_share + 0.05;
    v.group_share[tp_of_rank[r]] = 0.10;
    v.group_share[dp_of_rank[r]] = dp_share;
    v.group_share[pp_of_rank[r]] = 0.05;
    v.group_rate[tp_of_rank[r]] = 80;
    v.group_rate[dp_of_rank[r]] = 2;
    v.group_rate[pp_of_rank[r]] = 32;
    p.push_back(v);
  }
  const Localisation loc = localise(p, g, l);
  EXPECT_EQ(loc.culprit, -1);
  EXPECT_EQ(loc.cause, Cause::kUnknown);
  ASSERT_EQ(loc.replica_ms_per_microbatch.size(), 2u);
  EXPECT_NEAR(loc.replica_ms_per_microbatch[0], 500.0 / 11, 1e-9);
  EXPECT_NEAR(loc.replica_ms_per_microbatch[1], 500.0 / 11, 1e-9);
  // Read in the launch order (the layout naming no placement), the DP groups vote and replica 0's ranks,
  // late by design, are named; that was the master's reading before the placement was taken into account.
  JobLayout launch_order = l;
  launch_order.placement.clear();
  EXPECT_GE(localise(p, g, launch_order).culprit, 0);
}

TEST(Localiser, WithoutEveryRankOrDeviceTimingThereAreNoReplicaTimes) {
  std::vector<ProfileView> p;
  for (int r = 0; r < 8; ++r) p.push_back(profile(r, 0.10, 0.10, 0.05));
  p[5].device_timing = false;
  const Localisation loc = localise(p, groups(), layout({8, 8}));
  EXPECT_EQ(loc.ranks_profiled, 7);
  EXPECT_TRUE(loc.replica_ms_per_microbatch.empty());
  EXPECT_EQ(loc.culprit, -1);
  EXPECT_EQ(localise(p, groups(), std::nullopt).culprit, -1);
}

TEST(Localiser, ProfileViewReadsTheAgentsEventAndRejectsMalformedGroups) {
  Event e;
  e.type = event_type::kProfile;
  e.rank = 5;
  e.node = 1;
  e.detail = {{"iterations", 12}, {"iter_ms", 431.5}, {"comm_share", 0.25}, {"status", "active"},
              {"groups", {{group_id_hex(0xabc), {{"share", 0.1}, {"calls_per_s", 4.0}}}}}};
  const auto v = profile_view(e);
  ASSERT_TRUE(v);
  EXPECT_EQ(v->rank, 5);
  EXPECT_EQ(v->node, 1);
  EXPECT_EQ(v->iterations, 12);
  EXPECT_DOUBLE_EQ(v->iter_ms, 431.5);
  EXPECT_DOUBLE_EQ(v->group_share.at(0xabc), 0.1);
  EXPECT_DOUBLE_EQ(v->group_rate.at(0xabc), 4.0);
  EXPECT_TRUE(v->device_timing);

  e.detail["status"] = "unavailable";
  EXPECT_FALSE(profile_view(e)->device_timing);
  e.detail["groups"] = {{"not-hex", {{"share", 0.1}}}};
  EXPECT_FALSE(profile_view(e));
  e.detail["groups"] = {{"00ab", {{"share", "x"}}}};
  EXPECT_FALSE(profile_view(e));
  e.detail["iter_ms"] = "slow";
  EXPECT_FALSE(profile_view(e));
  e.type = event_type::kSlowdown;
  EXPECT_FALSE(profile_view(e));
}

}  // namespace
}  // namespace greyhound::master

namespace greyhound::master {
namespace {

TEST(Localiser, AgainstAHealthyBaselineALinkEveryComparableGroupCrossesIsFound) {
  // Healthy: every DP group's members spend 0.02 of the iteration inside it.
  std::vector<ProfileView> healthy;
  for (int r = 0; r < 8; ++r) healthy.push_back(profile(r, 0.10, 0.02, 0.05, 400));
  const auto base = group_baseline(healthy, groups());
  ASSERT_TRUE(base);
  EXPECT_EQ(base->ranks, 8);
  EXPECT_NEAR(base->step_ms, 400, 1e-9);
  EXPECT_NEAR(base->least_ms.at(kDp[0]), 8, 1e-9);

  // Now both DP groups of stage 0 ({0,2}, {1,3}) cross a congested link: their transfers take 0.3 of a
  // 600 ms iteration (180 ms, was 8). Stage 1's DP groups make more calls (as the last stage does in the
  // simulated job), so the two groups of stage 0 are only comparable with each other: alike, comparing them
  // finds nothing; the baseline does. Rank 2 sits on another node than rank 0.
  std::vector<ProfileView> slow;
  for (int r = 0; r < 8; ++r) {
    slow.push_back(profile(r, 0.10, pp_of(r) == 0 ? 0.30 : 0.02, 0.05, 600));
    if (pp_of(r) == 1) slow.back().group_rate[kDp[tp_of(r) + 2]] = 5;
  }
  for (auto& p : slow) p.node = dp_of(p.rank) + 2 * pp_of(p.rank);  // nodes of 2 GPUs: {0,1} {2,3} {4,5} {6,7}
  const Localisation without = localise(slow, groups(), layout({8, 8}));
  EXPECT_EQ(without.cause, Cause::kUnknown);
  const Localisation with = localise(slow, groups(), layout({8, 8}), &*base);
  EXPECT_EQ(with.cause, Cause::kCommunication);
  ASSERT_EQ(with.slow_groups.size(), 2u);
  EXPECT_NEAR(with.slow_groups[0].second, 180.0 / 8.0, 1e-9);
  ASSERT_EQ(with.suspect_links.size(), 1u);
  EXPECT_EQ(with.suspect_links[0].node_a, 0);
  EXPECT_EQ(with.suspect_links[0].node_b, 1);
  // The typical DP transfer at the links' healthy speed (what the S3 cost model derives the gradient volume
  // from, then slows on the suspect link): the suspects count at their baseline's 8 ms, stage 1's at their
  // own 12 (3 calls of 4 ms): median 10, not the 96 of their own times (which counted the congestion twice).
  EXPECT_NEAR(with.dp_transfer_ms, 10, 1e-9);
  EXPECT_NEAR(without.dp_transfer_ms, 96, 1e-9);  // no suspect: their own times

  // After a placement switch and its revert the same groups are new communicators (other ids, the same
  // members and work): the baseline still describes them.
  std::vector<GroupMembers> renewed = groups();
  for (auto& g : renewed) g.group += 0x100;
  for (auto& p : slow) {
    std::map<std::uint64_t, double> share, rate;
    for (const auto& [gid, v] : p.group_share) share[gid + 0x100] = v;
    for (const auto& [gid, v] : p.group_rate) rate[gid + 0x100] = v;
    p.group_share = share;
    p.group_rate = rate;
  }
  const Localisation later = localise(slow, renewed, layout({8, 8}), &*base);
  EXPECT_EQ(later.cause, Cause::kCommunication);
  ASSERT_EQ(later.suspect_links.size(), 1u);
  EXPECT_EQ(later.suspect_links[0].node_a, 0);
  EXPECT_EQ(later.suspect_links[0].node_b, 1);
  GroupMembers other = renewed[4];
  other.signature = "2|AllGather";  // the same members doing other work: not the same group
  EXPECT_FALSE(base->of(other));

  // Without iterations in the window there is no baseline (times per iteration need them).
  healthy[4].iterations = 0;
  EXPECT_FALSE(group_baseline(healthy, groups()));
}

TEST(Localiser, AStragglersWaitingPeersDoNotMakeTheirGroupsSuspectAgainstTheBaseline) {
  std::vector<ProfileView> healthy;
  for (int r = 0; r < 8; ++r) healthy.push_back(profile(r, 0.10, 0.10, 0.05, 450));
  const auto base = group_baseline(healthy, groups());
  ASSERT_TRUE(base);
  // The slow-GPU profile of NamesTheSlowGpuNotTheRanksThatWaitForIt: peers wait longer, but every group's
  // least member time stays within the baseline's growth bound.
  const std::vector<ProfileView> p = slow_gpu_profiles();
  const Localisation loc = localise(p, groups(), layout({8, 8}), &*base);
  EXPECT_EQ(loc.culprit, 3);
  EXPECT_EQ(loc.cause, Cause::kComputation);
  EXPECT_TRUE(loc.slow_groups.empty());
}

}  // namespace
}  // namespace greyhound::master
