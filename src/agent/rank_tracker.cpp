#include "agent/rank_tracker.h"

#include "greyhound/hash.h"
#include "greyhound/ops.h"

#include <algorithm>

namespace greyhound::agent {
namespace {
constexpr std::size_t kHistory = 4096;
}  // namespace

std::uint64_t record_symbol(const RecordPayload& p) {
  std::uint64_t group = p.group_id;
  if (op_is_p2p(static_cast<Op>(p.op))) group ^= kGoldenGamma * static_cast<std::uint64_t>(p.peer + 2);
  return analysis::op_symbol(p.op, group, p.bytes);
}

bool in_iteration_pattern(const RecordPayload& p) {
  const Op op = static_cast<Op>(p.op);
  return op_moves_data(op) || op_is_group(op);
}

RankTracker::RankTracker(std::unique_ptr<RingReader> reader, analysis::DetectionMethod method)
    : reader_(std::move(reader)),
      rank_(reader_->header().rank),
      method_(method),
      detector_(analysis::make_slowdown_detector(method)),
      default_min_acf_(period_.min_acf()) {
  reader_->seek_oldest();
}

void RankTracker::tune(const analysis::DetectionTuning& tuning, std::optional<double> acf_threshold, bool paused) {
  period_.set_min_acf(acf_threshold.value_or(default_min_acf_));
  if (tuning != tuning_ || (paused_ && !paused)) detector_ = analysis::make_slowdown_detector(method_, tuning);
  tuning_ = tuning;
  paused_ = paused;
}

void RankTracker::poll(std::uint64_t now_ns, RankObservation& out, std::size_t max_records) {
  batch_.clear();
  reader_->poll(batch_, max_records, stats_, now_ns);
  for (const RecordPayload& p : batch_) {
    last_record_ns_ = std::max(last_record_ns_, p.t_ns);
    const Op op = static_cast<Op>(p.op);
    if (p.group_id != 0 && p.group_seq != 0 && op != Op::kTiming && last_group_seq_.size() < 4096) {
      std::uint64_t& last = last_group_seq_[p.group_id];
      last = std::max(last, p.group_seq);
    }
    if (op == Op::kTiming) {  // device time of an earlier call (or group), while profiling
      if (profile_until_ns_ != 0) {
        ++profile_timings_;
        profile_comm_ns_ += static_cast<double>(p.dur_ns);
        auto& g = profile_groups_[p.group_id];
        g.first += static_cast<double>(p.dur_ns);
        ++g.second;
      }
      continue;
    }
    if (op_creates_comm(op) && p.group_id != 0 && p.result == 0 && groups_.count(p.group_id) == 0) {
      GroupMembership g{p.group_id, p.group_rank, p.group_size, std::string(op_name(op))};
      groups_[p.group_id] = g;
      out.new_groups.push_back(g);
    } else if (op_moves_data(op) && p.group_id != 0) {
      auto it = groups_.find(p.group_id);
      if (it == groups_.end() && p.group_size > 0) {  // created before the ring was read: learn it here
        GroupMembership g{p.group_id, p.group_rank, p.group_size, "unknown"};
        groups_[p.group_id] = g;
        out.new_groups.push_back(g);
      }
      ++op_counts_[p.group_id][std::string(op_name(op)) + ":" + std::to_string(p.bytes)];
    }
    if (!in_iteration_pattern(p)) continue;
    its_.clear();
    period_.push(p.t_ns, record_symbol(p), its_);
    for (const analysis::Iteration& it : its_) {
      TrackedIteration t;
      t.index = it.index;
      t.end_t_ns = it.end_t_ns;
      t.iter_ms = it.iter_ns * 1e-6;
      t.start_t_ns = it.end_t_ns - static_cast<std::uint64_t>(it.iter_ns);
      t.period = it.period;
      history_.push_back(t);
      if (history_.size() > kHistory) history_.pop_front();
      out.iterations.push_back(t);
      if (profile_until_ns_ != 0 && t.end_t_ns >= profile_start_ns_ && t.end_t_ns <= profile_until_ns_) {
        profile_iter_min_ms_ = profile_iterations_ == 0 ? t.iter_ms : std::min(profile_iter_min_ms_, t.iter_ms);
        profile_iter_max_ms_ = std::max(profile_iter_max_ms_, t.iter_ms);
        ++profile_iterations_;
        profile_iter_ms_ += t.iter_ms;
      }
      // A new period (e.g. after a micro-batch re-allocation) may change what one iteration is: start the
      // detector afresh rather than compare iterations of two different kinds.
      if (detector_period_ != 0 && t.period != detector_period_) {
        detector_ = analysis::make_slowdown_detector(method_, tuning_);
      }
      detector_period_ = t.period;
      events_.clear();
      detector_->push(t.iter_ms, events_);
      if (paused_) events_.clear();  // detection paused by the operator: nothing reported
      for (const auto& e : events_) {
        TrackedChange c;
        c.change = e;
        c.detected_end_t_ns = t.end_t_ns;
        c.onset_start_t_ns = t.start_t_ns;
        // The detector numbers accepted iterations 0, 1, ...; so does the period detector (its iterations
        // are consecutive), offset by where the detector started.
        const std::uint64_t offset = t.index - e.detected_index;
        const std::uint64_t onset = e.index + offset;
        for (auto h = history_.rbegin(); h != history_.rend(); ++h) {
          if (h->index == onset) {
            c.onset_start_t_ns = h->start_t_ns;
            break;
          }
        }
        c.change.index = onset;
        c.change.detected_index = t.index;
        out.changes.push_back(c);
      }
    }
  }
  if (period_.period_changes() != last_period_changes_) {
    last_period_changes_ = period_.period_changes();
    out.period_changed = true;
  }
  out.period = period_.period();
}

}  // namespace greyhound::agent

namespace greyhound::agent {

bool RankTracker::start_profile(std::uint64_t now_ns, std::uint64_t until_ns, std::string* error) {
  RingControl* c = reader_->control(error);
  if (c == nullptr) return false;
  profile_start_ns_ = now_ns;
  profile_until_ns_ = until_ns;
  profile_iterations_ = 0;
  profile_iter_ms_ = 0;
  profile_iter_min_ms_ = profile_iter_max_ms_ = 0;
  profile_timings_ = 0;
  profile_comm_ns_ = 0;
  profile_groups_.clear();
  c->profile_until_ns.store(until_ns, std::memory_order_relaxed);
  c->profile_request.fetch_add(1, std::memory_order_relaxed);
  c->profile_flags.store(kProfileDevice, std::memory_order_release);
  return true;
}

std::optional<RankProfile> RankTracker::finish_profile(std::uint64_t now_ns) {
  if (profile_until_ns_ == 0 || now_ns < profile_until_ns_) return std::nullopt;
  std::string err;
  RankProfile r;
  if (RingControl* c = reader_->control(&err)) {
    c->profile_flags.store(0, std::memory_order_release);
    r.status = c->profile_status.load(std::memory_order_relaxed) == kProfileStatusUnavailable ? "unavailable" : "active";
  }
  r.window_s = static_cast<double>(profile_until_ns_ - profile_start_ns_) * 1e-9;
  r.iterations = profile_iterations_;
  r.timings = profile_timings_;
  if (profile_iterations_ > 0) {
    r.iter_ms = profile_iter_ms_ / profile_iterations_;
    r.iter_ms_min = profile_iter_min_ms_;
    r.iter_ms_max = profile_iter_max_ms_;
  }
  if (r.window_s > 0) {
    const double window_ns = r.window_s * 1e9;
    r.comm_share = std::min(1.0, profile_comm_ns_ / window_ns);
    for (const auto& [gid, g] : profile_groups_) {
      r.groups[gid] = {std::min(1.0, g.first / window_ns), static_cast<double>(g.second) / r.window_s};
    }
  }
  profile_until_ns_ = 0;
  return r;
}

}  // namespace greyhound::agent
