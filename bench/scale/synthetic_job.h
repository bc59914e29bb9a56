// A synthetic Megatron-style job for the master's load bench (bench/scale/load_bench.cpp): the registry its
// agents would publish (ranks, nodes, communication groups with their op counts, the job's layout) and the
// profile every rank's agent would report for a window, healthy or while one GPU computes slower. Pure: no
// Redis, no clock; the load bench writes what this builds through the job store.
//
// The model of a window (shares of the iteration, healthy): compute 55 %, the rank's TP group 25 %, its DP
// gradient group 12 %, its PP group 8 %. A GPU `factor` times slower adds extra = 0.55 x (factor - 1) x the
// healthy iteration to everyone's iteration (the job is synchronous): the slow rank computes it, every other
// rank waits it out inside one group: its TP peers inside their TP group, the other stages of its DP replica
// inside their PP group (the pipeline waits for the slow stage), the other replicas inside their DP group
// (the gradient all-reduce waits for the slow replica). Each time is jittered by up to +-1 % per rank and
// window, as device timings are.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "greyhound/parallel_shape.h"
#include "store/messages.h"

namespace greyhound::bench {

struct SyntheticGroup {
  std::uint64_t id = 0;
  std::string kind;           // "tp", "dp" or "pp"
  std::vector<int> members;   // global ranks, in group-rank order
  std::map<std::string, std::uint64_t> ops;  // "Op:bytes" -> calls so far (what an agent publishes)
};

struct SlowGpu {
  int rank = -1;
  double factor = 1.0;  // its compute takes this many times as long
};

class SyntheticJob {
 public:
  // Megatron's order (rank = tp + TP x (dp + DP x pp)); ranks fill nodes of `gpus_per_node` in rank order.
  // Throws std::invalid_argument unless tp x pp divides `ranks`, gpus_per_node divides `ranks` and every
  // value is positive.
  SyntheticJob(int ranks, int gpus_per_node, int tp, int pp, double iter_ms, int microbatches = 8);

  int ranks() const { return ranks_; }
  int nodes() const { return ranks_ / gpus_per_node_; }
  int gpus_per_node() const { return gpus_per_node_; }
  int tp() const { return tp_; }
  int dp() const { return dp_; }
  int pp() const { return pp_; }
  int node_of(int rank) const { return rank / gpus_per_node_; }
  ParallelShape shape() const { return {tp_, dp_, pp_}; }
  const std::vector<SyntheticGroup>& groups() const { return groups_; }
  JobLayout layout() const;

  // The job's iteration time with `slow` (none: healthy), ms.
  double iteration_ms(const std::optional<SlowGpu>& slow) const;
  // Rank `rank`'s profile for a window of `window_s` seconds answering `request`. `window` numbers the
  // window (it seeds the jitter).
  ProfileReport profile(int rank, const std::string& request, double window_s, const std::optional<SlowGpu>& slow,
                        std::uint64_t window) const;

 private:
  int ranks_, gpus_per_node_, tp_, dp_, pp_;
  double iter_ms_;
  int microbatches_;
  std::vector<SyntheticGroup> groups_;
  std::vector<std::uint64_t> tp_of_, dp_of_, pp_of_;  // each rank's group ids
};

}  // namespace greyhound::bench
