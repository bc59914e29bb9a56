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

std::optional<Op> op_of_name(std::string_view name) noexcept {
  for (const OpInfo& info : kOpTable) {
    if (info.name == name) return info.op;
  }
  return std::nullopt;
}

double bus_bandwidth_factor(Op op, int ranks) noexcept {
  if (ranks < 1 || !op_moves_data(op)) return 0.0;
  const double n = ranks;
  switch (op) {
    case Op::kAllReduce: return 2.0 * (n - 1) / n;
    case Op::kAllGather:
    case Op::kReduceScatter:
    case Op::kAlltoAll: return (n - 1) / n;
    default: return 1.0;
  }
}

std::string_view dtype_name(std::uint8_t dtype) noexcept {
  return dtype < kDtypeNames.size() ? kDtypeNames[dtype] : std::string_view("unknown");
}

}  // namespace greyhound
