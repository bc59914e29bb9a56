// The CUDA runtime, cuBLAS and cuBLASLt functions libgreyhound.so uses, resolved with dlsym(RTLD_DEFAULT) at
// first use, else in the loaded libcudart.so* / libcublas.so* / libcublasLt.so* itself (a job that loaded
// them with RTLD_LOCAL, as Python loads torch's; runtime.h, resolve_in_loaded). Never linked, so the hook works with whatever
// versions the job loaded. Each is held with the type CUDA's headers give it (a call through another
// function type is undefined behaviour, and UBSan says so) and called through the ABI-level types the hook
// uses: ints for cudaError_t, cublasStatus_t and the cuBLAS enums, void* for streams, events and handles.
#pragma once

#include <cublasLt.h>
#include <cublas_api.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <type_traits>

namespace greyhound::hook {

// One resolved function of type Real (null until resolved).
template <typename Real>
class CudaFn;
template <typename R, typename... A>
class CudaFn<R (*)(A...)> {
 public:
  CudaFn& operator=(void* symbol) {
    fn_ = reinterpret_cast<R (*)(A...)>(symbol);
    return *this;
  }
  explicit operator bool() const { return fn_ != nullptr; }
  friend bool operator==(const CudaFn& f, std::nullptr_t) { return f.fn_ == nullptr; }
  template <typename... B>
  int operator()(B... b) const {
    static_assert(sizeof...(A) == sizeof...(B), "the call has as many arguments as the function");
    return static_cast<int>(fn_(as<A>(b)...));
  }

 private:
  template <typename To, typename From>
  static To as(From v) {
    if constexpr (std::is_null_pointer_v<From>) {
      return To{};
    } else if constexpr (std::is_pointer_v<To>) {
      return reinterpret_cast<To>(v);  // void* and void** to the handle types (all pointers)
    } else {
      return static_cast<To>(v);  // ints to the enums, sizes, flags
    }
  }
  R (*fn_)(A...) = nullptr;
};

struct CudaApi {
  // Events (device profiling and the benchmark executor).
  CudaFn<decltype(&::cudaEventCreateWithFlags)> event_create;
  CudaFn<decltype(&::cudaEventRecord)> event_record;
  CudaFn<decltype(&::cudaEventQuery)> event_query;
  CudaFn<decltype(&::cudaEventSynchronize)> event_synchronize;
  CudaFn<decltype(&::cudaEventElapsedTime)> event_elapsed;
  CudaFn<decltype(&::cudaEventDestroy)> event_destroy;
  CudaFn<decltype(&::cudaGetLastError)> get_last_error;
  CudaFn<decltype(&::cudaPeekAtLastError)> peek_last_error;
  // The pause gate and the benchmark executor.
  CudaFn<decltype(&::cudaDeviceSynchronize)> device_synchronize;
  CudaFn<decltype(&::cudaStreamIsCapturing)> stream_is_capturing;
  CudaFn<cudaError_t (*)(void**, std::size_t)> malloc;  // cudaMalloc (overloaded in C++: the C one)
  CudaFn<decltype(&::cudaFree)> free;
  CudaFn<decltype(&::cudaMemset)> memset;
  // cuBLAS (the GEMM test); absent when the process did not load it.
  CudaFn<decltype(&::cublasCreate_v2)> blas_create;
  CudaFn<decltype(&::cublasDestroy_v2)> blas_destroy;
  CudaFn<decltype(&::cublasSetStream_v2)> blas_set_stream;
  // cublasGemmEx, the C one (C++ also sees an inline overload taking cudaDataType for the compute type).
  CudaFn<cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*,
                            const void*, cudaDataType, int, const void*, cudaDataType, int, const void*, void*,
                            cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t)>
      gemm_ex;

  // The device's compute capability (whether it has FP8 tensor cores).
  CudaFn<decltype(&::cudaGetDevice)> get_device;
  CudaFn<decltype(&::cudaDeviceGetAttribute)> device_attribute;
  // cuBLASLt (the FP8 GEMM; cuBLAS loads it); absent when the process did not load it.
  CudaFn<decltype(&::cublasLtCreate)> lt_create;
  CudaFn<decltype(&::cublasLtDestroy)> lt_destroy;
  CudaFn<decltype(&::cublasLtMatmulDescCreate)> lt_desc_create;
  CudaFn<decltype(&::cublasLtMatmulDescDestroy)> lt_desc_destroy;
  CudaFn<decltype(&::cublasLtMatmulDescSetAttribute)> lt_desc_set;
  CudaFn<decltype(&::cublasLtMatrixLayoutCreate)> lt_layout_create;
  CudaFn<decltype(&::cublasLtMatrixLayoutDestroy)> lt_layout_destroy;
  CudaFn<decltype(&::cublasLtMatmulPreferenceCreate)> lt_pref_create;
  CudaFn<decltype(&::cublasLtMatmulPreferenceDestroy)> lt_pref_destroy;
  CudaFn<decltype(&::cublasLtMatmulPreferenceSetAttribute)> lt_pref_set;
  CudaFn<decltype(&::cublasLtMatmulAlgoGetHeuristic)> lt_heuristic;
  CudaFn<decltype(&::cublasLtMatmul)> lt_matmul;

  bool events_ok() const { return event_create && event_record && event_query && event_elapsed && event_destroy; }
  bool pause_ok() const { return events_ok() && event_synchronize && device_synchronize && malloc && free && memset; }
  bool blas_ok() const { return blas_create && blas_destroy && blas_set_stream && gemm_ex; }
  bool device_query_ok() const { return get_device && device_attribute; }
  bool lt_ok() const {
    return lt_create && lt_destroy && lt_desc_create && lt_desc_destroy && lt_desc_set && lt_layout_create &&
           lt_layout_destroy && lt_pref_create && lt_pref_destroy && lt_pref_set && lt_heuristic && lt_matmul;
  }
  void clear_error() const {
    if (get_last_error) get_last_error();  // do not leave our error for the job to find
  }
};

// Resolved once (thread-safe static initialisation); errno preserved.
const CudaApi& cuda_api();

inline constexpr int kCudaSuccess = 0;

}  // namespace greyhound::hook
