// NCCL's graph dump (the file NCCL_GRAPH_DUMP_FILE names, written by the rank NCCL_GRAPH_DUMP_FILE_RANK
// names, default 0), read for the ring order the validation's passes follow, and NCCL's topology dump
// (NCCL_TOPO_DUMP_FILE, same rank) for the communicator rank of each device the graph names. The graph dump,
// as NCCL writes it (src/graph/search.cc, ncclTopoGetXmlFromGraphs; NCCL_GRAPH_XML_VERSION 1; as NCCL 2.28
// wrote it on an H200, tests/validate/data/nccl-2.28-h200-graph.xml):
//   <graphs version="1">
//     <graph id="0" pattern="4" crossnic="0" nchannels="2" speedintra=".." speedinter=".." latencyinter=".."
//            typeintra="NVL" typeinter="PIX" samechannels="1">
//       <channel> <net dev="0"/> <gpu dev="0"/> <gpu dev="0x1"/> ... <net dev="0"/> </channel>
//       ...
//     </graph>
//     <graph id="1" pattern="1" ...> <channel> <net dev="0"/> <gpu dev="0"/> ... </channel> ... </graph>
//     <graph id="2" pattern="3" ...>, <graph id="3" pattern="5" ...>, ... (CollNet, NVLS: not read)
//   </graphs>
// A ring graph has pattern 4 (NCCL_TOPO_PATTERN_RING); each channel lists the dumping rank's node's GPUs in
// ring order, between the network devices it enters and leaves by when the ring spans nodes. A <gpu> names
// its CUDA device, not its rank: decimal, or hexadecimal with 0x (NCCL writes "%#lx"; a device of another
// NVLink system carries that system's id in the high bits). The topology dump holds each of the node's
// GPUs as <gpu dev="0" sm="90" rank="0" gdr="1"/>, nested under <cpu> and <pci>; rank is the communicator
// rank. Parsed with pugixml, from text (no file I/O here).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "greyhound/result.h"
#include "greyhound/validate/pass_plan.h"

namespace greyhound::validate {

// One channel of a graph: a ring's, or a tree's chain through the node.
struct DumpedRing {
  int channel = 0;                    // its index among its graph's channels
  std::vector<std::int64_t> devices;  // the devices the channel names, in ring (chain) order
  std::vector<int> ranks;             // their communicator ranks, in the same order
  bool crosses_nodes = false;         // enters and leaves by the network
};

struct DumpedTree {
  NcclTreePattern pattern = NcclTreePattern::kBalanced;
  std::vector<DumpedRing> chains;  // one per channel of the tree graph
};

// Device -> communicator rank, from a topology dump. Fails (kInvalid, naming what) on text that is not XML,
// a root other than <system>, no <gpu>, a <gpu> without a non-negative integer dev or rank, or a device or
// rank twice.
Result<std::map<std::int64_t, int>> parse_topology_dump_ranks(std::string_view xml);

// The rings of a graph dump, one per channel of its ring graph, each device's rank from `device_ranks` (a
// topology dump of the same communicator). Fails (kInvalid, naming what) on text that is not XML, a root
// other than <graphs>, a version other than 1, no graph with pattern 4, a <gpu> without a non-negative
// integer dev, a device that `device_ranks` does not hold, or a rank twice in one ring.
Result<std::vector<DumpedRing>> parse_graph_dump_rings(std::string_view xml,
                                                       const std::map<std::int64_t, int>& device_ranks);

// The tree graph of a graph dump (id 1): its pattern and the chain of each channel, ranks from `device_ranks`.
// Fails with kUnavailable when the dump has no graph with id 1 (a dump that holds rings only), else (kInvalid,
// naming what) as parse_graph_dump_rings does, and on a pattern other than 1, 2 or 3 or a graph without a
// channel.
Result<DumpedTree> parse_graph_dump_tree(std::string_view xml, const std::map<std::int64_t, int>& device_ranks);

}  // namespace greyhound::validate
