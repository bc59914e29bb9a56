// The master's GlobalController core, pure: consumes the job's events in stream order and keeps the job
// state and incidents. No I/O: the master persists what it returns, atomically with the stream cursor, so
// every event is applied exactly once across master restarts.
//
// Rules:
//  - A slowdown reported by any rank while the job is healthy opens an incident (state "slow"). Further
//    slowdown reports join it; one that makes it at least 10 % more severe (a compound fail-slow) updates it.
//  - A recovery reported by a rank of the incident counts; when more than half of its ranks have recovered
//    to within 10 % of the level before the incident, it closes (state "healthy"). A recovery that leaves
//    the job still more than 10 % slower than before is a partial recovery: an update, not a close.
//  - A slowdown whose onset precedes the close of the last incident is a late report of that incident:
//    ignored, not a new incident.
#pragma once

#include <optional>
#include <vector>

#include "store/messages.h"

namespace greyhound::master {

struct Decision {
  std::vector<Event> emit;                 // master events to append to the stream
  std::optional<Incident> incident;        // the incident to persist, when it changed
};

class IncidentTracker {
 public:
  IncidentTracker() = default;
  IncidentTracker(MasterState state, std::optional<Incident> open);

  // Applies one event (anything not from an agent about a rank is ignored). Appends what to persist.
  void apply(const Event& e, Decision& out);

  // Closes the open incident on the master's own evidence (a profile shows the straggler gone and the
  // configuration is back to the original), when no recovery event can come: a mitigated job's iteration
  // time may not change when the fault ends. No-op without an open incident.
  void close(double t_s, const std::string& reason, Decision& out);
  // The open incident's phase: slow, profiling, mitigating (no-op when healthy).
  void set_phase(Phase phase);

  const MasterState& state() const { return state_; }
  // The parts of the state the controller keeps (its fail-slows, the healthy iteration time).
  MasterState& mutable_state() { return state_; }
  const std::optional<Incident>& open_incident() const { return open_; }

 private:
  Event master_event(const char* type, const Incident& i, double t_s, const std::string& reason = "") const;

  MasterState state_;
  std::optional<Incident> open_;
};

}  // namespace greyhound::master
