#include "greyhound/validate/pass_plan.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

namespace greyhound::validate {

std::vector<Transfer> ring_links(const std::vector<int>& order) {
  std::vector<Transfer> out;
  const std::size_t n = order.size();
  if (n < 2) return out;
  for (std::size_t i = 0; i < n; ++i) out.push_back({order[i], order[(i + 1) % n]});
  return out;
}

std::vector<Transfer> tree_links(const std::vector<int>& order) {
  std::vector<Transfer> out;
  for (std::size_t i = 1; i < order.size(); ++i) out.push_back({order[(i - 1) / 2], order[i]});
  return out;
}

std::vector<Pass> ring_passes(const std::vector<int>& order) {
  const std::vector<Transfer> links = ring_links(order);
  const std::size_t n = links.size();
  if (n == 0) return {};
  std::vector<Pass> out(n % 2 == 0 ? 2 : 3);
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t pass = (n % 2 == 1 && i == n - 1) ? 2 : i % 2;
    out[pass].push_back(links[i]);
  }
  return out;
}

std::vector<Pass> tree_passes(const std::vector<int>& order) {
  std::vector<Pass> out(4);
  for (std::size_t i = 1; i < order.size(); ++i) {
    const std::size_t parent = (i - 1) / 2;
    std::size_t depth = 0;  // of the parent
    for (std::size_t p = parent; p > 0; p = (p - 1) / 2) ++depth;
    const bool left = i % 2 == 1;
    out[(left ? 0 : 2) + depth % 2].push_back({order[parent], order[i]});
  }
  out.erase(std::remove_if(out.begin(), out.end(), [](const Pass& p) { return p.empty(); }), out.end());
  return out;
}

int nccl_btree_parent(int n, int r) {
  if (r <= 0 || r >= n) return -1;
  const int bit = r & -r;  // the lowest set bit
  const int up = (r ^ bit) | (bit << 1);
  return up < n ? up : (r ^ bit);
}

int nccl_dtree_parent(int n, int r) {
  if (r < 0 || r >= n) return -1;
  if (n % 2 == 0) {
    const int p = nccl_btree_parent(n, n - 1 - r);
    return p < 0 ? -1 : n - 1 - p;
  }
  const int p = nccl_btree_parent(n, (r - 1 + n) % n);
  return p < 0 ? -1 : (p + 1) % n;
}

namespace {
// Whether node k (not a root) is the second child of its parent in NCCL's first tree (`second` false) or
// second tree: NCCL's parentChildType, 0 when the child's index is below its parent's, in the tree's own
// numbering (the second tree's is the first's, mirrored or shifted).
bool second_child(int n, int k, int parent, bool second) {
  if (!second) return k > parent;
  const auto index = [&](int x) { return n % 2 == 0 ? n - 1 - x : (x - 1 + n) % n; };
  return index(k) > index(parent);
}
}  // namespace

std::vector<Transfer> nccl_tree_links(const std::vector<int>& order, const std::vector<int>& node_of,
                                      NcclTreePattern pattern) {
  std::vector<Transfer> out;
  if (order.size() != node_of.size() || order.size() < 2) return out;
  // Each node's ranks in the order given, the nodes in the order first reached.
  std::vector<int> nodes;
  std::map<int, std::vector<int>> chain;
  for (std::size_t i = 0; i < order.size(); ++i) {
    if (!chain.count(node_of[i])) nodes.push_back(node_of[i]);
    chain[node_of[i]].push_back(order[i]);
  }
  std::set<std::pair<int, int>> seen;
  const auto add = [&](int src, int dst) {
    if (seen.insert({src, dst}).second) out.push_back({src, dst});
  };
  for (int node : nodes) {
    const std::vector<int>& c = chain[node];
    for (std::size_t i = 0; i + 1 < c.size(); ++i) add(c[i], c[i + 1]);
  }
  const int n = static_cast<int>(nodes.size());
  const auto rank_at = [&](int k, std::size_t i) {
    const std::vector<int>& c = chain[nodes[static_cast<std::size_t>(k)]];
    return c[std::min(i, c.size() - 1)];
  };
  // The parent node's GPU a child node links to: its first or second, by the pattern and the child's side.
  const auto port = [&](int parent, bool second_side) {
    const bool through_second = pattern == NcclTreePattern::kSplit ||
                                (pattern == NcclTreePattern::kBalanced && !second_side);
    return rank_at(parent, through_second ? 1 : 0);
  };
  for (const bool second : {false, true}) {
    for (int k = 0; k < n; ++k) {
      const int p = second ? nccl_dtree_parent(n, k) : nccl_btree_parent(n, k);
      if (p >= 0) add(port(p, second_child(n, k, p, second)), rank_at(k, 0));
    }
  }
  return out;
}

std::vector<Pass> nccl_tree_passes(const std::vector<int>& order, const std::vector<int>& node_of,
                                   NcclTreePattern pattern) {
  std::vector<Pass> out;
  std::vector<std::set<int>> busy;
  for (const Transfer& t : nccl_tree_links(order, node_of, pattern)) {
    std::size_t p = 0;
    while (p < out.size() && (busy[p].count(t.src) || busy[p].count(t.dst))) ++p;
    if (p == out.size()) {
      out.emplace_back();
      busy.emplace_back();
    }
    out[p].push_back(t);
    busy[p].insert(t.src);
    busy[p].insert(t.dst);
  }
  return out;
}

std::vector<Pass> passes(Topology t, const std::vector<int>& order) {
  return t == Topology::kRing ? ring_passes(order) : tree_passes(order);
}

std::string check_passes(const std::vector<Pass>& plan, const std::vector<Transfer>& links) {
  std::map<std::pair<int, int>, int> want;
  for (const Transfer& l : links) ++want[{l.src, l.dst}];
  std::map<std::pair<int, int>, int> got;
  for (std::size_t p = 0; p < plan.size(); ++p) {
    std::set<int> busy;
    for (const Transfer& t : plan[p]) {
      if (t.src == t.dst) return "pass " + std::to_string(p) + ": rank " + std::to_string(t.src) + " sends to itself";
      for (int r : {t.src, t.dst}) {
        if (!busy.insert(r).second) {
          return "pass " + std::to_string(p) + ": rank " + std::to_string(r) + " takes part in two transfers";
        }
      }
      ++got[{t.src, t.dst}];
    }
  }
  for (const auto& [link, n] : want) {
    const int g = got.count(link) ? got[link] : 0;
    if (g != n) {
      return "link " + std::to_string(link.first) + "->" + std::to_string(link.second) + " timed " + std::to_string(g) +
             " times, wanted " + std::to_string(n);
    }
  }
  for (const auto& [link, n] : got) {
    if (want.count(link) == 0) {
      return "transfer " + std::to_string(link.first) + "->" + std::to_string(link.second) + " is no link of the group";
    }
  }
  return {};
}

}  // namespace greyhound::validate
