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
//  - Early profiles: while healthy, iterations of the pacing rank turning slow start a window before any
//    agent decides a slowdown; its reports are held, and the incident that follows (its onset before the
//    window) is localised from them at once (ControllerConfig::suspect_iterations).
//  - Healthy baselines: a reference profile once healthy for baseline_after_s and every baseline_every_s;
//    one whose window overlapped a slowdown's onset is discarded.
//  - Fail-slows (daemon/fail_slows.h): each localisation is matched with the job's open fail-slows; each
//    has its own evidence, ski-rental account (kept in the master's state, so across restarts), remedy and
//    end. While any is open (or an incident is), the job is profiled again every few iterations; one whose
//    evidence is gone ends, whatever else is still slow.
//  - Mitigation (mitigate): each open fail-slow's ski rental is fed once per iteration of the job and says
//    which rung it wants. The remedies in force follow from the set that remains: the micro-batch split is
//    solved for the fail-slows that want S2 (again whenever that set changes), the placement for those that
//    want S3; with none left, back to the original. Plans are published with growing epochs and their
//    predicted iteration time, and acknowledged by every rank of the layout (deadline ack_timeout_s).
//  - S3 and S4 are charged what they cost on this job: the job's own estimates in its layout
//    (cost_estimates_s) replace the configured overheads, and once a placement switch is acknowledged with
//    its apply_s (the slowest rank's), that is S3's overhead in every account of the job from then on (the
//    measured switch is not kept across master restarts; the estimates come back with the layout).
//  - Every remedy is checked: once in force, `check_iterations` iterations (after one to settle) are
//    compared with those before it; one that does not make iterations at least pay_margin faster is
//    reverted to the configuration it replaced and not tried again for those fail-slows.
//  - The incident closes on the agents' recovery reports, or on the master's own evidence: no fail-slow
//    left and the configuration back to the original after a remedy.
//  - Windows are sized in the job's iterations once its pace is known: a profile lasts profile_iterations,
//    and the next one starts reprofile_iterations after the last one ended.
//  - An S4 plan in force stops the job for a checkpoint-restart without some nodes: everything measured on
//    the old job goes (its fail-slows end, the incident closes, baseline, pace and planner are forgotten);
//    nothing is profiled until the restarted job publishes its layout (job_restart), which starts a new
//    planner. Profiles expect the ranks of the layout only (the registry still lists the old job's).
//    An S3 plan applied by a job that places its roles only at start (layout s3_by_restart) is the same
//    restart, in the same shape: the job comes back with the plan's placement as its initial one.
//  - An operator's requests (docs/operations.md, docs/validation.md): a pre-flight is one pause over every rank
//    and group once the job's ranks and groups are known; a manual plan is checked against the layout and
//    published, and while it waits or stands no remedy of greyhound's is proposed or checked.
//  - A controller loaded with fail-slows (a restarted master) continues them; one loaded with an incident
//    open but no fail-slows (a state from before fail-slows were tracked) localises it again first, and
//    its fail-slows adopt the split the layout shows in force.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "daemon/fail_slows.h"
#include "daemon/incident_tracker.h"
#include "daemon/hang.h"
#include "daemon/localiser.h"
#include "daemon/planner.h"
#include "daemon/validator.h"
#include "store/messages.h"

namespace greyhound::master {

// When the master validates a localisation with a pause (docs/validation.md).
//  never: not at all; always: every localisation that opens a fail-slow;
//  auto: a localisation that opens a fail-slow of unknown cause (ambiguous), and before the first remedy
//        above S2 (S3, S4) of a fail-slow not validated yet.
enum class ValidateMode { kNever, kAuto, kAlways };
const char* validate_mode_name(ValidateMode m);
std::optional<ValidateMode> parse_validate_mode(std::string_view s);

// A pre-flight waits this long for the job's first iteration marks once its ranks are there, and tries this
// many pauses (one aborted, e.g. by a rank that missed the cut while warming up, is tried again).
inline constexpr double kPreflightMarkWaitS = 120.0;
inline constexpr int kPreflightAttempts = 3;

// S2 is declined for a fail-slow (for the rest of it) once this many localisations of the configuration in
// force, from distinct profiles, found no split better than what runs; fewer leave it wanting S2.
inline constexpr int kS2NothingBetterToDecline = 3;

struct ControllerConfig {
  bool mitigate = false;                       // drive the planner and publish plans
  ValidateMode validate = ValidateMode::kNever;
  PauseSettings pause;                         // how a validation pause tests
  ValidatorConfig validator;
  double profile_s = kDefaultProfileWindowS;   // a profiling window, until the job's iteration time is known
  int profile_iterations = 3;                  // ... then this many iterations (within 1..30 s)
  double profile_grace_s = 4.0;                // wait this much after the window for the ranks' reports
  int reprofile_iterations = 1;                // while fail-slows or an incident are open: profile again this many
                                               // iterations after the last window ended
  double reprofile_s = 6.0;                    // ... or this many seconds while the iteration time is unknown
  double ack_timeout_s = 20.0;                 // all ranks must acknowledge a plan within this
  int check_iterations = 3;                    // a remedy in force is judged on this many iterations
  double pay_margin = 0.02;                    // ... and pays when they are this much faster than before it
  double baseline_after_s = 10.0;              // healthy this long (since start or the last incident): baseline
  double baseline_every_s = 600.0;             // and refresh it this often while healthy (0: never while healthy)
  // Early profile: while healthy, once the pacing rank's last suspect_iterations iterations were each at least
  // suspect_ratio times the median of those before them, the job is profiled at once, before any agent has
  // decided a slowdown (which takes 4-6 iterations). The profile is held; an incident that opens within
  // suspect_hold_iterations of its end, with an onset no later than its start, is localised from it at once
  // instead of after a window of its own. Nothing is reported for a suspicion no incident follows. One at
  // most every suspect_gap_iterations. 0: off.
  int suspect_iterations = 2;
  double suspect_ratio = 1.10;
  int suspect_hold_iterations = 20;
  int suspect_gap_iterations = 16;
  FailSlowRules fail_slows;
  PlannerConfig planner;
  // A link fail-slow that no group crosses any more (S3 moved the traffic off it) is probed with a short
  // pause (a transfer each way over it, against other pairs of nodes) this many iterations after it was
  // last observed, then twice as long after each probe that finds it still slow, up to 16 times as long;
  // one that a probe finds at its peers' level has ended. 0: never probed (it stays open).
  int probe_iterations = 16;
  // The plan lease (docs/redis-keys.md): the driver renews it every quarter of this; a job that runs another
  // configuration than its original one reverts to it by itself once no master renewed the lease this long.
  double plan_lease_s = 30.0;
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
  std::map<std::uint64_t, GroupTraffic> traffic;  // read with the groups
  std::optional<JobLayout> layout;
  std::vector<PlanAck> acks;
  bool acks_read = false;  // the acknowledgements could be read (a failed read is no silence of the job)
  std::optional<IterationUpdate> pace;  // the pacing rank's latest iteration (daemon/pace.h), when the driver has one
};

// The group registry as the localiser compares it: complete groups, with what each moves per iteration, and
// NCCL's ring order over those a member's graph dump gave it for (validate::nccl_ring_order; a dump that does
// not describe its group is left out, with why in `notes` when given: "group <id>: <why>").
std::vector<GroupMembers> comparable_groups(const std::vector<GroupRecord>& records,
                                            std::vector<std::string>* notes = nullptr);
// What each group's calls move (for the bus bandwidth in /metrics).
std::map<std::uint64_t, GroupTraffic> group_traffic(const std::vector<GroupRecord>& records);

// What a controller counted since it was made (the master's /metrics; daemon/metrics.h). In memory: a
// restarted master counts from zero, as Prometheus counters may.
struct Latency {
  double sum_s = 0;
  std::int64_t count = 0;
  void add(double s) {
    if (s >= 0 && s < 1e9) {
      sum_s += s;
      ++count;
    }
  }
};
struct ControllerStats {
  std::int64_t detections = 0;                          // incidents opened
  Latency detection;                                    // onset -> detected
  Latency localisation;                                 // detected -> first localisation of the incident
  Latency remedy;                                       // a fail-slow localised -> its first remedy in force
  std::map<std::string, std::int64_t> localisations;    // by cause
  std::map<std::string, std::int64_t> fail_slows;       // opened, by cause
  std::map<std::pair<std::string, std::string>, std::int64_t> plans;  // (strategy, applied|rejected|timeout)
  std::int64_t probes = 0, validations = 0;             // pauses (link probes, validations) finished
  std::int64_t early_profiles = 0;                      // early profiles started (ControllerConfig::suspect_iterations)
  std::int64_t early_localisations = 0;                 // ... and incidents localised from one
  std::int64_t unsteady_windows = 0;                    // profile windows held back: the job's pace moved in them
  std::map<int, std::int64_t> fail_stops;               // agents' fail_stop reports since the master started, by rank
  std::int64_t hangs = 0;                               // hangs named since the master started
  std::vector<GroupTiming> groups;                      // the latest profile that timed the groups
};

struct ProfileRequest {
  Command command;         // "profile", with its id and window
  std::vector<int> nodes;  // every agent of the job
};

struct Intents {
  std::vector<Event> events;         // to append, with the state, in one transaction
  std::vector<Incident> incidents;   // changed incidents, newest snapshot of each (store::upsert_incident), same transaction
  bool persist_state = false;        // the state changed (phase): commit it even without events
  std::optional<ProfileRequest> profile;
  std::vector<ProfileRequest> commands;  // other commands to every agent (a validation pause's), in order
  std::optional<Plan> plan;          // to publish (epoch assigned); then plan_published() or plan_failed()
  std::optional<PreflightReport> preflight;  // the pre-flight's answer to write (key preflight:result)
  std::optional<OperatorPlanReport> operator_plan;  // the answer to an operator's plan (operator_plan:result)
  bool empty() const {
    return events.empty() && incidents.empty() && !persist_state && !profile && !plan && commands.empty() &&
           !preflight && !operator_plan;
  }
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
  // The driver found the stream trimmed past the cursor (entries may have been lost unread): counted in the
  // state (event_gaps) with the next apply's commit.
  void events_lost() { ++tracker_->mutable_state().event_gaps; }
  void adopt(const Now& now);
  void discard();

  const std::vector<FailSlow>& fail_slows() const { return tracker_->state().fail_slows; }
  const ControllerStats& stats() const { return stats_; }
  // What runs (the planner's view; nullopt before the job's layout is known or without --mitigate).
  const Planner* planner() const { return planner_ ? &*planner_ : nullptr; }
  // The pacing rank's latest iteration time (0: none yet).
  double iteration_s() const { return last_iteration_s_; }
  // An operator's run-time settings (greyhoundctl set): the profile windows, the configured overheads and
  // the pause deadline follow them at once; an unset one goes back to this master's flag.
  void apply_settings(const JobSettings& settings);
  const JobSettings& settings() const { return settings_; }

  // An operator's pre-flight request (greyhoundctl preflight), as the driver read it; `answered`: the store
  // holds a final answer to it already (an earlier run of this master answered it). A request seen before
  // is ignored; a new one is served as soon as the job's ranks, groups and first iterations are known: one
  // pause tests every GPU and every group's ring (docs/validation.md, "Pre-flight").
  Intents offer_preflight(const PreflightRequest& req, bool answered, const Now& now);
  // The request is gone from the store (its command gave up): one not running yet is forgotten.
  void preflight_withdrawn();
  bool preflight_pending() const { return preflight_.has_value(); }
  // An operator's manual plan (greyhoundctl plan), as the driver reads it once a second (nullopt: none in
  // the store); `answer`: the store's answer to it ("published", "refused", "released"; "" none yet). A new
  // apply or revert is checked against the job's layout and published at the next step (docs/operations.md);
  // while one waits or stands the master proposes no remedy of its own; a refused one changes nothing; a
  // release (or the request gone) gives the configuration back to greyhound's remedies.
  Intents offer_operator_plan(const std::optional<OperatorPlanRequest>& req, const std::string& answer, const Now& now);
  bool operator_hold() const { return operator_hold_ || operator_req_.has_value(); }
  bool current_localisation() const { return last_loc_ && last_loc_profile_s_ > last_change_s_; }

  Needs needs(const Now& now) const;
  // One step after the events: profiling windows, baselines, acknowledgements, the planner.
  Intents step(const Now& now, const JobInputs& in);
  // The driver's report on a plan it was asked to publish: the plan event to commit (published), or the
  // epoch is given back (failed).
  Intents plan_published(const Plan& plan, const Now& now);
  void plan_failed(const Plan& plan);
  // The plan's epoch was taken (the job's own revert, another master): the next plan goes after it, whatever
  // the job's plan key says when the state is loaded again (a malformed one names no epoch: the same epoch
  // was proposed again for ever).
  void plan_epoch_taken(const Plan& plan) { epoch_ = std::max(epoch_, plan.epoch); }
  // Plans an earlier master published and died before recording (oldest first): their `plan` events, marked
  // "recorded_late" and stamped when each was published, to commit now. `recorded`: the newest epoch whose
  // event is committed or about to be (the state's plans_recorded rises to it; plans up to it are skipped).
  Intents record_plans_late(const std::vector<Plan>& plans, std::int64_t recorded, const Now& now);

  // Profiling and planning state, for tests and status.
  bool profiling() const { return profiling_.has_value(); }
  bool has_baseline() const { return baseline_.has_value(); }
  bool planning() const { return planner_.has_value(); }
  bool checking() const { return check_.has_value(); }
  bool restarting() const { return restarting_.has_value(); }
  bool validating() const { return validating_.has_value(); }
  // Ranks of the job stand still in a pause: one has trapped and the pause has not finished (not every rank
  // that trapped has resumed). The master's loop steps faster meanwhile.
  bool pause_standing() const { return validating_ && validating_->any_trapped(); }
  std::optional<std::int64_t> plan_in_flight() const {
    return pending_ ? std::optional<std::int64_t>(pending_->plan.epoch) : std::nullopt;
  }

 private:
  struct Profiling {
    std::string id;
    bool baseline = false;  // a healthy reference, not a localisation
    bool suspect = false;   // an early profile (ControllerConfig::suspect_iterations): no incident asked for it
    double started_s = 0;      // mono time the window started
    double started_job_s = 0;  // ... and job time
    double deadline_s = 0;
    std::set<int> expected;
    std::map<int, ProfileView> got;
  };
  // An early profile that completed before any incident: what it measured, kept for the incident it may open.
  struct HeldProfile {
    Profiling profile;
    std::vector<GroupMembers> groups;
    std::map<std::uint64_t, GroupTraffic> traffic;
    std::optional<JobLayout> layout;
    double ended_s = 0;  // mono time its reports were in
  };
  // A plan in flight, and what it is for.
  // A remedy in force being measured; or the undoing of one that seemed not to pay (an undo check: the
  // fault may have changed meanwhile, so the configuration it replaced is measured again).
  struct Check {
    Plan plan;                          // the remedy
    std::set<std::int64_t> fail_slows;
    JobConfig replaced;
    double before_s = 0;                // remedy check: the iterations before it; undo check: those under it
    bool undo = false;
    int settle = 1;                     // iterations to skip (the switch itself)
    std::vector<double> measured_s;
  };
  struct PendingPlan {
    Plan plan;
    double deadline_s = 0;
    std::set<std::int64_t> fail_slows;  // those it was made for (a remedy)
    bool remedy = false;                // a remedy to check once in force
    JobConfig replaced;                 // the configuration it replaces
    std::optional<Check> undo;          // an undo: the check to run once in force
    std::string operator_id;            // an operator's plan: its request
  };
  // A fail-slow's ski rental.
  struct Account {
    std::optional<mitigate::SkiRental> ski;
    // The localisations (when their profiles began) on which S2 found no split better than what runs:
    // kS2NothingBetterToDecline of them decline S2 for the fail-slow (one window's replica times on a loaded
    // machine may not show a slow replica that the next window does).
    int s2_nothing_better = 0;
    double s2_nothing_better_profile_s = -1e18;
  };

  double window_s() const;
  double reprofile_gap_s() const;
  bool due_baseline(const Now& now) const;
  bool due_reprofile(const Now& now) const;
  bool probe_due(const Now& now) const;
  double typical_iteration_s() const;
  bool profiling_complete(const Now& now) const;
  void react(const Event& e, const Now& now);
  void start_profiling(const std::string& why, bool baseline, const JobInputs& in, const Now& now, Intents& out,
                       bool suspect = false);
  void finish_profiling(const JobInputs& in, const Now& now, Intents& out);
  // Localises from a finished (or held) profile's reports, with the groups, traffic and layout read for it.
  void localise_profile(const Profiling& p, const std::vector<GroupMembers>& groups,
                        const std::map<std::uint64_t, GroupTraffic>& traffic, const std::optional<JobLayout>& layout,
                        const Now& now, Intents& out);
  // `ahead`: readings still to come (needs() asks for the registry one reading before the streak is complete,
  // so that the step whose reading completes it can start the profile).
  bool due_suspect(const Now& now, int ahead = 0) const;
  // The held early profile, when the open incident may be localised from it (nullptr: none, or stale).
  const HeldProfile* usable_held(const Now& now) const;
  bool held_stale(const Now& now) const;  // the held early profile ended more than suspect_hold_iterations ago
  // Returns the fail-slows it opened.
  // Whether a window is held back: its pace moved (Localisation::unsteady), the first such in a row.
  bool holds_back(const Localisation& loc) const { return loc.unsteady() && unsteady_in_row_ == 0; }
  // `held_back`: holds_back(loc) before the window was counted: it opens nothing.
  std::vector<FailSlow> track_fail_slows(const Localisation& loc, bool held_back, const Now& now, Intents& out);
  // A validation pause of `loc` for `fail_slows` (false: it cannot start now, e.g. the job marks no iterations).
  bool start_validation(const Localisation& loc, std::set<std::int64_t> fail_slows, const std::string& why,
                        const Now& now, Intents& out);
  void step_validation(const Now& now, Intents& out);
  // auto: the fail-slows of `ids` not validated yet are validated first (true: wait for it).
  bool validate_first(const std::set<std::int64_t>& ids, const char* remedy, const Now& now, Intents& out);
  // A pause that runs `plan` (a validation, or a link probe), its cut from the job's latest mark.
  // `at`: the cut itself (a pre-flight's first iteration, before the job's pace is known).
  void launch_pause(const Localisation& loc, ValidationPlan plan, const std::string& id, const std::string& why,
                    const Now& now, Intents& out, std::optional<std::int64_t> at = std::nullopt);
  // Link fail-slows nothing crosses: when to probe them, the probe, and what it says.
  void schedule_probes(const Localisation& loc, const Now& now);
  void maybe_probe(const Now& now, Intents& out);
  void probe_judged(std::int64_t id, const ValidatedReport& v, const Now& now, Intents& out);
  void open_account(const FailSlow& f);
  void sync_accounts();
  void refresh_costs();
  void charge_confirmation();
  void check_hangs(const JobInputs& in, const Now& now, Intents& out);
  void maybe_start_preflight(const JobInputs& in, const Now& now, Intents& out);
  void serve_operator_plan(const JobInputs& in, const Now& now, Intents& out);
  void set_operator_hold(bool hold);
  void preflight_finished(const ValidatedReport& v, bool told_to_exit, const Now& now, Intents& out);
  void finish_preflight(PreflightReport r, const Now& now, Intents& out);
  void react_to_rank_health(const Event& e, const Now& now);
  double expected_pause_s() const;
  void check_acks(const JobInputs& in, const Now& now, Intents& out);
  void observe_iterations(const JobInputs& in, const Now& now, Intents& out);
  void judge(const Now& now, Intents& out);
  void reconcile(const Now& now, Intents& out);
  bool reconcile_split(const std::set<std::int64_t>& want2, std::int64_t incident, Intents& out);
  void decline_all(const std::set<std::int64_t>& ids, Strategy rung, Intents& out);
  void maybe_close_incident(const Now& now, Intents& out);
  bool restart_plan(const Plan& plan) const;
  void job_restarting(const std::string& why, std::int64_t epoch, const Now& now, Intents& out,
                      Strategy strategy = Strategy::kS4);
  void job_restarted(const JobLayout& layout, const Now& now, Intents& out);
  Event master_event(const char* type, const Now& now) const;
  Event plan_event(const Plan& plan, const Now& now) const;  // the `plan` event of a published plan
  void take(Decision d, const Now& now, Intents& out);
  void propose_plan(Plan plan, std::set<std::int64_t> fail_slows, bool remedy, Intents& out);
  void warn_once(const std::string& kind, const std::string& message);
  std::vector<FailSlow>& open_fail_slows() { return tracker_->mutable_state().fail_slows; }
  std::set<std::int64_t> wanting(Strategy s) const;
  double healthy_s() const;

  ControllerConfig cfg_;
  ControllerConfig base_;   // the master's flags, before any operator's setting
  JobSettings settings_;    // the operator's, in force
  std::string run_tag_;
  std::optional<IncidentTracker> tracker_;
  std::optional<IncidentTracker> proposed_;  // applied, not yet committed
  std::vector<Event> proposed_events_;       // what the proposal applied and emitted, to react to on adopt
  bool ever_loaded_ = false;
  std::string earlier_run_until_ = "0-0";     // master events up to this stream id are an earlier run's

  std::optional<Profiling> profiling_;
  int profiles_requested_ = 0;
  bool resume_open_incident_ = false;
  double last_profile_s_ = -1e18;     // when the last window started
  double last_profile_end_s_ = -1e18; // ... and when it ended (reports in)
  double last_change_s_ = -1e18;      // when the job last acknowledged a change of configuration
  std::optional<GroupBaseline> baseline_;
  double healthy_since_s_ = 0;
  double baseline_at_s_ = -1e18;
  double baseline_end_t_s_ = 0;  // job time at the end of its window
  bool want_profile_ = false;    // an incident asked for localisation: start at the next step
  std::optional<HeldProfile> held_;   // an early profile awaiting its incident
  int slow_streak_ = 0;               // iterations in a row at least suspect_ratio above the median before them
  double last_suspect_s_ = -1e18;     // when the last early profile started
  std::string want_profile_why_;

  std::map<std::int64_t, Account> accounts_;  // per open fail-slow
  // The latest localisation of one configuration that measured iterations (what S2 and S3 are solved on),
  // and when its profile began. Once a change of configuration came after that (not current_localisation),
  // its replica times describe a configuration that no longer runs: a remedy found on it is still proposed
  // (and checked against measurement), but finding none declines nothing until a profile of the new one.
  std::optional<Localisation> last_loc_;
  double last_loc_profile_s_ = -1e18;
  int unsteady_in_row_ = 0;                    // measured profile windows in a row whose pace moved
  double previous_loc_t_s_ = -1e18;            // job time of the last localisation fail-slows were tracked on
  bool settled_ = true;        // fail-slows are known (false: an incident loaded without them awaits a profile)
  bool unmeasured_ = false;    // unsettled, and the last profile measured no iteration: profile again
  int unmeasured_in_row_ = 0;  // such profiles in a row (only the first is repeated at the job's pace)
  bool adopt_split_ = false;   // ... and the split in force becomes theirs
  std::set<std::int64_t> split_for_, placement_for_;  // the fail-slows the split / placement in force serve
  std::set<std::int64_t> s4_sent_;
  std::optional<JobLayout> restarting_;  // an S4 restart is under way: the layout before it
  std::int64_t restarting_epoch_ = 0;    // ... and its plan (0: seen from the layout alone)
  Strategy restarting_strategy_ = Strategy::kS4;  // ... S4, or S3 applied by a restart (s3_by_restart)
  bool restart_unsettled_ = false;       // a restart plan (S4, S3 by restart) timed out: the job may restart all the same
  double measured_s3_s_ = 0;             // the latest placement switch the job acknowledged (apply_s); 0: none
  std::set<std::int64_t> trusted_;  // fail-slows whose remedy an undo check showed paying: not checked again
  // Remedies measured not paying (their undo confirmed it) in the incident: the configuration they
  // replaced and what they changed. The same change from the same configuration is not proposed again in
  // that incident, whichever fail-slows want it (a link that comes and goes opens new ones).
  struct Refuted {
    std::int64_t incident = -1;
    JobConfig from;
    std::vector<int> microbatches;
    nlohmann::json placement;
    std::int64_t epoch = 0;
  };
  std::vector<Refuted> refuted_;
  const Refuted* refuted(const Plan& p) const;
  bool mitigated_ = false;     // a remedy was applied during the open incident

  // Validation (docs/validation.md).
  std::optional<ValidationRun> validating_;
  std::set<std::int64_t> validating_for_;      // the fail-slows the pause in progress validates
  std::set<std::int64_t> validated_;           // fail-slows validated (whatever the verdict) or given up on
  std::set<std::int64_t> not_confirmed_;       // ... whose validation found nothing slow: no S3/S4 for them
  std::set<std::string> validated_keys_;       // incident:cause:rank:link of the fail-slows validated
  int validations_ = 0;
  // Hangs (daemon/hang.h): the agents' stall reports by rank, since when one is held, when the groups are
  // read again for them, and the calls already named.
  std::map<int, RankStall> stalls_;
  double stalls_since_s_ = -1;
  double next_hang_check_s_ = 0;
  std::set<std::pair<std::uint64_t, std::uint64_t>> hangs_named_;  // (group, call number)
  // Pre-flight: the request being served, its answer so far, when the job's ranks and groups were last seen
  // to change (they must hold still a second before the pause is planned), and the pauses tried.
  struct Preflight {
    PreflightRequest request;
    PreflightReport report;
    std::vector<int> ranks;
    std::vector<std::uint64_t> groups;
    double stable_since_s = -1;
    double waiting_since_s = 0;
    int attempts = 0;
    bool running = false;
  };
  std::optional<Preflight> preflight_;
  // An operator's plan: the request to serve, the latest one taken, and whether one published holds the
  // configuration.
  std::optional<OperatorPlanRequest> operator_req_;
  std::string operator_seen_;
  bool operator_hold_ = false;
  std::string preflight_seen_;       // the latest request taken (served or being served)
  int preflights_started_ = 0;
  std::vector<double> pauses_s_;   // the job's latest measured pauses (at most 5): what the next one may cost
  double pause_credit_s_ = 0;        // a pause that ended: taken off the next iteration the job reports
  std::int64_t paused_index_ = -1;   // that iteration (its index) ...
  double paused_index_s_ = 0;        // ... and its time without the pause
  struct Probe {
    double due_s = 0;          // mono time of the next probe
    int gap_iterations = 0;    // iterations until the one after
  };
  std::map<std::int64_t, Probe> probes_;  // link fail-slows no group crosses, by id
  std::int64_t probing_ = 0;              // the fail-slow the pause in progress probes (0: a validation)
  int probes_started_ = 0;
  std::vector<GroupMembers> last_groups_;      // the groups of the latest localisation
  std::vector<int> last_ranks_;                // the ranks it expected
  std::vector<int> last_agents_;               // the agents of the job when it was requested
  std::map<int, int> last_node_of_;            // each rank's node, from its profile reports
  std::optional<IterationUpdate> last_pace_;   // the latest iteration of the pacing rank (with the job's mark)

  std::optional<Planner> planner_;
  std::optional<JobLayout> layout_;
  bool layout_wanted_ = false;    // read the layout at the next step (the planner starts from it)
  std::int64_t last_iteration_index_ = -1;
  int last_iteration_rank_ = -1;  // whose index that is (each rank's agent counts its own)
  double last_iteration_s_ = 0;
  std::vector<double> recent_s_;  // the latest iteration times, newest last
  std::int64_t epoch_ = 0;
  std::optional<PendingPlan> pending_;
  std::optional<PendingPlan> pending_meta_;  // what the plan proposed in this step is for, until published
  std::optional<Check> check_;
  int unsaved_iterations_ = 0;
  std::set<std::string> warned_;
  ControllerStats stats_;
  std::int64_t localised_incident_ = -1;       // the incident whose first localisation was counted
  std::set<std::int64_t> remedied_;            // fail-slows whose first remedy in force was counted
};

}  // namespace greyhound::master
