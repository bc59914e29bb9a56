// greyhound-master for one job: reads the job's event stream from its persisted cursor, applies the events
// to the IncidentTracker, and commits the new state, the changed incident and the master's own events in
// one MULTI/EXEC, so that a restart (of the master or of Redis) neither loses nor repeats an event. Keeps a
// JSON-lines event log. Malformed values in Redis are logged once per kind and skipped.
//
// On an incident it localises the culprit without pausing the job: it asks every agent for a profiling
// window (command "profile"), collects the ranks' "profile" events and runs the Localiser ("localised"
// event). With --mitigate it then drives the Planner: once per iteration of the job (the agents' iteration
// keys), ski rental decides; plans are published versioned ("plan", "plan:<epoch>"), their
// acknowledgements awaited with a deadline ("plan_applied"; "plan_rejected" when a rank answers unsupported
// or rejected; "plan_timeout"), and the job re-profiled while a remedy is in force, to tell when the
// fail-slow is gone. Profiling and planning state lives in memory: a master restarted mid-incident profiles
// again and plans afresh from the configuration in force.
#pragma once

#include <chrono>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "common/redis_client.h"
#include "daemon/incident_tracker.h"
#include "daemon/localiser.h"
#include "daemon/planner.h"

namespace greyhound::master {

struct MasterConfig {
  std::string job;
  RedisEndpoint redis;
  std::string event_log;  // empty: none
  int batch = 256;
  bool mitigate = false;          // drive the planner and publish plans
  double profile_s = 3.0;         // length of a profiling window
  double profile_grace_s = 4.0;   // wait this much after the window for the ranks' reports
  double reprofile_s = 6.0;       // while a remedy is in force, profile again this often
  double ack_timeout_s = 20.0;    // all ranks must acknowledge a plan within this
  double baseline_after_s = 10.0; // healthy this long (since start or the last incident): take a baseline
  double baseline_every_s = 600.0;  // and refresh it this often while healthy (0: never profile while healthy)
  PlannerConfig planner;
};

class Master {
 public:
  explicit Master(MasterConfig config);

  // One poll of the stream; returns the number of events applied.
  int tick();

  bool loaded() const { return tracker_.has_value(); }
  const MasterState* state() const { return tracker_ ? &tracker_->state() : nullptr; }

 private:
  using Clock = std::chrono::steady_clock;

  bool load();
  int read_events(std::vector<Event>& applied);  // the stream-cursor commit; appends what it applied
  double job_now_s();
  void publish_plan(Plan plan);
  void log_line(const nlohmann::json& j);
  void warn_once(const std::string& kind, const std::string& message);
  // Appends master events (and persists a changed incident/state) outside the stream-cursor commit.
  bool publish(const Decision& d);
  bool publish_event(const Event& e);

  void start_profiling(const std::string& why, bool baseline = false);
  void finish_profiling();
  void drive_planner();
  void check_acks();
  std::optional<JobLayout> read_layout();
  std::vector<GroupMembers> read_groups();

  MasterConfig cfg_;
  RedisClient redis_;
  std::optional<IncidentTracker> tracker_;
  std::uint64_t loaded_at_reconnects_ = ~0ull;
  std::ofstream log_;
  std::set<std::string> warned_;

  // Profiling in progress.
  struct Profiling {
    std::string id;
    bool baseline = false;  // a healthy reference, not a localisation
    Clock::time_point deadline;
    std::set<int> expected;
    std::map<int, ProfileView> got;
  };
  std::optional<Profiling> profiling_;
  int profiles_requested_ = 0;
  // Tells this master's profile requests from those of an earlier run of it (whose agents may still be
  // answering): the start time, base 36.
  std::string run_tag_;
  // After (re)loading the state with an incident open and nothing known of it: profile again.
  bool resume_open_incident_ = false;
  Clock::time_point last_profile_{};
  std::optional<GroupBaseline> baseline_;
  Clock::time_point healthy_since_ = Clock::now();
  Clock::time_point baseline_at_{};
  double baseline_end_t_s_ = 0;  // job time at the end of its window

  // Planning of the open incident (--mitigate).
  std::optional<Planner> planner_;
  std::optional<JobLayout> layout_;  // with the allocation in force
  std::int64_t last_iteration_index_ = -1;
  int iteration_rank_ = -1;          // whose iteration key paces the planner
  std::int64_t epoch_ = 0;           // last plan epoch published
  struct PendingPlan {
    Plan plan;
    Clock::time_point deadline;
  };
  std::optional<PendingPlan> pending_;
};

}  // namespace greyhound::master
