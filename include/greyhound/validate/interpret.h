// What the validation's measurements say (the paper's "Validation"), pure, std only:
//  - GEMM: every tested rank ran the same GEMMs (the median of its repeats; gemm_times weighs the types
//    alike); a rank is a slow GPU when its time exceeds the median of the *other* tested ranks' by more than
//    `excess` (kPeerExcess, 10 %). With no other rank tested there is nothing to compare with: not judged.
//  - P2P: every transfer of the passes moved the same bytes (the median of its repeats); a transfer is over
//    a slow link when its time exceeds the median of the other transfers over links of its class
//    (intra-node: both ranks on one node; inter-node) by more than `excess` (kSlowLinkExcess, 50 %).
//    A transfer alone in its class is not judged.
#pragma once

#include <string>
#include <vector>

#include "greyhound/thresholds.h"
#include "greyhound/validate/pass_plan.h"

namespace greyhound::validate {

struct GemmTime {
  int rank = -1, node = -1;
  double ms = 0;
};

// One rank's GEMM results as its hook reported them: the median time per type, FP32, FP16 and, where the
// hook ran it, FP8 (0: not measured).
struct GemmReport {
  int rank = -1, node = -1;
  std::vector<double> ms;
};
// The time compared across ranks: FP32 and FP16, for every rank that measured both (a type left out, by the
// deadline or a failure, would shorten its time), and FP8 when every one of those ranks measured it too (a
// cluster of mixed GPUs, or an FP8 GEMM that failed on one GPU, compares without it rather than unlike sums).
// The types count alike: each is weighted by the inverse of its median over those ranks, scaled so that a
// rank at every median has the medians' sum (in ms). Plain sums would leave the check to FP32, which takes
// over ten times FP16's time on tensor-core GPUs: a GPU slow only in its tensor cores would hardly show.
struct GemmTimes {
  std::vector<GemmTime> times;  // in the order given, the ranks left out dropped
  bool with_fp8 = false;
};
GemmTimes gemm_times(const std::vector<GemmReport>& reports);
struct GpuVerdict {
  int rank = -1, node = -1;
  double ms = 0;
  double peers_ms = 0;  // median of the other ranks (0: none)
  double ratio = 0;     // ms / peers_ms (0: not judged)
  bool judged = false;
  bool slow = false;
};
std::vector<GpuVerdict> judge_gemm(const std::vector<GemmTime>& times, double excess = kPeerExcess);

enum class LinkClass { kIntraNode, kInterNode };
const char* link_class_name(LinkClass c);

struct TransferTime {
  Transfer transfer;
  int src_node = -1, dst_node = -1;
  double bytes = 0;
  double ms = 0;
};
struct LinkVerdict {
  Transfer transfer;
  int src_node = -1, dst_node = -1;
  LinkClass link_class = LinkClass::kIntraNode;
  double ms = 0;
  double peers_ms = 0;   // median of the other transfers of its class (0: none)
  double ratio = 0;      // ms / peers_ms (0: not judged)
  double gb_per_s = 0;   // bytes / ms
  bool judged = false;
  bool slow = false;
};
// `min_excess_ms`: a slow transfer also exceeds its peers' median by at least this much (the timer's noise:
// tiny transfers inside a node last tens of microseconds).
std::vector<LinkVerdict> judge_links(const std::vector<TransferTime>& times, double excess = kSlowLinkExcess,
                                     double min_excess_ms = 0);

}  // namespace greyhound::validate
