// One time scale for a simulated run (greyhound-simcluster --time-scale X). The simulated cluster runs an
// iteration in a few hundred milliseconds where a real job takes seconds, while the remedies' costs the
// master weighs (S3's pause, S4's restart) are real-job seconds. X says how many seconds of the job the
// run stands for per simulated second; costs are given in job seconds and reach the master divided by X, so
// the ski rental weighs them against losses on the simulated clock as it would on the real one. Fault
// times stay on the simulated (job) clock, where the stand-ins apply them. Pure.
#pragma once

#include <optional>
#include <string>

#include "sim/fault_schedule.h"

namespace greyhound::sim {

inline constexpr double kMaxTimeScale = 1e6;

// "" when x is a usable time scale (finite, > 0, at most kMaxTimeScale), else why not.
std::string time_scale_error(double x);

// A fault file as greyhound-simcluster --faults reads it: the stand-ins' schedule (fault_schedule.h) plus
// an optional top-level "time_scale" (job seconds per simulated second). The stand-ins get the schedule
// alone. Throws FaultScheduleError naming the field.
struct FaultFile {
  FaultSchedule faults;
  std::optional<double> time_scale;
};
FaultFile parse_fault_file(const std::string& text);

// Remedy costs: given in job seconds, passed to the master in simulated seconds.
struct RemedyCosts {
  double s3_pause_s = 0;
  double s4_restart_s = 0;
};
inline RemedyCosts simulated_costs(const RemedyCosts& job_s, double time_scale) {
  return {job_s.s3_pause_s / time_scale, job_s.s4_restart_s / time_scale};
}

}  // namespace greyhound::sim
