#include "greyhound/mitigate/cost_model.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace greyhound::mitigate {
namespace {

bool positive(double v) { return std::isfinite(v) && v > 0.0; }
bool non_negative(double v) { return std::isfinite(v) && v >= 0.0; }

}  // namespace

Result<CostModel> CostModel::create(ClusterState c, JobShape j) {
  using R = Result<CostModel>;
  if (c.nodes < 1 || c.gpus_per_node < 1) return R::failure("cluster needs nodes >= 1 and gpus_per_node >= 1");
  if (j.tp < 1 || j.dp < 1 || j.pp < 1) return R::failure("tp, dp and pp must be >= 1");
  if (c.gpus_per_node % j.tp != 0) {
    return R::failure("tp " + std::to_string(j.tp) + " does not divide gpus_per_node " +
                      std::to_string(c.gpus_per_node) + " (TP stays inside a node)");
  }
  const long long slots = static_cast<long long>(c.nodes) * (c.gpus_per_node / j.tp);
  if (static_cast<long long>(j.dp) * j.pp != slots) {
    return R::failure("dp x pp = " + std::to_string(static_cast<long long>(j.dp) * j.pp) + " but the nodes hold " +
                      std::to_string(slots) + " TP groups");
  }
  const auto gpus = static_cast<std::size_t>(c.nodes) * static_cast<std::size_t>(c.gpus_per_node);
  if (c.gpu_slowdown.empty()) c.gpu_slowdown.assign(gpus, 1.0);
  if (c.gpu_slowdown.size() != gpus) {
    return R::failure("gpu_slowdown has " + std::to_string(c.gpu_slowdown.size()) + " entries, expected " +
                      std::to_string(gpus));
  }
  for (std::size_t g = 0; g < gpus; ++g) {
    if (!positive(c.gpu_slowdown[g])) return R::failure("gpu_slowdown of GPU " + std::to_string(g) + " is not > 0");
  }
  if (!positive(c.inter_node_bytes_per_s) || !positive(c.intra_node_bytes_per_s)) {
    return R::failure("inter- and intra-node bandwidths must be finite and > 0");
  }
  for (const auto& l : c.links) {
    if (l.node_a < 0 || l.node_a >= c.nodes || l.node_b < 0 || l.node_b >= c.nodes || l.node_a == l.node_b) {
      return R::failure("link " + std::to_string(l.node_a) + "-" + std::to_string(l.node_b) +
                        " does not join two different nodes of the cluster");
    }
    if (!positive(l.bytes_per_s)) {
      return R::failure("link " + std::to_string(l.node_a) + "-" + std::to_string(l.node_b) +
                        " bandwidth must be finite and > 0");
    }
  }
  const auto pp = static_cast<std::size_t>(j.pp);
  if (j.stage_compute_s.size() != pp) return R::failure("stage_compute_s needs one entry per stage");
  for (double v : j.stage_compute_s) {
    if (!non_negative(v)) return R::failure("stage_compute_s entries must be finite and >= 0");
  }
  if (j.gradient_bytes.empty()) j.gradient_bytes.assign(pp, 0.0);
  if (j.gradient_bytes.size() != pp) return R::failure("gradient_bytes needs one entry per stage");
  for (double v : j.gradient_bytes) {
    if (!non_negative(v)) return R::failure("gradient_bytes entries must be finite and >= 0");
  }
  if (!non_negative(j.activation_bytes)) return R::failure("activation_bytes must be finite and >= 0");
  if (j.microbatches.size() != static_cast<std::size_t>(j.dp)) {
    return R::failure("microbatches needs one entry per DP replica");
  }
  for (auto m : j.microbatches) {
    if (m < 1) return R::failure("every DP replica needs at least one micro-batch");
  }
  return CostModel(std::move(c), std::move(j));
}

CostModel::CostModel(ClusterState cluster, JobShape job) : cluster_(std::move(cluster)), job_(std::move(job)) {
  const int s_count = slots();
  slot_slowdown_.assign(static_cast<std::size_t>(s_count), 0.0);
  for (int s = 0; s < s_count; ++s) {
    const int node = node_of_slot(s);
    const int first = node * cluster_.gpus_per_node + (s % slots_per_node()) * job_.tp;
    double worst = 0.0;
    for (int g = first; g < first + job_.tp; ++g) {
      worst = std::max(worst, cluster_.gpu_slowdown[static_cast<std::size_t>(g)]);
    }
    slot_slowdown_[static_cast<std::size_t>(s)] = worst;
  }
  const auto n = static_cast<std::size_t>(cluster_.nodes);
  node_bw_.assign(n * n, cluster_.inter_node_bytes_per_s);
  for (std::size_t a = 0; a < n; ++a) node_bw_[a * n + a] = cluster_.intra_node_bytes_per_s;
  for (const auto& l : cluster_.links) {
    const auto a = static_cast<std::size_t>(l.node_a);
    const auto b = static_cast<std::size_t>(l.node_b);
    node_bw_[a * n + b] = l.bytes_per_s;
    node_bw_[b * n + a] = l.bytes_per_s;
  }
}

double CostModel::bandwidth(int slot_a, int slot_b) const {
  const auto n = static_cast<std::size_t>(cluster_.nodes);
  return node_bw_[static_cast<std::size_t>(node_of_slot(slot_a)) * n + static_cast<std::size_t>(node_of_slot(slot_b))];
}

double CostModel::replica_pipeline_s(const std::vector<int>& slot_of_role, int r, std::int64_t microbatches,
                                     double* bottleneck_s) const {
  const int dp = job_.dp;
  double sum = 0.0;
  double worst = 0.0;
  for (int s = 0; s < job_.pp; ++s) {
    const int slot = slot_of_role[static_cast<std::size_t>(r + dp * s)];
    const double compute = job_.stage_compute_s[static_cast<std::size_t>(s)] * slot_slowdown(slot);
    sum += compute;
    worst = std::max(worst, compute);
    if (s + 1 < job_.pp) {
      const int next = slot_of_role[static_cast<std::size_t>(r + dp * (s + 1))];
      const double edge = 2.0 * job_.activation_bytes / bandwidth(slot, next);
      sum += edge;
      worst = std::max(worst, edge);
    }
  }
  if (bottleneck_s != nullptr) *bottleneck_s = worst;
  return sum + static_cast<double>(microbatches - 1) * worst;
}

IterationEstimate CostModel::estimate(const Placement& placement) const {
  return estimate(placement, job_.microbatches);
}

IterationEstimate CostModel::estimate(const Placement& placement, std::span<const std::int64_t> microbatches) const {
  const int dp = job_.dp;
  std::vector<int> slot_of_role(static_cast<std::size_t>(slots()));
  for (std::size_t s = 0; s < placement.size(); ++s) {
    slot_of_role[static_cast<std::size_t>(placement[s].dp + dp * placement[s].pp)] = static_cast<int>(s);
  }
  IterationEstimate e;
  for (int r = 0; r < dp; ++r) {
    const double t = replica_pipeline_s(slot_of_role, r, microbatches[static_cast<std::size_t>(r)], nullptr);
    e.load_s += t;
    if (t > e.pipeline_s) {
      e.pipeline_s = t;
      e.slowest_replica = r;
    }
  }
  if (dp > 1) {
    for (int s = 0; s < job_.pp; ++s) {
      const double bytes = job_.gradient_bytes[static_cast<std::size_t>(s)];
      if (bytes <= 0.0) continue;
      const double volume = 2.0 * (dp - 1) / dp * bytes;  // ring all-reduce: per link, each way
      double slowest_link = 0.0;
      for (int r = 0; r < dp; ++r) {
        const int a = slot_of_role[static_cast<std::size_t>(r + dp * s)];
        const int b = slot_of_role[static_cast<std::size_t>((r + 1) % dp + dp * s)];
        const double bw = bandwidth(a, b);
        slowest_link = r == 0 ? bw : std::min(slowest_link, bw);
        e.load_s += volume / bw;
      }
      const double t = volume / slowest_link;
      if (t > e.dp_sync_s) {
        e.dp_sync_s = t;
        e.slowest_sync_stage = s;
      }
    }
  }
  e.iteration_s = e.pipeline_s + e.dp_sync_s;
  return e;
}

std::vector<double> CostModel::replica_microbatch_s(const Placement& placement) const {
  const int dp = job_.dp;
  std::vector<int> slot_of_role(static_cast<std::size_t>(slots()));
  for (std::size_t s = 0; s < placement.size(); ++s) {
    slot_of_role[static_cast<std::size_t>(placement[s].dp + dp * placement[s].pp)] = static_cast<int>(s);
  }
  std::vector<double> out(static_cast<std::size_t>(dp));
  for (int r = 0; r < dp; ++r) replica_pipeline_s(slot_of_role, r, 1, &out[static_cast<std::size_t>(r)]);
  return out;
}

}  // namespace greyhound::mitigate
