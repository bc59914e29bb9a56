#include "gpu_timer.h"

#include <dlfcn.h>

#include <atomic>
#include <cerrno>
#include <cmath>

#include "greyhound/ops.h"
#include "cuda_api.h"
#include "runtime.h"

namespace greyhound::hook {
namespace {

const CudaApi& cuda() { return cuda_api(); }

constexpr unsigned kCudaEventDefault = 0;  // timing enabled

GH_TLS GpuTimer* t_timer = nullptr;

}  // namespace

GH_TLS int t_timings_pending = 0;

GpuTimer* GpuTimer::for_this_thread() {
  if (t_timer == nullptr && cuda().events_ok()) t_timer = new GpuTimer();  // lives for the thread; only when profiling
  return t_timer;
}

bool GpuTimer::create_events() {
  if (created_ || failed_) return created_;
  const CudaApi& c = cuda();
  for (int i = 0; i < kPairs; ++i) {
    if (c.event_create(&start_[i], kCudaEventDefault) != kCudaSuccess ||
        c.event_create(&end_[i], kCudaEventDefault) != kCudaSuccess) {
      failed_ = true;
      if (c.get_last_error) c.get_last_error();  // do not leave our error for the job to find
      log_line(LogLevel::kWarn, "cannot create CUDA events: device profiling disabled in this thread");
      return false;
    }
    free_[i] = i;
  }
  free_count_ = kPairs;
  created_ = true;
  return true;
}

int GpuTimer::begin(void* stream, RingControl& control) {
  if (!create_events() || free_count_ == 0) {
    control.timings_dropped.fetch_add(1, std::memory_order_relaxed);
    return -1;
  }
  const int pair = free_[--free_count_];
  if (cuda().event_record(start_[pair], stream) != kCudaSuccess) {
    if (cuda().get_last_error) cuda().get_last_error();
    free_[free_count_++] = pair;
    control.timings_dropped.fetch_add(1, std::memory_order_relaxed);
    return -1;
  }
  return pair;
}

void GpuTimer::end(int pair, void* stream, const RecordPayload& measured) {
  if (pair < 0) return;
  if (cuda().event_record(end_[pair], stream) != kCudaSuccess) {
    if (cuda().get_last_error) cuda().get_last_error();
    free_[free_count_++] = pair;
    return;
  }
  pending_[(head_ + count_) % kPairs] = {pair, measured};
  ++count_;
  t_timings_pending = count_;
}

void GpuTimer::poll(RingWriter& ring) {
  const CudaApi& c = cuda();
  while (count_ > 0) {
    Pending& p = pending_[head_];
    if (c.event_query(end_[p.pair]) != kCudaSuccess) {  // not done yet (cudaErrorNotReady): later
      if (c.get_last_error) c.get_last_error();
      break;
    }
    float ms = 0;
    const bool ok = c.event_elapsed(&ms, start_[p.pair], end_[p.pair]) == kCudaSuccess && std::isfinite(ms) && ms >= 0;
    if (!ok && c.get_last_error) c.get_last_error();
    if (ok) {
      RecordPayload t = p.measured;
      t.op = static_cast<std::uint8_t>(Op::kTiming);
      t.measured_op = p.measured.op;
      t.aux = p.measured.seq;
      t.dur_ns = static_cast<std::uint64_t>(static_cast<double>(ms) * 1e6);
      t.t_ns = monotonic_ns();
      t.flags = 0;
      ring.append(t);
    }
    free_[free_count_++] = p.pair;
    head_ = (head_ + 1) % kPairs;
    --count_;
  }
  t_timings_pending = count_;
}

void GpuTimer::forget_after_fork() noexcept {
  t_timer = nullptr;  // the parent's object stays allocated in the child, unused
  t_timings_pending = 0;
}

}  // namespace greyhound::hook
