// Megatron-LM's rank order, pinned: the simulated job, the localiser and the planners must agree on it.
#include "greyhound/parallel_shape.h"

#include <gtest/gtest.h>

#include <vector>

namespace greyhound {
namespace {

TEST(ParallelShape, RankOrderIsTpThenDpThenPp) {
  const ParallelShape s{2, 3, 4};
  EXPECT_EQ(s.world(), 24);
  EXPECT_EQ(s.rank({0, 0, 0}), 0);
  EXPECT_EQ(s.rank({1, 0, 0}), 1);
  EXPECT_EQ(s.rank({0, 1, 0}), 2);
  EXPECT_EQ(s.rank({0, 0, 1}), 6);
  EXPECT_EQ(s.rank({1, 2, 3}), 23);
  EXPECT_EQ(s.coords(13), (RankCoords{1, 0, 2}));
  EXPECT_EQ(s.coords(23), (RankCoords{1, 2, 3}));
}

TEST(ParallelShape, CoordsAndRankAreInverses) {
  for (const ParallelShape s : {ParallelShape{1, 1, 1}, ParallelShape{2, 2, 2}, ParallelShape{4, 1, 3},
                                ParallelShape{1, 5, 1}, ParallelShape{2, 3, 4}}) {
    for (int r = 0; r < s.world(); ++r) {
      const RankCoords c = s.coords(r);
      EXPECT_TRUE(c.tp >= 0 && c.tp < s.tp && c.dp >= 0 && c.dp < s.dp && c.pp >= 0 && c.pp < s.pp) << r;
      EXPECT_EQ(s.rank(c), r);
    }
  }
}

TEST(ParallelShape, GroupsListTheirMembersInOrder) {
  const ParallelShape s{2, 2, 2};
  EXPECT_EQ(s.dp_group(1, 1), (std::vector<int>{5, 7}));
  EXPECT_EQ(s.pp_group(0, 1), (std::vector<int>{2, 6}));
  EXPECT_EQ((ParallelShape{2, 1, 3}.dp_group(1, 2)), (std::vector<int>{5}));
}

TEST(ParallelShape, Validity) {
  EXPECT_TRUE((ParallelShape{}.valid()));
  EXPECT_EQ(ParallelShape{}.world(), 1);
  EXPECT_FALSE((ParallelShape{0, 2, 2}.valid()));
  EXPECT_FALSE((ParallelShape{2, 2, -1}.valid()));
}

static_assert(ParallelShape{2, 2, 2}.rank(ParallelShape{2, 2, 2}.coords(5)) == 5);

}  // namespace
}  // namespace greyhound
