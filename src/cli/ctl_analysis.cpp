// Placeholder until the analysis subcommands land (issue: LocalAnalyzer).
#include <stdexcept>

#include "cli/ctl_commands.h"

namespace greyhound::ctl {
int cmd_period(const Argv&) { throw std::runtime_error("period: not built yet"); }
int cmd_detect(const Argv&) { throw std::runtime_error("detect: not built yet"); }
}  // namespace greyhound::ctl
