// Bocd: the run-length posterior against the reference implementation's test vector, pruning, and the
// outlier-robust variant.
#include "greyhound/analysis/bocd.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "rng.h"

namespace ga = greyhound::analysis;

namespace {

ga::BocdParams vector_params() {
  ga::BocdParams p;
  p.hazard_lambda = 250.0;
  p.prior = {0.0, 1.0, 0.1, 0.01};  // mu, kappa, alpha, beta
  p.prune_below = 0.0;              // no pruning: the full posterior
  p.max_run_lengths = 0;
  return p;
}

const std::vector<double> kVectorData{1.0, 1.1, 0.9, 1.0, 1.05, 0.95, 5.0, 5.1, 4.9, 5.0, 5.05, 4.95};

}  // namespace

// The test vector; the full-precision values come from the reference implementation's algorithm
// (hildensia/bayesian_changepoint_detection, StudentT observation model, constant hazard), as printed by
// tests/analysis/data/bocd_reference.py.
TEST(Bocd, ReferenceTestVector) {
  ga::Bocd bocd(vector_params());
  // Column 0: before any data, r = 0 with probability 1.
  EXPECT_EQ(bocd.size(), 1u);
  EXPECT_DOUBLE_EQ(bocd.probability(0), 1.0);
  const std::vector<std::uint64_t> argmax{0, 1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5};
  const double expected_rw[] = {0.5160767246823901, 0.6937759014980329, 0.7641312539763665, 0.8213863056028172,
                                0.8652102515022063};
  for (std::size_t t = 0; t < kVectorData.size(); ++t) {
    // Column t (after t observations): its argmax, and R[w][w + 6] for w = t - 6 in 1..5.
    EXPECT_EQ(bocd.map_run_length(), argmax[t]) << "t = " << t;
    if (t >= 7 && t <= 11) {
      const std::size_t w = t - 6;
      EXPECT_NEAR(bocd.probability(w), expected_rw[w - 1], 1e-12) << "R[" << w << "][" << t << "]";
      EXPECT_NEAR(bocd.probability(w), std::round(expected_rw[w - 1] * 1e4) / 1e4, 5e-5);
    }
    bocd.update(kVectorData[t]);
    // R[0][t] = H exactly at every step: a changepoint now says nothing about the data.
    EXPECT_NEAR(bocd.probability(0), 0.004, 1e-15) << "t = " << t + 1;
    double total = 0.0;
    for (std::size_t i = 0; i < bocd.size(); ++i) total += std::exp(bocd.log_probability_at(i));
    EXPECT_NEAR(total, 1.0, 1e-12);
    EXPECT_EQ(bocd.size(), t + 2);  // every run length 0..t+1 kept without pruning
  }
  EXPECT_EQ(bocd.observations(), 12u);
  EXPECT_EQ(bocd.map_run_length(), 6u);
  EXPECT_NEAR(bocd.mass_between(1, 5), 1.0 - 0.004 - bocd.probability(6) - bocd.mass_between(7, 12), 1e-12);
}

TEST(Bocd, LogSpaceSurvivesLongSequences) {
  // Thousands of observations make unpruned run-length probabilities underflow in linear space; the log
  // posterior stays finite and normalised. Runs longer than the 32,768-entry terms table use the
  // asymptotic series.
  ga::BocdParams p = vector_params();
  p.prune_below = 1e-12;
  p.max_run_lengths = 64;
  ga::Bocd bocd(p);
  greyhound::analysis::eval::Rng rng(1);
  for (int i = 0; i < 40000; ++i) bocd.update(1.0 + 0.01 * rng.normal());
  EXPECT_EQ(bocd.map_run_length(), 40000u);
  EXPECT_LE(bocd.size(), 64u);
  double total = 0.0;
  for (std::size_t i = 0; i < bocd.size(); ++i) {
    EXPECT_TRUE(std::isfinite(bocd.log_probability_at(i)));
    total += std::exp(bocd.log_probability_at(i));
  }
  EXPECT_NEAR(total, 1.0, 1e-6);
  EXPECT_TRUE(std::isfinite(bocd.last_log_evidence()));
  // One more update across the table edge keeps the long run as the MAP.
  bocd.update(1.0);
  EXPECT_EQ(bocd.map_run_length(), 40001u);
}

TEST(Bocd, PruningKeepsFewRunLengthsAndTheDecisions) {
  // The detector's configuration (prune below 1e-3 = H / 4) against the exact posterior, on a stream with a
  // level change every 400 observations: the detector's decision quantity P(6 <= r <= 16) first reaches
  // 0.9 at the same step after every change, and the pruned posterior keeps a handful of run lengths.
  ga::BocdParams exact = vector_params();
  exact.prior = {0.0, 0.01, 2.0, 0.0009};
  ga::BocdParams pruned = exact;
  pruned.prune_below = 1e-3;
  pruned.max_run_lengths = 1024;
  ga::Bocd a(exact);
  ga::Bocd b(pruned);
  greyhound::analysis::eval::Rng rng(2);
  double worst = 0.0;
  std::size_t most = 0;
  std::vector<int> first_a;
  std::vector<int> first_b;
  for (int i = 0; i < 2000; ++i) {
    const double y = (i / 400) % 2 == 1 ? 0.4 : 0.0;
    const double x = y + 0.02 * rng.normal();
    a.update(x);
    b.update(x);
    const double ma = a.mass_between(6, 16);
    const double mb = b.mass_between(6, 16);
    worst = std::max(worst, std::abs(ma - mb));
    most = std::max(most, b.size());
    if (i % 400 == 0) {
      first_a.push_back(-1);
      first_b.push_back(-1);
    }
    if (first_a.back() < 0 && ma >= 0.9) first_a.back() = i;
    if (first_b.back() < 0 && mb >= 0.9) first_b.back() = i;
  }
  EXPECT_EQ(a.size(), 2001u);
  EXPECT_LE(most, 12u);
  EXPECT_LT(worst, 0.1);
  EXPECT_EQ(first_a, first_b);
  for (std::size_t c = 1; c < first_a.size(); ++c) EXPECT_EQ(first_a[c], static_cast<int>(400 * c) + 5);
}

TEST(Bocd, OutlierComponentKeepsHistoryThroughAStall) {
  ga::BocdParams plain;
  plain.hazard_lambda = 250.0;
  plain.prior = {0.0, 0.01, 2.0, 0.0009};
  plain.prune_below = 1e-8;
  ga::BocdParams robust = plain;
  robust.outlier_probability = 0.02;
  robust.outlier_log_density = std::log(0.1);
  ga::Bocd a(plain);
  ga::Bocd b(robust);
  greyhound::analysis::eval::Rng rng(3);
  auto feed = [&](double x) {
    a.update(x);
    b.update(x);
  };
  for (int i = 0; i < 200; ++i) feed(0.02 * rng.normal());
  feed(std::log(100.0));  // one 100x checkpoint stall
  for (int i = 0; i < 5; ++i) feed(0.02 * rng.normal());
  // The plain model restarted its run at the stall; the robust one still holds the 206-long run.
  EXPECT_LE(a.map_run_length(), 6u);
  EXPECT_EQ(b.map_run_length(), 206u);
  // A sustained shift is still found by the robust model: a new run dominates within a few steps.
  for (int i = 0; i < 6; ++i) b.update(0.3 + 0.02 * rng.normal());
  EXPECT_GT(b.mass_between(5, 7), 0.9);
}
