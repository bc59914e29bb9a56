// MicrobatchSolver: exact optimum and the documented tie rule, checked against brute force on thousands of
// random small instances and against an independent heap-based greedy on medium ones.
#include "greyhound/mitigate/microbatch_solver.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <queue>
#include <random>
#include <tuple>
#include <vector>

namespace greyhound::mitigate {
namespace {

using Alloc = std::vector<std::int64_t>;

// A group's finish time with `f` fill slots (MicrobatchProblem::fill_slots).
double finish(double t, std::int64_t m, std::int64_t f = 0) { return static_cast<double>(m + f) * t; }

double makespan_of(const std::vector<double>& t, const Alloc& m, std::int64_t f = 0) {
  double best = 0.0;
  for (std::size_t i = 0; i < t.size(); ++i) best = std::max(best, finish(t[i], m[i], f));
  return best;
}

std::int64_t moved_of(const Alloc& m, const Alloc& cur) {
  std::int64_t moved = 0;
  for (std::size_t i = 0; i < m.size(); ++i) moved += std::max<std::int64_t>(0, m[i] - cur[i]);
  return moved;
}

// Key of the step that takes group i from k to k + 1 units of P (the header's formal tie rule).
using StepKey = std::tuple<std::int64_t, double, std::size_t>;

std::vector<StepKey> step_keys_descending(const std::vector<double>& t, std::int64_t p, const Alloc& m,
                                          const Alloc& cur, std::int64_t f) {
  std::vector<StepKey> keys;
  for (std::size_t i = 0; i < t.size(); ++i) {
    for (std::int64_t k = 1; k < m[i] / p; ++k) {
      std::int64_t change = 0;
      if (!cur.empty()) change = std::llabs(p * (k + 1) - cur[i]) - std::llabs(p * k - cur[i]);
      keys.emplace_back(change, finish(t[i], p * (k + 1), f), i);
    }
  }
  std::sort(keys.rbegin(), keys.rend());
  return keys;
}

struct Brute {
  Alloc best;
  double makespan = 0.0;
  std::int64_t min_moved = 0;
};

// Visits every allocation of `units` units over k.size() groups, each >= 1 unit.
template <class Visit>
void for_each_composition(Alloc& k, std::size_t at, std::int64_t units, Visit&& visit) {
  if (at + 1 == k.size()) {
    k[at] = units;
    visit(k);
    return;
  }
  const auto rest = static_cast<std::int64_t>(k.size() - at - 1);
  for (std::int64_t v = 1; v + rest <= units; ++v) {
    k[at] = v;
    for_each_composition(k, at + 1, units - v, visit);
  }
}

Brute brute_force(const std::vector<double>& t, std::int64_t m_total, std::int64_t p, const Alloc& cur,
                  std::int64_t f = 0) {
  const std::size_t d = t.size();
  Brute out;
  out.makespan = std::numeric_limits<double>::infinity();
  std::vector<StepKey> best_keys;
  Alloc k(d, 1);
  for_each_composition(k, 0, m_total / p, [&](const Alloc& units) {
    Alloc m(d);
    for (std::size_t i = 0; i < d; ++i) m[i] = units[i] * p;
    const double ms = makespan_of(t, m, f);
    const std::int64_t mv = cur.empty() ? 0 : moved_of(m, cur);
    auto keys = step_keys_descending(t, p, m, cur, f);
    if (ms < out.makespan) {
      out = Brute{m, ms, mv};
      best_keys = std::move(keys);
    } else if (ms == out.makespan) {
      out.min_moved = std::min(out.min_moved, mv);
      if (keys < best_keys) {
        out.best = m;
        best_keys = std::move(keys);
      }
    }
  });
  return out;
}

Alloc random_composition(std::mt19937_64& rng, std::int64_t total, std::size_t parts, std::int64_t granule) {
  Alloc a(parts, 0);
  for (std::int64_t u = 0; u < total / granule; ++u) {
    a[std::uniform_int_distribution<std::size_t>(0, parts - 1)(rng)] += granule;
  }
  a[0] += total % granule;
  return a;
}

TEST(MicrobatchSolver, IssueTestVector) {
  MicrobatchSolver solver;
  MicrobatchProblem pb{{1052.28, 1471.50, 1052.28, 1052.28}, 32, 1, {8, 8, 8, 8}};
  const auto r = solver.solve(pb);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r->makespan_ms, 9470.52);
  EXPECT_EQ(r->microbatches, (Alloc{9, 6, 9, 8}));
  EXPECT_EQ(r->moved, 2);

  pb.current.clear();
  const auto fresh = solver.solve(pb);
  ASSERT_TRUE(fresh.ok());
  EXPECT_EQ(fresh->makespan_ms, 9470.52);
  EXPECT_EQ(fresh->microbatches, (Alloc{9, 6, 9, 8}));
  EXPECT_EQ(fresh->moved, 0);
}

TEST(MicrobatchSolver, CurrentAllocationThatIsOptimalIsKept) {
  MicrobatchSolver solver;
  // Equal times, M = 10 over 4 groups: any allocation with two 3s and two 2s is optimal (makespan 3).
  for (const Alloc& cur : {Alloc{2, 3, 2, 3}, Alloc{3, 2, 2, 3}, Alloc{2, 2, 3, 3}}) {
    const auto r = solver.solve({{1.0, 1.0, 1.0, 1.0}, 10, 1, cur});
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->microbatches, cur);
    EXPECT_EQ(r->moved, 0);
    EXPECT_EQ(r->makespan_ms, 3.0);
  }
  // Without a current allocation the extra micro-batches go to the lower indices.
  const auto r = solver.solve({{1.0, 1.0, 1.0, 1.0}, 10, 1, {}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->microbatches, (Alloc{3, 3, 2, 2}));
}

TEST(MicrobatchSolver, TiesGoToTheSmallestResultingFinishTime) {
  MicrobatchSolver solver;
  // Optimum 12 (group 0 at 3 x 4 = 12, group 1 at 4 x 3 = 12 or less). The even current allocation
  // [5, 5, 5] must shed 2 from group 0; either of the other groups may take them at equal moves; the
  // one whose finish stays smaller (group 2: 6 x 1.5 = 9 < group 1: 6 x 2 = 12) gets them first.
  const auto r = solver.solve({{4.0, 2.0, 1.5}, 15, 1, {5, 5, 5}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->makespan_ms, 12.0);
  EXPECT_EQ(r->microbatches, (Alloc{3, 5, 7}));
  EXPECT_EQ(r->moved, 2);
}

TEST(MicrobatchSolver, PipelineDepthConstraint) {
  MicrobatchSolver solver;
  const auto r = solver.solve({{1.0, 1.0, 1.0, 2.0}, 32, 4, {8, 8, 8, 8}});
  ASSERT_TRUE(r.ok()) << r.error();
  // Group 3 may keep only 4 (8 x 2 = 16 > 12); of the three groups that could take its 4 at finish 12,
  // the lowest index does.
  EXPECT_EQ(r->microbatches, (Alloc{12, 8, 8, 4}));
  EXPECT_EQ(r->makespan_ms, 12.0);
  EXPECT_EQ(r->moved, 4);
  for (auto m : r->microbatches) EXPECT_EQ(m % 4, 0);
  // A current allocation that is not a multiple of P is moved as little as possible: remainders that are
  // larger round up first.
  const auto odd = solver.solve({{1.0, 1.0, 1.0, 1.0}, 16, 2, {3, 5, 5, 3}});
  ASSERT_TRUE(odd.ok());
  EXPECT_EQ(odd->microbatches, (Alloc{4, 4, 4, 4}));
  EXPECT_EQ(odd->moved, 2);
}

TEST(MicrobatchSolver, PipelineFillSlotsBreakTheTieThePaperModelLeaves) {
  // Two replicas of a 2-stage 1F1B pipeline, 16 micro-batches, slot times 52.4 and 65.5 ms (replica 1 on a
  // slow GPU), 8 + 8 in force. Without fill, 8 x 65.5 = 524 and 10 x 52.4 = 524 tie and 8 + 8 is kept;
  // the pipeline runs m + 1 slots, 9 x 65.5 = 589.5 against 11 x 52.4 = 576.4: 10 + 6 is better.
  MicrobatchSolver solver;
  auto r = solver.solve({{52.4, 65.5}, 16, 2, {8, 8}});
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r->microbatches, (Alloc{8, 8}));
  r = solver.solve({{52.4, 65.5}, 16, 2, {8, 8}, 1});
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r->microbatches, (Alloc{10, 6}));
  EXPECT_DOUBLE_EQ(r->makespan_ms, 11 * 52.4);
}

TEST(MicrobatchSolver, MakespanOfAnAllocationIsWhatTheSolverReports) {
  // What the planner and the oracle compare a split with: the allocation in force, the same fill.
  const MicrobatchProblem pb{{52.4, 65.5}, 16, 2, {8, 8}, 1};
  EXPECT_DOUBLE_EQ(makespan_ms(pb, pb.current), 9 * 65.5);
  EXPECT_DOUBLE_EQ(makespan_ms(pb, Alloc{10, 6}), 11 * 52.4);
  MicrobatchSolver solver;
  const auto r = solver.solve(pb);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_DOUBLE_EQ(makespan_ms(pb, r->microbatches), r->makespan_ms);
  EXPECT_DOUBLE_EQ(makespan_ms(MicrobatchProblem{{1.0, 1.5}, 16, 1, {}, 0}, Alloc{8, 8}), 12.0);  // no fill
}

TEST(MicrobatchSolver, TheStepIsTheJobsDeclaredMultipleElseThePapersWhileTheSplitHasIt) {
  const std::vector<int> even{8, 8}, odd{9, 7};
  EXPECT_EQ(microbatch_step(1, 2, even), 1);  // declared: 1F1B without interleaving takes any count
  EXPECT_EQ(microbatch_step(2, 2, even), 2);  // declared: the interleaved schedule's multiple
  EXPECT_EQ(microbatch_step(0, 2, even), 2);  // not said: multiples of P while every count is one
  EXPECT_EQ(microbatch_step(0, 2, odd), 1);   // ... and any count once one is not
  EXPECT_EQ(microbatch_step(0, 1, even), 1);  // no pipeline
  // The solver with each step on a 1.3x replica (slot times 48, 62.4; fill P - 1 = 1).
  MicrobatchSolver solver;
  const auto fine = solver.solve(MicrobatchProblem{{48, 62.4}, 16, 1, {8, 8}, 1});
  ASSERT_TRUE(fine.ok()) << fine.error();
  EXPECT_EQ(fine->microbatches, (Alloc{9, 7}));
  const auto coarse = solver.solve(MicrobatchProblem{{48, 62.4}, 16, 2, {8, 8}, 1});
  ASSERT_TRUE(coarse.ok()) << coarse.error();
  EXPECT_EQ(coarse->microbatches, (Alloc{10, 6}));
  EXPECT_LT(fine->makespan_ms, coarse->makespan_ms);
}

TEST(MicrobatchSolver, RejectsInfeasibleInput) {
  MicrobatchSolver solver;
  auto err = [&](MicrobatchProblem pb) {
    const auto r = solver.solve(pb);
    EXPECT_FALSE(r.ok());
    return r.error();
  };
  EXPECT_EQ(err({{}, 4, 1, {}}), "no DP groups: need one time per micro-batch for each DP group");
  EXPECT_EQ(err({{1.0, 0.0}, 4, 1, {}}), "time of DP group 1 is 0: times must be finite and > 0");
  EXPECT_EQ(err({{1.0, -2.5}, 4, 1, {}}), "time of DP group 1 is -2.5: times must be finite and > 0");
  EXPECT_EQ(err({{std::nan(""), 1.0}, 4, 1, {}}), "time of DP group 0 is nan: times must be finite and > 0");
  EXPECT_EQ(err({{1.0, std::numeric_limits<double>::infinity()}, 4, 1, {}}),
            "time of DP group 1 is inf: times must be finite and > 0");
  EXPECT_EQ(err({{1.0, 1.0}, 4, 0, {}}), "pipeline depth is 0: it must be >= 1");
  EXPECT_EQ(err({{1.0, 1.0}, 0, 1, {}}), "total is 0: it must be >= 1");
  EXPECT_EQ(err({{1.0, 1.0}, (std::int64_t{1} << 40) + 2, 1, {}}),
            "total 1099511627778 exceeds the supported maximum 2^40");
  EXPECT_EQ(err({{1.0, 1.0}, 30, 4, {}}),
            "total 30 is not a multiple of the pipeline depth 4 (1F1B needs every m_i to be a multiple of P)");
  EXPECT_EQ(err({{1.0, 1.0, 1.0, 1.0}, 3, 1, {}}),
            "total 3 is less than the number of DP groups 4: every DP group needs a micro-batch");
  EXPECT_EQ(err({{1.0, 1.0, 1.0, 1.0}, 12, 4, {}}),
            "total 12 is less than DP groups x pipeline depth = 16: every DP group needs at least P micro-batches");
  EXPECT_EQ(err({{1e305, 1.0}, 1 << 20, 1, {}}), "(total + fill slots) x largest time overflows a double");
  EXPECT_EQ(err({{1.0, 1.0}, 4, 1, {}, -1}), "fill slots -1: they must be within 0..2^40");
  EXPECT_EQ(err({{1.0, 1.0}, 4, 1, {2, 1, 1}}), "current allocation has 3 entries, expected 2 (one per DP group)");
  EXPECT_EQ(err({{1.0, 1.0}, 4, 1, {2, 1}}), "current allocation sums to 3, expected the total 4");
  EXPECT_EQ(err({{1.0, 1.0}, 4, 1, {5, -1}}), "current allocation entry 1 is -1: entries must be >= 0");
  EXPECT_EQ(err({{1.0, 1.0}, 4, 1, {std::numeric_limits<std::int64_t>::max(), 1}}),
            "current allocation sums to more than 2^63, expected the total 4");
  EXPECT_EQ(err({{1.0, 1.0}, 4, 1, {3, 3}}), "current allocation sums to 6, expected the total 4");
}

TEST(MicrobatchSolver, EqualsBruteForceOnRandomSmallInstances) {
  MicrobatchSolver solver;
  std::mt19937_64 rng(20250711);
  const std::vector<double> tie_prone = {0.5, 1.0, 1.5, 2.0, 3.0};
  const std::vector<std::int64_t> depths = {1, 1, 1, 2, 3};
  int checked = 0;
  for (int trial = 0; trial < 4000; ++trial) {
    const auto d = std::uniform_int_distribution<std::size_t>(1, 5)(rng);
    const std::int64_t p = depths[std::uniform_int_distribution<std::size_t>(0, depths.size() - 1)(rng)];
    const std::int64_t units =
        static_cast<std::int64_t>(d) + std::uniform_int_distribution<std::int64_t>(0, d <= 3 ? 9 : 6)(rng);
    const std::int64_t m_total = units * p;
    std::vector<double> t(d);
    const int kind = trial % 3;
    for (auto& v : t) {
      if (kind == 0) v = tie_prone[std::uniform_int_distribution<std::size_t>(0, tie_prone.size() - 1)(rng)];
      if (kind == 1) v = std::uniform_real_distribution<double>(0.5, 3.0)(rng);
      if (kind == 2) v = std::uniform_int_distribution<int>(0, 1)(rng) ? 1052.28 : 1471.5;
    }
    Alloc cur;
    const int cur_kind = (trial / 3) % 3;
    if (cur_kind == 1) cur = random_composition(rng, m_total, d, p);    // a valid 1F1B allocation (maybe 0s)
    if (cur_kind == 2) cur = random_composition(rng, m_total, d, 1);    // anything summing to M
    // No fill (the paper's model), a 1F1B pipeline's P - 1, or an arbitrary count.
    const std::int64_t f = trial % 4 == 0 ? 0 : trial % 4 == 1 ? p - 1 : trial % 4 == 2 ? 0 : 3;
    const auto r = solver.solve({t, m_total, p, cur, f});
    ASSERT_TRUE(r.ok()) << r.error();
    const Brute b = brute_force(t, m_total, p, cur, f);
    ASSERT_EQ(r->makespan_ms, b.makespan) << "trial " << trial;
    ASSERT_EQ(makespan_of(t, r->microbatches, f), r->makespan_ms);
    ASSERT_EQ(r->microbatches, b.best) << "trial " << trial;
    ASSERT_EQ(r->moved, cur.empty() ? 0 : b.min_moved) << "trial " << trial;
    std::int64_t sum = 0;
    for (auto m : r->microbatches) {
      ASSERT_GE(m, p);
      ASSERT_EQ(m % p, 0);
      sum += m;
    }
    ASSERT_EQ(sum, m_total);
    ++checked;
  }
  EXPECT_EQ(checked, 4000);
}

// An independent implementation of the same rule for sizes brute force cannot reach: a heap greedy for the
// makespan, then the documented step keys taken one at a time under the makespan's per-group bounds.
Alloc reference(const std::vector<double>& t, std::int64_t m_total, std::int64_t p, const Alloc& cur,
                double* makespan, std::int64_t f = 0) {
  const std::size_t d = t.size();
  const std::int64_t units = m_total / p;
  using Entry = std::tuple<double, std::size_t>;  // (finish after the next unit, group)
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> heap;
  Alloc k(d, 1);
  double best = 0.0;
  for (std::size_t i = 0; i < d; ++i) {
    best = std::max(best, finish(t[i], p, f));
    heap.emplace(finish(t[i], 2 * p, f), i);
  }
  for (std::int64_t s = 0; s < units - static_cast<std::int64_t>(d); ++s) {
    auto [v, i] = heap.top();
    heap.pop();
    ++k[i];
    best = std::max(best, v);
    heap.emplace(finish(t[i], (k[i] + 1) * p, f), i);
  }
  *makespan = best;
  if (cur.empty()) {
    for (auto& v : k) v *= p;
    return k;
  }
  Alloc bound(d);
  for (std::size_t i = 0; i < d; ++i) {
    bound[i] = 1;
    while (finish(t[i], (bound[i] + 1) * p, f) <= best) ++bound[i];
  }
  using Step = std::tuple<std::int64_t, double, std::size_t>;
  std::priority_queue<Step, std::vector<Step>, std::greater<>> steps;
  auto push = [&](std::size_t i, std::int64_t from) {
    if (from >= bound[i]) return;
    const std::int64_t change = std::llabs(p * (from + 1) - cur[i]) - std::llabs(p * from - cur[i]);
    steps.emplace(change, finish(t[i], p * (from + 1), f), i);
  };
  Alloc out(d, 1);
  for (std::size_t i = 0; i < d; ++i) push(i, 1);
  for (std::int64_t s = 0; s < units - static_cast<std::int64_t>(d); ++s) {
    const auto [c, v, i] = steps.top();
    steps.pop();
    ++out[i];
    push(i, out[i]);
  }
  for (auto& v : out) v *= p;
  return out;
}

TEST(MicrobatchSolver, EqualsReferenceOnMediumInstances) {
  MicrobatchSolver solver;
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    const auto d = std::uniform_int_distribution<std::size_t>(1, 400)(rng);
    const std::int64_t p = std::uniform_int_distribution<int>(0, 2)(rng) == 0 ? 4 : 1;
    const std::int64_t per = std::uniform_int_distribution<std::int64_t>(1, 12)(rng);
    const std::int64_t m_total = static_cast<std::int64_t>(d) * per * p;
    std::vector<double> t(d);
    for (auto& v : t) {
      // Mostly healthy groups with a few stragglers, rounded to make ties common.
      v = std::round(1000.0 * std::uniform_real_distribution<double>(0.98, 1.02)(rng));
      if (std::uniform_int_distribution<int>(0, 9)(rng) == 0) v *= std::uniform_real_distribution<double>(1.1, 3)(rng);
    }
    Alloc cur;
    if (trial % 3 == 1) cur.assign(d, per * p);
    if (trial % 3 == 2) cur = random_composition(rng, m_total, d, 1);
    const std::int64_t f = trial % 2 == 0 ? 0 : p - 1 + trial % 5;
    const auto r = solver.solve({t, m_total, p, cur, f});
    ASSERT_TRUE(r.ok()) << r.error();
    double ref_makespan = 0.0;
    const Alloc ref = reference(t, m_total, p, cur, &ref_makespan, f);
    ASSERT_EQ(r->makespan_ms, ref_makespan) << "trial " << trial;
    ASSERT_EQ(r->microbatches, ref) << "trial " << trial;
  }
}

TEST(MicrobatchSolver, ExtremeScalesStayExact) {
  MicrobatchSolver solver;
  // Times spanning many orders of magnitude, and a huge total over few groups.
  const std::vector<double> t = {1e-300, 1.0, 1e12, 3.5};
  double ref_makespan = 0.0;
  const auto r = solver.solve({t, 1000, 1, {}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->microbatches, reference(t, 1000, 1, {}, &ref_makespan));
  EXPECT_EQ(r->makespan_ms, ref_makespan);
  EXPECT_EQ(r->makespan_ms, 1e12);

  const auto big = solver.solve({{1.0, 3.0}, std::int64_t{1} << 40, 1, {}});
  ASSERT_TRUE(big.ok());
  const std::int64_t total = std::int64_t{1} << 40;
  EXPECT_EQ(big->microbatches[0] + big->microbatches[1], total);
  // Continuous optimum 3/4 of the total on the faster group; the exact one is within one unit of it.
  EXPECT_EQ(big->microbatches[0], 824633720832);
  EXPECT_EQ(big->makespan_ms, 824633720832.0);
}

}  // namespace
}  // namespace greyhound::mitigate
