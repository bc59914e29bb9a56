// The master's Validator, pure (the paper's "Validation"; docs/validation.md): what to test after a
// localisation, and what the measurements say. The pause that runs the tests (the hook's pause gate and
// benchmark executor) and the dispatch are not built yet; this is the part that decides.
//
// What to test, the smallest set that decides:
//  - GEMM: for a computation or host culprit (or none named), the culprit and up to `gemm_peers` of its
//    comparable peers: the other members of the group it was found in, then of its other groups; a GPU is
//    judged against the median of the others, so at least two peers are taken when the job has them.
//  - P2P: the suspect groups, slowest first (up to `max_groups`), each as a ring in group-rank order (or
//    the order NCCL's graph dump gives, when the caller has one), timed in ring passes (2 or 3).
// What it says: a slow GPU when a tested rank's GEMM exceeds its peers' median by more than 10 %
// (validate/interpret.h); else a slow link when a transfer exceeds the median of its class by more than
// 50 %; else none. A slow GPU explains slow transfers of its own (a rank that computes late also sends
// late), so the GPU verdict comes first and its own transfers are not held against a link.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "daemon/localiser.h"
#include "greyhound/validate/interpret.h"
#include "greyhound/validate/pass_plan.h"

namespace greyhound::master {

struct ValidatorConfig {
  int gemm_peers = 3;
  int max_groups = 4;
};

struct P2pTest {
  std::uint64_t group = 0;
  std::vector<int> order;                 // ring order (global ranks)
  std::vector<validate::Pass> passes;
};

struct ValidationPlan {
  std::vector<int> gemm_ranks;  // the culprit first
  std::vector<P2pTest> p2p;
  std::string why;              // what it was chosen from
  bool empty() const { return gemm_ranks.empty() && p2p.empty(); }
};

// `ring_orders`: NCCL's ring order of a group, when known (from its graph dump), by group id.
ValidationPlan plan_validation(const Localisation& loc, const std::vector<GroupMembers>& groups,
                               const std::map<std::uint64_t, std::vector<int>>& ring_orders = {},
                               const ValidatorConfig& config = {});

enum class ValidatedCause { kNone, kGpu, kLink };
const char* validated_cause_name(ValidatedCause c);

struct Validated {
  ValidatedCause cause = ValidatedCause::kNone;
  int rank = -1, node = -1;        // gpu
  int node_a = -1, node_b = -1;    // link (node_a < node_b)
  double ratio = 0;                // the GPU's or the transfer's time over its peers'
  double gb_per_s = 0, peers_gb_per_s = 0;  // link
  std::vector<validate::GpuVerdict> gpus;
  std::vector<validate::LinkVerdict> links;
  std::string reason;
};

// What the tests of `plan` measured say (GEMM times of its gemm_ranks; each transfer of its passes).
Validated judge_validation(const std::vector<validate::GemmTime>& gemm,
                           const std::vector<validate::TransferTime>& transfers);

}  // namespace greyhound::master
