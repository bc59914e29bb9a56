// The simulated run's report (greyhound-simcluster --report): pure pieces, tested without processes.
//   {"config":{..},"faults":[..as injected..],"iterations":[{"index","t_s","iter_ms"}],
//    "throughput_iter_per_min":X,"events":[{"t_s":..,"type":..., ...}], ...}
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/fault_schedule.h"

namespace greyhound::sim {

struct IterationLine {
  long index = 0;
  double t_s = 0;      // job time at the end of the iteration
  double iter_ms = 0;
  double loss = 0;
  std::string checksum;
};

// Parses one line printed by greyhound-minitrain; nullopt for any other line.
std::optional<IterationLine> parse_iteration_line(const std::string& line);
std::vector<IterationLine> parse_iteration_log(const std::string& text);

// Iterations per minute over the span from the first iteration's start to the last one's end.
double throughput_iter_per_min(const std::vector<IterationLine>& its);

// Mean iteration time of iterations that ended inside [start_s, end_s) (NaN when none).
double mean_iter_ms_between(const std::vector<IterationLine>& its, double start_s, double end_s);

// Mean iteration time outside every fault window (plus a warm-up of `skip` iterations).
double healthy_mean_iter_ms(const std::vector<IterationLine>& its, const FaultSchedule& faults, int skip);

// A readable timeline: faults and events in time order with the iteration times around them.
std::string format_timeline(const nlohmann::json& report);

}  // namespace greyhound::sim
