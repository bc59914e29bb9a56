// Element-wise reductions of the NCCL stand-in over NCCL's datatypes and operators. Pure.
// Half and bfloat16 are reduced in float and rounded to nearest even, as NCCL's kernels do; results are
// bit-identical on every rank because every rank reduces the same inputs in rank order.
#pragma once

#include <cstddef>
#include <cstdint>

namespace greyhound::sim {

enum class RedOp { kSum = 0, kProd = 1, kMax = 2, kMin = 3, kAvg = 4 };

// NCCL datatype codes (ncclDataType_t).
enum DType : int {
  kInt8 = 0, kUint8 = 1, kInt32 = 2, kUint32 = 3, kInt64 = 4, kUint64 = 5,
  kFloat16 = 6, kFloat32 = 7, kFloat64 = 8, kBfloat16 = 9, kFp8E4M3 = 10, kFp8E5M2 = 11,
};

std::size_t dtype_bytes(int dtype);                   // 0 for unsupported
bool reduction_supported(int dtype, int op);          // fp8 and unknown codes are not

// out[i] = op over k of inputs[k][i], k = 0..n_inputs-1 in order; Avg divides the sum by n_inputs
// (integer division for integer types). `out` may alias inputs[0].
void reduce(int dtype, int op, const void* const* inputs, int n_inputs, void* out, std::size_t count);

float half_to_float(std::uint16_t h);
std::uint16_t float_to_half(float f);
float bf16_to_float(std::uint16_t b);
std::uint16_t float_to_bf16(float f);
// FP8 as cuBLASLt and NCCL define it: E4M3 (bias 7, no infinities, S.1111.111 is NaN) and E5M2 (bias 15,
// IEEE-like infinities and NaNs). Exact (every FP8 value is a float).
float fp8_e4m3_to_float(std::uint8_t v);
float fp8_e5m2_to_float(std::uint8_t v);

}  // namespace greyhound::sim
