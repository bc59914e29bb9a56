// Device timing of NCCL calls while the agent asks for it (RingControl.profile_flags & kProfileDevice): a
// pair of CUDA events around each call on its stream, read back later with cudaEventQuery (never a
// blocking synchronisation on the training thread), and reported as Timing records (ring_layout.h).
//
// The CUDA runtime is reached through dlsym at first use (cuda_api.h), never linked: in a process without
// it, profiling reports kProfileStatusUnavailable and costs nothing. Each thread has its own fixed pool of
// event pairs, created on the first profiled call (the only allocation, and only while profiling); when the
// pool is exhausted, calls go untimed and are counted in RingControl.timings_dropped.
#pragma once

#include <cstdint>

#include "greyhound/ring.h"
#include "runtime.h"

namespace greyhound::hook {

// Timings this thread still waits for (so that they are collected after profiling was switched off).
extern GH_TLS int t_timings_pending;

class GpuTimer {
 public:
  static constexpr int kPairs = 128;

  // The calling thread's timer; nullptr when the CUDA runtime is not in the process.
  static GpuTimer* for_this_thread();

  // Records the start event on `stream`; returns the pair index, or -1 (no free pair: counted).
  int begin(void* stream, RingControl& control);
  // Records the end event of `pair` on `stream` and queues it with the record it measures.
  void end(int pair, void* stream, const RecordPayload& measured);
  // Appends a Timing record for every queued pair whose end event has completed, oldest first.
  void poll(RingWriter& ring);
  static bool pending_in_this_thread() noexcept { return t_timings_pending != 0; }
  // After fork, in the child: the parent's events belong to its CUDA context; start afresh.
  static void forget_after_fork() noexcept;

 private:
  GpuTimer() = default;
  bool create_events();

  void* start_[kPairs] = {};
  void* end_[kPairs] = {};
  bool created_ = false;
  bool failed_ = false;
  int free_[kPairs] = {};
  int free_count_ = 0;
  struct Pending {
    int pair;
    RecordPayload measured;
  };
  Pending pending_[kPairs];
  int head_ = 0;   // oldest pending
  int count_ = 0;  // pending in flight
};

}  // namespace greyhound::hook
