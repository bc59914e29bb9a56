// NCCL's graph dump (the file NCCL_GRAPH_DUMP_FILE names, written by the rank NCCL_GRAPH_DUMP_FILE_RANK
// names, default 0), read for the ring order the validation's passes follow. The format, as NCCL writes it
// (src/graph/search.cc, ncclTopoGetXmlFromGraphs; NCCL_GRAPH_XML_VERSION 1):
//   <graphs version="1">
//     <graph id="0" pattern="4" crossnic="0" nchannels="2" speedintra=".." speedinter=".." latencyinter=".."
//            typeintra="NVL" typeinter="PIX" samechannels="1">
//       <channel> <net dev="0"/> <gpu dev="0" rank="0"/> <gpu dev="1" rank="1"/> ... <net dev="0"/> </channel>
//       ...
//     </graph>
//     <graph id="1" pattern=".." ...> (tree, collnet, NVLS: not rings)
//   </graphs>
// A ring graph has pattern 4 (NCCL_TOPO_PATTERN_RING); each channel lists the node's GPUs in ring order,
// between the network devices it enters and leaves by when the ring spans nodes. Parsed with pugixml, from
// text (no file I/O here).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "greyhound/result.h"

namespace greyhound::validate {

struct DumpedRing {
  int channel = 0;           // its index among the ring graph's channels
  std::vector<int> ranks;    // the communicator ranks of this node's GPUs, in ring order
  bool crosses_nodes = false;  // enters and leaves by the network
};

// The rings of a graph dump, one per channel of its ring graph. Fails (kInvalid, naming what) on text that
// is not XML, a root other than <graphs>, a version other than 1, no graph with pattern 4, a <gpu> without
// a non-negative integer rank (dumps of NCCL before 2.12 name devices only), or a rank twice in one ring.
Result<std::vector<DumpedRing>> parse_graph_dump_rings(std::string_view xml);

}  // namespace greyhound::validate
