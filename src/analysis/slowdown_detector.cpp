#include "greyhound/analysis/slowdown_detector.h"

#include "greyhound/analysis/bocd_detector.h"
#include "greyhound/analysis/sliding_window_detector.h"

namespace greyhound::analysis {

std::string_view direction_name(ChangeDirection d) {
  return d == ChangeDirection::kSlowdown ? "slowdown" : "recovery";
}

std::string_view method_name(DetectionMethod m) {
  switch (m) {
    case DetectionMethod::kBocdValidated: return "bocd+v";
    case DetectionMethod::kBocd: return "bocd";
    case DetectionMethod::kSlidingWindow: return "window";
  }
  return "unknown";
}

std::optional<DetectionMethod> method_from_name(std::string_view name) {
  for (auto m : {DetectionMethod::kBocdValidated, DetectionMethod::kBocd, DetectionMethod::kSlidingWindow}) {
    if (name == method_name(m)) return m;
  }
  return std::nullopt;
}

std::unique_ptr<SlowdownDetector> make_slowdown_detector(DetectionMethod method) {
  return make_slowdown_detector(method, DetectionTuning{});
}

std::unique_ptr<SlowdownDetector> make_slowdown_detector(DetectionMethod method, const DetectionTuning& tuning) {
  BocdDetectorParams p;
  if (tuning.validation_ratio) p.validation.min_rel_change = *tuning.validation_ratio - 1.0;
  if (tuning.bocd_threshold) p.threshold = *tuning.bocd_threshold;
  if (tuning.bocd_hazard) p.hazard_lambda = *tuning.bocd_hazard;
  switch (method) {
    case DetectionMethod::kBocdValidated: return std::make_unique<BocdDetector>(p);
    case DetectionMethod::kBocd: {
      p.validate = false;
      return std::make_unique<BocdDetector>(p);
    }
    case DetectionMethod::kSlidingWindow: return std::make_unique<SlidingWindowDetector>();
  }
  return nullptr;
}

}  // namespace greyhound::analysis
