// BocdDetector ("bocd+v" and plain "bocd"): events, onsets and latencies on constructed traces, scale
// freedom, strict in-order reading, and what it must ignore.
#include "greyhound/analysis/bocd_detector.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "rng.h"

namespace ga = greyhound::analysis;

namespace {

// Healthy iteration times with a deterministic +-`jitter` (1 %), times `factor` on [from, to).
std::vector<double> trace(std::size_t n, double base, std::vector<std::tuple<std::size_t, std::size_t, double>> blocks = {},
                          double jitter = 0.01) {
  std::vector<double> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    double x = base * (1.0 + jitter * std::sin(1.7 * static_cast<double>(i)));
    for (const auto& [from, to, factor] : blocks) {
      if (i >= from && i < to) x *= factor;
    }
    v[i] = x;
  }
  return v;
}

std::vector<ga::SlowdownEvent> run(ga::SlowdownDetector& det, const std::vector<double>& v) {
  std::vector<ga::SlowdownEvent> events;
  for (double x : v) EXPECT_TRUE(det.push(x, events));
  return events;
}

ga::BocdDetectorParams plain_bocd() {
  ga::BocdDetectorParams p;
  p.validate = false;
  return p;
}

}  // namespace

TEST(BocdDetector, SlowdownAndRecoveryWithExactOnsets) {
  ga::BocdDetector det;
  const auto events = run(det, trace(220, 300.0, {{100, 150, 1.5}}));
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].direction, ga::ChangeDirection::kSlowdown);
  EXPECT_EQ(events[0].index, 100u);
  EXPECT_EQ(events[0].detected_index, 103u);  // a flat shift of 1.5x: decided on its 4th iteration (severe_run)
  EXPECT_NEAR(events[0].ratio, 1.5, 0.03);
  EXPECT_NEAR(events[0].before_ms, 297.0, 3.0);  // fastest-quarter level of a +-1 % jitter
  EXPECT_NEAR(events[0].after_ms / events[0].before_ms, events[0].ratio, 1e-12);
  EXPECT_EQ(events[1].direction, ga::ChangeDirection::kRecovery);
  EXPECT_EQ(events[1].index, 150u);
  EXPECT_EQ(events[1].detected_index, 153u);
  EXPECT_NEAR(events[1].ratio, 1.0 / 1.5, 0.02);
  EXPECT_EQ(det.iterations(), 220u);
  EXPECT_NEAR(*det.level(), 300.0, 3.0);
}

TEST(BocdDetector, ScaleFreeFrom50msTo50s) {
  std::vector<std::vector<ga::SlowdownEvent>> all;
  for (double base : {50.0, 300.0, 50000.0}) {
    ga::BocdDetector det;
    all.push_back(run(det, trace(300, base, {{80, 140, 1.25}, {200, 260, 2.0}})));
  }
  ASSERT_EQ(all[0].size(), 4u);
  for (const auto& events : all) {
    ASSERT_EQ(events.size(), all[0].size());
    for (std::size_t e = 0; e < events.size(); ++e) {
      EXPECT_EQ(events[e].direction, all[0][e].direction);
      EXPECT_EQ(events[e].index, all[0][e].index);
      EXPECT_EQ(events[e].detected_index, all[0][e].detected_index);
      EXPECT_NEAR(events[e].ratio, all[0][e].ratio, 1e-9);
    }
  }
  EXPECT_EQ(all[0][0].index, 80u);
  EXPECT_EQ(all[0][2].index, 200u);
}

TEST(BocdDetector, ReadsStrictlyInOrder) {
  ga::BocdDetector det;
  const auto v = trace(260, 300.0, {{60, 120, 1.3}, {180, 240, 1.8}});
  std::size_t total = 0;
  for (std::size_t i = 0; i < v.size(); ++i) {
    std::vector<ga::SlowdownEvent> events;
    det.push(v[i], events);
    for (const auto& e : events) {
      EXPECT_EQ(e.detected_index, i);  // decided by the iteration just read, never later data
      EXPECT_LE(e.index, i);
    }
    total += events.size();
  }
  EXPECT_EQ(total, 4u);
}

TEST(BocdDetector, CompoundSlowdownAndPartialRecoveries) {
  ga::BocdDetector det;
  // 1.3x from 100; another 1.5x on top from 140 to 180; the first ends at 220.
  const auto events = run(det, trace(300, 300.0, {{100, 220, 1.3}, {140, 180, 1.5}}));
  ASSERT_EQ(events.size(), 4u);
  const std::size_t onsets[] = {100, 140, 180, 220};
  const double ratios[] = {1.3, 1.5, 1.0 / 1.5, 1.0 / 1.3};
  const ga::ChangeDirection dirs[] = {ga::ChangeDirection::kSlowdown, ga::ChangeDirection::kSlowdown,
                                      ga::ChangeDirection::kRecovery, ga::ChangeDirection::kRecovery};
  for (std::size_t e = 0; e < 4; ++e) {
    EXPECT_EQ(events[e].index, onsets[e]);
    // Flat changes: the 1.5x ones (in and out) by severe_run 4, the 1.3x ones by early_run 5.
    EXPECT_EQ(events[e].detected_index, onsets[e] + (e == 1 || e == 2 ? 3 : 4));
    EXPECT_EQ(events[e].direction, dirs[e]);
    EXPECT_NEAR(events[e].ratio, ratios[e], 0.03);
  }
}

TEST(BocdDetector, ValidationDropsChangesBelowTenPercent) {
  // An 8 % step: plain BOCD reports it (and its end), bocd+v does not.
  const auto v = trace(300, 300.0, {{100, 200, 1.08}});
  ga::BocdDetector validated;
  EXPECT_TRUE(run(validated, v).empty());
  ga::BocdDetector plain(plain_bocd());
  const auto events = run(plain, v);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].index, 100u);
  EXPECT_NEAR(events[0].ratio, 1.08, 0.02);
  EXPECT_EQ(events[1].index, 200u);
}

TEST(BocdDetector, IgnoresSpikesStallsAndShortBursts) {
  auto v = trace(600, 300.0);
  for (std::size_t i = 40; i < v.size(); i += 37) v[i] *= 3.0;   // GC pauses
  v[250] *= 40.0;                                                 // a checkpoint stall
  for (std::size_t i = 300; i < 304; ++i) v[i] *= 1.4;            // a 4-iteration burst
  for (std::size_t i = 400; i < 403; ++i) v[i] *= 2.0;            // a 3-iteration burst
  v[405] *= 1.5;
  // A 5-iteration interference cluster: a 3-iteration burst next to a GC pause and an allocator miss. It is
  // not flat, so only min_run (6) could report it, and it does not last that long.
  for (std::size_t i = 500; i < 503; ++i) v[i] *= 1.4;
  v[503] *= 2.2;
  v[504] *= 1.15;
  ga::BocdDetector det;
  EXPECT_TRUE(run(det, v).empty());
}

TEST(BocdDetector, EarlyDecisionNeedsAFlatRunAndMinRunOtherwise) {
  // A 1.4x shift whose first iterations scatter (a GC pause on the second) is not flat at 5 iterations:
  // it is decided by the min_run rule, one iteration later than a flat one.
  auto v = trace(200, 300.0, {{100, 200, 1.4}});
  v[101] *= 1.6;
  ga::BocdDetector det;
  const auto events = run(det, v);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].index, 100u);
  EXPECT_EQ(events[0].detected_index, 105u);
  ga::BocdDetectorParams no_early;
  no_early.early_run = 0;
  no_early.severe_run = 0;
  ga::BocdDetector strict(no_early);
  const auto flat = run(strict, trace(200, 300.0, {{100, 200, 1.4}}));
  ASSERT_EQ(flat.size(), 1u);
  EXPECT_EQ(flat[0].detected_index, 105u);  // without the early rule even a flat shift waits for min_run
}

TEST(BocdDetector, SevereDecisionNeedsAFlatRunFarFromTheOldLevel) {
  // Flat shifts: 2x on its 4th iteration (severe_run), 1.3x on its 5th (early_run, below severe_ratio).
  ga::BocdDetector det;
  auto events = run(det, trace(200, 300.0, {{100, 200, 2.0}}));
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].index, 100u);
  EXPECT_EQ(events[0].detected_index, 103u);
  ga::BocdDetector mild;
  events = run(mild, trace(200, 300.0, {{100, 200, 1.3}}));
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].detected_index, 104u);
  // A 2x shift whose third iteration is a GC pause is not flat: min_run decides.
  auto v = trace(200, 300.0, {{100, 200, 2.0}});
  v[102] *= 1.6;
  ga::BocdDetector scattered;
  events = run(scattered, v);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].index, 100u);
  EXPECT_EQ(events[0].detected_index, 105u);
  // Switched off, the early rule decides the flat 2x shift.
  ga::BocdDetectorParams off;
  off.severe_run = 0;
  ga::BocdDetector no_severe(off);
  events = run(no_severe, trace(200, 300.0, {{100, 200, 2.0}}));
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].detected_index, 104u);
}

TEST(BocdDetector, AModerateShiftThatHoldsWithinOnePercentIsDecidedOnItsFourthIteration) {
  // On a job with +-0.2 % jitter a 1.3x shift and its recovery hold within 1 %: the severe rule takes them
  // on their 4th iteration although they are below severe_ratio.
  ga::BocdDetector det;
  auto events = run(det, trace(240, 300.0, {{100, 160, 1.3}}, 0.002));
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].direction, ga::ChangeDirection::kSlowdown);
  EXPECT_EQ(events[0].index, 100u);
  EXPECT_EQ(events[0].detected_index, 103u);
  EXPECT_EQ(events[1].direction, ga::ChangeDirection::kRecovery);
  EXPECT_EQ(events[1].index, 160u);
  EXPECT_EQ(events[1].detected_index, 163u);
  // Below moderate_ratio (1.12x) the early rule decides, on the 5th.
  ga::BocdDetector milder;
  events = run(milder, trace(200, 300.0, {{100, 200, 1.12}}, 0.002));
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].detected_index, 104u);
  // Switched off, the same 1.3x shift waits for the 5th.
  ga::BocdDetectorParams off;
  off.moderate_ratio = 0;
  ga::BocdDetector no_moderate(off);
  events = run(no_moderate, trace(200, 300.0, {{100, 200, 1.3}}, 0.002));
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].detected_index, 104u);
  // A run 1.2-1.6 % wide (one iteration 1.2 % up, and the jitter) is flat for the early rule (2 %) but not
  // for a moderate shift (1 %): the 5th.
  auto v = trace(200, 300.0, {{100, 200, 1.3}}, 0.002);
  v[101] *= 1.012;
  ga::BocdDetector wider;
  events = run(wider, v);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].index, 100u);
  EXPECT_EQ(events[0].detected_index, 104u);
  // On a job with 4 % jitter the band is half its sigma (about 2 %), not 1 %: a 1.3x shift whose first
  // four iterations lie 1.5 % apart is still taken on its 4th.
  auto noisy = trace(200, 300.0, {}, 0.04);
  for (std::size_t i = 100; i < 200; ++i) noisy[i] = 390.0 * (i % 2 ? 1.0 : 1.015);
  ga::BocdDetector jittery;
  events = run(jittery, noisy);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].index, 100u);
  EXPECT_EQ(events[0].detected_index, 103u);
  ga::BocdDetectorParams one_percent;
  one_percent.moderate_flat_sigmas = 0;  // the floor alone
  ga::BocdDetector floor_only(one_percent);
  events = run(floor_only, noisy);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].detected_index, 104u);
}

TEST(BocdDetector, AChangeWithinAnIterationIsReportedFromTheFirstWholeIteration) {
  // A 1.5x slowdown that began 70 % into iteration 40 (its time 1.35x: a mix of both levels), then a
  // scattered slow level (so the early rule does not apply). Bocd's most probable run starts with the mixed
  // iteration; the onset is the next one, the first wholly at the new level, and the decision comes 5
  // iterations after it (with the mixed iteration as the onset it read as 6). The after-level is the new
  // level's, not pulled down by the mix.
  std::vector<double> v;
  for (int i = 0; i < 40; ++i) v.push_back(440.0 * (i % 2 ? 1.005 : 0.995));
  v.push_back(440.0 * 1.35);
  for (double f : {1.0, 1.03, 1.0, 1.0015, 0.9985, 1.0, 1.03, 1.0, 1.0015, 1.0, 1.0, 0.9985}) v.push_back(660.0 * f);
  ga::BocdDetector det;
  const auto events = run(det, v);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].index, 41u);
  EXPECT_EQ(events[0].detected_index, 46u);
  EXPECT_NEAR(events[0].ratio, 1.5, 0.01);

  // A first iteration that is merely the new level's jitter stays the onset.
  v[40] = 660.0 * 0.99;
  ga::BocdDetector jitter;
  const auto same = run(jitter, v);
  ASSERT_EQ(same.size(), 1u);
  EXPECT_EQ(same[0].index, 40u);
}

TEST(BocdDetector, WarmupIsSkipped) {
  auto v = trace(200, 300.0, {{120, 170, 1.5}});
  v[0] *= 8.0;
  v[1] *= 3.0;
  v[2] *= 1.6;
  v[3] *= 1.2;
  ga::BocdDetector det;
  const auto events = run(det, v);
  EXPECT_EQ(det.warmup_iterations(), 4u);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].index, 120u);
  EXPECT_EQ(events[1].index, 170u);
}

TEST(BocdDetector, RejectsValuesThatAreNotIterationTimes) {
  ga::BocdDetector det;
  std::vector<ga::SlowdownEvent> events;
  EXPECT_FALSE(det.push(0.0, events));
  EXPECT_FALSE(det.push(-5.0, events));
  EXPECT_FALSE(det.push(std::numeric_limits<double>::quiet_NaN(), events));
  EXPECT_FALSE(det.push(std::numeric_limits<double>::infinity(), events));
  EXPECT_EQ(det.iterations(), 0u);
  EXPECT_TRUE(det.push(300.0, events));
  EXPECT_EQ(det.iterations(), 1u);
}

TEST(BocdDetector, SimulatedClusterTarget) {
  // The agent's case: ~100 iterations of a few hundred ms, 2 % jitter, a 1.5x GPU slowdown: caught within
  // 5 iterations of its onset and its end, and nothing on the healthy run.
  greyhound::analysis::eval::Rng rng(8);
  for (int run_index = 0; run_index < 20; ++run_index) {
    std::vector<double> healthy(100);
    std::vector<double> faulty(100);
    for (std::size_t i = 0; i < 100; ++i) {
      healthy[i] = 400.0 * std::exp(0.02 * rng.normal());
      faulty[i] = 400.0 * std::exp(0.02 * rng.normal()) * (i >= 30 && i < 60 ? 1.5 : 1.0);
    }
    ga::BocdDetector a;
    EXPECT_TRUE(run(a, healthy).empty());
    ga::BocdDetector b;
    const auto events = run(b, faulty);
    ASSERT_EQ(events.size(), 2u) << "run " << run_index;
    EXPECT_EQ(events[0].direction, ga::ChangeDirection::kSlowdown);
    EXPECT_LE(events[0].detected_index, 30u + 5u);
    EXPECT_GE(events[0].index + 2, 30u);
    EXPECT_EQ(events[1].direction, ga::ChangeDirection::kRecovery);
    EXPECT_LE(events[1].detected_index, 60u + 5u);
  }
}

TEST(SlowdownDetectorFactory, NamesAndMethods) {
  EXPECT_EQ(ga::method_from_name("bocd+v"), ga::DetectionMethod::kBocdValidated);
  EXPECT_EQ(ga::method_from_name("bocd"), ga::DetectionMethod::kBocd);
  EXPECT_EQ(ga::method_from_name("window"), ga::DetectionMethod::kSlidingWindow);
  EXPECT_FALSE(ga::method_from_name("BOCD").has_value());
  for (auto m : {ga::DetectionMethod::kBocdValidated, ga::DetectionMethod::kBocd, ga::DetectionMethod::kSlidingWindow}) {
    EXPECT_EQ(ga::method_from_name(ga::method_name(m)), m);
    auto det = ga::make_slowdown_detector(m);
    ASSERT_NE(det, nullptr);
    // Every method finds a clean 2x slowdown and its end.
    const auto events = run(*det, trace(200, 100.0, {{80, 140, 2.0}}));
    ASSERT_EQ(events.size(), 2u) << ga::method_name(m);
    EXPECT_EQ(events[0].index, 80u) << ga::method_name(m);
    EXPECT_EQ(events[1].index, 140u) << ga::method_name(m);
  }
  EXPECT_EQ(ga::direction_name(ga::ChangeDirection::kSlowdown), "slowdown");
  EXPECT_EQ(ga::direction_name(ga::ChangeDirection::kRecovery), "recovery");
}
