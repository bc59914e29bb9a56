// bench_s2_step: what S2 wins back when it may move micro-batches one at a time (the job's schedule takes any
// count: 1F1B without interleaving) against moving them in multiples of the pipeline depth P (the paper's
// constraint, which Megatron-LM needs only for its interleaved schedule).
//
// Model: one DP replica is slowed s x per pipeline slot, the others are healthy (1 per slot); a replica with
// m micro-batches finishes in (m + P - 1) slots (1F1B), the iteration when the slowest replica does. Healthy:
// m0 + P - 1 with m0 micro-batches each; unmanaged: (m0 + P - 1) s. For each step the planner's solver
// (MicrobatchSolver, fill P - 1, from the even allocation) gives the split; "won back" is the share of the
// unmanaged loss it removes, (unmanaged - split) / (unmanaged - healthy). No timing: the figures are exact.
// Usage: bench_s2_step
#include <cstdio>
#include <string>
#include <vector>

#include "greyhound/mitigate/microbatch_solver.h"

namespace {

using greyhound::mitigate::MicrobatchProblem;
using greyhound::mitigate::MicrobatchSolver;

struct Shape {
  int dp, pp, per_replica;
};

struct Outcome {
  double won_back = 0;  // share of the unmanaged loss removed
  std::vector<std::int64_t> split;
};

Outcome solve(const Shape& sh, double s, std::int64_t step) {
  MicrobatchProblem pb;
  pb.time_per_microbatch_ms.assign(static_cast<std::size_t>(sh.dp), 1.0);
  pb.time_per_microbatch_ms.back() = s;
  pb.total_microbatches = std::int64_t{sh.dp} * sh.per_replica;
  pb.pipeline_depth = step;
  pb.fill_slots = sh.pp - 1;
  pb.current.assign(static_cast<std::size_t>(sh.dp), sh.per_replica);
  MicrobatchSolver solver;
  const auto r = solver.solve(pb);
  Outcome out;
  if (!r.ok()) {
    std::fprintf(stderr, "bench_s2_step: %s\n", r.error().c_str());
    return out;
  }
  const double healthy = sh.per_replica + sh.pp - 1;
  const double unmanaged = healthy * s;
  out.won_back = (unmanaged - r->makespan_ms) / (unmanaged - healthy);
  out.split = r->microbatches;
  return out;
}

std::string fmt(const std::vector<std::int64_t>& v) {
  std::string s;
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s;
}

}  // namespace

int main() {
  const Shape shapes[] = {{2, 2, 8}, {2, 2, 16}, {4, 2, 16}, {4, 4, 16}, {8, 4, 32}};
  const double severities[] = {1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.7, 1.8, 2.0};
  std::printf("S2's share of a slow replica's loss won back, moving micro-batches in multiples of P / one at a time\n");
  std::printf("(one replica s x slower per slot; 1F1B makespan (m + P - 1) per slot; the slow replica's count in brackets)\n\n");
  std::printf("| slowdown |");
  for (const Shape& sh : shapes) std::printf(" DP %d, PP %d, %d per replica |", sh.dp, sh.pp, sh.per_replica);
  std::printf("\n|---|");
  for (std::size_t i = 0; i < std::size(shapes); ++i) std::printf("---|");
  std::printf("\n");
  std::vector<double> sum_p(std::size(shapes), 0), sum_1(std::size(shapes), 0);
  for (double s : severities) {
    std::printf("| %.1fx |", s);
    for (std::size_t i = 0; i < std::size(shapes); ++i) {
      const Shape& sh = shapes[i];
      const Outcome p = solve(sh, s, sh.pp);
      const Outcome one = solve(sh, s, 1);
      sum_p[i] += p.won_back;
      sum_1[i] += one.won_back;
      std::printf(" %.0f %% [%lld] / %.0f %% [%lld] |", 100 * p.won_back, static_cast<long long>(p.split.back()),
                  100 * one.won_back, static_cast<long long>(one.split.back()));
    }
    std::printf("\n");
  }
  std::printf("| mean |");
  for (std::size_t i = 0; i < std::size(shapes); ++i) {
    std::printf(" %.1f %% / %.1f %% |", 100 * sum_p[i] / std::size(severities), 100 * sum_1[i] / std::size(severities));
  }
  std::printf("\n\nsplits for DP 4, PP 2, 16 per replica (multiples of 2 / any):\n");
  for (double s : severities) {
    std::printf("  %.1fx: %s / %s\n", s, fmt(solve(shapes[2], s, 2).split).c_str(), fmt(solve(shapes[2], s, 1).split).c_str());
  }
  return 0;
}
