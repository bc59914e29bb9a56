// Fault schedule of the simulated cluster (GREYHOUND_SIM_FAULTS): GPU slowdown of a rank, bandwidth loss
// of the link between two virtual nodes, CPU contention of a rank; each active on [start_s, end_s) of
// the job's clock (seconds since GREYHOUND_SIM_EPOCH_NS). Pure: parsing and queries, no I/O.
//
// JSON: {"faults":[{"kind":"gpu","rank":3,"start_s":5,"end_s":20,"slowdown":1.7},
//                  {"kind":"link","nodes":[1,2],"start_s":30,"end_s":60,"bandwidth_factor":0.3},
//                  {"kind":"cpu","rank":0,"start_s":10,"end_s":30,"slowdown":1.3},
//                  {"kind":"kill","rank":5,"start_s":12},
//                  {"kind":"hang","rank":2,"start_s":20,"end_s":40}]}
// A kill fault makes the rank's process die by SIGKILL (a fail-stop) at its first device call at or after
// start_s; its end_s is optional (the report's window: start_s + 1 by default). A hang fault stops the rank
// at its first device call in [start_s, end_s) until end_s (a kernel that does not finish: it makes no NCCL
// call meanwhile, and its peers wait for it in their next collective).
// An optional "label" string per fault is kept for reports. Overlapping faults compound (multiply).
#pragma once

#include <array>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace greyhound::sim {

enum class FaultKind { kGpu, kLink, kCpu, kKill, kHang };
const char* fault_kind_name(FaultKind k);

struct Fault {
  FaultKind kind = FaultKind::kGpu;
  int rank = -1;                    // gpu, cpu, kill
  std::array<int, 2> nodes{-1, -1}; // link (unordered pair of distinct nodes)
  double start_s = 0;
  double end_s = 0;
  double slowdown = 1.0;            // gpu, cpu: >= 1
  double bandwidth_factor = 1.0;    // link: (0, 1]
  std::string label;
  bool active(double t_s) const { return t_s >= start_s && t_s < end_s; }
};

// Thrown on a bad schedule; what() names the field, e.g. "faults[1].slowdown: must be a number >= 1".
class FaultScheduleError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class FaultSchedule {
 public:
  FaultSchedule() = default;
  explicit FaultSchedule(std::vector<Fault> faults) : faults_(std::move(faults)) {}

  static FaultSchedule parse(const nlohmann::json& j);       // throws FaultScheduleError
  static FaultSchedule parse_text(const std::string& text);  // JSON text; throws FaultScheduleError
  nlohmann::json to_json() const;
  // "" when every fault names ranks below `world` and nodes below `nodes`, else what names one that does not
  // exist ("faults[1].rank: 99 is not a rank of this job (0..7)").
  std::string shape_error(int world, int nodes) const;

  double gpu_slowdown(int rank, double t_s) const;
  double cpu_slowdown(int rank, double t_s) const;
  double link_factor(int node_a, int node_b, double t_s) const;  // 1 when healthy or same node
  bool killed(int rank, double t_s) const;  // a kill fault of `rank` has started by t_s
  double hung_until(int rank, double t_s) const;  // the end of a hang fault of `rank` active at t_s; 0: none

  const std::vector<Fault>& faults() const { return faults_; }
  bool empty() const { return faults_.empty(); }

 private:
  std::vector<Fault> faults_;
};

}  // namespace greyhound::sim
