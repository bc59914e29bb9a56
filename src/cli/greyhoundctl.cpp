// greyhoundctl: the operator's and the scripts' command line. Thin: every subcommand lives in its own file.
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "cli/ctl_commands.h"
#include "common/args.h"

namespace {

struct Command {
  const char* name;
  int (*run)(const greyhound::ctl::Argv&);
  const char* summary;
};

const Command kCommands[] = {
    {"dump", &greyhound::ctl::cmd_dump, "print the NCCL call records of a job as JSON lines"},
    {"period", &greyhound::ctl::cmd_period, "iteration period and iteration times of an op stream (CSV)"},
    {"detect", &greyhound::ctl::cmd_detect, "slowdown/recovery events of an iteration-time trace (CSV)"},
    {"plan-microbatches", &greyhound::ctl::cmd_plan_microbatches,
     "optimal micro-batch allocation across DP groups (S2)"},
    {"status", &greyhound::ctl::cmd_status, "ranks, nodes, groups, iteration times and incidents of a job"},
    {"passes", &greyhound::ctl::cmd_passes, "the validation's P2P pass plan over a ring or tree of ranks"},
    {"events", &greyhound::ctl::cmd_events, "a job's events as a readable timeline (or JSON lines), --follow"},
    {"incidents", &greyhound::ctl::cmd_incidents, "a job's latest incidents and the fail-slows open now"},
};

void usage(std::FILE* out) {
  std::fprintf(out, "usage: greyhoundctl <command> [flags]\n\ncommands:\n");
  for (const auto& c : kCommands) std::fprintf(out, "  %-18s %s\n", c.name, c.summary);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  const std::string name = argv[1];
  const greyhound::ctl::Argv rest(argv + 2, argv + argc);
  for (const auto& c : kCommands) {
    if (name != c.name) continue;
    try {
      return c.run(rest);
    } catch (const greyhound::ArgError& e) {
      std::fprintf(stderr, "greyhoundctl %s: %s\n", c.name, e.what());
      return 2;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "greyhoundctl %s: %s\n", c.name, e.what());
      return 1;
    }
  }
  std::fprintf(stderr, "greyhoundctl: unknown command '%s'\n", name.c_str());
  usage(stderr);
  return 2;
}
