// The master's GlobalController for one job, pure: events, profile reports, acknowledgements and `now` in,
// intents out (commit these events and this state, send this profiling request, publish this plan). No
// Redis, no clock: the driver (daemon/job_driver.h) reads the job store, owns the clock and carries the
// intents out, so a test drives a controller with plain sequences.
//
// What it decides (docs/analysis.md and docs/mitigation.md):
//  - Incidents: the IncidentTracker, applied to each event of the stream in order. The driver commits the
//    new state with the stream cursor, the changed incidents and the master's events in one transaction,
//    and only then does the controller adopt them (apply + adopt), so that a restart neither loses nor
//    repeats an event.
//  - Pause-free localisation: on an incident (opened, or worsened) it asks every agent for a profiling
//    window, collects the ranks' profile reports until all are in or a deadline passes, and localises.
//  - Healthy baselines: a reference profile once healthy for baseline_after_s and every baseline_every_s;
//    one whose window overlapped a slowdown's onset is discarded.
//  - Mitigation (mitigate): the Planner paced once per iteration of the job, plans published with growing
//    epochs, their acknowledgements counted (every rank of the layout must answer; deadline ack_timeout_s),
//    re-profiling while a remedy is in force, a revert when the incident closes, and the close of an
//    incident whose straggler a profile shows gone once the configuration is back to the original.
//  - A controller loaded with an incident open (a restarted master) profiles it again, and the planner
//    resumes from the configuration the job's layout shows in force.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "daemon/incident_tracker.h"
#include "daemon/localiser.h"
#include "daemon/planner.h"
#include "store/messages.h"

namespace greyhound::master {

struct ControllerConfig {
  bool mitigate = false;                       // drive the planner and publish plans
  double profile_s = kDefaultProfileWindowS;   // length of a profiling window
  double profile_grace_s = 4.0;                // wait this much after the window for the ranks' reports
  double reprofile_s = 6.0;                    // while a remedy is in force, profile again this often
  double ack_timeout_s = 20.0;                 // all ranks must acknowledge a plan within this
  double baseline_after_s = 10.0;              // healthy this long (since start or the last incident): baseline
  double baseline_every_s = 600.0;             // and refresh it this often while healthy (0: never while healthy)
  PlannerConfig planner;
};

// The one source of time of a controller, read by the driver once per step.
struct Now {
  double mono_s = 0;         // a steady clock, seconds (any origin, never goes back)
  double job_s = 0;          // job time: seconds since the job's epoch (the driver's estimate)
  std::int64_t unix_ms = 0;  // wall clock, for the t_unix_ms of events
};

// What the controller needs read before its next step (so the driver reads only that).
struct Needs {
  bool registry = false;  // agents and ranks: a profiling request is due
  bool groups = false;    // the group registry: a profiling window is complete
  bool layout = false;    // the job's layout
  bool acks = false;      // the acknowledgements of the plan in flight
};

// What the driver read, as asked by needs().
struct JobInputs {
  std::vector<int> agents;
  std::vector<int> ranks;
  std::vector<GroupMembers> groups;
  std::optional<JobLayout> layout;
  std::vector<PlanAck> acks;
  bool acks_read = false;  // the acknowledgements could be read (a failed read is no silence of the job)
  std::optional<IterationUpdate> pace;  // the latest iteration of pace_rank(), when the driver has one
};

// The group registry as the localiser compares it: complete groups, with what each moves per iteration.
std::vector<GroupMembers> comparable_groups(const std::vector<GroupRecord>& records);

struct ProfileRequest {
  Command command;         // "profile", with its id and window
  std::vector<int> nodes;  // every agent of the job
};

struct Intents {
  std::vector<Event> events;         // to append, with the state, in one transaction
  std::vector<Incident> incidents;   // changed incidents, same transaction
  bool persist_state = false;        // the state changed (phase): commit it even without events
  std::optional<ProfileRequest> profile;
  std::optional<Plan> plan;          // to publish (epoch assigned); then plan_published() or plan_failed()
  bool empty() const { return events.empty() && incidents.empty() && !persist_state && !profile && !plan; }
};

class Controller {
 public:
  // `run_tag` tells this master's profile requests from those of an earlier run (whose agents may still
  // be answering): e.g. its start time in base 36.
  Controller(ControllerConfig config, std::string run_tag);

  // (Re)loads the persisted state (after a start or a reconnect). `latest_epoch`: the newest plan's epoch in
  // the store (epochs grow across master restarts).
  // `last_event_id`: the stream's newest id at the first load: a master event up to it is an earlier run's.
  void load(MasterState state, std::optional<Incident> open, std::int64_t latest_epoch,
            const std::string& last_event_id, const Now& now);
  bool loaded() const { return tracker_.has_value(); }
  const std::string& cursor() const { return tracker_->state().cursor; }
  const MasterState& state() const { return tracker_->state(); }
  const std::optional<Incident>& open_incident() const { return tracker_->open_incident(); }

  // Applies a batch of stream entries (the cursor moves past all of them; malformed ones are counted) to a
  // copy of the state. Returns what to commit: the new state (with the cursor), changed incidents and the
  // master's own events. adopt() once committed; discard() when the commit failed (then load() again).
  store::MasterCommit apply(const std::vector<store::Entry<Event>>& entries, const Now& now);
  void adopt(const Now& now);
  void discard();

  // Whose iteration times pace the planner and give the job clock.
  int pace_rank() const { return 0; }
  Needs needs(const Now& now) const;
  // One step after the events: profiling windows, baselines, acknowledgements, the planner.
  Intents step(const Now& now, const JobInputs& in);
  // The driver's report on a plan it was asked to publish: the plan event to commit (published), or the
  // epoch is given back (failed).
  Intents plan_published(const Plan& plan, const Now& now);
  void plan_failed(const Plan& plan);

  // Profiling and planning state, for tests and status.
  bool profiling() const { return profiling_.has_value(); }
  bool has_baseline() const { return baseline_.has_value(); }
  bool planning() const { return planner_.has_value(); }
  std::optional<std::int64_t> plan_in_flight() const {
    return pending_ ? std::optional<std::int64_t>(pending_->plan.epoch) : std::nullopt;
  }

 private:
  struct Profiling {
    std::string id;
    bool baseline = false;  // a healthy reference, not a localisation
    double deadline_s = 0;
    std::set<int> expected;
    std::map<int, ProfileView> got;
  };
  struct PendingPlan {
    Plan plan;
    double deadline_s = 0;
  };

  bool due_baseline(const Now& now) const;
  bool due_reprofile(const Now& now) const;
  bool profiling_complete(const Now& now) const;
  void react(const Event& e, const Now& now);
  void start_profiling(const std::string& why, bool baseline, const JobInputs& in, const Now& now, Intents& out);
  void finish_profiling(const JobInputs& in, const Now& now, Intents& out);
  void check_acks(const JobInputs& in, const Now& now, Intents& out);
  void drive_planner(const JobInputs& in, Intents& out);
  void revert(std::int64_t incident, Intents& out);
  Event master_event(const char* type, const Now& now) const;
  void take(Decision d, const Now& now, Intents& out);
  void propose_plan(Plan plan, Intents& out);
  void warn_once(const std::string& kind, const std::string& message);

  ControllerConfig cfg_;
  std::string run_tag_;
  std::optional<IncidentTracker> tracker_;
  std::optional<IncidentTracker> proposed_;  // applied, not yet committed
  std::vector<Event> proposed_events_;       // what the proposal applied and emitted, to react to on adopt
  bool ever_loaded_ = false;
  std::string earlier_run_until_ = "0-0";     // master events up to this stream id are an earlier run's

  std::optional<Profiling> profiling_;
  int profiles_requested_ = 0;
  bool resume_open_incident_ = false;
  double last_profile_s_ = -1e18;
  std::optional<GroupBaseline> baseline_;
  double healthy_since_s_ = 0;
  double baseline_at_s_ = -1e18;
  double baseline_end_t_s_ = 0;  // job time at the end of its window
  bool want_profile_ = false;    // an incident asked for localisation: start at the next step
  std::string want_profile_why_;

  std::optional<Planner> planner_;
  std::optional<JobLayout> layout_;
  std::int64_t last_iteration_index_ = -1;
  std::int64_t epoch_ = 0;
  std::optional<PendingPlan> pending_;
  // An incident closed while mitigating: put the original configuration back at the next step.
  struct Revert {
    std::int64_t incident = -1;
    std::optional<bool> changed;  // known from the planner; otherwise from the layout in force
    std::vector<int> to;          // the planner's original allocation; empty: the layout's initial one
  };
  std::optional<Revert> revert_;
  std::set<std::string> warned_;
};

}  // namespace greyhound::master
