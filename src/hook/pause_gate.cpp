#include "pause_gate.h"

#include <nccl.h>
#include <time.h>

#include <algorithm>
#include <cerrno>

#include "cuda_api.h"

namespace greyhound::hook {

std::atomic<std::uint64_t> g_pause_handled{0};

namespace {

// cuBLAS / CUDA constants (ABI values of cublas_api.h and library_types.h).
constexpr int kOpN = 0;               // CUBLAS_OP_N
constexpr int kR32F = 0;              // CUDA_R_32F
constexpr int kR16F = 2;              // CUDA_R_16F
constexpr int kCompute32F = 68;       // CUBLAS_COMPUTE_32F
constexpr int kGemmDefault = -1;      // CUBLAS_GEMM_DEFAULT
constexpr unsigned kEventDefault = 0;

void sleep_ms(int ms) {
  timespec ts{0, ms * 1'000'000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

void set_state(PauseControl& pc, std::uint64_t id, std::uint32_t state, std::uint32_t reason) {
  pc.reason = reason;
  pc.state_id.store(id, std::memory_order_relaxed);
  pc.state.store(state, std::memory_order_release);
}

double median(double* v, int n) {
  std::sort(v, v + n);
  return n == 0 ? 0.0 : (n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]));
}

// Waits for one of `wanted` commands (a bit set of kPauseCmd*), the request to change, or the deadline.
// Returns the command seen, or 0 at the deadline, or kPauseCmdAbort when the request changed.
std::uint32_t wait_for(PauseControl& pc, std::uint64_t id, unsigned wanted, std::uint64_t deadline_ns) {
  for (;;) {
    if (pc.id.load(std::memory_order_acquire) != id) return kPauseCmdAbort;
    const std::uint32_t cmd = pc.command.load(std::memory_order_acquire);
    if (cmd < 32 && ((1u << cmd) & wanted) != 0) return cmd;
    if (monotonic_ns() >= deadline_ns) return 0;
    sleep_ms(1);
  }
}

// Device time of `fn` (enqueued on the default stream between two events), ms; < 0 when it failed.
template <typename Fn>
double timed_ms(const CudaApi& c, void* e0, void* e1, Fn&& fn) {
  if (c.event_record(e0, nullptr) != kCudaSuccess) return -1;
  if (!fn()) return -1;
  if (c.event_record(e1, nullptr) != kCudaSuccess || c.event_synchronize(e1) != kCudaSuccess) return -1;
  float ms = 0;
  if (c.event_elapsed(&ms, e0, e1) != kCudaSuccess || !(ms >= 0)) return -1;
  return ms;
}

// The BenchmarkExecutor: the tests of the request, results into `pc`. Everything it allocates it frees.
void run_tests(Runtime& rt, PauseControl& pc, void* const* comms, std::uint64_t deadline_ns) {
  const CudaApi& c = cuda_api();
  const int repeats = static_cast<int>(std::clamp<std::uint32_t>(pc.repeats, 1, 9));
  void* e0 = nullptr;
  void* e1 = nullptr;
  if (c.event_create(&e0, kEventDefault) != kCudaSuccess || c.event_create(&e1, kEventDefault) != kCudaSuccess) {
    c.clear_error();
    log_line(LogLevel::kWarn, "pause: cannot create CUDA events; no test run");
    if (e0 != nullptr) c.event_destroy(e0);
    return;
  }
  double runs[9];

  // P2P transfers first, in the order given (every rank follows the same global order, so no two wait on
  // each other), each size `repeats` times. They start together (the run command comes well before any
  // rank's deadline) and all of them run, whatever the clock says: a rank that left one out would leave its
  // peer waiting in NCCL.
  const std::uint32_t nt = std::min<std::uint32_t>(pc.n_transfers, kPauseMaxTransfers);
  const std::uint32_t ns = std::min<std::uint32_t>(pc.n_sizes, kPauseMaxSizes);
  std::uint64_t max_bytes = 0;
  for (std::uint32_t s = 0; s < ns; ++s) max_bytes = std::max(max_bytes, pc.sizes[s]);
  for (std::uint32_t i = 0; i < nt; ++i) {
    for (double& ms : pc.transfers[i].ms) ms = 0;
  }
  if (nt > 0 && max_bytes > 0) {
    static const auto send = reinterpret_cast<decltype(&ncclSend)>(resolve_real("ncclSend", nullptr));
    static const auto recv = reinterpret_cast<decltype(&ncclRecv)>(resolve_real("ncclRecv", nullptr));
    static const auto gstart = reinterpret_cast<decltype(&ncclGroupStart)>(resolve_real("ncclGroupStart", nullptr));
    static const auto gend = reinterpret_cast<decltype(&ncclGroupEnd)>(resolve_real("ncclGroupEnd", nullptr));
    void* buf = nullptr;
    if (send && recv && gstart && gend && c.malloc(&buf, max_bytes) == kCudaSuccess) {
      c.memset(buf, 0, max_bytes);
      for (std::uint32_t i = 0; i < nt; ++i) {
        PauseTransfer& t = pc.transfers[i];
        auto* comm = static_cast<ncclComm_t>(comms[i]);
        for (std::uint32_t s = 0; s < ns; ++s) {
          const std::size_t count = pc.sizes[s];
          const auto p2p = [&] {
            t_in_hook = true;
            bool ok = gstart() == ncclSuccess;
            ok = ok && (t.send != 0 ? send(buf, count, ncclInt8, t.peer, comm, nullptr)
                                    : recv(buf, count, ncclInt8, t.peer, comm, nullptr)) == ncclSuccess;
            ok = (gend() == ncclSuccess) && ok;
            t_in_hook = false;
            return ok;
          };
          int got = 0;
          for (int r = 0; r < repeats; ++r) {
            const double ms = timed_ms(c, e0, e1, p2p);
            if (ms >= 0) runs[got++] = ms;
          }
          t.ms[s] = got > 0 ? median(runs, got) : 0;
        }
      }
      c.free(buf);
    } else {
      log_line(LogLevel::kWarn, "pause: no P2P test (NCCL functions missing or cannot allocate %llu bytes)",
               static_cast<unsigned long long>(max_bytes));
    }
  }
  // GEMM, FP32 then FP16: C = A B, n x n x n, one warm-up, then `repeats` timed runs.
  pc.gemm_ms[0] = pc.gemm_ms[1] = 0;
  pc.gemm_tflops[0] = pc.gemm_tflops[1] = 0;
  const std::uint32_t n = std::min(pc.gemm_n, kMaxGemmN);
  if (n > 0 && c.blas_ok()) {
    const std::size_t bytes = static_cast<std::size_t>(n) * n * 4;
    void* a = nullptr;
    void* b = nullptr;
    void* out = nullptr;
    void* handle = nullptr;
    if (c.malloc(&a, bytes) == kCudaSuccess && c.malloc(&b, bytes) == kCudaSuccess &&
        c.malloc(&out, bytes) == kCudaSuccess && c.blas_create(&handle) == 0 &&
        c.blas_set_stream(handle, nullptr) == 0) {
      c.memset(a, 0x3c, bytes);  // small non-zero values in both types
      c.memset(b, 0x3c, bytes);
      const float one = 1.0f, zero = 0.0f;
      const int N = static_cast<int>(n);
      const int types[kPauseGemmTypes] = {kR32F, kR16F};
      for (int t = 0; t < kPauseGemmTypes; ++t) {
        const auto gemm = [&] {
          return c.gemm_ex(handle, kOpN, kOpN, N, N, N, &one, a, types[t], N, b, types[t], N, &zero, out, types[t], N,
                           kCompute32F, kGemmDefault) == 0;
        };
        // GEMMs are the rank's own: past the deadline, the ones left are skipped.
        bool ok = monotonic_ns() < deadline_ns && timed_ms(c, e0, e1, gemm) >= 0;  // warm-up
        int got = 0;
        for (int r = 0; ok && r < repeats && monotonic_ns() < deadline_ns; ++r) {
          const double ms = timed_ms(c, e0, e1, gemm);
          if (ms < 0) ok = false; else runs[got++] = ms;
        }
        if (ok && got > 0) {
          pc.gemm_ms[t] = median(runs, got);
          if (pc.gemm_ms[t] > 0) pc.gemm_tflops[t] = 2.0 * N * N * N / (pc.gemm_ms[t] * 1e-3) / 1e12;
        } else if (monotonic_ns() < deadline_ns) {
          log_line(LogLevel::kWarn, "pause: the %s GEMM failed", t == 0 ? "FP32" : "FP16");
        }
      }
    } else {
      log_line(LogLevel::kWarn, "pause: no GEMM (cannot allocate %zu bytes three times or create a cuBLAS handle)",
               bytes);
    }
    c.clear_error();
    if (handle != nullptr) c.blas_destroy(handle);
    for (void* p : {a, b, out}) {
      if (p != nullptr) c.free(p);
    }
  } else if (n > 0) {
    log_line(LogLevel::kWarn, "pause: no GEMM (cuBLAS is not loaded in this process)");
  }

  c.clear_error();
  c.event_destroy(e0);
  c.event_destroy(e1);
  (void)rt;
}

}  // namespace

void pause_gate(Runtime& rt, void* stream) noexcept {
  const int saved_errno = errno;
  RingHeader& h = *rt.ring->header();
  PauseControl& pc = h.pause;
  std::uint64_t handled = g_pause_handled.load(std::memory_order_acquire);
  const std::uint64_t id = pc.id.load(std::memory_order_acquire);
  if (id == 0 || id == handled) {
    errno = saved_errno;
    return;
  }
  const std::uint64_t now = monotonic_ns();
  const std::uint32_t cmd = pc.command.load(std::memory_order_acquire);
  const std::uint64_t mark = pc.iteration_mark.load(std::memory_order_acquire);
  const std::uint64_t at = pc.at_iteration;
  const bool over = cmd == kPauseCmdAbort || cmd == kPauseCmdResume || now >= pc.deadline_ns;
  if (!over && (mark == 0 || mark < at + 1)) {  // the cut is ahead
    errno = saved_errno;
    return;
  }
  if (!g_pause_handled.compare_exchange_strong(handled, id, std::memory_order_acq_rel)) {
    errno = saved_errno;  // another thread of this process took it
    return;
  }
  if (over) {  // a request that ended before this rank reached the cut
    errno = saved_errno;
    return;
  }
  const auto refuse = [&](std::uint32_t why, const char* what) {
    set_state(pc, id, kPauseRefused, why);
    log_line(LogLevel::kWarn, "pause %llu refused: %s", static_cast<unsigned long long>(id), what);
    errno = saved_errno;
  };
  if (mark > at + 1 || h.write_index.load(std::memory_order_acquire) != pc.mark_seq.load(std::memory_order_acquire)) {
    return refuse(kPauseWhyPast, "this rank is past the cut");
  }
  if (t_group_depth > 0) return refuse(kPauseWhyInGroup, "the cut is inside an NCCL group");
  const CudaApi& c = cuda_api();
  if (!c.pause_ok()) return refuse(kPauseWhyNoCuda, "no CUDA runtime in this process");
  if (c.stream_is_capturing != nullptr) {
    int capture = 0;
    if (c.stream_is_capturing(stream, &capture) == kCudaSuccess && capture != 0) {
      return refuse(kPauseWhyCapturing, "the stream is capturing a CUDA graph");
    }
    c.clear_error();
  }
  const std::uint32_t nt = std::min<std::uint32_t>(pc.n_transfers, kPauseMaxTransfers);
  void* comms[kPauseMaxTransfers] = {};
  for (std::uint32_t i = 0; i < nt; ++i) {
    comms[i] = rt.groups.comm_of(pc.transfers[i].group_id);
    if (comms[i] == nullptr) return refuse(kPauseWhyNoGroup, "a group to test is not one of this rank's communicators");
  }

  // At the cut: drain, report, wait.
  const std::uint64_t t_drain = monotonic_ns();
  c.device_synchronize();
  c.clear_error();
  const std::uint64_t trapped = monotonic_ns();
  pc.drain_ms = static_cast<double>(trapped - t_drain) * 1e-6;
  pc.trapped_ns = trapped;
  const std::uint64_t cap = trapped + static_cast<std::uint64_t>(kMaxPauseS * 1e9);
  const std::uint64_t deadline = std::clamp<std::uint64_t>(pc.deadline_ns, trapped + 1'000'000'000ull, cap);
  set_state(pc, id, kPauseTrapped, kPauseWhyNone);
  log_line(LogLevel::kInfo, "pause %llu: trapped at iteration %llu", static_cast<unsigned long long>(id),
           static_cast<unsigned long long>(at));

  std::uint32_t got = wait_for(pc, id, (1u << kPauseCmdRun) | (1u << kPauseCmdResume) | (1u << kPauseCmdAbort), deadline);
  if (got == kPauseCmdRun) {
    set_state(pc, id, kPauseRunning, kPauseWhyNone);
    run_tests(rt, pc, comms, deadline);
    set_state(pc, id, kPauseDone, kPauseWhyNone);
    got = wait_for(pc, id, (1u << kPauseCmdResume) | (1u << kPauseCmdAbort), deadline);
  }
  const std::uint32_t why = got == kPauseCmdResume ? kPauseWhyTold : got == kPauseCmdAbort ? kPauseWhyAborted
                                                                                          : kPauseWhyDeadline;
  pc.resumed_ns = monotonic_ns();
  set_state(pc, id, kPauseResumed, why);
  // One line per pause in the job's log, at the default level: the rank stood still this long.
  log_line(LogLevel::kWarn, "pause %llu: resumed after %.1f ms (%s)",
           static_cast<unsigned long long>(id), static_cast<double>(pc.resumed_ns - trapped) * 1e-6,
           why == kPauseWhyTold ? "told" : why == kPauseWhyAborted ? "aborted" : "deadline");
  errno = saved_errno;
}

}  // namespace greyhound::hook
