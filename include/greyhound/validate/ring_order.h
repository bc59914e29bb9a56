// NCCL's ring order over a whole communicator, from the one node's part of it that a graph dump shows.
//
// NCCL writes its graph dump on one rank of a communicator (NCCL_GRAPH_DUMP_FILE_RANK, default 0), and a
// ring channel there lists only that rank's node's GPUs, in ring order, between the network devices the ring
// enters and leaves the node by (graph_dump.h). Across nodes NCCL joins the nodes' parts in node order: the
// nodes numbered by their lowest communicator rank, node n's last GPU sending to node n + 1's first, the last
// node's to the first's (NCCL's connectRings). Every node runs the same search on the same hardware, so on
// identical nodes every node's part follows the dumping node's: the same positions among the node's ranks of
// the communicator, taken in rank order. That is the assumption here; nodes holding different numbers of
// the communicator's ranks break it and are refused.
#pragma once

#include <vector>

#include "greyhound/result.h"

namespace greyhound::validate {

// The ring, as communicator ranks in ring order, from `node_of` (the node of each communicator rank: index =
// rank) and `segment` (the dumping node's ranks, in the order a ring channel of its dump lists them;
// `crosses_nodes`: the channel enters and leaves by the network). Fails (kInvalid, naming what) on a segment
// with a rank outside the communicator or twice, ranks of several nodes, not every rank of its node, a
// channel that crosses nodes in a one-node communicator or does not in a multi-node one, or nodes with
// different numbers of the communicator's ranks.
Result<std::vector<int>> nccl_ring_order(const std::vector<int>& node_of, const std::vector<int>& segment,
                                         bool crosses_nodes);

}  // namespace greyhound::validate
