#include "daemon/planner.h"

#include "store/placement_roles.h"

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

mitigate::FailSlowCause ski_cause(Cause c) {
  switch (c) {
    case Cause::kComputation:
    case Cause::kHost: return mitigate::FailSlowCause::kComputation;
    case Cause::kCommunication: return mitigate::FailSlowCause::kCommunication;
    case Cause::kUnknown: break;
  }
  return mitigate::FailSlowCause::kBoth;
}

Planner::Planner(const PlannerConfig& c, const JobLayout& l) : config_(c), layout_(l) {
  original_.microbatches = l.initial_microbatches.size() == l.microbatches.size() ? l.initial_microbatches : l.microbatches;
  original_.placement = store::initial_placement(l);  // a job restarted by an S3 plan started with its placement
  current_.microbatches = l.microbatches;
  current_.placement = store::placement_in_force(l);  // a job that applied an S3 plan names it
}

bool Planner::available(Strategy s, Cause cause) const {
  if (s == Strategy::kS1) return true;
  if (!can(layout_, s)) return false;
  switch (s) {
    case Strategy::kS1: return true;
    case Strategy::kS2: return layout_.dp > 1 && cause != Cause::kCommunication;
    case Strategy::kS3:
      // A job that applies S3 by restarting comes back with its initial micro-batches: not while a split is
      // in force, which the restart would drop.
      return layout_.gpus_per_node > 0 && layout_.gpus_per_node % layout_.tp == 0 &&
             layout_.world % layout_.gpus_per_node == 0 && !(layout_.s3_by_restart && split_in_force());
    case Strategy::kS4: return true;
  }
  return false;
}

nlohmann::json Planner::placement_json(const mitigate::Placement& placement) const {
  return store::placement_json(placement, layout_.tp, layout_.dp, layout_.gpus_per_node);
}

std::optional<Plan> Planner::s2(const Localisation& loc, double iteration_s, const std::string& why) const {
  const std::vector<int>& cur = current_.microbatches;
  const std::vector<double>& t = loc.replica_ms_per_microbatch;
  if (t.size() != cur.size() || cur.empty()) return std::nullopt;
  mitigate::MicrobatchProblem pr;
  pr.time_per_microbatch_ms = t;
  for (int m : cur) {
    pr.total_microbatches += m;
    pr.current.push_back(m);
  }
  // The multiple the job's schedule needs (it says; else the paper's multiples of P while the split has them).
  pr.pipeline_depth = mitigate::microbatch_step(layout_.microbatch_multiple, layout_.pp, cur);
  pr.fill_slots = layout_.pp - 1;  // t are slot times: a replica runs m + P - 1 slots (the makespan below)
  mitigate::MicrobatchSolver solver;
  auto sol = solver.solve(pr);
  if (!sol) return std::nullopt;
  // The 1F1B makespan of an allocation: its slowest replica's (m + P - 1) slots.
  const double now_ms = mitigate::makespan_ms(pr, pr.current);
  const double new_ms = sol->makespan_ms;
  if (!(now_ms > 0) || new_ms >= now_ms * 0.99) return std::nullopt;  // nothing better than what runs
  Plan p;
  p.strategy = Strategy::kS2;
  p.action = PlanAction::kApply;
  for (auto m : sol->microbatches) p.microbatches.push_back(static_cast<int>(m));
  if (p.microbatches == original_.microbatches) p.action = PlanAction::kRevert;
  p.predicted_iteration_s = iteration_s > 0 ? iteration_s * new_ms / now_ms : 0;
  char buf[256];
  std::snprintf(buf, sizeof buf, "%s; replica times per micro-batch give makespan %.1f -> %.1f ms with %s", why.c_str(),
                now_ms, new_ms, fmt_vec(p.microbatches).c_str());
  p.reason = buf;
  return p;
}

mitigate::SkiRentalConfig Planner::costs(double measured_s3_s) const {
  mitigate::SkiRentalConfig c = config_.ski;
  if (layout_.s3_estimate_s > 0) c.s3_pause_s = layout_.s3_estimate_s;
  if (layout_.s4_estimate_s > 0) c.s4_restart_s = layout_.s4_estimate_s;
  if (measured_s3_s > 0) c.s3_pause_s = measured_s3_s;
  // S3 by restart costs a restart, unless the job says what its own costs (a restart's apply_s times only the
  // checkpoint: not a measured switch).
  if (layout_.s3_by_restart && !(layout_.s3_estimate_s > 0)) c.s3_pause_s = c.s4_restart_s;
  return c;
}

void Planner::layout_updated(const JobLayout& l) {
  layout_.s3_estimate_s = l.s3_estimate_s;
  layout_.s4_estimate_s = l.s4_estimate_s;
  layout_.microbatch_multiple = l.microbatch_multiple;
  layout_.s3_by_restart = l.s3_by_restart;
}

std::optional<Plan> Planner::s3(const Localisation& loc, double iteration_s, double horizon_s, double pause_s, double min_gain,
                                const std::string& why) const {
  const int T = layout_.tp, D = layout_.dp, P = layout_.pp, G = layout_.gpus_per_node;
  if (G <= 0 || loc.replica_ms_per_microbatch.size() != static_cast<std::size_t>(D)) return std::nullopt;
  constexpr double kInterBps = 1e9, kIntraBps = 1e10;  // nominal: volumes below are derived at these rates
  std::vector<double> scratch;
  std::vector<double> times = loc.replica_ms_per_microbatch;
  const double healthy_slot_ms = analysis::median(times, scratch);
  if (!(healthy_slot_ms > 0)) return std::nullopt;

  mitigate::ClusterState cluster;
  cluster.nodes = layout_.world / G;
  cluster.gpus_per_node = G;
  cluster.inter_node_bytes_per_s = kInterBps;
  cluster.intra_node_bytes_per_s = kIntraBps;
  cluster.gpu_slowdown.assign(static_cast<std::size_t>(layout_.world), 1.0);
  if (loc.culprit >= 0 && loc.culprit < layout_.world && loc.culprit_replica >= 0 && loc.culprit_replica < D) {
    // The culprit's GPU, where the current placement puts its (tp, dp, pp).
    const RankCoords c = ParallelShape{T, D, P}.coords(loc.culprit);
    for (std::size_t s = 0; s < current_.placement.size(); ++s) {
      if (current_.placement[s].dp == c.dp && current_.placement[s].pp == c.pp) {
        cluster.gpu_slowdown[s * static_cast<std::size_t>(T) + static_cast<std::size_t>(c.tp)] =
            std::max(1.0, loc.replica_ms_per_microbatch[static_cast<std::size_t>(loc.culprit_replica)] / healthy_slot_ms);
      }
    }
  }
  // Suspect links: those the culprit's lateness does not explain (the localiser removed those).
  for (const SuspectLink& l : loc.suspect_links) {
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
  for (int m : current_.microbatches) {
    job.microbatches.push_back(m);
    m_total += m;
  }
  const double m_mean = static_cast<double>(m_total) / D;
  // PP: each edge carries activations forward and gradients back per micro-batch; DP: a ring all-reduce.
  job.activation_bytes = P > 1 ? loc.pp_transfer_ms * 1e-3 * kInterBps / (2.0 * m_mean) : 0.0;
  if (D > 1) job.gradient_bytes.assign(static_cast<std::size_t>(P), loc.dp_transfer_ms * 1e-3 * kInterBps * D / (2.0 * (D - 1)));
  auto model = mitigate::CostModel::create(cluster, job);
  if (!model) return std::nullopt;
  mitigate::TopologyPlanOptions opt;
  opt.pause_s = pause_s;
  opt.horizon_s = horizon_s;
  opt.straggler_slowdown = 1.0;
  mitigate::TopologyPlanner planner(model.value());
  auto tp_plan = planner.plan(current_.placement, opt);
  if (!tp_plan || !tp_plan->worthwhile || tp_plan->placement == current_.placement) return std::nullopt;
  if (!(tp_plan->current_iteration_s > 0) || tp_plan->predicted_iteration_s > tp_plan->current_iteration_s * (1.0 - min_gain)) {
    return std::nullopt;
  }
  Plan p;
  p.strategy = Strategy::kS3;
  p.action = PlanAction::kApply;
  p.placement = placement_json(tp_plan->placement);
  if (tp_plan->placement == original_.placement) p.action = PlanAction::kRevert;
  p.predicted_iteration_s = iteration_s > 0 ? iteration_s * tp_plan->predicted_iteration_s / tp_plan->current_iteration_s
                                            : tp_plan->predicted_iteration_s;
  char buf[192];
  std::snprintf(buf, sizeof buf, "; cost model: %.3f -> %.3f s per iteration, %d slots moved; ",
                tp_plan->current_iteration_s, tp_plan->predicted_iteration_s, tp_plan->moved_slots);
  p.reason = why + buf + tp_plan->reason;
  return p;
}

std::optional<Plan> Planner::s4(const FailSlow& f, double healthy_iteration_s, const std::string& why) const {
  Plan p;
  p.strategy = Strategy::kS4;
  p.action = PlanAction::kApply;
  p.incident = f.incident;
  if (f.rank >= 0 && f.cause != Cause::kCommunication) {
    p.exclude_ranks.push_back(f.rank);
    if (f.node >= 0) p.exclude_nodes.push_back(f.node);
  } else if (f.link_a >= 0) {
    p.exclude_nodes = {f.link_a, f.link_b};
  }
  if (p.exclude_ranks.empty() && p.exclude_nodes.empty()) return std::nullopt;  // nothing named: a restart changes nothing
  // What is left: the GPUs outside the excluded nodes (or without the excluded ranks, nodes unknown).
  const int T = layout_.tp, D = layout_.dp, P = layout_.pp, G = layout_.gpus_per_node;
  // A restart leaves out whole nodes (the scheduler cannot give a job part of one): a rank's own node too.
  const int lost = G > 0 ? G * std::max<int>(1, static_cast<int>(p.exclude_nodes.size()))
                         : static_cast<int>(p.exclude_ranks.size());
  const int dp_after = std::min(D, (layout_.world - lost) / std::max(1, T * P));
  if (dp_after < 1) return std::nullopt;
  int global = 0, largest = 0;
  for (int m : original_.microbatches) {
    global += m;
    largest = std::max(largest, m);
  }
  const int largest_after = (global + dp_after - 1) / dp_after;
  if (healthy_iteration_s > 0 && largest > 0) {
    p.predicted_iteration_s = healthy_iteration_s * static_cast<double>(largest_after + P - 1) / (largest + P - 1);
  }
  p.reason = why + "; restart from the checkpoint without " +
             (p.exclude_ranks.empty() ? std::string() : "rank(s) " + fmt_vec(p.exclude_ranks) + " on ") + "node(s) " +
             fmt_vec(p.exclude_nodes);
  char buf[160];
  std::snprintf(buf, sizeof buf, ", back with %d DP replica(s) of up to %d micro-batches (was %d of %d)", dp_after,
                largest_after, D, largest);
  p.reason += buf;
  return p;
}

std::optional<Plan> Planner::back_to(const JobConfig& to, bool microbatches, bool placement, const std::string& why) const {
  const bool split = microbatches && to.microbatches != current_.microbatches;
  const bool place = placement && to.placement != current_.placement && layout_.gpus_per_node > 0;
  if (!split && !place) return std::nullopt;
  Plan p;
  const bool original = (!split || to.microbatches == original_.microbatches) && (!place || to.placement == original_.placement);
  p.action = original ? PlanAction::kRevert : PlanAction::kApply;
  p.strategy = original ? Strategy::kS1 : (place ? Strategy::kS3 : Strategy::kS2);
  if (split) p.microbatches = to.microbatches;
  if (place) p.placement = placement_json(to.placement);
  p.reason = why;
  return p;
}

void Planner::applied(const Plan& plan) {
  if (!plan.microbatches.empty()) current_.microbatches = plan.microbatches;
  if (layout_.gpus_per_node > 0) {
    if (auto p = store::placement_of_plan(plan.placement, layout_.tp, layout_.dp, layout_.pp)) current_.placement = *p;
  }
  if (!plan.microbatches.empty()) layout_.microbatches = plan.microbatches;
}

}  // namespace greyhound::master
