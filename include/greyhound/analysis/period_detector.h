// PeriodDetector: the iteration period of one rank's stream of NCCL calls and the iteration times it
// implies (the paper's Tracking stage), fed record by record.
//
// Symbols. Each record is reduced to a 64-bit symbol, op_symbol(op, group id, bytes): two calls are "the
// same op" when they have the same symbol. Only equality matters. If P2P calls to different peers must be
// told apart, mix the peer into the group id before calling op_symbol.
//
// Period. The smallest lag k whose autocorrelation of the symbol sequence is >= min_acf (0.95), the
// autocorrelation of a categorical sequence at lag k being the fraction of positions i with
// s[i] == s[i - k] (1 for an exactly periodic sequence, whatever the symbols' values). A lag must repeat at
// least min_cycles times and the window must hold at least min_window records before it is accepted, so a
// short run of alternating Send/Recv is not mistaken for an iteration. Refinement (beyond the paper): with
// many identical micro-batches per iteration, one micro-batch's calls reach min_acf by themselves; where
// that lag fails (the gradient AllReduces closing each iteration) the failures recur once per iteration,
// so a spacing of its failure clusters at which the sequence repeats better replaces it (smallest first;
// a multiple of the lag must halve the failures, since under random noise it repeats as well as the lag).
// detect_period() is that search on a window, alone and pure.
//
// Cycle start and iteration times. The cycle start is the first record from which one whole cycle is
// immediately repeated exactly; its P symbols become the template. Cycle c holds the records aligned to
// template positions 0..P-1 after it. Once the first half of cycle c (c >= 1) is read (report_share of its
// positions, rounded up), the iteration that began with cycle c - 1 is reported: its time is the mean over
// the anchor ops j of that first half present in both cycles of t(c, j) - t(c - 1, j), the time between an op
// and the same op one period earlier (one late op moves it by 1/(P/2) of its delay; the sum of iteration
// times telescopes to the elapsed time over a stretch reported alike, and within a few ops' drift where
// early and whole-cycle reports alternate), and it ended when cycle c began. So an iteration is known half a
// cycle after it ended, when those anchors agree (at least 4 of them, the later half's mean within
// report_drift, 2 %, of the earlier half's); when they do not (the ops moved within the iteration: a change
// of pattern whose first ops match the template, or a slowdown that began within the span), it waits for the
// whole cycle and every anchor is averaged, as every iteration was before (report_share 1). Half a
// cycle sooner is about an iteration sooner for a remedy: a decision that came with an iteration's end
// reached the job just after that iteration boundary and waited for the next one. The iteration in which a
// slowdown began is a mix of both levels either way (reported at the whole cycle when its ops moved); the
// ones after it are reported early once they are wholly at the new level.
//
// Noise. Once locked, each record is aligned to the template. A mismatch is resolved by reading
// `lookahead` more records: the smallest explanation as up to max_inserted extra records (evaluation,
// checkpoint or logging collectives) and/or up to max_dropped missing ones that makes every following
// record match is taken; with none, the record is counted as a substitution. Extra records are ignored and
// missing ones leave their anchor out of the mean. An iteration whose two cycles saw such an irregularity
// is held back for one irregularity window (below) and dropped if the lock is lost meanwhile: when the
// pattern changes, the last cycles are aligned by coincidence and their times are wrong. Iterations behind a
// held one wait for it (they are reported in order), so a clean stream reports without delay.
//
// Locks are provisional. A window of a few hundred records can make a sub-pattern look like the iteration
// (twelve tensor-parallel calls per micro-batch repeat for most of a 196-call iteration). So the iterations
// of a new lock are held back until it has tracked as many new records as the window it was found on; a
// provisional lock that breaks before is discarded with its iterations, and the search resumes on its
// window grown by everything read since, where the sub-pattern no longer reaches min_acf. The price is
// latency at the start and after a change of period: iterations arrive (back-filled, in order) one
// evidence window later. finish() releases a provisional lock's iterations at the end of a finite stream.
//
// Search windows. Each search tries the whole buffer, then its latest half, quarter, ... down to
// min_window, and takes the first window with a period: the whole buffer has the most evidence, a recent
// suffix escapes a burst of foreign calls (an evaluation phase) or a stretch of noise at its front.
//
// Change of period. When irregularities exceed (1 - min_acf) of the last max(2P, 64) records, a confirmed
// lock is lost: the cycle in progress is abandoned (no iteration is reported for it, so the switch never
// shows as a slow iteration), and the period is searched again from the first irregular record on. The new
// lock back-fills the iterations of the records read meanwhile. Iteration indices stay consecutive over the
// detector's life; `segment` counts confirmed locks and period_changes() those whose template differs from
// the previous one (a relock on the same template after a burst of noise is not a change of period).
//
// Growing windows. A sub-pattern lock that outlives its confirmation (the iteration is longer than twice
// the window it was found on) breaks at every iteration boundary and is found again, the same template each
// time. So when a lock is lost and the next confirmed lock has the same template, the minimum search window
// doubles (up to max_window / 4) and stays: after a few iterations the windows hold three iterations and
// the refinement finds the true period (a change of period: the agent should restart its slowdown detector
// on every change of period, since the earlier "iterations" were micro-batches). Until then the reported
// iterations are the sub-pattern's. A job with many identical micro-batches per iteration avoids this by
// starting with a larger min_window.
//
// The search's autocorrelation is positional: one inserted or lost record misaligns a whole period of the
// window, so the search tolerates irregularities in up to about (1 - min_acf) of the iterations of its
// window; once locked, the tracker tolerates (1 - min_acf) of the records.
//
// Use by the node agent (one detector per local rank, fed from the rank's ring in sequence order):
//   PeriodDetector period;                                  // PeriodParams{} defaults
//   auto slow = make_slowdown_detector(DetectionMethod::kBocdValidated);
//   std::vector<Iteration> its;  std::vector<SlowdownEvent> events;
//   for (const RecordPayload& r : batch) {
//     its.clear();
//     period.push(r.t_ns, op_symbol(r.op, r.group_id, r.bytes), its);
//     for (const Iteration& it : its) {
//       if (it.segment != last_segment && it.period != last_period) slow = make_slowdown_detector(...);
//       slow->push(it.iter_ns / 1e6, events);               // publish events, then clear them
//     }
//   }
// (restarting the slowdown detector on a change of period costs its 16-iteration baseline and protects
// against a series whose unit changed; see "Growing windows").
//
// Cost: amortised O(1) per record when locked (O(P) once per cycle); while searching, searches run when the
// buffer has grown by 25 %, each O(k * 20 + n) per window for a period k found in n records, so amortised
// O(1) per record as well. Memory: O(max_window) while searching or provisional, O(P + window) after.
// Not thread-safe; one detector per rank.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <vector>

namespace greyhound::analysis {

// Symbol of one NCCL call for period detection: a mix of its op code, communicator id and byte count.
std::uint64_t op_symbol(std::uint64_t op, std::uint64_t group_id, std::uint64_t bytes);

struct PeriodParams {
  double min_acf = 0.95;               // M: autocorrelation a period must reach
  std::uint32_t min_cycles = 3;        // a window must hold this many cycles of a lag
  std::uint32_t min_window = 256;      // records in a window before any lag is accepted
  std::uint32_t max_period = 1u << 16; // largest period searched, in records
  std::uint32_t max_window = 1u << 18; // search buffer bound (records); the oldest half goes when full
  std::uint32_t lookahead = 4;         // records read past a mismatch before realigning
  std::uint32_t max_inserted = 2;      // extra records one realignment may explain
  std::uint32_t max_dropped = 2;       // missing records one realignment may explain
  double report_share = 0.5;           // an iteration is reported once this share of the next cycle is read,
  double report_drift = 0.02;          // ... when the anchors read agree within this share (else at its end)
};

struct PeriodFit {
  std::uint32_t period = 0;  // records per iteration
  std::uint64_t start = 0;   // index in the window of the first record of a cycle
  double acf = 0.0;          // autocorrelation at `period` over the window
};

// The period search on one window: the smallest lag k in [1, min(max_period, n / min_cycles)] with
// autocorrelation >= min_acf, and the cycle start (first exact repetition of a whole cycle). nullopt when
// the window is shorter than min_window, no lag qualifies, or no cycle repeats exactly.
// Lags are screened on 64 fixed, spread positions (a lag with > 25 % mismatches there is rejected) before
// the exact count, which is what makes a 100k-record window take well under 10 ms.
std::optional<PeriodFit> detect_period(std::span<const std::uint64_t> symbols, const PeriodParams& params);

struct Iteration {
  std::uint64_t index = 0;     // 0, 1, 2, ... over the detector's life
  std::uint64_t end_t_ns = 0;  // when it ended: the first op of the next cycle
  double iter_ns = 0.0;        // iteration time
  std::uint32_t period = 0;    // records per iteration of the lock that measured it
  std::uint32_t segment = 0;   // which lock measured it (0 = first)
  std::uint32_t anchors = 0;   // ops averaged (period minus missing ones)
};

class PeriodDetector {
 public:
  enum class State : std::uint8_t { kSearching, kLocked };

  struct Stats {
    std::uint64_t extra_records = 0;       // ignored as inserted
    std::uint64_t missing_records = 0;     // anchors presumed dropped
    std::uint64_t mismatched_records = 0;  // unexplained (counted as substituted)
    std::uint64_t lost_locks = 0;          // confirmed locks lost (change of period, burst of noise)
    std::uint64_t rejected_locks = 0;      // provisional locks that broke before confirmation
    std::uint64_t searches = 0;
    std::uint64_t window_doublings = 0;    // minimum search window doubled (same template lost again)
  };

  explicit PeriodDetector(const PeriodParams& params = {});

  // Feeds the next record of the stream (t_ns monotonic, non-decreasing). Appends to `out` every iteration
  // this record makes known (several when a lock is confirmed and back-fills) and returns how many.
  std::size_t push(std::uint64_t t_ns, std::uint64_t symbol, std::vector<Iteration>& out);
  // End of a finite stream: accepts a provisional lock as it is and appends its held iterations.
  std::size_t finish(std::vector<Iteration>& out);

  State state() const { return state_; }
  bool provisional() const { return state_ == State::kLocked && provisional_; }
  // Period of the last confirmed lock (0 before the first); while searching, of the last one.
  std::uint32_t period() const { return static_cast<std::uint32_t>(confirmed_template_.size()); }
  // Record index (0-based over all pushed records) where cycle 0 of the last confirmed lock starts.
  std::uint64_t cycle_start() const { return cycle_start_; }
  std::uint64_t records() const { return records_; }
  std::uint32_t min_window() const { return min_window_; }
  std::uint32_t locks() const { return locks_; }  // confirmed
  std::uint32_t period_changes() const { return period_changes_; }
  const Stats& stats() const { return stats_; }
  // The autocorrelation a period must reach, changed while running (an operator's setting): it applies to
  // the next search and to the tolerance of the lock in force; (0, 1], others are ignored.
  void set_min_acf(double min_acf) {
    if (min_acf > 0 && min_acf <= 1) params_.min_acf = min_acf;
  }
  double min_acf() const { return params_.min_acf; }

 private:
  struct Rec {
    std::uint64_t index;
    std::uint64_t t_ns;
    std::uint64_t symbol;
  };

  struct Waiting {
    Iteration iteration;
    std::uint64_t release_at;  // record index from which it may be reported
  };

  void process(const Rec& r, std::vector<Iteration>& out);
  void search();
  void lock(std::size_t start, std::uint32_t period, std::size_t evidence);
  void confirm(std::vector<Iteration>& out);
  void track(const Rec& r);
  void resolve();
  void advance_phase();
  void complete_cycle();
  void report_iteration(bool whole);
  // Moves iterations due by record `now` (all of them when `all`) to the held ones or to `out`.
  void release(std::uint64_t now, bool all, std::vector<Iteration>& out);
  // Records an irregularity at record `index`; returns true when the lock is lost.
  bool irregular(std::uint64_t index);
  void lose_lock();

  PeriodParams params_;
  State state_ = State::kSearching;
  std::uint64_t records_ = 0;
  std::deque<Rec> inbox_;  // records waiting to be processed (re-fed ones go first)

  // Searching.
  std::vector<Rec> buffer_;
  std::vector<std::uint64_t> buffer_symbols_;
  std::size_t next_search_at_ = 0;

  // Locked (provisional or confirmed).
  std::vector<std::uint64_t> template_;
  std::vector<std::uint64_t> prev_t_;  // times of the previous cycle's anchors (kMissing when absent)
  std::vector<std::uint64_t> cur_t_;
  std::uint32_t phase_ = 0;
  std::uint64_t cycles_ = 0;
  std::uint32_t report_phase_ = 1;     // the phase of a cycle at which the previous iteration is reported
  bool reported_ = false;              // ... and it has been, in this cycle
  std::vector<double> diffs_;          // scratch: the anchors' times since the previous cycle
  std::vector<Rec> pending_;           // mismatch plus lookahead
  std::uint64_t now_ = 0;              // index of the record being processed
  bool cycle_dirty_ = false;           // an irregularity in the current cycle
  bool prev_cycle_dirty_ = false;
  std::deque<Waiting> waiting_;
  std::uint32_t segment_ = 0;          // segment number of the current lock
  std::deque<Rec> recent_;             // raw records of the irregularity window, to search again from
  std::deque<std::uint64_t> irregular_;
  std::uint64_t irregular_front_ = 0;  // first irregular record of the window when the lock was lost
  std::uint64_t window_records_ = 0;
  std::uint64_t allowed_irregular_ = 0;

  // Provisional lock: the search buffer it was found in, the new records read since, its iterations.
  bool provisional_ = false;
  std::vector<Rec> evidence_;
  std::size_t evidence_needed_ = 0;
  std::vector<Rec> since_lock_;
  std::vector<Iteration> held_;        // released while provisional
  std::uint64_t index_at_lock_ = 0;
  std::uint64_t lock_start_ = 0;

  std::vector<std::uint64_t> confirmed_template_;
  std::vector<std::uint64_t> lost_template_;  // template of the last confirmed lock that was lost
  std::uint32_t min_window_ = 0;              // current minimum search window (grows, see above)
  std::uint64_t cycle_start_ = 0;
  std::uint64_t next_index_ = 0;
  std::uint32_t locks_ = 0;
  std::uint32_t period_changes_ = 0;
  Stats stats_;
};

}  // namespace greyhound::analysis
