#include "greyhound/mitigate/microbatch_solver.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <string>

namespace greyhound::mitigate {
namespace {

std::string num(double v) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

}  // namespace

// Largest k in [lo, hi] with value(i, k) <= limit, or lo when there is none above lo. The estimate
// limit / (P t_i) - F / P is within a unit or two of the answer (k <= 2^40, relative error ~1e-16), and the
// two loops settle it with exact comparisons of the rounded products, so counts agree exactly with
// the makespan we report.
std::int64_t MicrobatchSolver::units_within(std::size_t i, double limit, std::int64_t lo,
                                            std::int64_t hi) const {
  const double q = limit * inv_w_[i] - f_units_;
  std::int64_t k;
  if (!(q < static_cast<double>(hi))) {
    k = hi;
  } else if (!(q > static_cast<double>(lo))) {
    k = lo;
  } else {
    k = static_cast<std::int64_t>(q);
  }
  while (k < hi && value(i, k + 1) <= limit) ++k;
  while (k > lo && value(i, k) > limit) --k;
  return k;
}

// Takes the `steps` smallest steps by (value(i, k), i), k_[i] < k <= cap_[i], and adds them to k_.
// Within a group the keys increase with k, so the chosen steps are a prefix of every group's steps.
//
// Method: find a bracket (lo, hi] of finish-time limits with count(lo) < steps <= count(hi) that holds
// few candidate steps (<= 4 D + 64), then list those candidates and select with nth_element. count(x),
// the number of steps with value <= x, is one O(D) pass. The bracket starts just below the smallest
// candidate and at the largest useful value, and shrinks by Newton steps on count(x) (slope: sum of
// 1 / (P t_i) over groups below their cap) from the continuous estimate; a Newton step that fails to
// halve the bracket's count is followed by a bisection (geometric while the bracket spans more than a
// factor of two). Adjacent doubles always end the search, since one value can be the key of at most one
// step per group. Bisection alone would need at most ~11 geometric + 53 arithmetic halvings, so a fill
// makes at most ~130 passes; measured: 3-9.
void MicrobatchSolver::fill(std::int64_t steps) {
  if (steps <= 0) return;
  active_.clear();
  double hi_x = 0.0;
  double first = std::numeric_limits<double>::infinity();  // smallest candidate value
  double inv_sum = 0.0;
  double base_sum = 0.0;
  for (std::size_t i = 0; i < k_.size(); ++i) {
    if (k_[i] >= cap_[i]) continue;
    active_.push_back(i);
    hi_x = std::max(hi_x, value(i, std::min(cap_[i], k_[i] + steps)));
    first = std::min(first, value(i, k_[i] + 1));
    inv_sum += inv_w_[i];
    base_sum += static_cast<double>(k_[i]);
  }
  // count(lo) = 0 just below the smallest candidate; count(hi) >= steps: either one group alone reaches
  // `steps` below hi, or hi is every group's cap and the caller guarantees enough room in total.
  const auto active = static_cast<std::int64_t>(active_.size());
  const std::int64_t limit = 4 * active + 64;
  // Counts saturate here: beyond it only "too many" matters, and D * 2^40 could overflow.
  const std::int64_t saturate = steps + limit + 1;

  struct Point {
    double x;
    std::int64_t n;  // count(x), saturated
    double slope;    // sum of 1 / (P t_i) over groups below their cap at x
  };
  auto count = [&](double x) {
    ++passes_;
    Point e{x, 0, 0.0};
    for (std::size_t i : active_) {
      const std::int64_t c = units_within(i, x, k_[i], cap_[i]);
      e.n = std::min(saturate, e.n + (c - k_[i]));
      if (c < cap_[i]) e.slope += inv_w_[i];
    }
    return e;
  };

  Point lo{std::nextafter(first, 0.0), 0, inv_sum};  // every active group is below its cap there
  Point hi = count(hi_x);
  const double slack = static_cast<double>(active) / 4.0 + 1.0;
  const double target = static_cast<double>(steps);
  // First probe: the continuous estimate sum_i (x / (P t_i) - F / P - k_i) = steps, plus the half unit per
  // group that rounding down loses on average.
  double x = (target + base_sum + static_cast<double>(active) * (0.5 + f_units_)) / inv_sum;
  bool newton = true;
  std::int64_t prev_width = hi.n - lo.n;
  while (hi.n - lo.n > limit) {
    if (!newton || !(x > lo.x && x < hi.x)) {
      // Bisect, geometrically while the bracket spans more than a factor of two.
      x = lo.x > 0.0 && hi.x > 2.0 * lo.x ? std::sqrt(lo.x) * std::sqrt(hi.x) : lo.x + (hi.x - lo.x) / 2.0;
      newton = false;
      if (!(x > lo.x && x < hi.x)) break;  // adjacent doubles: (lo, hi] holds one value, <= D candidates
    }
    const Point p = count(x);
    (p.n < steps ? lo : hi) = p;
    const std::int64_t width = hi.n - lo.n;
    // Newton again unless a Newton step failed to halve the bracket's candidate count.
    newton = !newton || 2 * width <= prev_width;
    prev_width = width;
    // Newton from the end nearer the target, aiming a little past it so that the far end moves in. A
    // saturated count says nothing about the distance to the target: use the other end then.
    const bool hi_usable = hi.slope > 0.0 && hi.n < saturate;
    if (lo.slope > 0.0 && (steps - lo.n <= hi.n - steps || !hi_usable)) {
      x = lo.x + (target + slack - static_cast<double>(lo.n)) / lo.slope;
    } else if (hi_usable) {
      x = hi.x - (static_cast<double>(hi.n) - (target - slack)) / hi.slope;
    } else {
      newton = false;
    }
  }
  const std::int64_t n_lo = lo.n;

  // List the candidates in (lo, hi] and take the (steps - n_lo) smallest.
  candidates_.clear();
  for (std::size_t i : active_) {
    const std::int64_t a = units_within(i, lo.x, k_[i], cap_[i]);
    const std::int64_t b = units_within(i, hi.x, a, cap_[i]);
    for (std::int64_t k = a + 1; k <= b; ++k) candidates_.push_back({value(i, k), i});
    k_[i] = a;
  }
  ++passes_;
  const auto take = static_cast<std::size_t>(steps - n_lo);
  const auto by_key = [](const Candidate& a, const Candidate& b) {
    return a.value < b.value || (a.value == b.value && a.group < b.group);
  };
  if (take < candidates_.size()) {
    std::nth_element(candidates_.begin(), candidates_.begin() + static_cast<std::ptrdiff_t>(take - 1),
                     candidates_.end(), by_key);
    // nth_element leaves every element before position take-1 not greater than it.
  }
  for (std::size_t j = 0; j < take; ++j) ++k_[candidates_[j].group];
}

Result<MicrobatchPlan> MicrobatchSolver::solve(const MicrobatchProblem& pb) {
  using R = Result<MicrobatchPlan>;
  passes_ = 0;
  const auto& t = pb.time_per_microbatch_ms;
  const std::int64_t m_total = pb.total_microbatches;
  const std::int64_t p = pb.pipeline_depth;
  if (t.empty()) return R::failure("no DP groups: need one time per micro-batch for each DP group");
  double t_max = 0.0;
  for (std::size_t i = 0; i < t.size(); ++i) {
    if (!std::isfinite(t[i]) || !(t[i] > 0.0)) {
      return R::failure("time of DP group " + std::to_string(i) + " is " + num(t[i]) +
                        ": times must be finite and > 0");
    }
    t_max = std::max(t_max, t[i]);
  }
  const auto d = static_cast<std::int64_t>(t.size());
  if (p < 1) return R::failure("pipeline depth is " + std::to_string(p) + ": it must be >= 1");
  if (m_total < 1) return R::failure("total is " + std::to_string(m_total) + ": it must be >= 1");
  if (m_total > kMaxTotalMicrobatches) {
    return R::failure("total " + std::to_string(m_total) + " exceeds the supported maximum 2^40");
  }
  const std::int64_t f = pb.fill_slots;
  if (f < 0 || f > kMaxTotalMicrobatches) {
    return R::failure("fill slots " + std::to_string(f) + ": they must be within 0..2^40");
  }
  if (m_total % p != 0) {
    return R::failure("total " + std::to_string(m_total) + " is not a multiple of the pipeline depth " +
                      std::to_string(p) + " (1F1B needs every m_i to be a multiple of P)");
  }
  if (m_total / p < d) {
    return R::failure(
        "total " + std::to_string(m_total) + " is less than " +
        (p == 1 ? "the number of DP groups " + std::to_string(d) + ": every DP group needs a micro-batch"
                : "DP groups x pipeline depth = " + std::to_string(d * p) +
                      ": every DP group needs at least P micro-batches"));
  }
  if (!std::isfinite(static_cast<double>(m_total + f) * t_max)) {
    return R::failure("(total + fill slots) x largest time overflows a double");
  }
  const auto& cur = pb.current;
  if (!cur.empty()) {
    if (static_cast<std::int64_t>(cur.size()) != d) {
      return R::failure("current allocation has " + std::to_string(cur.size()) + " entries, expected " +
                        std::to_string(d) + " (one per DP group)");
    }
    for (std::size_t i = 0; i < cur.size(); ++i) {
      if (cur[i] < 0) {
        return R::failure("current allocation entry " + std::to_string(i) + " is " + std::to_string(cur[i]) +
                          ": entries must be >= 0");
      }
    }
    std::int64_t sum = 0;
    bool overflow = false;
    for (auto v : cur) overflow = overflow || __builtin_add_overflow(sum, v, &sum);
    if (overflow || sum != m_total) {
      return R::failure("current allocation sums to " +
                        (overflow ? "more than 2^63" : std::to_string(sum)) + ", expected the total " +
                        std::to_string(m_total));
    }
  }

  t_ = t;
  p_ = p;
  f_ = f;
  f_units_ = static_cast<double>(f) / static_cast<double>(p);
  const std::int64_t units = m_total / p;  // K: the problem in units of P micro-batches
  const auto n = static_cast<std::size_t>(d);
  inv_w_.resize(n);
  for (std::size_t i = 0; i < n; ++i) inv_w_[i] = 1.0 / (static_cast<double>(p) * t[i]);

  // 1. The optimal makespan: the greedy from one unit each is optimal (the K - D smallest finish times
  //    of the multiset {(k P + F) t_i : k >= 2}; any allocation with makespan T has all its steps <= T, so K - D
  //    steps <= T exist and the greedy's largest step is <= T).
  k_.assign(n, 1);
  cap_.assign(n, 1 + (units - d));
  fill(units - d);
  double makespan = 0.0;
  for (std::size_t i = 0; i < n; ++i) makespan = std::max(makespan, value(i, k_[i]));

  MicrobatchPlan plan;
  if (!cur.empty()) {
    // 2. Closest optimal allocation. bound_[i]: most units group i can take at the optimal makespan.
    //    |P k - a_i| is convex in k, so the steps' first key (its change) runs -P (below a_i / P),
    //    then P - 2 (a_i mod P) for the one step across a_i, then +P; classes are taken in that order.
    bound_.resize(n);
    for (std::size_t i = 0; i < n; ++i) bound_[i] = units_within(i, makespan, 1, 1 + (units - d));
    std::int64_t left = units - d;
    std::int64_t below = 0;
    for (std::size_t i = 0; i < n; ++i) {
      cap_[i] = std::clamp<std::int64_t>(cur[i] / p, 1, bound_[i]);
      below += cap_[i] - 1;
    }
    k_.assign(n, 1);
    if (below > left) {
      fill(left);  // only when some groups must rise to P: choose among the -P steps by (finish, index)
      left = 0;
    } else {
      k_ = cap_;
      left -= below;
    }
    if (left > 0 && p > 1) {
      candidates_.clear();
      for (std::size_t i = 0; i < n; ++i) {
        const std::int64_t q = cur[i] / p;
        if (cur[i] % p != 0 && q >= 1 && q < bound_[i]) candidates_.push_back({value(i, q + 1), i});
      }
      // Key (P - 2 r_i, finish, index): larger remainder first.
      const auto by_key = [&](const Candidate& a, const Candidate& b) {
        const std::int64_t ra = cur[a.group] % p;
        const std::int64_t rb = cur[b.group] % p;
        if (ra != rb) return ra > rb;
        return a.value < b.value || (a.value == b.value && a.group < b.group);
      };
      auto take = std::min<std::size_t>(static_cast<std::size_t>(left), candidates_.size());
      if (take > 0 && take < candidates_.size()) {
        std::nth_element(candidates_.begin(), candidates_.begin() + static_cast<std::ptrdiff_t>(take - 1),
                         candidates_.end(), by_key);
      }
      for (std::size_t j = 0; j < take; ++j) ++k_[candidates_[j].group];
      left -= static_cast<std::int64_t>(take);
    }
    if (left > 0) {
      cap_ = bound_;
      fill(left);
    }
  }

  plan.microbatches.resize(n);
  plan.makespan_ms = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    plan.microbatches[i] = k_[i] * p;
    plan.makespan_ms = std::max(plan.makespan_ms, value(i, k_[i]));
    if (!cur.empty()) plan.moved += std::max<std::int64_t>(0, plan.microbatches[i] - cur[i]);
  }
  return plan;
}

double makespan_ms(const MicrobatchProblem& problem, std::span<const std::int64_t> allocation) {
  double out = 0.0;
  const std::size_t n = std::min(allocation.size(), problem.time_per_microbatch_ms.size());
  for (std::size_t i = 0; i < n; ++i) {
    out = std::max(out, static_cast<double>(allocation[i] + problem.fill_slots) * problem.time_per_microbatch_ms[i]);
  }
  return out;
}

std::int64_t microbatch_step(std::int64_t declared, std::int64_t pipeline_depth, std::span<const int> in_force) {
  if (declared > 0) return declared;
  if (pipeline_depth <= 1) return 1;
  const bool multiples = std::all_of(in_force.begin(), in_force.end(), [&](int m) { return m % pipeline_depth == 0; });
  return multiples ? pipeline_depth : 1;
}

}  // namespace greyhound::mitigate
