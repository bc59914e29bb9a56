#include "greyhound/analysis/bocd.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace greyhound::analysis {
namespace {

// Run-length terms are tabulated up to this run length (1 MiB); longer runs compute them in closed form.
constexpr std::uint64_t kTermsTableMax = 1u << 15;
constexpr double kHalfLog2Pi = 0.91893853320467274178;

// lgamma(a + 1/2) - lgamma(a). For large a the asymptotic series
// 0.5 ln a - 1/(8a) + 1/(192 a^3) is exact to double precision (next term ~ a^-5).
double lgamma_half_step(double a) {
  if (a < 256.0) return std::lgamma(a + 0.5) - std::lgamma(a);
  return 0.5 * std::log(a) - 1.0 / (8.0 * a) + 1.0 / (192.0 * a * a * a);
}

}  // namespace

Bocd::Bocd(const BocdParams& params) : params_(params) {
  const double h = 1.0 / params_.hazard_lambda;
  hazard_ = h;
  log_hazard_ = std::log(h);
  log_beta0_ = std::log(params_.prior.beta);
  runs_.reserve(64);
  scratch_.reserve(64);
  weights_.reserve(64);
  log_1m_hazard_ = std::log1p(-h);
  log_prune_ = params_.prune_below > 0.0 ? std::log(params_.prune_below)
                                         : -std::numeric_limits<double>::infinity();
  const double eps = params_.outlier_probability;
  log_inlier_ = eps > 0.0 ? std::log1p(-eps) : 0.0;
  log_outlier_ = eps > 0.0 ? std::log(eps) + params_.outlier_log_density : -std::numeric_limits<double>::infinity();
  reset();
}

void Bocd::reset() {
  n_ = 0;
  last_log_evidence_ = 0.0;
  runs_.clear();
  const auto& p = params_.prior;
  runs_.push_back(Run{0, 0, 0.0, 1.0, p.mu, p.beta, log_beta0_});
}

Bocd::RunTerms Bocd::terms(std::uint64_t m) {
  auto compute = [this](std::uint64_t rl) {
    const auto& p = params_.prior;
    const double k = p.kappa + static_cast<double>(rl);
    const double a = p.alpha + 0.5 * static_cast<double>(rl);
    RunTerms t;
    t.log_norm = lgamma_half_step(a) - kHalfLog2Pi - 0.5 * std::log1p(1.0 / k);
    t.q_scale = k / (2.0 * (k + 1.0));
    t.half_df1 = a + 0.5;
    t.mu_gain = 1.0 / (k + 1.0);
    return t;
  };
  if (m >= kTermsTableMax) return compute(m);
  while (terms_table_.size() <= m) terms_table_.push_back(compute(terms_table_.size()));
  return terms_table_[m];
}

void Bocd::update(double x) {
  const std::size_t k = runs_.size();
  scratch_.resize(k);
  const bool robust = std::isfinite(log_outlier_);
  double max_joint = -std::numeric_limits<double>::infinity();
  // Growth terms: joint log probability of "run continues" before normalisation, and the conjugate
  // update of each run's statistics with x.
  for (std::size_t i = 0; i < k; ++i) {
    Run& run = runs_[i];
    const RunTerms t = run.learned < terms_table_.size() ? terms_table_[run.learned] : terms(run.learned);
    const double d = x - run.mu;
    const double q = d * d * t.q_scale / run.beta;
    const double l = std::log1p(q);
    double log_pred = t.log_norm - 0.5 * run.log_beta - t.half_df1 * l;
    bool inlier = true;
    if (robust) {
      // log((1 - eps) t(x) + eps g) = log of the larger term + log1p(ratio of the smaller to it). When the
      // smaller is below e^-7 of the larger, the correction (< 1e-3 nats, and about the same for every run
      // the observation fits, so it cancels in the normalisation) is left out: that saves an exp for most
      // runs, whose observations lie within two standard deviations.
      const double in = log_inlier_ + log_pred;
      const double gap = log_outlier_ - in;
      double mix = 0.0;
      if (gap > -7.0 && gap < 7.0) {
        const double e = std::exp(-std::abs(gap));
        // log1p(e) ~ e - e^2/2 for small e (error < e^3/3 < 1e-7 nats when e < 0.005).
        mix = e < 0.005 ? e - 0.5 * e * e : std::log1p(e);
      }
      log_pred = (gap <= 0.0 ? in : log_outlier_) + mix;
      // A run that has learned nothing has no level yet: nothing can be an outlier to it.
      inlier = gap <= 0.0 || run.learned == 0;
    }
    const double joint = run.log_p + log_pred;
    scratch_[i] = joint;
    max_joint = std::max(max_joint, joint);
    if (inlier) {
      run.mu += d * t.mu_gain;
      run.beta *= 1.0 + q;
      run.log_beta += l;
      ++run.learned;
    }
  }
  weights_.resize(k);
  double sum = 0.0;
  for (std::size_t i = 0; i < k; ++i) {
    weights_[i] = std::exp(scratch_[i] - max_joint);
    sum += weights_[i];
  }
  // log p(x_n | x_1..n-1): the runs' joint masses sum to it (the hazard split does not change the total).
  const double log_sum = std::log(sum);
  const double log_evidence = max_joint + log_sum;
  last_log_evidence_ = log_evidence;
  // Normalise, dropping run lengths below the pruning threshold in the same pass (stable compaction; the
  // most probable run has probability >= 1 / k, so something always stays).
  const double grow = (1.0 - hazard_) / sum;
  const double log_grow = log_1m_hazard_ - log_evidence;
  std::size_t kept = 0;
  for (std::size_t i = 0; i < k; ++i) {
    const double log_p = scratch_[i] + log_grow;
    if (log_p < log_prune_) continue;
    Run& run = runs_[kept++];
    run = runs_[i];
    run.p = weights_[i] * grow;
    run.log_p = log_p;
  }
  runs_.resize(kept);
  ++n_;
  // The changepoint hypothesis: all joint mass times H, normalised by the same evidence: exactly log H.
  runs_.push_back(Run{n_, 0, log_hazard_, hazard_, params_.prior.mu, params_.prior.beta, log_beta0_});
  if (params_.max_run_lengths > 0 && runs_.size() > params_.max_run_lengths) cap();
}

void Bocd::cap() {
  // Keep the max_run_lengths most probable (the newest, r = 0, always stays).
  const std::size_t cap = params_.max_run_lengths;
  scratch_.resize(runs_.size());
  for (std::size_t i = 0; i < runs_.size(); ++i) scratch_[i] = runs_[i].log_p;
  const std::size_t drop = runs_.size() - cap;
  std::nth_element(scratch_.begin(), scratch_.begin() + static_cast<std::ptrdiff_t>(drop - 1), scratch_.end());
  const double cut = scratch_[drop - 1];
  std::size_t dropped = 0;
  std::size_t out = 0;
  for (std::size_t i = 0; i < runs_.size(); ++i) {
    if (dropped < drop && runs_[i].log_p <= cut && i + 1 != runs_.size()) {
      ++dropped;
      continue;
    }
    runs_[out++] = runs_[i];
  }
  runs_.resize(out);
}

double Bocd::probability(std::uint64_t r) const { return mass_between(r, r); }

double Bocd::mass_between(std::uint64_t lo, std::uint64_t hi) const {
  double m = 0.0;
  // Newest (shortest) runs are at the back.
  for (std::size_t i = runs_.size(); i-- > 0;) {
    const std::uint64_t r = n_ - runs_[i].start;
    if (r > hi) break;
    if (r >= lo) m += runs_[i].p;
  }
  return m;
}

std::uint64_t Bocd::map_run_length() const {
  std::size_t best = 0;
  for (std::size_t i = 1; i < runs_.size(); ++i) {
    if (runs_[i].log_p > runs_[best].log_p) best = i;
  }
  return n_ - runs_[best].start;
}

bool Bocd::map_run_length_between(std::uint64_t lo, std::uint64_t hi, std::uint64_t* r) const {
  bool found = false;
  double best = -std::numeric_limits<double>::infinity();
  for (std::size_t i = runs_.size(); i-- > 0;) {
    const std::uint64_t rl = n_ - runs_[i].start;
    if (rl > hi) break;
    if (rl >= lo && runs_[i].log_p > best) {
      best = runs_[i].log_p;
      *r = rl;
      found = true;
    }
  }
  return found;
}

}  // namespace greyhound::analysis
