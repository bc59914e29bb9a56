#pragma once
// The master's clock in job time. The master has none of its own: it reads job time off what the agents
// stamp (the pacing rank's newest iteration, each event an agent writes), every reading with the wall time of
// the agent it came from, and carries the freshest reading forward on its own wall clock. Wall clocks here
// are unix_ms_now's (read once, then monotonic), so a stepped system clock on either side moves nothing.
#include <cstdint>
#include <optional>

#include "common/clock.h"  // steady_s: what `Now::mono_s` holds

namespace greyhound::master {

class JobClock {
 public:
  // A reading: the job's time was `t_s` at wall time `unix_ms` (of the agent that stamped it). Ignored unless
  // both are finite and positive, or when older (by wall time) than the reading held.
  void observe(double t_s, std::int64_t unix_ms);
  // The job's time at wall time `unix_ms`: the freshest reading plus the wall time since (none before, none
  // after a reading that is later than `unix_ms`: counted as no time since). Never less than an earlier
  // answer; nullopt before the first reading.
  std::optional<double> at(std::int64_t unix_ms);
  bool has_reading() const { return reading_.has_value(); }

 private:
  struct Reading {
    double t_s;
    std::int64_t unix_ms;
  };
  std::optional<Reading> reading_;
  std::optional<double> last_;  // the last answer
};

}  // namespace greyhound::master
