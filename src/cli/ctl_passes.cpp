// greyhoundctl passes --topology ring|tree (--ranks R1,R2,.. [--nodes N1,N2,.. [--pattern P]] |
//                     --graph-dump FILE --topo-dump FILE [--channel C])
// The validation's P2P pass plan (include/greyhound/validate/pass_plan.h) over a ring or binary tree of
// ranks: --ranks in the order given (the ring's order, or the tree in heap layout; with --nodes, the node of
// each rank, the tree is NCCL's: a chain per node in the order given, a double binary tree of the nodes, in
// the tree pattern --pattern names: balanced (default), split or tree); --graph-dump the order of channel C
// (default 0) of NCCL's graph dump (NCCL_GRAPH_DUMP_FILE): its ring graph's for a ring, its tree graph's chain
// and pattern for a tree (a one-node communicator's: a multi-node tree needs every node's ranks, --ranks
// with --nodes), whose devices --topo-dump (NCCL_TOPO_DUMP_FILE of the same run) gives the ranks of. Prints
// one JSON object, {"passes":[[[src,dst],...],...]}: every link once, no rank twice in a pass. Bad input:
// one error line, exit 2.
#include <cstdio>
#include <set>

#include <nlohmann/json.hpp>

#include "cli/ctl_commands.h"
#include "common/args.h"
#include "greyhound/validate/graph_dump.h"
#include "greyhound/validate/pass_plan.h"

namespace greyhound::ctl {

int cmd_passes(const Argv& argv) {
  const Args args(argv, {"topology", "ranks", "nodes", "pattern", "graph-dump", "topo-dump", "channel"}, {});
  const std::string topology = args.str("topology");
  if (topology != "ring" && topology != "tree") throw ArgError("--topology: ring or tree, not '" + topology + "'");
  if (args.has("ranks") == args.has("graph-dump")) throw ArgError("give one of --ranks, --graph-dump");
  if (args.has("channel") && !args.has("graph-dump")) throw ArgError("--channel needs --graph-dump");
  if (args.has("nodes") && (!args.has("ranks") || topology != "tree")) {
    throw ArgError("--nodes goes with --topology tree --ranks (the node of each rank: NCCL's trees)");
  }
  if (args.has("pattern") && !args.has("nodes")) {
    throw ArgError("--pattern goes with --nodes (the pattern of NCCL's trees between nodes)");
  }
  validate::NcclTreePattern pattern = validate::NcclTreePattern::kBalanced;
  if (args.has("pattern")) {
    const auto named = validate::parse_nccl_tree_pattern(args.str("pattern"));
    if (!named) throw ArgError("--pattern: balanced, split or tree, not '" + args.str("pattern") + "'");
    pattern = *named;
  }
  if (args.has("graph-dump") != args.has("topo-dump")) {
    throw ArgError("--graph-dump and --topo-dump go together: NCCL's graph dump names CUDA devices, the topology "
                   "dump (NCCL_TOPO_DUMP_FILE, same run) their ranks");
  }
  std::vector<int> order;
  if (args.has("ranks")) {
    for (std::int64_t r : parse_integer_list(args.str("ranks"), "--ranks")) {
      if (r < 0 || r > (1 << 24)) throw ArgError("--ranks: " + std::to_string(r) + " is not a rank");
      order.push_back(static_cast<int>(r));
    }
  } else {
    const auto ranks = validate::parse_topology_dump_ranks(read_file(args.str("topo-dump")));
    if (!ranks) throw ArgError("--topo-dump " + args.str("topo-dump") + ": " + ranks.error());
    const std::string graph = read_file(args.str("graph-dump"));
    std::vector<validate::DumpedRing> channels;
    if (topology == "ring") {
      auto rings = validate::parse_graph_dump_rings(graph, *ranks);
      if (!rings) throw ArgError("--graph-dump " + args.str("graph-dump") + ": " + rings.error());
      channels = std::move(*rings);
    } else {
      auto tree = validate::parse_graph_dump_tree(graph, *ranks);
      if (!tree) throw ArgError("--graph-dump " + args.str("graph-dump") + ": " + tree.error());
      channels = std::move(tree->chains);
      pattern = tree->pattern;
    }
    const std::int64_t c = args.integer("channel", 0);
    if (c < 0 || c >= static_cast<std::int64_t>(channels.size())) {
      throw ArgError("--channel " + std::to_string(c) + ": the dump's " + topology + " has " +
                     std::to_string(channels.size()) + " channels");
    }
    const validate::DumpedRing& channel = channels[static_cast<std::size_t>(c)];
    if (topology == "tree" && channel.crosses_nodes) {
      throw ArgError("--graph-dump " + args.str("graph-dump") + ": the tree spans nodes and the dump shows one node's "
                     "chain: give every rank with --ranks and its node with --nodes");
    }
    order = channel.ranks;
  }
  if (std::set<int>(order.begin(), order.end()).size() != order.size()) throw ArgError("--ranks: a rank appears twice");
  if (order.size() < 2) throw ArgError("a " + topology + " of " + std::to_string(order.size()) + " rank(s) has no link to time");
  const validate::Topology t = topology == "ring" ? validate::Topology::kRing : validate::Topology::kTree;
  std::vector<validate::Pass> plan;
  if (args.has("nodes")) {
    std::vector<int> nodes;
    for (std::int64_t n : parse_integer_list(args.str("nodes"), "--nodes")) {
      if (n < 0 || n > (1 << 24)) throw ArgError("--nodes: " + std::to_string(n) + " is not a node");
      nodes.push_back(static_cast<int>(n));
    }
    if (nodes.size() != order.size()) {
      throw ArgError("--nodes: " + std::to_string(nodes.size()) + " nodes for " + std::to_string(order.size()) + " ranks");
    }
    plan = validate::nccl_tree_passes(order, nodes, pattern);
  } else if (t == validate::Topology::kTree && args.has("graph-dump")) {
    plan = validate::nccl_tree_passes(order, std::vector<int>(order.size(), 0), pattern);  // one node: its chain
  } else {
    plan = validate::passes(t, order);
  }
  nlohmann::json passes = nlohmann::json::array();
  for (const validate::Pass& p : plan) {
    nlohmann::json pass = nlohmann::json::array();
    for (const validate::Transfer& x : p) pass.push_back({x.src, x.dst});
    passes.push_back(std::move(pass));
  }
  std::printf("%s\n", nlohmann::json{{"passes", passes}}.dump().c_str());
  return 0;
}

}  // namespace greyhound::ctl
