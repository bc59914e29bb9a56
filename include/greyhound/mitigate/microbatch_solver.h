// MicrobatchSolver (S2 of the paper): split the global batch's M micro-batches across D DP groups so that
// the slowest group finishes first.
//
//   minimise   max_i (m_i + F) * t_i
//   subject to sum_i m_i = M,  m_i integer >= 1,
//              and with a 1F1B pipeline of depth P:  m_i >= P and m_i % P == 0.
//
// t_i is DP group i's time per micro-batch (profiling, GEMM results); F (fill_slots, default 0, the paper's
// model) the slots a group spends beyond one per micro-batch: a 1F1B pipeline of S stages runs m
// micro-batches in m + S - 1 slots of its slowest stage, so F = S - 1 with t_i the slot time. Without it,
// allocations that the pipeline finishes at different times can tie (the solver then keeps the current one). The paper solves a quadratic
// surrogate with cvxpy (36 s for 512 groups); this solver is exact and takes O(D) time per pass over the
// groups, with a handful of passes (docs/mitigation.md has the argument and the figures).
//
// Exactness is with respect to IEEE double arithmetic: a group's finish time is the product (m_i + F) * t_i
// rounded once, which is what makespan_ms reports; no allocation has a smaller maximum.
//
// Ties. Many allocations usually reach the optimum. The solver returns exactly one, chosen by:
//   1. fewest micro-batches moved from `current` (moved = sum_i max(0, m_i - current_i));
//   2. then it gives micro-batches to the groups whose resulting finish time (m_i + F) * t_i is smallest, and
//      among equal finish times to the lower DP index.
// Formally: build the allocation from m_i = P one "step" (+P micro-batches to one group) at a time; a step
// of group i from k*P to (k+1)*P has the key (change of |m_i - current_i|, ((k+1)*P + F)*t_i, i) (the first
// component is 0 without `current`). The result is the set of M/P - D steps with the smallest keys among
// those that keep the makespan optimal. It is unique, and element-wise the smallest such set, so it also
// minimises moved micro-batches; when `current` is already optimal it is returned unchanged.
//
// Thread safety: one solver per thread (it keeps scratch buffers between calls to avoid reallocating).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "greyhound/mitigate/result.h"

namespace greyhound::mitigate {

// Largest supported M: keeps every P * k exact in a double and every count in an int64.
inline constexpr std::int64_t kMaxTotalMicrobatches = std::int64_t{1} << 40;

struct MicrobatchProblem {
  std::vector<double> time_per_microbatch_ms;  // t_i per DP group: finite and > 0
  std::int64_t total_microbatches = 0;         // M
  std::int64_t pipeline_depth = 1;             // P for the 1F1B constraint; 1 = no constraint
  std::vector<std::int64_t> current;           // allocation in force: empty, or D entries >= 0 summing to M
  std::int64_t fill_slots = 0;                 // F: a group finishes at (m_i + F) * t_i; 0..2^40
};

struct MicrobatchPlan {
  std::vector<std::int64_t> microbatches;  // m_i, sum M
  double makespan_ms = 0.0;                // max_i (m_i + F) * t_i
  std::int64_t moved = 0;                  // sum_i max(0, m_i - current_i); 0 without `current`
};

// The makespan max_i (m_i + F) * t_i of an allocation (one entry per group) under the problem's times and
// fill; what MicrobatchPlan::makespan_ms reports for the solver's own allocation.
double makespan_ms(const MicrobatchProblem& problem, std::span<const std::int64_t> allocation);

// The multiple every group's count must keep (what S2 passes as pipeline_depth): `declared` when the job
// declared one (> 0: Megatron's interleaved schedule needs the pipeline size, its 1F1B without interleaving
// any count, 1); when it did not (0), `pipeline_depth` while every count in force is a multiple of it (the
// paper's 1F1B constraint, the cautious reading of a job that said nothing), else 1.
std::int64_t microbatch_step(std::int64_t declared, std::int64_t pipeline_depth, std::span<const int> in_force);

class MicrobatchSolver {
 public:
  // Errors (no guess is made): no groups, a t_i <= 0 or not finite, P < 1, M < 1 or > 2^40, F < 0 or > 2^40,
  // M not a multiple of P, M < D * P, (M + F) * max t_i not finite, `current` of the wrong length or sum or with a
  // negative entry.
  Result<MicrobatchPlan> solve(const MicrobatchProblem& problem);

  // Passes over the groups made by the last solve() (each pass is O(D)); for the benchmark.
  int last_passes() const { return passes_; }

 private:
  struct Candidate {
    double value;
    std::size_t group;
  };

  double value(std::size_t i, std::int64_t k) const { return static_cast<double>(p_ * k + f_) * t_[i]; }
  std::int64_t units_within(std::size_t i, double limit, std::int64_t lo, std::int64_t hi) const;
  void fill(std::int64_t steps);

  // Problem of the current solve().
  std::span<const double> t_;
  std::int64_t p_ = 1;
  std::int64_t f_ = 0;
  double f_units_ = 0.0;  // F / P: the fill in units, for estimates only
  // Scratch, sized D.
  std::vector<double> inv_w_;          // 1 / (P * t_i), for estimates only
  std::vector<std::int64_t> k_;        // units (of P micro-batches) per group
  std::vector<std::int64_t> cap_;      // upper bound of k_ for fill()
  std::vector<std::int64_t> bound_;    // units allowed at the optimal makespan
  std::vector<std::size_t> active_;    // groups with room (k_ < cap_) during fill()
  std::vector<Candidate> candidates_;
  int passes_ = 0;
};

}  // namespace greyhound::mitigate
