// The TP x DP x PP shape of a hybrid-parallel job and Megatron-LM's rank order, written once:
// global rank = tp + TP * (dp + DP * pp), so tensor-parallel peers are adjacent ranks (one node, NVLink),
// then data-parallel replicas, then pipeline stages. Pure, std only.
#pragma once

#include <vector>

namespace greyhound {

struct RankCoords {
  int tp = 0;
  int dp = 0;
  int pp = 0;
  friend constexpr bool operator==(const RankCoords&, const RankCoords&) = default;
};

// Sizes of the three dimensions. The functions below assume them >= 1 (valid()); coords() and rank() are
// exact inverses for ranks in [0, world()) and coordinates inside the shape.
struct ParallelShape {
  int tp = 1;
  int dp = 1;
  int pp = 1;

  constexpr bool valid() const { return tp > 0 && dp > 0 && pp > 0; }
  constexpr int world() const { return tp * dp * pp; }
  constexpr RankCoords coords(int rank) const { return {rank % tp, (rank / tp) % dp, rank / (tp * dp)}; }
  constexpr int rank(RankCoords c) const { return c.tp + tp * (c.dp + dp * c.pp); }

  // The data-parallel group through (tp, pp): its DP replicas in dp order (the gradient all-reduce).
  std::vector<int> dp_group(int tp_index, int pp_index) const {
    std::vector<int> out;
    for (int d = 0; d < dp; ++d) out.push_back(rank({tp_index, d, pp_index}));
    return out;
  }
  // The pipeline through (tp, dp): its stages in pp order.
  std::vector<int> pp_group(int tp_index, int dp_index) const {
    std::vector<int> out;
    for (int p = 0; p < pp; ++p) out.push_back(rank({tp_index, dp_index, p}));
    return out;
  }
};

}  // namespace greyhound
