#include "greyhound/analysis/rank_straggler.h"

#include <algorithm>

namespace greyhound::analysis {

const char* straggler_kind_name(StragglerKind k) {
  switch (k) {
    case StragglerKind::kNone: return "NONE";
    case StragglerKind::kStraggler: return "STRAGGLER";
    case StragglerKind::kComputeStraggler: return "COMPUTE_STRAGGLER";
    case StragglerKind::kIncompleteData: return "INCOMPLETE_DATA";
  }
  return "?";
}

const char* straggler_severity_name(StragglerSeverity s) {
  switch (s) {
    case StragglerSeverity::kNone: return "none";
    case StragglerSeverity::kWarning: return "warning";
    case StragglerSeverity::kCritical: return "critical";
  }
  return "?";
}

StragglerFinding rank_straggler(const std::vector<RankWindow>& ranks, const StragglerPolicy& policy) {
  StragglerFinding f;
  std::vector<const RankWindow*> eligible;
  for (const RankWindow& r : ranks) {
    // A missing measurement is not a zero: such a rank cannot take part.
    if (r.visible_ms && r.step_ms && r.iterations > 0) eligible.push_back(&r);
  }
  f.eligible = static_cast<int>(eligible.size());
  if (eligible.size() < 2) return f;  // INCOMPLETE_DATA

  // Culprit: the smallest visible value (arrived last, waited least); ties to the lower rank.
  const RankWindow* culprit = *std::min_element(eligible.begin(), eligible.end(), [](const RankWindow* a, const RankWindow* b) {
    return *a->visible_ms < *b->visible_ms || (*a->visible_ms == *b->visible_ms && a->rank < b->rank);
  });
  // Victim: the upper median by visible value.
  std::vector<const RankWindow*> sorted = eligible;
  std::sort(sorted.begin(), sorted.end(), [](const RankWindow* a, const RankWindow* b) {
    return *a->visible_ms < *b->visible_ms || (*a->visible_ms == *b->visible_ms && a->rank < b->rank);
  });
  const RankWindow* victim = sorted[sorted.size() / 2];
  f.culprit = culprit->rank;
  f.victim = victim->rank;
  f.visible_gap_ms = *victim->visible_ms - *culprit->visible_ms;
  f.score = *victim->step_ms > 0 ? f.visible_gap_ms / *victim->step_ms : 0;

  const int iterations = std::min(culprit->iterations, victim->iterations);
  if (f.score >= policy.critical_score && iterations >= policy.min_iterations_critical) {
    f.severity = StragglerSeverity::kCritical;
  } else if (f.score >= policy.warning_score && iterations >= policy.min_iterations_warning) {
    f.severity = StragglerSeverity::kWarning;
  }
  if (f.severity == StragglerSeverity::kNone) {
    f.kind = StragglerKind::kNone;
    return f;
  }
  f.kind = StragglerKind::kStraggler;
  if (culprit->compute_ms && victim->compute_ms && f.visible_gap_ms > 0) {
    f.compute_excess_ms = *culprit->compute_ms - *victim->compute_ms;
    f.compute_coverage = std::clamp(f.compute_excess_ms / f.visible_gap_ms, 0.0, 1.0);
    if (f.compute_coverage >= policy.attribution_coverage) f.kind = StragglerKind::kComputeStraggler;
  }
  return f;
}

}  // namespace greyhound::analysis
