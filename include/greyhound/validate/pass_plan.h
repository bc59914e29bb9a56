// Pass plans of the validation's P2P tests (the paper's "Validation"): every link of a communication
// group's ring or tree is timed by sending over it, in a few passes of simultaneous transfers that share no
// rank, so each transfer has its link (and its two GPUs) to itself and a slow one stands out. The number of
// passes does not grow with the group: a ring of even size takes 2, an odd one 3, a binary tree at most 4.
// Pure, std only.
//
// Ring over `order` (ranks as given, e.g. NCCL's ring order from its graph dump, else group-rank order):
// link i sends from order[i] to order[(i + 1) % n]. Even n: pass 0 holds the links at even i, pass 1 those
// at odd i. Odd n: pass 0 the even i < n - 1, pass 1 the odd i, pass 2 the closing link n - 1.
// Tree over `order`: the binary tree in heap layout (position i > 0 hangs under (i - 1) / 2), each edge
// sending from parent to child; passes by (left or right child) x (the parent's depth even or odd), so in
// each pass a rank is the parent of one child at most and never also a child. Empty passes are left out.
#pragma once

#include <string>
#include <vector>

namespace greyhound::validate {

struct Transfer {
  int src = -1;
  int dst = -1;
  bool operator==(const Transfer&) const = default;
};
using Pass = std::vector<Transfer>;

enum class Topology { kRing, kTree };

// The links of the ring or tree over `order` (fewer than 2 ranks: none).
std::vector<Transfer> ring_links(const std::vector<int>& order);
std::vector<Transfer> tree_links(const std::vector<int>& order);

std::vector<Pass> ring_passes(const std::vector<int>& order);
std::vector<Pass> tree_passes(const std::vector<int>& order);
std::vector<Pass> passes(Topology t, const std::vector<int>& order);

// "" when `plan` times every link of `links` exactly once and no rank takes part in two transfers of one
// pass; else what is wrong.
std::string check_passes(const std::vector<Pass>& plan, const std::vector<Transfer>& links);

}  // namespace greyhound::validate
