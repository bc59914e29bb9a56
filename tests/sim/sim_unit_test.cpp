// Pure pieces of the simulated cluster: reductions, fault schedule, timing model, 1F1B schedule, report.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sim/chaos_schedule.h"
#include "sim/fault_schedule.h"
#include "sim/pipeline_schedule.h"
#include "sim/reduce.h"
#include "sim/sim_model.h"
#include "sim/simcluster/run_report.h"
#include "store/messages.h"

namespace greyhound::sim {
namespace {

TEST(Reduce, AllOperatorsOnIntegersAndFloats) {
  const std::int32_t a[] = {1, -5, 7}, b[] = {4, 2, -3}, c[] = {2, 2, 2};
  const void* in[] = {a, b, c};
  std::int32_t out[3];
  reduce(kInt32, 0, in, 3, out, 3);
  EXPECT_EQ(std::vector<int>(out, out + 3), (std::vector<int>{7, -1, 6}));
  reduce(kInt32, 1, in, 3, out, 3);
  EXPECT_EQ(std::vector<int>(out, out + 3), (std::vector<int>{8, -20, -42}));
  reduce(kInt32, 2, in, 3, out, 3);
  EXPECT_EQ(std::vector<int>(out, out + 3), (std::vector<int>{4, 2, 7}));
  reduce(kInt32, 3, in, 3, out, 3);
  EXPECT_EQ(std::vector<int>(out, out + 3), (std::vector<int>{1, -5, -3}));
  reduce(kInt32, 4, in, 3, out, 3);
  EXPECT_EQ(std::vector<int>(out, out + 3), (std::vector<int>{2, 0, 2}));  // integer division, like NCCL

  const double x[] = {0.5, 1e308}, y[] = {0.25, 1e308};
  const void* din[] = {x, y};
  double dout[2];
  reduce(kFloat64, 4, din, 2, dout, 2);
  EXPECT_EQ(dout[0], 0.375);
  EXPECT_TRUE(std::isinf(dout[1]));  // sum overflows before the division, as a float kernel would
}

TEST(Reduce, HalfAndBfloat16RoundToNearestEven) {
  EXPECT_EQ(float_to_half(1.0f), 0x3c00);
  EXPECT_EQ(float_to_half(-2.0f), 0xc000);
  EXPECT_EQ(float_to_half(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_half(65520.0f), 0x7c00);        // rounds to infinity
  EXPECT_EQ(float_to_half(1.0f + 1.0f / 2048), 0x3c00);  // tie -> even
  EXPECT_EQ(float_to_half(1.0f + 3.0f / 2048), 0x3c02);  // tie -> even (up)
  EXPECT_EQ(float_to_half(5.9604645e-08f), 0x0001);  // smallest subnormal
  EXPECT_EQ(half_to_float(0x0001), 5.9604645e-08f);
  EXPECT_TRUE(std::isnan(half_to_float(float_to_half(NAN))));
  for (std::uint32_t h = 0; h < 0x7c00; ++h) {  // every finite positive half survives a round trip
    ASSERT_EQ(float_to_half(half_to_float(static_cast<std::uint16_t>(h))), h);
  }
  EXPECT_EQ(float_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(bf16_to_float(0x3f80), 1.0f);
  EXPECT_EQ(float_to_bf16(1.00390625f), 0x3f80);  // 1 + 2^-8: tie -> even
  EXPECT_EQ(float_to_bf16(1.01171875f), 0x3f82);  // 1 + 3*2^-8: tie -> even (up)

  const std::uint16_t h1[] = {float_to_half(1.5f)}, h2[] = {float_to_half(2.25f)};
  const void* in[] = {h1, h2};
  std::uint16_t out[1];
  reduce(kFloat16, 0, in, 2, out, 1);
  EXPECT_EQ(half_to_float(out[0]), 3.75f);
  EXPECT_FALSE(reduction_supported(kFp8E4M3, 0));
  EXPECT_FALSE(reduction_supported(kFloat32, 5));
}

TEST(Reduce, Fp8DecodesAsCublasLtDefinesIt) {
  // E4M3: bias 7, no infinities, S.1111.111 the only NaN; 448 the largest.
  EXPECT_EQ(fp8_e4m3_to_float(0x3c), 1.5f);
  EXPECT_EQ(fp8_e4m3_to_float(0x38), 1.0f);
  EXPECT_EQ(fp8_e4m3_to_float(0xc0), -2.0f);
  EXPECT_EQ(fp8_e4m3_to_float(0x7e), 448.0f);
  EXPECT_EQ(fp8_e4m3_to_float(0x78), 256.0f);  // S.1111.000: a number, not an infinity
  EXPECT_TRUE(std::isnan(fp8_e4m3_to_float(0x7f)));
  EXPECT_TRUE(std::isnan(fp8_e4m3_to_float(0xff)));
  EXPECT_EQ(fp8_e4m3_to_float(0x01), std::ldexp(1.0f, -9));  // smallest subnormal
  EXPECT_EQ(fp8_e4m3_to_float(0x07), 7 * std::ldexp(1.0f, -9));
  EXPECT_EQ(fp8_e4m3_to_float(0x08), std::ldexp(1.0f, -6));  // smallest normal
  EXPECT_TRUE(std::signbit(fp8_e4m3_to_float(0x80)));
  // E5M2: bias 15, IEEE-like; 57344 the largest.
  EXPECT_EQ(fp8_e5m2_to_float(0x3c), 1.0f);
  EXPECT_EQ(fp8_e5m2_to_float(0x3e), 1.5f);
  EXPECT_EQ(fp8_e5m2_to_float(0x7b), 57344.0f);
  EXPECT_EQ(fp8_e5m2_to_float(0x7c), INFINITY);
  EXPECT_EQ(fp8_e5m2_to_float(0xfc), -INFINITY);
  EXPECT_TRUE(std::isnan(fp8_e5m2_to_float(0x7d)));
  EXPECT_EQ(fp8_e5m2_to_float(0x01), std::ldexp(1.0f, -16));
  // Every E4M3 and E5M2 value but the NaNs is what half precision (which holds them all) says it is.
  for (int v = 0; v < 256; ++v) {
    const float e4 = fp8_e4m3_to_float(static_cast<std::uint8_t>(v));
    if (!std::isnan(e4)) {
      ASSERT_EQ(half_to_float(float_to_half(e4)), e4) << v;
    }
    // E5M2 is the top byte of a half.
    const float e5 = fp8_e5m2_to_float(static_cast<std::uint8_t>(v));
    const float h = half_to_float(static_cast<std::uint16_t>(v << 8));
    if (std::isnan(h)) {
      ASSERT_TRUE(std::isnan(e5)) << v;
    } else {
      ASSERT_EQ(e5, h) << v;
    }
  }
}

TEST(ChaosSchedule, StopAndContStarveAServiceOrHangRedisAndRedisCanBeBusy) {
  const auto c = parse_chaos_text(R"([{"at_s":9,"action":"cont","target":"agent:1"},
                                      {"at_s":4,"action":"stop","target":"agent:1"},
                                      {"at_s":5,"action":"stop","target":"master"}])",
                                  2);
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[0].action, "stop");
  EXPECT_EQ(c[0].node, 1);
  EXPECT_EQ(c[1].target, "master");
  EXPECT_EQ(c[2].action, "cont");
  const auto refused = [](const std::string& text) {
    try {
      (void)parse_chaos_text(text, 2);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_EQ(parse_chaos_text(R"([{"at_s":1,"action":"stop","target":"redis"}])", 2)[0].target, "redis");  // hung
  EXPECT_EQ(refused(R"([{"at_s":1,"action":"pause","target":"agent:0"}])"),
            "--chaos[0].action: must be \"kill\", \"start\", \"stop\", \"cont\" or \"busy\"");
  EXPECT_EQ(refused(R"([{"at_s":1,"action":"stop","target":"leader"}])"),
            "--chaos[0].action: the leader can only be killed (\"start\" it as \"master\")");
  // A busy Redis, for a while.
  const auto busy = parse_chaos_text(R"([{"at_s":3,"action":"busy","target":"redis","for_s":8}])", 2);
  ASSERT_EQ(busy.size(), 1u);
  EXPECT_EQ(busy[0].action, "busy");
  EXPECT_DOUBLE_EQ(busy[0].for_s, 8);
  EXPECT_EQ(refused(R"([{"at_s":1,"action":"busy","target":"master","for_s":1}])"),
            "--chaos[0].action: only Redis is made busy");
  for (const char* bad : {R"([{"at_s":1,"action":"busy","target":"redis"}])",
                          R"([{"at_s":1,"action":"busy","target":"redis","for_s":0}])",
                          R"([{"at_s":1,"action":"busy","target":"redis","for_s":601}])"}) {
    EXPECT_EQ(refused(bad), "--chaos[0].for_s: a busy Redis needs a duration in (0, 600] s") << bad;
  }
}

TEST(FaultSchedule, ParsesTheDocumentedExample) {
  const auto f = FaultSchedule::parse_text(
      R"({"faults":[{"kind":"gpu","rank":3,"start_s":5,"end_s":20,"slowdown":1.7},
                    {"kind":"link","nodes":[1,2],"start_s":30,"end_s":60,"bandwidth_factor":0.3},
                    {"kind":"cpu","rank":0,"start_s":10,"end_s":30,"slowdown":1.3},
                    {"kind":"gpu","rank":3,"start_s":15,"end_s":25,"slowdown":2,"label":"overlap"}]})");
  ASSERT_EQ(f.faults().size(), 4u);
  EXPECT_DOUBLE_EQ(f.gpu_slowdown(3, 4.99), 1.0);
  EXPECT_DOUBLE_EQ(f.gpu_slowdown(3, 5.0), 1.7);
  EXPECT_DOUBLE_EQ(f.gpu_slowdown(3, 16), 3.4);  // compound
  EXPECT_DOUBLE_EQ(f.gpu_slowdown(3, 20), 2.0);  // end is exclusive
  EXPECT_DOUBLE_EQ(f.gpu_slowdown(2, 16), 1.0);
  EXPECT_DOUBLE_EQ(f.cpu_slowdown(0, 12), 1.3);
  EXPECT_DOUBLE_EQ(f.link_factor(2, 1, 31), 0.3);  // unordered pair
  EXPECT_DOUBLE_EQ(f.link_factor(1, 3, 31), 1.0);
  EXPECT_DOUBLE_EQ(f.link_factor(1, 1, 31), 1.0);
  EXPECT_EQ(f.faults()[3].label, "overlap");
  // Round trip through JSON.
  const auto g = FaultSchedule::parse(f.to_json());
  EXPECT_EQ(g.to_json(), f.to_json());
}

TEST(FaultSchedule, BadSchedulesNameTheField) {
  auto error_of = [](const std::string& text) {
    try {
      FaultSchedule::parse_text(text);
    } catch (const FaultScheduleError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  const std::map<std::string, std::string> cases = {
      {R"({"faults":[{"kind":"gpu","rank":3,"start_s":5,"end_s":20,"slowdown":0.5}]})",
       "faults[0].slowdown: must be a number in [1, 1000]"},
      {R"({"faults":[{"kind":"gpu","rank":3,"start_s":5,"end_s":20}]})", "faults[0].slowdown: missing"},
      {R"({"faults":[{"kind":"gpu","rank":-1,"start_s":5,"end_s":20,"slowdown":2}]})",
       "faults[0].rank: must be a non-negative integer"},
      {R"({"faults":[{"kind":"link","nodes":[1],"start_s":5,"end_s":20,"bandwidth_factor":0.5}]})",
       "faults[0].nodes: must be an array of two node indices"},
      {R"({"faults":[{"kind":"link","nodes":[1,1],"start_s":5,"end_s":20,"bandwidth_factor":0.5}]})",
       "faults[0].nodes: must name two different nodes"},
      {R"({"faults":[{"kind":"link","nodes":[0,1],"start_s":5,"end_s":20,"bandwidth_factor":0}]})",
       "faults[0].bandwidth_factor: must be a number in (0, 1]"},
      {R"({"faults":[{"kind":"gpu","rank":1,"start_s":5,"end_s":5,"slowdown":2}]})",
       "faults[0].end_s: must be greater than start_s"},
      {R"({"faults":[{"kind":"gpu","rank":1,"start_s":"5","end_s":9,"slowdown":2}]})",
       "faults[0].start_s: must be a finite number"},
      {R"({"faults":[{"kind":"disk","rank":1,"start_s":5,"end_s":9}]})",
       "faults[0].kind: must be \"gpu\", \"link\", \"cpu\", \"kill\" or \"hang\", not \"disk\""},
      {R"({"faults":[{"kind":"kill","start_s":5}]})", "faults[0].rank: missing"},
      {R"({"faults":[{"kind":"kill","rank":2,"start_s":5,"slowdown":2}]})",
       "faults[0].slowdown: unknown field for kind \"kill\""},
      {R"({"faults":[{"kind":"kill","rank":2,"start_s":5,"end_s":4}]})", "faults[0].end_s: must be greater than start_s"},
      {R"({"faults":[{"kind":"gpu","rank":1,"start_s":5,"end_s":9,"slowdown":2,"slowdwn":3}]})",
       "faults[0].slowdwn: unknown field for kind \"gpu\""},
      {R"({"faults":{}})", "faults: must be an array"},
      {R"({"fault":[]})", "fault: unknown field (expected only \"faults\")"},
      {R"({"faults":[)", "not valid JSON"},
  };
  for (const auto& [text, want] : cases) {
    EXPECT_NE(error_of(text).find(want), std::string::npos) << text << " -> " << error_of(text);
  }
}

TEST(FaultSchedule, AKillFaultTakesItsRankFromItsStartOn) {
  const FaultSchedule f = FaultSchedule::parse_text(R"({"faults":[{"kind":"kill","rank":5,"start_s":12}]})");
  ASSERT_EQ(f.faults().size(), 1u);
  EXPECT_EQ(f.faults()[0].kind, FaultKind::kKill);
  EXPECT_DOUBLE_EQ(f.faults()[0].end_s, 13.0);  // the report's window
  EXPECT_FALSE(f.killed(5, 11.99));
  EXPECT_TRUE(f.killed(5, 12.0));
  EXPECT_TRUE(f.killed(5, 100.0));  // dead is dead
  EXPECT_FALSE(f.killed(4, 100.0));
  EXPECT_DOUBLE_EQ(f.gpu_slowdown(5, 12.5), 1.0);
  EXPECT_EQ(f.shape_error(4, 2), "faults[0].rank: 5 is not a rank of this job (0..3)");
  const FaultSchedule back = FaultSchedule::parse(f.to_json());
  ASSERT_EQ(back.faults().size(), 1u);
  EXPECT_EQ(back.faults()[0].rank, 5);
  EXPECT_TRUE(back.killed(5, 12.0));
}

TEST(SimModel, RingDurationsFollowTheSlowestLink) {
  SimModel m;
  m.intra_bw_MBps = 100;  // 1e8 B/s
  m.inter_bw_MBps = 10;   // 1e7 B/s
  m.intra_lat_us = 10;
  m.inter_lat_us = 100;
  FaultSchedule none;
  const std::vector<int> one_node = {0, 0, 0, 0};
  const std::vector<int> two_nodes = {0, 0, 1, 1};
  // AllReduce: 2(n-1) steps of (lat + S/n/bw).
  EXPECT_NEAR(collective_seconds(m, none, Op::kAllReduce, one_node, 4'000'000, 0), 6 * (10e-6 + 1e6 / 1e8), 1e-12);
  EXPECT_NEAR(collective_seconds(m, none, Op::kAllReduce, two_nodes, 4'000'000, 0), 6 * (100e-6 + 1e6 / 1e7), 1e-12);
  EXPECT_NEAR(collective_seconds(m, none, Op::kAllGather, two_nodes, 1'000'000, 0), 3 * (100e-6 + 1e6 / 1e7), 1e-12);
  EXPECT_NEAR(collective_seconds(m, none, Op::kBroadcast, two_nodes, 1'000'000, 0), 3 * 100e-6 + 1e6 / 1e7, 1e-12);
  EXPECT_NEAR(collective_seconds(m, none, Op::kAllReduce, std::vector<int>{3}, 1'000'000, 0), 10e-6, 1e-12);
  EXPECT_NEAR(p2p_seconds(m, none, 0, 1, 1'000'000, 0), 100e-6 + 0.1, 1e-12);
  EXPECT_NEAR(p2p_seconds(m, none, 2, 2, 1'000'000, 0), 10e-6 + 0.01, 1e-12);

  const auto slow = FaultSchedule::parse_text(
      R"({"faults":[{"kind":"link","nodes":[0,1],"start_s":1,"end_s":2,"bandwidth_factor":0.25}]})");
  EXPECT_NEAR(p2p_seconds(m, slow, 1, 0, 1'000'000, 1.5), 100e-6 + 0.4, 1e-12);
  EXPECT_NEAR(p2p_seconds(m, slow, 1, 0, 1'000'000, 2.5), 100e-6 + 0.1, 1e-12);
  EXPECT_NEAR(collective_seconds(m, slow, Op::kAllReduce, two_nodes, 4'000'000, 1.5), 6 * (100e-6 + 4e5 / 1e6 * 1.0),
              1e-9);
  EXPECT_NEAR(gemm_seconds(m, 2e9 * m.gemm_gflops, 1.5), 3.0, 1e-12);
}

TEST(SimModel, ParseRejectsUnknownAndOutOfRange) {
  EXPECT_THROW(SimModel::parse(nlohmann::json::parse(R"({"gemm_gflop": 1})")), SimModelError);
  EXPECT_THROW(SimModel::parse(nlohmann::json::parse(R"({"gemm_gflops": -1})")), SimModelError);
  EXPECT_THROW(SimModel::parse(nlohmann::json::parse(R"({"gpus_per_node": 0})")), SimModelError);
  EXPECT_THROW(SimModel::parse(nlohmann::json::parse(R"({"compute_capability": 8.9})")), SimModelError);
  EXPECT_THROW(SimModel::parse(nlohmann::json::parse(R"({"compute_capability": 9})")), SimModelError);
  const SimModel m =
      SimModel::parse(nlohmann::json::parse(R"({"gpus_per_node": 2, "inter_bw_MBps": 7, "compute_capability": 89})"));
  EXPECT_EQ(m.gpus_per_node, 2);
  EXPECT_EQ(m.inter_bw_MBps, 7);
  EXPECT_EQ(m.compute_capability, 89);
  EXPECT_EQ(SimModel{}.compute_capability, 90);
  EXPECT_EQ(SimModel::parse(m.to_json()).to_json(), m.to_json());
}

// Replays the 1F1B schedules of all stages against each other: every send meets a receive of the same
// micro-batch in the same order, each stage runs every forward and backward once, and a backward never
// precedes its forward.
TEST(PipelineSchedule, StagesMatchUpForManyShapes) {
  for (int P = 1; P <= 6; ++P) {
    for (int M = 1; M <= 9; ++M) {
      std::vector<std::vector<PipeStep>> s;
      for (int st = 0; st < P; ++st) s.push_back(one_f_one_b(st, P, M));
      for (int st = 0; st < P; ++st) {
        std::vector<int> fwd, bwd;
        for (const auto& x : s[st]) {
          if (x.action == PipeAction::kForward) fwd.push_back(x.mb);
          if (x.action == PipeAction::kBackward) {
            EXPECT_NE(std::find(fwd.begin(), fwd.end(), x.mb), fwd.end()) << "P" << P << " M" << M;
            bwd.push_back(x.mb);
          }
        }
        std::vector<int> all(M);
        for (int i = 0; i < M; ++i) all[i] = i;
        EXPECT_EQ(fwd, all);
        EXPECT_EQ(bwd, all);
        // Activations stage -> stage+1 and gradients stage+1 -> stage, in the same order on both sides.
        if (st + 1 < P) {
          std::vector<int> sent_act, recv_act, sent_grad, recv_grad;
          for (const auto& x : s[st]) {
            if (x.action == PipeAction::kSendForward || x.action == PipeAction::kSendForwardRecvBackward) sent_act.push_back(x.mb);
            if (x.action == PipeAction::kRecvBackward) recv_grad.push_back(x.mb);
            if (x.action == PipeAction::kSendForwardRecvBackward) recv_grad.push_back(x.mb2);
          }
          for (const auto& x : s[st + 1]) {
            if (x.action == PipeAction::kRecvForward) recv_act.push_back(x.mb);
            if (x.action == PipeAction::kSendBackwardRecvForward) {
              sent_grad.push_back(x.mb);
              recv_act.push_back(x.mb2);
            }
            if (x.action == PipeAction::kSendBackward) sent_grad.push_back(x.mb);
          }
          EXPECT_EQ(sent_act, all) << "P" << P << " M" << M;
          EXPECT_EQ(recv_act, all) << "P" << P << " M" << M;
          EXPECT_EQ(sent_grad, all) << "P" << P << " M" << M;
          EXPECT_EQ(recv_grad, all) << "P" << P << " M" << M;
        }
      }
    }
  }
  // Warm-up depth of Megatron's schedule: P - stage - 1 forwards before the first backward.
  const auto s0 = one_f_one_b(0, 4, 8);
  int forwards_before_backward = 0;
  for (const auto& x : s0) {
    if (x.action == PipeAction::kBackward) break;
    forwards_before_backward += x.action == PipeAction::kForward;
  }
  EXPECT_EQ(forwards_before_backward, 4);  // 3 warm-up + the first steady forward
}

TEST(RunReport, ParsesMinitrainLinesAndComputesThroughput) {
  const auto lines = parse_iteration_log(
      "greyhound[1]: recording\n"
      "iter 0 t_s 1.000000 iter_ms 500.000 loss 2.5 checksum 00ff\n"
      "iter 1 t_s 1.500000 iter_ms 500.000 loss 2.4 checksum 00fe\n"
      "iter 2 t_s 2.500000 iter_ms 1000.000 loss 2.3 checksum 00fd\n"
      "garbage iter 3\n");
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[2].index, 2);
  EXPECT_EQ(lines[2].checksum, "00fd");
  const auto its = job_iterations({lines});  // one rank: the job's period is its own
  ASSERT_EQ(its.size(), 3u);
  EXPECT_DOUBLE_EQ(its[0].iter_ms, 500.0);
  EXPECT_DOUBLE_EQ(its[2].iter_ms, 1000.0);
  EXPECT_DOUBLE_EQ(throughput_iter_per_min(its), 60.0 * 3 / 2.0);
  EXPECT_DOUBLE_EQ(mean_iter_ms_between(its, 1.2, 3.0), 750.0);
  const auto f = FaultSchedule::parse_text(
      R"({"faults":[{"kind":"gpu","rank":0,"start_s":2.0,"end_s":3.0,"slowdown":2}]})");
  EXPECT_DOUBLE_EQ(healthy_mean_iter_ms(its, f, 0), 500.0);
}

// The job's period is set by its last rank to finish: a slow last stage shows in it though rank 0's own
// loop (which waits for it only at the DP sync of the next iteration) does not.
TEST(RunReport, JobIterationsFollowTheLastRankToFinish) {
  const auto rank0 = parse_iteration_log(
      "iter 0 t_s 1.000 iter_ms 400.000 loss 0 checksum a\n"
      "iter 1 t_s 1.440 iter_ms 440.000 loss 0 checksum a\n"
      "iter 2 t_s 1.880 iter_ms 440.000 loss 0 checksum a\n"
      "iter 3 t_s 2.320 iter_ms 440.000 loss 0 checksum a\n");
  const auto rank1 = parse_iteration_log(
      "iter 0 t_s 1.100 iter_ms 450.000 loss 0 checksum b\n"
      "iter 1 t_s 1.773 iter_ms 673.000 loss 0 checksum b\n"
      "iter 2 t_s 2.446 iter_ms 673.000 loss 0 checksum b\n");  // one fewer: it failed
  const auto its = job_iterations({rank0, rank1});
  ASSERT_EQ(its.size(), 3u);
  EXPECT_EQ(its[0].last_rank, 1);
  EXPECT_NEAR(its[0].iter_ms, 500.0, 1e-9);  // from the earliest start (rank 0 at 0.6 s) to 1.1 s
  EXPECT_NEAR(its[1].iter_ms, 673.0, 1e-9);
  EXPECT_NEAR(its[2].iter_ms, 673.0, 1e-9);
  EXPECT_DOUBLE_EQ(its[2].loop_ms, 440.0);
  EXPECT_DOUBLE_EQ(its[2].t_s, 2.446);
  EXPECT_NEAR(throughput_iter_per_min(its), 60.0 * 3 / (2.446 - 0.6), 1e-9);
  // Ranks out of step (an index missing in one rank's lines): matched up to there only.
  auto gap = rank1;
  gap[1].index = 5;
  EXPECT_EQ(job_iterations({rank0, gap}).size(), 1u);
  EXPECT_TRUE(job_iterations({rank0, {}}).empty());
}

// The oracle's plans read like the master's in the timeline, marked as the oracle's.
TEST(RunReport, TimelineMarksTheOraclesPlans) {
  Plan p;
  p.epoch = 1;
  p.strategy = Strategy::kS2;
  p.microbatches = {10, 6};
  Event oracle;
  oracle.type = event_type::kPlan;
  oracle.t_s = 4.01;
  oracle.source = "oracle";
  oracle.detail = to_json(p);
  Event master = oracle;
  master.source = "master";
  master.t_s = 5.0;
  p.epoch = 2;
  master.detail = to_json(p);
  const nlohmann::json report = {{"events", {to_json(oracle), to_json(master)}}};
  const std::string tl = format_timeline(report);
  EXPECT_NE(tl.find("t=   4.01s  PLAN   (oracle) epoch 1 S2 apply, micro-batches per DP replica [10,6]"), std::string::npos)
      << tl;
  EXPECT_NE(tl.find("t=   5.00s  PLAN   epoch 2 S2 apply"), std::string::npos) << tl;
}

TEST(RunReport, TheTimelineNamesFailStopsAndHangsAndLeavesStallsOut) {
  Event dead;
  dead.type = event_type::kFailStop;
  dead.t_s = 8.25;
  dead.source = "agent:1";
  dead.rank = 5;
  dead.node = 1;
  dead.detail = to_json(FailStopDetail{4711, -1, 8.1});
  Event stall;
  stall.type = event_type::kStall;
  stall.t_s = 11;
  stall.source = "agent:0";
  stall.rank = 0;
  stall.node = 0;
  stall.detail = to_json(StallDetail{});
  Event hang;
  hang.type = event_type::kHang;
  hang.t_s = 12.5;
  hang.source = "master";
  HangDetail h;
  h.group = 0xab;
  h.op = "AllReduce";
  h.seq = 41;
  h.waiting = {4};
  h.missing = {5};
  h.since_t_s = 8.2;
  hang.detail = to_json(h);
  Event failed = dead;
  failed.rank = 4;
  failed.detail = to_json(FailStopDetail{4712, 1, 8.2});
  Event leader;
  leader.type = event_type::kLeader;
  leader.t_s = 13;
  leader.source = "master";
  leader.detail = to_json(LeaderDetail{"m1", 2});
  const nlohmann::json report = {
      {"events", {to_json(dead), to_json(stall), to_json(hang), to_json(failed), to_json(leader)}}};
  const std::string tl = format_timeline(report);
  EXPECT_NE(tl.find("t=   8.25s  FAILSTOP rank 5 (node 1) was killed or crashed; its last NCCL call t=8.10s"),
            std::string::npos) << tl;
  EXPECT_NE(tl.find("FAILSTOP rank 4 (node 1) exited with status 1"), std::string::npos) << tl;
  EXPECT_NE(tl.find("t=  12.50s  HANG   group 00000000000000ab call 41 (AllReduce): ranks [4] wait since t=8.20s "
                    "for ranks [5]"),
            std::string::npos) << tl;
  EXPECT_EQ(tl.find("stall"), std::string::npos) << tl;
  EXPECT_NE(tl.find("t=  13.00s  LEADER master m1 leads (epoch 2)"), std::string::npos) << tl;
}

// The injected faults' lines: each kind said as it is (a kill or a hang is no "CPU ... slowed"), and a
// report edited by hand (an entry that is not an object, fields of other types) neither throws nor aborts.
TEST(RunReport, TheTimelineSaysEachFaultAndSurvivesAnEditedOne) {
  const nlohmann::json faults = nlohmann::json::parse(R"([
    {"kind":"gpu","rank":3,"start_s":5,"end_s":20,"slowdown":1.7},
    {"kind":"link","nodes":[1,2],"start_s":30,"end_s":60,"bandwidth_factor":0.3},
    {"kind":"kill","rank":5,"start_s":12,"end_s":13},
    {"kind":"hang","rank":2,"start_s":21,"end_s":40},
    3, "x", null, [1,2],
    {"kind":7,"rank":"a","slowdown":"b","start_s":"c"},
    {"kind":"link","nodes":5},
    {"kind":"link","nodes":["a",{}]}
  ])");
  std::string tl;
  ASSERT_NO_THROW(tl = format_timeline({{"faults", faults}}));
  EXPECT_NE(tl.find("t=   5.00s  FAULT  start: GPU of rank 3 slowed 1.70x"), std::string::npos) << tl;
  EXPECT_NE(tl.find("FAULT  start: link between nodes 1 and 2 at 30% bandwidth"), std::string::npos) << tl;
  EXPECT_NE(tl.find("t=  12.00s  FAULT  start: kill of rank 5"), std::string::npos) << tl;
  EXPECT_NE(tl.find("t=  21.00s  FAULT  start: hang of rank 2"), std::string::npos) << tl;
  EXPECT_NE(tl.find("link between nodes -1 and -1"), std::string::npos) << tl;
  EXPECT_EQ(tl.find("CPU of rank 5"), std::string::npos) << tl;
}

}  // namespace
}  // namespace greyhound::sim
