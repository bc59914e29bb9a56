// The rank-straggler policy (../shared/reference/rank-straggler-policy.md) on hand-built windows.
#include "greyhound/analysis/rank_straggler.h"

#include <gtest/gtest.h>

namespace greyhound::analysis {
namespace {

RankWindow w(int rank, int iterations, std::optional<double> visible, std::optional<double> step,
             std::optional<double> compute) {
  RankWindow r;
  r.rank = rank;
  r.iterations = iterations;
  r.visible_ms = visible;
  r.step_ms = step;
  r.compute_ms = compute;
  return r;
}

TEST(RankStraggler, CulpritWaitsLeastVictimIsUpperMedianAndComputeExplainsTheGap) {
  // Ranks 0..2 wait 30 ms inside the collective; rank 3 arrives last and waits 5 ms. Its compute is 25 ms
  // longer than the victim's: all of the gap.
  const std::vector<RankWindow> ranks = {w(0, 20, 30, 100, 70), w(1, 20, 30, 100, 70), w(2, 20, 30, 100, 70),
                                         w(3, 20, 5, 100, 95)};
  const StragglerFinding f = rank_straggler(ranks);
  EXPECT_EQ(f.culprit, 3);
  EXPECT_EQ(f.victim, 1);  // sorted by visible value then rank: [3, 0, 1, 2]; upper median is index 2
  EXPECT_EQ(f.eligible, 4);
  EXPECT_DOUBLE_EQ(f.visible_gap_ms, 25);
  EXPECT_DOUBLE_EQ(f.score, 0.25);
  EXPECT_EQ(f.severity, StragglerSeverity::kCritical);
  EXPECT_DOUBLE_EQ(f.compute_excess_ms, 25);
  EXPECT_DOUBLE_EQ(f.compute_coverage, 1.0);
  EXPECT_EQ(f.kind, StragglerKind::kComputeStraggler);
  EXPECT_STREQ(straggler_kind_name(f.kind), "COMPUTE_STRAGGLER");
  EXPECT_STREQ(straggler_severity_name(f.severity), "critical");
}

TEST(RankStraggler, SeverityThresholdsAndConfidenceGates) {
  auto score_of = [](double culprit_visible, int iterations) {
    return rank_straggler({w(0, iterations, 30, 100, 70), w(1, iterations, 30, 100, 70),
                           w(2, iterations, culprit_visible, 100, 70)});
  };
  EXPECT_EQ(score_of(21, 50).severity, StragglerSeverity::kNone);      // 0.09
  EXPECT_EQ(score_of(21, 50).kind, StragglerKind::kNone);
  EXPECT_EQ(score_of(20, 50).severity, StragglerSeverity::kWarning);   // 0.10
  EXPECT_EQ(score_of(11, 50).severity, StragglerSeverity::kWarning);   // 0.19
  EXPECT_EQ(score_of(10, 50).severity, StragglerSeverity::kCritical);  // 0.20
  EXPECT_EQ(score_of(10, 19).severity, StragglerSeverity::kWarning);   // critical needs 20 iterations
  EXPECT_EQ(score_of(10, 2).severity, StragglerSeverity::kWarning);
  EXPECT_EQ(score_of(10, 1).severity, StragglerSeverity::kNone);       // a warning needs 2
}

TEST(RankStraggler, ComputeBelowCoverageStaysPlainStraggler) {
  // Gap 25 ms, compute excess 10 ms: coverage 0.4 < 0.8.
  const StragglerFinding f = rank_straggler({w(0, 20, 30, 100, 70), w(1, 20, 30, 100, 70), w(2, 20, 5, 100, 80)});
  EXPECT_EQ(f.culprit, 2);
  EXPECT_NEAR(f.compute_coverage, 0.4, 1e-12);
  EXPECT_EQ(f.kind, StragglerKind::kStraggler);
}

TEST(RankStraggler, AComponentNotMeasuredOnBothRanksNamesNoCause) {
  const StragglerFinding f =
      rank_straggler({w(0, 20, 30, 100, 70), w(1, 20, 30, 100, 70), w(2, 20, 5, 100, std::nullopt)});
  EXPECT_EQ(f.culprit, 2);
  EXPECT_EQ(f.kind, StragglerKind::kStraggler);
  EXPECT_DOUBLE_EQ(f.compute_coverage, 0);
}

TEST(RankStraggler, MissingIsNotZeroAndFewerThanTwoEligibleIsIncompleteNeverBalanced) {
  // A measured zero takes part (and is the culprit); a missing value does not.
  const StragglerFinding zero = rank_straggler({w(0, 20, 30, 100, 70), w(1, 20, 0, 100, 100), w(2, 20, std::nullopt, 100, 70)});
  EXPECT_EQ(zero.eligible, 2);
  EXPECT_EQ(zero.culprit, 1);
  const StragglerFinding one = rank_straggler({w(0, 20, 30, 100, 70), w(1, 20, std::nullopt, 100, 70),
                                               w(2, 20, 5, std::nullopt, 70), w(3, 0, 5, 100, 70)});
  EXPECT_EQ(one.eligible, 1);
  EXPECT_EQ(one.kind, StragglerKind::kIncompleteData);
  EXPECT_EQ(one.culprit, -1);
  EXPECT_EQ(rank_straggler({}).kind, StragglerKind::kIncompleteData);
}

TEST(RankStraggler, VictimIsNotTheOutlierMaximum) {
  // One rank waits far longer than the rest (its peer of another group was late): the victim stays the
  // upper median, so the score is measured against a typical rank.
  const StragglerFinding f = rank_straggler({w(0, 20, 30, 100, 70), w(1, 20, 30, 100, 70), w(2, 20, 90, 100, 10),
                                             w(3, 20, 30, 100, 70), w(4, 20, 15, 100, 85)});
  EXPECT_EQ(f.culprit, 4);
  EXPECT_NE(f.victim, 2);
  EXPECT_DOUBLE_EQ(f.visible_gap_ms, 15);
  EXPECT_DOUBLE_EQ(f.score, 0.15);
  EXPECT_EQ(f.severity, StragglerSeverity::kWarning);
}

}  // namespace
}  // namespace greyhound::analysis
