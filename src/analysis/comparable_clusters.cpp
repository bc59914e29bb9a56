#include "greyhound/analysis/comparable_clusters.h"

#include <algorithm>
#include <map>
#include <numeric>

#include "greyhound/analysis/robust_stats.h"

namespace greyhound::analysis {

std::vector<ClusterFinding> comparable_clusters(const std::vector<GroupTiming>& groups, double threshold) {
  std::map<std::string, std::vector<const GroupTiming*>> by_signature;
  for (const GroupTiming& g : groups) by_signature[g.signature].push_back(&g);
  std::vector<ClusterFinding> out;
  std::vector<double> times, scratch;
  for (const auto& [sig, members] : by_signature) {
    if (members.size() < 2) continue;
    times.clear();
    for (const GroupTiming* g : members) times.push_back(g->ms_per_iter);
    ClusterFinding f;
    f.signature = sig;
    f.groups = members.size();
    f.median_ms = median(times, scratch);
    std::vector<const GroupTiming*> slow;
    for (const GroupTiming* g : members) {
      if (f.median_ms > 0 && g->ms_per_iter > f.median_ms * (1.0 + threshold)) slow.push_back(g);
    }
    std::sort(slow.begin(), slow.end(), [](const GroupTiming* a, const GroupTiming* b) {
      return a->ms_per_iter > b->ms_per_iter || (a->ms_per_iter == b->ms_per_iter && a->group < b->group);
    });
    for (const GroupTiming* g : slow) {
      f.slow_groups.push_back(g->group);
      f.slow_ratios.push_back(g->ms_per_iter / f.median_ms);
    }
    out.push_back(std::move(f));
  }
  return out;
}

}  // namespace greyhound::analysis
