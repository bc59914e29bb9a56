// The oracle end to end (greyhound-simcluster --oracle): no master, agents or hook; the launcher publishes
// the S2 split for a slow GPU at the fault's onset and the original split after its end, from the fault
// schedule, and every rank applies and acknowledges both. The split keeps the global batch, so the job
// trains to the same loss as a run with no faults and no plans.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim_run.h"

namespace greyhound {
namespace {

using nlohmann::json;

constexpr double kFaultStart = 4, kFaultEnd = 9;

TEST(OracleRun, PlansTheSplitAtOnsetRevertsAfterTheEndAndKeepsTheTraining) {
  const std::string root = itest::make_temp_dir("gh-oracle");
  ASSERT_FALSE(root.empty());
  std::ofstream(root + "/faults.json") << R"({"faults":[{"kind":"gpu","rank":3,"start_s":4,"end_s":9,"slowdown":1.5}]})";
  const itest::SimRun r =
      itest::run_simcluster(root, "oracle", "--iterations 30 --oracle --faults " + root + "/faults.json", 8);
  ASSERT_EQ(r.exit_code, 0) << r.log();
  EXPECT_EQ(r.report["config"]["oracle"], true);
  EXPECT_EQ(r.report["config"]["greyhound"], false);
  ASSERT_EQ(r.report["iterations"].size(), 30u);
  EXPECT_TRUE(r.events("incident_open").empty());  // nothing detects: no master, no agents
  EXPECT_TRUE(r.events("slowdown").empty());

  const auto plans = r.events("plan");
  const auto applied = r.events("plan_applied");
  ASSERT_EQ(plans.size(), 2u) << r.report["events"].dump(1);
  ASSERT_EQ(applied.size(), 2u) << r.report["events"].dump(1);
  const json& s2 = plans[0]["detail"];
  EXPECT_EQ(plans[0]["source"], "oracle");
  EXPECT_EQ(s2["strategy"], "S2");
  EXPECT_EQ(s2["action"], "apply");
  EXPECT_EQ(s2["epoch"], 1);
  EXPECT_EQ(s2["microbatches"], json::array({10, 6}));  // t = [1, 1.5], makespan (m + 1) t: 13.5 -> 11
  EXPECT_GE(plans[0]["t_s"].get<double>(), kFaultStart);
  EXPECT_LT(plans[0]["t_s"].get<double>(), kFaultStart + 1.0);  // the launcher's tick, not a detection
  const json& revert = plans[1]["detail"];
  EXPECT_EQ(revert["action"], "revert");
  EXPECT_EQ(revert["epoch"], 2);
  EXPECT_EQ(revert["microbatches"], json::array({8, 8}));
  EXPECT_GE(plans[1]["t_s"].get<double>(), kFaultEnd);
  for (std::size_t k = 0; k < 2; ++k) {
    EXPECT_EQ(applied[k]["detail"]["epoch"], static_cast<int>(k) + 1);
    EXPECT_EQ(applied[k]["detail"]["applied"], 8);  // every rank
    EXPECT_GT(applied[k]["t_s"].get<double>(), plans[k]["t_s"].get<double>());
  }
  EXPECT_TRUE(r.events("plan_timeout").empty());
  EXPECT_TRUE(r.events("plan_rejected").empty());
  // Every rank switched at the same iterations (the job's own lines).
  const std::string out7 = itest::slurp(r.dir + "/rank7.out");
  EXPECT_NE(out7.find("plan 1 applied at iter"), std::string::npos) << out7;
  EXPECT_NE(out7.find("plan 2 applied at iter"), std::string::npos) << out7;

  // The same training as without faults and plans: the global batch never changed (the loss agrees up to
  // the order of floating-point sums).
  const itest::SimRun ref =
      itest::reference_run("--tp 2 --dp 2 --pp 2 --gpus-per-node 4 --microbatches 8 --iterations 30");
  ASSERT_EQ(ref.exit_code, 0) << ref.log();
  const auto with_plans = r.rank_iterations(7), plain = ref.rank_iterations(7);  // the last stage's loss
  ASSERT_EQ(with_plans.size(), 30u);
  ASSERT_EQ(plain.size(), 30u);
  EXPECT_GT(std::fabs(plain.front().loss - plain.back().loss), 0.0);  // it trains
  EXPECT_NEAR(with_plans.back().loss, plain.back().loss, 1e-4 * std::fabs(plain.back().loss) + 1e-9);
  std::system(("rm -rf " + root).c_str());
}

}  // namespace
}  // namespace greyhound
