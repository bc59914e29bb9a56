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

// True when `u` says nothing of the job's pace at wall time `now_unix_ms`: no reading, or its iteration ended
// more than max(2 s, 4 of its iterations) before.
bool pace_stale(const std::optional<IterationUpdate>& u, std::int64_t now_unix_ms);

// The ranks one search reads: at most `max` of the job's `ranks` (sorted), evenly spread so that they fall on
// different nodes when ranks fill nodes in order, the first rank always among them, `current` left out.
std::vector<int> pace_candidates(const std::vector<int>& ranks, int current, std::size_t max = kPaceCandidates);

// The reading to pace from among the candidates' `read`: the freshest, when it is not stale at `now_unix_ms`
// and its iteration ended later than the current one's (none: keep the current rank).
std::optional<IterationUpdate> fresher_pace(const std::optional<IterationUpdate>& current,
                                            const std::vector<IterationUpdate>& read, std::int64_t now_unix_ms);

}  // namespace greyhound::master
