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
