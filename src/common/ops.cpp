#include "greyhound/ops.h"

#include <array>

namespace greyhound {
namespace {

// Indexed by ncclDataType_t of nccl.h 2.28.
constexpr std::array<std::string_view, 12> kDtypeNames = {
    "int8", "uint8", "int32", "uint32", "int64", "uint64", "float16", "float32", "float64", "bfloat16",
    "float8e4m3", "float8e5m2",
};

}  // namespace

std::string_view op_name(Op op) noexcept {
  const OpInfo* info = op_info(op);
  return info ? info->name : std::string_view("Unknown");
}

std::string_view dtype_name(std::uint8_t dtype) noexcept {
  return dtype < kDtypeNames.size() ? kDtypeNames[dtype] : std::string_view("unknown");
}

}  // namespace greyhound
