// Comparable clusters (the paper's Profiling stage): communication groups that move the same amount of data
// (same size and the same calls per iteration, e.g. all DP gradient AllReduce groups under even PP splits)
// should take the same time; a group whose time exceeds its cluster's median by more than 10 % is a suspect
// (a congested link on its ring, or a slow member). Pure.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "greyhound/thresholds.h"

namespace greyhound::analysis {

struct GroupTiming {
  std::uint64_t group = 0;
  std::string signature;    // what the group moves per iteration, e.g. "2:AllReduce:32768x1"; equal = comparable
  double ms_per_iter = 0;   // the group's time in collectives per iteration (mean over its members)
};

struct ClusterFinding {
  std::string signature;
  std::size_t groups = 0;
  double median_ms = 0;
  std::vector<std::uint64_t> slow_groups;  // time > median x (1 + threshold), slowest first
  std::vector<double> slow_ratios;         // their time / median
};

// One finding per signature shared by at least two groups (a lone group has nothing to compare with).
std::vector<ClusterFinding> comparable_clusters(const std::vector<GroupTiming>& groups, double threshold = kPeerExcess);

}  // namespace greyhound::analysis
