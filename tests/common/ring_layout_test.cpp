// Pins the shared-memory layout byte by byte: a reader built from another version of this header must
// find every field where this writer put it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "greyhound/ring.h"

namespace greyhound {
namespace {

template <typename T>
T at(const std::vector<char>& file, std::size_t offset) {
  T v;
  std::memcpy(&v, file.data() + offset, sizeof v);
  return v;
}

TEST(RingLayout, SizesAndConstants) {
  EXPECT_EQ(sizeof(RingHeader), 4096u);
  EXPECT_EQ(sizeof(Record), 128u);
  EXPECT_EQ(sizeof(RecordPayload), 120u);
  EXPECT_EQ(kRingMagic, 0x31474E4952484721ull);
  EXPECT_EQ(kRingVersion, 2u);
  EXPECT_EQ(ring_file_size(64), 4096u + 64u * 128u);
}

TEST(RingLayout, BytesOnDiskAreWhereTheContractSays) {
  char tmpl[] = "/tmp/gh-layout-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  std::string err;
  auto w = RingWriter::create(dir, "greyhound.layout.3", 100, RingIdentity{"layout", 3, 1}, &err);
  ASSERT_TRUE(w) << err;
  RecordPayload p{};
  p.t_ns = 0x1111;
  p.group_id = 0x2222;
  p.count = 0x3333;
  p.bytes = 0x4444;
  p.stream = 0x5555;
  p.aux = 0x6666;
  p.group_rank = 7;
  p.group_size = 8;
  p.peer = 9;
  p.root = 10;
  p.tid = 11;
  p.result = 12;
  p.op = 13;
  p.dtype = 14;
  p.flags = 15;
  p.color = 16;
  w->append(p);  // seq 0
  w->append(p);  // seq 1

  std::ifstream in(dir + "/greyhound.layout.3", std::ios::binary);
  const std::vector<char> f((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_EQ(f.size(), ring_file_size(128));  // 100 rounded up to a power of two
  EXPECT_EQ(at<std::uint64_t>(f, 0), kRingMagic);
  EXPECT_EQ(at<std::uint32_t>(f, 8), kRingVersion);
  EXPECT_EQ(at<std::uint32_t>(f, 12), 4096u);
  EXPECT_EQ(at<std::uint32_t>(f, 16), 128u);
  EXPECT_EQ(at<std::uint64_t>(f, 24), 128u);
  EXPECT_EQ(at<std::int32_t>(f, 32), 3);
  EXPECT_EQ(at<std::int32_t>(f, 36), 1);
  EXPECT_EQ(at<std::int32_t>(f, 40), static_cast<std::int32_t>(getpid()));
  EXPECT_STREQ(f.data() + 64, "layout");
  EXPECT_EQ(at<std::uint64_t>(f, 256), 2u);  // write_index
  EXPECT_EQ(at<std::uint64_t>(f, 320), 0u);  // dropped

  const std::size_t r1 = 4096 + 128;  // record seq 1
  EXPECT_EQ(at<std::uint64_t>(f, r1 + 0), 4u);  // stamp: 2*seq+2
  EXPECT_EQ(at<std::uint64_t>(f, r1 + 8), 1u);  // seq
  EXPECT_EQ(at<std::uint64_t>(f, r1 + 16), 0x1111u);
  EXPECT_EQ(at<std::uint64_t>(f, r1 + 24), 0x2222u);
  EXPECT_EQ(at<std::uint64_t>(f, r1 + 32), 0x3333u);
  EXPECT_EQ(at<std::uint64_t>(f, r1 + 40), 0x4444u);
  EXPECT_EQ(at<std::uint64_t>(f, r1 + 48), 0x5555u);
  EXPECT_EQ(at<std::uint64_t>(f, r1 + 56), 0x6666u);
  EXPECT_EQ(at<std::int32_t>(f, r1 + 64), 7);
  EXPECT_EQ(at<std::int32_t>(f, r1 + 68), 8);
  EXPECT_EQ(at<std::int32_t>(f, r1 + 72), 9);
  EXPECT_EQ(at<std::int32_t>(f, r1 + 76), 10);
  EXPECT_EQ(at<std::uint32_t>(f, r1 + 80), 11u);
  EXPECT_EQ(at<std::int32_t>(f, r1 + 84), 12);
  EXPECT_EQ(at<std::uint8_t>(f, r1 + 88), 13);
  EXPECT_EQ(at<std::uint8_t>(f, r1 + 89), 14);
  EXPECT_EQ(at<std::uint8_t>(f, r1 + 90), 15);
  EXPECT_EQ(at<std::int32_t>(f, r1 + 92), 16);
  std::uint64_t words[15];
  std::memcpy(words, f.data() + r1 + 8, sizeof words);
  EXPECT_EQ(at<std::uint64_t>(f, r1 + 120), record_check(words));  // checksum in the last word
  EXPECT_NE(record_check(words), 0u);

  w.reset();
  std::system(("rm -rf " + dir).c_str());
}

}  // namespace
}  // namespace greyhound
