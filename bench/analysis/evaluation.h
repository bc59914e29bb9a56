// Scores slowdown detectors against labelled traces (trace_generator.h), the way the paper's Tables 3/4 do
// per job, plus event-level detection latency.
//
// Matching: an event matches a true change of the same direction when its detected_index lies in
// [change, change + kMatchWindow) and before the next true change; each true change and each event match at
// most once. Latency = detected_index - true onset, in iterations.
// Per trace: a negative trace is correct iff the detector emits no event at all; a positive trace is a
// miss (false negative) iff some true slowdown is unmatched, and correct iff no slowdown is missed and no
// event is left unmatched. Hence accuracy = correct / traces, FPR = negatives with any event / negatives,
// FNR = positives with a missed slowdown / positives; a positive trace with every slowdown found but an
// extra, unmatched event is counted neither as FP nor FN but is not correct either (reported separately).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "greyhound/analysis/slowdown_detector.h"
#include "trace_generator.h"

namespace greyhound::analysis::eval {

inline constexpr std::uint64_t kMatchWindow = 40;

struct Score {
  std::uint64_t traces = 0;
  std::uint64_t positives = 0;
  std::uint64_t negatives = 0;
  std::uint64_t correct = 0;
  std::uint64_t false_positive_traces = 0;   // negatives with an event
  std::uint64_t false_negative_traces = 0;   // positives with a missed slowdown
  std::uint64_t positives_with_extra = 0;    // positives, nothing missed, but an unmatched event
  std::uint64_t iterations = 0;
  std::uint64_t events = 0;
  std::uint64_t unmatched_events = 0;
  std::uint64_t true_slowdowns = 0;
  std::uint64_t found_slowdowns = 0;
  std::uint64_t true_recoveries = 0;
  std::uint64_t found_recoveries = 0;
  std::vector<double> slowdown_latency;       // every matched slowdown
  std::vector<double> slowdown_latency_ge20;  // matched slowdowns with ratio >= 1.2
  std::uint64_t true_slowdowns_ge20 = 0;
  std::vector<double> recovery_latency;

  double accuracy() const { return traces ? double(correct) / double(traces) : 0.0; }
  double fpr() const { return negatives ? double(false_positive_traces) / double(negatives) : 0.0; }
  double fnr() const { return positives ? double(false_negative_traces) / double(positives) : 0.0; }
  void merge(const Score& o);
};

using DetectorFactory = std::function<std::unique_ptr<SlowdownDetector>()>;

// Runs a fresh detector over the trace, strictly in order.
std::vector<SlowdownEvent> detect_all(SlowdownDetector& det, const std::vector<double>& iter_ms);
// Scores one trace's events.
Score score_trace(const LabelledTrace& trace, const std::vector<SlowdownEvent>& events);
Score evaluate(const std::vector<LabelledTrace>& traces, const DetectorFactory& factory);

// q-quantile (nearest rank) of `v`; NaN when empty.
double quantile(std::vector<double> v, double q);

}  // namespace greyhound::analysis::eval
