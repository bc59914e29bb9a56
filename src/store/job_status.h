// A job's status as operators read it: what `greyhoundctl status --json` prints and the master's HTTP
// `/status` serves, built in one place from the job store. The master's state and recent incidents; every
// rank with its registration and latest iteration (pipelined reads, bounded by the job's world); every node with its agent's heartbeat (absent: the agent
// is gone); every communication group with its members and what it moves.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "greyhound/result.h"
#include "store/job_store.h"

namespace greyhound::store {

// The ranks a status reads when the job published no layout (with one: its world). Members of the job's
// `ranks` set beyond are counted ("ranks_ignored"), not read: a planted set costs nothing.
inline constexpr int kMaxStatusRanks = 1 << 16;

// Called once per value that could not be read as what it should be: where (a key or entry) and why.
using StatusNote = std::function<void(const std::string& where, const std::string& why)>;

// The status JSON at wall-clock `now_unix_ms` (ages are counted from it). A malformed value shows in its
// entry ("malformed": why) and goes to `note`; never fatal. kUnavailable when Redis goes away midway.
Result<nlohmann::json> job_status(JobStore& store, std::int64_t now_unix_ms, const StatusNote& note = {});

}  // namespace greyhound::store
