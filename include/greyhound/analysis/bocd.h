// Bocd: Bayesian online changepoint detection (Adams & MacKay 2007) over a stream of real values, with a
// Normal-Gamma model per run (Student-t predictive), a constant hazard 1/lambda, computed in log space.
//
// Run-length convention (the same as the widely used Python reference implementation): after n
// observations the posterior is over r in [0, n], r = the number of observations in the current run.
// r = 0 means "a run starts after the last observation" and, under a constant hazard, always carries exactly
// the hazard H = 1/lambda of the mass; it says nothing about the data. Decisions therefore read a lagged
// quantity such as mass_between(d, w): "the current run began between w and d observations ago". Before
// the first observation the posterior is r = 0 with probability 1.
//
// Pruning: after each update, run lengths whose posterior probability is below `prune_below` are dropped
// (their mass, < prune_below each, is lost and the next update renormalises), and at most `max_run_lengths`
// are kept (the least probable go first). Each update then costs O(kept run lengths), not O(n).
// prune_below = 0 and max_run_lengths = 0 keep every run length (exact, O(n) per update).
//
// Robust variant (outlier_probability > 0): each observation is, with probability eps, an outlier drawn
// from a broad density g (outlier_log_density = log g) that says nothing about the run; the predictive of a
// run becomes (1 - eps) t(x) + eps g. A run learns from an observation (conjugate update) only when the
// observation is more likely its inlier than an outlier, (1 - eps) t(x) >= eps g, or when it has learned
// nothing yet (it has no level an observation could be an outlier to). This hard assignment makes the model
// no longer exactly conjugate. Without it, one 100x checkpoint stall has likelihood ~0 under
// every established run, the posterior collapses onto a run that starts with the stall, and both the
// history and that run's variance are ruined for the changes that follow. eps = 0 is exactly Adams & MacKay.
//
// Pure value type: no I/O, no clock, no allocation after the kept set stops growing. Not thread-safe; one
// instance per stream.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace greyhound::analysis {

// Conjugate prior of one run: mean mu with kappa pseudo-observations, precision ~ Gamma(alpha, beta).
// The predictive of a fresh run is Student-t with 2*alpha degrees of freedom, location mu and
// scale^2 = beta * (kappa + 1) / (alpha * kappa).
struct NormalGammaPrior {
  double mu = 0.0;
  double kappa = 1.0;
  double alpha = 1.0;
  double beta = 1.0;
};

struct BocdParams {
  double hazard_lambda = 250.0;  // expected run length in observations; hazard H = 1 / lambda, lambda > 1
  NormalGammaPrior prior;
  double outlier_probability = 0.0;    // eps in [0, 1): 0 = the plain model
  double outlier_log_density = 0.0;    // log g, g the outliers' density in the observations' unit
  double prune_below = 1e-8;           // drop run lengths with posterior probability below this
  std::size_t max_run_lengths = 1024;  // keep at most this many run lengths (0: no limit)
};

class Bocd {
 public:
  explicit Bocd(const BocdParams& params);

  // Feeds one observation (finite; the caller filters NaN and infinities).
  void update(double x);
  // Back to the state before the first observation.
  void reset();

  std::uint64_t observations() const { return n_; }
  // Run lengths currently kept, and their posterior probabilities; i in [0, size()).
  // Ordered by decreasing run length; the last one is r = 0.
  std::size_t size() const { return runs_.size(); }
  double log_probability_at(std::size_t i) const { return runs_[i].log_p; }

  // Posterior probability of run length r (0 when r was pruned or r > observations()).
  double probability(std::uint64_t r) const;
  // Posterior mass of run lengths in [lo, hi].
  double mass_between(std::uint64_t lo, std::uint64_t hi) const;
  // Most probable run length.
  std::uint64_t map_run_length() const;
  // Most probable run length within [lo, hi]; returns false when none is kept there.
  bool map_run_length_between(std::uint64_t lo, std::uint64_t hi, std::uint64_t* r) const;
  // log of the predictive density of the last observation, p(x_n | x_1..n-1); 0 before any update.
  double last_log_evidence() const { return last_log_evidence_; }

  const BocdParams& params() const { return params_; }

 private:
  // One hypothesis "the current run began at observation `start`" with its posterior and Normal-Gamma
  // statistics (kappa and alpha follow from the observations it learned from: kappa0 + m, alpha0 + m/2;
  // m is the run length unless outliers were skipped).
  struct Run {
    std::uint64_t start;
    std::uint64_t learned;
    double log_p;
    double p;  // exp(log_p), kept for the queries
    double mu;
    double beta;
    double log_beta;
  };
  // Terms of the Student-t log density that depend only on the observations learned.
  struct RunTerms {
    double log_norm;  // lgamma(a + 1/2) - lgamma(a) - log(2 pi)/2 - log((k + 1) / k)/2
    double q_scale;   // k / (2 (k + 1)): q = (x - mu)^2 q_scale / beta
    double half_df1;  // a + 1/2 = (degrees of freedom + 1) / 2
    double mu_gain;   // 1 / (k + 1): mu' = mu + (x - mu) mu_gain
  };
  RunTerms terms(std::uint64_t learned);
  void cap();  // enforces max_run_lengths

  BocdParams params_;
  double hazard_;
  double log_hazard_;
  double log_beta0_;
  double log_1m_hazard_;
  double log_prune_;
  double log_inlier_ = 0.0;   // log(1 - eps)
  double log_outlier_ = 0.0;  // log(eps) + log g; -inf when eps = 0
  std::uint64_t n_ = 0;
  double last_log_evidence_ = 0.0;
  std::vector<Run> runs_;
  std::vector<double> scratch_;          // joint log probabilities of one update
  std::vector<double> weights_;          // the same, exponentiated relative to their maximum
  std::vector<RunTerms> terms_table_;    // by run length, grown lazily up to kTermsTableMax
};

}  // namespace greyhound::analysis
