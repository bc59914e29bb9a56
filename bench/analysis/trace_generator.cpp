#include "trace_generator.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "rng.h"

namespace greyhound::analysis::eval {
namespace {

constexpr std::uint64_t kMinEpisode = 12;  // labelled episodes and gaps between true changes, iterations
constexpr std::uint64_t kFirstOnset = 80;  // after warm-up and the detectors' baseline

double severity_factor(Rng& rng, bool fixed) {
  if (fixed) return 1.5;
  return 1.0 / (1.0 - rng.uniform(0.1, 0.9));
}

std::uint64_t draw_duration(Rng& rng, const PopulationSpec& spec) {
  if (spec.population == Population::kSim40) return rng.integer(15, 40);
  // Lognormal with the population's mean, sigma 1 (sub-minute to several times the mean).
  const double sigma = 1.0;
  const double mu = std::log(spec.mean_duration) - 0.5 * sigma * sigma;
  const double d = std::exp(mu + sigma * rng.normal());
  return static_cast<std::uint64_t>(std::clamp(d, double(kMinEpisode), 0.5 * spec.length));
}

// Ground truth: the level (product of active factors) changes at every episode boundary.
std::vector<TrueChange> true_changes(const std::vector<FaultEpisode>& faults, std::uint64_t length) {
  std::map<std::uint64_t, double> step;  // index -> multiplicative step
  for (const auto& f : faults) {
    step[f.start] = (step.count(f.start) ? step[f.start] : 1.0) * f.factor;
    if (f.end < length) step[f.end] = (step.count(f.end) ? step[f.end] : 1.0) / f.factor;
  }
  std::vector<TrueChange> out;
  for (const auto& [index, ratio] : step) {
    if (std::abs(std::log(ratio)) < 1e-12) continue;
    out.push_back(TrueChange{index, ratio > 1.0 ? ChangeDirection::kSlowdown : ChangeDirection::kRecovery, ratio});
  }
  return out;
}

bool well_separated(const std::vector<TrueChange>& changes) {
  for (std::size_t i = 1; i < changes.size(); ++i) {
    if (changes[i].index - changes[i - 1].index < kMinEpisode) return false;
  }
  return true;
}

std::vector<FaultEpisode> draw_faults(Rng& rng, const PopulationSpec& spec) {
  const std::uint64_t n = spec.length;
  for (int attempt = 0; attempt < 100; ++attempt) {
    std::vector<FaultEpisode> faults;
    const auto independent = static_cast<std::uint32_t>(rng.integer(1, std::max<std::uint32_t>(spec.max_independent, 1)));
    for (std::uint32_t e = 0; e < independent; ++e) {
      FaultEpisode f;
      const std::uint64_t d = draw_duration(rng, spec);
      const std::uint64_t latest = n > d + 30 ? n - d - 30 : kFirstOnset;
      f.start = spec.population == Population::kSim40 ? rng.integer(20, 50) : rng.integer(kFirstOnset, std::max(kFirstOnset, latest));
      // One in ten episodes lasts to the end of the trace (no recovery to observe).
      f.end = rng.chance(0.1) ? n : std::min<std::uint64_t>(n, f.start + d);
      f.factor = severity_factor(rng, spec.fixed_severity);
      f.communication = rng.chance(spec.communication_fraction);
      faults.push_back(f);
      if (rng.chance(spec.compound_probability) && f.end - f.start >= 3 * kMinEpisode) {
        // Compound: a second fail-slow starts while the first is active (e.g. congestion on top of a slow GPU).
        FaultEpisode g;
        g.start = rng.integer(f.start + kMinEpisode, f.end - 2 * kMinEpisode);
        g.end = std::min<std::uint64_t>(n, g.start + draw_duration(rng, spec));
        g.factor = severity_factor(rng, false);
        g.communication = !f.communication || rng.chance(0.5);
        faults.push_back(g);
      }
    }
    const auto changes = true_changes(faults, n);
    if (well_separated(changes) && !changes.empty()) return faults;
  }
  return {};
}

}  // namespace

std::string_view population_name(Population p) {
  switch (p) {
    case Population::kComputation: return "computation";
    case Population::kCommunication: return "communication";
    case Population::kLargeJob: return "large";
    case Population::kSim40: return "sim40";
  }
  return "unknown";
}

PopulationSpec population_spec(Population p, std::uint32_t scale) {
  PopulationSpec s;
  s.population = p;
  switch (p) {
    case Population::kComputation:  // 392 jobs, 8 fail-slow (Table 3's denominators)
      s.traces = 392 * scale;
      s.positives = 8 * scale;
      s.length = 1500;
      s.mean_duration = 300;
      s.max_independent = 1;
      s.compound_probability = 0.0;
      s.communication_fraction = 0.0;
      break;
    case Population::kCommunication:  // 107 jobs, 43 fail-slow
      s.traces = 107 * scale;
      s.positives = 43 * scale;
      s.length = 3000;
      s.mean_duration = 720;
      s.max_independent = 2;
      s.compound_probability = 0.1;
      s.communication_fraction = 0.98;
      break;
    case Population::kLargeJob:  // 27 jobs, 16 fail-slow, 3 of them compound (congestion + GPU)
      s.traces = 27 * scale;
      s.positives = 16 * scale;
      s.length = 6000;
      s.mean_duration = 2160;
      s.max_independent = 3;
      s.compound_probability = 0.2;
      s.communication_fraction = 0.8;
      break;
    case Population::kSim40:  // the simulated cluster: 40 s runs of ~100 iterations, half with a 1.5x GPU fault
      s.traces = 100 * scale;
      s.positives = 50 * scale;
      s.length = 100;
      s.mean_duration = 25;
      s.max_independent = 1;
      s.fixed_severity = true;
      break;
  }
  return s;
}

LabelledTrace generate_trace(const PopulationSpec& spec, bool positive, std::uint64_t seed) {
  Rng rng(seed);
  LabelledTrace tr;
  tr.population = spec.population;
  tr.seed = seed;
  const std::uint64_t n = spec.length;
  const bool sim = spec.population == Population::kSim40;
  tr.base_ms = sim ? rng.uniform(200.0, 600.0) : std::exp(rng.uniform(std::log(50.0), std::log(50000.0)));

  // Healthy noise of this job.
  const double jitter = rng.uniform(0.005, 0.03);          // Gaussian, multiplicative
  const double wander_sd = rng.uniform(0.0, 0.015);        // slow AR(1) wander (sequence-length mix, thermals)
  const double wander_phi = rng.uniform(0.8, 0.95);
  const double gc_p = rng.uniform(0.0, 0.03);              // Python GC pauses
  const double alloc_p = rng.uniform(0.0, 0.01);           // allocator cache misses, 1-2 iterations
  const bool stalls = !sim && rng.chance(0.7);             // periodic evaluation / checkpoint
  const std::uint64_t stall_every = rng.integer(200, 1000);
  const std::uint64_t stall_phase = rng.integer(0, stall_every - 1);
  const std::uint64_t warmup = rng.integer(1, 6);
  const double warm0 = rng.uniform(2.0, 10.0);

  std::vector<double> extra(n, 0.0);  // additive fractions: spikes and bursts
  std::vector<double> drift(n, 1.0);
  for (std::uint64_t i = 0; i < n; ++i) {
    if (rng.chance(gc_p)) extra[i] += rng.uniform(0.1, 1.5);
    if (rng.chance(alloc_p)) {
      const double a = rng.uniform(0.05, 0.4);
      extra[i] += a;
      if (i + 1 < n && rng.chance(0.5)) extra[i + 1] += a;
    }
    if (stalls && i % stall_every == stall_phase && i > 0) extra[i] += rng.uniform(1.0, 20.0);
  }
  // Hard negatives: bursts of 2-3 slow iterations (+10..50 %), and drifts below 10 %. Bursts are drawn at
  // least 10 iterations apart, so that two of them never merge into one longer than 3.
  const std::uint32_t bursts = rng.poisson(static_cast<double>(n) / 400.0);
  std::vector<std::uint64_t> burst_at;
  for (std::uint32_t b = 0; b < bursts; ++b) {
    const std::uint64_t at = rng.integer(0, n - 1);
    const std::uint64_t len = rng.integer(2, 3);
    const double a = rng.uniform(0.1, 0.5);
    const bool clear = std::none_of(burst_at.begin(), burst_at.end(), [at](std::uint64_t o) { return (at > o ? at - o : o - at) < 10; });
    if (!clear) continue;
    burst_at.push_back(at);
    for (std::uint64_t i = at; i < std::min(n, at + len); ++i) extra[i] += a;
  }
  if (!sim && rng.chance(0.3)) {
    const double amount = rng.uniform(0.02, 0.07);
    const std::uint64_t ramp = rng.integer(50, 300);
    const std::uint64_t at = rng.integer(0, n - 1);
    const bool back = rng.chance(0.5);
    const std::uint64_t hold = rng.integer(50, 500);
    for (std::uint64_t i = at; i < n; ++i) {
      const double u = static_cast<double>(i - at);
      double level = amount * std::min(1.0, u / static_cast<double>(ramp));
      if (back && u > static_cast<double>(ramp + hold)) {
        level = amount * std::max(0.0, 1.0 - (u - static_cast<double>(ramp + hold)) / static_cast<double>(ramp));
      }
      drift[i] = 1.0 + level;
    }
  }
  if (positive) tr.faults = draw_faults(rng, spec);
  tr.changes = true_changes(tr.faults, n);

  tr.iter_ms.resize(n);
  double wander = 0.0;
  const double innovation = wander_sd * std::sqrt(1.0 - wander_phi * wander_phi);
  for (std::uint64_t i = 0; i < n; ++i) {
    double level = 1.0;
    bool comm = false;
    for (const auto& f : tr.faults) {
      if (i >= f.start && i < f.end) {
        level *= f.factor;
        comm = comm || f.communication;
      }
    }
    wander = wander_phi * wander + innovation * rng.normal();
    // Congested links are noisier than healthy ones.
    const double sd = comm ? 1.5 * jitter : jitter;
    const double warm = i < warmup ? 1.0 + (warm0 - 1.0) * std::pow(0.35, static_cast<double>(i)) : 1.0;
    tr.iter_ms[i] = tr.base_ms * warm * level * drift[i] * std::exp(sd * rng.normal() + wander) * (1.0 + extra[i]);
  }
  return tr;
}

std::vector<LabelledTrace> generate_population(const PopulationSpec& spec, std::uint64_t seed) {
  std::vector<LabelledTrace> out;
  out.reserve(spec.traces);
  for (std::uint32_t i = 0; i < spec.traces; ++i) {
    const std::uint64_t s = seed * 1'000'003ull + static_cast<std::uint64_t>(spec.population) * 100'000ull + i;
    out.push_back(generate_trace(spec, i < spec.positives, s));
  }
  return out;
}

}  // namespace greyhound::analysis::eval
