// Chaos schedule of the simulated cluster (greyhound-simcluster --chaos, inline JSON or a file): a list of
// actions at job times that kill and restart greyhound's services while the job runs, for fault-tolerance
// tests. Pure: parsing and checking, no I/O.
//
//   [{"at_s": 5, "action": "kill", "target": "redis"}, {"at_s": 9, "action": "start", "target": "redis"},
//    {"at_s": 12, "action": "kill", "target": "master"}, {"at_s": 20, "action": "kill", "target": "agent:1"}]
// targets: "redis", "master" (the first master), "leader" (the master holding the lease when several run,
// --masters N; kill only), "agent:<node>"; actions: "kill" (SIGKILL, as a crash), "start", "stop" (SIGSTOP:
// starved; for Redis, hung: connections are accepted, nothing is answered) and "cont"; for Redis also
// "busy" with "for_s": back-to-back
// scripts of 0.25 s each for that long, every other client's command waiting behind them (a Redis
// saturated by another tenant or a slow command).
// When the first action on "redis" is "start", Redis is absent from the beginning until then.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace greyhound::sim {

struct ChaosAction {
  double at_s = 0;
  std::string action;  // "kill" (SIGKILL), "start" (again), "stop" (SIGSTOP: starved), "cont" (SIGCONT), "busy"
  double for_s = 0;    // "busy": how long
  std::string target;  // "redis", "master", "leader", "agent:<n>"
  int node = -1;       // agent:<n>: n
  bool done = false;
};

// Parses and validates a chaos schedule for a cluster of `nodes` nodes, sorted by time; throws
// std::invalid_argument naming the entry and field.
std::vector<ChaosAction> parse_chaos(const nlohmann::json& j, int nodes);
// The same from JSON text, read by the bounded reader (common/bounded_json.h).
std::vector<ChaosAction> parse_chaos_text(const std::string& text, int nodes);

}  // namespace greyhound::sim
