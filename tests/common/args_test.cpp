#include <gtest/gtest.h>

#include "common/args.h"
#include "common/text.h"

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
  // Numbers as people write them: no hexadecimal, no blanks, no infinity.
  EXPECT_EQ(msg([] { Args({"--x", "0x10"}, {"x"}, {}).number("x", 0); }), "--x: '0x10' is not a finite number");
  EXPECT_EQ(msg([] { Args({"--x", " 5"}, {"x"}, {}).number("x", 0); }), "--x: ' 5' is not a finite number");
  EXPECT_EQ(msg([] { Args({"--x", "inf"}, {"x"}, {}).number("x", 0); }), "--x: 'inf' is not a finite number");
  EXPECT_EQ(msg([] { Args({"--tp", " 5"}, {"tp"}, {}).integer("tp"); }), "--tp: ' 5' is not an integer");
  EXPECT_EQ(Args({"--x", "-2.5e-1"}, {"x"}, {}).number("x", 0), -0.25);
}

TEST(Text, ParseDecimal) {
  for (const char* ok : {"5", "-5", "+5", "5.", ".5", "5.25", "1e3", "1E-3", "-0.0", "1e-400"}) {
    EXPECT_TRUE(parse_decimal(ok)) << ok;
  }
  for (const char* bad : {"", ".", "-", "e3", "1e", "1e+", "0x10", "1,", " 1", "1 ", "inf", "nan", "1e999", "1..2", "--1"}) {
    EXPECT_FALSE(parse_decimal(bad)) << bad;
  }
  EXPECT_EQ(*parse_decimal("12.5e1"), 125.0);
}

TEST(Text, ParseIntegerReadsWhatGreyhoundWrites) {
  EXPECT_EQ(parse_integer("0"), 0);
  EXPECT_EQ(parse_integer("42"), 42);
  EXPECT_EQ(parse_integer("-7"), -7);
  EXPECT_EQ(parse_integer("9223372036854775807"), INT64_MAX);
  for (const char* bad : {"", "+4", " 4", "4 ", "\t4", "4\n", "0x10", "4.0", "4e2", "1,", "--4", "-",
                          "9223372036854775808", "inf"}) {
    EXPECT_FALSE(parse_integer(bad)) << "'" << bad << "'";
  }
}

TEST(Text, PrintableQuotesInPart) {
  EXPECT_EQ(printable("ab\ncd", 10), "ab?cd");
  EXPECT_EQ(printable(std::string(100, 'a'), 4), "aaaa...");
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
