#pragma once
// Which rank's iterations pace the job: the master's clock and the planner's iteration time are read off one
// rank's newest iteration in the store (rank 0 first). Every rank of a job runs at the job's period, so any
// rank will do; what matters is that its iterations still reach the store. When the pacing rank's newest
// iteration is stale (its agent stalled, its ring overflowed, its period not locked yet, the rank gone after
// a restart), the driver looks for a fresher one among a few ranks spread over the job's nodes and paces from
// it. Pure: the driver reads, these decide.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "store/messages.h"

namespace greyhound::master {

// A reading is stale once its iteration ended longer ago than the larger of these.
inline constexpr std::int64_t kPaceStaleMinMs = 2000;
inline constexpr double kPaceStaleIterations = 4.0;
// How many ranks one search reads, at most.
inline constexpr std::size_t kPaceCandidates = 32;
// A reading stamped further ahead of the master's wall clock than this is not believed (the hosts' clocks
// agree within far less: the agents' stamps are the job's clock as well).
inline constexpr std::int64_t kPaceFutureMs = 60'000;
// Searches that find nothing fresher back off: 1 s, doubled after each, at most 30 s (a hung or stopped job
// has no fresh rank at all); a fresh pace starts over.
inline constexpr double kPaceSearchFirstS = 1.0;
inline constexpr double kPaceSearchMaxS = 30.0;

// True when `u` says nothing of the job's pace at wall time `now_unix_ms`: no reading, its iteration ended
// more than max(2 s, 4 of its iterations) before, or it is stamped more than kPaceFutureMs after it.
bool pace_stale(const std::optional<IterationUpdate>& u, std::int64_t now_unix_ms);

// The ranks one search reads: at most `max` of the job's `ranks` (sorted), evenly spread so that they fall on
// different nodes when ranks fill nodes in order, `current` left out. `search`: how many searches found
// nothing before this one; each shifts the spread by one rank, so that ranks a search never reads (gone with
// a restart, or behind the same stalled agents) do not hide the fresh ones for ever. Search 0 reads rank
// ranks[0].
std::vector<int> pace_candidates(const std::vector<int>& ranks, int current, std::size_t max = kPaceCandidates,
                                 std::size_t search = 0);

// When a stale pace is searched for: at once, then (while searches find nothing fresher) after 1 s, 2, 4, ...
// at most 30 s; a fresh pace, or a search that found one, starts the waits over (the next search still waits
// the 1 s after the last one: a pace at the edge of stale is not searched on every tick). `misses()` is
// pace_candidates' `search`.
class PaceSearch {
 public:
  bool due(double mono_s) const { return mono_s >= next_s_; }
  void started(double mono_s);  // a search starts now: the next one waits
  void missed() { ++misses_; }  // it found nothing fresher
  void reset();                 // the pace is fresh (again): waits from 1 s, no misses
  std::size_t misses() const { return misses_; }

 private:
  double next_s_ = 0;
  double wait_s_ = kPaceSearchFirstS;
  std::size_t misses_ = 0;
};

// The reading to pace from among the candidates' `read`: the freshest, when it is not stale at `now_unix_ms`
// (nor stamped more than kPaceFutureMs after it) and its iteration ended later than the current one's (none:
// keep the current rank).
std::optional<IterationUpdate> fresher_pace(const std::optional<IterationUpdate>& current,
                                            const std::vector<IterationUpdate>& read, std::int64_t now_unix_ms);

}  // namespace greyhound::master
