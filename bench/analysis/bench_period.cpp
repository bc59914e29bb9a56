// Period detection cost: detect_period on a 100k-record window (the goal: <= 10 ms), for iteration
// patterns of 42 to 7,184 calls and for a stream with no period at all (every lag up to n/3 screened), and
// PeriodDetector's streaming cost per record (search, replay, confirmation and, for the two long patterns,
// the self-correction from a micro-batch lock included).
//   greyhound-bench-period [--benchmark_filter=...]
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "greyhound/analysis/period_detector.h"
#include "rng.h"
#include "synthetic_ops.h"

namespace ga = greyhound::analysis;
namespace ge = greyhound::analysis::eval;

namespace {

constexpr std::size_t kWindow = 100'000;

std::vector<std::uint64_t> pattern_for(std::int64_t arg) {
  switch (arg) {
    case 0: return ge::megatron_pattern(4, 3, 2);      // 42 calls per iteration
    case 1: return ge::megatron_pattern(16, 4, 4);     // 196
    case 2: return ge::megatron_pattern(64, 8, 8);     // 1,288
    default: return ge::megatron_pattern(256, 12, 16);  // 7,184
  }
}

std::vector<std::uint64_t> window_of(const std::vector<std::uint64_t>& pattern, double extra_per_iteration) {
  ge::Rng rng(7);
  std::vector<std::uint64_t> s;
  s.reserve(kWindow);
  while (s.size() < kWindow) {
    for (std::uint64_t v : pattern) {
      s.push_back(v);
      if (rng.chance(extra_per_iteration / static_cast<double>(pattern.size()))) s.push_back(ga::op_symbol(7, 99, 8));
    }
  }
  s.resize(kWindow);
  return s;
}

// `extra`: the share of iterations with one extra call (the positional autocorrelation is then lower but
// still >= 0.95).
void BM_DetectPeriod100k(benchmark::State& state, double extra) {
  const auto pattern = pattern_for(state.range(0));
  const auto s = window_of(pattern, extra);
  std::uint32_t found = 0;
  for (auto _ : state) {
    const auto fit = ga::detect_period(s, {});
    found = fit ? fit->period : 0;
    benchmark::DoNotOptimize(found);
  }
  state.counters["period"] = found;
  state.counters["true_period"] = static_cast<double>(pattern.size());
}
BENCHMARK_CAPTURE(BM_DetectPeriod100k, clean, 0.0)->DenseRange(0, 3, 1)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_DetectPeriod100k, extra_calls_2pct, 0.02)->DenseRange(0, 3, 1)->Unit(benchmark::kMillisecond);

// Worst case: no period, every lag up to 33,333 is screened and rejected.
void BM_DetectPeriod100kAperiodic(benchmark::State& state) {
  ge::Rng rng(5);
  std::vector<std::uint64_t> s(kWindow);
  for (auto& v : s) v = rng.integer(0, 63);
  for (auto _ : state) benchmark::DoNotOptimize(ga::detect_period(s, {}));
}
BENCHMARK(BM_DetectPeriod100kAperiodic)->Unit(benchmark::kMillisecond);

// Streaming: records per second through a PeriodDetector over 2 M records; `iterations_reported` vs
// `true_iterations` shows the micro-batch iterations reported before the self-correction.
void BM_PeriodDetectorPush(benchmark::State& state) {
  ge::OpStreamSpec spec;
  spec.pattern = pattern_for(state.range(0));
  spec.iter_ms = std::vector<double>(2'000'000 / spec.pattern.size() + 1, 300.0);
  spec.extra_per_iteration = 0.02;
  const auto stream = ge::make_op_stream(spec);
  std::vector<ga::Iteration> out;
  out.reserve(spec.iter_ms.size());
  for (auto _ : state) {
    ga::PeriodDetector det;
    out.clear();
    for (std::size_t i = 0; i < stream.t_ns.size(); ++i) det.push(stream.t_ns[i], stream.symbols[i], out);
    benchmark::DoNotOptimize(out.size());
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(stream.t_ns.size()));
  state.counters["iterations_reported"] = static_cast<double>(out.size());
  state.counters["true_iterations"] = static_cast<double>(spec.iter_ms.size());
}
BENCHMARK(BM_PeriodDetectorPush)->DenseRange(0, 3, 1)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
