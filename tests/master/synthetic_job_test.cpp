// The load bench's synthetic job (bench/scale/synthetic_job.h) read the way the master reads a real one:
// its registry through comparable_groups, its profiles through profile_view, then the pause-free
// localisation. At 10,000 ranks a slow GPU anywhere is named, and a healthy window names nobody: the bench's
// "found" is the localiser's answer, not the model's.
#include "bench/scale/synthetic_job.h"

#include <gtest/gtest.h>

#include <set>
#include <stdexcept>

#include "daemon/controller.h"
#include "daemon/localiser.h"

namespace greyhound::master {
namespace {

using bench::SlowGpu;
using bench::SyntheticJob;

std::vector<GroupMembers> registry(const SyntheticJob& job) {
  std::vector<GroupRecord> records;
  for (const auto& g : job.groups()) {
    GroupRecord r;
    r.id = g.id;
    r.size = static_cast<int>(g.members.size());
    r.created_by = "CommSplit";
    for (std::size_t i = 0; i < g.members.size(); ++i) {
      r.members[static_cast<int>(i)] = g.members[i];
      r.ops[g.members[i]] = g.ops;
    }
    records.push_back(std::move(r));
  }
  return comparable_groups(records);
}

std::vector<ProfileView> window(const SyntheticJob& job, const std::optional<SlowGpu>& slow, std::uint64_t n) {
  std::vector<ProfileView> out;
  for (int r = 0; r < job.ranks(); ++r) {
    Event e;
    e.type = event_type::kProfile;
    e.rank = r;
    e.node = job.node_of(r);
    e.detail = to_json(job.profile(r, "profile-1-1.t", 3.0, slow, n));
    auto v = profile_view(e);
    EXPECT_TRUE(v.has_value());
    if (v) out.push_back(*v);
  }
  return out;
}

TEST(SyntheticJob, TenThousandRanksHaveMegatronGroups) {
  const SyntheticJob job(10000, 8, 8, 10, 1000);
  EXPECT_EQ(job.nodes(), 1250);
  EXPECT_EQ(job.dp(), 125);
  ASSERT_EQ(job.groups().size(), 1250u + 80u + 1000u);  // TP per (dp, pp); DP per (tp, pp); PP per (tp, dp)
  std::set<std::uint64_t> ids;
  std::map<int, std::map<std::string, int>> per_rank;
  for (const auto& g : job.groups()) {
    EXPECT_TRUE(ids.insert(g.id).second) << "group ids are unique";
    for (int r : g.members) ++per_rank[r][g.kind];
    if (g.kind == "tp") {  // a TP group is one node: consecutive ranks
      ASSERT_EQ(g.members.size(), 8u);
      EXPECT_EQ(job.node_of(g.members.front()), job.node_of(g.members.back()));
      EXPECT_EQ(g.members.back() - g.members.front(), 7);
    }
    if (g.kind == "dp") {
      EXPECT_EQ(g.members.size(), 125u);
    }
    if (g.kind == "pp") {
      EXPECT_EQ(g.members.size(), 10u);
    }
  }
  ASSERT_EQ(per_rank.size(), 10000u);
  for (const auto& [rank, kinds] : per_rank) {
    EXPECT_EQ(kinds, (std::map<std::string, int>{{"dp", 1}, {"pp", 1}, {"tp", 1}})) << "rank " << rank;
  }
  const JobLayout l = job.layout();
  EXPECT_EQ(l.world, 10000);
  EXPECT_EQ(l.microbatches.size(), 125u);
  EXPECT_EQ(job.iteration_ms(std::nullopt), 1000);
  EXPECT_DOUBLE_EQ(job.iteration_ms(SlowGpu{5, 1.5}), 1275);
}

TEST(SyntheticJob, TheLocaliserNamesASlowGpuAmongTenThousandRanksAndNobodyWhenHealthy) {
  const SyntheticJob job(10000, 8, 8, 10, 1000);
  const auto groups = registry(job);
  const auto healthy = localise(window(job, std::nullopt, 1), groups, job.layout());
  EXPECT_EQ(healthy.culprit, -1);
  EXPECT_EQ(healthy.ranks_profiled, 10000);
  for (int culprit : {0, 3338, 9999}) {
    const auto loc = localise(window(job, SlowGpu{culprit, 1.5}, 2), groups, job.layout());
    EXPECT_EQ(loc.culprit, culprit);
    EXPECT_EQ(loc.culprit_node, culprit / 8);
    EXPECT_EQ(loc.kind, "COMPUTE_STRAGGLER");
    EXPECT_EQ(loc.cause, Cause::kComputation);
    EXPECT_TRUE(loc.suspect_links.empty());
  }
}

TEST(SyntheticJob, ASlowGpuInASmallJobIsNamedToo) {
  const SyntheticJob job(64, 8, 8, 2, 500);  // TP 8 x DP 4 x PP 2
  const auto loc = localise(window(job, SlowGpu{26, 1.3}, 3), registry(job), job.layout());
  EXPECT_EQ(loc.culprit, 26);
  EXPECT_EQ(loc.kind, "COMPUTE_STRAGGLER");
}

TEST(SyntheticJob, RefusesShapesThatDoNotDivide) {
  EXPECT_THROW(SyntheticJob(100, 8, 8, 10, 1000), std::invalid_argument);  // TP x PP = 80 does not divide 100
  EXPECT_THROW(SyntheticJob(80, 7, 8, 10, 1000), std::invalid_argument);   // 7 GPUs per node
  EXPECT_THROW(SyntheticJob(80, 8, 8, 10, 0), std::invalid_argument);
  EXPECT_THROW(SyntheticJob(80, 8, 0, 10, 1000), std::invalid_argument);
}

}  // namespace
}  // namespace greyhound::master
