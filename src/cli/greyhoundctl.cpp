// greyhoundctl: the operator's and the scripts' command line. Thin: every subcommand lives in its own file.
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "cli/ctl_commands.h"
#include "common/args.h"
#include "common/redis_client.h"

namespace {

struct Command {
  const char* name;
  int (*run)(const greyhound::ctl::Argv&);
  const char* summary;
  const char* flags;  // `greyhoundctl <name> --help` (docs/configuration.md lists the same)
};

const Command kCommands[] = {
    {"dump", &greyhound::ctl::cmd_dump, "print the NCCL call records of a job as JSON lines",
     "--job J [--rank R] [--shm-dir DIR]"},
    {"period", &greyhound::ctl::cmd_period, "iteration period and iteration times of an op stream (CSV)",
     "--ops FILE.csv [--min-acf X]"},
    {"detect", &greyhound::ctl::cmd_detect, "slowdown/recovery events of an iteration-time trace (CSV)",
     "--trace FILE.csv [--method bocd+v|bocd|window]"},
    {"plan-microbatches", &greyhound::ctl::cmd_plan_microbatches, "optimal micro-batch allocation across DP groups (S2)",
     "--times T1,T2,.. --total M [--pp P] [--fill F] [--current M1,M2,..]"},
    {"status", &greyhound::ctl::cmd_status, "ranks, nodes, groups, iteration times and incidents of a job",
     "--job J [--redis URL] [--json]"},
    {"passes", &greyhound::ctl::cmd_passes, "the validation's P2P pass plan over a ring or tree of ranks",
     "--topology ring|tree (--ranks R1,R2,.. [--nodes N1,N2,.. [--pattern balanced|split|tree]] | --graph-dump FILE "
     "--topo-dump FILE [--channel C])"},
    {"events", &greyhound::ctl::cmd_events, "a job's events as a readable timeline (or JSON lines), --follow",
     "--job J [--redis URL] [--json] [--follow] [--since ID] [--count N]"},
    {"incidents", &greyhound::ctl::cmd_incidents, "a job's latest incidents and the fail-slows open now",
     "--job J [--redis URL] [--json] [--count N]"},
    {"set", &greyhound::ctl::cmd_set,
     "change a job's run-time settings (KEY= unsets one; docs/operations.md lists the keys)",
     "--job J [--redis URL] [--reset] KEY=VALUE ..."},
    {"pause-detection", &greyhound::ctl::cmd_pause_detection, "the job's agents report no slowdown until resumed",
     "--job J [--redis URL]"},
    {"plan", &greyhound::ctl::cmd_operator_plan,
     "an operator's manual plan or revert (greyhound's own remedies wait until --release)",
     "--job J (--microbatches M1,M2,.. [--placement JSON|FILE] | --placement JSON|FILE | --revert | --release) "
     "[--reason TEXT] [--redis URL] [--timeout-s S] [--no-wait]"},
    {"preflight", &greyhound::ctl::cmd_preflight,
     "test every GPU and link of a job at its first iteration; exit 3 when something is slow",
     "--job J [--redis URL] [--fail-on-slow] [--timeout-s S] [--json] [--no-wait]"},
    {"resume-detection", &greyhound::ctl::cmd_resume_detection, "... and report them again (each detector relearns the level)",
     "--job J [--redis URL]"},
};

void usage(std::FILE* out) {
  std::fprintf(out, "usage: greyhoundctl <command> [flags]   (greyhoundctl <command> --help: its flags)\n\ncommands:\n");
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
  greyhound::hide_redis_passwords(argc, argv, "greyhoundctl");
  for (const auto& c : kCommands) {
    if (name != c.name) continue;
    if (rest.size() == 1 && (rest[0] == "--help" || rest[0] == "-h")) {
      std::printf("usage: greyhoundctl %s %s\n%s\n", c.name, c.flags, c.summary);
      return 0;
    }
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
