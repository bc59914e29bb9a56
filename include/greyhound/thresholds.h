// The thresholds that several parts of greyhound must agree on, each defined once. Pure, std only.
// Each names one quantity; two that happen to share a value but mean different things are kept apart, so
// that tuning one does not silently move the other.
#pragma once

namespace greyhound {

// The paper's significance of a change in iteration time: a shift of less than 10 % (relative) is ordinary
// jitter (GC, allocator misses, uneven sequences). It decides when a changepoint is a slowdown or recovery
// (changepoint validation, the sliding-window baseline), when a report makes an incident more severe or
// leaves it partially recovered (incident tracker), and when a remedy holds the iteration "fixed", close
// enough to healthy (ski rental).
inline constexpr double kSignificantChange = 0.10;
// The same threshold as a ratio of two iteration times: new / old >= kSignificantRatio is significant.
inline constexpr double kSignificantRatio = 1.0 + kSignificantChange;
static_assert(kSignificantRatio == 1.10, "1 + 0.10 must be the double 1.10 the ratio tests compare against");

// Peer comparison: a part whose time exceeds the median of its comparable peers by more than 10 % is slow
// (a communication group among the groups that move the same data: comparable clusters; a DP replica among
// the replicas, per micro-batch: the planner's "fail-slow still there").
inline constexpr double kPeerExcess = 0.10;
inline constexpr double kPeerExcessRatio = 1.0 + kPeerExcess;
static_assert(kPeerExcessRatio == 1.10);

// Validation's P2P test: a transfer slower than the median of the transfers over links of its class
// (intra-node, inter-node) by more than 50 % is over a slow link. Links of one class differ by more than
// GPUs do (routes, NIC placement), and a congestion worth acting on costs far more than that.
inline constexpr double kSlowLinkExcess = 0.50;

}  // namespace greyhound
