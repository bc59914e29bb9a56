// The bounded JSON reader: what anyone can write into Redis must not crash, exhaust or stall a reader.
#include "common/bounded_json.h"

#include <gtest/gtest.h>

#include <string>

namespace greyhound::store {
namespace {

std::string nested(int levels) { return std::string(levels, '[') + std::string(levels, ']'); }

TEST(BoundedJson, AcceptsOrdinaryValues) {
  auto j = parse_bounded(R"({"a":[1,2,{"b":"c"}],"d":1.5,"e":null,"f":true})");
  ASSERT_TRUE(j) << j.error();
  EXPECT_EQ((*j)["a"][2]["b"], "c");
  EXPECT_TRUE(parse_bounded(nested(16)));
}

TEST(BoundedJson, RejectsDeepNestingBeforeBuildingATree) {
  // 200k levels in well under 1 MiB: a recursive copy of such a tree overflows the stack.
  auto j = parse_bounded(nested(200000));
  ASSERT_FALSE(j);
  EXPECT_EQ(j.code(), Errc::kInvalid);
  EXPECT_EQ(j.error(), "nested deeper than 16 levels");
  EXPECT_FALSE(parse_bounded(nested(17)));
  EXPECT_FALSE(parse_bounded("{\"a\":" + nested(20) + "}"));
}

TEST(BoundedJson, RejectsOversizedTextsStringsAndMembers) {
  JsonLimits l;
  l.max_bytes = 100;
  EXPECT_EQ(parse_bounded(std::string(101, ' '), l).error(), "value of 101 bytes is too large");
  l = JsonLimits{};
  l.max_string = 8;
  EXPECT_TRUE(parse_bounded("\"12345678\"", l));
  EXPECT_EQ(parse_bounded("\"123456789\"", l).error(), "a string of 9 bytes is too long");
  EXPECT_FALSE(parse_bounded("{\"123456789\":1}", l));  // keys too
  l = JsonLimits{};
  l.max_members = 3;
  EXPECT_TRUE(parse_bounded("[1,2,3]", l));
  EXPECT_EQ(parse_bounded("[1,2,3,4]", l).error(), "an object or array has more than 3 entries");
  EXPECT_FALSE(parse_bounded(R"({"a":1,"b":2,"c":3,"d":4})", l));
}

TEST(BoundedJson, RejectsNonFiniteNumbersAndBadText) {
  EXPECT_FALSE(parse_bounded("1e999"));
  EXPECT_FALSE(parse_bounded("[-1e999]"));
  EXPECT_NE(parse_bounded("{\"a\":").error().find("not valid JSON"), std::string::npos);
  EXPECT_FALSE(parse_bounded(""));
  EXPECT_FALSE(parse_bounded("NaN"));
}

}  // namespace
}  // namespace greyhound::store
