// Timing model of the simulated cluster: ranks on virtual nodes of G GPUs, links with latency and
// bandwidth (fast inside a node, slower between nodes), ring-algorithm collective durations governed by
// their slowest link, GEMM time = FLOPs / modeled rate. Pure: values in, seconds out.
//
// Modeled rates are deliberately small (MB/s, GFLOP/s) so that the tiny tensors the CPU stand-ins really
// compute still last milliseconds: modeled time must dominate the stand-ins' real CPU cost.
//
// GREYHOUND_SIM_MODEL (inline JSON or a file path) overrides any of the fields below; unknown fields and
// bad values are errors naming the field.
#pragma once

#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "greyhound/ops.h"
#include "sim/fault_schedule.h"

namespace greyhound::sim {

struct SimModel {
  int gpus_per_node = 8;
  double intra_bw_MBps = 400.0;   // per direction, one link inside a node (NVLink stand-in)
  double inter_bw_MBps = 4.0;     // per direction, between two nodes (network stand-in)
  double intra_lat_us = 20.0;
  double inter_lat_us = 100.0;
  double gemm_gflops = 0.035;     // per GPU
  double mem_bw_MBps = 400.0;     // level-1 BLAS and memset/memcpy on the device
  double launch_us = 30.0;        // host cost of one kernel/collective launch (scaled by CPU contention)
  int compute_capability = 90;    // of every GPU, major * 10 + minor (9.0: Hopper; FP8 GEMMs from 8.9 on)

  static SimModel parse(const nlohmann::json& j);  // throws std::invalid_argument naming the field
  nlohmann::json to_json() const;
};

class SimModelError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// Bandwidth (bytes/s) and latency (s) of the link between two nodes at time t_s.
double link_bandwidth_Bps(const SimModel& m, const FaultSchedule& f, int node_a, int node_b, double t_s);
double link_latency_s(const SimModel& m, int node_a, int node_b);

// Duration of a collective over members whose nodes are given in communicator-rank order (the ring
// order). `bytes` is count * datatype size as NCCL's count argument defines it (AllGather: per-rank send;
// ReduceScatter: per-rank receive). Ring algorithm: AllReduce 2(n-1) steps of bytes/n; AllGather,
// ReduceScatter, AlltoAll, Gather, Scatter n-1 steps of `bytes`; Broadcast/Reduce pipelined: (n-1)
// latencies + bytes/bandwidth. Every step runs at the ring's slowest link.
double collective_seconds(const SimModel& m, const FaultSchedule& f, Op op, std::span<const int> member_nodes,
                          std::uint64_t bytes, double t_s);
double p2p_seconds(const SimModel& m, const FaultSchedule& f, int node_from, int node_to, std::uint64_t bytes,
                   double t_s);
double gemm_seconds(const SimModel& m, double flops, double gpu_slowdown);
double memory_seconds(const SimModel& m, std::uint64_t bytes, double gpu_slowdown);

}  // namespace greyhound::sim
