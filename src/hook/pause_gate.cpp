#include "pause_gate.h"

#include <nccl.h>
#include <time.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <unistd.h>

#include "cuda_api.h"

namespace greyhound::hook {

std::atomic<std::uint64_t> g_pause_handled{0};
std::atomic<int> g_pause_active{0};
std::atomic<std::uint64_t> g_pause_until_ns{0};

namespace {

// cuBLAS / CUDA constants (ABI values of cublas_api.h and library_types.h).
constexpr int kOpN = 0;               // CUBLAS_OP_N
constexpr int kR32F = 0;              // CUDA_R_32F
constexpr int kR16F = 2;              // CUDA_R_16F
constexpr int kCompute32F = 68;       // CUBLAS_COMPUTE_32F
constexpr int kGemmDefault = -1;      // CUBLAS_GEMM_DEFAULT
constexpr int kOpT = 1;               // CUBLAS_OP_T
constexpr int kR8FE4M3 = 28;          // CUDA_R_8F_E4M3
constexpr int kR16BF = 14;            // CUDA_R_16BF
constexpr unsigned kEventDefault = 0;
constexpr std::size_t kFp8Workspace = 32u << 20;  // what cuBLASLt's Hopper kernels are given in its samples

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
// `fn` always runs (a P2P transfer left out would leave its peer waiting), whatever the timing does.
template <typename Fn>
double timed_ms(const CudaApi& c, void* e0, void* e1, Fn&& fn) {
  const bool started = c.event_record(e0, nullptr) == kCudaSuccess;
  const bool ran = fn();
  if (!started || !ran) return -1;
  if (c.event_record(e1, nullptr) != kCudaSuccess || c.event_synchronize(e1) != kCudaSuccess) return -1;
  float ms = 0;
  if (c.event_elapsed(&ms, e0, e1) != kCudaSuccess || !(ms >= 0)) return -1;
  return ms;
}

// A GEMM's median device time, ms, over `repeats` (1..9) timed runs after one warm-up; < 0 when a run failed
// or the deadline came first (the caller tells which). The rank's own work: nothing starts past the deadline.
template <typename Fn>
double timed_gemm_ms(const CudaApi& c, void* e0, void* e1, int repeats, std::uint64_t deadline_ns, Fn&& gemm) {
  double runs[9];
  bool ok = monotonic_ns() < deadline_ns && timed_ms(c, e0, e1, gemm) >= 0;  // warm-up
  int got = 0;
  for (int i = 0; ok && i < repeats && monotonic_ns() < deadline_ns; ++i) {
    const double ms = timed_ms(c, e0, e1, gemm);
    if (ms < 0) ok = false; else runs[got++] = ms;
  }
  return ok && got == repeats ? median(runs, got) : -1;
}

// The request as the hook runs it: a copy taken at the trap (the agent may rewrite the block once it gave
// up on this pause), with what the tests need acquired before the rank reports trapped, so that no rank
// can fail to take part in a transfer once told to run.
struct Request {
  std::uint64_t id = 0;
  std::uint32_t gemm_n = 0, repeats = 1, n_sizes = 0, n_transfers = 0;
  std::uint64_t sizes[kPauseMaxSizes] = {};
  std::uint64_t max_bytes = 0;
  PauseTransfer transfers[kPauseMaxTransfers] = {};
  void* comms[kPauseMaxTransfers] = {};
  void* e0 = nullptr;
  void* e1 = nullptr;
  void* buf = nullptr;  // the P2P buffer, max_bytes
};

using SendFn = decltype(&ncclSend);
using RecvFn = decltype(&ncclRecv);
using GroupFn = decltype(&ncclGroupStart);
struct NcclP2p {
  SendFn send = nullptr;
  RecvFn recv = nullptr;
  GroupFn start = nullptr, end = nullptr;
  bool ok() const { return send && recv && start && end; }
};
const NcclP2p& nccl_p2p() {
  static const NcclP2p f = [] {
    NcclP2p x;
    x.send = reinterpret_cast<SendFn>(resolve_real("ncclSend", nullptr));
    x.recv = reinterpret_cast<RecvFn>(resolve_real("ncclRecv", nullptr));
    x.start = reinterpret_cast<GroupFn>(resolve_real("ncclGroupStart", nullptr));
    x.end = reinterpret_cast<GroupFn>(resolve_real("ncclGroupEnd", nullptr));
    return x;
  }();
  return f;
}

void release(const CudaApi& c, Request& r) {
  if (r.buf != nullptr) c.free(r.buf);
  if (r.e0 != nullptr) c.event_destroy(r.e0);
  if (r.e1 != nullptr) c.event_destroy(r.e1);
  r.buf = r.e0 = r.e1 = nullptr;
}

// The FP8 GEMM through cuBLASLt, D = A^T B (n x n x n; E4M3 in, BF16 out, FP32 compute: the "TN" layout
// cuBLASLt's FP8 kernels take), on buffers of at least 4 n^2 bytes (A, B, D), after the FP32 and FP16 ones:
// one warm-up and `repeats` timed runs; results and why not into `r` (its status; the caller stamps the id).
// Only on a device of compute capability 8.9 or more (Ada, Hopper and later), where cuBLASLt offers a kernel.
void run_fp8_gemm(const CudaApi& c, void* a, void* b, void* out, std::uint32_t n_asked, int repeats, void* e0,
                  void* e1, std::uint64_t deadline_ns, PauseGemmFp8& r) {
  if (monotonic_ns() >= deadline_ns) {  // nothing set up past the deadline
    r.status = kGemmFp8Skipped;
    return;
  }
  int device = 0, major = 0, minor = 0;
  if (!c.device_query_ok() || c.get_device(&device) != kCudaSuccess ||
      c.device_attribute(&major, cudaDevAttrComputeCapabilityMajor, device) != kCudaSuccess ||
      c.device_attribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != kCudaSuccess) {
    r.status = kGemmFp8NoLibrary;
    return;
  }
  r.compute_capability = major * 10 + minor;
  if (r.compute_capability < 89) {
    r.status = kGemmFp8Unsupported;
    return;
  }
  if (!c.lt_ok()) {
    r.status = kGemmFp8NoLibrary;
    return;
  }
  r.n = n_asked & ~15u;  // FP8 kernels want dimensions and leading dimensions in multiples of 16
  if (r.n == 0) {
    r.status = kGemmFp8NoAlgorithm;  // none for n below 16
    return;
  }
  void* handle = nullptr;
  void* desc = nullptr;
  void* pref = nullptr;
  void* layout[3] = {};  // A, B, C = D
  void* workspace = nullptr;
  std::size_t workspace_bytes = kFp8Workspace;
  if (c.malloc(&workspace, workspace_bytes) != kCudaSuccess) {  // kernels that need none may still be offered
    workspace = nullptr;
    workspace_bytes = 0;
    c.clear_error();
  }
  const std::uint64_t n = r.n;
  const int op_t = kOpT, op_n = kOpN;
  cublasLtMatmulHeuristicResult_t best{};
  int found = 0;
  const bool set_up =
      c.lt_create(&handle) == 0 && c.lt_desc_create(&desc, kCompute32F, kR32F) == 0 &&
      c.lt_desc_set(desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_t, sizeof op_t) == 0 &&
      c.lt_desc_set(desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_n, sizeof op_n) == 0 && c.lt_pref_create(&pref) == 0 &&
      c.lt_pref_set(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes, sizeof workspace_bytes) == 0;
  // A cuBLASLt that does not know FP8 refuses its layouts: no kernel for it, rather than a failure.
  const bool layouts = set_up && c.lt_layout_create(&layout[0], kR8FE4M3, n, n, static_cast<std::int64_t>(n)) == 0 &&
                       c.lt_layout_create(&layout[1], kR8FE4M3, n, n, static_cast<std::int64_t>(n)) == 0 &&
                       c.lt_layout_create(&layout[2], kR16BF, n, n, static_cast<std::int64_t>(n)) == 0;
  if (!set_up) {
    r.status = kGemmFp8Failed;
  } else if (!layouts) {
    r.status = kGemmFp8NoAlgorithm;
  } else if (c.lt_heuristic(handle, desc, layout[0], layout[1], layout[2], layout[2], pref, 1, &best, &found) != 0 ||
             found < 1) {
    r.status = kGemmFp8NoAlgorithm;
  } else {
    const float one = 1.0f, zero = 0.0f;
    const auto gemm = [&] {
      return c.lt_matmul(handle, desc, &one, a, layout[0], b, layout[1], &zero, out, layout[2], out, layout[2],
                         &best.algo, workspace, workspace_bytes, nullptr) == 0;
    };
    const double ms = timed_gemm_ms(c, e0, e1, repeats, deadline_ns, gemm);
    if (ms >= 0) {
      r.ms = ms;
      r.tflops = r.ms > 0 ? 2.0 * static_cast<double>(n) * n * n / (r.ms * 1e-3) / 1e12 : 0;
      r.status = kGemmFp8Done;
    } else {
      r.status = monotonic_ns() < deadline_ns ? kGemmFp8Failed : kGemmFp8Skipped;
    }
  }
  if (pref != nullptr) c.lt_pref_destroy(pref);
  for (void* l : layout) {
    if (l != nullptr) c.lt_layout_destroy(l);
  }
  if (desc != nullptr) c.lt_desc_destroy(desc);
  if (handle != nullptr) c.lt_destroy(handle);
  if (workspace != nullptr) c.free(workspace);
  c.clear_error();
}

// The BenchmarkExecutor: the tests of `req`, results into `pc`. GEMM buffers it allocates and frees.
void run_tests(const Request& req, PauseControl& pc, std::uint64_t deadline_ns) {
  const CudaApi& c = cuda_api();
  const int repeats = static_cast<int>(std::clamp<std::uint32_t>(req.repeats, 1, 9));
  void* e0 = req.e0;
  void* e1 = req.e1;
  double runs[9];

  // P2P transfers first, in the order given (every rank follows the same global order, so no two wait on
  // each other), each size `repeats` times. All of them run, whatever the clock or the timing says: a rank
  // that left one out would leave its peer waiting in NCCL.
  const NcclP2p& f = nccl_p2p();
  for (std::uint32_t i = 0; i < req.n_transfers; ++i) {
    const PauseTransfer& t = req.transfers[i];
    auto* comm = static_cast<ncclComm_t>(req.comms[i]);
    for (std::uint32_t s = 0; s < req.n_sizes; ++s) {
      const std::size_t count = req.sizes[s];
      const auto p2p = [&] {
        t_in_hook = true;
        const bool started = f.start() == ncclSuccess;
        const bool posted = (t.send != 0 ? f.send(req.buf, count, ncclInt8, t.peer, comm, nullptr)
                                         : f.recv(req.buf, count, ncclInt8, t.peer, comm, nullptr)) == ncclSuccess;
        const bool ended = f.end() == ncclSuccess;
        t_in_hook = false;
        return started && posted && ended;
      };
      int got = 0;
      for (int r = 0; r < repeats; ++r) {
        const double ms = timed_ms(c, e0, e1, p2p);
        if (ms >= 0) runs[got++] = ms;
      }
      // Every repeat must have been timed, or the size is reported as not run (0).
      pc.transfers[i].ms[s] = got == repeats ? median(runs, got) : 0;
    }
  }

  // GEMM, FP32 then FP16: C = A B, n x n x n, one warm-up, then `repeats` timed runs. The rank's own work:
  // past the deadline, the GEMMs left are skipped.
  pc.gemm_ms[0] = pc.gemm_ms[1] = 0;
  pc.gemm_tflops[0] = pc.gemm_tflops[1] = 0;
  PauseGemmFp8 fp8{};  // kGemmFp8NotRun
  const std::uint32_t n = std::min(req.gemm_n, kMaxGemmN);
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
        const double ms = timed_gemm_ms(c, e0, e1, repeats, deadline_ns, gemm);
        if (ms >= 0) {
          pc.gemm_ms[t] = ms;
          if (pc.gemm_ms[t] > 0) pc.gemm_tflops[t] = 2.0 * N * N * N / (pc.gemm_ms[t] * 1e-3) / 1e12;
        } else if (monotonic_ns() < deadline_ns) {
          log_line(LogLevel::kWarn, "pause: the %s GEMM failed", t == 0 ? "FP32" : "FP16");
        }
      }
      c.clear_error();
      run_fp8_gemm(c, a, b, out, n, repeats, e0, e1, deadline_ns, fp8);
      if (fp8.status == kGemmFp8Failed || (fp8.status == kGemmFp8NoAlgorithm && fp8.n > 0)) {
        log_line(LogLevel::kWarn, "pause: the FP8 GEMM %s (n %u, compute capability %d)",
                 fp8.status == kGemmFp8Failed ? "failed" : "has no cuBLASLt kernel", fp8.n, fp8.compute_capability);
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
  fp8.id = req.id;  // written before the state says done (release), as the other results
  pause_fp8_of(pc) = fp8;
}

// A pre-flight check with fail-on-slow found the job's hardware slow: the process ends here, at the cut (every
// rank of the job is told at once, each at the same point), with kPauseExitStatus, so that the scheduler can
// replace the node before training goes on. _exit, not exit: the job's atexit handlers would tear down
// communicators whose peers are gone, and may hang; what it has written to stdio is flushed first.
[[noreturn]] void exit_on_verdict(const CudaApi& c, Request& req, std::uint64_t id) {
  release(c, req);
  log_line(LogLevel::kError,
           "pause %llu: greyhound's pre-flight check found this job's GPUs or links slow (greyhoundctl preflight "
           "and the master's 'preflight' event name them); exiting with status %d (--fail-on-slow) so that the "
           "scheduler can replace the node",
           static_cast<unsigned long long>(id), kPauseExitStatus);
  mark_exited(kPauseExitStatus, nullptr);
  std::fflush(nullptr);
  _exit(kPauseExitStatus);
}

}  // namespace

void pause_gate(Runtime& rt, void* stream, bool group_end) noexcept {
  const int saved_errno = errno;
  RingHeader& h = *rt.ring->header();
  PauseControl& pc = h.pause;
  // Another thread of this process is paused: this one waits too (its NCCL calls would mix with the tests
  // on the same communicators), until that pause ends.
  if (g_pause_active.load(std::memory_order_acquire) != 0) {
    const std::uint64_t until = g_pause_until_ns.load(std::memory_order_relaxed);
    while (g_pause_active.load(std::memory_order_acquire) != 0 && monotonic_ns() < until) sleep_ms(1);
    errno = saved_errno;
    return;
  }
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
  const CudaApi& c = cuda_api();
  Request req;
  const auto refuse = [&](std::uint32_t why, const char* what) {
    release(c, req);
    set_state(pc, id, kPauseRefused, why);
    log_line(LogLevel::kWarn, "pause %llu refused: %s", static_cast<unsigned long long>(id), what);
    errno = saved_errno;
  };
  if (mark > at + 1 || h.write_index.load(std::memory_order_acquire) != pc.mark_seq.load(std::memory_order_acquire)) {
    return refuse(kPauseWhyPast, "this rank is past the cut");
  }
  // ncclGroupEnd has left the group by the time its wrapper gets here: a cut at it is inside the group.
  if (t_group_depth > 0 || group_end) return refuse(kPauseWhyInGroup, "the cut is inside an NCCL group");
  if (!c.pause_ok()) return refuse(kPauseWhyNoCuda, "no CUDA runtime in this process");
  // The job's own CUDA error, if one is pending, stays the job's to find: no pause then.
  if (c.peek_last_error != nullptr && c.peek_last_error() != kCudaSuccess) {
    return refuse(kPauseWhyCudaError, "a CUDA error of the job is pending");
  }
  if (c.stream_is_capturing != nullptr) {
    int capture = 0;
    const int rc = c.stream_is_capturing(stream, &capture);
    if (rc != kCudaSuccess || capture != 0) {  // an error here: a capture elsewhere forbids the query
      if (rc != kCudaSuccess) c.clear_error();  // ours (none of the job's was pending)
      return refuse(kPauseWhyCapturing, "the stream is capturing a CUDA graph");
    }
  }
  // The request, copied; its communicators; what the tests need, acquired now.
  req.id = id;
  req.gemm_n = pc.gemm_n;
  req.repeats = pc.repeats;
  req.n_sizes = std::min<std::uint32_t>(pc.n_sizes, kPauseMaxSizes);
  req.n_transfers = std::min<std::uint32_t>(pc.n_transfers, kPauseMaxTransfers);
  for (std::uint32_t i = 0; i < req.n_sizes; ++i) {
    req.sizes[i] = pc.sizes[i];
    req.max_bytes = std::max(req.max_bytes, req.sizes[i]);
  }
  for (std::uint32_t i = 0; i < req.n_transfers; ++i) {
    req.transfers[i] = pc.transfers[i];
    req.comms[i] = rt.groups.comm_of(req.transfers[i].group_id);
    if (req.comms[i] == nullptr) return refuse(kPauseWhyNoGroup, "a group to test is not one of this rank's communicators");
  }
  if (req.n_transfers > 0 && (req.max_bytes == 0 || !nccl_p2p().ok())) {
    return refuse(kPauseWhyNoGroup, "no sizes to send, or NCCL's send/recv are not in this process");
  }
  if (c.event_create(&req.e0, kEventDefault) != kCudaSuccess || c.event_create(&req.e1, kEventDefault) != kCudaSuccess) {
    c.clear_error();
    return refuse(kPauseWhyNoMemory, "cannot create CUDA events");
  }
  if (req.n_transfers > 0) {
    if (c.malloc(&req.buf, req.max_bytes) != kCudaSuccess) {
      req.buf = nullptr;
      c.clear_error();
      return refuse(kPauseWhyNoMemory, "cannot allocate the P2P buffer");
    }
    c.memset(req.buf, 0, req.max_bytes);
  }

  // At the cut: drain, report, wait.
  const std::uint64_t t_drain = monotonic_ns();
  if (c.device_synchronize() != kCudaSuccess) {
    // An error of the job's own work: left for the job to find (not cleared); no pause.
    release(c, req);
    set_state(pc, id, kPauseRefused, kPauseWhyCudaError);
    log_line(LogLevel::kWarn, "pause %llu refused: the job's device work failed", static_cast<unsigned long long>(id));
    errno = saved_errno;
    return;
  }
  const std::uint64_t trapped = monotonic_ns();
  pc.drain_ms = static_cast<double>(trapped - t_drain) * 1e-6;
  pc.trapped_ns = trapped;
  const std::uint64_t cap = trapped + static_cast<std::uint64_t>(kMaxPauseS * 1e9);
  const std::uint64_t deadline = std::clamp<std::uint64_t>(pc.deadline_ns, trapped + 1'000'000'000ull, cap);
  g_pause_until_ns.store(deadline, std::memory_order_relaxed);
  g_pause_active.store(1, std::memory_order_release);
  set_state(pc, id, kPauseTrapped, kPauseWhyNone);
  log_line(LogLevel::kInfo, "pause %llu: trapped at iteration %llu", static_cast<unsigned long long>(id),
           static_cast<unsigned long long>(at));

  std::uint32_t got = wait_for(pc, id, (1u << kPauseCmdRun) | (1u << kPauseCmdResume) | (1u << kPauseCmdAbort), deadline);
  if (got == kPauseCmdRun) {
    set_state(pc, id, kPauseRunning, kPauseWhyNone);
    run_tests(req, pc, deadline);
    set_state(pc, id, kPauseDone, kPauseWhyNone);
    got = wait_for(pc, id, (1u << kPauseCmdResume) | (1u << kPauseCmdAbort) | (1u << kPauseCmdExit), deadline);
  }
  if (got == kPauseCmdExit) exit_on_verdict(c, req, id);
  release(c, req);
  c.clear_error();  // ours: none of the job's was pending at the trap, and its work had completed
  const std::uint32_t why = got == kPauseCmdResume ? kPauseWhyTold : got == kPauseCmdAbort ? kPauseWhyAborted
                                                                                          : kPauseWhyDeadline;
  pc.resumed_ns = monotonic_ns();
  set_state(pc, id, kPauseResumed, why);
  g_pause_active.store(0, std::memory_order_release);
  // One line per pause in the job's log, at the default level: the rank stood still this long.
  log_line(LogLevel::kWarn, "pause %llu: resumed after %.1f ms (%s)",
           static_cast<unsigned long long>(id), static_cast<double>(pc.resumed_ns - trapped) * 1e-6,
           why == kPauseWhyTold ? "told" : why == kPauseWhyAborted ? "aborted" : "deadline");
  errno = saved_errno;
}

}  // namespace greyhound::hook
