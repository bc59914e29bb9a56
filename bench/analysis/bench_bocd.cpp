// Bocd throughput: observations per second per core (one thread), the goal >= 5 M with pruning.
// The stream is what BocdDetector feeds Bocd: ln(iteration time / healthy level) of a generated healthy
// job with jitter, GC pauses and stalls and a 1.5x slowdown every 500 iterations. Reports the mean number of
// run lengths kept per update, which is what the cost is proportional to.
//   greyhound-bench-bocd [--benchmark_filter=...]
#include <benchmark/benchmark.h>

#include <cmath>
#include <vector>

#include "greyhound/analysis/bocd.h"
#include "greyhound/analysis/bocd_detector.h"
#include "rng.h"

namespace ga = greyhound::analysis;

namespace {

std::vector<double> normalized_stream(std::size_t n) {
  greyhound::analysis::eval::Rng rng(42);
  std::vector<double> y(n);
  for (std::size_t i = 0; i < n; ++i) {
    double level = (i / 500) % 2 == 1 ? std::log(1.5) : 0.0;
    double v = level + 0.02 * rng.normal();
    if (rng.chance(0.02)) v += std::log1p(rng.uniform(0.1, 1.5));
    y[i] = v;
  }
  return y;
}

ga::BocdParams detector_bocd(double prune_below) {
  const ga::BocdDetectorParams d;
  ga::BocdParams p;
  p.hazard_lambda = d.hazard_lambda;
  p.prior = d.prior;
  p.outlier_probability = d.outlier_probability;
  p.outlier_log_density = d.outlier_log_density;
  p.prune_below = prune_below;
  p.max_run_lengths = d.max_run_lengths;
  return p;
}

void run(benchmark::State& state, const ga::BocdParams& params) {
  const auto y = normalized_stream(1 << 16);
  ga::Bocd bocd(params);
  std::size_t i = 0;
  double kept = 0.0;
  for (auto _ : state) {
    bocd.update(y[i]);
    kept += static_cast<double>(bocd.size());
    if (++i == y.size()) i = 0;
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["kept_run_lengths"] = benchmark::Counter(kept / static_cast<double>(state.iterations()));
}

// The detector's configuration (prune_below from BocdDetectorParams).
void BM_BocdDetectorConfig(benchmark::State& state) { run(state, detector_bocd(ga::BocdDetectorParams{}.prune_below)); }
BENCHMARK(BM_BocdDetectorConfig);

// Pruning threshold sweep: 10^-arg.
void BM_BocdPrune(benchmark::State& state) { run(state, detector_bocd(std::pow(10.0, -static_cast<double>(state.range(0))))); }
BENCHMARK(BM_BocdPrune)->DenseRange(3, 8, 1);

// Plain model (no outlier component), same pruning as the detector.
void BM_BocdPlainModel(benchmark::State& state) {
  auto p = detector_bocd(ga::BocdDetectorParams{}.prune_below);
  p.outlier_probability = 0.0;
  run(state, p);
}
BENCHMARK(BM_BocdPlainModel);

// A whole BocdDetector (normalisation, decision rule, validation) per iteration, for scale.
void BM_BocdDetectorPush(benchmark::State& state) {
  const auto y = normalized_stream(1 << 16);
  std::vector<double> x(y.size());
  for (std::size_t i = 0; i < y.size(); ++i) x[i] = 300.0 * std::exp(y[i]);
  ga::BocdDetector det;
  std::vector<ga::SlowdownEvent> events;
  std::size_t i = 0;
  for (auto _ : state) {
    det.push(x[i], events);
    events.clear();
    if (++i == x.size()) i = 0;
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_BocdDetectorPush);

}  // namespace

BENCHMARK_MAIN();
