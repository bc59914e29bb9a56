// Cross-process waiting for the CPU stand-ins: futexes on words in shared memory, always with a deadline,
// never spinning (many rank processes share few cores). Shared-memory futexes (not FUTEX_PRIVATE).
#pragma once

#include <atomic>
#include <cstdint>

namespace greyhound::sim {

// Sleeps while *word == expected, at most until deadline_ns (CLOCK_MONOTONIC) or max_slice_ns, whichever
// comes first. Returns on change, wake-up, timeout or signal: callers re-check their condition.
void futex_wait(std::atomic<std::uint32_t>* word, std::uint32_t expected, std::uint64_t deadline_ns,
                std::uint64_t max_slice_ns = 100'000'000ull);
void futex_wake_all(std::atomic<std::uint32_t>* word);

// Increments a doorbell word and wakes its waiters.
inline void ring_doorbell(std::atomic<std::uint32_t>* word) {
  word->fetch_add(1, std::memory_order_acq_rel);
  futex_wake_all(word);
}

}  // namespace greyhound::sim
