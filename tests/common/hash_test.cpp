// Pins mix64 and splitmix64 to the reference splitmix64 outputs: group ids and op symbols computed by
// different binaries must agree, so any change here is a format change.
#include "greyhound/hash.h"

#include <gtest/gtest.h>

namespace greyhound {
namespace {

TEST(Hash, Mix64IsTheSplitmix64Finaliser) {
  EXPECT_EQ(mix64(0), 0u);
  EXPECT_EQ(mix64(1), 0x5692161d100b05e5ull);
  EXPECT_EQ(mix64(0xdeadbeefull), 0x4e062702ec929eeaull);
}

TEST(Hash, Splitmix64GivesTheReferenceSequenceFromSeedZero) {
  EXPECT_EQ(splitmix64(0), 0xe220a8397b1dcdafull);
  EXPECT_EQ(splitmix64(kGoldenGamma), 0x6e789e6aa1b965f4ull);
}

static_assert(mix64(0) == 0, "usable in constant expressions");

}  // namespace
}  // namespace greyhound
