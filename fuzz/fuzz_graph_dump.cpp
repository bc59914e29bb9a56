// NCCL's graph and topology dump readers (validate/graph_dump.h) on any text: they never crash, a refusal
// says why, the device map names non-negative devices and ranks, and the rings name only ranks of that
// map, each once per ring. The input is read as a topology dump, and as a graph dump with a fixed map.
#include <map>
#include <set>

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
  const auto rings = greyhound::validate::parse_graph_dump_rings(xml, fixed);
  if (!rings) {
    check(!rings.error().empty(), "a refusal says why");
    return 0;
  }
  for (const auto& ring : *rings) {
    check(ring.ranks.size() == ring.devices.size(), "a rank for each device");
    std::set<int> seen;
    for (std::size_t i = 0; i < ring.ranks.size(); ++i) {
      check(fixed.count(ring.devices[i]) == 1 && fixed.at(ring.devices[i]) == ring.ranks[i], "the map's rank");
      check(seen.insert(ring.ranks[i]).second, "each once");
    }
  }
  return 0;
}
