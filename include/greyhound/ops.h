// NCCL entry points that libgreyhound.so records, and names as NCCL spells them without the prefix.
// The numeric values are part of the shared-memory record format (RingVersion): append, never renumber.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace greyhound {

enum class Op : std::uint8_t {
  kNone = 0,
  kAllReduce = 1,
  kAllGather = 2,
  kReduceScatter = 3,
  kBroadcast = 4,
  kBcast = 5,
  kReduce = 6,
  kAlltoAll = 7,
  kGather = 8,
  kScatter = 9,
  kSend = 10,
  kRecv = 11,
  kGroupStart = 12,
  kGroupEnd = 13,
  kGetUniqueId = 14,
  kCommInitRank = 15,
  kCommInitRankConfig = 16,
  kCommInitAll = 17,
  kCommSplit = 18,
  kCommDestroy = 19,
  kCommAbort = 20,
  kCommFinalize = 21,
  kCommInitRankScalable = 22,
  kCommShrink = 23,
  kTiming = 24,  // not an NCCL call: the device time of an earlier record (see ring_layout.h)
};
inline constexpr int kOpCount = 25;

// "AllReduce", "Send", ...; "None" for kNone and "Unknown" for values outside the table.
std::string_view op_name(Op op) noexcept;

// Collectives and point-to-point calls move data; the rest (group brackets, lifecycle) do not.
constexpr bool op_is_collective(Op op) noexcept {
  return op >= Op::kAllReduce && op <= Op::kScatter;
}
constexpr bool op_is_p2p(Op op) noexcept { return op == Op::kSend || op == Op::kRecv; }
constexpr bool op_moves_data(Op op) noexcept { return op_is_collective(op) || op_is_p2p(op); }
constexpr bool op_creates_comm(Op op) noexcept {
  return op == Op::kCommInitRank || op == Op::kCommInitRankConfig || op == Op::kCommInitAll ||
         op == Op::kCommSplit || op == Op::kCommInitRankScalable || op == Op::kCommShrink;
}

// NCCL datatype codes (ncclDataType_t values of nccl.h 2.28) and their names and sizes, so that readers
// of records need not include nccl.h.
std::string_view dtype_name(std::uint8_t dtype) noexcept;   // "float32", "bfloat16", ... or "unknown"
inline constexpr std::uint8_t kDtypeSizes[12] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
// Bytes per element, 0 when unknown. Inline: the hook's hot path uses it.
constexpr std::size_t dtype_size(std::uint8_t dtype) noexcept { return dtype < 12 ? kDtypeSizes[dtype] : 0; }

}  // namespace greyhound
