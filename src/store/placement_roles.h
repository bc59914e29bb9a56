// Between the two forms of an S3 placement: the per-rank roles the layout and plans carry (PlacementEntry,
// and a plan's [{"rank","tp","dp","pp"}...]) and the role of each slot (TP group) the planners work on
// (mitigate::Placement). A slot's role is its first rank's. One place for both the master's planner and
// the simulated cluster's oracle.
#pragma once

#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "greyhound/mitigate/placement.h"
#include "store/messages.h"

namespace greyhound::store {

// The slot roles per-rank entries name; nullopt when they are not a placement of dp x pp.
std::optional<mitigate::Placement> slot_placement(const std::vector<PlacementEntry>& entries, int tp, int dp, int pp);
// The placement a layout names in force; Megatron's when it names none, or one that is not a placement.
mitigate::Placement placement_in_force(const JobLayout& layout);
// The placement the job started with (initial_placement), the same way.
mitigate::Placement initial_placement(const JobLayout& layout);
// The placement a plan carries; nullopt when it carries none or one that is not a placement.
std::optional<mitigate::Placement> placement_of_plan(const nlohmann::json& placement, int tp, int dp, int pp);
// A placement as a plan carries it: every rank's role (needs gpus_per_node % tp == 0).
nlohmann::json placement_json(const mitigate::Placement& placement, int tp, int dp, int gpus_per_node);

}  // namespace greyhound::store
