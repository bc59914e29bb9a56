// NCCL's ring order over a group, read by the agent from the copies of NCCL's graph and topology dumps that the
// hook leaves beside a ring (src/hook/nccl_dumps.h; docs/validation.md, "NCCL's ring order").
#pragma once

#include <string>
#include <string_view>

#include "greyhound/result.h"
#include "store/messages.h"

namespace greyhound::agent {

// Pure: what a member (`group_rank` of a group of `group_size`) dumped: ring channel 0 of the graph dump, its
// devices mapped to communicator ranks by the topology dump. Fails (kInvalid, naming what) on dumps
// validate/graph_dump.h refuses, a ring with a rank beyond the group, or one without the dumping member (a
// dump of another communicator: NCCL writes every communicator's at the same path). With it, the tree graph's
// pattern and channel 0's chain (NcclRingDump::tree), when the dump has a tree graph whose chain holds the
// ring segment's ranks; a tree graph that does not is left out, and why goes to `tree_error` (when given).
Result<NcclRingDump> nccl_ring_of(std::string_view graph_xml, std::string_view topo_xml, int group_rank, int group_size,
                                  std::string* tree_error = nullptr);

// The copies for group `group_id` of the ring at `ring_path` (greyhound/ring.h, nccl_dump_copy_path), read as
// files this user made (no link, not writable by others, at most 4 MiB), then removed. Fails with
// Errc::kUnavailable when there is no copy of the graph dump (the usual case: the job set no
// NCCL_GRAPH_DUMP_FILE, or this rank is not the one NCCL dumps on), kInvalid with why otherwise.
Result<NcclRingDump> take_nccl_ring(const std::string& ring_path, std::uint64_t group_id, int group_rank, int group_size,
                                    std::string* tree_error = nullptr);

}  // namespace greyhound::agent
