// S3 applied by the job: an 8-rank TP2 x DP2 x PP2 greyhound-minitrain on 4 virtual nodes of 2 GPUs, its
// ranks started directly on the CPU stand-ins with --plan against a private redis-server; the test plays
// the master through the job store (publishes plans, reads acknowledgements and the layout).
//  - A placement switch and its revert leave the training result unchanged: every role's loss and weights'
//    checksum, iteration by iteration, equal those of a run without plans (split and unique-id groups).
//  - Moving the roles off a congested link makes the job's iterations faster (before vs after, one run).
//  - A job that does not advertise S3 answers an S3 plan "unsupported" and keeps its placement.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/redis_client.h"
#include "greyhound/parallel_shape.h"
#include "sim/redis_server.h"
#include "sim/simcluster/rank_launcher.h"
#include "store/job_store.h"
#include "store/messages.h"
#include "../support/store_fixture.h"

namespace greyhound {
namespace {

constexpr ParallelShape kShape{2, 2, 2};
constexpr int kWorld = kShape.world();
constexpr int kGpusPerNode = 2;  // 4 nodes: node n runs launch ranks 2n, 2n+1 (one TP group)
constexpr int kIterations = 24;

// Roles by launch rank (Megatron rank of the coordinates each launch rank holds). Megatron's order puts
// (dp d, pp p) on node d + 2p: stage 0's DP ring crosses the link between nodes 0 and 1. This placement
// uses that link for nothing: node 0 (dp 0, pp 0), node 1 (dp 1, pp 1), node 2 (dp 1, pp 0), node 3 (dp 0,
// pp 1); DP rings 0-2 and 1-3, PP edges 0-3 and 2-1.
const std::vector<int> kOffLink01 = {0, 1, 6, 7, 2, 3, 4, 5};

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// One iteration line of greyhound-minitrain, with the role the rank held in it.
struct Line {
  long iter = -1;
  double t_s = 0, iter_ms = 0;
  std::string loss, checksum;
  int role = -1;
};

std::vector<Line> read_lines(const std::string& path) {
  std::vector<Line> out;
  std::istringstream in(slurp(path));
  std::string text;
  while (std::getline(in, text)) {
    std::istringstream l(text);
    std::string k_iter, k_t, k_ms, k_loss, k_sum, k_role;
    Line x;
    if ((l >> k_iter >> x.iter >> k_t >> x.t_s >> k_ms >> x.iter_ms >> k_loss >> x.loss >> k_sum >> x.checksum >>
         k_role >> x.role) &&
        k_iter == "iter" && k_role == "role") {
      out.push_back(x);
    }
  }
  return out;
}

nlohmann::json placement_json(const std::vector<int>& role_of) {
  nlohmann::json out = nlohmann::json::array();
  for (int r = 0; r < kWorld; ++r) {
    const RankCoords c = kShape.coords(role_of[static_cast<std::size_t>(r)]);
    out.push_back({{"rank", r}, {"tp", c.tp}, {"dp", c.dp}, {"pp", c.pp}});
  }
  return out;
}

std::vector<int> identity() {
  std::vector<int> v(kWorld);
  for (int r = 0; r < kWorld; ++r) v[static_cast<std::size_t>(r)] = r;
  return v;
}

using ByRole = std::map<int, std::map<long, std::string>>;  // role -> iteration -> "loss checksum"

// "" when both runs trained alike, else the first role and iteration where they differ.
std::string first_difference(const ByRole& got, const ByRole& want) {
  for (const auto& [role, its] : want) {
    const auto g = got.find(role);
    if (g == got.end()) return "role " + std::to_string(role) + " missing";
    for (const auto& [iter, text] : its) {
      const auto x = g->second.find(iter);
      if (x == g->second.end()) return "role " + std::to_string(role) + " iteration " + std::to_string(iter) + " missing";
      if (x->second != text) {
        return "role " + std::to_string(role) + " iteration " + std::to_string(iter) + ": " + x->second +
               " instead of " + text;
      }
    }
    if (g->second.size() != its.size()) return "role " + std::to_string(role) + ": extra iterations";
  }
  return got.size() == want.size() ? "" : "extra roles";
}

class MinitrainS3 : public test_support::StoreFixture {
 protected:
  MinitrainS3() { job_ = "s3job"; }
  void TearDown() override {
    if (!pids_.empty()) sim::stop_all(pids_, 2.0);
    StoreFixture::TearDown();
  }

  // Starts the 8 ranks of run `name` (in dir_/name); `extra` goes to every minitrain.
  void start(const std::string& name, const std::vector<std::string>& extra, const std::string& faults = "{\"faults\":[]}") {
    run_dir_ = dir_ + "/" + name;
    std::system(("mkdir -p " + run_dir_ + "/rdzv " + run_dir_ + "/sim").c_str());
    const auto epoch_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                              std::chrono::steady_clock::now().time_since_epoch()).count();
    pids_.clear();
    names_.clear();
    for (int r = 0; r < kWorld; ++r) {
      sim::ChildSpec spec;
      spec.name = "rank " + std::to_string(r);
      spec.argv = {GREYHOUND_MINITRAIN, "--tp", "2", "--dp", "2", "--pp", "2", "--microbatches", "4", "--rdzv",
                   run_dir_ + "/rdzv", "--seed", "7", "--iterations", std::to_string(kIterations)};
      spec.argv.insert(spec.argv.end(), extra.begin(), extra.end());
      spec.env = {{"RANK", std::to_string(r)},
                  {"WORLD_SIZE", std::to_string(kWorld)},
                  {"LOCAL_RANK", std::to_string(r % kGpusPerNode)},
                  {"LOCAL_WORLD_SIZE", std::to_string(kGpusPerNode)},
                  {"GREYHOUND_SIM_GPUS_PER_NODE", std::to_string(kGpusPerNode)},
                  {"GREYHOUND_SIM_EPOCH_NS", std::to_string(epoch_ns)},
                  {"GREYHOUND_SIM_FAULTS", faults},
                  {"GREYHOUND_SIM_DIR", run_dir_ + "/sim"},
                  {"GREYHOUND_SIM_TIMEOUT_S", "60"},
                  {"GREYHOUND_LOG_LEVEL", "warn"},
                  {"LD_LIBRARY_PATH", GREYHOUND_SIM_LIB_DIR}};
      spec.unset_env = {"GREYHOUND_RANK", "GREYHOUND_SIM_RANK", "GREYHOUND_SIM_NODE", "GREYHOUND_SIM_MODEL",
                        "LD_PRELOAD"};
      spec.stdout_path = out(r);
      spec.stderr_path = run_dir_ + "/rank" + std::to_string(r) + ".err";
      std::string err;
      const pid_t pid = sim::spawn(spec, &err);
      ASSERT_GT(pid, 0) << err;
      pids_.push_back(pid);
      names_.push_back(spec.name);
    }
  }
  std::vector<std::string> plan_args(const std::string& caps = "") const {
    std::vector<std::string> a = {"--plan", "--redis", server_->url(), "--job", "s3job"};
    if (!caps.empty()) a.insert(a.end(), {"--capabilities", caps});
    return a;
  }
  std::string out(int r) const { return run_dir_ + "/rank" + std::to_string(r) + ".out"; }

  // Waits for every rank to exit; all must succeed.
  void finish() {
    volatile bool stop = false;
    const auto exits = sim::wait_all(pids_, names_, &stop, true);
    pids_.clear();
    for (const auto& e : exits) {
      EXPECT_EQ(e.exit_code, 0) << e.name << ": " << sim::tail_file(run_dir_ + "/" + e.name.substr(0, 4) +
                                                                      e.name.substr(5) + ".err", 5);
    }
  }

  // Waits (deadline 30 s) until rank 0 has printed iteration `iter`.
  void wait_for_iteration(long iter) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < deadline) {
      const auto lines = read_lines(out(0));
      if (!lines.empty() && lines.back().iter >= iter) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    FAIL() << "rank 0 did not reach iteration " << iter << " within 30 s";
  }

  // Waits (deadline 30 s) until every rank acknowledged `epoch`; returns the acks by rank.
  std::map<int, PlanAck> wait_for_acks(std::int64_t epoch) {
    std::map<int, PlanAck> acks;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < deadline) {
      acks.clear();
      auto read = store_->plan_acks();
      if (read) {
        for (const auto& e : *read) {
          if (e.value && e.value->epoch == epoch) acks[e.value->rank] = *e.value;
        }
      }
      if (acks.size() == static_cast<std::size_t>(kWorld)) return acks;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ADD_FAILURE() << "only " << acks.size() << " of " << kWorld << " ranks acknowledged epoch " << epoch;
    return acks;
  }

  // The layout in force once it names `role_of` (deadline 30 s; rank 0 republishes it before its next poll).
  std::optional<JobLayout> wait_for_layout(const std::vector<int>& role_of) {
    const auto want = placement_json(role_of);
    std::optional<JobLayout> last;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < deadline) {
      auto l = store_->layout();
      if (l && *l) {
        last = **l;
        nlohmann::json got = nlohmann::json::array();
        for (const auto& e : last->placement) got.push_back({{"rank", e.rank}, {"tp", e.tp}, {"dp", e.dp}, {"pp", e.pp}});
        if (got == want) return last;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ADD_FAILURE() << "the layout never named the placement " << want.dump();
    return last;
  }

  // True when published (false: Redis refused it, or the epoch is taken).
  bool publish(std::int64_t epoch, Strategy s, PlanAction a, const std::vector<int>& role_of) {
    Plan p;
    p.epoch = epoch;
    p.strategy = s;
    p.action = a;
    p.incident = 1;
    p.reason = "test";
    if (a == PlanAction::kRevert) p.microbatches = {4, 4};
    p.placement = placement_json(role_of);
    const auto r = store_->publish_plan(p);
    return r && *r;
  }

  // Per role and iteration: "loss checksum", from every rank's lines of the current run.
  ByRole by_role() const {
    ByRole out_map;
    for (int r = 0; r < kWorld; ++r) {
      for (const auto& l : read_lines(out(r))) out_map[l.role][l.iter] = l.loss + " " + l.checksum;
    }
    return out_map;
  }

  // Runs the switch to `kOffLink01` at iteration >= 3 and its revert; returns by_role(). `extra` picks the
  // group initialisation.
  ByRole switch_and_revert(const std::string& name, const std::vector<std::string>& extra) {
    auto args = plan_args();
    args.insert(args.end(), extra.begin(), extra.end());
    start(name, args);
    wait_for_iteration(3);
    EXPECT_TRUE(publish(next_epoch_, Strategy::kS3, PlanAction::kApply, kOffLink01));
    const auto applied = wait_for_acks(next_epoch_);
    for (const auto& [rank, a] : applied) {
      EXPECT_EQ(a.status, AckStatus::kApplied) << "rank " << rank << ": " << a.detail;
      EXPECT_EQ(a.iteration, applied.begin()->second.iteration) << "every rank switches at the same iteration";
      EXPECT_GT(a.apply_s, 0.0) << "rank " << rank;
      EXPECT_NE(a.detail.find("placement switched in"), std::string::npos) << a.detail;
    }
    const auto layout = wait_for_layout(kOffLink01);
    if (layout) {
      EXPECT_EQ(layout->capabilities, (std::vector<std::string>{"S2", "S3"}));
      EXPECT_EQ(layout->gpus_per_node, kGpusPerNode);
      EXPECT_EQ(layout->microbatch_multiple, 1);  // its 1F1B runs any count: S2 moves single micro-batches
    }
    ++next_epoch_;
    EXPECT_TRUE(publish(next_epoch_, Strategy::kS1, PlanAction::kRevert, identity()));
    const auto reverted = wait_for_acks(next_epoch_);
    for (const auto& [rank, a] : reverted) {
      EXPECT_EQ(a.status, AckStatus::kApplied) << "rank " << rank << ": " << a.detail;
      EXPECT_GT(a.iteration, applied.begin()->second.iteration);
      EXPECT_LT(a.iteration, kIterations) << "the revert must come before the run ends";
    }
    wait_for_layout(identity());
    ++next_epoch_;
    finish();
    // Roles really moved: launch rank 2 held role 6 between the switch and the revert, and its own again after.
    const auto lines2 = read_lines(out(2));
    EXPECT_TRUE(std::any_of(lines2.begin(), lines2.end(), [](const Line& l) { return l.role == 6; }));
    EXPECT_EQ(lines2.empty() ? -1 : lines2.back().role, 2);
    return by_role();
  }

  std::string run_dir_;
  std::vector<pid_t> pids_;
  std::vector<std::string> names_;
  std::int64_t next_epoch_ = 1;
};

TEST_F(MinitrainS3, APlacementSwitchAndItsRevertLeaveTheTrainingResultUnchanged) {
  start("reference", {});
  finish();
  const auto reference = by_role();
  ASSERT_EQ(reference.size(), static_cast<std::size_t>(kWorld));
  for (const auto& [role, its] : reference) ASSERT_EQ(its.size(), static_cast<std::size_t>(kIterations)) << role;

  const auto split = switch_and_revert("split", {});
  EXPECT_EQ(first_difference(split, reference), "") << "group-init split, against the run without plans";
  const auto uniqueid = switch_and_revert("uniqueid", {"--group-init", "uniqueid"});
  EXPECT_EQ(first_difference(uniqueid, reference), "") << "group-init uniqueid, against the run without plans";
}

TEST_F(MinitrainS3, MovingRolesOffACongestedLinkMakesIterationsFaster) {
  // The link between nodes 0 and 1 at 5 % of its bandwidth for the whole run: it carries stage 0's DP ring
  // in Megatron's placement and nothing in kOffLink01.
  start("congested", plan_args(),
        R"({"faults":[{"kind":"link","nodes":[0,1],"start_s":0,"end_s":1000,"bandwidth_factor":0.05}]})");
  wait_for_iteration(5);
  ASSERT_TRUE(publish(1, Strategy::kS3, PlanAction::kApply, kOffLink01));
  const auto acks = wait_for_acks(1);
  finish();
  ASSERT_EQ(acks.size(), static_cast<std::size_t>(kWorld));
  const long switched = acks.begin()->second.iteration;
  ASSERT_LE(switched, kIterations - 6) << "too few iterations after the switch to measure";
  std::vector<double> before, after;
  for (const auto& l : read_lines(out(0))) {
    if (l.iter >= 1 && l.iter < switched) before.push_back(l.iter_ms);  // iteration 0 warms up
    if (l.iter > switched) after.push_back(l.iter_ms);
  }
  ASSERT_GE(before.size(), 4u);
  auto median = [](std::vector<double> v) {
    std::nth_element(v.begin(), v.begin() + static_cast<long>(v.size() / 2), v.end());
    return v[v.size() / 2];
  };
  const double b = median(before), a = median(after);
  std::cerr << "[ info ] rank 0 median iteration " << b << " ms before the switch, " << a << " ms after; switch "
            << acks.begin()->second.apply_s * 1e3 << " ms\n";
  EXPECT_LT(a, 0.8 * b) << "moving the DP ring off the congested link did not pay";
}

TEST_F(MinitrainS3, AJobWithoutS3AnswersUnsupportedAndKeepsItsPlacement) {
  ASSERT_TRUE(publish(1, Strategy::kS3, PlanAction::kApply, kOffLink01));  // there before the job starts
  start("no-s3", plan_args("S2"));
  const auto acks = wait_for_acks(1);
  const auto layout = wait_for_layout(identity());
  finish();
  for (const auto& [rank, a] : acks) EXPECT_EQ(a.status, AckStatus::kUnsupported) << "rank " << rank;
  ASSERT_TRUE(layout);
  EXPECT_EQ(layout->capabilities, (std::vector<std::string>{"S2"}));
  for (int r = 0; r < kWorld; ++r) {
    for (const auto& l : read_lines(out(r))) ASSERT_EQ(l.role, r) << "rank " << r << " iteration " << l.iter;
  }
}

}  // namespace
}  // namespace greyhound
