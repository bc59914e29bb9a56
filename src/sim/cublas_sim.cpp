// libcublas.so.13 CPU stand-in: the subset greyhound's simulated jobs and validation GEMMs use. Results
// are computed for real (column-major, as cuBLAS), then the call lasts its modeled device time:
// GEMM 2mnk / gemm_gflops, level-1 routines bytes / mem_bw_MBps, both scaled by the rank's GPU fault.
#include <cublas_api.h>

#include <cmath>
#include <csignal>
#include <cstring>
#include <vector>

#include "sim/reduce.h"
#include "sim/sim_process.h"

namespace gs = greyhound::sim;

struct cublasContext {
  cudaStream_t stream = nullptr;
  cublasPointerMode_t pointer_mode = CUBLAS_POINTER_MODE_HOST;
  cublasMath_t math = CUBLAS_DEFAULT_MATH;
};

namespace {

// Runs `work` (the real computation), then sleeps until the modeled device time has passed.
template <typename Work>
void device_kernel(double flops_or_bytes, bool is_gemm, Work&& work) {
  gs::host_launch();
  const gs::SimProcess& sp = gs::sim_process();
  const std::uint64_t t0 = gs::model_now();
  // A kill fault: the process dies here, as a rank does whose host fails or that the OOM killer takes.
  if (sp.faults.killed(sp.rank, sp.job_time_s(t0))) raise(SIGKILL);
  // A hang fault: a kernel that does not finish until the fault's end (no NCCL call meanwhile).
  if (const double until_s = sp.faults.hung_until(sp.rank, sp.job_time_s(t0)); until_s > 0) {
    gs::model_wait_until(sp.epoch_ns + static_cast<std::uint64_t>(until_s * 1e9));
  }
  const double slow = sp.faults.gpu_slowdown(sp.rank, sp.job_time_s(t0));
  work();
  const double s = is_gemm ? gs::gemm_seconds(sp.model, flops_or_bytes, slow)
                           : gs::memory_seconds(sp.model, static_cast<std::uint64_t>(flops_or_bytes), slow);
  gs::model_wait_until(t0 + gs::seconds_to_ns(s));
}

float load(const void* p, cudaDataType t, std::size_t i) {
  switch (t) {
    case CUDA_R_32F: return static_cast<const float*>(p)[i];
    case CUDA_R_16F: return gs::half_to_float(static_cast<const std::uint16_t*>(p)[i]);
    case CUDA_R_16BF: return gs::bf16_to_float(static_cast<const std::uint16_t*>(p)[i]);
    default: return 0.0f;
  }
}

void store(void* p, cudaDataType t, std::size_t i, float v) {
  switch (t) {
    case CUDA_R_32F: static_cast<float*>(p)[i] = v; break;
    case CUDA_R_16F: static_cast<std::uint16_t*>(p)[i] = gs::float_to_half(v); break;
    case CUDA_R_16BF: static_cast<std::uint16_t*>(p)[i] = gs::float_to_bf16(v); break;
    default: break;
  }
}

bool supported(cudaDataType t) { return t == CUDA_R_32F || t == CUDA_R_16F || t == CUDA_R_16BF; }

// C = alpha op(A) op(B) + beta C, column-major, accumulated in float.
void gemm(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, float alpha, const void* A,
          cudaDataType at, int lda, const void* B, cudaDataType bt, int ldb, float beta, void* C, cudaDataType ct,
          int ldc) {
  std::vector<float> col(static_cast<std::size_t>(m));
  std::vector<float> acol(static_cast<std::size_t>(k) * static_cast<std::size_t>(m));
  // op(A) as a dense m x k float matrix (column-major), read once.
  for (int p = 0; p < k; ++p) {
    for (int i = 0; i < m; ++i) {
      const std::size_t idx = ta == CUBLAS_OP_N ? static_cast<std::size_t>(i) + static_cast<std::size_t>(p) * lda
                                                : static_cast<std::size_t>(p) + static_cast<std::size_t>(i) * lda;
      acol[static_cast<std::size_t>(p) * m + i] = load(A, at, idx);
    }
  }
  for (int j = 0; j < n; ++j) {
    std::fill(col.begin(), col.end(), 0.0f);
    for (int p = 0; p < k; ++p) {
      const std::size_t bidx = tb == CUBLAS_OP_N ? static_cast<std::size_t>(p) + static_cast<std::size_t>(j) * ldb
                                                 : static_cast<std::size_t>(j) + static_cast<std::size_t>(p) * ldb;
      const float b = load(B, bt, bidx);
      if (b == 0.0f) continue;
      const float* a = &acol[static_cast<std::size_t>(p) * m];
      for (int i = 0; i < m; ++i) col[static_cast<std::size_t>(i)] += a[i] * b;
    }
    for (int i = 0; i < m; ++i) {
      const std::size_t cidx = static_cast<std::size_t>(i) + static_cast<std::size_t>(j) * ldc;
      const float prev = beta == 0.0f ? 0.0f : beta * load(C, ct, cidx);
      store(C, ct, cidx, alpha * col[static_cast<std::size_t>(i)] + prev);
    }
  }
}

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
  device_kernel(flops, true, [&] {
    gemm(transa, transb, m, n, k, *alpha, A, CUDA_R_32F, lda, B, CUDA_R_32F, ldb, *beta, C, CUDA_R_32F, ldc);
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
  if (!supported(Atype) || !supported(Btype) || !supported(Ctype) ||
      (computeType != CUBLAS_COMPUTE_32F && computeType != CUBLAS_COMPUTE_32F_FAST_TF32 &&
       computeType != CUBLAS_COMPUTE_32F_FAST_16F && computeType != CUBLAS_COMPUTE_32F_FAST_16BF)) {
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  // With 32-bit compute, alpha and beta are floats.
  const float a = *static_cast<const float*>(alpha);
  const float b = *static_cast<const float*>(beta);
  const double flops = 2.0 * m * n * k;
  device_kernel(flops, true, [&] { gemm(transa, transb, m, n, k, a, A, Atype, lda, B, Btype, ldb, b, C, Ctype, ldc); });
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSaxpy_v2(cublasHandle_t handle, int n, const float* alpha, const float* x, int incx, float* y,
                              int incy) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (alpha == nullptr || n < 0 || incx == 0 || incy == 0) return CUBLAS_STATUS_INVALID_VALUE;
  device_kernel(12.0 * n, false, [&] {
    for (int i = 0; i < n; ++i) y[static_cast<std::ptrdiff_t>(i) * incy] += *alpha * x[static_cast<std::ptrdiff_t>(i) * incx];
  });
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSscal_v2(cublasHandle_t handle, int n, const float* alpha, float* x, int incx) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (alpha == nullptr || n < 0 || incx <= 0) return CUBLAS_STATUS_INVALID_VALUE;
  device_kernel(8.0 * n, false, [&] {
    for (int i = 0; i < n; ++i) x[static_cast<std::ptrdiff_t>(i) * incx] *= *alpha;
  });
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasScopy_v2(cublasHandle_t handle, int n, const float* x, int incx, float* y, int incy) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (n < 0 || incx == 0 || incy == 0) return CUBLAS_STATUS_INVALID_VALUE;
  device_kernel(8.0 * n, false, [&] {
    for (int i = 0; i < n; ++i) y[static_cast<std::ptrdiff_t>(i) * incy] = x[static_cast<std::ptrdiff_t>(i) * incx];
  });
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSdot_v2(cublasHandle_t handle, int n, const float* x, int incx, const float* y, int incy,
                             float* result) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (result == nullptr || n < 0) return CUBLAS_STATUS_INVALID_VALUE;
  device_kernel(8.0 * n, false, [&] {
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
  device_kernel(4.0 * n, false, [&] {
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
