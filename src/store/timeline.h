// The readable timeline of a job's events: what greyhound-simcluster prints at the end of a run (the demo)
// and `greyhoundctl events` prints from the job's stream. One line per master event (LOCATE, PLAN, APPLIED,
// VALIDATE, BASELINE, EVENT ...), per burst of the agents' reports of one change (DETECT, PERIOD), and per
// injected fault's start and end when `faults` are given, in time order:
//   "  t=  21.33s  LOCATE rank 3 (node 1): COMPUTE_STRAGGLER, cause computation; ..."
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace greyhound::store {

// `faults`: the simulated cluster's injected faults ([] for none); `events`: events as the job store writes
// them (to_json(Event)); one that cannot be read is left out.
std::string format_timeline(const nlohmann::json& faults, const nlohmann::json& events);

}  // namespace greyhound::store
