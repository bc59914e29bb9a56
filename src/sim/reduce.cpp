#include "sim/reduce.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

namespace greyhound::sim {
namespace {

template <typename T>
T apply(int op, T a, T b) {
  switch (static_cast<RedOp>(op)) {
    case RedOp::kSum:
    case RedOp::kAvg: return static_cast<T>(a + b);
    case RedOp::kProd: return static_cast<T>(a * b);
    case RedOp::kMax: return std::max(a, b);
    case RedOp::kMin: return std::min(a, b);
  }
  return a;
}

template <typename T>
void reduce_native(int op, const void* const* in, int n, void* out, std::size_t count) {
  auto* o = static_cast<T*>(out);
  for (std::size_t i = 0; i < count; ++i) {
    T acc = static_cast<const T*>(in[0])[i];
    for (int k = 1; k < n; ++k) acc = apply<T>(op, acc, static_cast<const T*>(in[k])[i]);
    if (static_cast<RedOp>(op) == RedOp::kAvg) acc = static_cast<T>(acc / static_cast<T>(n));
    o[i] = acc;
  }
}

template <float (*ToF)(std::uint16_t), std::uint16_t (*FromF)(float)>
void reduce_16(int op, const void* const* in, int n, void* out, std::size_t count) {
  auto* o = static_cast<std::uint16_t*>(out);
  for (std::size_t i = 0; i < count; ++i) {
    float acc = ToF(static_cast<const std::uint16_t*>(in[0])[i]);
    for (int k = 1; k < n; ++k) acc = apply<float>(op, acc, ToF(static_cast<const std::uint16_t*>(in[k])[i]));
    if (static_cast<RedOp>(op) == RedOp::kAvg) acc /= static_cast<float>(n);
    o[i] = FromF(acc);
  }
}

}  // namespace

std::size_t dtype_bytes(int dtype) {
  switch (dtype) {
    case kInt8: case kUint8: case kFp8E4M3: case kFp8E5M2: return 1;
    case kFloat16: case kBfloat16: return 2;
    case kInt32: case kUint32: case kFloat32: return 4;
    case kInt64: case kUint64: case kFloat64: return 8;
    default: return 0;
  }
}

bool reduction_supported(int dtype, int op) {
  return op >= 0 && op <= 4 && dtype >= kInt8 && dtype <= kBfloat16;
}

float half_to_float(std::uint16_t h) {
  const std::uint32_t sign = (h & 0x8000u) << 16;
  std::uint32_t exp = (h >> 10) & 0x1f;
  std::uint32_t mant = h & 0x3ffu;
  std::uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      exp = 127 - 15 + 1;
      while ((mant & 0x400u) == 0) {
        mant <<= 1;
        --exp;
      }
      mant &= 0x3ffu;
      bits = sign | (exp << 23) | (mant << 13);
    }
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

std::uint16_t float_to_half(float f) {
  std::uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  const std::uint16_t sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
  const std::uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // inf or nan
    return static_cast<std::uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
  }
  if (abs >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // overflow -> inf
  if (abs < 0x38800000u) {  // subnormal half (or zero): round to nearest even
    if (abs < 0x33000000u) return sign;
    const std::uint32_t e = abs >> 23;
    const std::uint32_t m = (abs & 0x7fffffu) | 0x800000u;
    const std::uint32_t shift = 126 - e;  // 14 + (113 - e)
    std::uint32_t r = m >> shift;
    const std::uint32_t rem = m & ((1u << shift) - 1);
    const std::uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (r & 1u))) ++r;
    return static_cast<std::uint16_t>(sign | r);
  }
  std::uint32_t r = abs - 0x38000000u;  // rebias exponent 127 -> 15
  const std::uint32_t rem = r & 0x1fffu;
  r >>= 13;
  if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) ++r;
  return static_cast<std::uint16_t>(sign | r);
}

float bf16_to_float(std::uint16_t b) {
  const std::uint32_t bits = static_cast<std::uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

std::uint16_t float_to_bf16(float f) {
  std::uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((x >> 16) | 0x40u);  // quiet nan
  const std::uint32_t rounding = 0x7fffu + ((x >> 16) & 1u);
  return static_cast<std::uint16_t>((x + rounding) >> 16);
}

void reduce(int dtype, int op, const void* const* in, int n, void* out, std::size_t count) {
  switch (dtype) {
    case kInt8: reduce_native<std::int8_t>(op, in, n, out, count); break;
    case kUint8: reduce_native<std::uint8_t>(op, in, n, out, count); break;
    case kInt32: reduce_native<std::int32_t>(op, in, n, out, count); break;
    case kUint32: reduce_native<std::uint32_t>(op, in, n, out, count); break;
    case kInt64: reduce_native<std::int64_t>(op, in, n, out, count); break;
    case kUint64: reduce_native<std::uint64_t>(op, in, n, out, count); break;
    case kFloat16: reduce_16<half_to_float, float_to_half>(op, in, n, out, count); break;
    case kFloat32: reduce_native<float>(op, in, n, out, count); break;
    case kFloat64: reduce_native<double>(op, in, n, out, count); break;
    case kBfloat16: reduce_16<bf16_to_float, float_to_bf16>(op, in, n, out, count); break;
    default: break;
  }
}

float fp8_e4m3_to_float(std::uint8_t v) {
  const float sign = (v & 0x80u) != 0 ? -1.0f : 1.0f;
  const int exp = (v >> 3) & 0xf;
  const int mant = v & 0x7;
  if (exp == 0xf && mant == 0x7) return std::numeric_limits<float>::quiet_NaN();
  if (exp == 0) return sign * std::ldexp(static_cast<float>(mant), -9);  // subnormal: mant / 8 * 2^-6
  return sign * std::ldexp(static_cast<float>(8 + mant), exp - 7 - 3);
}

float fp8_e5m2_to_float(std::uint8_t v) {
  const float sign = (v & 0x80u) != 0 ? -1.0f : 1.0f;
  const int exp = (v >> 2) & 0x1f;
  const int mant = v & 0x3;
  if (exp == 0x1f) return mant == 0 ? sign * std::numeric_limits<float>::infinity() : std::numeric_limits<float>::quiet_NaN();
  if (exp == 0) return sign * std::ldexp(static_cast<float>(mant), -16);  // subnormal: mant / 4 * 2^-14
  return sign * std::ldexp(static_cast<float>(4 + mant), exp - 15 - 2);
}

}  // namespace greyhound::sim
