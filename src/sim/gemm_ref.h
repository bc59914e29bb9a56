// The GEMM the cuBLAS and cuBLASLt stand-ins compute for real: column-major, as cuBLAS, accumulated in
// float. Pure (no clock, no fault: the stand-ins time the call themselves).
#pragma once

#include <library_types.h>

#include <cstddef>

namespace greyhound::sim {

// Element types the stand-ins read: FP32, FP16, BF16, and FP8 (E4M3, E5M2) as inputs only.
bool gemm_input_type(cudaDataType t);
bool gemm_output_type(cudaDataType t);  // FP32, FP16, BF16
float load_element(const void* p, cudaDataType t, std::size_t i);
void store_element(void* p, cudaDataType t, std::size_t i, float v);

// One operand: its elements, type, leading dimension and whether the GEMM reads it transposed.
struct GemmOperand {
  const void* data;
  cudaDataType type;
  long long ld;
  bool transposed = false;
};

// D = alpha op(A) op(B) + beta C, m x n, k the inner dimension; C is read only when beta != 0 and may be D
// (then with D's layout). The caller has checked the dimensions and types.
void reference_gemm(int m, int n, int k, float alpha, const GemmOperand& a, const GemmOperand& b, float beta,
                    const GemmOperand& c, void* d, cudaDataType d_type, long long ldd);

}  // namespace greyhound::sim
