// NCCL's graph and topology dumps, handed to the agent (docs/validation.md, "NCCL's ring order").
//
// A job that sets NCCL_GRAPH_DUMP_FILE has NCCL write its graph dump on one rank of every communicator it makes
// (NCCL_GRAPH_DUMP_FILE_RANK, default 0), at that one path for every communicator and every process of the
// node. Before main the hook points this process's NCCL at paths of its own (the job's with
// ".greyhound.<pid>"), with a topology dump (NCCL_TOPO_DUMP_FILE: it maps the devices the graph dump names to
// communicator ranks) beside it when the job set none. Right after such a rank's communicator is made, the
// hook reads both, renames them to the job's paths (the job finds its dumps where it asked), and copies them
// next to its ring, named after the communicator's group, before the call's record reaches the ring: the
// agent, which learns the group from that record, finds them there (nccl_dump_copy_path, greyhound/ring.h),
// reads the ring order and publishes it with the group (job_store.h, group_nccl_ring). Nothing is parsed
// here; files older than the call are left alone.
#pragma once

#include <cstdint>
#include <string>

namespace greyhound::hook {

// After a call of this process that makes a communicator (`group_id`, as rank `comm_rank`; `made`: it returned
// ncclSuccess, the communicator complete; `ring_path`: "" when the hook records nothing), begun at monotonic
// `call_start_ns`: when this is the rank NCCL dumps on, reads the dumps and copies them for the agent; in any
// case settles them (below). Never throws; logs once what it could not do.
void keep_nccl_dumps(const std::string& ring_path, std::uint64_t group_id, int comm_rank, bool made,
                     std::uint64_t call_start_ns) noexcept;

// Renames this process's dumps to the job's paths (removes a topology dump the job did not ask for), when
// there are any: after every communicator made, at exit, and before the hook's own _exit (a dump NCCL
// writes after its call returned, as with a non-blocking ncclCommInitRankConfig, is settled then).
void settle_nccl_dumps() noexcept;

}  // namespace greyhound::hook
