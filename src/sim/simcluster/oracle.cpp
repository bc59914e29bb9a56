#include "sim/simcluster/oracle.h"

#include <algorithm>
#include <cstdio>
#include <numeric>

#include "greyhound/mitigate/cost_model.h"
#include "greyhound/mitigate/microbatch_solver.h"
#include "greyhound/mitigate/topology_planner.h"
#include "store/placement_roles.h"

namespace greyhound::sim {
namespace {

std::string fmt_vec(const std::vector<int>& v) {
  std::string s = "[";
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}

std::string fmt_vec(const std::vector<double>& v) {
  std::string s = "[";
  char buf[32];
  for (std::size_t i = 0; i < v.size(); ++i) {
    std::snprintf(buf, sizeof buf, "%s%.3g", i ? "," : "", v[i]);
    s += buf;
  }
  return s + "]";
}

// "gpu rank 3 x1.5, link 0-1 at 3%": the faults active at t_s.
std::string active_faults(const FaultSchedule& faults, double t_s) {
  std::string s;
  char buf[96];
  for (const Fault& f : faults.faults()) {
    if (!f.active(t_s)) continue;
    if (f.kind == FaultKind::kLink) {
      std::snprintf(buf, sizeof buf, "link %d-%d at %.0f%%", f.nodes[0], f.nodes[1], 100.0 * f.bandwidth_factor);
    } else if (f.kind == FaultKind::kKill) {
      std::snprintf(buf, sizeof buf, "rank %d killed", f.rank);
    } else if (f.kind == FaultKind::kHang) {
      std::snprintf(buf, sizeof buf, "rank %d hung", f.rank);
    } else {
      std::snprintf(buf, sizeof buf, "%s rank %d x%.3g", fault_kind_name(f.kind), f.rank, f.slowdown);
    }
    s += (s.empty() ? "" : ", ") + std::string(buf);
  }
  return s.empty() ? "none" : s;
}

bool advertises(const OracleJob& job, Strategy s) {
  return std::find(job.capabilities.begin(), job.capabilities.end(), std::string(name(s))) != job.capabilities.end();
}

}  // namespace

std::vector<double> replica_slowdowns(const ParallelShape& shape, const FaultSchedule& faults, double t_s) {
  std::vector<double> out(static_cast<std::size_t>(shape.dp), 1.0);
  for (int r = 0; r < shape.world(); ++r) {
    const double s = faults.gpu_slowdown(r, t_s) * faults.cpu_slowdown(r, t_s);
    double& replica = out[static_cast<std::size_t>(shape.coords(r).dp)];
    replica = std::max(replica, s);
  }
  return out;
}

std::vector<double> fault_change_times(const FaultSchedule& faults) {
  std::vector<double> out;
  for (const Fault& f : faults.faults()) {
    out.push_back(f.start_s);
    out.push_back(f.end_s);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

Result<std::optional<Plan>> oracle_plan(const OracleJob& job, const FaultSchedule& faults, double t_s,
                                        const std::vector<int>& in_force) {
  const std::size_t D = static_cast<std::size_t>(job.shape.dp);
  if (in_force.size() != D || job.initial_microbatches.size() != D) {
    return Error{Errc::kInvalid, "the allocations must have one entry per DP replica (" +
                                               std::to_string(D) + "): in force " + fmt_vec(in_force) +
                                               ", initial " + fmt_vec(job.initial_microbatches), {}};
  }
  const long total = std::accumulate(in_force.begin(), in_force.end(), 0L);
  if (total != std::accumulate(job.initial_microbatches.begin(), job.initial_microbatches.end(), 0L)) {
    return Error{Errc::kInvalid, "the allocation in force " + fmt_vec(in_force) +
                                               " changes the global batch of " + fmt_vec(job.initial_microbatches), {}};
  }
  const std::vector<double> t = replica_slowdowns(job.shape, faults, t_s);
  const bool skewed = *std::max_element(t.begin(), t.end()) > *std::min_element(t.begin(), t.end());
  Plan p;
  p.strategy = Strategy::kS2;
  const std::string context = "oracle: faults active: " + active_faults(faults, t_s) + "; replica times per micro-batch " +
                              fmt_vec(t) + " (healthy 1)";
  if (!skewed) {
    if (in_force == job.initial_microbatches) return std::optional<Plan>{};
    p.action = PlanAction::kRevert;
    p.microbatches = job.initial_microbatches;
    p.reason = context + "; back to " + fmt_vec(p.microbatches);
    return std::optional<Plan>{std::move(p)};
  }
  if (!advertises(job, Strategy::kS2) || job.shape.dp < 2) return std::optional<Plan>{};
  mitigate::MicrobatchProblem pr;
  pr.time_per_microbatch_ms = t;
  pr.total_microbatches = total;
  for (int m : in_force) pr.current.push_back(m);
  const int P = job.shape.pp;
  pr.pipeline_depth = mitigate::microbatch_step(job.microbatch_multiple, P, in_force);  // as the planner
  pr.fill_slots = P - 1;  // the makespan greyhound's planner solves for too
  mitigate::MicrobatchSolver solver;
  auto sol = solver.solve(pr);
  if (!sol) return Error{Errc::kInvalid, "S2 for " + fmt_vec(t) + ": " + sol.error(), {}};
  std::vector<int> split;
  for (auto m : sol->microbatches) split.push_back(static_cast<int>(m));
  const double now = mitigate::makespan_ms(pr, pr.current);  // 1F1B: max (m + P - 1) t
  if (split == in_force || sol->makespan_ms >= now * 0.99) return std::optional<Plan>{};
  p.action = split == job.initial_microbatches ? PlanAction::kRevert : PlanAction::kApply;
  p.microbatches = split;
  char buf[96];
  std::snprintf(buf, sizeof buf, "; makespan %.3g -> %.3g with ", now, sol->makespan_ms);
  p.reason = context + buf + fmt_vec(split);
  return std::optional<Plan>{std::move(p)};
}

std::optional<Plan> oracle_link_plan(const OracleJob& job, const FaultSchedule& faults, double t_s,
                                     const std::vector<int>& in_force_microbatches,
                                     const mitigate::Placement& in_force_placement) {
  const int T = job.shape.tp, D = job.shape.dp, P = job.shape.pp, G = job.gpus_per_node;
  const int world = job.shape.world();
  if (!advertises(job, Strategy::kS3) || G <= 0 || G % T != 0 || world % G != 0 ||
      in_force_microbatches.size() != static_cast<std::size_t>(D) || mitigate::placement_error(in_force_placement, D, P)) {
    return std::nullopt;
  }
  const auto roles_json = [&](const mitigate::Placement& placement) { return store::placement_json(placement, T, D, G); };
  constexpr double kInterBps = 1e9, kIntraBps = 1e10;
  mitigate::ClusterState cluster;
  cluster.nodes = world / G;
  cluster.gpus_per_node = G;
  cluster.inter_node_bytes_per_s = kInterBps;
  cluster.intra_node_bytes_per_s = kIntraBps;
  for (const Fault& f : faults.faults()) {
    if (f.kind != FaultKind::kLink || !f.active(t_s) || f.nodes[0] >= cluster.nodes || f.nodes[1] >= cluster.nodes) continue;
    cluster.links.push_back({std::min(f.nodes[0], f.nodes[1]), std::max(f.nodes[0], f.nodes[1]), kInterBps * f.bandwidth_factor});
  }
  const mitigate::Placement megatron = mitigate::megatron_placement(D, P);
  if (cluster.links.empty()) {
    if (in_force_placement == megatron) return std::nullopt;
    Plan p;
    p.strategy = Strategy::kS1;
    p.action = PlanAction::kRevert;
    p.placement = roles_json(megatron);
    p.reason = "oracle: no link congested any more: back to Megatron's placement";
    return p;
  }
  mitigate::JobShape shape;
  shape.tp = T;
  shape.dp = D;
  shape.pp = P;
  shape.stage_compute_s.assign(static_cast<std::size_t>(P), 0.050);
  for (int m : in_force_microbatches) shape.microbatches.push_back(m);
  shape.activation_bytes = P > 1 ? 1e6 : 0.0;
  if (D > 1) shape.gradient_bytes.assign(static_cast<std::size_t>(P), 8e6);
  auto model = mitigate::CostModel::create(cluster, shape);
  if (!model) return std::nullopt;
  mitigate::TopologyPlanOptions opt;
  opt.pause_s = 0;
  opt.horizon_s = 3600;
  mitigate::TopologyPlanner planner(model.value());
  auto plan = planner.plan(in_force_placement, opt);
  if (!plan || !plan->worthwhile || plan->placement == in_force_placement) return std::nullopt;
  Plan p;
  p.strategy = Strategy::kS3;
  p.action = plan->placement == megatron ? PlanAction::kRevert : PlanAction::kApply;
  p.placement = roles_json(plan->placement);
  char buf[160];
  std::snprintf(buf, sizeof buf, "; nominal cost model: %.4g -> %.4g s per iteration, %d slots moved",
                plan->current_iteration_s, plan->predicted_iteration_s, plan->moved_slots);
  p.reason = "oracle: faults active: " + active_faults(faults, t_s) + buf;
  return p;
}

std::optional<OracleOutcome> oracle_outcome(const Plan& plan, const std::vector<PlanAck>& acks, int world) {
  PlanOutcome o;
  o.epoch = plan.epoch;
  o.strategy = plan.strategy;
  o.action = plan.action;
  o.ranks = world;
  for (const PlanAck& a : acks) {
    if (a.epoch != plan.epoch) continue;
    if (a.status == AckStatus::kApplied) ++o.applied;
    if (a.status == AckStatus::kUnsupported) ++o.unsupported;
    if (a.status == AckStatus::kRejected) ++o.rejected;
    o.from_iteration = std::max(o.from_iteration, a.iteration);
  }
  if (o.applied + o.unsupported + o.rejected < world) return std::nullopt;
  return OracleOutcome{o.applied == world ? event_type::kPlanApplied : event_type::kPlanRejected, o};
}

}  // namespace greyhound::sim
