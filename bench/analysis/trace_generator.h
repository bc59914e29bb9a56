// Labelled iteration-time traces for evaluating the slowdown detectors (a bench and test fixture, not part
// of the product). Each trace is a job's iteration times with realistic healthy noise and, for positive
// traces, fail-slow episodes whose onsets and ends are the ground truth.
//
// Populations follow the paper's characterisation (reference/greyhound-paper.md):
//   computation   1-node probes: 2 % of jobs fail-slow, episodes ~10 min, never compound;
//   communication 4-node probes: 40 % fail-slow, ~24 min (sub-minute to 100+ min), some compound;
//   large         512-1,024 GPU jobs: 59 % fail-slow, ~72 min, several per job, compound overlaps;
//   sim40         our simulated cluster: ~100 iterations, one 1.5x GPU slowdown (the agent's target case).
// Durations are converted at a nominal 2 s per iteration (10 min = 300 iterations); the actual iteration
// time of a trace is drawn log-uniformly in [50 ms, 50 s], so the detectors' scale-freedom is exercised.
//
// Severity s, uniform in [10 %, 90 %], is a throughput loss: iteration time x 1 / (1 - s) (s = 90 % is "10 %
// of normal throughput"), so the mildest fail-slow is 11.1 % slower, just above the 10 % validation line.
// Labelled episodes last >= 12 iterations; hard negatives (isolated spikes, bursts of 2-3 slow iterations,
// drifts below 10 %) are never labelled. True changes are >= 12 iterations apart.
//
// Deterministic: the same spec and seed give the same trace on every platform (own RNG and distributions).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "greyhound/analysis/slowdown_detector.h"

namespace greyhound::analysis::eval {

enum class Population : std::uint8_t { kComputation, kCommunication, kLargeJob, kSim40 };
std::string_view population_name(Population p);

struct PopulationSpec {
  Population population = Population::kComputation;
  std::uint32_t traces = 0;
  std::uint32_t positives = 0;          // the first `positives` traces carry fail-slows
  std::uint32_t length = 0;             // iterations per trace
  double mean_duration = 0.0;           // mean episode length, iterations
  std::uint32_t max_independent = 1;    // independent episodes per positive trace: 1..max_independent
  double compound_probability = 0.0;    // chance an episode gets a second, overlapping one
  double communication_fraction = 0.0;  // episodes that are communication fail-slows (noisier)
  bool fixed_severity = false;          // sim40: exactly 1.5x
};

// The paper's population sizes times `scale` (scale 1: 392 + 107 + 27 jobs as in the paper), and sim40.
PopulationSpec population_spec(Population p, std::uint32_t scale);

struct FaultEpisode {
  std::uint64_t start = 0;  // first slow iteration
  std::uint64_t end = 0;    // first iteration after it (== length when it lasts to the end)
  double factor = 1.0;      // iteration-time multiplier while active
  bool communication = false;
};

struct TrueChange {
  std::uint64_t index = 0;  // first iteration at the new level
  ChangeDirection direction = ChangeDirection::kSlowdown;
  double ratio = 1.0;       // new level / old level
};

struct LabelledTrace {
  Population population = Population::kComputation;
  std::uint64_t seed = 0;
  double base_ms = 0.0;
  std::vector<double> iter_ms;
  std::vector<FaultEpisode> faults;
  std::vector<TrueChange> changes;
  bool positive() const { return !faults.empty(); }
};

LabelledTrace generate_trace(const PopulationSpec& spec, bool positive, std::uint64_t seed);
// All traces of a population: trace i is positive iff i < spec.positives; its seed derives from `seed`, the
// population and i.
std::vector<LabelledTrace> generate_population(const PopulationSpec& spec, std::uint64_t seed);

}  // namespace greyhound::analysis::eval
