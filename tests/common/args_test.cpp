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
TEST(Args, AByteListIsOneToFourCountsFromOneByteToFourGiB) {
  EXPECT_EQ(byte_list("16777216,33554432", "--sizes"), (std::vector<std::uint64_t>{16777216, 33554432}));
  EXPECT_EQ(byte_list("4294967296", "--sizes"), (std::vector<std::uint64_t>{4294967296ull}));
  for (const char* bad : {"", "x", "1,", ",1", "0", "-1", "4294967297", "1.5"}) {
    try {
      byte_list(bad, "--sizes");
      ADD_FAILURE() << bad;
    } catch (const ArgError& e) {
      EXPECT_NE(std::string(e.what()).find("--sizes: '"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(byte_list("1,2,3,4,5", "--sizes"), ArgError);
}

}  // namespace greyhound
