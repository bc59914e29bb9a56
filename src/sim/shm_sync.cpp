#include "sim/shm_sync.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <ctime>

#include "sim/sim_process.h"

namespace greyhound::sim {

void futex_wait(std::atomic<std::uint32_t>* word, std::uint32_t expected, std::uint64_t deadline_ns,
                std::uint64_t max_slice_ns) {
  const std::uint64_t now = now_ns();
  if (now >= deadline_ns) return;
  const std::uint64_t slice = std::min(deadline_ns - now, max_slice_ns);
  timespec ts{};
  ts.tv_sec = static_cast<time_t>(slice / 1'000'000'000ull);
  ts.tv_nsec = static_cast<long>(slice % 1'000'000'000ull);
  static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t));
  syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(word), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

void futex_wake_all(std::atomic<std::uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

}  // namespace greyhound::sim
