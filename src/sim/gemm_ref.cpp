#include "sim/gemm_ref.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "sim/reduce.h"

namespace greyhound::sim {

bool gemm_input_type(cudaDataType t) {
  return gemm_output_type(t) || t == CUDA_R_8F_E4M3 || t == CUDA_R_8F_E5M2;
}

bool gemm_output_type(cudaDataType t) { return t == CUDA_R_32F || t == CUDA_R_16F || t == CUDA_R_16BF; }

float load_element(const void* p, cudaDataType t, std::size_t i) {
  switch (t) {
    case CUDA_R_32F: return static_cast<const float*>(p)[i];
    case CUDA_R_16F: return half_to_float(static_cast<const std::uint16_t*>(p)[i]);
    case CUDA_R_16BF: return bf16_to_float(static_cast<const std::uint16_t*>(p)[i]);
    case CUDA_R_8F_E4M3: return fp8_e4m3_to_float(static_cast<const std::uint8_t*>(p)[i]);
    case CUDA_R_8F_E5M2: return fp8_e5m2_to_float(static_cast<const std::uint8_t*>(p)[i]);
    default: return 0.0f;
  }
}

void store_element(void* p, cudaDataType t, std::size_t i, float v) {
  switch (t) {
    case CUDA_R_32F: static_cast<float*>(p)[i] = v; break;
    case CUDA_R_16F: static_cast<std::uint16_t*>(p)[i] = float_to_half(v); break;
    case CUDA_R_16BF: static_cast<std::uint16_t*>(p)[i] = float_to_bf16(v); break;
    default: break;
  }
}

void reference_gemm(int m, int n, int k, float alpha, const GemmOperand& a, const GemmOperand& b, float beta,
                    const GemmOperand& c, void* d, cudaDataType d_type, long long ldd) {
  const auto at = [](long long row, long long col, long long ld) {
    return static_cast<std::size_t>(row) + static_cast<std::size_t>(col) * static_cast<std::size_t>(ld);
  };
  std::vector<float> col(static_cast<std::size_t>(m));
  std::vector<float> acol(static_cast<std::size_t>(k) * static_cast<std::size_t>(m));
  // op(A) as a dense m x k float matrix (column-major), read once.
  for (int p = 0; p < k; ++p) {
    for (int i = 0; i < m; ++i) {
      acol[static_cast<std::size_t>(p) * m + i] = load_element(a.data, a.type, a.transposed ? at(p, i, a.ld) : at(i, p, a.ld));
    }
  }
  for (int j = 0; j < n; ++j) {
    std::fill(col.begin(), col.end(), 0.0f);
    for (int p = 0; p < k; ++p) {
      const float bv = load_element(b.data, b.type, b.transposed ? at(j, p, b.ld) : at(p, j, b.ld));
      if (bv == 0.0f) continue;
      const float* av = &acol[static_cast<std::size_t>(p) * m];
      for (int i = 0; i < m; ++i) col[static_cast<std::size_t>(i)] += av[i] * bv;
    }
    // C's column is read before D's is written (C may be D).
    for (int i = 0; i < m; ++i) {
      const float prev = beta == 0.0f ? 0.0f : beta * load_element(c.data, c.type, at(i, j, c.ld));
      store_element(d, d_type, at(i, j, ldd), alpha * col[static_cast<std::size_t>(i)] + prev);
    }
  }
}

}  // namespace greyhound::sim
