// The JSON values greyhound keeps in Redis: round trips, and malformed values rejected with the field named.
#include "store/messages.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace greyhound {
namespace {

template <typename T, typename Parse>
std::string error_of(const std::string& text, Parse parse) {
  std::string err;
  EXPECT_FALSE(parse(text, &err)) << text;
  return err;
}

TEST(Messages, JobLayoutRoundTripAndChecks) {
  JobLayout l;
  l.tp = 2;
  l.dp = 2;
  l.pp = 2;
  l.world = 8;
  l.microbatches = {8, 8};
  l.capabilities = {"S2"};
  l.t_unix_ms = 123;
  std::string err;
  const auto back = parse_job_layout(to_json(l).dump(), &err);
  ASSERT_TRUE(back) << err;
  EXPECT_EQ(back->world, 8);
  EXPECT_EQ(back->microbatches, l.microbatches);
  EXPECT_EQ(back->capabilities, l.capabilities);
  EXPECT_EQ(back->order, "tp-dp-pp");
  EXPECT_EQ(back->initial_microbatches, l.microbatches);  // defaults to the allocation in force
  EXPECT_EQ(back->gpus_per_node, 0);
  EXPECT_EQ(back->s3_estimate_s, 0);  // none given
  EXPECT_EQ(to_json(l)["cost_estimates_s"], nlohmann::json::object());
  l.s3_estimate_s = 0.012;
  l.s4_estimate_s = 240;
  const auto costed = parse_job_layout(to_json(l).dump(), &err);
  ASSERT_TRUE(costed) << err;
  EXPECT_DOUBLE_EQ(costed->s3_estimate_s, 0.012);
  EXPECT_DOUBLE_EQ(costed->s4_estimate_s, 240);
  EXPECT_EQ(to_json(l)["cost_estimates_s"].dump(), R"({"S3":0.012,"S4":240.0})");
  const auto moved = parse_job_layout(
      R"({"tp":2,"dp":2,"pp":2,"world":8,"microbatches":[10,6],"initial_microbatches":[8,8],"gpus_per_node":4})", &err);
  ASSERT_TRUE(moved) << err;
  EXPECT_EQ(moved->initial_microbatches, (std::vector<int>{8, 8}));
  EXPECT_EQ(moved->gpus_per_node, 4);
  EXPECT_EQ(moved->microbatch_multiple, 0);  // not said
  l.microbatch_multiple = 1;
  const auto any = parse_job_layout(to_json(l).dump(), &err);
  ASSERT_TRUE(any) << err;
  EXPECT_EQ(any->microbatch_multiple, 1);
  const auto interleaved = parse_job_layout(
      R"({"tp":2,"dp":2,"pp":2,"world":8,"microbatches":[10,6],"initial_microbatches":[8,8],"microbatch_multiple":2})",
      &err);
  ASSERT_TRUE(interleaved) << err;
  EXPECT_EQ(interleaved->microbatch_multiple, 2);

  auto bad = [](const char* text) { return error_of<JobLayout>(text, parse_job_layout); };
  EXPECT_NE(bad(R"({"tp":2,"dp":2,"pp":2,"world":6,"microbatches":[8,8]})").find("world"), std::string::npos);
  EXPECT_NE(bad(R"({"tp":2,"dp":2,"pp":2,"world":8,"microbatches":[8]})").find("microbatches"), std::string::npos);
  EXPECT_NE(bad(R"({"tp":2,"dp":2,"pp":2,"world":8,"microbatches":[8,0]})").find("microbatches"), std::string::npos);
  EXPECT_NE(bad(R"({"tp":2,"dp":2,"pp":2,"world":8,"microbatches":[8,4294967304]})").find("out of range"),
            std::string::npos);
  EXPECT_NE(bad(R"({"tp":2,"dp":2,"pp":2,"world":8,"order":"pp-dp-tp","microbatches":[8,8]})").find("order"),
            std::string::npos);
  EXPECT_NE(bad(R"({"tp":"2","dp":2,"pp":2,"world":8})").find("tp"), std::string::npos);
  EXPECT_NE(bad(R"({"tp":2,"dp":2,"pp":2,"world":8,"microbatches":[8,8],"capabilities":"S2"})").find("capabilities"),
            std::string::npos);
  EXPECT_NE(bad(R"({"tp":2,"dp":2,"pp":2,"world":8,"microbatches":[10,6],"initial_microbatches":[8,9]})")
                .find("same global batch"),
            std::string::npos);
  EXPECT_NE(bad(R"({"tp":2,"dp":2,"pp":2,"world":8,"microbatches":[8,8],"initial_microbatches":[16]})")
                .find("initial_microbatches"),
            std::string::npos);
  EXPECT_NE(bad(R"({"tp":2,"dp":2,"pp":2,"world":8,"microbatches":[9,7],"microbatch_multiple":2})")
                .find("microbatches: 9 is not a multiple of microbatch_multiple 2"),
            std::string::npos);
  EXPECT_NE(bad(R"({"tp":2,"dp":2,"pp":2,"world":8,"microbatches":[8,8],"initial_microbatches":[9,7],)"
                R"("microbatch_multiple":2})")
                .find("initial_microbatches: 9 is not a multiple"),
            std::string::npos);
  EXPECT_NE(bad(R"({"tp":2,"dp":2,"pp":2,"world":8,"microbatches":[8,8],"microbatch_multiple":-1})")
                .find("microbatch_multiple"),
            std::string::npos);
  EXPECT_NE(bad(R"({"tp":2,"dp":2,"pp":2,"world":8,"microbatches":[8,8],"microbatch_multiple":65537})")
                .find("microbatch_multiple"),
            std::string::npos);
  EXPECT_NE(bad(R"({"tp":2,"dp":2,"pp":2,"world":8,"microbatches":[8,8],"gpus_per_node":3})").find("gpus_per_node"),
            std::string::npos);
  EXPECT_NE(bad(R"({"tp":2,"dp":2,"pp":2,"world":8,"microbatches":[8,8],"cost_estimates_s":{"S2":1}})")
                .find("'S2' is not S3 or S4"),
            std::string::npos);
  EXPECT_NE(bad(R"({"tp":2,"dp":2,"pp":2,"world":8,"microbatches":[8,8],"cost_estimates_s":{"S3":-1}})")
                .find("cost_estimates_s"),
            std::string::npos);
  EXPECT_NE(bad(R"({"tp":2,"dp":2,"pp":2,"world":8,"microbatches":[8,8],"cost_estimates_s":{"S4":"60"}})")
                .find("S4: must be a finite number"),
            std::string::npos);
  EXPECT_NE(bad(R"({"tp":2,"dp":2,"pp":2,"world":8,"microbatches":[8,8],"cost_estimates_s":[60]})")
                .find("cost_estimates_s"),
            std::string::npos);
  EXPECT_NE(bad(R"([1,2])").find("not a JSON object"), std::string::npos);
  EXPECT_NE(bad(R"({"tp":2,)").find("not valid JSON"), std::string::npos);
}

TEST(Messages, PlanRoundTripAndChecks) {
  Plan p;
  p.epoch = 3;
  p.strategy = Strategy::kS2;
  p.incident = 1;
  p.reason = "replica 1 is slow";
  p.microbatches = {10, 6};
  p.t_unix_ms = 99;
  std::string err;
  const auto back = parse_plan(to_json(p).dump(), &err);
  ASSERT_TRUE(back) << err;
  EXPECT_EQ(back->epoch, 3);
  EXPECT_EQ(back->strategy, Strategy::kS2);
  EXPECT_EQ(back->action, PlanAction::kApply);
  EXPECT_EQ(back->incident, 1);
  EXPECT_EQ(back->microbatches, p.microbatches);
  EXPECT_TRUE(back->placement.is_null());
  Plan s4;
  s4.epoch = 4;
  s4.strategy = Strategy::kS4;
  s4.exclude_nodes = {0};
  s4.exclude_ranks = {3};
  const auto s4_back = parse_plan(to_json(s4).dump(), &err);
  ASSERT_TRUE(s4_back) << err;
  EXPECT_EQ(s4_back->exclude_nodes, s4.exclude_nodes);
  EXPECT_EQ(s4_back->exclude_ranks, s4.exclude_ranks);

  auto bad = [](const char* text) { return error_of<Plan>(text, parse_plan); };
  EXPECT_NE(bad(R"({"epoch":0,"strategy":"S2"})").find("epoch"), std::string::npos);
  EXPECT_NE(bad(R"({"epoch":1,"strategy":"S9"})").find("strategy"), std::string::npos);
  EXPECT_NE(bad(R"({"epoch":1,"strategy":"S2","action":"undo"})").find("action"), std::string::npos);
  EXPECT_NE(bad(R"({"epoch":1,"strategy":"S2","microbatches":[3,-1]})").find("microbatches"), std::string::npos);
  EXPECT_NE(bad(R"({"epoch":1,"strategy":"S3","placement":{"rank":0}})").find("placement"), std::string::npos);
  EXPECT_NE(bad(R"({"epoch":1,"strategy":"S4","exclude_ranks":[-3]})").find("exclude_ranks"), std::string::npos);
  EXPECT_NE(bad(R"({"epoch":1,"strategy":"S4","exclude_nodes":["a"]})").find("exclude_nodes"), std::string::npos);
  const std::string huge = R"({"epoch":1,"strategy":"S2","reason":")" + std::string(kMaxMessageBytes, 'x') + "\"}";
  EXPECT_NE(error_of<Plan>(huge, parse_plan).find("too large"), std::string::npos);

  // The epoch a malformed plan names, so that the job can acknowledge it as rejected.
  EXPECT_EQ(plan_epoch_named(R"({"epoch":7,"strategy":"S9"})"), 7);
  EXPECT_EQ(plan_epoch_named(R"({"epoch":7,"strategy":)"), 0);       // not JSON
  EXPECT_EQ(plan_epoch_named(R"({"epoch":"7"})"), 0);                // not an integer
  EXPECT_EQ(plan_epoch_named(R"({"epoch":0})"), 0);
  EXPECT_EQ(plan_epoch_named(R"({"epoch":-4})"), 0);
  EXPECT_EQ(plan_epoch_named(R"({"epoch":1.5})"), 0);
  EXPECT_EQ(plan_epoch_named(R"([{"epoch":3}])"), 0);                // not an object
  EXPECT_EQ(plan_epoch_named(huge), 0);                              // beyond the bounds
}

TEST(Messages, JobSettingsAreCheckedKeyByKey) {
  JobSettings st;
  EXPECT_EQ(apply_job_setting(st, "validation_ratio", "1.2"), "");
  EXPECT_EQ(apply_job_setting(st, "detection_paused", "true"), "");
  EXPECT_EQ(apply_job_setting(st, "profile_iterations", "5"), "");
  EXPECT_EQ(apply_job_setting(st, "acf_threshold", "1"), "");
  EXPECT_EQ(apply_job_setting(st, "validation_ratio", "0.9"), "validation_ratio: must be in [1, 10]");
  EXPECT_EQ(apply_job_setting(st, "bocd_threshold", "1"), "bocd_threshold: must be in (0, 1)");
  EXPECT_EQ(apply_job_setting(st, "acf_threshold", "0"), "acf_threshold: must be in (0, 1]");
  EXPECT_EQ(apply_job_setting(st, "profile_iterations", "2.5"), "profile_iterations: must be an integer in [1, 1000]");
  EXPECT_EQ(apply_job_setting(st, "detection_paused", "yes"), "detection_paused: must be true or false");
  EXPECT_EQ(apply_job_setting(st, "s3_pause_s", "0x10"), "s3_pause_s: '0x10' is not a finite number");
  EXPECT_EQ(apply_job_setting(st, "s3_pause_s", "nan"), "s3_pause_s: 'nan' is not a finite number");
  EXPECT_EQ(apply_job_setting(st, "s3_pause_s", "1e999"), "s3_pause_s: '1e999' is not a finite number");
  EXPECT_EQ(apply_job_setting(st, "s3_pause_s", "1e9"), "s3_pause_s: must be in [0, 604800]");
  EXPECT_NE(apply_job_setting(st, "nope", "1").find("'nope' is not a setting (detection_paused, "), std::string::npos);
  ASSERT_TRUE(st.validation_ratio);
  EXPECT_DOUBLE_EQ(*st.validation_ratio, 1.2);  // the refused values changed nothing
  EXPECT_EQ(*st.profile_iterations, 5);
  EXPECT_EQ(apply_job_setting(st, "profile_iterations", ""), "");  // unset
  EXPECT_FALSE(st.profile_iterations);
  st.version = 3;
  std::string err;
  const auto back = parse_job_settings(to_json(st).dump(), &err);
  ASSERT_TRUE(back) << err;
  EXPECT_EQ(to_json(*back), to_json(st));
  EXPECT_TRUE(*back->detection_paused);
  EXPECT_FALSE(back->bocd_hazard);
  // What the reader refuses: the same ranges, and wrong types.
  auto bad = [](const char* text) { return error_of<JobSettings>(text, parse_job_settings); };
  EXPECT_NE(bad(R"({"validation_ratio":0.5})").find("validation_ratio: must be in [1, 10]"), std::string::npos);
  EXPECT_NE(bad(R"({"detection_paused":1})").find("detection_paused: must be true or false"), std::string::npos);
  EXPECT_NE(bad(R"({"profile_iterations":0})").find("profile_iterations"), std::string::npos);
  EXPECT_NE(bad(R"({"bocd_hazard":"100"})").find("bocd_hazard"), std::string::npos);
  EXPECT_NE(bad(R"({"version":-1})").find("version"), std::string::npos);
  EXPECT_TRUE(parse_job_settings(R"({"unknown_key":1})", &err)) << "a newer writer's key is left alone";
}

TEST(Messages, JobLayoutCarriesThePlacementInForce) {
  JobLayout l;
  l.tp = 2;
  l.dp = 2;
  l.pp = 2;
  l.world = 8;
  l.microbatches = {4, 4};
  l.gpus_per_node = 2;
  EXPECT_EQ(megatron_placement(l)[5], (PlacementEntry{5, 1, 0, 1}));
  l.placement = megatron_placement(l);
  std::swap(l.placement[2].rank, l.placement[4].rank);  // the TP groups on nodes 1 and 2 trade roles
  std::swap(l.placement[3].rank, l.placement[5].rank);
  EXPECT_TRUE(departs_from_original(l));
  std::string err;
  const auto back = parse_job_layout(to_json(l).dump(), &err);
  ASSERT_TRUE(back) << err;
  EXPECT_EQ(back->placement, l.placement);
  // Megatron's own placement, whatever the order of its entries, is no departure (the job would revert to
  // what it runs when the plan lease lapses).
  JobLayout same = l;
  same.placement = megatron_placement(l);
  std::reverse(same.placement.begin(), same.placement.end());
  EXPECT_FALSE(departs_from_original(same));
  EXPECT_TRUE(parse_job_layout(R"({"tp":1,"dp":2,"pp":1,"world":2,"microbatches":[4,4]})", &err)->placement.empty())
      << "absent: Megatron's placement";

  // A job restarted by an S3 plan started with the plan's placement: it is its own, not a departure, and a
  // return to Megatron's would be one.
  JobLayout restarted = l;
  restarted.s3_by_restart = true;
  restarted.initial_placement = l.placement;
  EXPECT_FALSE(departs_from_original(restarted));
  const auto rb = parse_job_layout(to_json(restarted).dump(), &err);
  ASSERT_TRUE(rb) << err;
  EXPECT_EQ(rb->initial_placement, l.placement);
  EXPECT_TRUE(rb->s3_by_restart);
  restarted.placement = megatron_placement(l);
  EXPECT_TRUE(departs_from_original(restarted));
  std::vector<PlacementEntry> by_rank = l.placement;
  std::sort(by_rank.begin(), by_rank.end(), [](const auto& a, const auto& b) { return a.rank < b.rank; });
  EXPECT_EQ(original_configuration_plan(restarted).placement, placement_json(by_rank));
  JobLayout twice = restarted;
  twice.initial_placement[1].rank = 0;
  EXPECT_NE(error_of<JobLayout>(to_json(twice).dump(), parse_job_layout).find("initial_placement[1]"), std::string::npos);
  nlohmann::json flag = to_json(restarted);
  flag["s3_by_restart"] = 1;
  EXPECT_FALSE(parse_job_layout(flag.dump(), &err));
  EXPECT_NE(err.find("s3_by_restart"), std::string::npos) << err;

  // TP 2 x DP 2 on 2 nodes of 2 GPUs: entries 0-1 and 2-3 of a placement are one TP group each.
  const std::string head = R"({"tp":2,"dp":2,"pp":1,"world":4,"microbatches":[4,4],"gpus_per_node":2,"placement":)";
  auto bad = [&](const std::string& placement) { return error_of<JobLayout>(head + placement + "}", parse_job_layout); };
  auto entries = [](int r0, int r1, int r2, int r3) {
    return "[{\"rank\":" + std::to_string(r0) + R"(,"tp":0,"dp":0,"pp":0},{"rank":)" + std::to_string(r1) +
           R"(,"tp":1,"dp":0,"pp":0},{"rank":)" + std::to_string(r2) + R"(,"tp":0,"dp":1,"pp":0},{"rank":)" +
           std::to_string(r3) + R"(,"tp":1,"dp":1,"pp":0}])";
  };
  ASSERT_TRUE(parse_job_layout(head + entries(2, 3, 0, 1) + "}", &err)) << err;  // the two TP groups swapped
  EXPECT_EQ(bad(R"({"rank":0})"), "placement: must be an array of {rank, tp, dp, pp}");
  EXPECT_EQ(bad(R"([{"rank":0,"tp":0,"dp":0,"pp":0}])"), "placement: 1 entries for 4 ranks");
  EXPECT_EQ(bad(R"([{"rank":0,"tp":0,"dp":0},1,2,3])"), "placement[0]: pp: missing");
  EXPECT_EQ(bad(entries(0, 0, 2, 3)), "placement[1]: rank 0 placed twice");
  EXPECT_EQ(bad(entries(0, 4, 2, 3)), "placement[1]: outside the job's 2x2x1 layout");
  EXPECT_EQ(bad(entries(0, 2, 1, 3)), "placement[1]: the TP group of dp 0, pp 0 spans nodes 0 and 1");
  EXPECT_EQ(bad(R"([{"rank":0,"tp":0,"dp":0,"pp":0},{"rank":1,"tp":0,"dp":0,"pp":0},)"
                R"({"rank":2,"tp":0,"dp":1,"pp":0},{"rank":3,"tp":1,"dp":1,"pp":0}])"),
            "placement[1]: role taken twice");
}

TEST(Messages, PlanAckRoundTripAndChecks) {
  PlanAck a;
  a.rank = 5;
  a.epoch = 2;
  a.iteration = 40;
  a.status = AckStatus::kUnsupported;
  a.detail = "S3 needs a framework plugin";
  a.apply_s = 0.125;
  std::string err;
  const auto back = parse_plan_ack(to_json(a).dump(), &err);
  ASSERT_TRUE(back) << err;
  EXPECT_DOUBLE_EQ(back->apply_s, 0.125);
  EXPECT_DOUBLE_EQ(parse_plan_ack(R"({"rank":1,"epoch":1,"status":"applied"})", &err)->apply_s, 0.0);
  EXPECT_EQ(back->rank, 5);
  EXPECT_EQ(back->epoch, 2);
  EXPECT_EQ(back->iteration, 40);
  EXPECT_EQ(back->status, AckStatus::kUnsupported);
  auto bad = [](const char* text) { return error_of<PlanAck>(text, parse_plan_ack); };
  EXPECT_NE(bad(R"({"rank":-1,"epoch":1,"status":"applied"})").find("rank"), std::string::npos);
  EXPECT_NE(bad(R"({"rank":1,"epoch":1,"status":"done"})").find("status"), std::string::npos);
  EXPECT_NE(bad(R"({"rank":1,"status":"applied"})").find("epoch: missing"), std::string::npos);
  EXPECT_NE(bad(R"({"rank":1,"epoch":1,"status":"applied","apply_s":-1})").find("apply_s"), std::string::npos);
}

TEST(Messages, EventRoundTripKeepsTheDetail) {
  Event e;
  e.type = event_type::kLocalised;
  e.t_s = 12.5;
  e.source = "master";
  e.incident = 4;
  e.detail = {{"culprit", 3}, {"kind", "COMPUTE_STRAGGLER"}};
  std::string err;
  const auto back = parse_event(to_json(e).dump(), &err);
  ASSERT_TRUE(back) << err;
  EXPECT_EQ(back->type, "localised");
  EXPECT_DOUBLE_EQ(back->t_s, 12.5);
  EXPECT_EQ(back->incident, 4);
  EXPECT_EQ(back->detail["culprit"], 3);
}

TEST(Messages, AFailSlowKeepsItsAccountAcrossARoundTrip) {
  FailSlow f;
  f.id = 4;
  f.incident = 2;
  f.cause = Cause::kComputation;
  f.rank = 3;
  f.node = 1;
  f.onset_t_s = 10;
  f.account.rung = Strategy::kS2;
  f.account.loss_s = 3.5;
  f.account.window_s = {0.5, 0.52};
  f.account.s3 = false;
  f.account.trusted = true;
  std::string err;
  auto back = fail_slow_from_json(to_json(f), &err);
  ASSERT_TRUE(back) << err;
  EXPECT_EQ(back->rank, 3);
  EXPECT_EQ(back->account.rung, Strategy::kS2);
  EXPECT_DOUBLE_EQ(back->account.loss_s, 3.5);
  EXPECT_EQ(back->account.window_s, (std::vector<double>{0.5, 0.52}));
  EXPECT_FALSE(back->account.s3);
  EXPECT_TRUE(back->account.trusted);
  nlohmann::json j = to_json(f);
  j["account"].erase("trusted");  // a state from before it was kept
  back = fail_slow_from_json(j, &err);
  ASSERT_TRUE(back) << err;
  EXPECT_FALSE(back->account.trusted);
  j["account"]["trusted"] = "yes";
  EXPECT_FALSE(fail_slow_from_json(j, &err));
  EXPECT_NE(err.find("account.trusted: must be a boolean"), std::string::npos) << err;
  // A cause a validation measured: kept; absent (not measured, or a state from before it), false.
  EXPECT_FALSE(to_json(f).contains("cause_validated"));
  f.cause_validated = true;
  back = fail_slow_from_json(to_json(f), &err);
  ASSERT_TRUE(back) << err;
  EXPECT_TRUE(back->cause_validated);
  j = to_json(f);
  j["cause_validated"] = 1;
  EXPECT_FALSE(fail_slow_from_json(j, &err));
}

TEST(Messages, PlanOutcomeAndJobRestartDetailsRoundTripAndChecks) {
  PlanOutcome o;
  o.epoch = 5;
  o.strategy = Strategy::kS3;
  o.applied = o.ranks = 8;
  o.from_iteration = 59;
  o.apply_s = 0.0075;
  std::string err;
  auto back = parse_plan_outcome(to_json(o), &err);
  ASSERT_TRUE(back) << err;
  EXPECT_EQ(back->strategy, Strategy::kS3);
  EXPECT_DOUBLE_EQ(back->apply_s, 0.0075);
  nlohmann::json bad = to_json(o);
  bad["apply_s"] = -1;
  EXPECT_FALSE(parse_plan_outcome(bad, &err));
  EXPECT_NE(err.find("apply_s"), std::string::npos) << err;
  bad.erase("apply_s");  // from a master before it was recorded
  back = parse_plan_outcome(bad, &err);
  ASSERT_TRUE(back) << err;
  EXPECT_EQ(back->apply_s, 0);

  JobRestart r;
  r.epoch = 3;
  r.world_before = 8;
  r.dp_before = 4;
  r.world = 6;
  r.dp = 3;
  r.microbatches = {11, 11, 10};
  const auto rb = parse_job_restart(to_json(r), &err);
  ASSERT_TRUE(rb) << err;
  EXPECT_EQ(rb->world, 6);
  EXPECT_EQ(rb->strategy, Strategy::kS4);
  EXPECT_EQ(rb->microbatches, (std::vector<int>{11, 11, 10}));
  nlohmann::json j = to_json(r);
  j["strategy"] = "S3";
  EXPECT_EQ(parse_job_restart(j, &err)->strategy, Strategy::kS3);
  j["strategy"] = "S2";
  EXPECT_FALSE(parse_job_restart(j, &err));
  j.erase("strategy");  // from a master before S3 restarts
  EXPECT_EQ(parse_job_restart(j, &err)->strategy, Strategy::kS4);
  j = to_json(r);
  j["microbatches"] = {11, 0};
  EXPECT_FALSE(parse_job_restart(j, &err));
  EXPECT_NE(err.find("microbatches"), std::string::npos) << err;
  j = to_json(r);
  j.erase("world");
  EXPECT_FALSE(parse_job_restart(j, &err));
  Event e;
  e.type = event_type::kJobRestart;
  e.t_s = 20;
  e.detail = to_json(r);
  EXPECT_TRUE(parse_event(to_json(e).dump(), &err)) << err;  // a known event type
}

TEST(Messages, RoundTripAndRejectBadValues) {
  Event e;
  e.type = event_type::kSlowdown;
  e.t_s = 12.5;
  e.rank = 3;
  e.node = 0;
  e.index = 40;
  e.detected_index = 43;
  e.before_ms = 270;
  e.after_ms = 330;
  e.ratio = 330.0 / 270;
  std::string err;
  auto back = parse_event(to_json(e).dump(), &err);
  ASSERT_TRUE(back) << err;
  EXPECT_EQ(back->rank, 3);
  EXPECT_EQ(back->detected_index, 43);
  EXPECT_FALSE(parse_event("{\"type\":\"slowdown\",\"t_s\":1", &err));
  EXPECT_NE(err.find("not valid JSON"), std::string::npos);
  EXPECT_FALSE(parse_event(R"({"type":"slowdown","t_s":"x","rank":1,"before_ms":1,"after_ms":2})", &err));
  EXPECT_EQ(err, "t_s: must be a finite number");
  EXPECT_FALSE(parse_event(R"({"type":"bogus","t_s":1})", &err));
  EXPECT_EQ(err, "type: unknown event type 'bogus'");
  EXPECT_FALSE(parse_event(R"({"type":"slowdown","t_s":1,"before_ms":1,"after_ms":2})", &err));
  EXPECT_EQ(err, "rank: missing");
  EXPECT_FALSE(parse_event("[1,2]", &err));
  EXPECT_FALSE(parse_event(std::string(kMaxMessageBytes + 1, ' '), &err));
  EXPECT_NE(err.find("too large"), std::string::npos);
  EXPECT_FALSE(parse_master_state(R"({"cursor":"1-x","state":"healthy"})", &err));
  EXPECT_EQ(err, "cursor: not a stream id");
  auto st = parse_master_state(to_json(MasterState{}).dump(), &err);
  ASSERT_TRUE(st) << err;
  EXPECT_EQ(st->cursor, "0-0");
  EXPECT_EQ(st->plans_recorded, 0);  // a new job's state: no plan yet, none unrecorded
  MasterState recorded;
  recorded.plans_recorded = 7;
  EXPECT_EQ(parse_master_state(to_json(recorded).dump(), &err)->plans_recorded, 7);
  // A state written before the field says nothing of which plans have their events.
  EXPECT_EQ(parse_master_state(R"({"cursor":"1-0","state":"healthy"})", &err)->plans_recorded, -1);
  EXPECT_FALSE(parse_master_state(R"({"cursor":"1-0","state":"healthy","plans_recorded":-2})", &err));
  EXPECT_FALSE(parse_rank_registration(R"({"rank":-4,"node":0,"host":"h","pid":1})", &err));
  EXPECT_EQ(err, "rank: -4 out of range");
  // A profile's spread of iterations, and a localisation's pace spread: kept, and checked.
  ProfileReport prof;
  prof.iterations = 3;
  prof.iter_ms = 510;
  prof.iter_ms_min = 491;
  prof.iter_ms_max = 528;
  auto pb = parse_profile_report(to_json(prof), &err);
  ASSERT_TRUE(pb) << err;
  EXPECT_DOUBLE_EQ(pb->iter_ms_min, 491);
  EXPECT_DOUBLE_EQ(pb->iter_ms_max, 528);
  auto older = parse_profile_report(nlohmann::json{{"iter_ms", 5}}, &err);  // an older agent's
  ASSERT_TRUE(older) << err;
  EXPECT_DOUBLE_EQ(older->iter_ms_max, 0);
  ProfileReport one;  // one iteration, or none: no spread to tell
  one.iterations = 1;
  auto ob = parse_profile_report(to_json(one), &err);
  ASSERT_TRUE(ob) << err;
  EXPECT_EQ(ob->iterations, 1);
  EXPECT_DOUBLE_EQ(ob->iter_ms_min, 0);
  EXPECT_FALSE(parse_profile_report(nlohmann::json{{"iter_ms_min", 5}, {"iter_ms_max", 4}}, &err));
  EXPECT_EQ(err, "iter_ms_min/iter_ms_max: negative, or the least over the greatest");
  EXPECT_FALSE(parse_profile_report(nlohmann::json{{"iter_ms_min", -1}, {"iter_ms_max", 4}}, &err));
  LocalisationReport lr;
  lr.pace_spread = 1.094;
  auto lb = parse_localisation_report(to_json(lr), &err);
  ASSERT_TRUE(lb) << err;
  EXPECT_DOUBLE_EQ(lb->pace_spread, 1.094);
  EXPECT_FALSE(to_json(LocalisationReport{}).contains("pace_spread"));  // steady: not written
  EXPECT_FALSE(parse_localisation_report(nlohmann::json{{"cause", "unknown"}, {"pace_spread", 0.5}}, &err));
  EXPECT_EQ(err, "pace_spread: must be at least 1");
  // The window's iteration: written when one was measured, never negative.
  lr.iter_ms = 512.5;
  lb = parse_localisation_report(to_json(lr), &err);
  ASSERT_TRUE(lb) << err;
  EXPECT_DOUBLE_EQ(lb->iter_ms, 512.5);
  EXPECT_FALSE(to_json(LocalisationReport{}).contains("iter_ms"));
  EXPECT_FALSE(parse_localisation_report(nlohmann::json{{"cause", "unknown"}, {"iter_ms", -3}}, &err));
  EXPECT_EQ(err, "iter_ms: must be at least 0");
}

}  // namespace
}  // namespace greyhound

namespace greyhound {
namespace {

// A validation pause's command, its ranks' reports and the master's verdict: round trips, and what a
// reader refuses (docs/redis-keys.md, "Validation").
// A pre-flight's request (an operator's) and answer (the master's): both round-trip, and hostile values are
// refused with a reason, never trusted.
TEST(Messages, PreflightRequestAndReportRoundTripAndChecks) {
  PreflightRequest q;
  q.id = "pf-1796279513902-10622";
  q.fail_on_slow = true;
  q.t_unix_ms = 1796279513902;
  std::string err;
  auto qb = parse_preflight_request(to_json(q).dump(), &err);
  ASSERT_TRUE(qb) << err;
  EXPECT_EQ(qb->id, q.id);
  EXPECT_TRUE(qb->fail_on_slow);
  EXPECT_EQ(qb->t_unix_ms, q.t_unix_ms);
  for (const char* bad : {R"({"id":""})", R"({"id":"a b"})", R"({"id":"x:y"})", R"({"id":5})", R"({"fail_on_slow":true})",
                          R"({"id":"p","fail_on_slow":"yes"})", R"([1])", "not json"}) {
    EXPECT_FALSE(parse_preflight_request(bad, &err)) << bad;
  }
  EXPECT_FALSE(parse_preflight_request(R"({"id":")" + std::string(65, 'a') + R"("})", &err));

  PreflightReport r;
  r.id = q.id;
  r.state = "slow";
  r.fail_on_slow = true;
  r.exit = true;
  r.slow_gpus = {{5, 2, 16.0, 10.0, 1.6, 2.0, true, 300.0, "done"}};
  r.gemm_types = {"fp32", "fp16", "fp8"};
  r.slow_links = {{1, 2, "inter-node", 19.2, 0.1, 2.0, 1}};
  r.gpus_tested = 8;
  r.transfers_tested = 24;
  r.groups_tested = 13;
  r.reason = "1 of 8 GPUs ...";
  r.pause = "preflight-1.x";
  r.ranks = 8;
  r.pause_s = 1.3;
  r.tests_s = 1.0;
  auto rb = parse_preflight_report_text(to_json(r).dump(), &err);
  ASSERT_TRUE(rb) << err;
  EXPECT_EQ(to_json(*rb), to_json(r));
  EXPECT_TRUE(rb->done());
  const auto refused = [&](const char* key, const nlohmann::json& value) {
    nlohmann::json bad = to_json(r);
    bad[key] = value;
    std::string e;
    EXPECT_FALSE(parse_preflight_report(bad, &e)) << key << " = " << value.dump();
    EXPECT_NE(e.find(key), std::string::npos) << e;
  };
  refused("state", "sleeping");
  refused("exit", 1);
  refused("pause_s", -1.0);
  refused("slow_gpus", nlohmann::json::array({{{"rank", -3}, {"ms", 1.0}}}));
  refused("slow_gpus", nlohmann::json::array({{{"rank", 3}, {"ms", 1.0}, {"fp8_tflops", -1.0}}}));
  refused("gemm_types", nlohmann::json::array({"fp64"}));
  refused("slow_links", nlohmann::json::array({{{"node_a", "x"}, {"node_b", 1}}}));
  refused("slow_links", nlohmann::json::array({{{"node_a", 1}, {"node_b", 2}, {"ratio", -2.0}}}));
  refused("id", "");
  EXPECT_FALSE(parse_preflight_report_text(std::string(1 << 22, '{'), &err));
}

// An operator's manual plan and the master's answer round-trip; a request that is no plan is refused.
TEST(Messages, OperatorPlanRequestAndAnswerRoundTripAndChecks) {
  OperatorPlanRequest q;
  q.id = "op-1";
  q.microbatches = {6, 10};
  q.placement = {{0, 0, 0, 0}, {1, 1, 0, 0}};
  q.reason = "slow PSU";
  std::string err;
  auto qb = parse_operator_plan_request(to_json(q).dump(), &err);
  ASSERT_TRUE(qb) << err;
  EXPECT_EQ(to_json(*qb), to_json(q));
  for (const char* bad : {R"({"id":"x","action":"apply"})", R"({"id":"x","action":"revert","microbatches":[1,2]})",
                          R"({"id":"x","action":"panic"})", R"({"id":"","action":"release"})",
                          R"({"id":"x","action":"apply","microbatches":[0,16]})",
                          R"({"id":"x","action":"apply","microbatches":[1.5]})",
                          R"({"id":"x","action":"apply","placement":[{"rank":0,"tp":0,"dp":"a","pp":0}]})",
                          R"({"id":"x","action":"apply","placement":{"rank":0}})"}) {
    EXPECT_FALSE(parse_operator_plan_request(bad, &err)) << bad;
  }
  EXPECT_TRUE(parse_operator_plan_request(R"({"id":"x","action":"release"})", &err)) << err;
  OperatorPlanReport a{"op-1", "published", 7, "operator's plan op-1", 5};
  auto ab = parse_operator_plan_report(to_json(a).dump(), &err);
  ASSERT_TRUE(ab) << err;
  EXPECT_EQ(to_json(*ab), to_json(a));
  EXPECT_FALSE(parse_operator_plan_report(R"({"id":"op-1","state":"maybe"})", &err));
}

TEST(Messages, PauseCommandReportAndVerdictRoundTripAndChecks) {
  Command c;
  c.cmd = "pause";
  c.id = "validate-1.x";
  PauseSpec p;
  p.at_iteration = 42;
  p.deadline_s = 30;
  p.gemm_n = 8192;
  p.repeats = 3;
  p.sizes = {16ull << 20, 32ull << 20};
  p.ranks[0].gemm = true;
  p.ranks[1].transfers = {{0xabcdef0123456789ull, 1, 3, true}, {0x10, 0, 0, false}};
  p.ranks[7];
  c.pause = p;
  std::string err;
  auto back = parse_command(to_json(c).dump(), &err);
  ASSERT_TRUE(back) << err;
  EXPECT_EQ(back->cmd, "pause");
  EXPECT_EQ(back->id, "validate-1.x");
  ASSERT_TRUE(back->pause);
  EXPECT_EQ(*back->pause, p);
  for (const char* steer : {"pause_run", "pause_resume", "pause_abort", "pause_exit"}) {
    Command s;
    s.cmd = steer;
    s.id = "validate-1.x";
    auto b = parse_command(to_json(s).dump(), &err);
    ASSERT_TRUE(b) << err;
    EXPECT_EQ(b->cmd, steer);
    EXPECT_FALSE(b->pause);
  }
  const auto refused = [&](const std::string& text, const std::string& why) {
    std::string e;
    EXPECT_FALSE(parse_command(text, &e)) << text;
    EXPECT_NE(e.find(why), std::string::npos) << e;
  };
  refused(R"({"cmd":"pause_run","id":""})", "a pause needs one");
  refused(R"({"cmd":"pause","id":"v"})", "args: missing");
  const std::string ok_args = R"("at_iteration":1,"deadline_s":30,"sizes":[1024],"ranks":{"0":{"gemm":true,"transfers":[]}})";
  EXPECT_TRUE(parse_command(R"({"cmd":"pause","id":"v","args":{)" + ok_args + "}}", &err)) << err;
  refused(R"({"cmd":"pause","id":"v","args":{"at_iteration":-1,"deadline_s":30,"sizes":[],"ranks":{}}})", "at_iteration");
  refused(R"({"cmd":"pause","id":"v","args":{"at_iteration":1,"deadline_s":0,"sizes":[],"ranks":{}}})", "deadline_s");
  refused(R"({"cmd":"pause","id":"v","args":{"at_iteration":1,"deadline_s":3,"sizes":[0],"ranks":{}}})", "sizes");
  refused(R"({"cmd":"pause","id":"v","args":{"at_iteration":1,"deadline_s":3,"sizes":[1,2,3,4,5],"ranks":{}}})", "sizes");
  refused(R"({"cmd":"pause","id":"v","args":{"at_iteration":1,"deadline_s":3,"sizes":[],"ranks":{"x":{"gemm":true,"transfers":[]}}}})",
          "not a rank");
  refused(R"({"cmd":"pause","id":"v","args":{"at_iteration":1,"deadline_s":3,"sizes":[],"ranks":{"1":{"gemm":1,"transfers":[]}}}})",
          "gemm");
  refused(R"({"cmd":"pause","id":"v","args":{"at_iteration":1,"deadline_s":3,"sizes":[],"ranks":{"1":{"gemm":true,"transfers":[{"group":"zz","pass":0,"peer":1,"send":true}]}}}})",
          "group");

  PauseReport r;
  r.id = "validate-1.x";
  r.state = "done";
  r.gemm_ms = {12.5, 6.25};
  r.gemm_tflops = {88.0, 176.0};
  r.transfers = {{{0x10, 0, 1, true}, {1.5, 3.0}}};
  auto rb = parse_pause_report(to_json(r), &err);
  ASSERT_TRUE(rb) << err;
  EXPECT_EQ(rb->state, "done");
  EXPECT_EQ(rb->gemm_ms, r.gemm_ms);
  ASSERT_EQ(rb->transfers.size(), 1u);
  EXPECT_EQ(rb->transfers[0].spec, r.transfers[0].spec);
  EXPECT_EQ(rb->transfers[0].ms, r.transfers[0].ms);
  nlohmann::json bad = to_json(r);
  bad["state"] = "sleeping";
  EXPECT_FALSE(parse_pause_report(bad, &err));
  bad = to_json(r);
  bad["gemm_ms"] = {-1.0};
  EXPECT_FALSE(parse_pause_report(bad, &err));
  // A hook without FP8 said nothing of it; one with it says how it went, and on which device.
  EXPECT_FALSE(to_json(r).contains("gemm_fp8"));
  EXPECT_EQ(rb->gemm_fp8, "");
  EXPECT_EQ(rb->compute_capability, 0);
  r.gemm_fp8 = "done";
  r.gemm_fp8_ms = 3.0;
  r.gemm_fp8_tflops = 350.0;
  r.compute_capability = 90;
  rb = parse_pause_report(to_json(r), &err);
  ASSERT_TRUE(rb) << err;
  EXPECT_EQ(rb->gemm_ms, r.gemm_ms);  // FP8 apart: a master that sums gemm_ms knows nothing of it
  EXPECT_EQ(rb->gemm_fp8, "done");
  EXPECT_EQ(rb->gemm_fp8_ms, 3.0);
  EXPECT_EQ(rb->gemm_fp8_tflops, 350.0);
  EXPECT_EQ(rb->compute_capability, 90);
  bad = to_json(r);
  bad["gemm_fp8"] = "unsupported";  // a time for an FP8 GEMM that did not run
  EXPECT_FALSE(parse_pause_report(bad, &err));
  EXPECT_NE(err.find("not done"), std::string::npos) << err;
  bad = to_json(r);
  bad["gemm_fp8"] = "sideways";
  EXPECT_FALSE(parse_pause_report(bad, &err));
  EXPECT_NE(err.find("gemm_fp8"), std::string::npos) << err;
  bad = to_json(r);
  bad["compute_capability"] = 1000;
  EXPECT_FALSE(parse_pause_report(bad, &err));
  bad = to_json(r);
  bad["gemm_tflops"] = {-350.0};
  EXPECT_FALSE(parse_pause_report(bad, &err));

  ValidatedReport v;
  v.id = "validate-1.x";
  v.cause = "link";
  v.node_a = 2;
  v.node_b = 3;
  v.ratio = 4.5;
  v.gb_per_s = 0.5;
  v.peers_gb_per_s = 2.25;
  v.pause_s = 1.25;
  v.tests_s = 0.75;
  v.at_iteration = 42;
  v.ranks = 8;
  v.links = {{0, 2, 0, 1, "inter-node", 10, 2, 5, 0.5, true}};
  auto vb = parse_validated_report(to_json(v), &err);
  ASSERT_TRUE(vb) << err;
  EXPECT_EQ(vb->cause, "link");
  EXPECT_EQ(vb->node_a, 2);
  EXPECT_EQ(vb->node_b, 3);
  EXPECT_EQ(vb->pause_s, 1.25);
  EXPECT_FALSE(vb->aborted);
  nlohmann::json vbad = to_json(v);
  vbad["cause"] = "cosmic rays";
  EXPECT_FALSE(parse_validated_report(vbad, &err));
  // A GPU verdict: which GEMMs were compared, and each GPU's FP8 throughput beside its FP32.
  v.cause = "gpu";
  v.rank = 5;
  v.gemm_types = {"fp32", "fp16", "fp8"};
  v.gpus = {{5, 0, 30.0, 20.0, 1.5, 40.0, true, 600.0, "done"}, {6, 0, 20.0, 30.0, 0.67, 60.0, false, 0.0, "failed"}};
  vb = parse_validated_report(to_json(v), &err);
  ASSERT_TRUE(vb) << err;
  EXPECT_EQ(vb->gemm_types, v.gemm_types);
  ASSERT_EQ(vb->gpus.size(), 2u);
  EXPECT_EQ(vb->gpus[0].fp8_tflops, 600.0);
  EXPECT_EQ(vb->gpus[0].tflops, 40.0);
  EXPECT_TRUE(vb->gpus[0].slow);
  EXPECT_EQ(vb->gpus[1].fp8_tflops, 0.0);
  EXPECT_EQ(vb->gpus[0].fp8, "done");
  EXPECT_EQ(vb->gpus[1].fp8, "failed");
  vbad = to_json(v);
  vbad["gemm_types"] = {"fp4"};
  EXPECT_FALSE(parse_validated_report(vbad, &err));
  vbad = to_json(v);
  vbad["gpus"][1]["fp8"] = "melted";
  EXPECT_FALSE(parse_validated_report(vbad, &err));

  // The agent's iteration update carries the framework's mark when it has one.
  IterationUpdate u;
  u.rank = 3;
  u.index = 9;
  u.iter_ms = 100;
  u.mark = 17;
  auto ub = parse_iteration_update(to_json(u).dump(), &err);
  ASSERT_TRUE(ub) << err;
  EXPECT_EQ(ub->mark, 17);
  u.mark = -1;
  EXPECT_FALSE(to_json(u).contains("mark"));
  EXPECT_EQ(parse_iteration_update(to_json(u).dump(), &err)->mark, -1);
}

TEST(Messages, AnIncidentsNewestSnapshotReplacesItsOlderOnes) {
  std::vector<Incident> snapshots;
  Incident a;
  a.id = 1;
  a.ranks = {0};
  store::upsert_incident(snapshots, a);
  Incident b;
  b.id = 2;
  store::upsert_incident(snapshots, b);
  a.ranks = {0, 1, 2};
  store::upsert_incident(snapshots, a);
  ASSERT_EQ(snapshots.size(), 2u);
  EXPECT_EQ(snapshots[0].id, 1);
  EXPECT_EQ(snapshots[0].ranks, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(snapshots[1].id, 2);
}

}  // namespace
}  // namespace greyhound
