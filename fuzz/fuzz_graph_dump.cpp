// NCCL's graph dump reader (validate/graph_dump.h) on any text: it never crashes, a refusal says why, and
// the rings it returns name only non-negative ranks, each once per ring.
#include <set>

#include "fuzz/fuzz_check.h"
#include "greyhound/validate/graph_dump.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using greyhound::fuzz::check;
  const std::string_view xml(reinterpret_cast<const char*>(data), size);
  const auto rings = greyhound::validate::parse_graph_dump_rings(xml);
  if (!rings) {
    check(!rings.error().empty(), "a refusal says why");
    return 0;
  }
  for (const auto& ring : *rings) {
    std::set<int> seen;
    for (int r : ring.ranks) {
      check(r >= 0, "a ring names non-negative ranks");
      check(seen.insert(r).second, "each once");
    }
  }
  return 0;
}
