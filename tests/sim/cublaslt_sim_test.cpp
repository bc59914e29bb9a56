// The cuBLASLt stand-in (src/sim/cublaslt_sim.cpp), linked as a job links the real one: an FP8 matmul in
// the layout real cuBLASLt takes computes exactly what it should, and what real cuBLASLt refuses for FP8
// (another layout, sizes off 16, two E5M2 inputs), or what the stand-in does not model (scale pointers), is
// refused, never computed otherwise. The simulated device is the default 9.0 (the hook's pause test runs an
// 8.0 one).
#include <cublasLt.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "sim/reduce.h"

namespace {

using greyhound::sim::bf16_to_float;

// Descriptors of D = op(A) op(B) (m x n, k inner) with A k x m (read transposed) or m x k, B k x n.
struct Lt {
  cublasLtHandle_t handle = nullptr;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  Lt(int m, int n, int k, cudaDataType at, cudaDataType bt, cudaDataType dt, bool transa) {
    EXPECT_EQ(cublasLtCreate(&handle), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), CUBLAS_STATUS_SUCCESS);
    const int32_t ta = transa ? CUBLAS_OP_T : CUBLAS_OP_N, tb = CUBLAS_OP_N;
    EXPECT_EQ(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasLtMatrixLayoutCreate(&a, at, transa ? k : m, transa ? m : k, transa ? k : m), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasLtMatrixLayoutCreate(&b, bt, k, n, k), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasLtMatrixLayoutCreate(&d, dt, m, n, m), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasLtMatmulPreferenceCreate(&pref), CUBLAS_STATUS_SUCCESS);
    const std::uint64_t workspace = 1 << 20;
    EXPECT_EQ(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
                                                   sizeof workspace),
              CUBLAS_STATUS_SUCCESS);
  }
  ~Lt() {
    cublasLtMatmulPreferenceDestroy(pref);
    for (auto l : {a, b, d}) cublasLtMatrixLayoutDestroy(l);
    cublasLtMatmulDescDestroy(desc);
    cublasLtDestroy(handle);
  }
  // The heuristic's status; `found` its algorithms.
  cublasStatus_t heuristic(cublasLtMatmulHeuristicResult_t* best, int* found) const {
    return cublasLtMatmulAlgoGetHeuristic(handle, desc, a, b, d, d, pref, 1, best, found);
  }
};

// E4M3 codes of small integers: 1, 2, 3 and -1.
constexpr std::uint8_t kOne = 0x38, kTwo = 0x40, kThree = 0x44, kMinusOne = 0xb8;

TEST(SimCublasLt, AnFp8MatmulInTheTnLayoutComputesExactly) {
  const int m = 16, n = 32, k = 48;
  // A is stored k x m (column-major) and read transposed: op(A)(i, p) = A[p + i k].
  std::vector<std::uint8_t> A(static_cast<std::size_t>(k) * m), B(static_cast<std::size_t>(k) * n);
  const std::uint8_t codes[] = {kOne, kTwo, kThree, kMinusOne};
  const float values[] = {1, 2, 3, -1};
  std::vector<float> a(A.size()), b(B.size());
  for (std::size_t i = 0; i < A.size(); ++i) {
    A[i] = codes[(i * 7) % 4];
    a[i] = values[(i * 7) % 4];
  }
  for (std::size_t i = 0; i < B.size(); ++i) {
    B[i] = codes[(i * 5 + 1) % 4];
    b[i] = values[(i * 5 + 1) % 4];
  }
  Lt lt(m, n, k, CUDA_R_8F_E4M3, CUDA_R_8F_E4M3, CUDA_R_16BF, true);
  cublasLtMatmulHeuristicResult_t best{};
  int found = 0;
  ASSERT_EQ(lt.heuristic(&best, &found), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(found, 1);
  EXPECT_EQ(best.state, CUBLAS_STATUS_SUCCESS);
  std::vector<std::uint16_t> D(static_cast<std::size_t>(m) * n, 0xffff);
  const float alpha = 0.5f, beta = 0.0f;
  ASSERT_EQ(cublasLtMatmul(lt.handle, lt.desc, &alpha, A.data(), lt.a, B.data(), lt.b, &beta, D.data(), lt.d, D.data(),
                           lt.d, &best.algo, nullptr, 0, nullptr),
            CUBLAS_STATUS_SUCCESS);
  for (int j = 0; j < n; ++j) {
    for (int i = 0; i < m; ++i) {
      float want = 0;
      for (int p = 0; p < k; ++p) want += a[static_cast<std::size_t>(p) + static_cast<std::size_t>(i) * k] * b[static_cast<std::size_t>(p) + static_cast<std::size_t>(j) * k];
      ASSERT_EQ(bf16_to_float(D[static_cast<std::size_t>(i) + static_cast<std::size_t>(j) * m]), alpha * want) << i << "," << j;
    }
  }
}

TEST(SimCublasLt, WhatCublasLtHasNoFp8KernelForIsRefused) {
  cublasLtMatmulHeuristicResult_t best{};
  int found = -1;
  // A not transposed (the "NN" layout).
  EXPECT_EQ(Lt(16, 16, 16, CUDA_R_8F_E4M3, CUDA_R_8F_E4M3, CUDA_R_16BF, false).heuristic(&best, &found),
            CUBLAS_STATUS_NOT_SUPPORTED);
  EXPECT_EQ(found, 0);
  // A size that is not a multiple of 16.
  EXPECT_EQ(Lt(16, 24, 16, CUDA_R_8F_E4M3, CUDA_R_8F_E4M3, CUDA_R_16BF, true).heuristic(&best, &found),
            CUBLAS_STATUS_NOT_SUPPORTED);
  // Both inputs E5M2; an FP8 output (not modeled); one FP8 input beside a BF16 one.
  EXPECT_EQ(Lt(16, 16, 16, CUDA_R_8F_E5M2, CUDA_R_8F_E5M2, CUDA_R_16BF, true).heuristic(&best, &found),
            CUBLAS_STATUS_NOT_SUPPORTED);
  EXPECT_EQ(Lt(16, 16, 16, CUDA_R_8F_E4M3, CUDA_R_8F_E4M3, CUDA_R_8F_E4M3, true).heuristic(&best, &found),
            CUBLAS_STATUS_NOT_SUPPORTED);
  EXPECT_EQ(Lt(16, 16, 16, CUDA_R_8F_E4M3, CUDA_R_16BF, CUDA_R_16BF, true).heuristic(&best, &found),
            CUBLAS_STATUS_NOT_SUPPORTED);
  // E4M3 with E5M2 is one of cuBLASLt's FP8 combinations.
  EXPECT_EQ(Lt(16, 16, 16, CUDA_R_8F_E4M3, CUDA_R_8F_E5M2, CUDA_R_32F, true).heuristic(&best, &found),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(found, 1);
  // A matmul run without the heuristic's approval is refused the same way, and nothing is written.
  Lt nn(16, 16, 16, CUDA_R_8F_E4M3, CUDA_R_8F_E4M3, CUDA_R_16BF, false);
  std::vector<std::uint8_t> A(256, kOne), B(256, kOne);
  std::vector<std::uint16_t> D(256, 0x1234);
  const float one = 1, zero = 0;
  EXPECT_EQ(cublasLtMatmul(nn.handle, nn.desc, &one, A.data(), nn.a, B.data(), nn.b, &zero, D.data(), nn.d, D.data(),
                           nn.d, nullptr, nullptr, 0, nullptr),
            CUBLAS_STATUS_NOT_SUPPORTED);
  EXPECT_EQ(D[0], 0x1234);
}

TEST(SimCublasLt, AttributesItDoesNotModelAndDescriptorsItDidNotMakeAreRefused) {
  cublasLtMatmulDesc_t desc = nullptr;
  ASSERT_EQ(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), CUBLAS_STATUS_SUCCESS);
  const float* scale = nullptr;
  EXPECT_EQ(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &scale, sizeof scale),
            CUBLAS_STATUS_NOT_SUPPORTED);
  const int32_t bad_op = 7, op_t = CUBLAS_OP_T;
  EXPECT_EQ(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &bad_op, sizeof bad_op),
            CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_t, 2), CUBLAS_STATUS_INVALID_VALUE);
  cublasLtMatmulDescDestroy(desc);
  cublasLtMatmulDescOpaque_t zeroed{};  // never made by cublasLtMatmulDescCreate
  EXPECT_EQ(cublasLtMatmulDescSetAttribute(&zeroed, CUBLASLT_MATMUL_DESC_TRANSA, &op_t, sizeof op_t),
            CUBLAS_STATUS_INVALID_VALUE);
  cublasLtMatrixLayout_t layout = nullptr;
  EXPECT_EQ(cublasLtMatrixLayoutCreate(&layout, CUDA_R_16BF, 32, 16, 16), CUBLAS_STATUS_INVALID_VALUE);  // ld < rows
}

}  // namespace
