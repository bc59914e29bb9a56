// Subcommands of greyhoundctl. Each takes its arguments (after the subcommand name), writes results to
// stdout and errors to stderr, and returns the process exit code: 0 success, 2 bad usage or bad input,
// 1 other failures.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace greyhound {
class Args;
}

namespace greyhound::ctl {

using Argv = std::vector<std::string>;

int cmd_dump(const Argv& args);                // ctl_dump.cpp: records of a job's rings, JSON lines
int cmd_period(const Argv& args);              // ctl_analysis.cpp: iteration period of an op stream
int cmd_detect(const Argv& args);              // ctl_analysis.cpp: slowdown/recovery events of a trace
int cmd_plan_microbatches(const Argv& args);   // ctl_plan.cpp: S2 micro-batch allocation
int cmd_status(const Argv& args);              // ctl_status.cpp: a job's ranks, nodes, groups, incidents
int cmd_passes(const Argv& args);              // ctl_passes.cpp: the validation's P2P pass plan
int cmd_events(const Argv& args);              // ctl_events.cpp: a job's events as a timeline or JSON lines
int cmd_incidents(const Argv& args);           // ctl_events.cpp: a job's latest incidents and open fail-slows
int cmd_set(const Argv& args);                 // ctl_settings.cpp: a job's run-time settings
int cmd_pause_detection(const Argv& args);     // ctl_settings.cpp: detection_paused=true
int cmd_resume_detection(const Argv& args);    // ctl_settings.cpp: ... unset
int cmd_operator_plan(const Argv& args);       // ctl_operator_plan.cpp: an operator's manual plan, revert, release
int cmd_preflight(const Argv& args);           // ctl_preflight.cpp: a pre-flight check of every GPU and link

// The whole file, or ArgError naming it and why: unreadable, or larger than max_bytes (ctl_inputs.cpp). Every
// file a subcommand reads goes through it, bounded.
std::string read_file(const std::string& path, std::size_t max_bytes = std::size_t{256} << 20);
// --job, or ArgError when Redis keys cannot carry it as it is (job_name_error): refused, never rewritten.
std::string job_arg(const Args& args);

}  // namespace greyhound::ctl
