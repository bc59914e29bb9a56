// Reading the system clocks, for the daemons and the ring's creation stamps (the hook's hot path has its
// own vDSO read in src/hook/runtime.h).
#pragma once

#include <cstdint>
#include <ctime>

namespace greyhound {

// `id`'s time in nanoseconds (CLOCK_MONOTONIC, CLOCK_REALTIME, ...).
inline std::uint64_t clock_ns(clockid_t id) {
  timespec ts{};
  clock_gettime(id, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<std::uint64_t>(ts.tv_nsec);
}

// The steady clock in seconds (CLOCK_MONOTONIC: any origin, never goes back), for timers and throttles.
inline double steady_s() { return static_cast<double>(clock_ns(CLOCK_MONOTONIC)) * 1e-9; }

}  // namespace greyhound
