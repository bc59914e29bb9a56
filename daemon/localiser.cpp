#include "daemon/localiser.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <set>

#include "common/record_json.h"
#include "greyhound/analysis/comparable_clusters.h"
#include "greyhound/analysis/rank_straggler.h"
#include "greyhound/analysis/robust_stats.h"

namespace greyhound::master {
namespace {

}  // namespace

std::optional<ProfileView> profile_view(const Event& e) {
  if (e.type != event_type::kProfile || e.rank < 0 || !e.detail.is_object()) return std::nullopt;
  try {
    ProfileView v;
    v.rank = e.rank;
    v.node = e.node;
    v.iterations = e.detail.value("iterations", 0);
    v.iter_ms = e.detail.value("iter_ms", 0.0);
    v.comm_share = e.detail.value("comm_share", 0.0);
    v.device_timing = e.detail.value("status", std::string("active")) != "unavailable";
    if (e.detail.contains("groups") && e.detail["groups"].is_object()) {
      for (const auto& [hex, g] : e.detail["groups"].items()) {
        std::uint64_t gid = 0;
        if (!parse_group_id_hex(hex, &gid) || !g.is_object() || !g.contains("share") || !g["share"].is_number()) {
          return std::nullopt;
        }
        v.group_share[gid] = g["share"].get<double>();
        v.group_rate[gid] = g.value("calls_per_s", 0.0);
      }
    }
    return v;
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
}

nlohmann::json Localisation::to_json() const {
  nlohmann::json slow = nlohmann::json::array();
  for (const auto& [g, r] : slow_groups) slow.push_back({{"group", group_id_hex(g)}, {"ratio", r}});
  nlohmann::json j = {{"cause", cause},       {"culprit", culprit}, {"culprit_node", culprit_node},
                      {"kind", kind},         {"severity", severity}, {"score", score},
                      {"group", group_id_hex(group)}, {"slow_groups", slow}, {"ranks_profiled", ranks_profiled}};
  if (!replica_ms_per_microbatch.empty()) {
    j["replica_ms_per_microbatch"] = replica_ms_per_microbatch;
    j["culprit_replica"] = culprit_replica;
    j["replica_skew"] = replica_skew;
  }
  return j;
}

Localisation localise(const std::vector<ProfileView>& profiles, const std::vector<GroupMembers>& groups,
                      const std::optional<JobLayout>& layout) {
  Localisation out;
  std::map<int, const ProfileView*> by_rank;
  std::vector<double> iter_times, scratch;
  for (const ProfileView& p : profiles) {
    if (!p.device_timing) continue;
    by_rank[p.rank] = &p;
    if (p.iterations > 0 && p.iter_ms > 0) iter_times.push_back(p.iter_ms);
  }
  out.ranks_profiled = static_cast<int>(by_rank.size());
  // The ranks of a synchronous job share one iteration time: the median of those that measured it.
  // Shares of the window become times per iteration with it; without it, per unit of time (the policy's
  // score is a ratio to the step either way).
  const double step_ms = iter_times.empty() ? 1.0 : analysis::median(iter_times, scratch);

  // DP gradient groups (with a layout): under an uneven micro-batch split their members do unequal work, so
  // the one that arrives last is not a straggler; the replicas' times per micro-batch (4.) judge them then.
  std::set<std::uint64_t> dp_groups;
  bool uneven = false;
  if (layout) {
    uneven = std::adjacent_find(layout->microbatches.begin(), layout->microbatches.end(), std::not_equal_to<>()) !=
             layout->microbatches.end();
    const int T = layout->tp, D = layout->dp, P = layout->pp;
    for (const GroupMembers& g : groups) {
      const std::set<int> m(g.members.begin(), g.members.end());
      for (int tp = 0; tp < T && D > 1; ++tp) {
        for (int pp = 0; pp < P; ++pp) {
          std::set<int> want;
          for (int d = 0; d < D; ++d) want.insert(tp + T * (d + D * pp));
          if (m == want) dp_groups.insert(g.group);
        }
      }
    }
  }

  // 1. The straggler policy in every group; 2. the group's time for the comparable clusters.
  analysis::StragglerFinding best;
  best.kind = analysis::StragglerKind::kNone;
  std::vector<analysis::GroupTiming> timings;
  for (const GroupMembers& g : groups) {
    if (g.members.size() < 2) continue;
    std::vector<analysis::RankWindow> windows;
    double sum = 0;
    int n = 0;
    for (int r : g.members) {
      analysis::RankWindow w;
      w.rank = r;
      auto it = by_rank.find(r);
      if (it != by_rank.end()) {
        const ProfileView& p = *it->second;
        w.iterations = std::max(p.iterations, 2);  // the window holds several iterations by construction
        w.step_ms = step_ms;
        w.compute_ms = step_ms * (1.0 - p.comm_share);
        auto gm = p.group_share.find(g.group);
        if (gm != p.group_share.end()) {
          w.visible_ms = step_ms * gm->second;
          sum += *w.visible_ms;
          ++n;
        }
      }
      windows.push_back(w);
    }
    const analysis::StragglerFinding f = analysis::rank_straggler(windows);
    const bool comparable_work = !(uneven && dp_groups.count(g.group) != 0);
    if (comparable_work && f.severity != analysis::StragglerSeverity::kNone && f.score > best.score) {
      best = f;
      out.group = g.group;
    }
    // Comparable only with the same calls at the same rate (an uneven micro-batch split changes how many
    // Send/Recv a pipeline makes): the rate, in 10 % buckets, joins the signature.
    if (n == static_cast<int>(g.members.size())) {
      double rate = 0;
      if (auto it = by_rank.find(g.members.front()); it != by_rank.end()) {
        if (auto r = it->second->group_rate.find(g.group); r != it->second->group_rate.end()) rate = r->second;
      }
      const long bucket = rate > 0 ? std::lround(std::log(rate) / std::log(1.1)) : 0;
      timings.push_back({g.group, g.signature + "@" + std::to_string(bucket), sum / n});
    }
  }
  for (const auto& c : analysis::comparable_clusters(timings)) {
    for (std::size_t i = 0; i < c.slow_groups.size(); ++i) out.slow_groups.emplace_back(c.slow_groups[i], c.slow_ratios[i]);
  }
  std::sort(out.slow_groups.begin(), out.slow_groups.end(),
            [](const auto& a, const auto& b) { return a.second > b.second; });

  // 3. The cause.
  if (best.severity != analysis::StragglerSeverity::kNone) {
    out.culprit = best.culprit;
    out.kind = analysis::straggler_kind_name(best.kind);
    out.severity = analysis::straggler_severity_name(best.severity);
    out.score = best.score;
    if (auto it = by_rank.find(best.culprit); it != by_rank.end()) out.culprit_node = it->second->node;
  }
  if (best.kind == analysis::StragglerKind::kComputeStraggler) {
    out.cause = "computation";
  } else if (!out.slow_groups.empty()) {
    out.cause = "communication";
  }

  // 4. Per DP replica, with the layout: own time per micro-batch.
  if (layout && layout->world == static_cast<int>(by_rank.size())) {
    const int T = layout->tp, D = layout->dp;
    // The DP group of a rank: the group whose members are exactly the ranks with its tp and pp.
    std::map<std::set<int>, std::uint64_t> group_of_members;
    for (const GroupMembers& g : groups) group_of_members[std::set<int>(g.members.begin(), g.members.end())] = g.group;
    std::vector<std::vector<double>> own(static_cast<std::size_t>(D));
    for (const auto& [r, p] : by_rank) {
      const int tp = r % T, dp = (r / T) % D, pp = r / (T * D);
      std::set<int> dp_members;
      for (int d = 0; d < D; ++d) dp_members.insert(tp + T * (d + D * pp));
      double wait = 0;
      if (D > 1) {
        auto g = group_of_members.find(dp_members);
        if (g == group_of_members.end()) return out;  // layout and groups disagree: no replica times
        auto gm = p->group_share.find(g->second);
        wait = gm == p->group_share.end() ? 0 : gm->second * step_ms;
      }
      own[static_cast<std::size_t>(dp)].push_back(std::max(0.0, step_ms - wait));
    }
    // A 1F1B pipeline of P stages runs m micro-batches in about m + P - 1 slots of its slowest stage: the
    // replica's time per slot is what compares across replicas whatever their m.
    for (int d = 0; d < D; ++d) {
      const int m = d < static_cast<int>(layout->microbatches.size()) ? layout->microbatches[static_cast<std::size_t>(d)] : 1;
      out.replica_ms_per_microbatch.push_back(analysis::median(own[static_cast<std::size_t>(d)], scratch) /
                                              static_cast<double>(std::max(m, 1) + layout->pp - 1));
    }
    const auto slowest = std::max_element(out.replica_ms_per_microbatch.begin(), out.replica_ms_per_microbatch.end());
    const double med = analysis::median(out.replica_ms_per_microbatch, scratch);
    out.replica_skew = med > 0 ? *slowest / med : 1.0;
    out.culprit_replica = out.culprit >= 0 ? (out.culprit / T) % D
                                           : static_cast<int>(slowest - out.replica_ms_per_microbatch.begin());
  }
  return out;
}

}  // namespace greyhound::master
