#include "greyhound/mitigate/ski_rental.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <vector>

namespace greyhound::mitigate {
namespace {

std::string fmt(double v) {
  std::ostringstream os;
  os.precision(4);
  os << v;
  return os.str();
}

std::string rung_name(Strategy s) { return std::string(greyhound::name(s)); }

}  // namespace

Result<SkiRental> SkiRental::create(const SkiRentalConfig& c, const SkiRentalIncident& i) {
  using R = Result<SkiRental>;
  if (!std::isfinite(i.healthy_iteration_s) || !(i.healthy_iteration_s > 0.0)) {
    return R::failure("healthy iteration time must be finite and > 0");
  }
  for (double v : {c.s2_solve_s, c.s3_pause_s, c.s4_restart_s, c.jitter_ratio}) {
    if (!std::isfinite(v) || v < 0.0) return R::failure("overheads and jitter_ratio must be finite and >= 0");
  }
  if (!std::isfinite(c.fixed_ratio) || c.fixed_ratio < 1.0) return R::failure("fixed_ratio must be >= 1");
  if (c.window < 1) return R::failure("window must be >= 1");
  return SkiRental(c, i);
}

SkiRental::SkiRental(const SkiRentalConfig& c, const SkiRentalIncident& i)
    : config_(c), incident_(i), last_iteration_s_(i.healthy_iteration_s) {}

double SkiRental::overhead_s(Strategy s) const {
  switch (s) {
    case Strategy::kS1: return 0.0;
    case Strategy::kS2: return last_iteration_s_ + config_.s2_solve_s;
    case Strategy::kS3: return config_.s3_pause_s;
    case Strategy::kS4: return config_.s4_restart_s;
  }
  return 0.0;
}

double SkiRental::price_s(Strategy s) const {
  const bool confirmed_first = s == Strategy::kS3 || s == Strategy::kS4;
  return overhead_s(s) + (confirmed_first ? confirm_s_ : 0.0);
}

void SkiRental::set_confirmation_overhead(double seconds) {
  confirm_s_ = std::isfinite(seconds) && seconds > 0.0 ? seconds : 0.0;
}

void SkiRental::set_overhead(Strategy s, double seconds) {
  if (!std::isfinite(seconds) || seconds < 0.0) return;
  if (s == Strategy::kS3) config_.s3_pause_s = seconds;
  if (s == Strategy::kS4) config_.s4_restart_s = seconds;
}

bool SkiRental::can_help(Strategy s) const {
  switch (s) {
    case Strategy::kS1: return true;
    case Strategy::kS2:
      return incident_.s2_available && incident_.cause != FailSlowCause::kCommunication;
    case Strategy::kS3: return incident_.s3_available;
    case Strategy::kS4: return incident_.s4_available;
  }
  return false;
}

double SkiRental::judged_iteration_s() const {
  auto& v = scratch_;
  v.assign(window_.begin(), window_.end());
  const auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
  std::nth_element(v.begin(), mid, v.end());
  if (v.size() % 2 == 1) return *mid;
  return (*mid + *std::max_element(v.begin(), mid)) / 2.0;
}

void SkiRental::decline(Strategy s) {
  if (s == Strategy::kS2) incident_.s2_available = false;
  if (s == Strategy::kS3) incident_.s3_available = false;
  if (s == Strategy::kS4) incident_.s4_available = false;
  // Declined while a higher rung is in force (S2 judged after the climb to S3): a fall from that rung goes
  // past it.
  if (previous_ == s && s != Strategy::kS1) previous_ = Strategy::kS1;
  if (strategy_ == s && s != Strategy::kS1) {
    strategy_ = previous_;
    window_.clear();  // the rent since then was paid under `previous_`: it stays counted
  }
}

void SkiRental::resume(Strategy s) {
  if (s != Strategy::kS2 && s != Strategy::kS3) return;
  previous_ = Strategy::kS1;
  strategy_ = s;
  strategy_loss_s_ = 0.0;
  window_.clear();
}

SkiRentalState SkiRental::state() const {
  SkiRentalState st;
  st.strategy = strategy_;
  st.previous = previous_;
  st.loss_s = loss_s_;
  st.strategy_loss_s = strategy_loss_s_;
  st.last_iteration_s = last_iteration_s_;
  st.window.assign(window_.begin(), window_.end());
  st.s2_available = incident_.s2_available;
  st.s3_available = incident_.s3_available;
  st.s4_available = incident_.s4_available;
  return st;
}

void SkiRental::restore(const SkiRentalState& st) {
  const auto finite_or = [](double v, double def) { return std::isfinite(v) && v >= 0.0 ? v : def; };
  strategy_ = st.strategy;
  previous_ = st.previous;
  loss_s_ = finite_or(st.loss_s, 0.0);
  strategy_loss_s_ = finite_or(st.strategy_loss_s, 0.0);
  if (st.last_iteration_s > 0.0) last_iteration_s_ = finite_or(st.last_iteration_s, last_iteration_s_);
  window_.clear();
  for (double v : st.window) {
    if (std::isfinite(v) && v >= 0.0) window_.push_back(v);
  }
  while (static_cast<int>(window_.size()) > config_.window) window_.pop_front();
  incident_.s2_available = incident_.s2_available && st.s2_available;
  incident_.s3_available = incident_.s3_available && st.s3_available;
  incident_.s4_available = incident_.s4_available && st.s4_available;
}

SkiRentalDecision SkiRental::observe(const SkiRentalObservation& obs) {
  SkiRentalDecision d;
  d.strategy = strategy_;
  if (finished_ || !std::isfinite(obs.iteration_s) || obs.iteration_s < 0.0) return d;
  const double healthy = incident_.healthy_iteration_s;
  last_iteration_s_ = obs.iteration_s;
  const double excess = std::max(0.0, obs.iteration_s - healthy);

  if (obs.fail_slow_present) {
    post_loss_s_ = 0.0;
    calm_iterations_ = 0;
    loss_s_ += excess;
    if (obs.held) return d;  // the fail-slow's cost, but no measure of the strategy, which was not in force
    strategy_loss_s_ += excess;
    window_.push_back(obs.iteration_s);
    while (static_cast<int>(window_.size()) > config_.window) window_.pop_front();
    return escalate();
  }

  // The fail-slow is over. An iteration without the strategy in force says nothing of its configuration.
  if (obs.held) return d;
  if (strategy_ == Strategy::kS1 || strategy_ == Strategy::kS4) {
    finished_ = true;
    return d;
  }
  if (obs.iteration_s <= healthy * (1.0 + config_.jitter_ratio)) {
    if (++calm_iterations_ >= config_.window) finished_ = true;  // nothing to win by reverting
    return d;
  }
  calm_iterations_ = 0;
  post_loss_s_ += excess;
  const double cost = overhead_s(strategy_);
  if (post_loss_s_ < cost) return d;
  d.action = SkiRentalAction::kRevert;
  d.strategy = Strategy::kS1;
  d.overhead_s = cost;
  d.reason = "fail-slow over; " + rung_name(strategy_) + "'s configuration cost " + fmt(post_loss_s_) + " s since >= " +
             fmt(cost) + " s to revert it";
  strategy_ = Strategy::kS1;
  finished_ = true;
  return d;
}

SkiRentalDecision SkiRental::decide() {
  SkiRentalDecision d;
  d.strategy = strategy_;
  if (finished_ || post_loss_s_ > 0.0 || calm_iterations_ > 0) return d;
  return escalate();
}

SkiRentalDecision SkiRental::escalate() {
  SkiRentalDecision d;
  d.strategy = strategy_;
  const double healthy = incident_.healthy_iteration_s;
  // Judged on the iterations since the strategy took effect (none yet: the latest one).
  const double judged = window_.empty() ? last_iteration_s_ : judged_iteration_s();
  // A strategy that holds the iteration within fixed_ratio has paid off the loss before it: only the
  // residual loss under it counts toward the next rung.
  const bool fixed = judged <= config_.fixed_ratio * healthy;
  const double rent = fixed ? strategy_loss_s_ : loss_s_;
  std::string skipped;
  for (int level = static_cast<int>(strategy_) + 1; level <= static_cast<int>(Strategy::kS4); ++level) {
    const auto next = static_cast<Strategy>(level);
    if (!can_help(next)) {
      skipped += (skipped.empty() ? "; skipped " : ", ") + rung_name(next);
      continue;
    }
    const double cost = price_s(next);
    if (rent < cost) return d;
    d.action = SkiRentalAction::kApply;
    d.strategy = next;
    d.overhead_s = cost;
    const double confirm = cost - overhead_s(next);
    const std::string price = " overhead " + fmt(cost) + " s" + (confirm > 0 ? " (" + fmt(confirm) + " s of it to confirm the fail-slow first)" : "");
    if (fixed) {
      d.reason = "residual loss " + fmt(rent) + " s under " + rung_name(strategy_) + " (iterations at " + fmt(judged) +
                 " s, within " + fmt(config_.fixed_ratio) + " x healthy " + fmt(healthy) + " s) >= " + rung_name(next) +
                 price + skipped;
    } else {
      d.reason = "accumulated loss " + fmt(rent) + " s >= " + rung_name(next) + price + "; " +
                 rung_name(strategy_) + " leaves iterations at " + fmt(judged) + " s > " + fmt(config_.fixed_ratio) +
                 " x healthy " + fmt(healthy) + " s" + skipped;
    }
    previous_ = strategy_;
    strategy_ = next;
    strategy_loss_s_ = 0.0;
    window_.clear();
    return d;
  }
  return d;  // top of the ladder
}

}  // namespace greyhound::mitigate
