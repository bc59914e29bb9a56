// A group's hash as the job store reads it (parse_group_hash): what the agents write reads back as written;
// an id, a size or a member that is not one refuses the group; numbers are read strictly.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "store/job_store.h"

namespace {

using greyhound::RedisReply;
using greyhound::store::parse_group_hash;

RedisReply hash(const std::vector<std::pair<std::string, std::string>>& fields) {
  RedisReply r;
  r.type = RedisReply::Type::kArray;
  for (const auto& [k, v] : fields) {
    RedisReply f, x;
    f.type = x.type = RedisReply::Type::kString;
    f.str = k;
    x.str = v;
    r.elements.push_back(f);
    r.elements.push_back(x);
  }
  return r;
}

}  // namespace

TEST(GroupHash, WhatTheAgentsWriteReadsBackAsWritten) {
  const auto e = parse_group_hash("00000000000000d0", hash({{"size", "2"}, {"member:0", "4"}, {"member:1", "6"},
                                                            {"created_by", "\"CommSplit\""},
                                                            {"ops:4", R"({"AllReduce:1048576":12})"}}));
  ASSERT_TRUE(e.value) << e.error;
  EXPECT_EQ(e.error, "");
  EXPECT_EQ(e.value->id, 0xd0u);
  EXPECT_EQ(e.value->size, 2);
  EXPECT_EQ(e.value->members, (std::map<int, int>{{0, 4}, {1, 6}}));
  EXPECT_TRUE(e.value->complete());
  EXPECT_EQ(e.value->created_by, "CommSplit");
  EXPECT_EQ(e.value->ops.at(4).at("AllReduce:1048576"), 12u);
}

TEST(GroupHash, NumbersAreReadStrictly) {
  // strtol took leading blanks and a '+': " 2" was a size and "member:+1" group rank 1.
  for (const auto& [k, v] : std::vector<std::pair<std::string, std::string>>{
           {"size", " 2"}, {"size", "+2"}, {"size", "2 "}, {"size", "0x2"}, {"member:+1", "6"}, {"member: 1", "6"},
           {"member:1", " 6"}, {"member:1", "6.0"}, {"member:1", "-6"}, {"member:1", "99999999999999999999"}}) {
    const auto e = parse_group_hash("00000000000000d0", hash({{"member:0", "4"}, {k, v}}));
    EXPECT_FALSE(e.value) << k << " = '" << v << "'";
    EXPECT_NE(e.error, "") << k;
  }
  // An op count under a rank that is not one is left out, the group kept.
  const auto e = parse_group_hash("00000000000000d0", hash({{"member:0", "4"}, {"ops: 4", R"({"Send:8":1})"}}));
  ASSERT_TRUE(e.value);
  EXPECT_TRUE(e.value->ops.empty());
  EXPECT_NE(e.error, "");
}

TEST(GroupHash, AMemberBeyondTheSizeOrABadIdRefusesTheGroup) {
  EXPECT_FALSE(parse_group_hash("00000000000000d0", hash({{"size", "2"}, {"member:2", "4"}})).value);
  const auto bad_id = parse_group_hash("not-hex", hash({{"size", "1"}, {"member:0", "4"}}));
  EXPECT_FALSE(bad_id.value);
  EXPECT_EQ(bad_id.error, "not a group id");
}

TEST(GroupHash, ANcclRingThatIsNotOneIsLeftOutWithItsReason) {
  const auto read = [](const std::string& v) {
    return parse_group_hash("00000000000000d0", hash({{"size", "4"}, {"member:0", "4"}, {"nccl_ring", v}}));
  };
  auto e = read(R"({"group_rank":2,"segment":[2,3],"crosses_nodes":true,"channels":8})");
  ASSERT_TRUE(e.value && e.value->nccl_ring) << e.error;
  EXPECT_EQ(e.value->nccl_ring->segment, (std::vector<int>{2, 3}));
  EXPECT_TRUE(e.value->nccl_ring->crosses_nodes);
  EXPECT_FALSE(e.value->nccl_ring->tree);  // no tree graph in the dump
  // With the tree graph's chain and pattern.
  e = read(R"({"group_rank":2,"segment":[2,3],"crosses_nodes":true,"channels":8,)"
           R"("tree":{"pattern":"split","segment":[3,2],"crosses_nodes":true}})");
  ASSERT_TRUE(e.value && e.value->nccl_ring && e.value->nccl_ring->tree) << e.error;
  EXPECT_EQ(e.value->nccl_ring->tree->pattern, greyhound::validate::NcclTreePattern::kSplit);
  EXPECT_EQ(e.value->nccl_ring->tree->segment, (std::vector<int>{3, 2}));
  EXPECT_TRUE(e.value->nccl_ring->tree->crosses_nodes);
  EXPECT_EQ(greyhound::parse_nccl_ring_dump(greyhound::to_json(*e.value->nccl_ring).dump()).value(), *e.value->nccl_ring);
  for (const auto& [v, why] : std::vector<std::pair<std::string, std::string>>{
           {"[1]", "nccl_ring: not a JSON object"},
           {R"({"group_rank":-1,"segment":[0],"crosses_nodes":true,"channels":1})", "nccl_ring: group_rank: not a rank"},
           {R"({"group_rank":0,"segment":[],"crosses_nodes":true,"channels":1})",
            "nccl_ring: segment: not a list of 1 to 4096 ranks"},
           {R"({"group_rank":0,"segment":[0,0],"crosses_nodes":true,"channels":1})", "nccl_ring: segment: not distinct ranks"},
           {R"({"group_rank":0,"segment":[0,1.5],"crosses_nodes":true,"channels":1})", "nccl_ring: segment: not distinct ranks"},
           {R"({"group_rank":3,"segment":[0,1],"crosses_nodes":true,"channels":1})",
            "nccl_ring: segment: does not hold group_rank"},
           {R"({"group_rank":0,"segment":[0],"crosses_nodes":1,"channels":1})", "nccl_ring: crosses_nodes: not true or false"},
           {R"({"group_rank":0,"segment":[0],"crosses_nodes":true,"channels":0})", "nccl_ring: channels: not 1 to 1024"},
           {R"({"group_rank":0,"segment":[0,4],"crosses_nodes":true,"channels":1})", "nccl_ring: a rank beyond the group's size"},
           {R"({"group_rank":0,"segment":[0,1],"crosses_nodes":true,"channels":1,"tree":[0,1]})",
            "nccl_ring: tree: not a JSON object"},
           {R"({"group_rank":0,"segment":[0,1],"crosses_nodes":true,"channels":1,"tree":{"pattern":"ring","segment":[1,0],"crosses_nodes":true}})",
            "nccl_ring: tree.pattern: not \"balanced\", \"split\" or \"tree\""},
           {R"({"group_rank":0,"segment":[0,1],"crosses_nodes":true,"channels":1,"tree":{"segment":[1,0],"crosses_nodes":true}})",
            "nccl_ring: tree.pattern: not \"balanced\", \"split\" or \"tree\""},
           {R"({"group_rank":0,"segment":[0,1],"crosses_nodes":true,"channels":1,"tree":{"pattern":"split","segment":[1],"crosses_nodes":true}})",
            "nccl_ring: tree.segment: not a list of the ring segment's ranks"},
           {R"({"group_rank":0,"segment":[0,1],"crosses_nodes":true,"channels":1,"tree":{"pattern":"split","segment":[1,2],"crosses_nodes":true}})",
            "nccl_ring: tree.segment: not the ring segment's ranks"},
           {R"({"group_rank":0,"segment":[0,1],"crosses_nodes":true,"channels":1,"tree":{"pattern":"split","segment":[1,1],"crosses_nodes":true}})",
            "nccl_ring: tree.segment: not the ring segment's ranks"},
           {R"({"group_rank":0,"segment":[0,1],"crosses_nodes":true,"channels":1,"tree":{"pattern":"split","segment":[1,18446744073709551615],"crosses_nodes":true}})",
            "nccl_ring: tree.segment: not the ring segment's ranks"},
           {R"({"group_rank":0,"segment":[0,1],"crosses_nodes":true,"channels":1,"tree":{"pattern":"tree","segment":[1,0]}})",
            "nccl_ring: tree.crosses_nodes: not true or false"}}) {
    e = read(v);
    ASSERT_TRUE(e.value) << v;  // the group itself is kept
    EXPECT_FALSE(e.value->nccl_ring) << v;
    EXPECT_EQ(e.error, why) << v;
  }
}
