#include "greyhound/analysis/period_detector.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "greyhound/hash.h"

namespace greyhound::analysis {
namespace {

constexpr std::uint64_t kMissing = std::numeric_limits<std::uint64_t>::max();
// Lag screening on fixed, spread positions of the window (see detect_period()).
constexpr std::size_t kScreenSamples = 64;
constexpr std::size_t kScreenMaxMismatches = kScreenSamples / 4;
// Refinement (see detect_period()): mismatch clusters examined, and refinement rounds.
constexpr std::size_t kRefineClusters = 8;
constexpr int kRefineRounds = 4;

// Fixed screening positions as fractions of the window: the golden-ratio sequence, spread evenly and not
// aligned with any small period.
struct ScreenFractions {
  double f[kScreenSamples];
  ScreenFractions() {
    for (std::size_t m = 0; m < kScreenSamples; ++m) {
      const double v = 0.5 + 0.6180339887498949 * static_cast<double>(m);
      f[m] = v - std::floor(v);
    }
  }
};
const ScreenFractions kScreen;

std::size_t mismatches(std::span<const std::uint64_t> s, std::size_t k, std::size_t allowed) {
  std::size_t miss = 0;
  for (std::size_t i = k; i < s.size() && miss <= allowed; ++i) miss += s[i] != s[i - k] ? 1 : 0;
  return miss;
}

// Where lag k fails, do the failures repeat? Returns the starts of the first clusters of mismatching
// positions (a cluster: mismatches less than k apart).
std::vector<std::size_t> mismatch_clusters(std::span<const std::uint64_t> s, std::size_t k) {
  std::vector<std::size_t> starts;
  std::size_t last = 0;
  bool any = false;
  for (std::size_t i = k; i < s.size(); ++i) {
    if (s[i] == s[i - k]) continue;
    if (!any || i - last > k) {
      if (starts.size() == kRefineClusters) break;
      starts.push_back(i);
    }
    last = i;
    any = true;
  }
  return starts;
}

// The first position i0 with s[i0 + j] == s[i0 + j + k] for all j in [0, k), or nullopt.
std::optional<std::uint64_t> first_repeated_cycle(std::span<const std::uint64_t> s, std::size_t k) {
  std::size_t run = 0;
  for (std::size_t i = 0; i + k < s.size(); ++i) {
    run = s[i] == s[i + k] ? run + 1 : 0;
    if (run == k) return i + 1 - k;
  }
  return std::nullopt;
}

bool is_rotation(const std::vector<std::uint64_t>& a, const std::vector<std::uint64_t>& b) {
  if (a.size() != b.size()) return false;
  if (a.empty()) return true;
  std::vector<std::uint64_t> bb(b);
  bb.insert(bb.end(), b.begin(), b.end());
  return std::search(bb.begin(), bb.end(), a.begin(), a.end()) != bb.end();
}

}  // namespace

std::uint64_t op_symbol(std::uint64_t op, std::uint64_t group_id, std::uint64_t bytes) {
  return splitmix64(splitmix64(splitmix64(op) ^ group_id) ^ bytes);
}

std::optional<PeriodFit> detect_period(std::span<const std::uint64_t> s, const PeriodParams& params) {
  const std::size_t n = s.size();
  if (n < std::max<std::size_t>(params.min_window, 2)) return std::nullopt;
  const std::size_t kmax = std::min<std::size_t>(params.max_period, n / std::max<std::uint32_t>(params.min_cycles, 1));
  auto allowed_for = [&](std::size_t k) {
    return static_cast<std::size_t>(std::floor((1.0 - params.min_acf) * static_cast<double>(n - k)));
  };
  std::size_t period = 0;
  std::size_t miss = 0;
  for (std::size_t k = 1; k <= kmax && period == 0; ++k) {
    const std::size_t span = n - k;
    // Screen: a lag with autocorrelation >= 0.95 has about 3 mismatches in 64 positions; reject at 17.
    if (span > kScreenSamples) {
      std::size_t sampled = 0;
      for (std::size_t m = 0; m < kScreenSamples && sampled <= kScreenMaxMismatches; ++m) {
        const std::size_t i = k + static_cast<std::size_t>(kScreen.f[m] * static_cast<double>(span));
        sampled += s[i] != s[i - k] ? 1 : 0;
      }
      if (sampled > kScreenMaxMismatches) continue;
    }
    // Exact count, stopping as soon as the lag cannot reach min_acf.
    const std::size_t allowed = allowed_for(k);
    miss = mismatches(s, k, allowed);
    if (miss <= allowed) period = k;
  }
  if (period == 0) return std::nullopt;
  // Refinement: a sub-pattern of the iteration (one micro-batch's calls) can reach min_acf on its own; where
  // it fails, at the gradient AllReduces that close each iteration, the failures repeat once per iteration.
  // A spacing of failure clusters with fewer mismatches (and >= min_acf) replaces the lag, smallest first.
  // Mismatches of random extra calls have random spacings, at which the sequence does not repeat; a spacing
  // that is a multiple of the lag repeats about as well as the lag under random noise, so it must halve
  // the mismatches.
  for (int round = 0; round < kRefineRounds && miss > 0; ++round) {
    const auto starts = mismatch_clusters(s, period);
    std::vector<std::size_t> spacings;
    for (std::size_t a = 0; a < starts.size(); ++a) {
      for (std::size_t b = a + 1; b < starts.size() && b <= a + 2; ++b) {
        const std::size_t d = starts[b] - starts[a];
        if (d > period && d <= kmax) spacings.push_back(d);
      }
    }
    std::sort(spacings.begin(), spacings.end());
    spacings.erase(std::unique(spacings.begin(), spacings.end()), spacings.end());
    bool refined = false;
    for (std::size_t d : spacings) {
      const std::size_t limit = std::min(allowed_for(d), d % period == 0 ? miss / 2 : miss - 1);
      const std::size_t m = mismatches(s, d, limit);
      if (m <= limit) {
        period = d;
        miss = m;
        refined = true;
        break;
      }
    }
    if (!refined) break;
  }
  const auto start = first_repeated_cycle(s, period);
  if (!start) return std::nullopt;  // the period exists but no clean cycle yet: wait for more records
  return PeriodFit{static_cast<std::uint32_t>(period), *start, 1.0 - static_cast<double>(miss) / static_cast<double>(n - period)};
}

PeriodDetector::PeriodDetector(const PeriodParams& params) : params_(params) {
  params_.min_cycles = std::max<std::uint32_t>(params_.min_cycles, 2);
  params_.min_window = std::max<std::uint32_t>(params_.min_window, 2 * params_.min_cycles);
  params_.max_window = std::max(params_.max_window, 2 * params_.min_window);
  params_.lookahead = std::max<std::uint32_t>(params_.lookahead, 1);
  if (!(params_.report_share > 0 && params_.report_share <= 1)) params_.report_share = 1.0;
  if (!(params_.report_drift >= 0)) params_.report_drift = 0.0;
  min_window_ = params_.min_window;
  next_search_at_ = min_window_;
}

std::size_t PeriodDetector::push(std::uint64_t t_ns, std::uint64_t symbol, std::vector<Iteration>& out) {
  const std::size_t before = out.size();
  const Rec r{records_++, t_ns, symbol};
  if (inbox_.empty()) {
    process(r, out);
  } else {
    inbox_.push_back(r);
  }
  // Records handed back by a lock (replay) or by a lost lock (search again) are processed first.
  while (!inbox_.empty()) {
    const Rec q = inbox_.front();
    inbox_.pop_front();
    process(q, out);
  }
  return out.size() - before;
}

std::size_t PeriodDetector::finish(std::vector<Iteration>& out) {
  const std::size_t before = out.size();
  if (state_ == State::kLocked) {
    release(now_, true, out);
    if (provisional_) confirm(out);
  }
  return out.size() - before;
}

void PeriodDetector::process(const Rec& r, std::vector<Iteration>& out) {
  if (state_ == State::kSearching) {
    buffer_.push_back(r);
    buffer_symbols_.push_back(r.symbol);
    if (buffer_.size() >= next_search_at_) search();
    return;
  }
  now_ = r.index;
  recent_.push_back(r);
  while (recent_.size() > window_records_ + params_.lookahead + 2) recent_.pop_front();
  if (provisional_ && r.index > evidence_.back().index) since_lock_.push_back(r);
  track(r);
  if (state_ != State::kLocked) return;
  release(now_, false, out);
  if (provisional_ && since_lock_.size() >= evidence_needed_) confirm(out);
}

void PeriodDetector::search() {
  ++stats_.searches;
  const std::size_t n = buffer_.size();
  const std::span<const std::uint64_t> all(buffer_symbols_);
  PeriodParams params = params_;
  params.min_window = min_window_;
  // The whole buffer first (most evidence), then ever more recent halves (past a burst of noise).
  for (std::size_t w = n; w >= min_window_; w /= 2) {
    if (const auto fit = detect_period(all.last(w), params)) {
      lock(n - w + fit->start, fit->period, w);
      return;
    }
  }
  if (n >= params_.max_window) {
    const std::size_t drop = n / 2;
    buffer_.erase(buffer_.begin(), buffer_.begin() + static_cast<std::ptrdiff_t>(drop));
    buffer_symbols_.erase(buffer_symbols_.begin(), buffer_symbols_.begin() + static_cast<std::ptrdiff_t>(drop));
  }
  next_search_at_ = std::max(buffer_.size() + 1, buffer_.size() + buffer_.size() / 4);
}

void PeriodDetector::lock(std::size_t start, std::uint32_t period, std::size_t evidence) {
  template_.assign(buffer_symbols_.begin() + static_cast<std::ptrdiff_t>(start),
                   buffer_symbols_.begin() + static_cast<std::ptrdiff_t>(start + period));
  prev_t_.assign(period, kMissing);
  cur_t_.assign(period, kMissing);
  phase_ = 0;
  cycles_ = 0;
  reported_ = false;
  report_phase_ = std::clamp<std::uint32_t>(
      static_cast<std::uint32_t>(std::ceil(params_.report_share * static_cast<double>(period))), 1, period);
  cycle_dirty_ = false;
  prev_cycle_dirty_ = false;
  pending_.clear();
  recent_.clear();
  irregular_.clear();
  waiting_.clear();
  window_records_ = std::max<std::uint64_t>(2 * std::uint64_t{period}, 64);
  allowed_irregular_ = std::max<std::uint64_t>(
      1, static_cast<std::uint64_t>(std::floor((1.0 - params_.min_acf) * static_cast<double>(window_records_))));
  provisional_ = true;
  segment_ = locks_;
  evidence_needed_ = evidence;
  index_at_lock_ = next_index_;
  lock_start_ = buffer_[start].index;
  held_.clear();
  since_lock_.clear();
  evidence_ = std::move(buffer_);
  buffer_.clear();
  buffer_symbols_.clear();
  state_ = State::kLocked;
  // Replay the buffer from the cycle start through the tracker, ahead of anything already waiting.
  inbox_.insert(inbox_.begin(), evidence_.begin() + static_cast<std::ptrdiff_t>(start), evidence_.end());
}

void PeriodDetector::confirm(std::vector<Iteration>& out) {
  provisional_ = false;
  if (!lost_template_.empty() && is_rotation(template_, lost_template_) && min_window_ < params_.max_window / 4) {
    // The same pattern broke and came back: the iteration is longer than the windows searched so far.
    min_window_ = std::min(2 * min_window_, params_.max_window / 4);
    ++stats_.window_doublings;
  }
  lost_template_.clear();
  if (locks_ > 0 && !is_rotation(template_, confirmed_template_)) ++period_changes_;
  confirmed_template_ = template_;
  cycle_start_ = lock_start_;
  ++locks_;
  out.insert(out.end(), held_.begin(), held_.end());
  held_.clear();
  evidence_.clear();
  evidence_.shrink_to_fit();
  since_lock_.clear();
  since_lock_.shrink_to_fit();
}

void PeriodDetector::track(const Rec& r) {
  if (pending_.empty() && r.symbol == template_[phase_]) {
    cur_t_[phase_] = r.t_ns;
    advance_phase();
    return;
  }
  pending_.push_back(r);
  if (pending_.size() > params_.lookahead) resolve();
}

void PeriodDetector::resolve() {
  const std::size_t p = template_.size();
  const std::size_t n = pending_.size();
  auto explains = [&](std::size_t a, std::size_t d) {
    for (std::size_t i = a; i < n; ++i) {
      if (pending_[i].symbol != template_[(phase_ + d + (i - a)) % p]) return false;
    }
    return true;
  };
  std::size_t skip = 1;     // records not aligned (extras, or the substituted record)
  std::size_t missing = 1;  // anchors without a record
  bool explained = false;
  for (std::size_t total = 1; total <= params_.max_inserted + params_.max_dropped && !explained; ++total) {
    // Extra records (evaluation, logging collectives) are likelier than lost ones: try them first.
    for (std::size_t a = std::min<std::size_t>(total, params_.max_inserted) + 1; a-- > 0;) {
      const std::size_t d = total - a;
      if (d > params_.max_dropped || a >= n) continue;
      if (explains(a, d)) {
        skip = a;
        missing = d;
        explained = true;
        break;
      }
    }
  }
  std::vector<Rec> rest(pending_.begin() + static_cast<std::ptrdiff_t>(skip), pending_.end());
  const std::uint64_t at = pending_.front().index;
  pending_.clear();
  if (explained) {
    stats_.extra_records += skip;
    stats_.missing_records += missing;
  } else {
    ++stats_.mismatched_records;
  }
  for (std::size_t i = 0; i < skip + missing; ++i) {
    if (irregular(at)) {
      lose_lock();
      return;
    }
  }
  for (std::size_t i = 0; i < missing; ++i) {
    cur_t_[phase_] = kMissing;
    advance_phase();
  }
  for (const Rec& q : rest) {
    track(q);
    if (state_ != State::kLocked) return;
  }
}

void PeriodDetector::advance_phase() {
  ++phase_;
  if (phase_ == report_phase_ && phase_ < template_.size()) report_iteration(false);
  if (phase_ < template_.size()) return;
  phase_ = 0;
  complete_cycle();
}

// The iteration that began with the previous cycle, from the anchors of this cycle read so far (0..phase_-1)
// and the same ones of the previous cycle. Early (`whole` false: the first report_share of the cycle), only
// when the anchors agree: at least 4 of them, and the mean of the later half of them within report_drift of
// the earlier half's. They disagree where the ops have moved within the iteration: a change of pattern whose
// first ops happen to match the template (4 -> 6 micro-batches of the same ops: the new ones come sooner),
// or a slowdown that began within the span. Such an iteration waits for the whole cycle, as every one did
// before, where the rest of the cycle can show the change (an irregularity holds it back, a lost lock drops
// it) and every anchor is averaged.
void PeriodDetector::report_iteration(bool whole) {
  if (cycles_ == 0) return;
  const std::size_t upto = whole ? cur_t_.size() : phase_;  // (phase_ is 0 again when the cycle is complete)
  std::vector<double>& d = diffs_;
  d.clear();
  for (std::size_t j = 0; j < upto; ++j) {
    if (cur_t_[j] == kMissing || prev_t_[j] == kMissing) continue;
    d.push_back(static_cast<double>(static_cast<std::int64_t>(cur_t_[j] - prev_t_[j])));
  }
  if (d.empty()) return;
  double sum = 0.0;
  for (double x : d) sum += x;
  const double mean = sum / static_cast<double>(d.size());
  if (!whole) {
    if (d.size() < 4) return;
    const std::size_t h = d.size() / 2;
    double a = 0.0, b = 0.0;
    for (std::size_t i = 0; i < h; ++i) a += d[i];
    for (std::size_t i = h; i < d.size(); ++i) b += d[i];
    a /= static_cast<double>(h);
    b /= static_cast<double>(d.size() - h);
    if (!(mean > 0) || std::abs(b - a) > params_.report_drift * mean) return;
  }
  std::uint64_t end = cur_t_[0];
  for (std::size_t j = 0; end == kMissing && j < upto; ++j) end = cur_t_[j];
  const bool dirty = cycle_dirty_ || prev_cycle_dirty_;
  const auto anchors = static_cast<std::uint32_t>(d.size());
  waiting_.push_back(Waiting{
      Iteration{next_index_++, end, mean, static_cast<std::uint32_t>(template_.size()), segment_, anchors},
      dirty ? now_ + window_records_ : 0});
  reported_ = true;
}

void PeriodDetector::complete_cycle() {
  if (!reported_) report_iteration(true);
  reported_ = false;
  std::swap(prev_t_, cur_t_);
  std::fill(cur_t_.begin(), cur_t_.end(), kMissing);
  prev_cycle_dirty_ = cycle_dirty_;
  cycle_dirty_ = false;
  ++cycles_;
}

void PeriodDetector::release(std::uint64_t now, bool all, std::vector<Iteration>& out) {
  auto& sink = provisional_ ? held_ : out;
  while (!waiting_.empty() && (all || waiting_.front().release_at <= now)) {
    sink.push_back(waiting_.front().iteration);
    waiting_.pop_front();
  }
}

bool PeriodDetector::irregular(std::uint64_t index) {
  cycle_dirty_ = true;
  irregular_.push_back(index);
  while (!irregular_.empty() && irregular_.front() + window_records_ < index) irregular_.pop_front();
  irregular_front_ = irregular_.front();
  return irregular_.size() > allowed_irregular_;
}

void PeriodDetector::lose_lock() {
  pending_.clear();
  irregular_.clear();
  state_ = State::kSearching;
  // Iterations still held back overlap the irregular stretch that broke the lock: drop them.
  if (!waiting_.empty()) next_index_ = waiting_.front().iteration.index;
  waiting_.clear();
  if (provisional_) {
    // The window the lock was found on was too short to tell: forget the lock and its iterations, and
    // keep growing that window with everything read since.
    ++stats_.rejected_locks;
    provisional_ = false;
    held_.clear();
    next_index_ = index_at_lock_;
    const std::uint64_t last_evidence = evidence_.back().index;
    buffer_ = std::move(evidence_);
    evidence_.clear();
    buffer_.insert(buffer_.end(), since_lock_.begin(), since_lock_.end());
    since_lock_.clear();
    buffer_symbols_.clear();
    for (const Rec& q : buffer_) buffer_symbols_.push_back(q.symbol);
    // What is still waiting from the replay is in the buffer already.
    while (!inbox_.empty() && inbox_.front().index <= last_evidence) inbox_.pop_front();
    recent_.clear();
    next_search_at_ = buffer_.size() + std::max<std::size_t>(1, buffer_.size() / 4);
    return;
  }
  ++stats_.lost_locks;
  lost_template_ = template_;
  // Search again from the first irregular record of the window: before it the old pattern held.
  std::vector<Rec> again;
  for (const Rec& q : recent_) {
    if (q.index >= irregular_front_) again.push_back(q);
  }
  recent_.clear();
  buffer_.clear();
  buffer_symbols_.clear();
  next_search_at_ = min_window_;
  inbox_.insert(inbox_.begin(), again.begin(), again.end());
}

}  // namespace greyhound::analysis
