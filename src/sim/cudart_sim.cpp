// libcudart.so.13 CPU stand-in: the runtime subset greyhound's simulated jobs use. Device memory is host
// memory; every stream runs synchronously (work completes before the call returns); events read the host
// monotonic clock when recorded, so an event pair measures the modeled time of the work between them.
// Memory copies and sets cost bytes / mem_bw_MBps of modeled device time (scaled by a GPU fault).
#include <cuda_runtime_api.h>

#include <cstdlib>
#include <cstring>

#include "sim/sim_process.h"

namespace gs = greyhound::sim;

struct CUstream_st {
  unsigned int flags = 0;
  bool capturing = false;  // between cudaStreamBeginCapture and cudaStreamEndCapture (nothing is captured)
};
struct CUevent_st {
  std::uint64_t t_ns = 0;
  bool recorded = false;
};

namespace {

thread_local cudaError_t t_last = cudaSuccess;
thread_local int t_device = 0;

cudaError_t fail(cudaError_t e) {
  t_last = e;
  return e;
}

// Modeled device time of moving `bytes`, run synchronously after the host launch cost.
void device_memory_work(std::size_t bytes) {
  gs::host_launch();
  const gs::SimProcess& sp = gs::sim_process();
  const std::uint64_t t0 = gs::model_now();
  const double slow = sp.faults.gpu_slowdown(sp.rank, sp.job_time_s(t0));
  gs::model_wait_until(t0 + gs::seconds_to_ns(gs::memory_seconds(sp.model, bytes, slow)));
}

}  // namespace

#pragma GCC visibility push(default)
extern "C" {

cudaError_t cudaGetDeviceCount(int* count) {
  if (count == nullptr) return fail(cudaErrorInvalidValue);
  *count = gs::sim_process().model.gpus_per_node;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  if (device < 0 || device >= gs::sim_process().model.gpus_per_node) return fail(cudaErrorInvalidDevice);
  t_device = device;
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
  if (device == nullptr) return fail(cudaErrorInvalidValue);
  *device = t_device;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp* prop, int device) {
  if (prop == nullptr) return fail(cudaErrorInvalidValue);
  if (device < 0 || device >= gs::sim_process().model.gpus_per_node) return fail(cudaErrorInvalidDevice);
  std::memset(prop, 0, sizeof *prop);
  std::snprintf(prop->name, sizeof prop->name, "greyhound simulated GPU %d (node %d)", device,
                gs::sim_process().node);
  prop->totalGlobalMem = 80ull << 30;
  prop->major = gs::sim_process().model.compute_capability / 10;
  prop->minor = gs::sim_process().model.compute_capability % 10;
  prop->multiProcessorCount = 132;
  prop->warpSize = 32;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* value, enum cudaDeviceAttr attr, int device) {
  if (value == nullptr) return fail(cudaErrorInvalidValue);
  switch (attr) {
    case cudaDevAttrMultiProcessorCount: *value = 132; break;
    case cudaDevAttrComputeCapabilityMajor: *value = gs::sim_process().model.compute_capability / 10; break;
    case cudaDevAttrComputeCapabilityMinor: *value = gs::sim_process().model.compute_capability % 10; break;
    case cudaDevAttrWarpSize: *value = 32; break;
    default: *value = 0; break;
  }
  return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int* v) {
  if (v == nullptr) return fail(cudaErrorInvalidValue);
  *v = CUDART_VERSION;
  return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int* v) { return cudaDriverGetVersion(v); }

cudaError_t cudaMalloc(void** p, size_t size) {
  if (p == nullptr) return fail(cudaErrorInvalidValue);
  *p = std::aligned_alloc(256, ((size == 0 ? 1 : size) + 255) / 256 * 256);
  return *p != nullptr ? cudaSuccess : fail(cudaErrorMemoryAllocation);
}

cudaError_t cudaFree(void* p) {
  std::free(p);
  return cudaSuccess;
}

cudaError_t cudaMallocHost(void** p, size_t size) { return cudaMalloc(p, size); }
cudaError_t cudaHostAlloc(void** p, size_t size, unsigned int) { return cudaMalloc(p, size); }
cudaError_t cudaFreeHost(void* p) { return cudaFree(p); }

cudaError_t cudaMemcpy(void* dst, const void* src, size_t count, enum cudaMemcpyKind) {
  if ((dst == nullptr || src == nullptr) && count > 0) return fail(cudaErrorInvalidValue);
  if (count > 0) std::memmove(dst, src, count);
  device_memory_work(count);
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count, enum cudaMemcpyKind kind, cudaStream_t) {
  return cudaMemcpy(dst, src, count, kind);
}

cudaError_t cudaMemset(void* p, int value, size_t count) {
  if (p == nullptr && count > 0) return fail(cudaErrorInvalidValue);
  if (count > 0) std::memset(p, value, count);
  device_memory_work(count);
  return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void* p, int value, size_t count, cudaStream_t) { return cudaMemset(p, value, count); }

cudaError_t cudaStreamCreate(cudaStream_t* s) {
  if (s == nullptr) return fail(cudaErrorInvalidValue);
  *s = new CUstream_st();
  return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned int flags) {
  const cudaError_t e = cudaStreamCreate(s);
  if (e == cudaSuccess) (*s)->flags = flags;
  return e;
}

cudaError_t cudaStreamDestroy(cudaStream_t s) {
  delete s;
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }
cudaError_t cudaStreamQuery(cudaStream_t) { return cudaSuccess; }
cudaError_t cudaStreamWaitEvent(cudaStream_t, cudaEvent_t, unsigned int) { return cudaSuccess; }
cudaError_t cudaDeviceSynchronize(void) { return cudaSuccess; }

// Graph capture: only the state, so that greyhound's pause gate can be tested against it; the work issued
// meanwhile runs as always and the graph returned is null. The legacy stream (nullptr) never captures here.
cudaError_t cudaStreamBeginCapture(cudaStream_t s, enum cudaStreamCaptureMode) {
  if (s == nullptr) return fail(cudaErrorInvalidValue);
  s->capturing = true;
  return cudaSuccess;
}
cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t* graph) {
  if (s == nullptr || graph == nullptr) return fail(cudaErrorInvalidValue);
  s->capturing = false;
  *graph = nullptr;
  return cudaSuccess;
}
cudaError_t cudaStreamIsCapturing(cudaStream_t s, enum cudaStreamCaptureStatus* status) {
  if (status == nullptr) return fail(cudaErrorInvalidValue);
  *status = s != nullptr && s->capturing ? cudaStreamCaptureStatusActive : cudaStreamCaptureStatusNone;
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t* e) {
  if (e == nullptr) return fail(cudaErrorInvalidValue);
  *e = new CUevent_st();
  return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned int) { return cudaEventCreate(e); }

cudaError_t cudaEventDestroy(cudaEvent_t e) {
  delete e;
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t) {
  if (e == nullptr) return fail(cudaErrorInvalidResourceHandle);
  e->t_ns = gs::model_now();
  e->recorded = true;
  return cudaSuccess;
}

cudaError_t cudaEventRecordWithFlags(cudaEvent_t e, cudaStream_t s, unsigned int) { return cudaEventRecord(e, s); }

cudaError_t cudaEventQuery(cudaEvent_t e) {
  if (e == nullptr) return fail(cudaErrorInvalidResourceHandle);
  return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t e) { return cudaEventQuery(e); }

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  if (ms == nullptr) return fail(cudaErrorInvalidValue);
  if (start == nullptr || end == nullptr) return fail(cudaErrorInvalidResourceHandle);
  if (!start->recorded || !end->recorded) return fail(cudaErrorInvalidResourceHandle);
  *ms = static_cast<float>((static_cast<double>(end->t_ns) - static_cast<double>(start->t_ns)) * 1e-6);
  return cudaSuccess;
}

cudaError_t cudaGetLastError(void) {
  const cudaError_t e = t_last;
  t_last = cudaSuccess;
  return e;
}

cudaError_t cudaPeekAtLastError(void) { return t_last; }

const char* cudaGetErrorName(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorNotReady: return "cudaErrorNotReady";
    default: return "cudaErrorUnknown";
  }
}

const char* cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorNotReady: return "device not ready";
    default: return "unknown error";
  }
}

}  // extern "C"
#pragma GCC visibility pop

__attribute__((constructor)) static void greyhound_sim_cudart_load() { (void)gs::sim_process(); }
