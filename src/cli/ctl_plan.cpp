// Placeholder until the planner subcommands land (issue: mitigation planner).
#include <stdexcept>

#include "cli/ctl_commands.h"

namespace greyhound::ctl {
int cmd_plan_microbatches(const Argv&) { throw std::runtime_error("plan-microbatches: not built yet"); }
}  // namespace greyhound::ctl
