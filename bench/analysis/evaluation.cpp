#include "evaluation.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace greyhound::analysis::eval {

void Score::merge(const Score& o) {
  traces += o.traces;
  positives += o.positives;
  negatives += o.negatives;
  correct += o.correct;
  false_positive_traces += o.false_positive_traces;
  false_negative_traces += o.false_negative_traces;
  positives_with_extra += o.positives_with_extra;
  iterations += o.iterations;
  events += o.events;
  unmatched_events += o.unmatched_events;
  true_slowdowns += o.true_slowdowns;
  found_slowdowns += o.found_slowdowns;
  true_recoveries += o.true_recoveries;
  found_recoveries += o.found_recoveries;
  true_slowdowns_ge20 += o.true_slowdowns_ge20;
  slowdown_latency.insert(slowdown_latency.end(), o.slowdown_latency.begin(), o.slowdown_latency.end());
  slowdown_latency_ge20.insert(slowdown_latency_ge20.end(), o.slowdown_latency_ge20.begin(), o.slowdown_latency_ge20.end());
  recovery_latency.insert(recovery_latency.end(), o.recovery_latency.begin(), o.recovery_latency.end());
}

std::vector<SlowdownEvent> detect_all(SlowdownDetector& det, const std::vector<double>& iter_ms) {
  std::vector<SlowdownEvent> events;
  for (double v : iter_ms) det.push(v, events);
  return events;
}

Score score_trace(const LabelledTrace& trace, const std::vector<SlowdownEvent>& events) {
  Score s;
  s.traces = 1;
  s.iterations = trace.iter_ms.size();
  s.events = events.size();
  const auto& changes = trace.changes;
  std::vector<bool> change_matched(changes.size(), false);
  for (const auto& e : events) {
    bool matched = false;
    for (std::size_t c = 0; c < changes.size() && !matched; ++c) {
      const auto& ch = changes[c];
      const std::uint64_t until = std::min<std::uint64_t>(
          ch.index + kMatchWindow, c + 1 < changes.size() ? changes[c + 1].index : std::numeric_limits<std::uint64_t>::max());
      if (change_matched[c] || ch.direction != e.direction || e.detected_index < ch.index || e.detected_index >= until) {
        continue;
      }
      change_matched[c] = true;
      matched = true;
      const double latency = static_cast<double>(e.detected_index - ch.index);
      if (ch.direction == ChangeDirection::kSlowdown) {
        s.slowdown_latency.push_back(latency);
        if (ch.ratio >= 1.2) s.slowdown_latency_ge20.push_back(latency);
      } else {
        s.recovery_latency.push_back(latency);
      }
    }
    if (!matched) ++s.unmatched_events;
  }
  bool missed = false;
  for (std::size_t c = 0; c < changes.size(); ++c) {
    if (changes[c].direction == ChangeDirection::kSlowdown) {
      ++s.true_slowdowns;
      if (changes[c].ratio >= 1.2) ++s.true_slowdowns_ge20;
      if (change_matched[c]) {
        ++s.found_slowdowns;
      } else {
        missed = true;
      }
    } else {
      ++s.true_recoveries;
      if (change_matched[c]) ++s.found_recoveries;
    }
  }
  if (trace.positive()) {
    s.positives = 1;
    if (missed) {
      s.false_negative_traces = 1;
    } else if (s.unmatched_events > 0) {
      s.positives_with_extra = 1;
    } else {
      s.correct = 1;
    }
  } else {
    s.negatives = 1;
    if (events.empty()) {
      s.correct = 1;
    } else {
      s.false_positive_traces = 1;
    }
  }
  return s;
}

Score evaluate(const std::vector<LabelledTrace>& traces, const DetectorFactory& factory) {
  Score total;
  for (const auto& tr : traces) {
    auto det = factory();
    total.merge(score_trace(tr, detect_all(*det, tr.iter_ms)));
  }
  return total;
}

double quantile(std::vector<double> v, double q) {
  if (v.empty()) return std::numeric_limits<double>::quiet_NaN();
  std::sort(v.begin(), v.end());
  const auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(v.size())));
  return v[std::min(v.size() - 1, rank == 0 ? 0 : rank - 1)];
}

}  // namespace greyhound::analysis::eval
