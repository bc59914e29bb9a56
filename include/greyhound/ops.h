// NCCL entry points that libgreyhound.so records, and names as NCCL spells them without the prefix.
// The numeric values are part of the shared-memory record format (RingVersion): append, never renumber.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <optional>
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

// What an op is. Collectives and point-to-point calls move data; group brackets, lifecycle calls (unique id,
// communicator creation and teardown) and timing records do not.
enum class OpKind : std::uint8_t { kNone, kCollective, kP2p, kGroup, kLifecycle, kTiming };

struct OpInfo {
  Op op;
  std::string_view name;  // as NCCL spells it without the prefix
  OpKind kind;
  bool creates_comm;  // a lifecycle call that makes a new communicator (its record carries the new group id)
};

// One row per Op, in numeric order: a new op is one enum value, one row and kOpCount + 1.
inline constexpr OpInfo kOpTable[] = {
    {Op::kNone, "None", OpKind::kNone, false},
    {Op::kAllReduce, "AllReduce", OpKind::kCollective, false},
    {Op::kAllGather, "AllGather", OpKind::kCollective, false},
    {Op::kReduceScatter, "ReduceScatter", OpKind::kCollective, false},
    {Op::kBroadcast, "Broadcast", OpKind::kCollective, false},
    {Op::kBcast, "Bcast", OpKind::kCollective, false},
    {Op::kReduce, "Reduce", OpKind::kCollective, false},
    {Op::kAlltoAll, "AlltoAll", OpKind::kCollective, false},
    {Op::kGather, "Gather", OpKind::kCollective, false},
    {Op::kScatter, "Scatter", OpKind::kCollective, false},
    {Op::kSend, "Send", OpKind::kP2p, false},
    {Op::kRecv, "Recv", OpKind::kP2p, false},
    {Op::kGroupStart, "GroupStart", OpKind::kGroup, false},
    {Op::kGroupEnd, "GroupEnd", OpKind::kGroup, false},
    {Op::kGetUniqueId, "GetUniqueId", OpKind::kLifecycle, false},
    {Op::kCommInitRank, "CommInitRank", OpKind::kLifecycle, true},
    {Op::kCommInitRankConfig, "CommInitRankConfig", OpKind::kLifecycle, true},
    {Op::kCommInitAll, "CommInitAll", OpKind::kLifecycle, true},
    {Op::kCommSplit, "CommSplit", OpKind::kLifecycle, true},
    {Op::kCommDestroy, "CommDestroy", OpKind::kLifecycle, false},
    {Op::kCommAbort, "CommAbort", OpKind::kLifecycle, false},
    {Op::kCommFinalize, "CommFinalize", OpKind::kLifecycle, false},
    {Op::kCommInitRankScalable, "CommInitRankScalable", OpKind::kLifecycle, true},
    {Op::kCommShrink, "CommShrink", OpKind::kLifecycle, true},
    {Op::kTiming, "Timing", OpKind::kTiming, false},
};

namespace ops_detail {
constexpr bool table_in_order() {
  for (int i = 0; i < kOpCount; ++i) {
    if (static_cast<int>(kOpTable[i].op) != i) return false;
  }
  return true;
}
}  // namespace ops_detail
static_assert(std::size(kOpTable) == kOpCount, "kOpTable needs one row per Op");
static_assert(ops_detail::table_in_order(), "kOpTable rows must be in the numeric order of Op");

// Values outside the table (a corrupt or newer record) have kind kNone and no property.
constexpr const OpInfo* op_info(Op op) noexcept {
  const auto i = static_cast<std::size_t>(op);
  return i < std::size(kOpTable) ? &kOpTable[i] : nullptr;
}
constexpr OpKind op_kind(Op op) noexcept {
  const OpInfo* info = op_info(op);
  return info ? info->kind : OpKind::kNone;
}

// "AllReduce", "Send", ...; "None" for kNone and "Unknown" for values outside the table.
std::string_view op_name(Op op) noexcept;

constexpr bool op_is_collective(Op op) noexcept { return op_kind(op) == OpKind::kCollective; }
constexpr bool op_is_p2p(Op op) noexcept { return op_kind(op) == OpKind::kP2p; }
constexpr bool op_is_group(Op op) noexcept { return op_kind(op) == OpKind::kGroup; }
constexpr bool op_is_lifecycle(Op op) noexcept { return op_kind(op) == OpKind::kLifecycle; }
constexpr bool op_moves_data(Op op) noexcept { return op_is_collective(op) || op_is_p2p(op); }
constexpr bool op_creates_comm(Op op) noexcept {
  const OpInfo* info = op_info(op);
  return info && info->creates_comm;
}

// The op named `name` ("AllReduce", ...), nullopt for none.
std::optional<Op> op_of_name(std::string_view name) noexcept;

// NCCL's bus-bandwidth factor (its perf tests' busBw = algBw x factor): what a call moves over the busiest
// link of an n-rank ring per byte of its buffer. AllReduce 2 (n - 1) / n; AllGather, ReduceScatter, AlltoAll
// (n - 1) / n; Broadcast, Reduce, Gather, Scatter, Send, Recv 1; 0 for what moves no data or n < 1.
double bus_bandwidth_factor(Op op, int ranks) noexcept;

// NCCL datatype codes (ncclDataType_t values of nccl.h 2.28) and their names and sizes, so that readers
// of records need not include nccl.h.
std::string_view dtype_name(std::uint8_t dtype) noexcept;   // "float32", "bfloat16", ... or "unknown"
inline constexpr std::uint8_t kDtypeSizes[12] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
// Bytes per element, 0 when unknown. Inline: the hook's hot path uses it.
constexpr std::size_t dtype_size(std::uint8_t dtype) noexcept { return dtype < 12 ? kDtypeSizes[dtype] : 0; }

}  // namespace greyhound
