// NCCL's graph and topology dump readers (validate/graph_dump.h) on any text: they never crash, a refusal
// says why, the device map names non-negative devices and ranks, and the rings name only ranks of that
// map, each once per ring; so do a tree graph's chains, and a tree that is read has at least one GPU. The
// input is read as a topology dump, and as a graph dump (rings and tree) with a fixed map.
#include <map>
#include <set>
#include <vector>

#include "fuzz/fuzz_check.h"
#include "greyhound/validate/graph_dump.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using greyhound::fuzz::check;
  const std::string_view xml(reinterpret_cast<const char*>(data), size);
  const auto ranks = greyhound::validate::parse_topology_dump_ranks(xml);
  if (!ranks) {
    check(!ranks.error().empty(), "a refusal says why");
  } else {
    std::set<int> seen;
    for (const auto& [dev, rank] : *ranks) {
      check(dev >= 0 && rank >= 0, "non-negative devices and ranks");
      check(seen.insert(rank).second, "each rank once");
    }
  }
  const std::map<std::int64_t, int> fixed = {{0, 0}, {1, 1}, {2, 3}, {3, 2}, {0x100000000000000, 4}};
  const auto check_channels = [&](const std::vector<greyhound::validate::DumpedRing>& channels) {
    for (const auto& ring : channels) {
      check(ring.ranks.size() == ring.devices.size(), "a rank for each device");
      std::set<int> seen;
      for (std::size_t i = 0; i < ring.ranks.size(); ++i) {
        check(fixed.count(ring.devices[i]) == 1 && fixed.at(ring.devices[i]) == ring.ranks[i], "the map's rank");
        check(seen.insert(ring.ranks[i]).second, "each once");
      }
    }
  };
  const auto rings = greyhound::validate::parse_graph_dump_rings(xml, fixed);
  if (!rings) {
    check(!rings.error().empty(), "a refusal says why");
  } else {
    check_channels(*rings);
  }
  const auto tree = greyhound::validate::parse_graph_dump_tree(xml, fixed);
  if (!tree) {
    check(!tree.error().empty(), "a refusal says why");
  } else {
    check(!tree->chains.empty() && !tree->chains.front().ranks.empty(), "a tree read has a GPU");
    check_channels(tree->chains);
  }
  return 0;
}
