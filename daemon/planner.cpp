#include "daemon/planner.h"

#include <algorithm>
#include <cstdio>
#include <numeric>

#include "greyhound/mitigate/microbatch_solver.h"

namespace greyhound::master {
namespace {

bool can(const JobLayout& l, const char* s) {
  return std::find(l.capabilities.begin(), l.capabilities.end(), s) != l.capabilities.end();
}

std::string fmt_vec(const std::vector<int>& v) {
  std::string s = "[";
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}

}  // namespace

std::optional<Planner> Planner::start(const PlannerConfig& config, const Incident& incident, const Localisation& loc,
                                      const JobLayout& layout, std::string* why) {
  mitigate::SkiRentalIncident si;
  si.cause = loc.cause == "computation"     ? mitigate::FailSlowCause::kComputation
             : loc.cause == "communication" ? mitigate::FailSlowCause::kCommunication
                                            : mitigate::FailSlowCause::kBoth;
  si.healthy_iteration_s = incident.before_ms * 1e-3;
  si.s2_available = can(layout, "S2") && loc.replica_ms_per_microbatch.size() == static_cast<std::size_t>(layout.dp) &&
                    layout.dp > 1;
  si.s3_available = can(layout, "S3");
  si.s4_available = can(layout, "S4");
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
  p.update(loc);
  return p;
}

Planner::Planner(const PlannerConfig& c, mitigate::SkiRental s, const Incident& i, const JobLayout& l)
    : config_(c), controller_(std::move(s)), incident_(i.id), layout_(l), original_(l.microbatches), current_(l.microbatches) {}

void Planner::update(const Localisation& loc) {
  // Still there: a straggler is still named (a remedy may balance the replicas, not the straggler's own
  // group), or the replicas are still skewed, or a communication suspect remains.
  present_ = loc.culprit >= 0 || loc.cause != "unknown" || loc.replica_skew >= config_.still_slow_skew;
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
  p.strategy = "S2";
  p.action = "apply";
  p.incident = incident_;
  for (auto m : sol->microbatches) p.microbatches.push_back(static_cast<int>(m));
  char buf[256];
  std::snprintf(buf, sizeof buf, "%s; replica times per micro-batch give makespan %.1f -> %.1f ms with %s", why.c_str(),
                now_ms, sol->makespan_ms, fmt_vec(p.microbatches).c_str());
  p.reason = buf;
  p.predicted_iteration_s = 0;
  return p;
}

std::optional<Plan> Planner::observe(double iteration_s) {
  const auto d = controller_.observe({iteration_s, present_});
  if (d.action == mitigate::SkiRentalAction::kStay) return std::nullopt;
  if (d.action == mitigate::SkiRentalAction::kRevert) {
    if (current_ == original_) return std::nullopt;
    Plan p;
    p.strategy = "S1";
    p.action = "revert";
    p.incident = incident_;
    p.microbatches = original_;
    p.reason = d.reason;
    return p;
  }
  switch (d.strategy) {
    case mitigate::Strategy::kS2Microbatches:
      return s2_plan(d.reason);
    case mitigate::Strategy::kS3Topology:
    case mitigate::Strategy::kS4Restart: {
      Plan p;  // the job said it can apply these (layout capabilities); the plan names the strategy
      p.strategy = std::string(mitigate::strategy_name(d.strategy));
      p.incident = incident_;
      p.reason = d.reason;
      return p;
    }
    default:
      return std::nullopt;
  }
}

void Planner::applied(const Plan& plan) {
  if (!plan.microbatches.empty()) current_ = plan.microbatches;
  if (current_ != original_) mitigated_ = true;
}

void Planner::rejected(const Plan& plan) {
  if (const auto s = mitigate::strategy_from_name(plan.strategy)) controller_.decline(*s);
}

}  // namespace greyhound::master
