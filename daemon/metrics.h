// The master's /metrics in the Prometheus text exposition format (version 0.0.4), pure: what each job's
// controller counted (ControllerStats) and its status as the job store has it (store/job_status.h) in, the
// text out. Metric names, labels and meanings: docs/operations.md.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "daemon/controller.h"

namespace greyhound::master {

// Families in the order first declared, each with its HELP and TYPE lines and all its samples together (the
// format wants a family's samples in one block), label values escaped (\\, \", newline), values as
// Prometheus writes them (NaN, +Inf, -Inf, else the shortest exact decimal).
class Exposition {
 public:
  using Labels = std::vector<std::pair<std::string, std::string>>;
  // Declares a family once (again: no-op). `type`: "gauge", "counter" or "summary" (samples with suffixes
  // _sum and _count).
  void family(const std::string& name, const char* type, const std::string& help);
  // A sample of a declared family; `suffix` for a summary's parts ("_sum", "_count").
  void sample(const std::string& name, const Labels& labels, double value, const char* suffix = "");
  std::string text() const;

 private:
  struct Family {
    std::string type, help;
    std::vector<std::string> lines;
  };
  std::vector<std::string> order_;
  std::map<std::string, Family> families_;
};

// What the master itself says (one set per master).
struct MasterMetrics {
  std::size_t jobs = 0;                 // jobs served
  std::uint64_t redis_reconnects = 0;   // of the master's Redis client
  std::uint64_t leader_values_taken_over = 0;  // --ha: lease or leader-key values no master wrote, taken over
  double status_read_s = 0;  // what reading the jobs' statuses for /metrics and /status cost the loop last
};

// Declares every family (so a master without jobs still describes them) and adds the master's own samples.
void master_metrics(Exposition& out, const MasterMetrics& m);

// One job's samples: its controller's (stats, what runs, the pacing iteration) and its status JSON's (ranks'
// iterations, agents' heartbeats, records read and lost, incidents and events); `status` may be null (Redis
// could not be read): then only the controller's.
void job_metrics(Exposition& out, const std::string& job, const Controller& controller, const nlohmann::json& status);

// One sample value as Prometheus writes it.
std::string prometheus_number(double v);
// A label value escaped for the text format.
std::string prometheus_label(const std::string& v);

}  // namespace greyhound::master
