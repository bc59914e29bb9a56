// libcublas.so.13 CPU stand-in: the subset greyhound's simulated jobs and validation GEMMs use. Results
// are computed for real (column-major, as cuBLAS), then the call lasts its modeled device time:
// GEMM 2mnk / gemm_gflops, level-1 routines bytes / mem_bw_MBps, both scaled by the rank's GPU fault.
#include <cublas_api.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "sim/gemm_ref.h"
#include "sim/sim_process.h"

namespace gs = greyhound::sim;

struct cublasContext {
  cudaStream_t stream = nullptr;
  cublasPointerMode_t pointer_mode = CUBLAS_POINTER_MODE_HOST;
  cublasMath_t math = CUBLAS_DEFAULT_MATH;
};

namespace {

bool bad_dims(int m, int n, int k, cublasOperation_t ta, cublasOperation_t tb, int lda, int ldb, int ldc) {
  if (m < 0 || n < 0 || k < 0) return true;
  if ((ta != CUBLAS_OP_N && ta != CUBLAS_OP_T) || (tb != CUBLAS_OP_N && tb != CUBLAS_OP_T)) return true;
  const int arows = ta == CUBLAS_OP_N ? m : k;
  const int brows = tb == CUBLAS_OP_N ? k : n;
  return lda < std::max(1, arows) || ldb < std::max(1, brows) || ldc < std::max(1, m);
}

}  // namespace

#pragma GCC visibility push(default)
extern "C" {

cublasStatus_t cublasCreate_v2(cublasHandle_t* handle) {
  if (handle == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *handle = new cublasContext();
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy_v2(cublasHandle_t handle) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetVersion_v2(cublasHandle_t, int* version) {
  if (version == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *version = CUBLAS_VERSION;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t stream) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  handle->stream = stream;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetStream_v2(cublasHandle_t handle, cudaStream_t* stream) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (stream == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *stream = handle->stream;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetPointerMode_v2(cublasHandle_t handle, cublasPointerMode_t mode) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  handle->pointer_mode = mode;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetPointerMode_v2(cublasHandle_t handle, cublasPointerMode_t* mode) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (mode == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *mode = handle->pointer_mode;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  handle->math = mode;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetMathMode(cublasHandle_t handle, cublasMath_t* mode) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (mode == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *mode = handle->math;
  return CUBLAS_STATUS_SUCCESS;
}

const char* cublasGetStatusName(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    default: return "CUBLAS_STATUS_UNKNOWN";
  }
}

const char* cublasGetStatusString(cublasStatus_t s) { return cublasGetStatusName(s); }

cublasStatus_t cublasSgemm_v2(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m,
                              int n, int k, const float* alpha, const float* A, int lda, const float* B, int ldb,
                              const float* beta, float* C, int ldc) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (alpha == nullptr || beta == nullptr || bad_dims(m, n, k, transa, transb, lda, ldb, ldc)) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  const double flops = 2.0 * m * n * k;
  gs::device_kernel(flops, true, [&] {
    gs::reference_gemm(m, n, k, *alpha, {A, CUDA_R_32F, lda, transa != CUBLAS_OP_N}, {B, CUDA_R_32F, ldb, transb != CUBLAS_OP_N},
                       *beta, {C, CUDA_R_32F, ldc}, C, CUDA_R_32F, ldc);
  });
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                            int k, const void* alpha, const void* A, cudaDataType Atype, int lda, const void* B,
                            cudaDataType Btype, int ldb, const void* beta, void* C, cudaDataType Ctype, int ldc,
                            cublasComputeType_t computeType, cublasGemmAlgo_t) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (alpha == nullptr || beta == nullptr || bad_dims(m, n, k, transa, transb, lda, ldb, ldc)) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  if (!gs::gemm_output_type(Atype) || !gs::gemm_output_type(Btype) || !gs::gemm_output_type(Ctype) ||
      (computeType != CUBLAS_COMPUTE_32F && computeType != CUBLAS_COMPUTE_32F_FAST_TF32 &&
       computeType != CUBLAS_COMPUTE_32F_FAST_16F && computeType != CUBLAS_COMPUTE_32F_FAST_16BF)) {
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  // With 32-bit compute, alpha and beta are floats.
  const float a = *static_cast<const float*>(alpha);
  const float b = *static_cast<const float*>(beta);
  const double flops = 2.0 * m * n * k;
  gs::device_kernel(flops, true, [&] {
    gs::reference_gemm(m, n, k, a, {A, Atype, lda, transa != CUBLAS_OP_N}, {B, Btype, ldb, transb != CUBLAS_OP_N}, b,
                       {C, Ctype, ldc}, C, Ctype, ldc);
  });
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSaxpy_v2(cublasHandle_t handle, int n, const float* alpha, const float* x, int incx, float* y,
                              int incy) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (alpha == nullptr || n < 0 || incx == 0 || incy == 0) return CUBLAS_STATUS_INVALID_VALUE;
  gs::device_kernel(12.0 * n, false, [&] {
    for (int i = 0; i < n; ++i) y[static_cast<std::ptrdiff_t>(i) * incy] += *alpha * x[static_cast<std::ptrdiff_t>(i) * incx];
  });
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSscal_v2(cublasHandle_t handle, int n, const float* alpha, float* x, int incx) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (alpha == nullptr || n < 0 || incx <= 0) return CUBLAS_STATUS_INVALID_VALUE;
  gs::device_kernel(8.0 * n, false, [&] {
    for (int i = 0; i < n; ++i) x[static_cast<std::ptrdiff_t>(i) * incx] *= *alpha;
  });
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasScopy_v2(cublasHandle_t handle, int n, const float* x, int incx, float* y, int incy) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (n < 0 || incx == 0 || incy == 0) return CUBLAS_STATUS_INVALID_VALUE;
  gs::device_kernel(8.0 * n, false, [&] {
    for (int i = 0; i < n; ++i) y[static_cast<std::ptrdiff_t>(i) * incy] = x[static_cast<std::ptrdiff_t>(i) * incx];
  });
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSdot_v2(cublasHandle_t handle, int n, const float* x, int incx, const float* y, int incy,
                             float* result) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (result == nullptr || n < 0) return CUBLAS_STATUS_INVALID_VALUE;
  gs::device_kernel(8.0 * n, false, [&] {
    double acc = 0.0;
    for (int i = 0; i < n; ++i) {
      acc += static_cast<double>(x[static_cast<std::ptrdiff_t>(i) * incx]) * y[static_cast<std::ptrdiff_t>(i) * incy];
    }
    *result = static_cast<float>(acc);
  });
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSnrm2_v2(cublasHandle_t handle, int n, const float* x, int incx, float* result) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (result == nullptr || n < 0 || incx <= 0) return CUBLAS_STATUS_INVALID_VALUE;
  gs::device_kernel(4.0 * n, false, [&] {
    double acc = 0.0;
    for (int i = 0; i < n; ++i) {
      const double v = x[static_cast<std::ptrdiff_t>(i) * incx];
      acc += v * v;
    }
    *result = static_cast<float>(std::sqrt(acc));
  });
  return CUBLAS_STATUS_SUCCESS;
}

}  // extern "C"
#pragma GCC visibility pop

__attribute__((constructor)) static void greyhound_sim_cublas_load() { (void)gs::sim_process(); }
