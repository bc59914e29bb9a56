// The modeled clock of a simulated rank process, shared by the three stand-in libraries (each links this
// one small library, so they advance one clock). Modeled time runs ahead of nothing: every modeled
// operation ends by sleeping until its modeled end. When the process falls behind (descheduled by other
// processes or by the hypervisor), modeled time keeps its own pace for up to `slack` before it snaps to the
// real clock: short scheduling delays are absorbed instead of showing up as slow iterations, while real
// slowness (long stalls, unmodeled work) still does.
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <ctime>

namespace {

std::atomic<std::uint64_t> g_vt{0};

std::uint64_t real_now() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<std::uint64_t>(ts.tv_nsec);
}

void advance_to(std::uint64_t t) {
  std::uint64_t v = g_vt.load(std::memory_order_relaxed);
  while (v < t && !g_vt.compare_exchange_weak(v, t, std::memory_order_relaxed)) {
  }
}

}  // namespace

extern "C" __attribute__((visibility("default"))) std::uint64_t greyhound_sim_vclock_now(std::uint64_t slack_ns) {
  const std::uint64_t real = real_now();
  // The first use starts the modeled clock at the real one; from then on it may lag by up to the slack.
  advance_to(g_vt.load(std::memory_order_relaxed) == 0 ? real : (real > slack_ns ? real - slack_ns : 0));
  return g_vt.load(std::memory_order_relaxed);
}

extern "C" __attribute__((visibility("default"))) void greyhound_sim_vclock_wait(std::uint64_t t) {
  advance_to(t);
  timespec ts{};
  ts.tv_sec = static_cast<time_t>(t / 1'000'000'000ull);
  ts.tv_nsec = static_cast<long>(t % 1'000'000'000ull);
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
  }
}
