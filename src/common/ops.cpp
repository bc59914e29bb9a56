#include "greyhound/ops.h"

#include <array>

namespace greyhound {
namespace {

constexpr std::array<std::string_view, kOpCount> kOpNames = {
    "None",          "AllReduce",         "AllGather",    "ReduceScatter", "Broadcast",
    "Bcast",         "Reduce",            "AlltoAll",     "Gather",        "Scatter",
    "Send",          "Recv",              "GroupStart",   "GroupEnd",      "GetUniqueId",
    "CommInitRank",  "CommInitRankConfig", "CommInitAll", "CommSplit",     "CommDestroy",
    "CommAbort",     "CommFinalize",      "CommInitRankScalable", "CommShrink",
};

struct DtypeInfo {
  std::string_view name;
  std::size_t size;
};
// Indexed by ncclDataType_t of nccl.h 2.28.
constexpr std::array<DtypeInfo, 12> kDtypes = {{
    {"int8", 1}, {"uint8", 1}, {"int32", 4}, {"uint32", 4}, {"int64", 8}, {"uint64", 8},
    {"float16", 2}, {"float32", 4}, {"float64", 8}, {"bfloat16", 2}, {"float8e4m3", 1},
    {"float8e5m2", 1},
}};

}  // namespace

std::string_view op_name(Op op) noexcept {
  const auto i = static_cast<std::size_t>(op);
  return i < kOpNames.size() ? kOpNames[i] : std::string_view("Unknown");
}

std::optional<Op> op_from_name(std::string_view name) noexcept {
  for (std::size_t i = 0; i < kOpNames.size(); ++i) {
    if (kOpNames[i] == name) return static_cast<Op>(i);
  }
  return std::nullopt;
}

std::string_view dtype_name(std::uint8_t dtype) noexcept {
  return dtype < kDtypes.size() ? kDtypes[dtype].name : std::string_view("unknown");
}

std::size_t dtype_size(std::uint8_t dtype) noexcept {
  return dtype < kDtypes.size() ? kDtypes[dtype].size : 0;
}

}  // namespace greyhound
