// The pause gate and the benchmark executor of libgreyhound.so (docs/validation.md, "The pause").
//
// The agent arms a pause in the ring's PauseControl: trap at the first NCCL call of framework iteration K
// (the framework marks its iterations through libgreyhound_job). Every rank of the job traps at that call,
// before it reaches the real NCCL, so every collective and transfer issued before the cut has all of its
// peers' halves issued too: draining the device then completes them, and no rank waits on another while the
// tests run. At the cut the hook drains the device, reports kPauseTrapped and waits; told to run, it runs
// the tests it was given on the rank's own CUDA context and the job's own communicators (GEMM through
// cuBLAS's cublasGemmEx in FP32 and FP16, and in FP8 through cuBLASLt where the device has FP8 tensor cores;
// P2P transfers with ncclSend/ncclRecv in ncclGroupStart/End, each size repeated, timed with CUDA events),
// writes the medians, reports kPauseDone and waits to be resumed.
//
// It never deadlocks and never changes what the job computes:
//  - every wait ends by the request's deadline (capped at kMaxPauseS), so a lost master, agent or Redis
//    resumes the rank by itself;
//  - a rank already past the cut, inside an NCCL group, capturing a CUDA graph, without the CUDA runtime,
//    with a CUDA error of the job pending, not knowing a group it is to test, or unable to get the events and
//    buffer its tests need refuses instead (kPauseRefused), and the master aborts the pause for everyone;
//  - the request is copied and the tests' resources acquired before the rank reports trapped; once told to
//    run, a rank posts every transfer it was given, whatever the timing does;
//  - the tests use buffers of their own and run only once every rank is at the cut (the agent says run
//    only then); they are not recorded in the ring; other threads of the process wait at the gate meanwhile;
//  - errno and the job's CUDA error state are left as they were (a pending error of the job: no pause).
// Residual risk: a rank that resumes at its deadline (or dies) while its peers were told to run leaves
// them waiting in NCCL, as a rank that stops would in the job's own next collective; the master tells
// ranks to run only early in the deadline to keep that window small.
#pragma once

#include <atomic>
#include <cstdint>

#include "greyhound/ring_layout.h"
#include "runtime.h"

namespace greyhound::hook {

inline constexpr double kMaxPauseS = 600.0;   // no pause lasts longer, whatever the request says
inline constexpr std::uint32_t kMaxGemmN = 16384;

// The last pause request this process handled (trapped at, refused, or let pass).
extern std::atomic<std::uint64_t> g_pause_handled;
// A thread of this process is paused (until g_pause_until_ns at the latest): the others wait at the gate.
extern std::atomic<int> g_pause_active;
extern std::atomic<std::uint64_t> g_pause_until_ns;

// Hot path: two relaxed loads. True when a request this process has not handled is armed, or a pause of
// another thread of this process is in progress.
inline bool pause_requested(const RingHeader& h) noexcept {
  const std::uint64_t id = h.pause.id.load(std::memory_order_relaxed);
  return (id != 0 && id != g_pause_handled.load(std::memory_order_relaxed)) ||
         g_pause_active.load(std::memory_order_relaxed) != 0;
}

// Called by an intercepted call (outside the real NCCL, before it) when pause_requested(): traps when this
// call is the cut, and returns once the pause is over. `stream`: the call's stream (nullptr for none);
// `group_end`: the call is ncclGroupEnd (whose wrapper has already left the group: a cut there is inside).
void pause_gate(Runtime& rt, void* stream, bool group_end) noexcept __attribute__((noinline));

}  // namespace greyhound::hook
