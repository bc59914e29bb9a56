#include "greyhound/validate/graph_dump.h"

#include <pugixml.hpp>

#include <algorithm>

#include <cstdlib>
#include <limits>
#include <string>

#include "common/text.h"

namespace greyhound::validate {
namespace {

using R = Result<std::vector<DumpedRing>>;

// A non-negative integer attribute, or -1.
long attr_int(const pugi::xml_node& n, const char* name) {
  const pugi::xml_attribute a = n.attribute(name);
  if (!a) return -1;
  const auto x = parse_integer(a.value());
  if (!x || *x < 0 || *x > std::numeric_limits<long>::max()) return -1;
  return static_cast<long>(*x);
}

}  // namespace

Result<std::vector<DumpedRing>> parse_graph_dump_rings(std::string_view xml) {
  pugi::xml_document doc;
  const pugi::xml_parse_result parsed = doc.load_buffer(xml.data(), xml.size());
  if (!parsed) {
    return R::failure("graph dump: not XML (" + std::string(parsed.description()) + " at offset " +
                      std::to_string(parsed.offset) + ")");
  }
  const pugi::xml_node root = doc.document_element();
  if (std::string(root.name()) != "graphs") {
    return R::failure("graph dump: the root is <" + printable(root.name(), 64) + ">, not <graphs>");
  }
  if (attr_int(root, "version") != 1) {
    return R::failure("graph dump: version '" + printable(root.attribute("version").value(), 64) + "' (only 1 is known)");
  }
  std::vector<DumpedRing> out;
  bool ring_graph = false;
  for (const pugi::xml_node graph : root.children("graph")) {
    if (attr_int(graph, "pattern") != 4) continue;
    ring_graph = true;
    int c = 0;
    for (const pugi::xml_node channel : graph.children("channel")) {
      DumpedRing ring;
      ring.channel = c++;
      for (const pugi::xml_node n : channel.children()) {
        const std::string name = n.name();
        if (name == "net") {
          ring.crosses_nodes = true;
        } else if (name == "gpu") {
          const long rank = attr_int(n, "rank");
          if (rank < 0 || rank > (1 << 24)) {
            return R::failure("graph dump: channel " + std::to_string(ring.channel) +
                              ": a <gpu> without a rank (a dump of NCCL before 2.12 names devices only)");
          }
          if (std::find(ring.ranks.begin(), ring.ranks.end(), rank) != ring.ranks.end()) {
            return R::failure("graph dump: channel " + std::to_string(ring.channel) + ": rank " + std::to_string(rank) +
                              " appears twice in one ring");
          }
          ring.ranks.push_back(static_cast<int>(rank));
        }
      }
      out.push_back(std::move(ring));
    }
    break;  // one ring graph per dump
  }
  if (!ring_graph) return R::failure("graph dump: no ring graph (pattern 4)");
  return out;
}

}  // namespace greyhound::validate
