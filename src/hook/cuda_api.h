// The CUDA runtime and cuBLAS functions libgreyhound.so uses, resolved with dlsym(RTLD_DEFAULT) at first
// use (never linked, so the hook works with whatever versions the job loaded). The ABI types: cudaError_t
// and cublasStatus_t are int-sized enums, streams, events and handles are pointers.
#pragma once

#include <cstddef>

namespace greyhound::hook {

struct CudaApi {
  // Events (device profiling and the benchmark executor).
  int (*event_create)(void** event, unsigned int flags) = nullptr;  // cudaEventCreateWithFlags
  int (*event_record)(void* event, void* stream) = nullptr;         // cudaEventRecord
  int (*event_query)(void* event) = nullptr;                        // cudaEventQuery
  int (*event_synchronize)(void* event) = nullptr;                  // cudaEventSynchronize
  int (*event_elapsed)(float* ms, void* start, void* end) = nullptr;  // cudaEventElapsedTime
  int (*event_destroy)(void* event) = nullptr;                      // cudaEventDestroy
  int (*get_last_error)() = nullptr;                                // cudaGetLastError
  int (*peek_last_error)() = nullptr;                               // cudaPeekAtLastError
  // The pause gate and the benchmark executor.
  int (*device_synchronize)() = nullptr;                            // cudaDeviceSynchronize
  int (*stream_is_capturing)(void* stream, int* status) = nullptr;  // cudaStreamIsCapturing
  int (*malloc)(void** p, std::size_t bytes) = nullptr;             // cudaMalloc
  int (*free)(void* p) = nullptr;                                   // cudaFree
  int (*memset)(void* p, int value, std::size_t bytes) = nullptr;   // cudaMemset
  // cuBLAS (the GEMM test); absent when the process did not load it.
  int (*blas_create)(void** handle) = nullptr;                      // cublasCreate_v2
  int (*blas_destroy)(void* handle) = nullptr;                      // cublasDestroy_v2
  int (*blas_set_stream)(void* handle, void* stream) = nullptr;     // cublasSetStream_v2
  int (*gemm_ex)(void* handle, int transa, int transb, int m, int n, int k, const void* alpha, const void* A,
                 int Atype, int lda, const void* B, int Btype, int ldb, const void* beta, void* C, int Ctype,
                 int ldc, int computeType, int algo) = nullptr;     // cublasGemmEx

  bool events_ok() const { return event_create && event_record && event_query && event_elapsed && event_destroy; }
  bool pause_ok() const { return events_ok() && event_synchronize && device_synchronize && malloc && free && memset; }
  bool blas_ok() const { return blas_create && blas_destroy && blas_set_stream && gemm_ex; }
  void clear_error() const {
    if (get_last_error) get_last_error();  // do not leave our error for the job to find
  }
};

// Resolved once (thread-safe static initialisation); errno preserved.
const CudaApi& cuda_api();

inline constexpr int kCudaSuccess = 0;

}  // namespace greyhound::hook
