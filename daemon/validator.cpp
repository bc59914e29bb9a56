#include "daemon/validator.h"

#include <algorithm>
#include <cstdio>
#include <set>

namespace greyhound::master {

ValidationPlan plan_validation(const Localisation& loc, const std::vector<GroupMembers>& groups,
                               const std::map<std::uint64_t, std::vector<int>>& ring_orders,
                               const ValidatorConfig& config) {
  ValidationPlan plan;
  const auto group_of = [&](std::uint64_t id) -> const GroupMembers* {
    for (const GroupMembers& g : groups) {
      if (g.group == id) return &g;
    }
    return nullptr;
  };
  const bool gpu_suspect = loc.culprit >= 0 && loc.cause != Cause::kCommunication;
  if (gpu_suspect) {
    plan.gemm_ranks.push_back(loc.culprit);
    std::set<int> taken{loc.culprit};
    const auto take_peers = [&](const GroupMembers& g) {
      for (int r : g.members) {
        if (static_cast<int>(plan.gemm_ranks.size()) > config.gemm_peers) return;
        if (taken.insert(r).second) plan.gemm_ranks.push_back(r);
      }
    };
    if (const GroupMembers* g = group_of(loc.group)) take_peers(*g);
    for (const GroupMembers& g : groups) {
      if (std::find(g.members.begin(), g.members.end(), loc.culprit) != g.members.end()) take_peers(g);
    }
    if (plan.gemm_ranks.size() < 2) plan.gemm_ranks.clear();  // nobody to compare it with
  }
  std::vector<std::pair<std::uint64_t, double>> slow = loc.slow_groups;
  std::stable_sort(slow.begin(), slow.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  for (const auto& [id, ratio] : slow) {
    if (static_cast<int>(plan.p2p.size()) >= config.max_groups) break;
    const GroupMembers* g = group_of(id);
    if (g == nullptr || g->members.size() < 2) continue;
    P2pTest t;
    t.group = id;
    const auto known = ring_orders.find(id);
    t.order = known != ring_orders.end() && std::is_permutation(known->second.begin(), known->second.end(),
                                                                  g->members.begin(), g->members.end())
                  ? known->second
                  : g->members;
    t.passes = validate::ring_passes(t.order);
    plan.p2p.push_back(std::move(t));
  }
  char buf[160];
  std::snprintf(buf, sizeof buf, "%s; %zu suspect group(s) of %zu", gpu_suspect ? "GEMM on the culprit and its peers"
                                                                                 : "no GPU suspect",
                plan.p2p.size(), loc.slow_groups.size());
  plan.why = buf;
  return plan;
}

const char* validated_cause_name(ValidatedCause c) {
  switch (c) {
    case ValidatedCause::kNone: return "none";
    case ValidatedCause::kGpu: return "gpu";
    case ValidatedCause::kLink: return "link";
  }
  return "none";
}

Validated judge_validation(const std::vector<validate::GemmTime>& gemm,
                           const std::vector<validate::TransferTime>& transfers) {
  Validated v;
  v.gpus = validate::judge_gemm(gemm);
  std::set<int> slow_gpus;
  const validate::GpuVerdict* worst = nullptr;
  for (const auto& g : v.gpus) {
    if (!g.slow) continue;
    slow_gpus.insert(g.rank);
    if (worst == nullptr || g.ratio > worst->ratio) worst = &g;
  }
  // A slow GPU's own transfers leave late: they are not held against a link.
  std::vector<validate::TransferTime> others;
  for (const auto& t : transfers) {
    if (slow_gpus.count(t.transfer.src) == 0 && slow_gpus.count(t.transfer.dst) == 0) others.push_back(t);
  }
  v.links = validate::judge_links(others);
  char buf[200];
  if (worst != nullptr) {
    v.cause = ValidatedCause::kGpu;
    v.rank = worst->rank;
    v.node = worst->node;
    v.ratio = worst->ratio;
    std::snprintf(buf, sizeof buf, "rank %d's GEMM %.3g ms, %.2fx the median of %zu peers (%.3g ms)", worst->rank,
                  worst->ms, worst->ratio, v.gpus.size() - 1, worst->peers_ms);
    v.reason = buf;
    return v;
  }
  const validate::LinkVerdict* slowest = nullptr;
  for (const auto& l : v.links) {
    if (l.slow && (slowest == nullptr || l.ratio > slowest->ratio)) slowest = &l;
  }
  if (slowest != nullptr) {
    v.cause = ValidatedCause::kLink;
    v.node_a = std::min(slowest->src_node, slowest->dst_node);
    v.node_b = std::max(slowest->src_node, slowest->dst_node);
    v.ratio = slowest->ratio;
    v.gb_per_s = slowest->gb_per_s;
    v.peers_gb_per_s = slowest->peers_ms > 0 ? slowest->gb_per_s * slowest->ratio : 0;
    std::snprintf(buf, sizeof buf, "%s link %d-%d: %d->%d at %.3g GB/s, %.2fx the time of its class's median",
                  validate::link_class_name(slowest->link_class), v.node_a, v.node_b, slowest->transfer.src,
                  slowest->transfer.dst, slowest->gb_per_s, slowest->ratio);
    v.reason = buf;
    return v;
  }
  std::snprintf(buf, sizeof buf, "no GPU of %zu and no transfer of %zu slower than its peers", v.gpus.size(),
                transfers.size());
  v.reason = buf;
  return v;
}

}  // namespace greyhound::master
