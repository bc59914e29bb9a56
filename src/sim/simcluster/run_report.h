// The simulated run's report (greyhound-simcluster --report): pure pieces, tested without processes.
//   {"config":{..},"faults":[..as injected..],"iterations":[{"index","t_s","iter_ms","loop_ms"}],
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

// One iteration of the job as a whole. Every rank prints its own lines; the job has done iteration i when
// its last rank has (in a pipeline, usually the last stage), so the job's period is measured there: a
// slowdown of any rank shows in it, whichever rank's loop it stretches.
struct JobIteration {
  long index = 0;
  double t_s = 0;      // job time when the last rank finished the iteration (max over ranks of its end)
  double iter_ms = 0;  // the job's period: t_s minus the previous iteration's t_s (the first: from the
                       // earliest start of any rank)
  double loop_ms = 0;  // rank 0's own loop time of the iteration (what it printed as iter_ms)
  int last_rank = -1;  // the rank that finished it last
};

// The job's iterations from every rank's lines (per_rank[r]: rank r's, in its order; rank 0 first): the
// indices every rank printed, in order, stopping at the first index some rank lacks (a rank that failed).
// Empty when any rank printed nothing.
std::vector<JobIteration> job_iterations(const std::vector<std::vector<IterationLine>>& per_rank);

// Iterations per minute over the span from the first iteration's start to the last one's end.
double throughput_iter_per_min(const std::vector<JobIteration>& its);

// Mean iteration time of iterations that ended inside [start_s, end_s) (NaN when none).
double mean_iter_ms_between(const std::vector<JobIteration>& its, double start_s, double end_s);

// Mean iteration time outside every fault window (plus a warm-up of `skip` iterations).
double healthy_mean_iter_ms(const std::vector<JobIteration>& its, const FaultSchedule& faults, int skip);

// A readable timeline: faults and events in time order with the iteration times around them.
std::string format_timeline(const nlohmann::json& report);

// The report's "validations": one entry per validation pause of the master (its `validated` events), with
// the latencies of the incident it served: `onset_t_s` (the slowdown's first slow iteration),
// `detected_t_s` (the agents' decision), `localised_t_s`, `validated_t_s`, the verdict (`cause`, `rank`,
// `node`, `link`, `ratio`, `aborted`, `reason`), `pause_s` and `tests_s`. Job seconds.
nlohmann::json validation_summary(const nlohmann::json& events);

}  // namespace greyhound::sim
