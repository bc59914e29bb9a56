// greyhoundctl plan-microbatches --times T1,T2,.. --total M [--pp P] [--fill F] [--current M1,M2,..]
// The S2 allocation (MicrobatchSolver): micro-batches per DP group that minimise the slowest group's time.
// --times: time per micro-batch of each DP group in ms; --total: the global batch in micro-batches;
// --pp: the step, every m_i a positive multiple of it (the paper's 1F1B constraint with P the pipeline depth;
// 1, the default, for a schedule that runs any count); --fill: slots a group spends beyond one per
// micro-batch (a group finishes at (m_i + F) t_i; the master's planner uses the pipeline depth - 1 with slot
// times); --current: the allocation in force, so that ties move as few micro-batches as possible. Prints one
// JSON object:
// {"microbatches":[..],"makespan_ms":..}. Infeasible or malformed input: one error line, exit 2.
#include <cstdio>

#include <nlohmann/json.hpp>

#include "cli/ctl_commands.h"
#include "common/args.h"
#include "greyhound/mitigate/microbatch_solver.h"

namespace greyhound::ctl {

int cmd_plan_microbatches(const Argv& argv) {
  const Args args(argv, {"times", "total", "pp", "fill", "current"}, {});
  mitigate::MicrobatchProblem problem;
  problem.time_per_microbatch_ms = parse_number_list(args.str("times"), "--times");
  problem.total_microbatches = args.integer("total");
  problem.pipeline_depth = args.integer("pp", 1);
  problem.fill_slots = args.integer("fill", 0);
  if (args.has("current")) problem.current = parse_integer_list(args.str("current"), "--current");

  mitigate::MicrobatchSolver solver;
  const auto plan = solver.solve(problem);
  if (!plan) throw ArgError(plan.error());

  nlohmann::ordered_json out;  // field order as documented
  out["microbatches"] = plan->microbatches;
  out["makespan_ms"] = plan->makespan_ms;
  std::printf("%s\n", out.dump().c_str());
  return 0;
}

}  // namespace greyhound::ctl
