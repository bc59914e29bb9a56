// The master's GlobalAnalyzer, pause-free: from one profiling window of every rank (device time inside each
// communication group, iteration time, compute time), name the culprit of a slowdown without stopping the
// job. Pure: values in (profiles, group membership, the job's layout), a Localisation out. Every step works
// with each rank's time per iteration in each group: its time per call in the window (share / rate) times the
// group's calls per iteration (a window of a few iterations holds a whole number of a once-per-iteration
// call, so its share of the window alone reads 2/3 or 3/3 of the wait by the window's phase).
//
//  1. Rank-straggler policy (src/analysis/rank_straggler.h) in every group of two or more ranks: the rank
//     that waits least inside a synchronising collective arrived last. Findings (warning or critical) vote
//     for their culprit with their score; the rank with the largest sum is the culprit (a slow rank is late
//     in all its groups, a rank waiting for it in few), its best finding gives kind, severity and group;
//     COMPUTE_STRAGGLER when its extra compute explains the gap. Under an uneven micro-batch split the DP
//     gradient groups do not vote (their members do unequal work by design).
//  2. Comparable clusters (src/analysis/comparable_clusters.h): groups that move the same data per
//     iteration should take the same time; one > 10 % above its cluster's median is a suspect.
//     With a healthy baseline (group_baseline), also every group whose least member time per iteration
//     grew by more than half over its baseline (and by more than 2 % of the iteration): waiting removed,
//     what remains slower is the transfer.
//  3. Cause: computation when a compute straggler is named; host when the culprit is the late arrival in
//     every group of its with a finding while the links its groups cross are at their reference (judged
//     by the other groups crossing them, against the healthy baseline, else their comparable groups): a
//     contended CPU delays its launches, not its GPU or links. Either
//     way its own groups (slow because its peers wait for it) are then no suspects. Communication when
//     suspect groups remain; unknown otherwise. Suspect links: the inter-node hops of the remaining suspect
//     groups' rings.
//  4. With the job's layout: each DP replica's own time per pipeline slot, (iteration - time inside the DP
//     gradient collective) / (micro-batches + stages - 1), the input of the S2 solver; the replica of the
//     culprit.
//  5. The pace spread: whether the job ran at one pace through the window (its iterations' slowest over
//     fastest). The controller opens no fail-slow from an unsteady window (Localisation::unsteady), the
//     first of a row.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "greyhound/validate/pass_plan.h"
#include "greyhound/vocabulary.h"
#include "store/messages.h"

namespace greyhound::master {

struct ProfileView {  // one rank's "profile" event
  int rank = -1;
  int node = -1;
  int iterations = 0;                           // iterations completed in the window (0: iter_ms unknown)
  double iter_ms = 0;
  double iter_ms_min = 0, iter_ms_max = 0;      // the least and greatest of them (0: not reported)
  double comm_share = 0;                        // share of the window inside NCCL calls
  std::map<std::uint64_t, double> group_share;  // share of the window inside each group's calls
  std::map<std::uint64_t, double> group_rate;   // each group's calls per second
  bool device_timing = true;                    // false: the rank had no CUDA runtime to time with
};
std::optional<ProfileView> profile_view(const Event& e);  // from a kProfile event; nullopt when malformed

struct GroupMembers {
  std::uint64_t group = 0;
  std::vector<int> members;  // global ranks in group-rank order
  std::string signature;     // what it moves per iteration (equal: comparable)
  std::vector<int> nccl_order = {};  // the members in NCCL's ring order, from a member's graph dump; empty: not known
  std::vector<int> nodes = {};       // the node of each member, in group-rank order; empty: not all known
  // NCCL's trees, from the same dump's tree graph: the members in the order of the chains through their nodes
  // (empty: not known, the ring's order stands in) and the graph's pattern (the balanced one when not known).
  std::vector<int> nccl_tree_order = {};
  validate::NcclTreePattern nccl_tree_pattern = validate::NcclTreePattern::kBalanced;
};

// What a group's calls move (from the agents' op counts): the call that moves most of its bytes
// ("AllReduce", ...) and the mean bytes per data-moving call.
struct GroupTraffic {
  std::string op;
  double bytes_per_call = 0;
};

struct SuspectLink {
  int node_a = 0, node_b = 0;  // node_a < node_b
  double ratio = 1;            // the slowest suspect group crossing it: time / its cluster's median
};

// Iterations of one window that differ by more than this (slowest / fastest) are not one state of the job.
// A steady simulated job's spread inside a window is below 1.002 (measured, tests/python/master_http_test.py's
// job); the window a slow GPU at 1/1.5 recovered in, under an S2 split, 9.4 %.
inline constexpr double kSteadyPaceSpread = 1.05;

struct Localisation {
  Cause cause = Cause::kUnknown;
  int culprit = -1;
  int culprit_node = -1;
  std::string kind = "NONE";      // the straggler policy's kind for the culprit
  std::string severity = "none";
  double score = 0;
  std::uint64_t group = 0;        // where the culprit was found
  std::vector<std::pair<std::uint64_t, double>> slow_groups;  // suspect groups and their time / cluster median
  std::vector<SuspectLink> suspect_links;  // inter-node links the suspect groups' rings cross
  // Every inter-node link some fully profiled group with a reference (baseline, else comparable groups)
  // crosses, with the largest ratio of such a group's transfer to its reference: how a link looks even when
  // what crosses it is too little to make a suspect. A link absent here was not observed.
  std::vector<SuspectLink> link_readings;
  // With a layout: the typical DP gradient sync and PP transfer time per iteration at the links' healthy
  // speed (median over the groups of the least time of a member, the one that waited least: close to the
  // transfer itself; a suspect group's at its reference). 0: unknown.
  double dp_transfer_ms = 0, pp_transfer_ms = 0;
  int ranks_profiled = 0;
  double step_ms = 0;             // the job's iteration in the window (median of the ranks'); 0: not measured
  // With a layout: per rank, its time outside NCCL per micro-batch of its replica (its own compute and host
  // work: a rank waiting for another waits inside NCCL); 0 where unknown. Compared within a pipeline stage.
  std::vector<double> compute_ms_per_microbatch;
  // With a layout: per DP replica, own time per micro-batch (ms), and the culprit's replica.
  std::vector<double> replica_ms_per_microbatch;
  int culprit_replica = -1;
  double replica_skew = 1.0;      // slowest / median replica time per micro-batch
  // 5. How far the job's pace moved inside the window: per rank, its slowest iteration that ended in the
  // window over its fastest; the largest over the ranks (1: steady, or too few iterations to tell).
  double pace_spread = 1.0;
  // A window whose pace moved more than kSteadyPaceSpread shows two states of the job at once (a slow GPU
  // that recovered in it, a fault that began): who waits for whom inside a group changed in it, so each
  // member's total carries waiting and a group's least member time overstates its transfer.
  bool unsteady() const { return pace_spread > kSteadyPaceSpread; }
  LocalisationReport report() const;  // the "localised" event's detail
};

// A healthy profile of the same job: per group, the least time of a member per iteration (the member that
// waited least: close to the transfer itself, whoever was late). Comparing with it finds a congested link
// even when every comparable group crosses it (all DP rings of a stage on one slow link).
struct GroupBaseline {
  std::map<std::uint64_t, double> least_ms;  // per iteration
  // The same by what a group is (its members and what it moves): a placement switch and its revert make new
  // communicators of the same members doing the same work, which the baseline still describes.
  std::map<std::string, double> least_ms_by_kind;
  double step_ms = 0;
  int ranks = 0;
  // A group's baseline time per iteration: by its id, else by its members and signature; nullopt when none.
  std::optional<double> of(const GroupMembers& g) const;
};
// nullopt unless every profiled rank saw iterations in the window (times per iteration need them).
std::optional<GroupBaseline> group_baseline(const std::vector<ProfileView>& profiles,
                                            const std::vector<GroupMembers>& groups);

// One communication group as a profile shows it (the master's /metrics).
struct GroupTiming {
  std::uint64_t group = 0;
  std::string op;               // the call that moves most of its bytes
  int ranks = 0;
  double seconds_per_call = 0;  // of the member that waited least: close to the transfer itself
  double bytes_per_call = 0;
  double bus_gb_per_s = 0;      // NCCL's bus bandwidth, bytes x bus factor / time (0: unknown)
};
// Every group with a member that made calls in the window: its least member's device time per call (share
// of the window / calls per second), and the bus bandwidth that means for its op and size.
std::vector<GroupTiming> group_timings(const std::vector<ProfileView>& profiles, const std::vector<GroupMembers>& groups,
                                       const std::map<std::uint64_t, GroupTraffic>& traffic);

Localisation localise(const std::vector<ProfileView>& profiles, const std::vector<GroupMembers>& groups,
                      const std::optional<JobLayout>& layout, const GroupBaseline* baseline = nullptr);

}  // namespace greyhound::master
