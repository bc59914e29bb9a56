// The thin driver of one job's Controller on the master's loop: it owns the job's clock (one read of the
// pacing rank's iteration time per step gives job time; daemon/pace.h chooses the rank), does every read and
// write through the job store, and carries the controller's intents out. A malformed value in Redis is logged once per kind and skipped;
// Redis unavailable makes a step a no-op (the controller reloads after a reconnect).
#pragma once

#include <cstdint>
#include <fstream>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "daemon/controller.h"
#include "daemon/job_clock.h"
#include "daemon/pace.h"
#include "store/job_store.h"

namespace greyhound::master {

// The master's JSON-lines event log (one file for every job; each line names its job). Empty path: none.
class EventLog {
 public:
  explicit EventLog(const std::string& path);
  void write(nlohmann::json line);

 private:
  std::ofstream out_;
};

class JobDriver {
 public:
  JobDriver(RedisClient& client, std::string job, ControllerConfig config, std::string run_tag, EventLog& log,
            int batch);

  // One step: read new events, commit and adopt them, read what the controller needs, carry out its
  // intents. Returns the number of stream entries consumed (0: nothing new, or Redis unavailable).
  int tick();

  const std::string& job() const { return store_.job(); }
  const Controller& controller() const { return ctl_; }
  // True when some agent of the job has a live heartbeat (read now).
  bool agents_alive();
  // True when a master holds the job's plan lease (read now; unknown counts as held).
  bool plan_lease_held();

  // --ha: leads the job at `epoch` (store::JobStore::take_job: every write fenced from now on) and, when
  // that is new, says so with a `leader` event. 0 when it leads the job now, else the newer epoch that does.
  Result<std::int64_t> lead(std::int64_t epoch, const std::string& master_id);
  std::int64_t epoch() const { return store_.fence(); }
  // The newer epoch that fenced this driver's last write (0: none): another master, or a value planted in the
  // job's leader key, leads the job while this one thinks it does.
  std::int64_t fenced_by() const { return store_.fenced_by(); }
  std::uint64_t leader_values_taken_over() const { return store_.leader_values_taken_over(); }

 private:
  bool load(const Now& now);
  bool record_missed_plans(std::int64_t recorded, const Result<std::optional<Plan>>& latest, const Now& now);
  Now now(const std::optional<IterationUpdate>& pace);
  // Renews the plan lease when due. True when it had lapsed since the last renewal (the job may have
  // reverted its remedy meanwhile: the state is loaded again).
  bool renew_plan_lease(const Now& now);
  // The pacing rank's newest iteration (daemon/pace.h); when it is stale, a fresher rank's, which paces the
  // job from then on (searched at most once a second, backing off to 30 s while none is found).
  // Unavailable: Redis is.
  Result<std::optional<IterationUpdate>> read_pace();
  JobInputs read_inputs(const Needs& needs, std::optional<IterationUpdate> pace);
  // The job's registered ranks: those below the layout's world when the job published one (at a cost that
  // follows the world, not the ranks set: a set planted with 200,000 members costs nothing more), else the
  // set's members that are ranks (up to the set reader's bound).
  Result<std::vector<int>> registered_ranks();
  void carry_out(Intents intents, const Now& now);
  template <class T>
  void write_answer(std::optional<T>& fresh, std::optional<T>& unsent, Status (store::JobStore::*write)(const T&),
                    const char* what);
  void log_emitted(const std::vector<Event>& events, std::int64_t unix_ms);
  // The stream trimmed past the cursor (its oldest entry newer than it): an error in the log and the
  // state's event_gaps.
  void check_for_gap();
  void warn_once(const std::string& kind, const std::string& message);

  RedisClient& client_;
  store::JobStore store_;
  double plan_lease_s_;       // ControllerConfig::plan_lease_s
  std::string lease_holder_;  // this run's tag, in the plan lease's value
  Controller ctl_;
  JobClock clock_;  // the job's time (now())
  int pace_rank_ = 0;                 // whose iterations pace the job (daemon/pace.h)
  PaceSearch pace_search_;            // when a stale pace is searched for
  EventLog& log_;
  int batch_;
  std::uint64_t loaded_at_reconnects_ = ~0ull;
  std::set<std::string> warned_;
  store::MasterCommit unsent_;  // the master's events and incidents a failed commit left to send
  bool unsent_state_ = false;
  std::optional<PreflightReport> unsent_preflight_;  // the pre-flight's answer a failed write left to write
  std::optional<OperatorPlanReport> unsent_operator_plan_;  // ... and the answer to an operator's plan
  double next_settings_s_ = 0;  // when to read the operator's settings again (once a second)
  double next_lease_s_ = 0;     // when to renew the plan lease (monotonic seconds)
  double lease_renewed_s_ = -1; // when it was last renewed (-1: not yet)
  bool check_gap_ = false;      // (re)loaded: look for a gap at the next read that returns entries
};

}  // namespace greyhound::master
