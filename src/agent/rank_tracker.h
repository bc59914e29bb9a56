// The node agent's LocalAnalyzer for one rank: reads the rank's ring, learns its communicators from the
// lifecycle records, feeds the data-moving calls to a PeriodDetector and the iteration times to a slowdown
// detector (BOCD + validation by default). Values out; publishing is the caller's business.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "greyhound/analysis/period_detector.h"
#include "greyhound/analysis/slowdown_detector.h"
#include "greyhound/ring.h"

namespace greyhound::agent {

struct GroupMembership {
  std::uint64_t group_id = 0;
  int group_rank = -1;
  int group_size = -1;
  std::string created_by;  // "CommInitRank", "CommSplit", ...
};

struct TrackedIteration {
  std::uint64_t index = 0;   // this rank's numbering (PeriodDetector's)
  std::uint64_t start_t_ns = 0;
  std::uint64_t end_t_ns = 0;
  double iter_ms = 0;
  std::uint32_t period = 0;
};

struct TrackedChange {
  analysis::SlowdownEvent change;
  std::uint64_t onset_start_t_ns = 0;  // when the onset iteration began
  std::uint64_t detected_end_t_ns = 0; // when the iteration that triggered it ended
};

// Device times of one rank over a profiling window (the agent asked the hook for Timing records). Shares of
// the window's wall time, so that they need no iteration count (the period detector may be re-locking after
// a plan changed the call pattern); the iteration time, when iterations completed in the window.
struct RankProfile {
  double window_s = 0;
  int iterations = 0;                 // iterations completed in the window (0: iter_ms unknown)
  double iter_ms = 0;                 // their mean time
  double iter_ms_min = 0, iter_ms_max = 0;  // their least and greatest (0: none)
  double comm_share = 0;              // share of the window inside NCCL calls (device time)
  std::uint64_t timings = 0;          // Timing records seen
  std::string status;                 // "active", or "unavailable" (no CUDA runtime in the rank)
  std::map<std::uint64_t, std::pair<double, double>> groups;  // group -> (share of the window, calls per second)
};

// What one poll learned.
struct RankObservation {
  std::vector<TrackedIteration> iterations;
  std::vector<TrackedChange> changes;
  std::vector<GroupMembership> new_groups;
  bool period_changed = false;
  std::uint32_t period = 0;
};

class RankTracker {
 public:
  RankTracker(std::unique_ptr<RingReader> reader, analysis::DetectionMethod method);

  // Device profiling: asks the hook (ring control block) for Timing records until `until_ns`, and sums
  // them. finish_profile() returns the window's result once `now_ns` has passed its end (and switches the
  // hook's flag off); nullopt while it runs or when none was started.
  bool start_profile(std::uint64_t now_ns, std::uint64_t until_ns, std::string* error);
  std::optional<RankProfile> finish_profile(std::uint64_t now_ns);
  bool profiling() const { return profile_until_ns_ != 0; }

  // Reads what the ring holds now (at most max_records) and analyses it.
  void poll(std::uint64_t now_ns, RankObservation& out, std::size_t max_records = 1 << 16);

  // The pause block of the rank's ring, writable (nullptr with *error when it cannot be mapped).
  PauseControl* pause_control(std::string* error) { return reader_->pause(error); }
  // The framework's iteration in progress, from its marks; -1 when it marks none.
  std::int64_t framework_iteration() const {
    const std::uint64_t m = reader_->header().pause.iteration_mark.load(std::memory_order_acquire);
    return m == 0 ? -1 : static_cast<std::int64_t>(m - 1);
  }

  int rank() const { return rank_; }
  int local_rank() const { return reader_->header().local_rank; }
  int pid() const { return reader_->header().pid; }
  std::uint64_t created_mono_ns() const { return reader_->header().created_mono_ns; }
  std::uint64_t created_real_ns() const { return reader_->header().created_real_ns; }
  bool writer_alive() const { return reader_->writer_alive(); }
  bool writer_exited_normally() const { return reader_->writer_exited_normally(); }
  std::optional<int> writer_exit_status() const { return reader_->writer_exit_status(); }
  // CLOCK_MONOTONIC of the newest record read (0: none yet).
  std::uint64_t last_record_ns() const { return last_record_ns_; }
  // The NCCL call the rank is inside now (nullopt: none).
  std::optional<InCall> in_call() const { return reader_->in_call(); }
  // The newest call number read per group (RecordPayload::group_seq), for the groups it has one for.
  const std::map<std::uint64_t, std::uint64_t>& last_group_seq() const { return last_group_seq_; }
  // The latest iteration's time (0: none yet).
  double last_iter_ms() const { return history_.empty() ? 0.0 : history_.back().iter_ms; }
  bool drained() const { return reader_->next_seq() >= reader_->header().write_index.load(); }
  std::uint64_t records_read() const { return stats_.read; }
  std::uint64_t records_lost() const { return stats_.lost; }
  const std::map<std::uint64_t, GroupMembership>& groups() const { return groups_; }
  // Calls seen per (group id, "Op:bytes").
  const std::map<std::uint64_t, std::map<std::string, std::uint64_t>>& op_counts() const { return op_counts_; }
  std::uint32_t period() const { return period_.period(); }

  // An operator's settings (greyhoundctl set): new detection thresholds start a new detector (it learns the
  // level again, 16 iterations), the ACF threshold applies to the period detector; while paused no change
  // is reported (the detector starts afresh on resume: the level may have moved meanwhile).
  void tune(const analysis::DetectionTuning& tuning, std::optional<double> acf_threshold, bool paused);

 private:
  std::unique_ptr<RingReader> reader_;
  int rank_;
  analysis::PeriodDetector period_;
  analysis::DetectionMethod method_;
  std::unique_ptr<analysis::SlowdownDetector> detector_;
  analysis::DetectionTuning tuning_;
  double default_min_acf_ = 0;  // the period detector's own, restored when the setting goes
  bool paused_ = false;
  std::uint32_t detector_period_ = 0;  // the period of the iterations the detector has seen
  RingPollStats stats_;
  std::uint64_t last_record_ns_ = 0;
  std::map<std::uint64_t, std::uint64_t> last_group_seq_;
  std::map<std::uint64_t, GroupMembership> groups_;
  std::map<std::uint64_t, std::map<std::string, std::uint64_t>> op_counts_;
  std::deque<TrackedIteration> history_;  // recent iterations, to time the onset of a change
  std::uint32_t last_period_changes_ = 0;
  std::vector<RecordPayload> batch_;
  std::vector<analysis::Iteration> its_;
  std::vector<analysis::SlowdownEvent> events_;

  // Profiling window.
  std::uint64_t profile_start_ns_ = 0;
  std::uint64_t profile_until_ns_ = 0;
  int profile_iterations_ = 0;
  double profile_iter_ms_ = 0;
  double profile_iter_min_ms_ = 0, profile_iter_max_ms_ = 0;
  std::uint64_t profile_timings_ = 0;
  double profile_comm_ns_ = 0;
  std::map<std::uint64_t, std::pair<double, std::uint64_t>> profile_groups_;  // group -> (ns, calls)
};

// Symbol of a record for period detection: op, group and bytes, plus the peer for Send/Recv.
std::uint64_t record_symbol(const RecordPayload& p);
// Whether a record takes part in the iteration pattern (data movement and group brackets, not lifecycle).
bool in_iteration_pattern(const RecordPayload& p);

}  // namespace greyhound::agent
