#include "greyhound/validate/graph_dump.h"

#include <pugixml.hpp>

#include <algorithm>
#include <limits>
#include <set>
#include <string>

#include "common/text.h"

namespace greyhound::validate {
namespace {

using Rings = Result<std::vector<DumpedRing>>;
using Ranks = Result<std::map<std::int64_t, int>>;

// A non-negative integer attribute as NCCL writes one: decimal ("%d"), or hexadecimal with 0x ("%#lx");
// -1 if absent or anything else.
std::int64_t attr_int(const pugi::xml_node& n, const char* name) {
  const pugi::xml_attribute a = n.attribute(name);
  if (!a) return -1;
  const std::string v = a.value();
  if (v.size() > 2 && v[0] == '0' && (v[1] == 'x' || v[1] == 'X')) {
    if (v.size() > 2 + 16) return -1;
    std::uint64_t x = 0;
    for (std::size_t i = 2; i < v.size(); ++i) {
      const char c = v[i];
      const int d = c >= '0' && c <= '9'   ? c - '0'
                    : c >= 'a' && c <= 'f' ? c - 'a' + 10
                    : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                           : -1;
      if (d < 0) return -1;
      x = x * 16 + static_cast<std::uint64_t>(d);
    }
    if (x > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) return -1;
    return static_cast<std::int64_t>(x);
  }
  const auto x = parse_integer(v);
  if (!x || *x < 0) return -1;
  return static_cast<std::int64_t>(*x);
}

constexpr std::int64_t kMaxRank = 1 << 24;

std::string quoted(const pugi::xml_node& n, const char* name) {
  return "'" + printable(n.attribute(name).value(), 32) + "'";
}

void find_gpus(const pugi::xml_node& n, std::vector<pugi::xml_node>& out, int depth) {
  if (depth > 64) return;  // deeper than any PCI tree
  for (const pugi::xml_node c : n.children()) {
    if (std::string(c.name()) == "gpu") out.push_back(c);
    find_gpus(c, out, depth + 1);
  }
}

// Parses `xml` into `doc`; its root element, or why not ("<what>: not XML ..." or the wrong root).
Result<pugi::xml_node> load_root(pugi::xml_document& doc, std::string_view xml, const char* what,
                                 const char* root_name) {
  using N = Result<pugi::xml_node>;
  const pugi::xml_parse_result parsed = doc.load_buffer(xml.data(), xml.size());
  if (!parsed) {
    return N::failure(std::string(what) + ": not XML (" + parsed.description() + " at offset " +
                      std::to_string(parsed.offset) + ")");
  }
  const pugi::xml_node root = doc.document_element();
  if (std::string(root.name()) != root_name) {
    return N::failure(std::string(what) + ": the root is <" + printable(root.name(), 64) + ">, not <" + root_name +
                      ">");
  }
  return root;
}

}  // namespace

Result<std::map<std::int64_t, int>> parse_topology_dump_ranks(std::string_view xml) {
  pugi::xml_document doc;
  const auto loaded = load_root(doc, xml, "topology dump", "system");
  if (!loaded) return Ranks::failure(loaded.error());
  const pugi::xml_node root = *loaded;
  std::vector<pugi::xml_node> gpus;
  find_gpus(root, gpus, 0);
  if (gpus.empty()) return Ranks::failure("topology dump: no <gpu>");
  std::map<std::int64_t, int> out;
  std::set<int> ranks;
  for (const pugi::xml_node& g : gpus) {
    const std::int64_t dev = attr_int(g, "dev");
    const std::int64_t rank = attr_int(g, "rank");
    if (dev < 0) return Ranks::failure("topology dump: a <gpu> whose dev is " + quoted(g, "dev"));
    if (rank < 0 || rank > kMaxRank) {
      return Ranks::failure("topology dump: device " + std::to_string(dev) + ": rank " + quoted(g, "rank") +
                            " (a dump taken before the communicator's ranks were known?)");
    }
    if (!out.emplace(dev, static_cast<int>(rank)).second) {
      return Ranks::failure("topology dump: device " + std::to_string(dev) + " appears twice");
    }
    if (!ranks.insert(static_cast<int>(rank)).second) {
      return Ranks::failure("topology dump: rank " + std::to_string(rank) + " appears twice");
    }
  }
  return out;
}

namespace {

// The channels of one graph (`what`: "ring" or "tree"; a channel is one `unit`: "ring" or "chain"), each
// device's rank from `device_ranks`.
Rings parse_channels(const pugi::xml_node& graph, const std::map<std::int64_t, int>& device_ranks, const char* what,
                     const char* unit) {
  std::vector<DumpedRing> out;
  int c = 0;
  for (const pugi::xml_node channel : graph.children("channel")) {
    DumpedRing ring;
    ring.channel = c++;
    const std::string where = std::string("graph dump: ") + what + " channel " + std::to_string(ring.channel) + ": ";
    for (const pugi::xml_node n : channel.children()) {
      const std::string name = n.name();
      if (name == "net") {
        ring.crosses_nodes = true;
      } else if (name == "gpu") {
        const std::int64_t dev = attr_int(n, "dev");
        if (dev < 0) return Rings::failure(where + "a <gpu> whose dev is " + quoted(n, "dev"));
        const auto rank = device_ranks.find(dev);
        if (rank == device_ranks.end()) {
          return Rings::failure(where + "device " + std::to_string(dev) +
                                " has no rank in the topology dump (a dump of another communicator or node?)");
        }
        if (std::find(ring.ranks.begin(), ring.ranks.end(), rank->second) != ring.ranks.end()) {
          return Rings::failure(where + "rank " + std::to_string(rank->second) + " appears twice in one " + unit);
        }
        ring.devices.push_back(dev);
        ring.ranks.push_back(rank->second);
      }
    }
    out.push_back(std::move(ring));
  }
  return out;
}

Result<pugi::xml_node> load_graphs(pugi::xml_document& doc, std::string_view xml) {
  const auto loaded = load_root(doc, xml, "graph dump", "graphs");
  if (!loaded) return loaded;
  if (attr_int(*loaded, "version") != 1) {
    return Result<pugi::xml_node>::failure("graph dump: version " + quoted(*loaded, "version") + " (only 1 is known)");
  }
  return loaded;
}

}  // namespace

Result<std::vector<DumpedRing>> parse_graph_dump_rings(std::string_view xml,
                                                       const std::map<std::int64_t, int>& device_ranks) {
  pugi::xml_document doc;
  const auto root = load_graphs(doc, xml);
  if (!root) return Rings::failure(root.error());
  for (const pugi::xml_node graph : root->children("graph")) {
    if (attr_int(graph, "pattern") == 4) return parse_channels(graph, device_ranks, "ring", "ring");  // one ring graph per dump
  }
  return Rings::failure("graph dump: no ring graph (pattern 4)");
}

Result<DumpedTree> parse_graph_dump_tree(std::string_view xml, const std::map<std::int64_t, int>& device_ranks) {
  using T = Result<DumpedTree>;
  pugi::xml_document doc;
  const auto root = load_graphs(doc, xml);
  if (!root) return T::failure(root.error());
  for (const pugi::xml_node graph : root->children("graph")) {
    if (attr_int(graph, "id") != 1) continue;
    const auto pattern = nccl_tree_pattern_of(attr_int(graph, "pattern"));
    if (!pattern) {
      return T::failure("graph dump: the tree graph (id 1) has pattern " + quoted(graph, "pattern") +
                        " (1, 2 or 3 is a tree)");
    }
    auto chains = parse_channels(graph, device_ranks, "tree", "chain");
    if (!chains) return T::failure(chains.error());
    if (chains->empty() || chains->front().ranks.empty()) return T::failure("graph dump: the tree graph has no GPU");
    DumpedTree t;
    t.pattern = *pattern;
    t.chains = std::move(*chains);
    return t;
  }
  return T(Error{Errc::kUnavailable, "graph dump: no tree graph (id 1)", {}});
}

}  // namespace greyhound::validate
