// The master's Validator, pure (the paper's "Validation"; docs/validation.md): what to test after a
// localisation, the pause that tests it (ValidationRun: arm, run, resume, abort), and what the measurements
// say. The controller owns one ValidationRun at a time and carries its commands out.
//
// What to test, the smallest set that decides:
//  - GEMM: for a computation or host culprit (or none named), the culprit, up to `gemm_peers` of its
//    comparable peers: the other members of the group it was found in, then of its other groups (a GPU is
//    judged against the median of the others, so at least two peers are taken when the job has them), and
//    with gemm_all every other rank of the job: the GEMMs run in parallel on every GPU, as the paper's do.
//  - P2P: the suspect groups, slowest first (up to `max_groups`), each as a ring in group-rank order (or
//    NCCL's, when a member's graph dump gave it), timed in ring passes (2 or 3), then as NCCL's trees (a
//    chain per node, a double binary tree of the nodes' heads: validate::nccl_tree_links; the binary tree in
//    heap layout over the ring's order when the members' nodes are not known) in passes of the trees' links
//    the ring passes did not time (NCCL picks ring or tree at run time, so both are timed; `trees`); and as
//    many groups not suspect, as the references their transfers are judged against (a transfer is judged
//    against the median of its class, and every suspect may cross the same slow link): comparable with the
//    first suspect first, then of its size whose ring crosses nodes as its does; with p2p_all, every other
//    group of the job after them (each rank takes part in a few groups whatever the job's size).
// What it says: a slow GPU when a tested rank's GEMM exceeds its peers' median by more than 10 %
// (validate/interpret.h); else a slow link when a transfer exceeds the median of its class by more than
// 50 %; else none. A slow GPU explains slow transfers of its own (a rank that computes late also sends
// late), so the GPU verdict comes first and its own transfers are not held against a link.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "daemon/localiser.h"
#include "store/messages.h"
#include "greyhound/validate/interpret.h"
#include "greyhound/validate/pass_plan.h"

namespace greyhound::master {

struct ValidatorConfig {
  int gemm_peers = 3;
  bool gemm_all = true;  // then every other rank of the job's groups as well (in parallel: no longer a pause)
  bool p2p_all = true;   // then every other group's passes as well (a pause grows with groups per rank)
  int max_groups = 4;
  bool rings = true;     // a group's ring passes
  bool trees = true;     // ... and its tree passes, less the links the ring passes time (at least one of the two)
};

struct P2pTest {
  std::uint64_t group = 0;
  std::vector<int> order;                 // ring order (global ranks); the tree is over it too unless NCCL's
                                          // tree graph gave the chains (GroupMembers::nccl_tree_order)
  std::vector<validate::Pass> passes;     // the ring's passes, then the tree's
};

struct ValidationPlan {
  std::vector<int> gemm_ranks;  // the culprit first
  std::vector<P2pTest> p2p;     // the suspect groups, then the reference groups
  std::vector<std::uint64_t> reference_groups;  // groups not suspect, as many as the suspects (if there are)
  std::string why;              // what it was chosen from
  std::vector<std::uint64_t> sizes;  // P2P sizes (empty: the pause settings'; a link probe: the smallest alone)
  int repeats = 0;                   // runs of each test (0: the pause settings'; a link probe: one)
  bool empty() const { return gemm_ranks.empty() && p2p.empty(); }
};

// `list`: "ring", "tree" or both, comma-separated (--validate-topologies): sets `config`'s rings and trees
// to those named. False, `config` unchanged, on an empty list, an empty or unknown element.
bool parse_validate_topologies(std::string_view list, ValidatorConfig* config);

// A group's ring follows NCCL's ring order when a member's graph dump gave it (GroupMembers::nccl_order),
// else group-rank order; its tree is NCCL's over the dump's tree graph (nccl_tree_order, nccl_tree_pattern)
// when the dump had one. `node_of`: the node of each rank, when known (a reference group of the suspects' link class is chosen
// when no comparable one is left).
ValidationPlan plan_validation(const Localisation& loc, const std::vector<GroupMembers>& groups,
                               const ValidatorConfig& config = {}, const std::map<int, int>& node_of = {});

// A probe of the link between nodes `node_a` and `node_b` when no group of the job sends over it any more
// (S3 moved its traffic off it), so that only a pause can tell whether it is still slow: one transfer over
// it, from a rank on one node to one on the other, in the largest group that holds ranks of both (the
// world's), and at the same time, as its references, the same between up to `references` other pairs of
// that group's nodes, none of them in `avoid` (links known slow); one run of it (a slow link is many times
// slower, and a run taken for slow by noise only keeps the fail-slow open until the next probe). A transfer
// is judged against the median of its class, so the probe needs a reference: empty when no group holds
// both nodes or no reference pair is left.
ValidationPlan plan_link_probe(int node_a, int node_b, const std::vector<GroupMembers>& groups,
                               const std::map<int, int>& node_of, const std::set<std::pair<int, int>>& avoid,
                               int references = 2);

// A pre-flight check (greyhoundctl preflight): GEMM on every rank of the groups, each judged against the median
// of all the others; every group of two ranks or more timed in its ring and tree passes (as `config` says; a
// group whose members are those of one tested already is not tested again). Nothing is suspect: every GPU
// and every link is judged against the fleet.
ValidationPlan plan_preflight(const std::vector<GroupMembers>& groups, const ValidatorConfig& config = {});

// What a pre-flight pause's verdict names: every GPU judged slow, and every pair of nodes with a transfer
// judged slow (its slowest, and how many), with what was tested; the state "slow" or "passed" ("failed" when
// the pause was aborted).
PreflightReport preflight_report(const ValidatedReport& v, const PreflightRequest& req, int groups_tested);

enum class ValidatedCause { kNone, kGpu, kLink, kHost };
const char* validated_cause_name(ValidatedCause c);

struct Validated {
  ValidatedCause cause = ValidatedCause::kNone;
  int rank = -1, node = -1;        // gpu, host
  int node_a = -1, node_b = -1;    // link (node_a < node_b)
  double ratio = 0;                // the GPU's or the transfer's time over its peers'
  double gb_per_s = 0, peers_gb_per_s = 0;  // link
  std::vector<validate::GpuVerdict> gpus;
  std::vector<validate::LinkVerdict> links;
  std::string reason;
};

// What the tests of `plan` measured say (GEMM times of its gemm_ranks; each transfer of its passes).
// `named_rank`: the rank the profile named slow outside NCCL (host or computation), -1 for none. Its GEMM as
// fast as its peers' makes it `host` when nothing else is slow, and its transfers (launched late) are not
// held against a link.
Validated judge_validation(const std::vector<validate::GemmTime>& gemm,
                           const std::vector<validate::TransferTime>& transfers, double min_excess_ms = 0,
                           int named_rank = -1);

// How a pause tests (the master's --validate-* flags). Real hardware: 8192^3 GEMMs, 16/32/64 MiB transfers.
struct PauseSettings {
  int gemm_n = 8192;
  int repeats = 3;
  std::vector<std::uint64_t> sizes = {16ull << 20, 32ull << 20, 64ull << 20};
  double deadline_s = kDefaultPauseDeadlineS;  // every rank resumes by itself after this
  int lead_iterations = 2;                     // the cut: this many iterations after the job's latest mark
  double arm_timeout_s = 0;                    // all ranks at the cut within this (0: from the iteration time)
  double min_link_excess_ms = 0.05;            // a slow transfer also exceeds its peers' by this (timer noise)
  double expected_pause_s = 5.0;               // what a pause costs the job until one was measured on it (--validate
                                               // auto charges it to the S3 or S4 it confirms first)
};

// The pause of `plan`: every rank of `ranks` pauses at `at_iteration`; GEMM on plan.gemm_ranks; each P2P
// test's passes in order, every transfer given to both ends as a rank of the group's communicator. Transfers a
// rank could not hold (more than kMaxPauseTransfers) are left out of the plan for both ends.
PauseSpec pause_spec(const ValidationPlan& plan, const std::vector<GroupMembers>& groups, const std::vector<int>& ranks,
                     std::int64_t at_iteration, const PauseSettings& settings);

// One validation pause, from its arming to the verdict. Feed it the ranks' pause reports and `now`; step()
// says which command to send to every agent and when it is over.
//  - arming: every rank must report "trapped" within the arm timeout; a rank that refuses (past the cut,
//    inside a group, capturing, no CUDA) or does not arrive in time aborts the pause for everyone;
//  - running ("pause_run"): every rank's "done" (its results) within the run timeout, else abort;
//  - resuming ("pause_resume" or "pause_abort"): until every rank that trapped reports "resumed" (or a
//    grace passes); then outcome() is final.
class ValidationRun {
 public:
  ValidationRun(std::string id, ValidationPlan plan, PauseSpec spec, const std::vector<GroupMembers>& groups,
                Localisation loc, double localised_t_s, double now_s, double arm_timeout_s,
                double min_link_excess_ms = 0);

  const std::string& id() const { return id_; }
  const PauseSpec& spec() const { return spec_; }
  void report(int rank, int node, const PauseReport& r, double now_s);
  struct Step {
    std::optional<std::string> command;  // "pause_run", "pause_resume", "pause_abort", "pause_exit"
    bool finished = false;
  };
  Step step(double now_s);
  // Once finished: the verdict and its evidence.
  ValidatedReport outcome() const;
  // A rank has trapped: the job stands still (at least in part) until the pause ends.
  bool any_trapped() const { return first_trap_s_ >= 0; }
  // A pre-flight's --fail-on-slow: once every rank's results are in, ranks are told to exit ("pause_exit")
  // instead of resuming when the tests find a GPU or a link slow.
  void exit_on_slow() { exit_on_slow_ = true; }
  bool told_to_exit() const { return told_to_exit_; }

 private:
  enum class Phase { kArming, kRunning, kResuming, kDone };
  void abort(const std::string& why, double now_s);
  std::string id_;
  ValidationPlan plan_;
  PauseSpec spec_;
  Localisation loc_;
  double localised_t_s_ = 0;
  double min_link_excess_ms_ = 0;
  Phase phase_ = Phase::kArming;
  double arm_deadline_s_ = 0, run_deadline_s_ = 0, resume_deadline_s_ = 0;
  double run_sent_s_ = 0, last_result_s_ = 0;
  std::optional<std::string> pending_command_;
  std::string abort_reason_;
  std::map<std::uint64_t, std::vector<int>> members_;  // the tested groups, global ranks in group-rank order
  std::map<int, int> node_of_;
  std::set<int> trapped_, resumed_;
  std::map<int, PauseReport> done_;
  double longest_pause_ms_ = 0;
  double first_trap_s_ = -1, resume_sent_s_ = 0;
  bool exit_on_slow_ = false, told_to_exit_ = false;
};

}  // namespace greyhound::master
