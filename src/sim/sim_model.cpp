#include "sim/sim_model.h"

#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

#include "common/text.h"

namespace greyhound::sim {

SimModel SimModel::parse(const nlohmann::json& j) {
  SimModel m;
  if (!j.is_object()) throw SimModelError("GREYHOUND_SIM_MODEL: must be a JSON object");
  for (const auto& item : j.items()) {
    const std::string& key = item.key();
    const nlohmann::json& v = item.value();
    auto num = [&](double lo, double hi) {
      if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < lo || v.get<double>() > hi) {
        throw SimModelError("GREYHOUND_SIM_MODEL." + printable(key, 64) + ": must be a number in [" + std::to_string(lo) +
                            ", " + std::to_string(hi) + "]");
      }
      return v.get<double>();
    };
    if (key == "gpus_per_node") {
      if (!v.is_number_integer() || v.get<long long>() < 1 || v.get<long long>() > 1024) {
        throw SimModelError("GREYHOUND_SIM_MODEL.gpus_per_node: must be an integer in [1, 1024]");
      }
      m.gpus_per_node = static_cast<int>(v.get<long long>());
    } else if (key == "intra_bw_MBps") {
      m.intra_bw_MBps = num(1e-6, 1e9);
    } else if (key == "inter_bw_MBps") {
      m.inter_bw_MBps = num(1e-6, 1e9);
    } else if (key == "intra_lat_us") {
      m.intra_lat_us = num(0, 1e7);
    } else if (key == "inter_lat_us") {
      m.inter_lat_us = num(0, 1e7);
    } else if (key == "gemm_gflops") {
      m.gemm_gflops = num(1e-9, 1e9);
    } else if (key == "mem_bw_MBps") {
      m.mem_bw_MBps = num(1e-6, 1e9);
    } else if (key == "launch_us") {
      m.launch_us = num(0, 1e7);
    } else if (key == "compute_capability") {
      if (!v.is_number_integer() || v.get<long long>() < 10 || v.get<long long>() > 199) {
        throw SimModelError("GREYHOUND_SIM_MODEL.compute_capability: must be an integer in [10, 199] (major * 10 + minor)");
      }
      m.compute_capability = static_cast<int>(v.get<long long>());
    } else {
      throw SimModelError("GREYHOUND_SIM_MODEL." + printable(key, 64) + ": unknown field");
    }
  }
  return m;
}

nlohmann::json SimModel::to_json() const {
  return {{"gpus_per_node", gpus_per_node}, {"intra_bw_MBps", intra_bw_MBps}, {"inter_bw_MBps", inter_bw_MBps},
          {"intra_lat_us", intra_lat_us},   {"inter_lat_us", inter_lat_us},   {"gemm_gflops", gemm_gflops},
          {"mem_bw_MBps", mem_bw_MBps},     {"launch_us", launch_us},         {"compute_capability", compute_capability}};
}

double link_bandwidth_Bps(const SimModel& m, const FaultSchedule& f, int a, int b, double t_s) {
  if (a == b) return m.intra_bw_MBps * 1e6;
  return m.inter_bw_MBps * 1e6 * f.link_factor(a, b, t_s);
}

double link_latency_s(const SimModel& m, int a, int b) {
  return (a == b ? m.intra_lat_us : m.inter_lat_us) * 1e-6;
}

double collective_seconds(const SimModel& m, const FaultSchedule& f, Op op, std::span<const int> nodes,
                          std::uint64_t bytes, double t_s) {
  const std::size_t n = nodes.size();
  if (n <= 1) return m.intra_lat_us * 1e-6;
  double bw = 1e300;
  double lat = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const int a = nodes[i];
    const int b = nodes[(i + 1) % n];
    bw = std::min(bw, link_bandwidth_Bps(m, f, a, b, t_s));
    lat = std::max(lat, link_latency_s(m, a, b));
  }
  const double steps = static_cast<double>(n - 1);
  const double b = static_cast<double>(bytes);
  switch (op) {
    case Op::kAllReduce:
      return 2.0 * steps * (lat + b / static_cast<double>(n) / bw);
    case Op::kBroadcast:
    case Op::kBcast:
    case Op::kReduce:
      return steps * lat + b / bw;
    default:  // AllGather, ReduceScatter, AlltoAll, Gather, Scatter
      return steps * (lat + b / bw);
  }
}

double p2p_seconds(const SimModel& m, const FaultSchedule& f, int from, int to, std::uint64_t bytes, double t_s) {
  return link_latency_s(m, from, to) + static_cast<double>(bytes) / link_bandwidth_Bps(m, f, from, to, t_s);
}

double gemm_seconds(const SimModel& m, double flops, double gpu_slowdown) {
  return flops / (m.gemm_gflops * 1e9) * gpu_slowdown;
}

double memory_seconds(const SimModel& m, std::uint64_t bytes, double gpu_slowdown) {
  return static_cast<double>(bytes) / (m.mem_bw_MBps * 1e6) * gpu_slowdown;
}

}  // namespace greyhound::sim
