// A job's library that links NCCL and the CUDA runtime (the no-op NCCL and the CUDA stand-in), for a
// program to dlopen with RTLD_LOCAL, as Python loads torch and what torch links. Under the preloaded
// libgreyhound.so, the calls it makes reach the hook (the global scope comes first), and the hook must
// find the real functions in this library's NCCL and CUDA runtime, which its global lookup does not see.
// gh_local_job_run: N all-reduces on a one-rank communicator, the last N/2 timed by the hook (device
// profiling switched on in the process's own ring, as the agent would); returns 0, or the failed step.
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "greyhound/config.h"
#include "greyhound/ring.h"

namespace {

std::uint64_t mono_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000ull + ts.tv_nsec;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int gh_local_job_run(int calls) {
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess) return 10;  // the first call: the hook creates the ring
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  // Both released on every way out (an early one included: the sanitizer stage checks for leaks).
  struct Release {
    ncclComm_t& comm;
    cudaStream_t& stream;
    ~Release() {
      if (stream != nullptr) cudaStreamDestroy(stream);
      if (comm != nullptr) ncclCommDestroy(comm);
    }
  } release{comm, stream};
  if (ncclCommInitRank(&comm, 1, id, 0) != ncclSuccess) return 11;
  if (cudaStreamCreate(&stream) != cudaSuccess) return 12;
  // The hook's ring for this process, to switch device profiling on as the agent would.
  const greyhound::EnvConfig env = greyhound::read_env_config();
  const auto ring = greyhound::open_process_ring(env.shm_dir, greyhound::sanitize_job_name(env.job), getpid());
  if (!ring) return 13;
  std::string err;
  greyhound::RingControl* control = ring->control(&err);
  if (control == nullptr) return 14;
  float x[256] = {};
  for (int i = 0; i < calls; ++i) {
    if (i == calls / 2) {
      control->profile_until_ns.store(mono_ns() + 60'000'000'000ull);
      control->profile_flags.store(greyhound::kProfileDevice);
    }
    if (ncclAllReduce(x, x, 256, ncclFloat32, ncclSum, comm, stream) != ncclSuccess) return 15;
  }
  cudaStreamSynchronize(stream);
  ncclBroadcast(x, x, 1, ncclFloat32, 0, comm, stream);  // collects the timings still pending
  std::printf("profile_status %u\n", control->profile_status.load());
  control->profile_flags.store(0);
  return 0;
}
