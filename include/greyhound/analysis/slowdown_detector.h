// Online slowdown detectors over a job's iteration-time series, behind one interface so that the node agent,
// greyhoundctl and the evaluation switch methods with one name:
//   "bocd+v"  BocdDetector with validation: the paper's detector (BOCD, then a >= 10 % level check);
//   "bocd"    BocdDetector without validation (baseline: plain BOCD);
//   "window"  SlidingWindowDetector (baseline: > 10 % off the running median).
//
// Contract shared by every method:
// - push() takes the iteration times strictly in order, one at a time, and never looks ahead: an event
//   appended by the call that fed iteration j has detected_index == j.
// - Iterations are numbered 0, 1, 2, ... in the order they were accepted by push(); a value that is not
//   finite or not positive is rejected (push returns false) and takes no index.
// - Scale-free: the same parameters serve 50 ms and 50 s iterations (every rule works on ratios).
// - Events alternate in no fixed way: compound fail-slows give several slowdowns in a row and partial
//   recoveries several recoveries.
// Not thread-safe; one detector per monitored job (or per rank).
//
// Typical use by the node agent, with a PeriodDetector feeding iteration times:
//   auto det = make_slowdown_detector(DetectionMethod::kBocdValidated);
//   std::vector<SlowdownEvent> events;
//   for (const Iteration& it : iterations) { det->push(it.iter_ns / 1e6, events); }
//   // publish `events`, then events.clear()
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

namespace greyhound::analysis {

enum class ChangeDirection : std::uint8_t {
  kSlowdown = 0,  // iterations became slower
  kRecovery = 1,  // iterations became faster
};
std::string_view direction_name(ChangeDirection d);  // "slowdown", "recovery"

struct SlowdownEvent {
  ChangeDirection direction = ChangeDirection::kSlowdown;
  std::uint64_t index = 0;           // onset: first iteration at the new level
  std::uint64_t detected_index = 0;  // the iteration whose push() emitted the event (>= index)
  double before_ms = 0.0;            // robust mean iteration time of the segment before the onset
  double after_ms = 0.0;             // robust mean from the onset to detected_index
  double ratio = 0.0;                // after_ms / before_ms
};

class SlowdownDetector {
 public:
  virtual ~SlowdownDetector() = default;
  // Feeds the next iteration time (any unit; events report before/after in the same unit, named _ms because
  // greyhound passes milliseconds). Appends the events it decides now to `events`; returns false (and does
  // nothing) when iter_ms is not finite or not positive.
  virtual bool push(double iter_ms, std::vector<SlowdownEvent>& events) = 0;
  // Iterations accepted so far (the index the next accepted value will get).
  virtual std::uint64_t iterations() const = 0;
};

enum class DetectionMethod : std::uint8_t {
  kBocdValidated = 0,  // "bocd+v"
  kBocd = 1,           // "bocd"
  kSlidingWindow = 2,  // "window"
};
std::string_view method_name(DetectionMethod m);
std::optional<DetectionMethod> method_from_name(std::string_view name);

// Builds a detector with its documented default parameters (see bocd_detector.h, sliding_window_detector.h).
std::unique_ptr<SlowdownDetector> make_slowdown_detector(DetectionMethod method);

// What an operator may change while a job runs (greyhoundctl set): an unset field keeps the default. They
// apply to the BOCD detectors (bocd+v, bocd; the validation ratio to bocd+v only); the sliding window
// keeps its own.
struct DetectionTuning {
  std::optional<double> validation_ratio;  // a change must move the level by this ratio: min change = ratio - 1
  std::optional<double> bocd_threshold;    // the decision probability, (0, 1)
  std::optional<double> bocd_hazard;       // the expected run length between changes, iterations
  bool operator==(const DetectionTuning&) const = default;
};
std::unique_ptr<SlowdownDetector> make_slowdown_detector(DetectionMethod method, const DetectionTuning& tuning);

}  // namespace greyhound::analysis
