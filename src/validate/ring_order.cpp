#include "greyhound/validate/ring_order.h"

#include <algorithm>
#include <map>
#include <string>

namespace greyhound::validate {

Result<std::vector<int>> nccl_ring_order(const std::vector<int>& node_of, const std::vector<int>& segment,
                                         bool crosses_nodes) {
  using Order = Result<std::vector<int>>;
  const int n = static_cast<int>(node_of.size());
  if (segment.empty()) return Order::failure("the dumped ring names no rank");
  std::vector<bool> seen(node_of.size(), false);
  for (int r : segment) {
    if (r < 0 || r >= n) {
      return Order::failure("the dumped ring names rank " + std::to_string(r) + ", not one of the communicator's " +
                            std::to_string(n));
    }
    if (seen[static_cast<std::size_t>(r)]) return Order::failure("the dumped ring names rank " + std::to_string(r) + " twice");
    seen[static_cast<std::size_t>(r)] = true;
  }
  // The nodes in NCCL's order (by their lowest rank), each with its ranks in rank order.
  std::vector<int> nodes;
  std::map<int, std::vector<int>> ranks_of;
  for (int r = 0; r < n; ++r) {
    const int node = node_of[static_cast<std::size_t>(r)];
    if (!ranks_of.count(node)) nodes.push_back(node);
    ranks_of[node].push_back(r);
  }
  const int dumping = node_of[static_cast<std::size_t>(segment.front())];
  const std::vector<int>& local = ranks_of[dumping];
  for (int r : segment) {
    if (node_of[static_cast<std::size_t>(r)] != dumping) {
      return Order::failure("the dumped ring names ranks of nodes " + std::to_string(dumping) + " and " +
                            std::to_string(node_of[static_cast<std::size_t>(r)]) + " (a channel lists one node's GPUs)");
    }
  }
  if (segment.size() != local.size()) {
    return Order::failure("the dumped ring names " + std::to_string(segment.size()) + " of the " +
                          std::to_string(local.size()) + " ranks of its node");
  }
  if (nodes.size() == 1) {
    if (crosses_nodes) return Order::failure("the dumped ring leaves its node, but every rank is on that node");
    return segment;
  }
  if (!crosses_nodes) return Order::failure("the dumped ring stays on its node, but the communicator spans nodes");
  // The segment as positions among its node's ranks, applied to every node.
  std::vector<std::size_t> position;
  for (int r : segment) {
    position.push_back(static_cast<std::size_t>(std::find(local.begin(), local.end(), r) - local.begin()));
  }
  std::vector<int> order;
  for (int node : nodes) {
    const std::vector<int>& mine = ranks_of[node];
    if (mine.size() != local.size()) {
      return Order::failure("node " + std::to_string(node) + " holds " + std::to_string(mine.size()) +
                            " of the communicator's ranks and node " + std::to_string(dumping) + " " +
                            std::to_string(local.size()) + ": its part of the ring is not known");
    }
    for (std::size_t p : position) order.push_back(mine[p]);
  }
  return order;
}

}  // namespace greyhound::validate
