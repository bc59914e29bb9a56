// Hangs, from the agents' stall reports: pure. A rank that has made no NCCL progress for longer than its
// agent's threshold reports a `stall`: the call it is blocked in (its communicator's group and the call's
// number on it) or none. A collective completes only once every member of its group joins it; so in a group
// where some members wait inside call number N, the members not inside N are the ones it waits for (their
// newest completed call on the group says where they stopped). That is what PyTorch's Flight Recorder names
// for a hung collective; here it comes from the rings, without the job's help.
#pragma once

#include <map>
#include <vector>

#include "daemon/localiser.h"
#include "store/messages.h"

namespace greyhound::master {

struct RankStall {
  int node = -1;
  StallDetail detail;
};

// For each group of `groups` in which a stalled member waits inside a collective (a call with a number: a
// send or receive has none and waits for its peer alone): the collective with the highest number
// any member waits in, its waiting members, and the members not inside it (`missing`, ascending), with
// their newest completed call on the group when they reported one (else -1). A member not inside it but
// blocked inside another call is waiting for someone else (a consequence, as a pipeline stage waiting for
// the next one): only the groups whose missing members include one blocked in no call (stuck outside NCCL,
// or with no report) are returned, with those members alone as `missing`: the root of the hang. When every
// missing member is blocked inside another call (a cycle: calls issued in different orders), every such
// group is returned with them. Groups whose members all wait inside the same call give nothing. In the
// order of `groups`.
std::vector<HangDetail> find_hangs(const std::map<int, RankStall>& stalls, const std::vector<GroupMembers>& groups);

}  // namespace greyhound::master
