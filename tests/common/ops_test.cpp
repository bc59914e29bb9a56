// Pins every op's number (part of the ring record format), name and kind, and the predicates the agent and
// the tools filter records with, including for values no table row covers.
#include "greyhound/ops.h"

#include <gtest/gtest.h>

#include <string_view>
#include <vector>

namespace greyhound {
namespace {

struct Expected {
  int value;
  std::string_view name;
  OpKind kind;
  bool creates_comm;
};

const std::vector<Expected> kExpected = {
    {0, "None", OpKind::kNone, false},
    {1, "AllReduce", OpKind::kCollective, false},
    {2, "AllGather", OpKind::kCollective, false},
    {3, "ReduceScatter", OpKind::kCollective, false},
    {4, "Broadcast", OpKind::kCollective, false},
    {5, "Bcast", OpKind::kCollective, false},
    {6, "Reduce", OpKind::kCollective, false},
    {7, "AlltoAll", OpKind::kCollective, false},
    {8, "Gather", OpKind::kCollective, false},
    {9, "Scatter", OpKind::kCollective, false},
    {10, "Send", OpKind::kP2p, false},
    {11, "Recv", OpKind::kP2p, false},
    {12, "GroupStart", OpKind::kGroup, false},
    {13, "GroupEnd", OpKind::kGroup, false},
    {14, "GetUniqueId", OpKind::kLifecycle, false},
    {15, "CommInitRank", OpKind::kLifecycle, true},
    {16, "CommInitRankConfig", OpKind::kLifecycle, true},
    {17, "CommInitAll", OpKind::kLifecycle, true},
    {18, "CommSplit", OpKind::kLifecycle, true},
    {19, "CommDestroy", OpKind::kLifecycle, false},
    {20, "CommAbort", OpKind::kLifecycle, false},
    {21, "CommFinalize", OpKind::kLifecycle, false},
    {22, "CommInitRankScalable", OpKind::kLifecycle, true},
    {23, "CommShrink", OpKind::kLifecycle, true},
    {24, "Timing", OpKind::kTiming, false},
};

TEST(Ops, EveryOpHasItsNumberNameAndKind) {
  ASSERT_EQ(kExpected.size(), static_cast<std::size_t>(kOpCount));
  for (const Expected& e : kExpected) {
    const Op op = static_cast<Op>(e.value);
    EXPECT_EQ(op_name(op), e.name) << e.value;
    EXPECT_EQ(op_kind(op), e.kind) << e.name;
    EXPECT_EQ(op_is_collective(op), e.kind == OpKind::kCollective) << e.name;
    EXPECT_EQ(op_is_p2p(op), e.kind == OpKind::kP2p) << e.name;
    EXPECT_EQ(op_is_group(op), e.kind == OpKind::kGroup) << e.name;
    EXPECT_EQ(op_is_lifecycle(op), e.kind == OpKind::kLifecycle) << e.name;
    EXPECT_EQ(op_moves_data(op), e.kind == OpKind::kCollective || e.kind == OpKind::kP2p) << e.name;
    EXPECT_EQ(op_creates_comm(op), e.creates_comm) << e.name;
  }
  EXPECT_EQ(static_cast<int>(Op::kSend), 10);
  EXPECT_EQ(static_cast<int>(Op::kTiming), 24);
}

TEST(Ops, ValuesOutsideTheTableHaveNoProperty) {
  for (int v = kOpCount; v < 256; ++v) {
    const Op op = static_cast<Op>(v);
    EXPECT_EQ(op_name(op), "Unknown") << v;
    EXPECT_EQ(op_kind(op), OpKind::kNone) << v;
    EXPECT_FALSE(op_is_collective(op) || op_is_p2p(op) || op_is_group(op) || op_is_lifecycle(op) ||
                 op_moves_data(op) || op_creates_comm(op))
        << v;
  }
}

}  // namespace
}  // namespace greyhound
