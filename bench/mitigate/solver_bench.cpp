// bench_solver: S2 solve times of MicrobatchSolver for 16 .. 100,000 DP groups, next to the paper's cvxpy
// times for its quadratic surrogate (GREYHOUND, ATC '25: 0.01 s for 16-64 groups, 0.11 s for 128, 6.78 s
// for 256, 35.93 s for 512). Goals: <= 1 ms at 512 groups, <= 50 ms at 100,000.
//
// Instances: healthy groups at 1000 ms x U(0.98, 1.02) per micro-batch, 5 % of the groups (at least one)
// slowed 1.2-2.0x, M = 8 micro-batches per group. Three cases per size: no current allocation; the even
// current allocation (8 each) with P = 1; the same with the 1F1B constraint P = 4. Each time is the median
// of repeated solves (at least 5 and at least 0.2 s of solving); `passes` counts O(D) sweeps over the
// groups in one solve. A second table times harder shapes at 100,000 groups (times spread over six
// orders of magnitude, all equal, few distinct values, M = 1000 per group, 1 % of groups 10^6 x slower).
// Usage: bench_solver [--seed N]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "greyhound/mitigate/microbatch_solver.h"

namespace {

using greyhound::mitigate::MicrobatchProblem;
using greyhound::mitigate::MicrobatchSolver;

struct Timing {
  double median_ms = 0.0;
  double max_ms = 0.0;
  int passes = 0;
  double makespan_ms = 0.0;
  std::int64_t moved = 0;
};

Timing time_solve(const MicrobatchProblem& pb) {
  MicrobatchSolver solver;
  std::vector<double> ms;
  double total = 0.0;
  Timing out;
  while (ms.size() < 5 || total < 200.0) {
    const auto t0 = std::chrono::steady_clock::now();
    const auto r = solver.solve(pb);
    const auto t1 = std::chrono::steady_clock::now();
    if (!r) {
      std::fprintf(stderr, "bench_solver: %s\n", r.error().c_str());
      std::exit(1);
    }
    std::int64_t sum = 0;
    for (auto m : r->microbatches) sum += m;
    if (sum != pb.total_microbatches) {
      std::fprintf(stderr, "bench_solver: allocation does not sum to M\n");
      std::exit(1);
    }
    out.makespan_ms = r->makespan_ms;
    out.moved = r->moved;
    out.passes = solver.last_passes();
    const double elapsed = std::chrono::duration<double, std::milli>(t1 - t0).count();
    ms.push_back(elapsed);
    total += elapsed;
  }
  std::sort(ms.begin(), ms.end());
  out.median_ms = ms[ms.size() / 2];
  out.max_ms = ms.back();
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::uint64_t seed = 1;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--seed") == 0 && i + 1 < argc) {
      seed = std::strtoull(argv[++i], nullptr, 10);
    } else {
      std::fprintf(stderr, "usage: bench_solver [--seed N]\n");
      return 2;
    }
  }
  struct Size {
    int groups;
    const char* paper;
  };
  const Size sizes[] = {{16, "0.01 s"},   {32, "0.01 s"},   {64, "0.01 s"}, {128, "0.11 s"},
                        {256, "6.78 s"},  {512, "35.93 s"}, {10000, "-"},   {100000, "-"}};
  std::printf("S2 micro-batch solver: exact min-max allocation, M = 8 per group, 5%% stragglers (seed %llu)\n",
              static_cast<unsigned long long>(seed));
  std::printf("%9s  %13s  %14s  %18s  %18s  %7s\n", "DP groups", "paper (cvxpy)", "fresh (ms)",
              "current, P=1 (ms)", "current, P=4 (ms)", "passes");
  double at_512 = 0.0;
  double at_100k = 0.0;
  for (const Size& s : sizes) {
    std::mt19937_64 rng(seed * 1000003u + static_cast<std::uint64_t>(s.groups));
    MicrobatchProblem pb;
    const auto d = static_cast<std::size_t>(s.groups);
    pb.time_per_microbatch_ms.resize(d);
    for (auto& t : pb.time_per_microbatch_ms) t = 1000.0 * std::uniform_real_distribution<double>(0.98, 1.02)(rng);
    const std::size_t slow = std::max<std::size_t>(1, d / 20);
    for (std::size_t k = 0; k < slow; ++k) {
      const auto i = std::uniform_int_distribution<std::size_t>(0, d - 1)(rng);
      pb.time_per_microbatch_ms[i] *= std::uniform_real_distribution<double>(1.2, 2.0)(rng);
    }
    pb.total_microbatches = 8 * static_cast<std::int64_t>(d);
    const Timing fresh = time_solve(pb);
    pb.current.assign(d, 8);
    const Timing with_current = time_solve(pb);
    pb.pipeline_depth = 4;
    const Timing pp4 = time_solve(pb);
    const double worst = std::max({fresh.median_ms, with_current.median_ms, pp4.median_ms});
    if (s.groups == 512) at_512 = worst;
    if (s.groups == 100000) at_100k = worst;
    std::printf("%9d  %13s  %14.4f  %18.4f  %18.4f  %3d/%d/%d\n", s.groups, s.paper, fresh.median_ms,
                with_current.median_ms, pp4.median_ms, fresh.passes, with_current.passes, pp4.passes);
  }
  std::printf("\nharder shapes, 100,000 groups, P = 1 (fresh / with the even current allocation):\n");
  std::printf("%-36s  %10s  %10s  %7s\n", "times per micro-batch", "fresh (ms)", "current", "passes");
  const char* shapes[] = {"log-uniform 1e-3 .. 1e3 ms", "all equal (1 ms)", "three values {1, 2, 3} ms",
                          "1000 +- 2 %, M = 1000 per group", "1 % of groups 1e6 x slower"};
  double hardest = 0.0;
  for (int shape = 0; shape < 5; ++shape) {
    std::mt19937_64 rng(seed * 7919u + static_cast<std::uint64_t>(shape));
    const std::size_t d = 100000;
    MicrobatchProblem pb;
    pb.time_per_microbatch_ms.resize(d);
    for (auto& t : pb.time_per_microbatch_ms) {
      if (shape == 0) t = std::pow(10.0, std::uniform_real_distribution<double>(-3, 3)(rng));
      if (shape == 1) t = 1.0;
      if (shape == 2) t = std::uniform_int_distribution<int>(1, 3)(rng);
      if (shape == 3) t = 1000.0 * std::uniform_real_distribution<double>(0.98, 1.02)(rng);
      if (shape == 4) t = std::uniform_int_distribution<int>(0, 99)(rng) == 0 ? 1e6 : 1.0;
    }
    const std::int64_t per = shape == 3 ? 1000 : 8;
    pb.total_microbatches = per * static_cast<std::int64_t>(d);
    const Timing fresh = time_solve(pb);
    pb.current.assign(d, per);
    const Timing cur = time_solve(pb);
    hardest = std::max({hardest, fresh.median_ms, cur.median_ms});
    std::printf("%-36s  %10.4f  %10.4f  %3d/%d\n", shapes[shape], fresh.median_ms, cur.median_ms, fresh.passes,
                cur.passes);
  }
  std::printf("\ngoal <= 1 ms at 512 groups: %.4f ms -> %s\n", at_512, at_512 <= 1.0 ? "met" : "MISSED");
  std::printf("goal <= 50 ms at 100,000 groups: %.4f ms -> %s (harder shapes: %.4f ms -> %s)\n", at_100k,
              at_100k <= 50.0 ? "met" : "MISSED", hardest, hardest <= 50.0 ? "met" : "MISSED");
  return 0;
}
