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

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "greyhound/vocabulary.h"

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

// NCCL's binary tree over n nodes (ncclGetBtree, src/graph/trees.cc): the parent of node r, -1 for the root 0.
// A node r > 0 hangs under r with its lowest set bit moved one place up (or cleared, when that is beyond the
// last node): 1, 3 under 2; 2, 6 under 4; 4, 12 under 8; 8 under 0.
int nccl_btree_parent(int n, int r);
// The second tree of NCCL's double binary tree (ncclGetDtree): the first mirrored (r -> n - 1 - r) when n is
// even, shifted by one node when n is odd; -1 for its root (n - 1, or 1).
int nccl_dtree_parent(int n, int r);

// The tree graph's pattern, which GPU of a node links to which child node (NCCL's ncclTopoPreset): balanced
// (NCCL_TOPO_PATTERN_BALANCED_TREE, what NCCL's search tries first): the child below it in node order through
// the node's second GPU, the one above through its first; split: both through its second; plain tree: both
// through its first. A node always links to its parent through its first GPU.
enum class NcclTreePattern { kBalanced, kSplit, kTree };
inline constexpr std::array<vocabulary_detail::Entry<NcclTreePattern>, 3> kNcclTreePatterns{{
    {NcclTreePattern::kBalanced, "balanced"}, {NcclTreePattern::kSplit, "split"}, {NcclTreePattern::kTree, "tree"}}};
static_assert(vocabulary_detail::in_order(kNcclTreePatterns));
// "balanced", "split", "tree" (its name in the group hash's nccl_ring.tree); and back (nullopt for anything
// else), from the one table above (the vocabulary's helpers, greyhound/vocabulary.h).
constexpr std::string_view nccl_tree_pattern_name(NcclTreePattern p) {
  return vocabulary_detail::name_of(kNcclTreePatterns, p);
}
constexpr std::optional<NcclTreePattern> parse_nccl_tree_pattern(std::string_view name) {
  return vocabulary_detail::parse(kNcclTreePatterns, name);
}
// NCCL's number for it (NCCL_TOPO_PATTERN_BALANCED_TREE 1, _SPLIT_TREE 2, _TREE 3; a graph dump's pattern):
// the table's order plus one; nullopt for any other number.
constexpr std::optional<NcclTreePattern> nccl_tree_pattern_of(long long nccl_pattern) {
  if (nccl_pattern < 1 || nccl_pattern > static_cast<long long>(kNcclTreePatterns.size())) return std::nullopt;
  return kNcclTreePatterns[static_cast<std::size_t>(nccl_pattern - 1)].value;
}

// NCCL's trees over a communicator (NCCL's connectTrees): within each node a chain through its ranks in the
// order `order` lists them (the chains of NCCL's tree graph when a dump gave them, else the ring's order
// within a node), the chain's first the node's head; across nodes, NCCL's double binary tree of the nodes,
// numbered in the order `order` first reaches them (NCCL's node order when `order` is its ring): a node's
// head linked to its parent node's first or second rank as `pattern` says (a node of one rank: its first).
// Each link sends from parent to child; a link both trees use is listed once. `node_of`: the node of each
// rank of `order`, in the same order (same size, else no link).
std::vector<Transfer> nccl_tree_links(const std::vector<int>& order, const std::vector<int>& node_of,
                                      NcclTreePattern pattern = NcclTreePattern::kBalanced);
// Those links in passes, each transfer in the first pass where neither of its ranks is busy: a rank takes
// part in at most 8 links (two of its chain's, a parent and two children in each tree), so at most 15
// passes whatever the size, 4 to 6 in practice.
std::vector<Pass> nccl_tree_passes(const std::vector<int>& order, const std::vector<int>& node_of,
                                   NcclTreePattern pattern = NcclTreePattern::kBalanced);

// "" when `plan` times every link of `links` exactly once and no rank takes part in two transfers of one
// pass; else what is wrong.
std::string check_passes(const std::vector<Pass>& plan, const std::vector<Transfer>& links);

}  // namespace greyhound::validate
