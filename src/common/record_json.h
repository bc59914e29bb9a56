// The one JSON form of a ring record (greyhoundctl dump, the agent's debug output, tests):
// {"rank","seq","t_ns","op","group","group_rank","group_size","count","dtype","bytes","peer","root",
//  "stream","tid","result","in_group","color","parent_group"}; Timing records (device profiling) carry
// "measured_op","measured_seq","dur_ns" instead of "parent_group".
// Group ids are 64-bit and printed as 16 hex digits in a string, so tools with double-only JSON numbers
// (jq, JavaScript) keep them exact. op names follow NCCL without the prefix ("AllReduce", "Send", ...).
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "greyhound/ring_layout.h"

namespace greyhound {

std::string group_id_hex(std::uint64_t id);
// The inverse: 1-16 lowercase hex digits; false on anything else.
bool parse_group_id_hex(const std::string& hex, std::uint64_t* id);
nlohmann::ordered_json record_to_json(const RecordPayload& p, int rank);

}  // namespace greyhound
