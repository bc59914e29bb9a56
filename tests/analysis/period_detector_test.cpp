// PeriodDetector and detect_period: exact periods, cycle starts and iteration times on synthetic op streams,
// bounded error on noisy ones, re-detection after a change of period without a false slowdown.
#include "greyhound/analysis/period_detector.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "greyhound/analysis/slowdown_detector.h"
#include "rng.h"
#include "synthetic_ops.h"

namespace ga = greyhound::analysis;
namespace ge = greyhound::analysis::eval;

namespace {

std::vector<ga::Iteration> feed(ga::PeriodDetector& det, const ge::OpStream& s) {
  std::vector<ga::Iteration> out;
  for (std::size_t i = 0; i < s.t_ns.size(); ++i) det.push(s.t_ns[i], s.symbols[i], out);
  det.finish(out);
  return out;
}

std::vector<std::uint64_t> repeat(const std::vector<std::uint64_t>& pattern, std::size_t times,
                                  std::size_t warmup = 0) {
  std::vector<std::uint64_t> s;
  for (std::size_t w = 0; w < warmup; ++w) s.push_back(1000 + w);
  for (std::size_t k = 0; k < times; ++k) s.insert(s.end(), pattern.begin(), pattern.end());
  return s;
}

std::vector<double> constant_then_block(std::size_t n, double base_ms, std::size_t from, std::size_t to,
                                        double factor) {
  std::vector<double> v(n, base_ms);
  for (std::size_t k = from; k < to && k < n; ++k) v[k] = base_ms * factor;
  return v;
}

// The truth iteration whose start S_j is the last one at or before t.
std::size_t truth_index(const ge::OpStream& s, std::uint64_t t) {
  const auto it = std::upper_bound(s.iteration_start_ns.begin(), s.iteration_start_ns.end(), t);
  return static_cast<std::size_t>(it - s.iteration_start_ns.begin()) - 1;
}

}  // namespace

TEST(OpSymbol, EqualOnlyForEqualCalls) {
  const auto a = ga::op_symbol(1, 0x10, 4096);
  EXPECT_EQ(a, ga::op_symbol(1, 0x10, 4096));
  EXPECT_NE(a, ga::op_symbol(2, 0x10, 4096));
  EXPECT_NE(a, ga::op_symbol(1, 0x11, 4096));
  EXPECT_NE(a, ga::op_symbol(1, 0x10, 4097));
  // The fields are not interchangeable.
  EXPECT_NE(ga::op_symbol(1, 2, 3), ga::op_symbol(2, 1, 3));
}

TEST(DetectPeriod, ExactSequenceWithWarmup) {
  const std::vector<std::uint64_t> pattern{11, 12, 13, 14, 15, 16, 17};
  const auto s = repeat(pattern, 60, 5);
  const auto fit = ga::detect_period(s, {});
  ASSERT_TRUE(fit.has_value());
  EXPECT_EQ(fit->period, 7u);
  EXPECT_EQ(fit->start, 5u);  // the warm-up records are not part of any cycle
  // Only the first cycle, compared with the warm-up one period earlier, mismatches (5 records).
  EXPECT_NEAR(fit->acf, 1.0 - 5.0 / double(s.size() - 7), 1e-12);
}

TEST(DetectPeriod, SmallestQualifyingLagNotItsMultiples) {
  // Lags 7, 14, 21 ... all have autocorrelation 1; the smallest is the period.
  const auto s = repeat({1, 2, 3, 1, 2, 3, 4}, 80);
  const auto fit = ga::detect_period(s, {});
  ASSERT_TRUE(fit.has_value());
  EXPECT_EQ(fit->period, 7u);
  EXPECT_EQ(fit->start, 0u);
  EXPECT_DOUBLE_EQ(fit->acf, 1.0);
}

TEST(DetectPeriod, AlternatingSendRecvIsNotTheIteration) {
  // 20 Send/Recv pairs then one AllReduce: lag 2 matches within a run of P2P calls but only ~93 % of a
  // whole window, so the 41-record iteration is found.
  std::vector<std::uint64_t> pattern;
  for (int i = 0; i < 20; ++i) {
    pattern.push_back(10);
    pattern.push_back(11);
  }
  pattern.push_back(1);
  const auto fit = ga::detect_period(repeat(pattern, 12), {});
  ASSERT_TRUE(fit.has_value());
  EXPECT_EQ(fit->period, 41u);
}

TEST(DetectPeriod, MicroBatchPatternIsRefinedToTheIteration) {
  // 64 identical micro-batches then 8 gradient AllReduces: the 20-call micro-batch lag alone has an
  // autocorrelation of ~0.98, but its mismatches recur every 1,288 calls, where the sequence repeats exactly.
  const auto pattern = ge::megatron_pattern(64, 8, 8);
  ASSERT_EQ(pattern.size(), 1288u);
  const auto fit = ga::detect_period(repeat(pattern, 4), {});
  ASSERT_TRUE(fit.has_value());
  EXPECT_EQ(fit->period, 1288u);
  EXPECT_DOUBLE_EQ(fit->acf, 1.0);

  // The same when the iteration is an exact multiple of the sub-pattern (the last micro-batch differs).
  std::vector<std::uint64_t> multiple;
  for (int m = 0; m < 40; ++m) {
    for (std::uint64_t j = 0; j < 20; ++j) multiple.push_back(m == 39 && j == 0 ? 999 : j);
  }
  const auto fit2 = ga::detect_period(repeat(multiple, 4), {});
  ASSERT_TRUE(fit2.has_value());
  EXPECT_EQ(fit2->period, 800u);
}

TEST(DetectPeriod, NothingInShortOrAperiodicWindows) {
  const auto s = repeat({1, 2, 3}, 80);  // 240 records < min_window 256
  EXPECT_FALSE(ga::detect_period(s, {}).has_value());
  ga::PeriodParams small;
  small.min_window = 64;
  EXPECT_EQ(ga::detect_period(s, small)->period, 3u);

  ge::Rng rng(3);
  std::vector<std::uint64_t> noise(20000);
  for (auto& v : noise) v = rng.integer(0, 50);
  EXPECT_FALSE(ga::detect_period(noise, {}).has_value());
}

TEST(DetectPeriod, MinAcfIsTheThreshold) {
  // 4 % of the records substituted at random: each costs a mismatch there and one period later, so the
  // autocorrelation at the period is about 0.92.
  auto s = repeat({1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 100);
  ge::Rng rng(21);
  for (auto& v : s) {
    if (rng.chance(0.04)) v = 100 + rng.integer(0, 1000);
  }
  ga::PeriodParams p;
  p.min_acf = 0.95;
  EXPECT_FALSE(ga::detect_period(s, p).has_value());
  p.min_acf = 0.90;
  const auto fit = ga::detect_period(s, p);
  ASSERT_TRUE(fit.has_value());
  EXPECT_EQ(fit->period, 10u);
  EXPECT_GT(fit->acf, 0.90);
  EXPECT_LT(fit->acf, 0.95);
}

TEST(PeriodDetector, ExactIterationTimesOnACleanStream) {
  ge::OpStreamSpec spec;
  spec.pattern = ge::megatron_pattern(4, 3, 2);  // 4 * 10 + 2 = 42 calls per iteration
  spec.iter_ms = constant_then_block(100, 300.0, 50, 70, 1.5);
  spec.warmup_records = 10;
  const auto s = ge::make_op_stream(spec);
  ASSERT_EQ(spec.pattern.size(), 42u);

  ga::PeriodDetector det;
  std::vector<ga::Iteration> out;
  std::size_t confirmed_at = 0;
  for (std::size_t i = 0; i < s.t_ns.size(); ++i) {
    det.push(s.t_ns[i], s.symbols[i], out);
    if (det.locks() == 0) {
      EXPECT_TRUE(out.empty());  // held back while the lock is provisional
      continue;
    }
    if (confirmed_at == 0) confirmed_at = i;
    // Once confirmed, online: iteration k is known as soon as the first half of cycle k + 1 (21 calls) is
    // read (a whole cycle before: records / 42 - 1). The stream's calls keep their offsets within an
    // iteration, so the anchors always agree, even where the iteration time changes.
    const std::size_t records = i + 1 - 10;
    EXPECT_EQ(out.size(), (records - 21) / 42) << "after record " << i;
  }
  // Found on the first search window (256 records), confirmed after as many new records.
  EXPECT_EQ(confirmed_at, 2 * 256u - 1);
  EXPECT_EQ(det.finish(out), 0u);
  EXPECT_EQ(det.state(), ga::PeriodDetector::State::kLocked);
  EXPECT_EQ(det.period(), 42u);
  EXPECT_EQ(det.cycle_start(), 10u);
  EXPECT_EQ(det.locks(), 1u);
  EXPECT_EQ(det.period_changes(), 0u);
  ASSERT_EQ(out.size(), 99u);  // 100 cycles, the last one has no successor
  for (std::size_t k = 0; k < out.size(); ++k) {
    EXPECT_EQ(out[k].index, k);
    EXPECT_EQ(out[k].iter_ns, double(s.iteration_start_ns[k + 1] - s.iteration_start_ns[k])) << k;
    EXPECT_EQ(out[k].end_t_ns, s.iteration_start_ns[k + 1]);
    EXPECT_EQ(out[k].period, 42u);
    EXPECT_EQ(out[k].segment, 0u);
    EXPECT_EQ(out[k].anchors, 21u);  // the first half of the next cycle
  }
  EXPECT_EQ(out[49].iter_ns, 300e6);
  EXPECT_EQ(out[50].iter_ns, 450e6);
  EXPECT_EQ(det.stats().extra_records + det.stats().missing_records + det.stats().mismatched_records, 0u);
}

TEST(PeriodDetector, NoisyStreamWithinOnePercent) {
  ge::OpStreamSpec spec;
  spec.pattern = ge::megatron_pattern(8, 2, 3);  // 8 * 8 + 3 = 67
  spec.iter_ms = constant_then_block(300, 300.0, 120, 180, 1.5);
  spec.op_jitter_ms = 2.0;             // each call's time +-2 ms (0.7 % of an iteration)
  spec.extra_per_iteration = 0.05;     // evaluation/logging collectives in 1 of 20 iterations
  spec.drop_probability = 0.0005;      // a lost record every ~30 iterations
  spec.warmup_records = 25;
  spec.seed = 11;
  const auto s = ge::make_op_stream(spec);

  ga::PeriodDetector det;
  const auto out = feed(det, s);
  EXPECT_EQ(det.period(), 67u);
  EXPECT_EQ(det.period_changes(), 0u);
  EXPECT_GT(det.stats().extra_records, 5u);
  EXPECT_GT(det.stats().missing_records, 5u);
  // From the first lock on, every iteration is measured despite the extra and lost records (the lock is
  // found on a recent window free of them, so a few iterations at the start are not back-filled).
  // (The template may start mid-iteration: an iteration "ends" at its first call, wherever that is.)
  ASSERT_FALSE(out.empty());
  const std::size_t first = truth_index(s, out.front().end_t_ns);
  const std::size_t last = truth_index(s, out.back().end_t_ns);
  EXPECT_LT(first, 20u);
  EXPECT_GE(last, 298u);
  EXPECT_EQ(out.size(), last - first + 1);
  double worst = 0.0;
  std::size_t compared = 0;
  for (const auto& it : out) {
    const std::size_t j = truth_index(s, it.end_t_ns);
    ASSERT_GE(j, 1u);
    ASSERT_LT(j + 1, s.iteration_start_ns.size());
    const double before = double(s.iteration_start_ns[j] - s.iteration_start_ns[j - 1]);
    const double after = double(s.iteration_start_ns[j + 1] - s.iteration_start_ns[j]);
    if (before != after) continue;  // the anchors straddle a change of iteration time
    worst = std::max(worst, std::abs(it.iter_ns - before) / before);
    ++compared;
  }
  EXPECT_GT(compared, 270u);
  EXPECT_LT(worst, 0.01);
}

TEST(PeriodDetector, ChangeOfPeriodIsRedetectedNotASlowdown) {
  // A micro-batch re-allocation: 4 -> 6 micro-batches on this rank, same iteration time.
  ge::OpStreamSpec spec;
  spec.pattern = ge::megatron_pattern(4, 3, 2);        // 42
  spec.pattern_after = ge::megatron_pattern(6, 3, 2);  // 62
  spec.change_at = 60;
  spec.iter_ms = std::vector<double>(140, 300.0);
  spec.op_jitter_ms = 1.0;
  spec.seed = 5;
  const auto s = ge::make_op_stream(spec);

  ga::PeriodDetector det;
  const auto out = feed(det, s);
  EXPECT_EQ(det.locks(), 2u);
  EXPECT_EQ(det.period_changes(), 1u);
  EXPECT_EQ(det.period(), 62u);
  EXPECT_EQ(det.stats().lost_locks, 1u);
  EXPECT_EQ(det.stats().rejected_locks, 0u);
  // Every iteration but the few around the switch is measured, with consecutive indices, and none is slow.
  EXPECT_GE(out.size(), 139u - 3u);
  for (std::size_t k = 0; k < out.size(); ++k) {
    EXPECT_EQ(out[k].index, k);
    EXPECT_NEAR(out[k].iter_ns, 300e6, 3e6) << k;
    if (k > 0) {
      EXPECT_GT(out[k].end_t_ns, out[k - 1].end_t_ns);
    }
  }
  EXPECT_EQ(out.front().period, 42u);
  EXPECT_EQ(out.back().period, 62u);
  EXPECT_EQ(out.back().segment, 1u);

  auto detector = ga::make_slowdown_detector(ga::DetectionMethod::kBocdValidated);
  std::vector<ga::SlowdownEvent> events;
  for (const auto& it : out) detector->push(it.iter_ns * 1e-6, events);
  EXPECT_TRUE(events.empty());
}

TEST(PeriodDetector, BurstOfForeignCallsRelocksOnTheSamePeriod) {
  // An evaluation phase: 400 calls outside the training pattern during one 1.3 s iteration.
  const auto pattern = ge::megatron_pattern(4, 3, 2);
  std::vector<std::uint64_t> t;
  std::vector<std::uint64_t> sym;
  std::vector<std::uint64_t> starts;
  std::uint64_t now = 1'000'000'000;
  ge::Rng rng(9);
  for (int k = 0; k < 120; ++k) {
    starts.push_back(now);
    for (std::size_t j = 0; j < pattern.size(); ++j) {
      t.push_back(now + j * 5'000'000);
      sym.push_back(pattern[j]);
    }
    std::uint64_t length = 300'000'000;
    if (k == 60) {
      for (int e = 0; e < 400; ++e) {
        t.push_back(now + 250'000'000 + e * 2'000'000);
        sym.push_back(ga::op_symbol(7, rng.integer(1, 40), 64));
      }
      length += 1'000'000'000;
    }
    now += length;
  }
  starts.push_back(now);

  ga::PeriodDetector det;
  std::vector<ga::Iteration> out;
  for (std::size_t i = 0; i < t.size(); ++i) det.push(t[i], sym[i], out);
  det.finish(out);
  EXPECT_EQ(det.locks(), 2u);
  EXPECT_EQ(det.period_changes(), 0u);  // same template: a relock, not a change of period
  EXPECT_GE(out.size(), 110u);
  for (const auto& it : out) {
    const auto j = static_cast<std::size_t>(std::upper_bound(starts.begin(), starts.end(), it.end_t_ns) - starts.begin()) - 1;
    ASSERT_GE(j, 1u);
    // Whatever is reported is the true time of the iteration it ends, the long one included if measured.
    EXPECT_EQ(it.iter_ns, double(starts[j] - starts[j - 1])) << it.index;
  }
}

TEST(PeriodDetector, SearchesAreGeometricWhileNothingRepeats) {
  ge::Rng rng(4);
  ga::PeriodDetector det;
  std::vector<ga::Iteration> out;
  for (std::uint64_t i = 0; i < 200'000; ++i) det.push(i * 1000, rng.integer(0, 1000), out);
  EXPECT_EQ(det.locks(), 0u);
  EXPECT_TRUE(out.empty());
  // The buffer grows by 25 % between searches up to max_window, then halves: O(log n) searches, not O(n).
  EXPECT_LE(det.stats().searches, 40u);
  EXPECT_GE(det.stats().searches, 10u);
}

TEST(PeriodDetector, LockedStreamDoesNotSearchAgain) {
  ge::OpStreamSpec spec;
  spec.pattern = ge::megatron_pattern(16, 4, 4);  // 16 * 12 + 4 = 196
  spec.iter_ms = std::vector<double>(600, 500.0);
  const auto s = ge::make_op_stream(spec);
  ga::PeriodDetector det;
  const auto out = feed(det, s);
  EXPECT_EQ(det.period(), 196u);
  EXPECT_EQ(det.locks(), 1u);
  // Twelve tensor-parallel calls per micro-batch repeat through most of a 196-call iteration: a short
  // window locks on them, the lock breaks at the next gradient AllReduce before it is confirmed, and is
  // dropped without reporting anything.
  EXPECT_GE(det.stats().rejected_locks, 1u);
  ASSERT_EQ(out.size(), 599u);
  for (std::size_t k = 0; k < out.size(); ++k) {
    EXPECT_EQ(out[k].index, k);
    EXPECT_EQ(out[k].iter_ns, 500e6);
  }
  EXPECT_LE(det.stats().searches, 12u);
}

TEST(PeriodDetector, SubPatternLockSelfCorrectsByGrowingTheWindow) {
  // 64 identical micro-batches per 1,288-call iteration: a 256-record window sees only micro-batches, the
  // lock on them outlives its confirmation, then breaks at every gradient AllReduce and comes back. Each
  // comeback doubles the minimum search window until the windows hold three iterations.
  ge::OpStreamSpec spec;
  spec.pattern = ge::megatron_pattern(64, 8, 8);
  spec.iter_ms = std::vector<double>(40, 300.0);
  const auto s = ge::make_op_stream(spec);
  ga::PeriodDetector det;
  const auto out = feed(det, s);
  EXPECT_EQ(det.period(), 1288u);
  // Two doublings (256 -> 1024) here: then no search window is filled by micro-batches alone before the
  // buffer holds the three iterations the refinement needs.
  EXPECT_EQ(det.stats().window_doublings, 2u);
  EXPECT_EQ(det.min_window(), 1024u);
  EXPECT_GE(det.period_changes(), 1u);
  // Once found, every iteration is the true one.
  std::size_t true_period_iterations = 0;
  for (const auto& it : out) {
    if (it.period != 1288u) continue;
    EXPECT_EQ(it.iter_ns, 300e6);
    EXPECT_EQ(it.segment, det.locks() - 1);
    ++true_period_iterations;
  }
  EXPECT_GE(true_period_iterations, 30u);
  // Its indices continue those of the micro-batch "iterations" before it.
  for (std::size_t k = 0; k < out.size(); ++k) EXPECT_EQ(out[k].index, k);
}

TEST(PeriodDetector, OneCallPerIterationIsLockedAfterTwoSearchWindows) {
  // A pure data-parallel job whose gradients fit one bucket: one AllReduce per iteration. Nothing tells
  // its period-1 stream from micro-batches inside a longer iteration but more of it, so the lock waits for
  // the minimum search window (256 records) and as many records again to confirm: 511 iterations. A job
  // with k calls per iteration waits about 512 / k of them.
  ge::OpStreamSpec spec;
  spec.pattern = {ga::op_symbol(2, 0xd0, 1 << 20)};
  spec.iter_ms = constant_then_block(600, 200.0, 560, 600, 1.5);
  const auto s = ge::make_op_stream(spec);
  ga::PeriodDetector det;
  std::vector<ga::Iteration> out;
  std::size_t first_reported_at = 0;
  for (std::size_t i = 0; i < s.t_ns.size(); ++i) {
    det.push(s.t_ns[i], s.symbols[i], out);
    if (!out.empty() && first_reported_at == 0) first_reported_at = i;
  }
  EXPECT_EQ(first_reported_at, 2 * 256u - 1);
  EXPECT_EQ(det.period(), 1u);
  // Then every iteration back to the first is reported, in order, with its exact time.
  ASSERT_EQ(out.size(), 599u);
  for (std::size_t k = 0; k < out.size(); ++k) {
    EXPECT_EQ(out[k].index, k);
    EXPECT_EQ(out[k].iter_ns, k < 560 ? 200e6 : 300e6) << k;
  }
}

// An iteration is reported once the first half of the next cycle is read, when those anchors agree; one
// whose ops moved within the iteration (here every op stretches with a 1.5x slowdown from iteration 100 on,
// as when a GPU slows every kernel) waits for the whole cycle and averages every anchor.
TEST(PeriodDetector, AnIterationWhoseOpsMovedWaitsForTheWholeCycle) {
  const auto pattern = ge::megatron_pattern(4, 3, 2);  // 42
  const std::size_t p = pattern.size();
  std::vector<std::uint64_t> t, sym;
  std::uint64_t start = 1'000'000'000;
  for (int k = 0; k < 200; ++k) {
    const std::uint64_t d = k < 100 ? 300'000'000 : 450'000'000;
    for (std::size_t j = 0; j < p; ++j) {
      t.push_back(start + j * d / p);
      sym.push_back(pattern[j]);
    }
    start += d;
  }
  ga::PeriodDetector det;
  std::vector<ga::Iteration> out;
  std::vector<std::size_t> known_at;  // the record whose push reported each iteration
  for (std::size_t i = 0; i < t.size(); ++i) {
    const std::size_t n = det.push(t[i], sym[i], out);
    known_at.insert(known_at.end(), n, i);
  }
  ASSERT_EQ(det.locks(), 1u);
  ASSERT_EQ(det.cycle_start(), 0u);
  ASSERT_EQ(out.size(), 199u);
  for (std::size_t k = 20; k < out.size(); ++k) {  // (the first ones are back-filled at the confirmation)
    ASSERT_EQ(out[k].index, k);
    if (k == 99) {
      // Anchor j measures 300 ms + j/42 of the 150 ms more: the first half's do not agree.
      EXPECT_EQ(out[k].anchors, p);
      EXPECT_EQ(known_at[k], p * (k + 2) - 1) << "the whole next cycle";
      EXPECT_NEAR(out[k].iter_ns, 300e6 + 150e6 * (p - 1) / 2.0 / p, 1e3);
    } else {
      EXPECT_EQ(out[k].anchors, p / 2);
      EXPECT_EQ(known_at[k], p * (k + 1) + p / 2 - 1) << "half the next cycle";
      EXPECT_NEAR(out[k].iter_ns, k < 99 ? 300e6 : 450e6, 1e3) << k;
    }
  }
}
