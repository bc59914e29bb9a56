// The oracle's pure part (greyhound-simcluster --oracle) and the fault file's time scale.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sim/fault_schedule.h"
#include "sim/simcluster/oracle.h"
#include "store/placement_roles.h"
#include "sim/simcluster/time_scale.h"

namespace greyhound::sim {
namespace {

// TP1 x DP4 x PP2 (rank = dp + 4 pp), 8 micro-batches per replica, S2 advertised.
OracleJob dp4_pp2() {
  OracleJob j;
  j.shape = {1, 4, 2};
  j.initial_microbatches = {8, 8, 8, 8};
  j.capabilities = {"S2"};
  return j;
}

FaultSchedule gpu_of_rank(int rank, double slowdown, double start_s, double end_s) {
  Fault f;
  f.kind = FaultKind::kGpu;
  f.rank = rank;
  f.slowdown = slowdown;
  f.start_s = start_s;
  f.end_s = end_s;
  return FaultSchedule({f});
}

TEST(Oracle, ReplicaSlowdownIsTheLargestOfItsRanksWithFaultsCompounding) {
  const FaultSchedule f = FaultSchedule::parse_text(R"({"faults":[
      {"kind":"gpu","rank":5,"start_s":10,"end_s":20,"slowdown":1.5},
      {"kind":"cpu","rank":5,"start_s":15,"end_s":30,"slowdown":1.2},
      {"kind":"gpu","rank":1,"start_s":12,"end_s":18,"slowdown":1.3},
      {"kind":"link","nodes":[0,1],"start_s":0,"end_s":40,"bandwidth_factor":0.1}]})");
  const ParallelShape s{1, 4, 2};  // rank 5: dp 1, pp 1; rank 1: dp 1, pp 0
  EXPECT_EQ(replica_slowdowns(s, f, 5), (std::vector<double>{1, 1, 1, 1}));
  EXPECT_EQ(replica_slowdowns(s, f, 11), (std::vector<double>{1, 1.5, 1, 1}));
  EXPECT_EQ(replica_slowdowns(s, f, 16), (std::vector<double>{1, 1.5 * 1.2, 1, 1}));
  EXPECT_EQ(replica_slowdowns(s, f, 25), (std::vector<double>{1, 1.2, 1, 1}));
  EXPECT_EQ(fault_change_times(f), (std::vector<double>{0, 10, 12, 15, 18, 20, 30, 40}));
}

TEST(Oracle, PlansTheSolversSplitAtOnsetAndRevertsAfterTheEnd) {
  const OracleJob job = dp4_pp2();
  const FaultSchedule f = gpu_of_rank(1, 1.5, 10, 20);  // replica 1
  auto p = oracle_plan(job, f, 10.0, {8, 8, 8, 8});
  ASSERT_TRUE(p) << p.error();
  ASSERT_TRUE(p->has_value());
  // 1F1B makespan max (m + 1) t: 13.5 -> 11 in units of P = 2; fewest moves; the spare unit to the lowest index.
  EXPECT_EQ((*p)->strategy, Strategy::kS2);
  EXPECT_EQ((*p)->action, PlanAction::kApply);
  EXPECT_EQ((*p)->microbatches, (std::vector<int>{10, 6, 8, 8}));
  EXPECT_NE((*p)->reason.find("gpu rank 1 x1.5"), std::string::npos) << (*p)->reason;
  // In force already: nothing new.
  auto again = oracle_plan(job, f, 15.0, {10, 6, 8, 8});
  ASSERT_TRUE(again);
  EXPECT_FALSE(again->has_value());
  // The fault is over: back to the original split.
  auto after = oracle_plan(job, f, 20.0, {10, 6, 8, 8});
  ASSERT_TRUE(after);
  ASSERT_TRUE(after->has_value());
  EXPECT_EQ((*after)->action, PlanAction::kRevert);
  EXPECT_EQ((*after)->microbatches, (std::vector<int>{8, 8, 8, 8}));
  // Healthy and original: nothing.
  auto healthy = oracle_plan(job, f, 25.0, {8, 8, 8, 8});
  ASSERT_TRUE(healthy);
  EXPECT_FALSE(healthy->has_value());
}

TEST(Oracle, PipelineMultiplesOnlyWhenTheSplitInForceHasThem) {
  OracleJob job = dp4_pp2();
  job.initial_microbatches = {7, 9, 8, 8};  // not multiples of P = 2: the plain problem
  const FaultSchedule f = gpu_of_rank(1, 1.5, 0, 10);
  auto p = oracle_plan(job, f, 1.0, {7, 9, 8, 8});
  ASSERT_TRUE(p && p->has_value()) << p.error();
  // t = [1, 1.5, 1, 1], M = 32, unit 1, 1F1B makespan max (m + 1) t: 15 -> 10 (9,6,9,8 would give 10.5).
  EXPECT_EQ((*p)->microbatches, (std::vector<int>{9, 5, 9, 9}));
  EXPECT_NE((*p)->reason.find("makespan 15 -> 10 with"), std::string::npos) << (*p)->reason;
}

TEST(Oracle, TheJobsDeclaredMultipleIsTheStep) {
  // t = [1, 1.3, 1, 1], M = 32, makespan max (m + 1) t from 9 x 1.3 = 11.7: in units of 2 the best is 11
  // (6 on the slow replica: 7 x 1.3 = 9.1, 10 on another: 11); single micro-batches reach 10 (6 and 9,9,8).
  const FaultSchedule f = gpu_of_rank(1, 1.3, 0, 10);
  OracleJob job = dp4_pp2();
  auto coarse = oracle_plan(job, f, 1.0, {8, 8, 8, 8});
  ASSERT_TRUE(coarse && coarse->has_value()) << coarse.error();
  for (int m : (*coarse)->microbatches) EXPECT_EQ(m % 2, 0) << (*coarse)->reason;
  EXPECT_NE((*coarse)->reason.find("11.7 -> 11 with"), std::string::npos) << (*coarse)->reason;
  job.microbatch_multiple = 1;  // the job says its 1F1B runs any count
  auto fine = oracle_plan(job, f, 1.0, {8, 8, 8, 8});
  ASSERT_TRUE(fine && fine->has_value()) << fine.error();
  EXPECT_NE((*fine)->reason.find("11.7 -> 10 with"), std::string::npos) << (*fine)->reason;
  EXPECT_EQ((*fine)->microbatches[1], 6);
}

TEST(Oracle, ACongestedLinkGetsAPlacementThatUsesItForNothingAndBackAfterIt) {
  // TP2 x DP2 x PP2 on 4 nodes of 2 GPUs (slot = node): Megatron puts stage 0's DP ring on link 0-1.
  OracleJob job;
  job.shape = {2, 2, 2};
  job.initial_microbatches = {8, 8};
  job.capabilities = {"S2", "S3"};
  job.gpus_per_node = 2;
  const FaultSchedule link = FaultSchedule::parse_text(
      R"({"faults":[{"kind":"link","nodes":[0,1],"start_s":0,"end_s":10,"bandwidth_factor":0.05}]})");
  const mitigate::Placement megatron = mitigate::megatron_placement(2, 2);
  auto p = oracle_link_plan(job, link, 1.0, {8, 8}, megatron);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->strategy, Strategy::kS3);
  EXPECT_EQ(p->action, PlanAction::kApply);
  ASSERT_TRUE(p->placement.is_array());
  ASSERT_EQ(p->placement.size(), 8u);
  // Ranks 0 and 2 head the TP groups of nodes 0 and 1: they share neither a DP ring nor a PP edge now.
  const auto& a = p->placement[0];
  const auto& b = p->placement[2];
  EXPECT_NE(a["dp"], b["dp"]) << p->placement.dump();
  EXPECT_NE(a["pp"], b["pp"]) << p->placement.dump();
  EXPECT_NE(p->reason.find("link 0-1 at 5%"), std::string::npos) << p->reason;
  // The placement the layout then names is in force: nothing more while the link is slow; back after it.
  JobLayout l;
  l.tp = 2;
  l.dp = 2;
  l.pp = 2;
  l.world = 8;
  for (const auto& r : p->placement) l.placement.push_back({r["rank"], r["tp"], r["dp"], r["pp"]});
  const mitigate::Placement moved = store::placement_in_force(l);
  EXPECT_NE(moved, megatron);
  EXPECT_FALSE(oracle_link_plan(job, link, 2.0, {8, 8}, moved).has_value());
  auto back = oracle_link_plan(job, link, 10.0, {8, 8}, moved);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->action, PlanAction::kRevert);
  EXPECT_EQ(back->strategy, Strategy::kS1);
  EXPECT_FALSE(oracle_link_plan(job, link, 10.0, {8, 8}, megatron).has_value());
  // A job without its GPUs per node cannot be re-placed.
  job.gpus_per_node = 0;
  EXPECT_FALSE(oracle_link_plan(job, link, 1.0, {8, 8}, megatron).has_value());
}

TEST(Oracle, LinkFaultsAndJobsWithoutS2GetNothing) {
  OracleJob job = dp4_pp2();
  const FaultSchedule link = FaultSchedule::parse_text(
      R"({"faults":[{"kind":"link","nodes":[0,1],"start_s":0,"end_s":10,"bandwidth_factor":0.05}]})");
  auto p = oracle_plan(job, link, 1.0, {8, 8, 8, 8});
  ASSERT_TRUE(p);
  EXPECT_FALSE(p->has_value());
  // Without S3 advertised (and the GPUs per node), a link gets nothing either.
  EXPECT_FALSE(oracle_link_plan(job, link, 1.0, {8, 8, 8, 8}, mitigate::megatron_placement(4, 2)).has_value());
  job.capabilities = {};
  auto q = oracle_plan(job, gpu_of_rank(1, 2.0, 0, 10), 1.0, {8, 8, 8, 8});
  ASSERT_TRUE(q);
  EXPECT_FALSE(q->has_value());
  // A revert needs no capability: it takes back what some plan changed.
  auto r = oracle_plan(job, link, 1.0, {10, 6, 8, 8});
  ASSERT_TRUE(r && r->has_value());
  EXPECT_EQ((*r)->action, PlanAction::kRevert);
}

TEST(Oracle, GainsUnderOnePercentAreNotPlanned) {
  OracleJob job;
  job.shape = {1, 4, 1};
  job.initial_microbatches = {100, 100, 100, 100};
  job.capabilities = {"S2"};
  // Replica 1 at 1.02x: the best split makes 102 -> 101 (0.98 %), as the master's planner declines.
  auto p = oracle_plan(job, gpu_of_rank(1, 1.02, 0, 10), 1.0, {100, 100, 100, 100});
  ASSERT_TRUE(p);
  EXPECT_FALSE(p->has_value());
  // At 1.05x: 105 -> 101.85 (3 %), planned.
  auto q = oracle_plan(job, gpu_of_rank(1, 1.05, 0, 10), 1.0, {100, 100, 100, 100});
  ASSERT_TRUE(q && q->has_value());
  EXPECT_EQ((*q)->microbatches, (std::vector<int>{101, 97, 101, 101}));
}

TEST(Oracle, BadAllocationsAreErrors) {
  const FaultSchedule f = gpu_of_rank(1, 1.5, 0, 10);
  auto wrong_length = oracle_plan(dp4_pp2(), f, 1.0, {16, 16});
  ASSERT_FALSE(wrong_length);
  EXPECT_NE(wrong_length.error().find("one entry per DP replica (4)"), std::string::npos) << wrong_length.error();
  auto wrong_sum = oracle_plan(dp4_pp2(), f, 1.0, {8, 8, 8, 9});
  ASSERT_FALSE(wrong_sum);
  EXPECT_NE(wrong_sum.error().find("changes the global batch"), std::string::npos) << wrong_sum.error();
}

TEST(Oracle, OutcomeOnceEveryRankAnswered) {
  Plan p;
  p.epoch = 3;
  p.strategy = Strategy::kS2;
  auto ack = [](int rank, std::int64_t epoch, AckStatus s, std::int64_t it) {
    PlanAck a;
    a.rank = rank;
    a.epoch = epoch;
    a.status = s;
    a.iteration = it;
    return a;
  };
  std::vector<PlanAck> acks = {ack(0, 3, AckStatus::kApplied, 41), ack(1, 2, AckStatus::kApplied, 10)};
  EXPECT_FALSE(oracle_outcome(p, acks, 2).has_value());  // rank 1 answered an older epoch only
  acks[1] = ack(1, 3, AckStatus::kApplied, 42);
  auto o = oracle_outcome(p, acks, 2);
  ASSERT_TRUE(o.has_value());
  EXPECT_EQ(o->event_type, event_type::kPlanApplied);
  EXPECT_EQ(o->outcome.applied, 2);
  EXPECT_EQ(o->outcome.from_iteration, 42);
  acks[1] = ack(1, 3, AckStatus::kRejected, 42);
  o = oracle_outcome(p, acks, 2);
  ASSERT_TRUE(o.has_value());
  EXPECT_EQ(o->event_type, event_type::kPlanRejected);
  EXPECT_EQ(o->outcome.rejected, 1);
}

TEST(TimeScale, FaultFileMayCarryItAndTheStandInsScheduleStaysValid) {
  const FaultFile ff = parse_fault_file(
      R"({"time_scale":20,"faults":[{"kind":"gpu","rank":3,"start_s":5,"end_s":9,"slowdown":1.5}]})");
  ASSERT_TRUE(ff.time_scale.has_value());
  EXPECT_DOUBLE_EQ(*ff.time_scale, 20.0);
  ASSERT_EQ(ff.faults.faults().size(), 1u);
  EXPECT_FALSE(ff.faults.to_json().contains("time_scale"));  // the ranks get the schedule alone
  EXPECT_FALSE(parse_fault_file(R"({"faults":[]})").time_scale.has_value());
  for (const char* bad : {R"({"time_scale":0,"faults":[]})", R"({"time_scale":"fast","faults":[]})",
                          R"({"time_scale":2e6,"faults":[]})"}) {
    try {
      parse_fault_file(bad);
      ADD_FAILURE() << bad;
    } catch (const FaultScheduleError& e) {
      EXPECT_NE(std::string(e.what()).find("time_scale: must be a number > 0"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(parse_fault_file(R"({"scale":2,"faults":[]})"), FaultScheduleError);
  const RemedyCosts c = simulated_costs({60, 1800}, 20);
  EXPECT_DOUBLE_EQ(c.s3_pause_s, 3.0);
  EXPECT_DOUBLE_EQ(c.s4_restart_s, 90.0);
  EXPECT_EQ(time_scale_error(1.0), "");
}

}  // namespace
}  // namespace greyhound::sim
