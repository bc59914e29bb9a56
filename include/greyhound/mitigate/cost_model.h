// CostModel (S3's yardstick): predicted iteration time of a TP x DP x PP job for a placement of its
// (dp, pp) roles on nodes, from per-GPU speeds and per-link bandwidths. Pure and deterministic.
//
// Model (docs/mitigation.md explains the choices):
//  - A slot (one TP group, inside one node) computes a micro-batch of stage s (forward + backward) in
//    stage_compute_s[s] times the slowdown of its slowest GPU (TP is synchronous).
//  - Each DP replica runs its own 1F1B pipeline. Its elements are the stages' compute times and, between
//    consecutive stages, the PP edge time 2 * activation_bytes / bandwidth (activations forward, their
//    gradients backward). With m micro-batches the pipeline takes sum(elements) + (m - 1) * max(elements):
//    fill and drain once, then the bottleneck paces the rest. (Healthy 1 s stages, P = 3, m = 4: 6 s.)
//  - After the pipelines, every stage all-reduces its gradients over its DP group with a ring in dp
//    order: 2 (DP - 1) / DP * gradient_bytes / (slowest ring link). Stages sync concurrently.
//  - Iteration = slowest replica's pipeline + slowest stage's all-reduce.
// Links: between slots of one node, intra_node_bytes_per_s; between nodes, inter_node_bytes_per_s unless
// `links` lists the pair (measured or congested, either direction). Concurrent flows do not share links.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "greyhound/mitigate/placement.h"
#include "greyhound/mitigate/result.h"

namespace greyhound::mitigate {

struct NodeLink {
  int node_a = 0;
  int node_b = 0;
  double bytes_per_s = 0.0;
};

struct ClusterState {
  int nodes = 0;
  int gpus_per_node = 0;
  std::vector<double> gpu_slowdown;     // nodes * gpus_per_node, node-major; time multiplier (1 = healthy);
                                        // empty = all healthy
  double inter_node_bytes_per_s = 0.0;  // healthy bandwidth between two nodes, each direction
  double intra_node_bytes_per_s = 0.0;  // between two slots of one node (NVLink)
  std::vector<NodeLink> links;          // node pairs whose bandwidth differs from inter_node_bytes_per_s
};

struct JobShape {
  int tp = 1;
  int dp = 1;
  int pp = 1;
  std::vector<double> stage_compute_s;     // pp entries: forward + backward of one micro-batch, healthy GPU
  double activation_bytes = 0.0;           // per micro-batch and PP edge, each way
  std::vector<double> gradient_bytes;      // pp entries (empty = none): bytes each slot all-reduces over DP
  std::vector<std::int64_t> microbatches;  // dp entries: micro-batches of each DP replica
};

struct IterationEstimate {
  double iteration_s = 0.0;
  double pipeline_s = 0.0;     // slowest DP replica's pipeline
  double dp_sync_s = 0.0;      // slowest stage's gradient all-reduce
  int slowest_replica = 0;
  int slowest_sync_stage = -1;  // -1 when there is no DP sync (dp == 1 or no gradient bytes)
  // Sum of every replica's pipeline time and of every DP ring edge's transfer time (each edge timed
  // as if the ring ran at its speed). Not a time anything takes: a smooth companion of iteration_s
  // that still falls when one of two slow links of a ring is moved away, so that a search can cross
  // the plateaus of the max.
  double load_s = 0.0;
};

class CostModel {
 public:
  // Checks sizes, ranges and that dp * pp slots fill the nodes (nodes * gpus_per_node / tp).
  static Result<CostModel> create(ClusterState cluster, JobShape job);

  // `placement` must be valid (placement_error() == nullopt); the overload replaces job().microbatches.
  IterationEstimate estimate(const Placement& placement) const;
  IterationEstimate estimate(const Placement& placement, std::span<const std::int64_t> microbatches) const;

  // Time per micro-batch of each DP replica (its slowest pipeline element): what S2's solver takes as t_i.
  std::vector<double> replica_microbatch_s(const Placement& placement) const;

  int slots() const { return job_.dp * job_.pp; }
  int slots_per_node() const { return cluster_.gpus_per_node / job_.tp; }
  int node_of_slot(int slot) const { return slot / slots_per_node(); }
  double slot_slowdown(int slot) const { return slot_slowdown_[static_cast<std::size_t>(slot)]; }
  double bandwidth(int slot_a, int slot_b) const;  // bytes/s between two slots
  const ClusterState& cluster() const { return cluster_; }
  const JobShape& job() const { return job_; }

 private:
  CostModel(ClusterState cluster, JobShape job);
  double replica_pipeline_s(const std::vector<int>& slot_of_role, int replica, std::int64_t microbatches,
                            double* bottleneck_s) const;

  ClusterState cluster_;
  JobShape job_;
  std::vector<double> slot_slowdown_;  // per slot
  std::vector<double> node_bw_;        // nodes x nodes
};

}  // namespace greyhound::mitigate
