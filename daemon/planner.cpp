#include "daemon/planner.h"

#include <algorithm>
#include <cstdio>
#include <numeric>

#include "greyhound/analysis/robust_stats.h"
#include "greyhound/mitigate/cost_model.h"
#include "greyhound/mitigate/microbatch_solver.h"
#include "greyhound/mitigate/topology_planner.h"
#include "greyhound/parallel_shape.h"
#include "greyhound/vocabulary.h"

namespace greyhound::master {
namespace {

bool can(const JobLayout& l, Strategy s) {
  return std::find(l.capabilities.begin(), l.capabilities.end(), name(s)) != l.capabilities.end();
}

std::string fmt_vec(const std::vector<int>& v) {
  std::string s = "[";
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}

}  // namespace

const std::vector<Planner::Remedy>& Planner::remedies() {
  static const std::vector<Remedy> kRemedies = {
      // S2: per-replica times from the localisation, and more than one replica to move work between.
      {Strategy::kS2, mitigate::Strategy::kS2Microbatches,
       [](const JobLayout& l, const Localisation& loc) {
         return loc.replica_ms_per_microbatch.size() == static_cast<std::size_t>(l.dp) && l.dp > 1;
       },
       &Planner::s2_plan},
      // S3: the placement of ranks on nodes (the layout's GPUs per node, whole TP groups per node).
      {Strategy::kS3, mitigate::Strategy::kS3Topology,
       [](const JobLayout& l, const Localisation&) {
         return l.gpus_per_node > 0 && l.gpus_per_node % l.tp == 0 && l.world % l.gpus_per_node == 0;
       },
       &Planner::s3_plan},
      {Strategy::kS4, mitigate::Strategy::kS4Restart, [](const JobLayout&, const Localisation&) { return true; },
       &Planner::s4_plan},
  };
  return kRemedies;
}

std::optional<Planner> Planner::start(const PlannerConfig& config, const Incident& incident, const Localisation& loc,
                                      const JobLayout& layout, std::string* why) {
  mitigate::SkiRentalIncident si;
  const Cause cause = loc.cause;
  si.cause = cause == Cause::kComputation     ? mitigate::FailSlowCause::kComputation
             : cause == Cause::kCommunication ? mitigate::FailSlowCause::kCommunication
                                              : mitigate::FailSlowCause::kBoth;
  si.healthy_iteration_s = incident.before_ms * 1e-3;
  for (const Remedy& r : remedies()) {
    const bool available = can(layout, r.strategy) && r.applicable(layout, loc);
    if (r.rung == mitigate::Strategy::kS2Microbatches) si.s2_available = available;
    if (r.rung == mitigate::Strategy::kS3Topology) si.s3_available = available;
    if (r.rung == mitigate::Strategy::kS4Restart) si.s4_available = available;
  }
  if (!si.s2_available && !si.s3_available && !si.s4_available) {
    if (why) *why = "the job can apply none of S2, S3, S4 for this incident";
    return std::nullopt;
  }
  auto controller = mitigate::SkiRental::create(config.ski, si);
  if (!controller) {
    if (why) *why = controller.error();
    return std::nullopt;
  }
  Planner p(config, std::move(controller).value(), incident, layout);
  // Started by a restarted master while its earlier plan is in force (the layout's allocation is not the
  // initial one): the controller continues from S2, so it reverts once the fail-slow is over.
  if (p.mitigated_) p.controller_.resume(mitigate::Strategy::kS2Microbatches);
  p.update(loc);
  return p;
}

Planner::Planner(const PlannerConfig& c, mitigate::SkiRental s, const Incident& i, const JobLayout& l)
    : config_(c),
      controller_(std::move(s)),
      incident_(i.id),
      layout_(l),
      original_(l.initial_microbatches.size() == l.microbatches.size() ? l.initial_microbatches : l.microbatches),
      current_(l.microbatches),
      original_placement_(mitigate::megatron_placement(l.dp, l.pp)),
      placement_(original_placement_),
      mitigated_(current_ != original_) {}  // a remedy already in force (planned by an earlier master run)

void Planner::update(const Localisation& loc) {
  // Still there: a straggler is still named (a remedy may balance the replicas, not the straggler's own
  // group), or the replicas are still skewed, or a communication suspect remains.
  present_ = loc.culprit >= 0 || loc.cause != Cause::kUnknown || loc.replica_skew >= config_.still_slow_skew;
  loc_ = loc;
  if (loc.replica_ms_per_microbatch.size() == static_cast<std::size_t>(layout_.dp)) replica_ms_ = loc.replica_ms_per_microbatch;
}

std::optional<Plan> Planner::s2_plan(const std::string& why) {
  if (replica_ms_.size() != current_.size()) return std::nullopt;
  mitigate::MicrobatchProblem pr;
  pr.time_per_microbatch_ms = replica_ms_;
  for (int m : current_) {
    pr.total_microbatches += m;
    pr.current.push_back(m);
  }
  // 1F1B wants multiples of the pipeline depth when the current split allows it (the paper's constraint).
  const bool multiples = std::all_of(current_.begin(), current_.end(), [&](int m) { return m % layout_.pp == 0; });
  pr.pipeline_depth = multiples ? layout_.pp : 1;
  mitigate::MicrobatchSolver solver;
  auto sol = solver.solve(pr);
  if (!sol) {
    controller_.decline(mitigate::Strategy::kS2Microbatches);
    return std::nullopt;
  }
  double now_ms = 0;
  for (std::size_t i = 0; i < current_.size(); ++i) now_ms = std::max(now_ms, current_[i] * replica_ms_[i]);
  if (sol->makespan_ms >= now_ms * 0.99) {  // nothing better than what runs
    controller_.decline(mitigate::Strategy::kS2Microbatches);
    return std::nullopt;
  }
  Plan p;
  p.strategy = Strategy::kS2;
  p.action = PlanAction::kApply;
  p.incident = incident_;
  for (auto m : sol->microbatches) p.microbatches.push_back(static_cast<int>(m));
  char buf[256];
  std::snprintf(buf, sizeof buf, "%s; replica times per micro-batch give makespan %.1f -> %.1f ms with %s", why.c_str(),
                now_ms, sol->makespan_ms, fmt_vec(p.microbatches).c_str());
  p.reason = buf;
  p.predicted_iteration_s = 0;
  return p;
}

std::optional<Plan> Planner::s3_plan(const std::string& why) {
  auto decline = [&]() -> std::optional<Plan> {
    controller_.decline(mitigate::Strategy::kS3Topology);
    return std::nullopt;
  };
  const int T = layout_.tp, D = layout_.dp, P = layout_.pp, G = layout_.gpus_per_node;
  if (G <= 0 || replica_ms_.size() != static_cast<std::size_t>(D)) return decline();
  constexpr double kInterBps = 1e9, kIntraBps = 1e10;  // nominal: volumes below are derived at these rates
  std::vector<double> scratch;
  std::vector<double> times = replica_ms_;
  const double healthy_slot_ms = analysis::median(times, scratch);
  if (!(healthy_slot_ms > 0)) return decline();

  mitigate::ClusterState cluster;
  cluster.nodes = layout_.world / G;
  cluster.gpus_per_node = G;
  cluster.inter_node_bytes_per_s = kInterBps;
  cluster.intra_node_bytes_per_s = kIntraBps;
  cluster.gpu_slowdown.assign(static_cast<std::size_t>(layout_.world), 1.0);
  if (loc_.culprit >= 0 && loc_.culprit < layout_.world && loc_.culprit_replica >= 0 && loc_.culprit_replica < D) {
    // The culprit's GPU, where the current placement puts its (tp, dp, pp).
    const RankCoords c = ParallelShape{T, D, P}.coords(loc_.culprit);
    for (std::size_t s = 0; s < placement_.size(); ++s) {
      if (placement_[s].dp == c.dp && placement_[s].pp == c.pp) {
        cluster.gpu_slowdown[s * static_cast<std::size_t>(T) + static_cast<std::size_t>(c.tp)] =
            std::max(1.0, replica_ms_[static_cast<std::size_t>(loc_.culprit_replica)] / healthy_slot_ms);
      }
    }
  }
  for (const SuspectLink& l : loc_.suspect_links) {
    // A computation cause: the slowness is the GPU's, whatever else waits for it.
    if (loc_.cause == Cause::kComputation) break;
    if (l.node_a < cluster.nodes && l.node_b < cluster.nodes && l.ratio > 1) {
      cluster.links.push_back({l.node_a, l.node_b, kInterBps / l.ratio});
    }
  }
  mitigate::JobShape job;
  job.tp = T;
  job.dp = D;
  job.pp = P;
  job.stage_compute_s.assign(static_cast<std::size_t>(P), healthy_slot_ms * 1e-3);
  std::int64_t m_total = 0;
  for (int m : current_) {
    job.microbatches.push_back(m);
    m_total += m;
  }
  const double m_mean = static_cast<double>(m_total) / D;
  // PP: each edge carries activations forward and gradients back per micro-batch; DP: a ring all-reduce.
  job.activation_bytes = P > 1 ? loc_.pp_transfer_ms * 1e-3 * kInterBps / (2.0 * m_mean) : 0.0;
  if (D > 1) job.gradient_bytes.assign(static_cast<std::size_t>(P), loc_.dp_transfer_ms * 1e-3 * kInterBps * D / (2.0 * (D - 1)));
  auto model = mitigate::CostModel::create(cluster, job);
  if (!model) return decline();
  mitigate::TopologyPlanOptions opt;
  opt.pause_s = config_.ski.s3_pause_s;
  opt.horizon_s = 2.0 * elapsed_s_;  // a fail-slow that lasted t is expected to last about t more
  opt.straggler_slowdown = 1.0;
  mitigate::TopologyPlanner planner(model.value());
  auto tp_plan = planner.plan(placement_, opt);
  if (!tp_plan || !tp_plan->worthwhile || tp_plan->placement == placement_) return decline();
  Plan p;
  p.strategy = Strategy::kS3;
  p.action = PlanAction::kApply;
  p.incident = incident_;
  p.placement = nlohmann::json::array();
  for (const auto& r : mitigate::rank_roles(tp_plan->placement, T, D, G)) {
    p.placement.push_back({{"rank", r.rank}, {"tp", r.tp}, {"dp", r.dp}, {"pp", r.pp}});
  }
  p.predicted_iteration_s = tp_plan->predicted_iteration_s;
  char buf[192];
  std::snprintf(buf, sizeof buf, "; cost model: %.3f -> %.3f s per iteration, %d slots moved; ",
                tp_plan->current_iteration_s, tp_plan->predicted_iteration_s, tp_plan->moved_slots);
  p.reason = why + buf + tp_plan->reason;
  return p;
}

std::optional<Plan> Planner::s4_plan(const std::string& why) {
  Plan p;
  p.strategy = Strategy::kS4;
  p.action = PlanAction::kApply;
  p.incident = incident_;
  if (loc_.culprit >= 0 && loc_.cause != Cause::kCommunication) {
    p.exclude_ranks.push_back(loc_.culprit);
    if (loc_.culprit_node >= 0) p.exclude_nodes.push_back(loc_.culprit_node);
  } else {
    for (const SuspectLink& l : loc_.suspect_links) {
      for (int n : {l.node_a, l.node_b}) {
        if (std::find(p.exclude_nodes.begin(), p.exclude_nodes.end(), n) == p.exclude_nodes.end()) p.exclude_nodes.push_back(n);
      }
    }
  }
  if (p.exclude_ranks.empty() && p.exclude_nodes.empty()) {  // nothing named: a restart would change nothing
    controller_.decline(mitigate::Strategy::kS4Restart);
    return std::nullopt;
  }
  p.reason = why + "; restart from the checkpoint without " +
             (p.exclude_ranks.empty() ? std::string() : "rank(s) " + fmt_vec(p.exclude_ranks) + " on ") + "node(s) " +
             fmt_vec(p.exclude_nodes);
  return p;
}

std::optional<Plan> Planner::observe(double iteration_s) {
  elapsed_s_ += iteration_s;
  const auto d = controller_.observe({iteration_s, present_});
  if (d.action == mitigate::SkiRentalAction::kStay) return std::nullopt;
  if (d.action == mitigate::SkiRentalAction::kRevert) {
    if (reverted_to_original()) return std::nullopt;
    Plan p;
    p.strategy = Strategy::kS1;
    p.action = PlanAction::kRevert;
    p.incident = incident_;
    p.microbatches = original_;
    if (placement_ != original_placement_) {
      p.placement = nlohmann::json::array();
      for (const auto& r : mitigate::rank_roles(original_placement_, layout_.tp, layout_.dp, layout_.gpus_per_node)) {
        p.placement.push_back({{"rank", r.rank}, {"tp", r.tp}, {"dp", r.dp}, {"pp", r.pp}});
      }
    }
    p.reason = d.reason;
    return p;
  }
  for (const Remedy& r : remedies()) {
    if (r.rung == d.strategy) return (this->*r.build)(d.reason);
  }
  return std::nullopt;
}

void Planner::applied(const Plan& plan) {
  if (!plan.microbatches.empty()) current_ = plan.microbatches;
  if (plan.placement.is_array() && layout_.gpus_per_node > 0) {
    // Back from per-rank roles to the role of each slot (TP group): its first rank's.
    mitigate::Placement placed(placement_.size());
    const int T = layout_.tp;
    for (const auto& r : plan.placement) {
      const int rank = r.value("rank", -1);
      if (rank >= 0 && rank % T == 0 && static_cast<std::size_t>(rank / T) < placed.size()) {
        placed[static_cast<std::size_t>(rank / T)] = {r.value("dp", 0), r.value("pp", 0)};
      }
    }
    if (!mitigate::placement_error(placed, layout_.dp, layout_.pp)) placement_ = placed;
  }
  if (!reverted_to_original()) mitigated_ = true;
}

void Planner::rejected(const Plan& plan) {
  for (const Remedy& r : remedies()) {
    if (r.strategy == plan.strategy) controller_.decline(r.rung);
  }
}

}  // namespace greyhound::master
