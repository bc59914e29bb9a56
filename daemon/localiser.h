// The master's GlobalAnalyzer, pause-free: from one profiling window of every rank (device time inside each
// communication group, iteration time, compute time), name the culprit of a slowdown without stopping the
// job. Pure: values in (profiles, group membership, the job's layout), a Localisation out.
//
//  1. Rank-straggler policy (src/analysis/rank_straggler.h) in every group of two or more ranks: the rank
//     that waits least inside a synchronising collective arrived last. The finding with the highest score
//     (warning or critical) names the culprit; COMPUTE_STRAGGLER when its extra compute explains the gap.
//  2. Comparable clusters (src/analysis/comparable_clusters.h): groups that move the same data per
//     iteration should take the same time; one > 10 % above its cluster's median is a suspect.
//  3. Cause: computation when a compute straggler is named; communication when suspect groups exist and no
//     straggler explains them; unknown otherwise.
//  4. With the job's layout: each DP replica's own time per pipeline slot, (iteration - time inside the DP
//     gradient collective) / (micro-batches + stages - 1), the input of the S2 solver; the replica of the
//     culprit.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/messages.h"

namespace greyhound::master {

struct ProfileView {  // one rank's "profile" event
  int rank = -1;
  int node = -1;
  int iterations = 0;                           // iterations completed in the window (0: iter_ms unknown)
  double iter_ms = 0;
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
};

struct Localisation {
  std::string cause = "unknown";  // "computation", "communication", "unknown"
  int culprit = -1;
  int culprit_node = -1;
  std::string kind = "NONE";      // the straggler policy's kind for the culprit
  std::string severity = "none";
  double score = 0;
  std::uint64_t group = 0;        // where the culprit was found
  std::vector<std::pair<std::uint64_t, double>> slow_groups;  // suspect groups and their time / cluster median
  int ranks_profiled = 0;
  // With a layout: per DP replica, own time per micro-batch (ms), and the culprit's replica.
  std::vector<double> replica_ms_per_microbatch;
  int culprit_replica = -1;
  double replica_skew = 1.0;      // slowest / median replica time per micro-batch
  nlohmann::json to_json() const;
};

Localisation localise(const std::vector<ProfileView>& profiles, const std::vector<GroupMembers>& groups,
                      const std::optional<JobLayout>& layout);

}  // namespace greyhound::master
