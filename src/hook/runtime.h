// Process-wide state of libgreyhound.so: initialisation (lazy, at the first NCCL call), the ring writer,
// the communicator table, logging, fork handling, and the resolution of the real NCCL functions.
//
// Thread-safety: every function here may be called from any thread. The hot path reads `mode` (acquire),
// the ring pointer and the group table, and touches thread-locals; it never locks or allocates.
#pragma once

#include <atomic>
#include <cstdint>

#include "greyhound/config.h"
#include "greyhound/ring.h"
#include "group_table.h"

namespace greyhound::hook {

enum Mode : int {
  kUninit = 0,       // no NCCL call seen yet
  kInitialising = 1, // one thread is creating the ring; others pass through meanwhile
  kRecording = 2,
  kPassThrough = 3,  // GREYHOUND_DISABLE=1, or the ring could not be made: forward only
};

struct Runtime {
  std::atomic<int> mode{kUninit};
  RingWriter* ring = nullptr;  // valid when mode == kRecording
  LogLevel log_level = LogLevel::kWarn;
  GroupTable groups;
};

extern Runtime g_runtime;
inline Runtime& runtime() noexcept { return g_runtime; }

// Called by every wrapper before doing anything else; cheap after the first call. Preserves errno.
// Returns the mode to act on.
int ensure_init() noexcept;
// The ring says this process ended with `status` (registered with on_exit; also called before an _exit of
// the hook's own, a pre-flight's exit).
void mark_exited(int status, void*);

// Per-thread state. initial-exec TLS: no allocation or lock on first access from a preloaded library.
#define GH_TLS __thread __attribute__((tls_model("initial-exec")))
extern GH_TLS bool t_in_hook;     // re-entrancy guard: set while the real NCCL runs
extern GH_TLS int t_group_depth;  // ncclGroupStart nesting of this thread
extern GH_TLS std::uint32_t t_tid;

std::uint32_t fetch_tid() noexcept;  // the gettid system call, once per thread
inline std::uint32_t current_tid() noexcept { return t_tid != 0 ? t_tid : fetch_tid(); }

// One line to stderr, "greyhound[pid]: ...", if `level` passes GREYHOUND_LOG_LEVEL. Allocation-free.
void log_line(LogLevel level, const char* fmt, ...) noexcept __attribute__((format(printf, 2, 3)));

// dlsym(RTLD_NEXT, name), refusing our own definitions, else the same name in a loaded libnccl.so*
// (resolve_in_loaded); logs once per missing name. nullptr if absent.
void* resolve_real(const char* name, void* self) noexcept;

// `name` looked up in each loaded library whose file name begins with `prefix` ("libnccl.so",
// "libcudart.so"), not `self`; nullptr if none has it. This reaches a library that was loaded with
// RTLD_LOCAL, which the global scope searched by dlsym(RTLD_NEXT) and dlsym(RTLD_DEFAULT) does not hold:
// Python loads extension modules so, and with them what they link (torch's NCCL, CUDA runtime and cuBLAS),
// while the job's calls into them still reach the preloaded hook first. The library is held open (never
// unloaded under a pointer we keep).
void* resolve_in_loaded(const char* name, const char* prefix, void* self) noexcept;

inline std::uint64_t monotonic_ns() noexcept {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<std::uint64_t>(ts.tv_nsec);
}

}  // namespace greyhound::hook
