#include "cuda_api.h"

#include "runtime.h"

#include <dlfcn.h>

#include <cerrno>

namespace greyhound::hook {

const CudaApi& cuda_api() {
  static const CudaApi api = [] {
    CudaApi a;
    const int saved = errno;
    // The global scope first (a job that links CUDA), else the library itself (one loaded with RTLD_LOCAL,
    // as torch's are).
    const auto sym_in = [](auto& fn, const char* name, const char* library) {
      void* f = dlsym(RTLD_DEFAULT, name);
      fn = f != nullptr ? f : resolve_in_loaded(name, library, nullptr);
    };
    const auto sym = [&](auto& fn, const char* name) { sym_in(fn, name, "libcudart.so"); };
    const auto blas = [&](auto& fn, const char* name) { sym_in(fn, name, "libcublas.so"); };
    sym(a.event_create, "cudaEventCreateWithFlags");
    sym(a.event_record, "cudaEventRecord");
    sym(a.event_query, "cudaEventQuery");
    sym(a.event_synchronize, "cudaEventSynchronize");
    sym(a.event_elapsed, "cudaEventElapsedTime");
    sym(a.event_destroy, "cudaEventDestroy");
    sym(a.get_last_error, "cudaGetLastError");
    sym(a.peek_last_error, "cudaPeekAtLastError");
    sym(a.device_synchronize, "cudaDeviceSynchronize");
    sym(a.stream_is_capturing, "cudaStreamIsCapturing");
    sym(a.malloc, "cudaMalloc");
    sym(a.free, "cudaFree");
    sym(a.memset, "cudaMemset");
    blas(a.blas_create, "cublasCreate_v2");
    blas(a.blas_destroy, "cublasDestroy_v2");
    blas(a.blas_set_stream, "cublasSetStream_v2");
    blas(a.gemm_ex, "cublasGemmEx");
    sym(a.get_device, "cudaGetDevice");
    sym(a.device_attribute, "cudaDeviceGetAttribute");
    const auto lt = [&](auto& fn, const char* name) { sym_in(fn, name, "libcublasLt.so"); };
    lt(a.lt_create, "cublasLtCreate");
    lt(a.lt_destroy, "cublasLtDestroy");
    lt(a.lt_desc_create, "cublasLtMatmulDescCreate");
    lt(a.lt_desc_destroy, "cublasLtMatmulDescDestroy");
    lt(a.lt_desc_set, "cublasLtMatmulDescSetAttribute");
    lt(a.lt_layout_create, "cublasLtMatrixLayoutCreate");
    lt(a.lt_layout_destroy, "cublasLtMatrixLayoutDestroy");
    lt(a.lt_pref_create, "cublasLtMatmulPreferenceCreate");
    lt(a.lt_pref_destroy, "cublasLtMatmulPreferenceDestroy");
    lt(a.lt_pref_set, "cublasLtMatmulPreferenceSetAttribute");
    lt(a.lt_heuristic, "cublasLtMatmulAlgoGetHeuristic");
    lt(a.lt_matmul, "cublasLtMatmul");
    errno = saved;
    return a;
  }();
  return api;
}

}  // namespace greyhound::hook
