// The rank-straggler policy (after TraceML's published policy, restated for NCCL-level signals in
// ../shared/reference/rank-straggler-policy.md): for one synchronising communication group and one window of
// profiled iterations, is one rank a straggler, which one, how sure, and what explains it. Needs no pause
// and no benchmark: it names a culprit from timings the job already produces. Pure.
//
// Signals per rank (RankWindow), measured by device profiling of NCCL calls:
//  - visible: the time the rank spends inside the group's collectives per iteration. A straggler arrives
//    last and so waits least: the culprit is the eligible rank with the SMALLEST visible value; the victim
//    is the upper median (not the maximum, so one outlier does not become the reference).
//  - step: the iteration time; compute: the time outside all NCCL calls per iteration.
//  - input wait and host-to-device copies are not visible to an NCCL hook: never measured here, so the
//    policy never names INPUT_STRAGGLER or H2D_STRAGGLER (a component not measured on both ranks can never
//    name the cause).
// Score = (visible_victim - visible_culprit) / step_victim (the policy's denominator is input wait + step; an
// NCCL hook measures no input wait, and a framework's step time already contains it).
// Severity: < 0.10 none, >= 0.10 warning (at least 2 iterations in the window), >= 0.20 critical (at least
// 20 iterations; else capped at warning). Attribution: coverage = min(1, excess compute of the culprit over
// the victim / visible gap); the kind is COMPUTE_STRAGGLER when coverage >= 0.8, else STRAGGLER.
// Fewer than two eligible ranks (every signal measured): INCOMPLETE_DATA, never "balanced".
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace greyhound::analysis {

struct RankWindow {
  int rank = -1;
  int iterations = 0;                 // iterations in the window
  std::optional<double> visible_ms;   // inside the group's collectives, per iteration
  std::optional<double> step_ms;      // iteration time
  std::optional<double> compute_ms;   // outside every NCCL call, per iteration
};

enum class StragglerKind { kNone, kStraggler, kComputeStraggler, kIncompleteData };
enum class StragglerSeverity { kNone, kWarning, kCritical };
const char* straggler_kind_name(StragglerKind k);          // "NONE", "STRAGGLER", "COMPUTE_STRAGGLER", ...
const char* straggler_severity_name(StragglerSeverity s);  // "none", "warning", "critical"

struct StragglerFinding {
  StragglerKind kind = StragglerKind::kIncompleteData;
  StragglerSeverity severity = StragglerSeverity::kNone;
  int culprit = -1;
  int victim = -1;
  double score = 0;               // visible gap over the victim's step
  double visible_gap_ms = 0;
  double compute_excess_ms = 0;   // culprit's compute minus the victim's
  double compute_coverage = 0;    // min(1, compute excess / visible gap)
  int eligible = 0;
};

struct StragglerPolicy {
  double warning_score = 0.10;
  double critical_score = 0.20;
  int min_iterations_warning = 2;
  int min_iterations_critical = 20;
  double attribution_coverage = 0.80;
};

StragglerFinding rank_straggler(const std::vector<RankWindow>& ranks, const StragglerPolicy& policy = {});

}  // namespace greyhound::analysis
