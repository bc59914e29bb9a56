// greyhound-master for one job: reads the job's event stream from its persisted cursor, applies the events
// to the IncidentTracker, and commits the new state, the changed incident and the master's own events in
// one MULTI/EXEC, so that a restart (of the master or of Redis) neither loses nor repeats an event. Keeps a
// JSON-lines event log. Malformed values in Redis are logged once per kind and skipped.
#pragma once

#include <fstream>
#include <optional>
#include <set>
#include <string>

#include "common/redis_client.h"
#include "daemon/incident_tracker.h"

namespace greyhound::master {

struct MasterConfig {
  std::string job;
  RedisEndpoint redis;
  std::string event_log;  // empty: none
  int batch = 256;
};

class Master {
 public:
  explicit Master(MasterConfig config);

  // One poll of the stream; returns the number of events applied.
  int tick();

  bool loaded() const { return tracker_.has_value(); }
  const MasterState* state() const { return tracker_ ? &tracker_->state() : nullptr; }

 private:
  bool load();
  void log_line(const nlohmann::json& j);
  void warn_once(const std::string& kind, const std::string& message);

  MasterConfig cfg_;
  RedisClient redis_;
  std::optional<IncidentTracker> tracker_;
  std::uint64_t loaded_at_reconnects_ = ~0ull;
  std::ofstream log_;
  std::set<std::string> warned_;
};

}  // namespace greyhound::master
