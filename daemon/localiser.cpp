#include "daemon/localiser.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <set>

#include "greyhound/analysis/comparable_clusters.h"
#include "greyhound/analysis/rank_straggler.h"
#include "greyhound/analysis/robust_stats.h"
#include "greyhound/ops.h"
#include "greyhound/parallel_shape.h"
#include "greyhound/vocabulary.h"

namespace greyhound::master {

constexpr double kBaselineGrowth = 1.5;    // a group's least member time over its healthy baseline
constexpr double kBaselineMinShare = 0.02;  // ... and by more than this share of the iteration (also the least
                                            // excess over its comparable groups that makes a suspect)
constexpr double kRateBucketRatio = 1.1;    // calls-per-second rates within this factor share a signature

std::optional<ProfileView> profile_view(const Event& e) {
  if (e.type != event_type::kProfile || e.rank < 0) return std::nullopt;
  std::string err;
  const auto report = parse_profile_report(e.detail, &err);
  if (!report) return std::nullopt;
  ProfileView v;
  v.rank = e.rank;
  v.node = e.node;
  v.iterations = report->iterations;
  v.iter_ms = report->iter_ms;
  v.iter_ms_min = report->iter_ms_min;
  v.iter_ms_max = report->iter_ms_max;
  v.comm_share = report->comm_share;
  v.device_timing = report->status != "unavailable";
  for (const auto& [gid, g] : report->groups) {
    v.group_share[gid] = g.share;
    v.group_rate[gid] = g.calls_per_s;
  }
  return v;
}

LocalisationReport Localisation::report() const {
  LocalisationReport r;
  r.cause = cause;
  r.culprit = culprit;
  r.culprit_node = culprit_node;
  r.kind = kind;
  r.severity = severity;
  r.score = score;
  r.group = group;
  r.slow_groups = slow_groups;
  for (const auto& l : suspect_links) r.suspect_links.push_back({l.node_a, l.node_b, l.ratio});
  r.dp_transfer_ms = dp_transfer_ms;
  r.pp_transfer_ms = pp_transfer_ms;
  r.ranks_profiled = ranks_profiled;
  r.replica_ms_per_microbatch = replica_ms_per_microbatch;
  r.culprit_replica = culprit_replica;
  r.replica_skew = replica_skew;
  r.pace_spread = pace_spread;
  r.iter_ms = step_ms;
  return r;
}

namespace {

// The ranks of a synchronous job share one iteration time: the median of those that measured it.
double median_step_ms(const std::vector<ProfileView>& profiles) {
  std::vector<double> t, scratch;
  for (const ProfileView& p : profiles) {
    if (p.device_timing && p.iterations > 0 && p.iter_ms > 0) t.push_back(p.iter_ms);
  }
  return t.empty() ? 0.0 : analysis::median(t, scratch);
}

// Each rank's time inside each of its groups per iteration, and inside NCCL per iteration, taken once per
// localisation. A window of a few iterations holds a whole number of a group's calls: one called once per
// iteration (a DP gradient all-reduce) shows two or three of its waits in a window of ~3 iterations, by the
// window's phase, so its share of the window times the iteration reads 2/3 or 3/3 of the wait. Its time per
// call (share / rate) times its calls per iteration (the most any member made per iteration, rounded) does
// not. A group called less than every other iteration, or any group without a measured iteration or rate,
// keeps its share of the window times the iteration.
struct IterationTimes {
  std::map<int, std::map<std::uint64_t, double>> group_ms;  // per rank, per group of its: ms per iteration
  std::map<int, double> comm_ms;                            // per rank: ms inside NCCL per iteration
  std::map<std::uint64_t, long> calls;                      // per group: calls per iteration (0: unknown)
  double of(int rank, std::uint64_t group) const {          // -1: the rank's profile has no time in the group
    const auto r = group_ms.find(rank);
    if (r == group_ms.end()) return -1;
    const auto g = r->second.find(group);
    return g == r->second.end() ? -1 : g->second;
  }
};

IterationTimes iteration_times(const std::map<int, const ProfileView*>& by_rank, const std::vector<GroupMembers>& groups,
                               double step_ms, bool step_measured) {
  IterationTimes out;
  // Per group: its calls per iteration, from its members' rates (0: unknown, or fewer than one in two).
  std::map<std::uint64_t, long>& calls = out.calls;
  if (step_measured) {
    for (const GroupMembers& g : groups) {
      double most = 0;
      for (int r : g.members) {
        const auto it = by_rank.find(r);
        if (it == by_rank.end()) continue;
        if (const auto rate = it->second->group_rate.find(g.group); rate != it->second->group_rate.end()) {
          most = std::max(most, rate->second * step_ms * 1e-3);
        }
      }
      calls[g.group] = std::lround(most);
    }
  }
  for (const auto& [r, p] : by_rank) {
    auto& mine = out.group_ms[r];
    double shares = 0, ms = 0;
    for (const auto& [gid, share] : p->group_share) {
      long k = 0;
      if (step_measured) {
        const auto c = calls.find(gid);
        const auto rate = p->group_rate.find(gid);
        // A group without members known: the rank's own calls per iteration.
        k = c != calls.end() ? c->second
                             : (rate != p->group_rate.end() ? std::lround(rate->second * step_ms * 1e-3) : 0);
        if (k >= 1 && (rate == p->group_rate.end() || !(rate->second > 0))) k = 0;
        if (k >= 1) mine[gid] = share / rate->second * 1e3 * static_cast<double>(k);
      }
      if (k < 1) mine[gid] = share * step_ms;
      shares += share;
      ms += mine[gid];
    }
    // NCCL time outside any reported group (none in practice) stays a share of the window.
    out.comm_ms[r] = ms + std::max(0.0, p->comm_share - shares) * step_ms;
  }
  return out;
}

// Per group with every member profiled: the least member time per iteration.
std::map<std::uint64_t, double> least_member_ms(const std::vector<GroupMembers>& groups, const IterationTimes& times) {
  std::map<std::uint64_t, double> out;
  for (const GroupMembers& g : groups) {
    if (g.members.size() < 2) continue;
    double least = 1e300;
    bool complete = true;
    for (int r : g.members) {
      const double t = times.of(r, g.group);
      if (t < 0) {
        complete = false;
        break;
      }
      least = std::min(least, t);
    }
    if (complete) out[g.group] = least;
  }
  return out;
}

std::map<int, const ProfileView*> usable(const std::vector<ProfileView>& profiles) {
  std::map<int, const ProfileView*> by_rank;
  for (const ProfileView& p : profiles) {
    if (p.device_timing) by_rank[p.rank] = &p;
  }
  return by_rank;
}

}  // namespace

namespace {
// What a group is, whatever its id: its members (sorted) and what it moves per iteration.
std::string group_kind(const GroupMembers& g) {
  std::vector<int> m = g.members;
  std::sort(m.begin(), m.end());
  std::string key;
  for (int r : m) key += std::to_string(r) + ",";
  return key + "|" + g.signature;
}
}  // namespace

std::optional<GroupBaseline> group_baseline(const std::vector<ProfileView>& profiles,
                                            const std::vector<GroupMembers>& groups) {
  const auto by_rank = usable(profiles);
  if (by_rank.empty()) return std::nullopt;
  for (const auto& [r, p] : by_rank) {
    if (p->iterations <= 0 || !(p->iter_ms > 0)) return std::nullopt;
  }
  GroupBaseline b;
  b.step_ms = median_step_ms(profiles);
  b.ranks = static_cast<int>(by_rank.size());
  b.least_ms = least_member_ms(groups, iteration_times(by_rank, groups, b.step_ms, b.step_ms > 0));
  if (b.least_ms.empty()) return std::nullopt;
  for (const GroupMembers& g : groups) {
    if (auto it = b.least_ms.find(g.group); it != b.least_ms.end()) b.least_ms_by_kind[group_kind(g)] = it->second;
  }
  return b;
}

std::optional<double> GroupBaseline::of(const GroupMembers& g) const {
  if (auto it = least_ms.find(g.group); it != least_ms.end()) return it->second;
  if (auto it = least_ms_by_kind.find(group_kind(g)); it != least_ms_by_kind.end()) return it->second;
  return std::nullopt;
}

namespace {

using ByRank = std::map<int, const ProfileView*>;

// Each launch rank's role (tp, dp, pp) under the placement the layout names in force: Megatron's (launch rank
// r holds global rank r's) when it names none, or one that is no placement of its shape. After an S3 switch
// the DP and PP groups, and the replica a rank computes for, follow the placement, not the launch order.
std::vector<RankCoords> rank_roles(const JobLayout& layout) {
  const ParallelShape shape{layout.tp, layout.dp, layout.pp};
  const int n = std::max(0, layout.tp * layout.dp * layout.pp);
  std::vector<RankCoords> out;
  out.reserve(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) out.push_back(shape.coords(r));
  if (!layout.placement.empty() && layout.world == n && placement_error(layout, layout.placement).empty()) {
    for (const PlacementEntry& e : layout.placement) out[static_cast<std::size_t>(e.rank)] = RankCoords{e.tp, e.dp, e.pp};
  }
  return out;
}

// The members of each DP group (same tp and pp) and PP group (same tp and dp) under those roles, sorted.
std::map<std::pair<int, int>, std::vector<int>> role_groups(const std::vector<RankCoords>& roles, bool dp_group) {
  std::map<std::pair<int, int>, std::vector<int>> out;
  for (int r = 0; r < static_cast<int>(roles.size()); ++r) {
    const RankCoords& c = roles[static_cast<std::size_t>(r)];
    out[{c.tp, dp_group ? c.pp : c.dp}].push_back(r);
  }
  return out;
}

// With a layout: which groups are the DP gradient and PP groups, and whether the micro-batch split is uneven.
struct LayoutGroups {
  std::set<std::uint64_t> dp, pp;
  bool uneven = false;
};

LayoutGroups layout_groups(const std::vector<GroupMembers>& groups, const std::optional<JobLayout>& layout,
                           const std::vector<RankCoords>& roles) {
  LayoutGroups out;
  if (!layout) return out;
  out.uneven = std::adjacent_find(layout->microbatches.begin(), layout->microbatches.end(), std::not_equal_to<>()) !=
               layout->microbatches.end();
  // The layout's DP and PP groups as sorted member lists, each group's members looked up among them (once
  // per group: a job of 10,000 ranks has thousands of each).
  const auto sorted = [](std::vector<int> m) {
    std::sort(m.begin(), m.end());
    m.erase(std::unique(m.begin(), m.end()), m.end());
    return m;
  };
  std::set<std::vector<int>> dp_groups, pp_groups;
  if (layout->dp > 1) {
    for (const auto& [key, members] : role_groups(roles, true)) dp_groups.insert(members);
  }
  if (layout->pp > 1) {
    for (const auto& [key, members] : role_groups(roles, false)) pp_groups.insert(members);
  }
  for (const GroupMembers& g : groups) {
    const std::vector<int> m = sorted(g.members);
    if (dp_groups.count(m) != 0) out.dp.insert(g.group);
    if (pp_groups.count(m) != 0) out.pp.insert(g.group);
  }
  return out;
}

// What one pass over the groups learns: the straggler policy's findings by culprit (1.), each fully
// profiled group's time for the comparable clusters (2.), and the least member time of the DP / PP groups.
struct GroupScan {
  struct Named {
    double total = 0;
    analysis::StragglerFinding best;
    std::uint64_t group = 0;
  };
  std::map<int, Named> named;
  std::vector<analysis::GroupTiming> timings;
  std::map<std::uint64_t, const GroupMembers*> by_id;
  std::vector<std::uint64_t> dp, pp;       // the fully profiled DP / PP groups
  std::map<std::uint64_t, int> late;       // per group with a finding (warning or critical): its late arrival
  std::map<std::uint64_t, double> least;   // per fully profiled group: its least member time per iteration
  std::map<std::uint64_t, std::string> signature;  // ... and what it compares with (signature@rate bucket)
  std::map<std::string, std::vector<double>> least_by_signature;  // the least times by signature, sorted
};

// A slow rank is the late arrival in every group it belongs to, while a rank that merely waits for it (its
// pipeline neighbour, its tensor-parallel peer) is the late arrival in at most the groups the slow rank is
// not in. So the culprit is the rank with the largest sum of scores over the groups naming it; its
// highest-scoring finding gives kind, severity and group. DP gradient groups under an uneven micro-batch
// split do not vote: their members do unequal work by design (the replicas' times, 4., judge them).
GroupScan scan_groups(const ByRank& by_rank, const std::vector<GroupMembers>& groups, const LayoutGroups& lg,
                      const IterationTimes& times, double step_ms, bool step_measured) {
  GroupScan out;
  for (const GroupMembers& g : groups) {
    if (g.members.size() < 2) continue;
    out.by_id[g.group] = &g;
    std::vector<analysis::RankWindow> windows;
    double sum = 0, least = 1e300;
    int n = 0;
    for (int r : g.members) {
      analysis::RankWindow w;
      w.rank = r;
      auto it = by_rank.find(r);
      if (it != by_rank.end()) {
        const ProfileView& p = *it->second;
        w.iterations = std::max(p.iterations, 2);  // the window holds several iterations by construction
        w.step_ms = step_ms;
        w.compute_ms = std::max(0.0, step_ms - times.comm_ms.at(r));
        if (const double t = times.of(r, g.group); t >= 0) {
          w.visible_ms = t;
          sum += *w.visible_ms;
          least = std::min(least, *w.visible_ms);
          ++n;
        }
      }
      windows.push_back(w);
    }
    const analysis::StragglerFinding f = analysis::rank_straggler(windows);
    const bool comparable_work = !(lg.uneven && lg.dp.count(g.group) != 0);
    if (comparable_work && f.severity != analysis::StragglerSeverity::kNone) {
      out.late[g.group] = f.culprit;
      GroupScan::Named& named = out.named[f.culprit];
      named.total += f.score;
      if (f.score > named.best.score) {
        named.best = f;
        named.group = g.group;
      }
    }
    // Comparable only with the same calls at the same rate (an uneven micro-batch split changes how many
    // Send/Recv a pipeline makes): the calls per iteration (a whole number of the schedule's; a window's
    // edges move a rate by a call or so, which rounding absorbs; IterationTimes), or without a measured
    // iteration the first member's rate in 10 % buckets, joins the signature. (Buckets alone split rates a few percent apart across a boundary:
    // 11.1 and 11.4 calls/s once made a congested pipeline edge incomparable with its peers.)
    if (n == static_cast<int>(g.members.size())) {
      if (lg.dp.count(g.group)) out.dp.push_back(g.group);
      if (lg.pp.count(g.group)) out.pp.push_back(g.group);
      double rate = 0;
      if (auto it = by_rank.find(g.members.front()); it != by_rank.end()) {
        if (auto r = it->second->group_rate.find(g.group); r != it->second->group_rate.end()) rate = r->second;
      }
      const auto k = times.calls.find(g.group);
      const long bucket = !(rate > 0)     ? 0
                          : step_measured ? (k != times.calls.end() ? k->second : 0)
                                          : -std::lround(std::log(rate) / std::log(kRateBucketRatio));
      const std::string signature = g.signature + "@" + std::to_string(bucket);
      out.timings.push_back({g.group, signature, sum / n});
      out.least[g.group] = least;
      out.signature[g.group] = signature;
      out.least_by_signature[signature].push_back(least);
    }
  }
  for (auto& [sig, times] : out.least_by_signature) std::sort(times.begin(), times.end());
  return out;
}

// 2. Suspect groups, slowest first: over their comparable cluster's median, or over their healthy baseline.
// A suspect must also cost something: a group 12 % over its peers' 3 ms is noise, not a congested link.
std::vector<std::pair<std::uint64_t, double>> suspect_groups(const GroupScan& scan,
                                                             const GroupBaseline* baseline, double step_ms,
                                                             bool step_measured) {
  std::vector<std::pair<std::uint64_t, double>> out;
  for (const auto& c : analysis::comparable_clusters(scan.timings)) {
    for (std::size_t i = 0; i < c.slow_groups.size(); ++i) {
      if ((c.slow_ratios[i] - 1.0) * c.median_ms > kBaselineMinShare * step_ms) {
        out.emplace_back(c.slow_groups[i], c.slow_ratios[i]);
      }
    }
  }
  if (baseline != nullptr && step_measured) {
    for (const auto& [gid, least] : scan.least) {
      const auto g = scan.by_id.find(gid);
      const std::optional<double> base = g != scan.by_id.end() ? baseline->of(*g->second) : std::nullopt;
      if (!base || !(*base > 0)) continue;
      if (least > kBaselineGrowth * *base && least - *base > kBaselineMinShare * step_ms) {
        const double ratio = least / *base;
        auto it = std::find_if(out.begin(), out.end(), [&, id = gid](const auto& s) { return s.first == id; });
        if (it == out.end()) {
          out.emplace_back(gid, ratio);
        } else {
          it->second = std::max(it->second, ratio);
        }
      }
    }
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  return out;
}

// The inter-node links a group's ring crosses (consecutive members, and last to first), as (lower, higher).
std::set<std::pair<int, int>> ring_links(const GroupMembers& g, const ByRank& by_rank) {
  std::set<std::pair<int, int>> out;
  for (std::size_t i = 0; i < g.members.size(); ++i) {
    const auto a = by_rank.find(g.members[i]), b = by_rank.find(g.members[(i + 1) % g.members.size()]);
    if (a == by_rank.end() || b == by_rank.end() || a->second->node < 0 || b->second->node < 0 ||
        a->second->node == b->second->node) {
      continue;
    }
    out.emplace(std::min(a->second->node, b->second->node), std::max(a->second->node, b->second->node));
  }
  return out;
}

// What a group's transfer (its least member time) is compared with: its healthy baseline's, or without one
// (or a group the baseline does not know, e.g. made after a new placement), the median of its comparable
// groups'. 0: none.
double reference_ms(std::uint64_t gid, const GroupScan& scan, const GroupBaseline* baseline) {
  if (baseline != nullptr) {
    if (auto b = baseline->of(*scan.by_id.at(gid))) return *b;
  }
  // The median of the other groups of its signature: their sorted times without one instance of its own.
  const std::vector<double>& all = scan.least_by_signature.at(scan.signature.at(gid));
  std::size_t skip = all.size();  // the index left out (none when the group has no time of its own)
  if (auto own = scan.least.find(gid); own != scan.least.end()) {
    skip = static_cast<std::size_t>(std::lower_bound(all.begin(), all.end(), own->second) - all.begin());
  }
  const std::size_t m = skip < all.size() ? all.size() - 1 : all.size();
  if (m == 0) return 0.0;
  const auto at = [&](std::size_t i) { return all[i < skip ? i : i + 1]; };
  return m % 2 == 1 ? at(m / 2) : 0.5 * (at(m / 2 - 1) + at(m / 2));
}

// The typical transfer of these groups (DP or PP) at the links' healthy speed: the median of their least
// member times, a suspect group's (a congested link's) taken at its reference when it has one (its own
// time carries the congestion, which the S3 cost model applies again through the link's ratio: with a DP
// ring at 9x, the median of two rings read the gradient volume 5x too large and the model's iteration 1.7x
// the measured one). 0: no such group.
double healthy_transfer_ms(const std::vector<std::uint64_t>& ids, const GroupScan& scan,
                           const std::vector<std::pair<std::uint64_t, double>>& suspects, const GroupBaseline* baseline) {
  std::vector<double> times, scratch;
  for (std::uint64_t gid : ids) {
    double t = scan.least.at(gid);
    if (std::any_of(suspects.begin(), suspects.end(), [&](const auto& s) { return s.first == gid; })) {
      if (const double reference = reference_ms(gid, scan, baseline); reference > 0) t = std::min(t, reference);
    }
    times.push_back(t);
  }
  return times.empty() ? 0.0 : analysis::median(times, scratch);
}

// A host straggler (CPU contention: its launches are slow, not its GPU nor its links): the culprit is the late
// arrival in every group of its with a finding (two at least), and the links its groups cross are at their
// reference. A link is judged by the other groups crossing it (the culprit's own time inside a call carries
// its launch delays, so its own groups cannot tell): each one's least member time (the member that waited
// least, ~ the transfer itself) at most kBaselineGrowth x its healthy baseline, or without one, x the median
// of its comparable groups' (the same data at the same rate). Links that no other group crosses, or whose
// groups have no reference, decide nothing; a culprit with inter-node links none of which could be judged
// is no host straggler.
bool late_everywhere_on_healthy_links(int culprit, const GroupScan& scan, const ByRank& by_rank,
                                      const GroupBaseline* baseline, double step_ms) {
  const auto has_culprit = [&](const GroupMembers& g) {
    return std::find(g.members.begin(), g.members.end(), culprit) != g.members.end();
  };
  int late = 0;
  std::set<std::pair<int, int>> links;
  for (const auto& [gid, g] : scan.by_id) {
    if (!has_culprit(*g)) continue;
    if (auto it = scan.late.find(gid); it != scan.late.end()) {
      if (it->second != culprit) return false;
      ++late;
    }
    for (const auto& l : ring_links(*g, by_rank)) links.insert(l);
  }
  if (late < 2) return false;
  int judged = 0;
  for (const auto& [gid, g] : scan.by_id) {
    if (has_culprit(*g)) continue;
    auto least = scan.least.find(gid);
    if (least == scan.least.end()) continue;
    const auto crossed = ring_links(*g, by_rank);
    if (std::none_of(crossed.begin(), crossed.end(), [&](const auto& l) { return links.count(l) != 0; })) continue;
    const double reference = reference_ms(gid, scan, baseline);
    if (!(reference > 0)) continue;
    ++judged;
    if (least->second > kBaselineGrowth * reference && least->second - reference > kBaselineMinShare * step_ms) {
      return false;  // a link it uses carries slower transfers than it did: communication, not the host
    }
  }
  return links.empty() || judged > 0;
}

// 3. The culprit (largest vote; ties go to the lower rank) and the cause.
void name_culprit_and_cause(const GroupScan& scan, const ByRank& by_rank, const std::optional<JobLayout>& layout,
                            const std::vector<RankCoords>& roles,
                            const GroupBaseline* baseline, double step_ms, Localisation& out) {
  analysis::StragglerFinding best;
  best.kind = analysis::StragglerKind::kNone;
  double best_total = 0;
  for (const auto& [rank, n] : scan.named) {  // ascending rank
    if (n.total > best_total) {
      best_total = n.total;
      best = n.best;
      out.group = n.group;
    }
  }
  if (best.severity != analysis::StragglerSeverity::kNone) {
    out.culprit = best.culprit;
    out.kind = analysis::straggler_kind_name(best.kind);
    out.severity = analysis::straggler_severity_name(best.severity);
    out.score = best.score;
    if (auto it = by_rank.find(best.culprit); it != by_rank.end()) out.culprit_node = it->second->node;
  }
  const bool compute = best.kind == analysis::StragglerKind::kComputeStraggler;
  const bool host = !compute && best.severity != analysis::StragglerSeverity::kNone &&
                    late_everywhere_on_healthy_links(best.culprit, scan, by_rank, baseline, step_ms);
  if (compute || host) {
    out.cause = compute ? Cause::kComputation : Cause::kHost;
    // The culprit's own groups look slow because its peers wait for it: explained, not suspects.
    // So are, with the layout, the groups inside the culprit's DP replica: its pipeline runs at the slow
    // GPU's pace (its tensor-parallel peers wait for it and make their pipeline neighbours wait in turn).
    const bool replicas_known =
        layout && layout->tp > 0 && layout->dp > 0 && layout->world == layout->tp * layout->dp * layout->pp;
    const auto replica_of = [&](int r) { return r >= 0 && r < static_cast<int>(roles.size()) ? roles[static_cast<std::size_t>(r)].dp : -1; };
    std::erase_if(out.slow_groups, [&](const auto& s) {
      const auto& m = scan.by_id.at(s.first)->members;
      if (std::find(m.begin(), m.end(), out.culprit) != m.end()) return true;
      return replicas_known && std::all_of(m.begin(), m.end(), [&](int r) {
               return r < layout->world && replica_of(r) == replica_of(out.culprit);
             });
    });
  } else if (!out.slow_groups.empty()) {
    out.cause = Cause::kCommunication;
  }
}

// Links a suspect group's ring crosses between nodes, each with the slowest suspect group crossing it.
std::vector<SuspectLink> suspect_links(const Localisation& loc, const GroupScan& scan, const ByRank& by_rank) {
  std::vector<SuspectLink> out;
  for (const auto& [gid, ratio] : loc.slow_groups) {
    for (const auto& [lo, hi] : ring_links(*scan.by_id.at(gid), by_rank)) {
      auto it = std::find_if(out.begin(), out.end(),
                             [a = lo, b = hi](const SuspectLink& l) { return l.node_a == a && l.node_b == b; });
      if (it == out.end()) {
        out.push_back({lo, hi, ratio});
      } else {
        it->ratio = std::max(it->ratio, ratio);
      }
    }
  }
  return out;
}

// 4. Per DP replica, with the layout: own time per pipeline slot, and the culprit's replica.
void replica_times(const ByRank& by_rank, const std::vector<GroupMembers>& groups, const JobLayout& layout,
                   const std::vector<RankCoords>& roles, const IterationTimes& times, double step_ms,
                   Localisation& out) {
  std::vector<double> scratch;
  const auto dp_groups = role_groups(roles, true);
  const int D = layout.dp;
  // The DP group of a rank: a group whose members are exactly the ranks with its tp and pp. There may be
  // several (a placement switch makes new communicators; the old ones stay in the registry): the one the
  // rank's profile measured is the one in use.
  std::map<std::set<int>, std::vector<std::uint64_t>> groups_of_members;
  for (const GroupMembers& g : groups) groups_of_members[std::set<int>(g.members.begin(), g.members.end())].push_back(g.group);
  std::vector<std::vector<double>> own(static_cast<std::size_t>(D));
  for (const auto& [r, p] : by_rank) {
    if (r < 0 || r >= static_cast<int>(roles.size())) return;  // layout and profiles disagree: no replica times
    const RankCoords c = roles[static_cast<std::size_t>(r)];
    const std::vector<int>& dp_group = dp_groups.at({c.tp, c.pp});
    const std::set<int> dp_members(dp_group.begin(), dp_group.end());
    double wait = 0;
    if (D > 1) {
      auto g = groups_of_members.find(dp_members);
      if (g == groups_of_members.end()) return;  // layout and groups disagree: no replica times
      for (std::uint64_t id : g->second) wait = std::max(wait, times.of(r, id));
    }
    own[static_cast<std::size_t>(c.dp)].push_back(std::max(0.0, step_ms - wait));
  }
  // A 1F1B pipeline of P stages runs m micro-batches in about m + P - 1 slots of its slowest stage: the
  // replica's time per slot is what compares across replicas whatever their m.
  for (int d = 0; d < D; ++d) {
    const int m = d < static_cast<int>(layout.microbatches.size()) ? layout.microbatches[static_cast<std::size_t>(d)] : 1;
    out.replica_ms_per_microbatch.push_back(analysis::median(own[static_cast<std::size_t>(d)], scratch) /
                                            static_cast<double>(std::max(m, 1) + layout.pp - 1));
  }
  const auto slowest = std::max_element(out.replica_ms_per_microbatch.begin(), out.replica_ms_per_microbatch.end());
  const double med = analysis::median(out.replica_ms_per_microbatch, scratch);
  out.replica_skew = med > 0 ? *slowest / med : 1.0;
  out.culprit_replica = out.culprit >= 0 && out.culprit < static_cast<int>(roles.size())
                            ? roles[static_cast<std::size_t>(out.culprit)].dp
                            : static_cast<int>(slowest - out.replica_ms_per_microbatch.begin());
}

}  // namespace

Localisation localise(const std::vector<ProfileView>& profiles, const std::vector<GroupMembers>& groups,
                      const std::optional<JobLayout>& layout, const GroupBaseline* baseline) {
  Localisation out;
  const ByRank by_rank = usable(profiles);
  out.ranks_profiled = static_cast<int>(by_rank.size());
  // Shares of the window become times per iteration with the iteration time; without it, per unit of time
  // (the policy's score is a ratio to the step either way; the baseline comparison is then skipped).
  const double measured_step_ms = median_step_ms(profiles);
  const double step_ms = measured_step_ms > 0 ? measured_step_ms : 1.0;

  // Each rank's role under the placement in force, once for every step below.
  const std::vector<RankCoords> roles = layout ? rank_roles(*layout) : std::vector<RankCoords>{};
  const IterationTimes times = iteration_times(by_rank, groups, step_ms, measured_step_ms > 0);
  const GroupScan scan =
      scan_groups(by_rank, groups, layout_groups(groups, layout, roles), times, step_ms, measured_step_ms > 0);
  out.slow_groups = suspect_groups(scan, baseline, step_ms, measured_step_ms > 0);
  out.dp_transfer_ms = healthy_transfer_ms(scan.dp, scan, out.slow_groups, baseline);
  out.pp_transfer_ms = healthy_transfer_ms(scan.pp, scan, out.slow_groups, baseline);
  name_culprit_and_cause(scan, by_rank, layout, roles, baseline, step_ms, out);
  out.suspect_links = suspect_links(out, scan, by_rank);
  // Every inter-node link a fully profiled group with a reference crosses: the largest ratio of a transfer
  // crossing it to its reference (a link is seen healthy, or slow however little it carries). Only transfers
  // worth kBaselineMinShare of the iteration probe a link's bandwidth (a few bytes see only its latency).
  std::map<std::pair<int, int>, double> readings;
  for (const auto& [gid, least] : scan.least) {
    const double reference = reference_ms(gid, scan, baseline);
    if (!(reference > kBaselineMinShare * step_ms)) continue;
    for (const auto& l : ring_links(*scan.by_id.at(gid), by_rank)) {
      double& r = readings[l];
      r = std::max(r, least / reference);
    }
  }
  for (const auto& [l, ratio] : readings) out.link_readings.push_back({l.first, l.second, ratio});
  if (layout && layout->world == static_cast<int>(by_rank.size())) replica_times(by_rank, groups, *layout, roles, times, step_ms, out);
  out.step_ms = measured_step_ms;
  for (const auto& [r, p] : by_rank) {
    if (p->iterations >= 2 && p->iter_ms_min > 0 && p->iter_ms_max >= p->iter_ms_min) {
      out.pace_spread = std::max(out.pace_spread, p->iter_ms_max / p->iter_ms_min);
    }
  }
  if (layout && measured_step_ms > 0 && layout->world > 0 && layout->tp * layout->dp * layout->pp == layout->world &&
      layout->microbatches.size() == static_cast<std::size_t>(layout->dp)) {
    out.compute_ms_per_microbatch.assign(static_cast<std::size_t>(layout->world), 0.0);
    for (const auto& [r, p] : by_rank) {
      if (r < 0 || r >= layout->world) continue;
      const int m = layout->microbatches[static_cast<std::size_t>(roles[static_cast<std::size_t>(r)].dp)];
      out.compute_ms_per_microbatch[static_cast<std::size_t>(r)] =
          std::max(0.0, measured_step_ms - times.comm_ms.at(r)) / std::max(m, 1);
    }
  }
  return out;
}

std::vector<GroupTiming> group_timings(const std::vector<ProfileView>& profiles, const std::vector<GroupMembers>& groups,
                                       const std::map<std::uint64_t, GroupTraffic>& traffic) {
  std::map<int, const ProfileView*> by_rank;
  for (const ProfileView& v : profiles) by_rank[v.rank] = &v;
  std::vector<GroupTiming> out;
  for (const GroupMembers& g : groups) {
    double least = -1;
    for (int r : g.members) {
      const auto it = by_rank.find(r);
      if (it == by_rank.end()) continue;
      const auto share = it->second->group_share.find(g.group);
      const auto rate = it->second->group_rate.find(g.group);
      if (share == it->second->group_share.end() || rate == it->second->group_rate.end() || !(rate->second > 0)) continue;
      const double s = share->second / rate->second;
      if (s > 0 && (least < 0 || s < least)) least = s;
    }
    if (least <= 0) continue;
    GroupTiming t;
    t.group = g.group;
    t.ranks = static_cast<int>(g.members.size());
    t.seconds_per_call = least;
    if (const auto tr = traffic.find(g.group); tr != traffic.end()) {
      t.op = tr->second.op;
      t.bytes_per_call = tr->second.bytes_per_call;
    }
    if (const auto op = op_of_name(t.op); op && t.bytes_per_call > 0) {
      t.bus_gb_per_s = t.bytes_per_call * bus_bandwidth_factor(*op, t.ranks) / least * 1e-9;
    }
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace greyhound::master
