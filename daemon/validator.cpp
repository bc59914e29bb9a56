#include "daemon/validator.h"

#include <algorithm>
#include <cstdio>
#include <set>

namespace greyhound::master {

namespace {
// A group's P2P test: over NCCL's ring order when a member's graph dump gave it (and it holds exactly the
// group's members), else group-rank order; its ring passes, then its tree passes less the transfers the ring
// passes time already (the same sender and receiver), passes left empty left out. The tree is NCCL's (a chain
// per node, a double binary tree of the nodes) when the members' nodes are known (from the group, else
// `node_of`): over the chains and pattern of NCCL's tree graph when the dump gave them, else the balanced
// pattern over the ring's order; without the nodes, the binary tree in heap layout over the ring's order.
P2pTest test_of(const GroupMembers& g, const ValidatorConfig& config, const std::map<int, int>& node_of = {}) {
  P2pTest t;
  t.group = g.group;
  t.order = std::is_permutation(g.nccl_order.begin(), g.nccl_order.end(), g.members.begin(), g.members.end())
                ? g.nccl_order
                : g.members;
  if (config.rings || !config.trees) t.passes = validate::ring_passes(t.order);
  if (!config.trees) return t;
  std::set<std::pair<int, int>> timed;
  for (const validate::Pass& p : t.passes) {
    for (const validate::Transfer& x : p) timed.insert({x.src, x.dst});
  }
  // NCCL's trees run through each node in the tree graph's chain order when the dump gave it.
  const std::vector<int>& tree_order =
      std::is_permutation(g.nccl_tree_order.begin(), g.nccl_tree_order.end(), g.members.begin(), g.members.end())
          ? g.nccl_tree_order
          : t.order;
  std::vector<int> nodes;  // of tree_order's ranks
  for (int r : tree_order) {
    const auto at = std::find(g.members.begin(), g.members.end(), r) - g.members.begin();
    const auto known = node_of.find(r);
    if (g.nodes.size() == g.members.size()) {
      nodes.push_back(g.nodes[static_cast<std::size_t>(at)]);
    } else if (known != node_of.end()) {
      nodes.push_back(known->second);
    } else {
      nodes.clear();
      break;
    }
  }
  const std::vector<validate::Pass> tree = nodes.size() == tree_order.size()
                                                ? validate::nccl_tree_passes(tree_order, nodes, g.nccl_tree_pattern)
                                                : validate::tree_passes(t.order);
  for (validate::Pass p : tree) {
    p.erase(std::remove_if(p.begin(), p.end(), [&](const validate::Transfer& x) { return timed.count({x.src, x.dst}) != 0; }),
            p.end());
    if (!p.empty()) t.passes.push_back(std::move(p));
  }
  return t;
}
}  // namespace

bool parse_validate_topologies(std::string_view list, ValidatorConfig* config) {
  bool rings = false, trees = false;
  std::size_t from = 0;
  while (from <= list.size()) {
    const std::size_t comma = std::min(list.find(',', from), list.size());
    const std::string_view t = list.substr(from, comma - from);
    if (t == "ring") {
      rings = true;
    } else if (t == "tree") {
      trees = true;
    } else {
      return false;
    }
    from = comma + 1;
  }
  config->rings = rings;
  config->trees = trees;
  return true;
}

ValidationPlan plan_link_probe(int node_a, int node_b, const std::vector<GroupMembers>& groups,
                               const std::map<int, int>& node_of, const std::set<std::pair<int, int>>& avoid,
                               int references) {
  ValidationPlan plan;
  // The largest group with ranks on both nodes; in it, the lowest rank of each node.
  const GroupMembers* best = nullptr;
  std::map<int, int> first_on;  // node -> its lowest rank in `best`
  for (const GroupMembers& g : groups) {
    std::map<int, int> on;
    for (int r : g.members) {
      const auto it = node_of.find(r);
      if (it == node_of.end()) continue;
      const auto [slot, fresh] = on.insert({it->second, r});
      if (!fresh) slot->second = std::min(slot->second, r);
    }
    if (on.count(node_a) == 0 || on.count(node_b) == 0) continue;
    if (best == nullptr || g.members.size() > best->members.size()) {
      best = &g;
      first_on = std::move(on);
    }
  }
  if (best == nullptr) return plan;
  const auto test = [&](int a, int b) {
    P2pTest t;
    t.group = best->group;
    t.order = {first_on.at(a), first_on.at(b)};
    t.passes = {validate::Pass{{t.order[0], t.order[1]}}};  // one way: slow or not is all a probe asks
    return t;
  };
  plan.p2p.push_back(test(node_a, node_b));
  // Reference pairs: the other nodes two by two, in node order, skipping known slow links.
  std::vector<int> others;
  for (const auto& [n, r] : first_on) {
    if (n != node_a && n != node_b) others.push_back(n);
  }
  std::set<int> used;
  for (std::size_t i = 0; i < others.size() && static_cast<int>(plan.reference_groups.size()) < references; ++i) {
    if (used.count(others[i])) continue;
    for (std::size_t j = i + 1; j < others.size(); ++j) {
      const int a = others[i], b = others[j];
      if (used.count(b) || avoid.count({std::min(a, b), std::max(a, b)})) continue;
      plan.p2p.push_back(test(a, b));
      plan.reference_groups.push_back(best->group);
      used.insert(a);
      used.insert(b);
      break;
    }
  }
  if (plan.reference_groups.empty()) return ValidationPlan{};
  char buf[160];
  std::snprintf(buf, sizeof buf, "a probe of link %d-%d (ranks %d, %d) against %zu other pair(s) of nodes over group %016llx",
                node_a, node_b, first_on.at(node_a), first_on.at(node_b), plan.reference_groups.size(),
                static_cast<unsigned long long>(best->group));
  plan.why = buf;
  plan.repeats = 1;
  return plan;
}

ValidationPlan plan_validation(const Localisation& loc, const std::vector<GroupMembers>& groups,
                               const ValidatorConfig& config, const std::map<int, int>& node_of) {
  ValidationPlan plan;
  const auto group_of = [&](std::uint64_t id) -> const GroupMembers* {
    for (const GroupMembers& g : groups) {
      if (g.group == id) return &g;
    }
    return nullptr;
  };
  const auto p2p_test = [&](const GroupMembers& g) { return test_of(g, config, node_of); };
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
    // Every other GPU too (gemm_all): the GEMMs run in parallel, so the pause lasts no longer, and a second
    // slow GPU the profile did not name (another replica's) is measured in the same pause.
    if (config.gemm_all && plan.gemm_ranks.size() > 1) {
      std::set<int> everyone;
      for (const GroupMembers& g : groups) everyone.insert(g.members.begin(), g.members.end());
      for (int r : everyone) {
        if (taken.insert(r).second) plan.gemm_ranks.push_back(r);
      }
    }
    if (plan.gemm_ranks.size() < 2) plan.gemm_ranks.clear();  // nobody to compare it with
  }
  std::vector<std::pair<std::uint64_t, double>> slow = loc.slow_groups;
  std::stable_sort(slow.begin(), slow.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  for (const auto& [id, ratio] : slow) {
    if (static_cast<int>(plan.p2p.size()) >= config.max_groups) break;
    const GroupMembers* g = group_of(id);
    if (g == nullptr || g->members.size() < 2) continue;
    plan.p2p.push_back(p2p_test(*g));
  }
  // A transfer is judged against others of its class: when every suspect group crosses the same slow link,
  // they are all slow alike. So one group comparable with the first suspect (same signature) and not
  // suspect itself is timed too, as the reference.
  const std::size_t suspects = plan.p2p.size();
  if (!plan.p2p.empty()) {
    const GroupMembers* first = group_of(plan.p2p.front().group);
    std::set<std::uint64_t> slow_ids;
    for (const auto& [id, ratio] : loc.slow_groups) slow_ids.insert(id);
    // Whether a group's ring crosses nodes (-1: unknown), so that the reference's transfers are of the
    // suspects' class.
    const auto crosses = [&](const GroupMembers& g) {
      int n0 = -2;
      for (int r : g.members) {
        const auto it = node_of.find(r);
        if (it == node_of.end()) return -1;
        if (n0 == -2) n0 = it->second;
        if (it->second != n0) return 1;
      }
      return 0;
    };
    // As many references as suspects: a transfer is judged against the median of its class, which the
    // healthy ones must hold.
    std::vector<const GroupMembers*> refs;
    const auto taken = [&](const GroupMembers& g) { return std::find(refs.begin(), refs.end(), &g) != refs.end(); };
    for (const GroupMembers& g : groups) {  // comparable with the first suspect
      if (first != nullptr && refs.size() < suspects && g.signature == first->signature && !slow_ids.count(g.group) &&
          g.members.size() >= 2) {
        refs.push_back(&g);
      }
    }
    for (const GroupMembers& g : groups) {  // then of its size and link class
      if (first != nullptr && refs.size() < suspects && g.members.size() == first->members.size() &&
          !slow_ids.count(g.group) && !taken(g) && crosses(g) >= 0 && crosses(g) == crosses(*first)) {
        refs.push_back(&g);
      }
    }
    for (const GroupMembers* gp : refs) {
      plan.p2p.push_back(p2p_test(*gp));
      plan.reference_groups.push_back(gp->group);
    }
  }
  // Every other group too (p2p_all): a rank takes part in a few groups whatever the job's size, so the
  // pause grows with the groups per rank, not with the job, and a second fault the profile did not
  // suspect (a congested link beside a slow GPU) is measured in the same pause.
  if (config.p2p_all && (suspects > 0 || gpu_suspect)) {
    for (const GroupMembers& g : groups) {
      if (g.members.size() < 2) continue;
      if (std::none_of(plan.p2p.begin(), plan.p2p.end(), [&](const P2pTest& t) { return t.group == g.group; })) {
        plan.p2p.push_back(p2p_test(g));
      }
    }
  }
  char buf[200];
  std::snprintf(buf, sizeof buf, "%s; %zu suspect group(s) of %zu%s", gpu_suspect ? "GEMM on the culprit and its peers"
                                                                                   : "no GPU suspect",
                suspects, loc.slow_groups.size(),
                (plan.reference_groups.empty() ? std::string() : " and " + std::to_string(plan.reference_groups.size()) +
                                                                  " reference(s)")
                    .c_str());

  plan.why = buf;
  if (plan.p2p.size() > suspects + plan.reference_groups.size()) {
    plan.why += "; P2P over every group (" + std::to_string(plan.p2p.size()) + ")";
  }
  return plan;
}

ValidationPlan plan_preflight(const std::vector<GroupMembers>& groups, const ValidatorConfig& config) {
  ValidationPlan plan;
  std::set<int> everyone;
  std::set<std::vector<int>> tested;  // member sets already timed
  for (const GroupMembers& g : groups) {
    everyone.insert(g.members.begin(), g.members.end());
    if (g.members.size() < 2) continue;
    std::vector<int> key = g.members;
    std::sort(key.begin(), key.end());
    if (!tested.insert(key).second) continue;
    plan.p2p.push_back(test_of(g, config));
  }
  if (everyone.size() >= 2) plan.gemm_ranks.assign(everyone.begin(), everyone.end());  // one GPU: nothing to compare
  plan.why = "pre-flight: GEMM on " + std::to_string(plan.gemm_ranks.size()) + " ranks, P2P over " +
             std::to_string(plan.p2p.size()) + " group(s)";
  return plan;
}

PreflightReport preflight_report(const ValidatedReport& v, const PreflightRequest& req, int groups_tested) {
  PreflightReport r;
  r.id = req.id;
  r.fail_on_slow = req.fail_on_slow;
  r.pause = v.id;
  r.at_iteration = v.at_iteration;
  r.ranks = v.ranks;
  r.pause_s = v.pause_s;
  r.tests_s = v.tests_s;
  r.groups_tested = groups_tested;
  if (v.aborted) {
    r.state = "failed";
    r.reason = "the pause was aborted: " + v.reason;
    return r;
  }
  for (const ValidatedGpu& g : v.gpus) {
    r.gpus_tested += g.peers_ms > 0;
    if (g.slow) r.slow_gpus.push_back(g);
  }
  r.gemm_types = v.gemm_types;
  std::map<std::pair<int, int>, PreflightLink> links;
  for (const ValidatedLink& l : v.links) {
    r.transfers_tested += l.peers_ms > 0;
    if (!l.slow) continue;
    const std::pair<int, int> key{std::min(l.src_node, l.dst_node), std::max(l.src_node, l.dst_node)};
    PreflightLink& k = links[key];
    k.node_a = key.first;
    k.node_b = key.second;
    k.link_class = l.link_class;
    ++k.transfers;
    if (l.ratio > k.ratio) {
      k.ratio = l.ratio;
      k.gb_per_s = l.gb_per_s;
      k.peers_gb_per_s = l.peers_ms > 0 ? l.gb_per_s * l.ratio : 0;
    }
  }
  for (auto& [key, k] : links) r.slow_links.push_back(std::move(k));
  std::sort(r.slow_gpus.begin(), r.slow_gpus.end(), [](const auto& a, const auto& b) { return a.rank < b.rank; });
  r.state = r.slow_gpus.empty() && r.slow_links.empty() ? "passed" : "slow";
  char buf[160];
  std::snprintf(buf, sizeof buf, "%zu of %d GPUs slower than the others' median by more than 10 %%, %zu link(s) of %d "
                "transfers slower than their class's median by more than 50 %%", r.slow_gpus.size(), r.gpus_tested,
                r.slow_links.size(), r.transfers_tested);
  r.reason = buf;
  return r;
}

const char* validated_cause_name(ValidatedCause c) {
  switch (c) {
    case ValidatedCause::kNone: return "none";
    case ValidatedCause::kGpu: return "gpu";
    case ValidatedCause::kLink: return "link";
    case ValidatedCause::kHost: return "host";
  }
  return "none";
}

Validated judge_validation(const std::vector<validate::GemmTime>& gemm,
                           const std::vector<validate::TransferTime>& transfers, double min_excess_ms,
                           int named_rank) {
  Validated v;
  v.gpus = validate::judge_gemm(gemm);
  std::set<int> late;  // ranks whose transfers start late: slow GPUs, and the named rank its GEMM clears
  const validate::GpuVerdict* worst = nullptr;
  const validate::GpuVerdict* cleared = nullptr;
  for (const auto& g : v.gpus) {
    if (g.rank == named_rank && g.judged && !g.slow) {
      cleared = &g;
      late.insert(g.rank);
    }
    if (!g.slow) continue;
    late.insert(g.rank);
    if (worst == nullptr || g.ratio > worst->ratio) worst = &g;
  }
  // A slow GPU's own transfers leave late, and a contended host launches its own late: neither is held
  // against a link.
  std::vector<validate::TransferTime> others;
  for (const auto& t : transfers) {
    if (late.count(t.transfer.src) == 0 && late.count(t.transfer.dst) == 0) others.push_back(t);
  }
  v.links = validate::judge_links(others, kSlowLinkExcess, min_excess_ms);
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
  if (cleared != nullptr) {  // the profile named the rank, its GPU is as fast as its peers': its host it is
    v.cause = ValidatedCause::kHost;
    v.rank = cleared->rank;
    v.node = cleared->node;
    v.ratio = cleared->ratio;
    std::snprintf(buf, sizeof buf, "the profile names rank %d's host and its GEMM is as fast as its peers' (%.2fx)",
                  cleared->rank, cleared->ratio);
    v.reason = buf;
    return v;
  }
  std::snprintf(buf, sizeof buf, "no GPU of %zu and no transfer of %zu slower than its peers", v.gpus.size(),
                transfers.size());
  v.reason = buf;
  return v;
}

}  // namespace greyhound::master

namespace greyhound::master {

namespace {
// `rank`'s rank in a group whose members (global ranks) are in group-rank order.
int group_rank_of(const std::vector<int>& members, int rank) {
  return static_cast<int>(std::find(members.begin(), members.end(), rank) - members.begin());
}
}  // namespace

PauseSpec pause_spec(const ValidationPlan& plan, const std::vector<GroupMembers>& groups, const std::vector<int>& ranks,
                     std::int64_t at_iteration, const PauseSettings& settings) {
  PauseSpec spec;
  spec.at_iteration = at_iteration;
  spec.deadline_s = settings.deadline_s;
  spec.gemm_n = plan.gemm_ranks.empty() ? 0 : settings.gemm_n;
  spec.repeats = plan.repeats > 0 ? plan.repeats : settings.repeats;
  spec.sizes = plan.sizes.empty() ? settings.sizes : plan.sizes;
  if (spec.sizes.size() > static_cast<std::size_t>(kMaxPauseSizes)) spec.sizes.resize(kMaxPauseSizes);
  for (int r : ranks) spec.ranks[r];
  for (int r : plan.gemm_ranks) spec.ranks[r].gemm = true;
  for (const P2pTest& t : plan.p2p) {
    const GroupMembers* g = nullptr;
    for (const GroupMembers& x : groups) {
      if (x.group == t.group) g = &x;
    }
    if (g == nullptr) continue;
    const auto grank = [&](int r) { return group_rank_of(g->members, r); };
    for (std::size_t p = 0; p < t.passes.size(); ++p) {
      for (const validate::Transfer& x : t.passes[p]) {
        auto& src = spec.ranks[x.src].transfers;
        auto& dst = spec.ranks[x.dst].transfers;
        if (src.size() >= static_cast<std::size_t>(kMaxPauseTransfers) ||
            dst.size() >= static_cast<std::size_t>(kMaxPauseTransfers)) {
          continue;
        }
        src.push_back({t.group, static_cast<int>(p), grank(x.dst), true});
        dst.push_back({t.group, static_cast<int>(p), grank(x.src), false});
      }
    }
  }
  return spec;
}

ValidationRun::ValidationRun(std::string id, ValidationPlan plan, PauseSpec spec, const std::vector<GroupMembers>& groups,
                             Localisation loc, double localised_t_s, double now_s, double arm_timeout_s,
                             double min_link_excess_ms)
    : id_(std::move(id)), plan_(std::move(plan)), spec_(std::move(spec)), loc_(std::move(loc)),
      localised_t_s_(localised_t_s), min_link_excess_ms_(min_link_excess_ms) {
  for (const P2pTest& t : plan_.p2p) {
    for (const GroupMembers& g : groups) {
      if (g.group == t.group) members_[g.group] = g.members;
    }
  }
  // A rank must be at the cut well before it would resume by itself: the run command has to reach it first.
  arm_deadline_s_ = now_s + std::min(arm_timeout_s, 0.5 * spec_.deadline_s);
}

void ValidationRun::report(int rank, int node, const PauseReport& r, double now_s) {
  if (r.id != id_ || spec_.ranks.count(rank) == 0) return;
  if (node >= 0) node_of_[rank] = node;
  if (r.state == "trapped") {
    trapped_.insert(rank);
    if (first_trap_s_ < 0) first_trap_s_ = now_s;
  } else if (r.state == "refused") {
    if (phase_ == Phase::kArming) abort("rank " + std::to_string(rank) + " cannot reach the cut (" + r.reason + ")", now_s);
  } else if (r.state == "done") {
    done_[rank] = r;
    last_result_s_ = now_s;
  } else if (r.state == "resumed") {
    resumed_.insert(rank);
    longest_pause_ms_ = std::max(longest_pause_ms_, r.paused_ms);
    // A rank that resumed before the tests were over (its deadline, an abort it was given): the pause is
    // lost for everyone.
    if (phase_ == Phase::kArming || phase_ == Phase::kRunning) {
      abort("rank " + std::to_string(rank) + " resumed (" + r.reason + ") before the tests were over", now_s);
    }
  }
}

void ValidationRun::abort(const std::string& why, double now_s) {
  if (phase_ == Phase::kResuming || phase_ == Phase::kDone) return;
  abort_reason_ = why;
  phase_ = Phase::kResuming;
  pending_command_ = "pause_abort";
  resume_sent_s_ = now_s;
  resume_deadline_s_ = now_s + 5.0;
}

ValidationRun::Step ValidationRun::step(double now_s) {
  Step s;
  if (phase_ == Phase::kArming) {
    if (trapped_.size() == spec_.ranks.size()) {
      phase_ = Phase::kRunning;
      run_sent_s_ = now_s;
      // The tests take what they take; the ranks' own deadline bounds them.
      run_deadline_s_ = std::max(now_s, first_trap_s_) + spec_.deadline_s * 0.9;
      pending_command_ = "pause_run";
    } else if (now_s >= arm_deadline_s_) {
      abort(std::to_string(spec_.ranks.size() - trapped_.size()) + " of " + std::to_string(spec_.ranks.size()) +
                " ranks did not reach the cut in time",
            now_s);
    }
  } else if (phase_ == Phase::kRunning) {
    if (done_.size() == spec_.ranks.size()) {
      phase_ = Phase::kResuming;
      if (exit_on_slow_) {
        const ValidatedReport v = outcome();
        told_to_exit_ = std::any_of(v.gpus.begin(), v.gpus.end(), [](const ValidatedGpu& g) { return g.slow; }) ||
                        std::any_of(v.links.begin(), v.links.end(), [](const ValidatedLink& l) { return l.slow; });
      }
      pending_command_ = told_to_exit_ ? "pause_exit" : "pause_resume";
      resume_sent_s_ = now_s;
      // Ranks that exit report nothing more: the verdict stands at once.
      resume_deadline_s_ = told_to_exit_ ? now_s : now_s + 5.0;
    } else if (now_s >= run_deadline_s_) {
      abort(std::to_string(spec_.ranks.size() - done_.size()) + " ranks sent no results in time", now_s);
    }
  } else if (phase_ == Phase::kResuming) {
    bool all = true;
    for (int r : trapped_) all = all && resumed_.count(r) != 0;
    if ((all && !pending_command_) || now_s >= resume_deadline_s_) phase_ = Phase::kDone;
  }
  if (pending_command_) {
    s.command = std::move(pending_command_);
    pending_command_.reset();
  }
  s.finished = phase_ == Phase::kDone;
  return s;
}

ValidatedReport ValidationRun::outcome() const {
  ValidatedReport out;
  out.id = id_;
  out.at_iteration = spec_.at_iteration;
  out.ranks = static_cast<int>(spec_.ranks.size());
  out.localised_t_s = localised_t_s_;
  out.pause_s = longest_pause_ms_ * 1e-3;
  if (out.pause_s <= 0 && first_trap_s_ >= 0) out.pause_s = std::max(0.0, resume_sent_s_ - first_trap_s_);
  out.tests_s = done_.size() == spec_.ranks.size() ? std::max(0.0, last_result_s_ - run_sent_s_) : 0;
  if (!abort_reason_.empty()) {
    out.aborted = true;
    out.reason = abort_reason_;
    return out;
  }
  const auto node = [&](int r) {
    const auto it = node_of_.find(r);
    return it != node_of_.end() ? it->second : -1;
  };
  std::vector<validate::GemmReport> reports;
  std::map<int, const PauseReport*> results;
  for (int r : plan_.gemm_ranks) {
    const auto it = done_.find(r);
    if (it == done_.end()) continue;
    const PauseReport& d = it->second;
    const auto type = [&](std::size_t t) { return d.gemm_ms.size() > t ? d.gemm_ms[t] : 0.0; };
    reports.push_back({r, node(r), {type(0), type(1), d.gemm_fp8 == "done" ? d.gemm_fp8_ms : 0.0}});
    results[r] = &d;
  }
  const validate::GemmTimes gemm = validate::gemm_times(reports);
  if (!gemm.times.empty()) out.gemm_types = gemm.with_fp8 ? std::vector<std::string>{"fp32", "fp16", "fp8"}
                                                          : std::vector<std::string>{"fp32", "fp16"};
  double bytes = 0;
  for (std::uint64_t b : spec_.sizes) bytes += static_cast<double>(b);
  std::vector<validate::TransferTime> transfers;
  const auto end_ms = [&](int rank, const PauseTransferSpec& want) -> double {
    const auto it = done_.find(rank);
    if (it == done_.end()) return 0;
    for (const auto& t : it->second.transfers) {
      if (t.spec == want) {  // every size measured, or not at all (the bytes count them all)
        double ms = 0;
        for (double x : t.ms) {
          if (!(x > 0)) return 0;
          ms += x;
        }
        return t.ms.size() == spec_.sizes.size() ? ms : 0;
      }
    }
    return 0;
  };
  for (const P2pTest& t : plan_.p2p) {
    const auto m = members_.find(t.group);
    if (m == members_.end()) continue;
    const auto grank = [&](int r) { return group_rank_of(m->second, r); };
    for (std::size_t p = 0; p < t.passes.size(); ++p) {
      for (const validate::Transfer& x : t.passes[p]) {
        const double a = end_ms(x.src, {t.group, static_cast<int>(p), grank(x.dst), true});
        const double b = end_ms(x.dst, {t.group, static_cast<int>(p), grank(x.src), false});
        // The end that arrived last saw only the transfer; the other also waited for it.
        const double ms = a > 0 && b > 0 ? std::min(a, b) : std::max(a, b);
        if (ms > 0) transfers.push_back({x, node(x.src), node(x.dst), bytes, ms});
      }
    }
  }
  const bool names_a_rank = (loc_.cause == Cause::kHost || loc_.cause == Cause::kComputation) && loc_.culprit >= 0;
  const Validated v = judge_validation(gemm.times, transfers, min_link_excess_ms_, names_a_rank ? loc_.culprit : -1);
  out.cause = validated_cause_name(v.cause);
  out.rank = v.rank;
  out.node = v.node;
  out.node_a = v.node_a;
  out.node_b = v.node_b;
  out.ratio = v.ratio;
  out.gb_per_s = v.gb_per_s;
  out.peers_gb_per_s = v.peers_gb_per_s;
  out.reason = v.reason;
  for (const auto& g : v.gpus) {
    const auto d = results.find(g.rank);
    const PauseReport* p = d != results.end() ? d->second : nullptr;
    const double fp32_tflops = p != nullptr && !p->gemm_tflops.empty() ? p->gemm_tflops[0] : 0;
    out.gpus.push_back({g.rank, g.node, g.ms, g.peers_ms, g.ratio, fp32_tflops, g.slow,
                        p != nullptr ? p->gemm_fp8_tflops : 0, p != nullptr ? p->gemm_fp8 : ""});
  }
  for (const auto& l : v.links) {
    out.links.push_back({l.transfer.src, l.transfer.dst, l.src_node, l.dst_node, validate::link_class_name(l.link_class),
                         l.ms, l.peers_ms, l.ratio, l.gb_per_s, l.slow});
  }
  return out;
}

}  // namespace greyhound::master
