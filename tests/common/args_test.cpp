#include <gtest/gtest.h>

#include "common/args.h"

namespace greyhound {
namespace {

TEST(Args, ValuesFlagsAndRest) {
  const Args a({"--tp", "2", "--name=x", "--verbose", "--", "cmd", "--tp"}, {"tp", "name"}, {"verbose"});
  EXPECT_EQ(a.integer("tp"), 2);
  EXPECT_EQ(a.str("name"), "x");
  EXPECT_TRUE(a.flag("verbose"));
  EXPECT_EQ(a.rest(), (std::vector<std::string>{"cmd", "--tp"}));
  EXPECT_EQ(a.integer("missing", 7), 7);
}

TEST(Args, StopsAtPositionalWhenAsked) {
  const Args a({"--job", "j", "torchrun", "--nproc", "8"}, {"job"}, {}, true);
  EXPECT_EQ(a.str("job"), "j");
  EXPECT_EQ(a.rest(), (std::vector<std::string>{"torchrun", "--nproc", "8"}));
}

TEST(Args, ErrorsNameTheFlag) {
  auto msg = [](auto f) {
    try {
      f();
    } catch (const ArgError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(msg([] { Args({"--nope"}, {"tp"}, {}); }), "unknown flag --nope");
  EXPECT_EQ(msg([] { Args({"--tp"}, {"tp"}, {}); }), "--tp needs a value");
  EXPECT_EQ(msg([] { Args({"--tp", "x"}, {"tp"}, {}).integer("tp"); }), "--tp: 'x' is not an integer");
  EXPECT_EQ(msg([] { Args({}, {"tp"}, {}).str("tp"); }), "--tp is required");
  EXPECT_EQ(msg([] { Args({"--tp", "9"}, {"tp"}, {}).integer_in("tp", 1, 1, 4); }), "--tp: 9 is outside [1, 4]");
  EXPECT_EQ(msg([] { parse_number_list("1,a", "--times"); }), "--times: 'a' is not a finite number");
}

}  // namespace
}  // namespace greyhound
