// Validation end to end (docs/validation.md): the simulated cluster (8 ranks, TP2 x DP2 x PP2 on 4 virtual
// nodes of 2 GPUs) runs with the master validating every new fail-slow (--validate always). Each fault
// must be named by the pause's measurements exactly: the slow GPU by its GEMM, the congested link by its
// transfers, the contended host by a profile that names it while its GEMM is as fast as its peers'; and
// nothing else may be named. A healthy run pauses never. The pause's robustness: with the master, an agent
// or Redis gone during a pause, or a rank that never reaches the cut, every rank resumes by its deadline
// and the training computes exactly what it computes without greyhound.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "sim_run.h"
#include "store/messages.h"

namespace greyhound {
namespace {

using itest::SimRun;
using itest::slurp;
using json = nlohmann::json;

class Validation : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { root_ = itest::make_temp_dir("gh-validate"); }
  static void TearDownTestSuite() {
    if (!root_.empty()) std::system(("rm -rf " + root_).c_str());
  }

  // The cluster with `faults`, `iterations` iterations, validating always; `extra`: more flags.
  static SimRun run(const std::string& name, const std::string& faults, int iterations, const std::string& extra = "") {
    std::ofstream(root_ + "/" + name + ".json") << faults;
    return itest::run_simcluster(root_, name,
                                 "--iterations " + std::to_string(iterations) + " --faults " + root_ + "/" + name +
                                     ".json --validate always " + extra,
                                 4, 2);
  }

  // The verdicts of the run's completed pauses.
  static std::vector<ValidatedReport> verdicts(const SimRun& r) {
    std::vector<ValidatedReport> out;
    for (const auto& e : r.events("validated")) {
      std::string err;
      auto v = parse_validated_report(e["detail"], &err);
      EXPECT_TRUE(v) << err;
      if (v && !v->aborted) out.push_back(*v);
    }
    return out;
  }

  // Rank r's per-iteration weight checksums.
  static std::vector<std::string> checksums(const SimRun& r, int rank) {
    std::vector<std::string> out;
    std::ifstream in(r.dir + "/rank" + std::to_string(rank) + ".out");
    for (std::string line; std::getline(in, line);) {
      const auto at = line.find(" checksum ");
      if (line.rfind("iter ", 0) == 0 && at != std::string::npos) out.push_back(line.substr(at + 10, 16));
    }
    return out;
  }

  // What every rank computes without greyhound, `iterations` iterations (once per length for the suite).
  static const std::map<int, std::vector<std::string>>& reference(int iterations) {
    static std::map<int, std::map<int, std::vector<std::string>>> cache;
    auto& ref = cache[iterations];
    if (ref.empty()) {
      const SimRun r = itest::reference_run("--tp 2 --dp 2 --pp 2 --gpus-per-node 2 --microbatches 4 --iterations " +
                                            std::to_string(iterations));
      EXPECT_EQ(r.exit_code, 0) << r.log();
      for (int rank = 0; rank < 8; ++rank) ref[rank] = checksums(r, rank);
    }
    return ref;
  }

  static void expect_same_training(const SimRun& r, int iterations) {
    const auto& ref = reference(iterations);
    for (int rank = 0; rank < 8; ++rank) {
      const auto got = checksums(r, rank);
      EXPECT_EQ(got.size(), static_cast<std::size_t>(iterations)) << "rank " << rank;
      EXPECT_EQ(got, ref.at(rank)) << "rank " << rank << ": the weights differ from the run without greyhound";
    }
  }

  // Every rank's hook: the pauses it trapped at and how each ended ("told", "aborted", "deadline").
  static std::map<int, std::vector<std::string>> resumes(const SimRun& r) {
    std::map<int, std::vector<std::string>> out;
    for (int rank = 0; rank < 8; ++rank) {
      std::ifstream in(r.dir + "/rank" + std::to_string(rank) + ".err");
      for (std::string line; std::getline(in, line);) {
        const auto at = line.find(": resumed after ");
        if (at == std::string::npos) continue;
        const auto open = line.rfind('('), close = line.rfind(')');
        if (open != std::string::npos && close > open) out[rank].push_back(line.substr(open + 1, close - open - 1));
      }
    }
    return out;
  }

  static std::string root_;
};
std::string Validation::root_;

TEST_F(Validation, ASlowGpuIsNamedByItsGemm) {
  // Rank 5 (node 2) at 1/1.6 of its speed from 10 s.
  const SimRun r = run("gpu", R"({"faults":[{"kind":"gpu","rank":5,"start_s":10,"end_s":60,"slowdown":1.6}]})", 90);
  ASSERT_EQ(r.exit_code, 0) << r.log();
  const auto v = verdicts(r);
  ASSERT_FALSE(v.empty()) << r.report.dump(1);
  for (const auto& x : v) {
    EXPECT_EQ(x.cause, "gpu") << x.reason;
    EXPECT_EQ(x.rank, 5) << x.reason;
    EXPECT_EQ(x.node, 2) << x.reason;
    EXPECT_GT(x.ratio, 1.4) << x.reason;
    EXPECT_LT(x.ratio, 1.8) << x.reason;
    for (const auto& g : x.gpus) EXPECT_EQ(g.slow, g.rank == 5) << g.rank;
    for (const auto& l : x.links) EXPECT_FALSE(l.slow) << l.src << "->" << l.dst;
    // Every GPU (a simulated 9.0) ran the FP8 GEMM through the cuBLASLt stand-in too, which counted.
    EXPECT_EQ(x.gemm_types, (std::vector<std::string>{"fp32", "fp16", "fp8"}));
    for (const auto& g : x.gpus) EXPECT_GT(g.fp8_tflops, 0) << g.rank;
    EXPECT_GT(x.pause_s, 0);
    EXPECT_LT(x.pause_s, 10);
  }
  expect_same_training(r, 90);
}

TEST_F(Validation, ACongestedLinkIsNamedByItsTransfers) {
  // The link between nodes 2 and 3 at 5 % from 20 s (after the healthy baseline). The job asks NCCL for its
  // graph and topology dumps, and the stand-in's NCCL enters each node at its last GPU: the world's ring is
  // 1 0 3 2 5 4 7 6 (docs/validation.md, "NCCL's ring order"), so its transfers include 0 -> 3, which neither
  // its ring nor its tree in group-rank order (0 1 ... 7) sends, and not 7 -> 0, which its ring in that order
  // closes with (no other group holds both). Its tree graph chains each node's GPUs in ascending order, in
  // NCCL's balanced pattern: NCCL's trees send 5 -> 2 and 3 -> 4 between nodes (heads 0 2 4 6), not 4 -> 3 as
  // they would over the ring's order (heads 1 3 5 7); only the world's group holds these pairs.
  const std::string dumps = root_ + "/link-dumps";
  std::system(("mkdir -p " + dumps).c_str());
  const SimRun r =
      run("link", R"({"faults":[{"kind":"link","nodes":[2,3],"start_s":20,"end_s":70,"bandwidth_factor":0.05}]})", 110,
          "--rank-env NCCL_GRAPH_DUMP_FILE=" + dumps + "/graph.xml,NCCL_TOPO_DUMP_FILE=" + dumps +
              "/topo.xml,GREYHOUND_SIM_NCCL_RING=descending");
  ASSERT_EQ(r.exit_code, 0) << r.log();
  const auto v = verdicts(r);
  ASSERT_FALSE(v.empty()) << r.report.dump(1);
  for (const auto& x : v) {
    std::set<std::pair<int, int>> sent;
    for (const auto& l : x.links) sent.insert({l.src, l.dst});
    EXPECT_EQ(sent.count({0, 3}), 1u) << "the world's ring in NCCL's order";
    EXPECT_EQ(sent.count({7, 0}), 0u) << "the world's ring in group-rank order";
    EXPECT_EQ(sent.count({5, 2}), 1u) << "NCCL's trees over the tree graph's chains";
    EXPECT_EQ(sent.count({3, 4}), 1u) << "NCCL's trees over the tree graph's chains";
    EXPECT_EQ(sent.count({4, 3}), 0u) << "NCCL's trees over the ring's order";
    EXPECT_EQ(x.cause, "link") << x.reason;
    EXPECT_EQ(x.node_a, 2) << x.reason;
    EXPECT_EQ(x.node_b, 3) << x.reason;
    EXPECT_GT(x.ratio, 5) << x.reason;  // 20x the bytes' time at 5 %, less latency and noise
    EXPECT_LT(x.gb_per_s, x.peers_gb_per_s) << x.reason;
    for (const auto& g : x.gpus) EXPECT_FALSE(g.slow) << g.rank;
    for (const auto& l : x.links) {
      const bool crosses = std::min(l.src_node, l.dst_node) == 2 && std::max(l.src_node, l.dst_node) == 3;
      EXPECT_EQ(l.slow, crosses) << l.src << "->" << l.dst;
    }
  }
  expect_same_training(r, 110);
  // The job's dumps are where it asked for them, and no process's own copy is left.
  EXPECT_NE(slurp(dumps + "/graph.xml").find("<graphs version=\"1\">"), std::string::npos);
  EXPECT_NE(slurp(dumps + "/topo.xml").find("<system"), std::string::npos);
  EXPECT_EQ(std::system(("ls " + dumps + " | grep -q greyhound").c_str()) == 0, false) << "a .greyhound.<pid> file left";
}

TEST_F(Validation, ASlowGpuAndASlowLinkAtOnceAreBothNamed) {
  // Rank 1 (node 0) at 1/1.6 and the link between nodes 2 and 3 at 5 %, both from 20 s.
  const SimRun r = run("both", R"({"faults":[{"kind":"gpu","rank":1,"start_s":20,"end_s":70,"slowdown":1.6},
                                             {"kind":"link","nodes":[2,3],"start_s":20,"end_s":70,"bandwidth_factor":0.05}]})",
                       110);
  ASSERT_EQ(r.exit_code, 0) << r.log();
  const auto v = verdicts(r);
  ASSERT_FALSE(v.empty()) << r.report.dump(1);
  std::set<int> slow_gpus;
  std::set<std::pair<int, int>> slow_links;
  for (const auto& x : v) {
    for (const auto& g : x.gpus) {
      if (g.slow) slow_gpus.insert(g.rank);
    }
    for (const auto& l : x.links) {
      if (l.slow) slow_links.insert({std::min(l.src_node, l.dst_node), std::max(l.src_node, l.dst_node)});
    }
    // The GPU comes first: where it was tested, it is the verdict.
    if (!x.gpus.empty()) {
      EXPECT_EQ(x.cause, "gpu") << x.reason;
    }
    if (x.cause == "gpu") {
      EXPECT_EQ(x.rank, 1) << x.reason;
    }
    if (x.cause == "link") {
      EXPECT_EQ(std::make_pair(x.node_a, x.node_b), std::make_pair(2, 3)) << x.reason;
    }
  }
  EXPECT_EQ(slow_gpus, (std::set<int>{1}));
  EXPECT_EQ(slow_links, (std::set<std::pair<int, int>>{{2, 3}}));
  expect_same_training(r, 110);
}

TEST_F(Validation, TwoSlowGpusInDifferentReplicasAreBothNamed) {
  // Rank 1 (DP replica 0) and rank 6 (replica 1) at 1/1.6 from 10 s.
  const SimRun r = run("two-gpus", R"({"faults":[{"kind":"gpu","rank":1,"start_s":10,"end_s":60,"slowdown":1.6},
                                                 {"kind":"gpu","rank":6,"start_s":10,"end_s":60,"slowdown":1.6}]})",
                       90);
  ASSERT_EQ(r.exit_code, 0) << r.log();
  const auto v = verdicts(r);
  ASSERT_FALSE(v.empty()) << r.report.dump(1);
  std::set<int> named, slow;
  for (const auto& x : v) {
    EXPECT_EQ(x.cause, "gpu") << x.reason;
    named.insert(x.rank);
    for (const auto& g : x.gpus) {
      if (g.slow) slow.insert(g.rank);
    }
  }
  EXPECT_EQ(slow, (std::set<int>{1, 6}));
  for (int n : named) EXPECT_TRUE(n == 1 || n == 6) << n;
}

TEST_F(Validation, AContendedHostIsNamedWhileItsGpuIsCleared) {
  // Rank 5's host: every launch 40x slower from 10 s; its GPU is healthy.
  const SimRun r = run("host", R"({"faults":[{"kind":"cpu","rank":5,"start_s":10,"end_s":60,"slowdown":40}]})", 90);
  ASSERT_EQ(r.exit_code, 0) << r.log();
  const auto v = verdicts(r);
  ASSERT_FALSE(v.empty()) << r.report.dump(1);
  bool host = false;
  for (const auto& x : v) {
    EXPECT_NE(x.cause, "gpu") << x.reason;
    EXPECT_NE(x.cause, "link") << x.reason;
    if (x.cause == "host") {
      host = true;
      EXPECT_EQ(x.rank, 5) << x.reason;
      EXPECT_EQ(x.node, 2) << x.reason;
    }
    for (const auto& g : x.gpus) EXPECT_FALSE(g.slow) << g.rank;
  }
  EXPECT_TRUE(host);
}

TEST_F(Validation, AHealthyRunNeverPauses) {
  const SimRun r = run("healthy", R"({"faults":[]})", 90);
  ASSERT_EQ(r.exit_code, 0) << r.log();
  EXPECT_TRUE(r.events("validated").empty()) << r.report.dump(1);
  EXPECT_TRUE(r.events("pause").empty());
  EXPECT_TRUE(resumes(r).empty());
  expect_same_training(r, 90);
}

// ---- A pause always ends. The pauses here last ~6 s (--validate-gemm-n 240: eight GEMMs of ~0.8 s) so
// that the failure, at 15 s, lands inside the first one (which begins ~13.5 s, a few iterations after the
// fault's detection); every rank resumes by itself at its deadline, 15 s after its agent armed it. Had the
// failure come before the pause, no rank would have paused; after it, every rank would have been told.

constexpr const char* kLongPause = "--pause-deadline-s 15 --master-args '--validate-gemm-n 240'";
constexpr const char* kGpu5 = R"({"faults":[{"kind":"gpu","rank":5,"start_s":10,"end_s":60,"slowdown":1.6}]})";

std::string chaos_file(const std::string& root, const std::string& name, const std::string& actions) {
  const std::string path = root + "/" + name + "-chaos.json";
  std::ofstream(path) << actions;
  return path;
}

// Every rank of `ranks` resumed its first pause by itself at the deadline.
void expect_resumed_by_deadline(const std::map<int, std::vector<std::string>>& got, const std::set<int>& ranks) {
  for (int rank : ranks) {
    const auto it = got.find(rank);
    ASSERT_TRUE(it != got.end() && !it->second.empty()) << "rank " << rank << " never paused";
    EXPECT_EQ(it->second.front(), "deadline") << "rank " << rank;
  }
}

TEST_F(Validation, AMasterKilledDuringAPauseLeavesEveryRankResumingByItself) {
  const SimRun r = run("kill-master", kGpu5, 90,
                       std::string(kLongPause) + " --chaos " +
                           chaos_file(root_, "kill-master", R"([{"at_s":15,"action":"kill","target":"master"}])"));
  ASSERT_EQ(r.exit_code, 0) << r.log();
  expect_resumed_by_deadline(resumes(r), {0, 1, 2, 3, 4, 5, 6, 7});
  expect_same_training(r, 90);
}

TEST_F(Validation, AnAgentKilledDuringAPauseLeavesItsRanksResumingByThemselves) {
  // Node 2's agent (ranks 4 and 5) dies mid-pause and comes back later; the master gets no results from
  // node 2 and aborts the pause for the others.
  const SimRun r = run("kill-agent", kGpu5, 90,
                       std::string(kLongPause) + " --chaos " +
                           chaos_file(root_, "kill-agent", R"([{"at_s":15,"action":"kill","target":"agent:2"},
                                                               {"at_s":35,"action":"start","target":"agent:2"}])"));
  ASSERT_EQ(r.exit_code, 0) << r.log();
  const auto got = resumes(r);
  expect_resumed_by_deadline(got, {4, 5});
  for (int rank : {0, 1, 2, 3, 6, 7}) {
    ASSERT_TRUE(got.count(rank)) << "rank " << rank << " never paused";
    EXPECT_TRUE(got.at(rank).front() == "aborted" || got.at(rank).front() == "deadline") << got.at(rank).front();
  }
  expect_same_training(r, 90);
}

TEST_F(Validation, RedisStoppedDuringAPauseLeavesEveryRankResumingByItself) {
  const SimRun r = run("kill-redis", kGpu5, 90,
                       std::string(kLongPause) + " --chaos " +
                           chaos_file(root_, "kill-redis", R"([{"at_s":15,"action":"kill","target":"redis"},
                                                               {"at_s":35,"action":"start","target":"redis"}])"));
  ASSERT_EQ(r.exit_code, 0) << r.log();
  expect_resumed_by_deadline(resumes(r), {0, 1, 2, 3, 4, 5, 6, 7});
  expect_same_training(r, 90);
}

TEST_F(Validation, ARankThatNeverReachesTheCutAbortsThePauseForAll) {
  // Rank 6's framework marks no iterations: it never reaches a cut. The others trap, the master aborts.
  const SimRun r = run("no-cut", kGpu5, 90, "--pause-deadline-s 10 --rank-env GREYHOUND_SIM_UNMARKED_RANK=6");
  ASSERT_EQ(r.exit_code, 0) << r.log();
  const auto all = r.events("validated");
  ASSERT_FALSE(all.empty()) << r.report.dump(1);
  std::string err;
  const auto v = parse_validated_report(all.front()["detail"], &err);
  ASSERT_TRUE(v) << err;
  EXPECT_TRUE(v->aborted);
  EXPECT_NE(v->reason.find("did not reach the cut"), std::string::npos) << v->reason;
  const auto got = resumes(r);
  EXPECT_EQ(got.count(6), 0u);
  EXPECT_EQ(got.size(), 7u);
  for (const auto& [rank, how] : got) EXPECT_EQ(how.front(), "aborted") << "rank " << rank;
  expect_same_training(r, 90);
}

// Pre-flight (docs/validation.md, "Pre-flight"): `greyhoundctl preflight` is asked before the ranks start; the
// job sets up for 4 s after making its communicators (as a real one builds its model), so the pause traps at
// its very first iteration. A slow GPU and a slow link present from the start are named, and nothing else.
constexpr const char* kSlowFromStart = R"({"faults":[{"kind":"gpu","rank":5,"start_s":0,"end_s":600,"slowdown":1.6},
  {"kind":"link","nodes":[1,2],"start_s":0,"end_s":600,"bandwidth_factor":0.05}]})";

struct PreflightSeen {
  int ctl_exit = -1;
  std::optional<PreflightReport> verdict;
  std::set<int> gpus;
  std::set<std::pair<int, int>> links;
};

PreflightSeen preflight_of(const SimRun& r) {
  PreflightSeen s;
  const json& p = r.report["preflight"];
  EXPECT_TRUE(p.is_object()) << r.report.dump(1);
  if (!p.is_object()) return s;
  s.ctl_exit = p["exit_code"].is_number() ? p["exit_code"].get<int>() : -1;
  std::string err;
  s.verdict = parse_preflight_report(p["verdict"], &err);
  EXPECT_TRUE(s.verdict) << err << "\n" << slurp(r.dir + "/preflight.err");
  if (!s.verdict) return s;
  for (const auto& g : s.verdict->slow_gpus) s.gpus.insert(g.rank);
  for (const auto& l : s.verdict->slow_links) s.links.insert({l.node_a, l.node_b});
  // The master's event says the same as the answer the command printed.
  const auto events = r.events("preflight");
  EXPECT_EQ(events.size(), 1u) << r.report.dump(1);
  if (!events.empty()) {
    const auto e = parse_preflight_report(events.back()["detail"], &err);
    EXPECT_TRUE(e && to_json(*e) == to_json(*s.verdict)) << err;
  }
  return s;
}

TEST_F(Validation, APreflightNamesTheSlowGpuAndTheSlowLinkAndNothingElse) {
  const SimRun r = run("preflight", kSlowFromStart, 40, "--preflight --rank-env GREYHOUND_SIM_SETUP_S=4");
  ASSERT_EQ(r.exit_code, 0) << r.log();
  const PreflightSeen p = preflight_of(r);
  ASSERT_TRUE(p.verdict);
  EXPECT_EQ(p.ctl_exit, 3) << "greyhoundctl preflight exits 3 when something is slow";
  EXPECT_EQ(p.verdict->state, "slow") << p.verdict->reason;
  EXPECT_EQ(p.gpus, (std::set<int>{5}));
  EXPECT_EQ(p.links, (std::set<std::pair<int, int>>{{1, 2}}));
  EXPECT_EQ(p.verdict->at_iteration, 0) << "before the job's first iteration";
  EXPECT_EQ(p.verdict->gpus_tested, 8);
  EXPECT_EQ(p.verdict->ranks, 8);
  EXPECT_GT(p.verdict->transfers_tested, 8);
  EXPECT_FALSE(p.verdict->exit);
  for (const auto& g : p.verdict->slow_gpus) {
    EXPECT_GT(g.ratio, 1.4);
    EXPECT_LT(g.ratio, 1.8);
  }
  for (const auto& l : p.verdict->slow_links) EXPECT_GT(l.ratio, 5);  // 20x the bytes' time at 5 %, less latency
  EXPECT_TRUE(r.events("validated").empty()) << "a pre-flight is no validation";
  expect_same_training(r, 40);
}

TEST_F(Validation, APreflightOnAHealthyClusterPassesAndNamesNothing) {
  const SimRun r = run("preflight-healthy", R"({"faults":[]})", 40, "--preflight --rank-env GREYHOUND_SIM_SETUP_S=4");
  ASSERT_EQ(r.exit_code, 0) << r.log();
  const PreflightSeen p = preflight_of(r);
  ASSERT_TRUE(p.verdict);
  EXPECT_EQ(p.ctl_exit, 0);
  EXPECT_EQ(p.verdict->state, "passed") << p.verdict->reason;
  EXPECT_TRUE(p.gpus.empty());
  EXPECT_TRUE(p.links.empty());
  EXPECT_EQ(p.verdict->gpus_tested, 8);
  expect_same_training(r, 40);
}

TEST_F(Validation, APreflightFailOnSlowEndsTheJobWithItsReasonAndNoFailStops) {
  // No setup time: the job is past its first iteration before the master knows it, so the first try is
  // refused and the pause comes at the job's pace.
  const SimRun r = run("preflight-fail", kSlowFromStart, 200, "--preflight-fail-on-slow");
  EXPECT_NE(r.exit_code, 0) << "the job exits early";
  const PreflightSeen p = preflight_of(r);
  ASSERT_TRUE(p.verdict);
  EXPECT_EQ(p.ctl_exit, 3);
  EXPECT_EQ(p.verdict->state, "slow");
  EXPECT_TRUE(p.verdict->exit);
  EXPECT_EQ(p.gpus, (std::set<int>{5}));
  EXPECT_EQ(p.links, (std::set<std::pair<int, int>>{{1, 2}}));
  EXPECT_LT(r.rank_iterations(0).size(), 100u) << "the job went on training";
  for (int rank = 0; rank < 8; ++rank) {
    const std::string err = slurp(r.dir + "/rank" + std::to_string(rank) + ".err");
    EXPECT_NE(err.find("exiting with status 75"), std::string::npos) << "rank " << rank << ":\n" << err;
  }
  EXPECT_NE(r.log().find("exited with 75"), std::string::npos) << r.log();
  EXPECT_TRUE(r.events("fail_stop").empty()) << "ranks that exit as told are no fail-stops";
}

}  // namespace
}  // namespace greyhound
