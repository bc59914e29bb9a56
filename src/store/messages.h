// The JSON messages greyhound keeps in Redis (docs/redis-keys.md): one struct, one writer (to_json) and one
// validating reader (parse_*) per message, and per event detail that some component reads. Readers never
// trust what they read: the text is bounded first (store/bounded_json.h: size, nesting, string and member
// counts, finite numbers), then a field of the wrong type, a missing required field or a value out of range
// is rejected with a message naming the field; callers log it once and carry on. Pure: no I/O (the job store,
// store/job_store.h, moves these between processes).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "greyhound/result.h"
#include "greyhound/validate/pass_plan.h"
#include "greyhound/vocabulary.h"

namespace greyhound {

// Values larger than this are rejected before parsing (a planted huge string must not cost memory or time).
inline constexpr std::size_t kMaxMessageBytes = 1 << 20;
// A Redis stream id ("1700000000000-0").
bool valid_stream_id(const std::string& id);
// Stream order of two valid ids: < 0, 0, > 0.
int compare_stream_ids(const std::string& a, const std::string& b);

// The longest free text (a reason, an ack's detail) a reader accepts, and the check a writer of such a text
// makes first: "" when `text` is at most kMaxTextBytes of valid UTF-8, else what is wrong.
inline constexpr std::size_t kMaxTextBytes = 4096;
std::string text_error(std::string_view text);

// The largest rank, node or group size any reader accepts.
inline constexpr std::int64_t kMaxRank = 1 << 24;
// The largest count, id, epoch, index or time (ms) any reader accepts: room to add to it without overflow, and
// exact as a double. Writers refuse more too.
inline constexpr std::int64_t kMaxCount = std::int64_t{1} << 53;
// The newest plan epoch a master or a job counts on after, and the newest a job takes: half of kMaxCount,
// more plans than any job sees. A plan beyond it is planted or corrupt; counting on after it would leave no
// epoch readers take (or make every later plan of a master stale to the job).
inline constexpr std::int64_t kMaxContinuedEpoch = kMaxCount / 2;

// Event types of the job's event stream.
namespace event_type {
inline constexpr const char* kSlowdown = "slowdown";          // agent: a rank's iterations became slower
inline constexpr const char* kRecovery = "recovery";          // agent: ... faster again
inline constexpr const char* kPeriodChange = "period_change"; // agent: the op pattern changed (not a slowdown)
inline constexpr const char* kAgentStart = "agent_start";
inline constexpr const char* kAgentStop = "agent_stop";
inline constexpr const char* kCommandAck = "command_ack";
inline constexpr const char* kIncidentOpen = "incident_open";      // master
inline constexpr const char* kIncidentUpdate = "incident_update";  // master: compound / more severe
inline constexpr const char* kIncidentClose = "incident_close";    // master
inline constexpr const char* kProfile = "profile";                 // agent: device times of one rank
inline constexpr const char* kLocalised = "localised";             // master: culprit / suspect groups
inline constexpr const char* kBaseline = "baseline";               // master: a healthy reference profile
inline constexpr const char* kPlan = "plan";                       // master: a mitigation plan published
inline constexpr const char* kPlanApplied = "plan_applied";        // master: every rank acknowledged it
inline constexpr const char* kPlanTimeout = "plan_timeout";        // master: not all ranks did in time
inline constexpr const char* kPlanRejected = "plan_rejected";      // master: some rank could not apply it
inline constexpr const char* kFailSlowOpen = "fail_slow_open";     // master: a localised fail-slow, tracked on its own
inline constexpr const char* kFailSlowEnd = "fail_slow_end";       // master: its evidence is gone
inline constexpr const char* kRemedyCheck = "remedy_check";        // master: a remedy measured against its prediction
inline constexpr const char* kJobRestart = "job_restart";          // master: the job is back after an S4 restart
inline constexpr const char* kPause = "pause";                     // agent: a rank's state in a validation pause
inline constexpr const char* kLeader = "leader";                  // master: it leads this job now (--ha)
inline constexpr const char* kFailStop = "fail_stop";              // agent: a rank's process died (killed, crashed)
inline constexpr const char* kStall = "stall";                     // agent: a rank made no NCCL progress for too long
inline constexpr const char* kStallEnd = "stall_end";              // agent: ... and went on again
inline constexpr const char* kHang = "hang";                       // master: a collective some members never joined
inline constexpr const char* kValidated = "validated";             // master: what a validation pause measured
inline constexpr const char* kPreflight = "preflight";             // master: what a pre-flight check measured
}  // namespace event_type

struct Event {
  std::string type;
  double t_s = 0;                  // job time (seconds since the job's epoch)
  std::int64_t t_unix_ms = 0;      // wall clock, 0 when unknown
  std::string source;              // "agent:<node>" or "master"
  int rank = -1;                   // -1: not about one rank
  int node = -1;
  std::int64_t index = -1;         // onset iteration (rank's own numbering)
  std::int64_t detected_index = -1;
  double detected_t_s = -1;        // job time of the iteration whose arrival triggered the event
  double before_ms = 0, after_ms = 0, ratio = 0;
  std::int64_t incident = -1;
  nlohmann::json detail;           // object or null; written and read only through the detail structs below
};
nlohmann::json to_json(const Event& e);
std::optional<Event> parse_event(const std::string& text, std::string* error);
// The same, from JSON already bounded (a stream entry in a run report).
std::optional<Event> event_from_json(const nlohmann::json& j, std::string* error);

struct RankRegistration {
  int rank = -1;
  int local_rank = -1;
  int node = -1;
  std::string host;
  int pid = 0;
  int device = -1;
  std::string ring;  // ring file path on its node
  std::int64_t t_unix_ms = 0;
};
nlohmann::json to_json(const RankRegistration& r);
std::optional<RankRegistration> parse_rank_registration(const std::string& text, std::string* error);

struct AgentHeartbeat {
  int node = -1;
  std::string host;
  int pid = 0;
  std::int64_t t_unix_ms = 0;
  std::vector<int> ranks;
  std::uint64_t records_read = 0;
  std::uint64_t records_lost = 0;
  std::uint64_t events_dropped = 0;  // events that found the outgoing buffer full while Redis was away
  std::uint64_t redis_reconnects = 0;
  std::int64_t settings_version = 0;  // the operator's settings it applies (JobSettings::version; 0: none)
  bool detection_paused = false;      // ... and whether they pause detection
};
nlohmann::json to_json(const AgentHeartbeat& h);
std::optional<AgentHeartbeat> parse_agent_heartbeat(const std::string& text, std::string* error);

struct IterationUpdate {
  int rank = -1;
  std::int64_t index = 0;
  double t_s = 0;       // end of the iteration, job time
  double iter_ms = 0;
  int period = 0;       // NCCL calls per iteration
  std::int64_t t_unix_ms = 0;
  std::int64_t mark = -1;  // the framework's iteration in progress when it was read (its marks); -1: none
};
nlohmann::json to_json(const IterationUpdate& u);
std::optional<IterationUpdate> parse_iteration_update(const std::string& text, std::string* error);

// A profiling window: the one default (the master asks for it, an agent assumes it when a command names none)
// and the range an agent accepts.
inline constexpr double kDefaultProfileWindowS = 3.0;
inline constexpr double kMinProfileWindowS = 0.2;
inline constexpr double kMaxProfileWindowS = 120.0;

// A validation pause (docs/validation.md): the cut, the deadline and what each rank tests at it.
inline constexpr double kDefaultPauseDeadlineS = 30.0;
inline constexpr double kMaxPauseDeadlineS = 600.0;
inline constexpr int kMaxPauseTransfers = 32;  // per rank (the ring's PauseControl holds as many)
inline constexpr int kMaxPauseSizes = 4;
struct PauseTransferSpec {
  std::uint64_t group = 0;
  int pass = 0;
  int peer = -1;      // the other end, as a rank of the group
  bool send = false;  // this rank sends (else receives)
  bool operator==(const PauseTransferSpec&) const = default;
};
struct PauseRankTests {
  bool gemm = false;
  std::vector<PauseTransferSpec> transfers;  // in the order to run them
  bool operator==(const PauseRankTests&) const = default;
};
struct PauseSpec {
  std::int64_t at_iteration = 0;              // the cut: the first NCCL call of this framework iteration
  double deadline_s = kDefaultPauseDeadlineS; // every rank resumes by itself this long after its agent armed it
  int gemm_n = 0;                             // n x n x n GEMMs (0: none)
  int repeats = 3;
  std::vector<std::uint64_t> sizes;           // P2P bytes
  std::map<int, PauseRankTests> ranks;        // every rank of the job (those with nothing to test pause too)
  bool operator==(const PauseSpec&) const = default;
};

struct Command {
  std::string cmd;  // "ping", "resync", "profile", "pause", "pause_run", "pause_resume", "pause_abort", "pause_exit"
  std::string id;   // pause_*: the pause's id
  double duration_s = kDefaultProfileWindowS;  // "profile": args.duration_s, clamped to the accepted range
  std::optional<PauseSpec> pause;              // "pause": args
};
nlohmann::json to_json(const Command& c);
std::optional<Command> parse_command(const std::string& text, std::string* error);

struct Incident {
  std::int64_t id = 0;
  IncidentStatus status = IncidentStatus::kOpen;
  double onset_t_s = 0;
  double detected_t_s = 0;
  double closed_t_s = -1;
  double before_ms = 0;
  double after_ms = 0;
  double severity = 1.0;        // after_ms / before_ms
  std::vector<int> ranks;       // ranks that reported the slowdown
  std::vector<int> recovered;   // ranks that reported the recovery
  std::vector<int> nodes;
};
nlohmann::json to_json(const Incident& i);
std::optional<Incident> parse_incident(const std::string& text, std::string* error);

// A fail-slow's ski-rental account (mitigate::SkiRental's state): the remedy it is under and the loss so far.
struct SkiAccount {
  Strategy rung = Strategy::kS1;      // the remedy it is under
  Strategy previous = Strategy::kS1;  // the one before (a declined rung falls back to it)
  double loss_s = 0;                  // over the fail-slow
  double rung_loss_s = 0;             // since the rung took effect
  double last_iteration_s = 0;
  std::vector<double> window_s;       // iteration times under the rung, newest last (bounded by the window)
  bool s2 = true, s3 = true, s4 = true;  // still worth trying (not declined, not found not to pay)
  bool trusted = false;               // its remedy was shown paying by an undo check: not judged again
};

// One localised fail-slow of a job, tracked on its own (daemon/fail_slows.h): what it is, the evidence for
// it, its account and remedy. The master keeps the open ones in its state, so a restart continues them.
struct FailSlow {
  std::int64_t id = 0;               // per job, growing
  std::int64_t incident = -1;        // the incident it was found in
  Cause cause = Cause::kUnknown;     // computation or host: `rank`; communication: the link `link_a`-`link_b`
  int rank = -1, node = -1;
  int link_a = -1, link_b = -1;
  double onset_t_s = 0;              // job time: its incident's onset, or the profile that first showed it
  double localised_t_s = 0;
  double last_seen_t_s = 0;          // the last profile that still showed it
  double ended_t_s = -1;             // -1: open
  double severity = 1;               // at its last sighting: its replica's time over the median, or the link's ratio
  int misses = 0;                    // profiles in a row that did not show it
  // A validation pause measured its rank's GPU (slow: computation; as fast as its peers: host), and the
  // cause is that verdict's from then on: a later profile does not swap it back.
  bool cause_validated = false;
  SkiAccount account;
};
nlohmann::json to_json(const FailSlow& f);
std::optional<FailSlow> fail_slow_from_json(const nlohmann::json& j, std::string* error);
inline constexpr std::size_t kMaxOpenFailSlows = 64;  // a state holding more is refused

// stall (agent, one per rank and stall): the rank has been inside one NCCL call (`in_call`), or has made none,
// for longer than the agent's hang threshold (k x its iteration time, at least the configured minimum).
struct StallDetail {
  bool in_call = false;        // blocked inside a call (op, group, group_seq say which), else calling none
  std::string op;              // the call's op (in_call)
  std::uint64_t group = 0;     // its communicator's group (in_call; 0: not known)
  std::uint64_t group_seq = 0; // its number on that communicator (in_call)
  double since_t_s = 0;        // job time the call began, or of the rank's newest record
  double threshold_s = 0;      // the threshold it passed
  std::map<std::uint64_t, std::uint64_t> last_seq;  // the newest completed call number per group (at most 64)
};
nlohmann::json to_json(const StallDetail& d);
std::optional<StallDetail> parse_stall_detail(const nlohmann::json& detail, std::string* error);

// hang (master): the members of `group` that are blocked in its call number `seq` (`waiting`), and those
// that never joined it (`missing`, with the newest call number of the group each completed; -1: unknown).
struct HangDetail {
  std::uint64_t group = 0;
  std::string op;
  std::uint64_t seq = 0;
  std::vector<int> waiting, missing;
  std::map<int, std::int64_t> missing_last_seq;
  double since_t_s = 0;  // when the first waiting rank entered the call
};
nlohmann::json to_json(const HangDetail& d);
std::optional<HangDetail> parse_hang_detail(const nlohmann::json& detail, std::string* error);

// A rank whose process died while the job ran (an agent's fail_stop event), as the master keeps it.
struct FailStopRecord {
  int rank = -1, node = -1;
  double t_s = 0;         // job time the agent saw it gone
  std::int64_t pid = 0;
};
inline constexpr std::size_t kMaxFailStopsKept = 64;

struct MasterState {
  std::string cursor = "0-0";   // last event-stream id processed
  Phase state = Phase::kHealthy;
  std::int64_t open_incident = -1;
  std::int64_t incidents_total = 0;
  double last_closed_t_s = -1;  // when the last incident closed (late reports of it are not new incidents)
  std::int64_t events_processed = 0;
  std::int64_t events_rejected = 0;
  // Times the master found the stream trimmed past its cursor: events may have been lost to it (a master
  // stopped longer than the stream's length lasts; docs/operations.md, "Scale").
  std::int64_t event_gaps = 0;
  std::int64_t updated_unix_ms = 0;
  std::vector<FailSlow> fail_slows;  // the open ones
  std::int64_t fail_slows_total = 0;
  double healthy_ms = 0;             // the job's healthy iteration time (baseline profile, else before the first incident)
  std::vector<FailStopRecord> fail_stops;  // ranks whose process died, the latest kMaxFailStopsKept
  std::int64_t fail_stops_total = 0;
  std::vector<HangDetail> hangs;           // collectives that waited for ranks that never joined, the latest 16
  std::int64_t hangs_total = 0;
  // The newest plan epoch whose `plan` event is in the stream (committed with this state). A master that
  // died between publishing a plan and committing its event leaves it behind the latest plan: the next
  // master records the missing events (JobDriver::load). -1: unknown (a state written before this field).
  std::int64_t plans_recorded = 0;
};
inline constexpr std::size_t kMaxHangsKept = 16;
nlohmann::json to_json(const MasterState& s);
std::optional<MasterState> parse_master_state(const std::string& text, std::string* error);

// One entry of an S3 placement: launch rank `rank` (the GPU it runs on: node rank / gpus_per_node) takes the
// role (tp, dp, pp). Used by the layout (the placement in force) and decoded from a plan's placement.
struct PlacementEntry {
  int rank = -1, tp = -1, dp = -1, pp = -1;
  friend bool operator==(const PlacementEntry&, const PlacementEntry&) = default;
};

// The job's parallel layout, published by the job (rank 0 of greyhound-minitrain, or the framework plugin)
// at start and again after each plan it applies: what the planner needs to map ranks to DP replicas and
// pipeline stages, the allocation in force, and the one it started with (what a revert restores, also for
// a master restarted mid-incident).
struct JobLayout {
  int tp = 1, dp = 1, pp = 1;
  int world = 1;
  std::string order = "tp-dp-pp";        // Megatron: rank = tp + TP * (dp + DP * pp)
  std::vector<int> microbatches;         // current allocation by DP index
  std::vector<int> initial_microbatches; // the allocation the job started with (default: microbatches)
  std::vector<std::string> capabilities; // strategies the job can apply: "S2", "S3", "S4"
  int gpus_per_node = 0;                 // 0: unknown (S3 needs it: ranks fill nodes in launch order)
  // The multiple every replica's micro-batch count must be under the job's pipeline schedule (Megatron's
  // interleaved schedule: the pipeline size; its 1F1B without interleaving: 1, any count); 0: not said (S2
  // then keeps multiples of pp while the allocation in force has them, the paper's constraint).
  int microbatch_multiple = 0;
  // The placement in force, one entry per launch rank in rank order; empty: Megatron's (launch rank r holds
  // the role of global rank r). A job that applied an S3 plan names it here.
  std::vector<PlacementEntry> placement;
  // The placement the job started with (what a revert restores); empty: Megatron's. A job that applies S3 by
  // restarting (s3_by_restart) starts again with the plan's placement as its own: nothing is then in force
  // to revert.
  std::vector<PlacementEntry> initial_placement;
  // S3 is applied by a checkpoint-restart with the roles placed anew (a framework that builds its model for
  // one placement, Megatron-LM): an S3 plan it acknowledges as applied takes the job down, to come back
  // with the new placement, as for S4. JSON "s3_by_restart".
  bool s3_by_restart = false;
  // The job's own estimates of what applying S3 / S4 costs it, in job seconds (S3: new communicators and
  // the handover of state; S4: checkpoint, restart and reload); 0: none given (the master's configured
  // overhead stands). JSON "cost_estimates_s": {"S3": x, "S4": y}, each finite, >= 0 and at most a week.
  double s3_estimate_s = 0;
  double s4_estimate_s = 0;
  std::int64_t t_unix_ms = 0;
};
inline constexpr double kMaxCostEstimateS = 7 * 24 * 3600.0;
inline constexpr int kMaxMicrobatchMultiple = 1 << 16;
// Whether the layout's pipeline schedule runs `count` micro-batches on a replica: a multiple of its
// microbatch_multiple (any count when that is 0 or 1). The one rule the layout, plan and operator checks use.
inline bool schedule_takes(const JobLayout& l, int count) {
  return l.microbatch_multiple <= 1 || count % l.microbatch_multiple == 0;
}
nlohmann::json to_json(const JobLayout& l);
std::optional<JobLayout> parse_job_layout(const std::string& text, std::string* error);
// The rules every layout meets (the reader enforces them; a job checks its own before publishing): "" when
// it does, else what is wrong. An empty initial_microbatches stands for the allocation in force.
std::string layout_error(const JobLayout& l);
// The rules a placement meets against the layout's shape: one entry per rank, each rank and each (tp, dp,
// pp) role exactly once and within the layout, and, when gpus_per_node is known, every TP group (the ranks
// of one (dp, pp)) on one node. "" when it does, else what is wrong, naming the entry ("placement[3]: ...").
std::string placement_error(const JobLayout& l, const std::vector<PlacementEntry>& placement);
// Megatron's placement of a layout: launch rank r holds the role of global rank r.
std::vector<PlacementEntry> megatron_placement(const JobLayout& l);
// A placement as plans and requests write it: [{"rank","tp","dp","pp"}...].
nlohmann::json placement_json(const std::vector<PlacementEntry>& entries);

// The job's settings at run time (key "settings", written by `greyhoundctl set`, `pause-detection`,
// `resume-detection`): what an operator changed without restarting anything. Every field is optional (absent:
// the program's own default or flag); the agents apply the detection ones at their next heartbeat, the
// master the others at its next read (about a second). `version` grows with every write.
struct JobSettings {
  std::optional<bool> detection_paused;      // agents report no slowdown or recovery while true
  std::optional<double> validation_ratio;    // a change must move the level by this ratio (1.1: 10 %)
  std::optional<double> bocd_threshold;      // BOCD's decision probability, (0, 1)
  std::optional<double> bocd_hazard;         // BOCD's expected run length between changes, in iterations
  std::optional<double> acf_threshold;       // the autocorrelation an iteration period must reach, (0, 1]
  std::optional<int> profile_iterations;     // the master's profiling window, iterations
  std::optional<int> reprofile_iterations;   // ... and the gap between windows while fail-slows are open
  std::optional<double> s3_pause_s;          // S3's and S4's overheads for a job that gives no estimate
  std::optional<double> s4_restart_s;
  std::optional<double> pause_deadline_s;    // a validation pause's deadline
  std::int64_t version = 0;
  std::int64_t t_unix_ms = 0;
};
nlohmann::json to_json(const JobSettings& s);
std::optional<JobSettings> parse_job_settings(const std::string& text, std::string* error);
// The keys `greyhoundctl set` takes, with their ranges, in one table (the reader checks the same).
std::vector<std::string> job_setting_keys();
// Sets `key` from `value` (its text: a number, or true/false), or unsets it when `value` is empty. "" when
// done, else what is wrong (an unknown key, a value that is not one, or out of its range).
std::string apply_job_setting(JobSettings& s, const std::string& key, const std::string& value);

// A versioned mitigation plan (key "plan", and immutable "plan:<epoch>"). The job applies it at an iteration
// boundary and acknowledges per rank (hash "plan:acks").
struct Plan {
  std::int64_t epoch = 0;
  Strategy strategy = Strategy::kS1;
  PlanAction action = PlanAction::kApply;  // or kRevert: back to the original configuration
  std::int64_t incident = -1;
  std::string reason;
  std::vector<int> microbatches;     // S2 (and revert): by DP index; empty: unchanged
  nlohmann::json placement;          // S3: [{"rank","tp","dp","pp"}...]; null: unchanged
  std::vector<int> exclude_nodes;    // S4: restart without these nodes
  std::vector<int> exclude_ranks;    // S4: ... or without these ranks' GPUs
  double predicted_iteration_s = 0;
  std::int64_t t_unix_ms = 0;
};
nlohmann::json to_json(const Plan& p);
std::optional<Plan> parse_plan(const std::string& text, std::string* error);
// The epoch a plan text names when parse_plan turns it down: its "epoch", an integer >= 1, read from a JSON
// object within the same bounds; 0 when it names none (not JSON, not an object, no such integer). Lets the
// job acknowledge a malformed plan as rejected.
std::int64_t plan_epoch_named(const std::string& text);
std::optional<Plan> plan_from_json(const nlohmann::json& j, std::string* error);
// Whether the configuration in force departs from the one the job started with: another split than its
// initial one, or another placement than Megatron's.
bool departs_from_original(const JobLayout& l);
// The plan back to the job's original configuration (action revert, S1): its initial micro-batches, and
// Megatron's placement when another is in force (and the nodes are known). Epoch, reason and stamp unset.
Plan original_configuration_plan(const JobLayout& l);

// An operator's manual plan (key "operator_plan", written by `greyhoundctl plan`; docs/operations.md):
//  apply:   this split (micro-batches by DP index) and/or this placement, checked against the job's layout;
//  revert:  back to the job's original configuration;
//  release: greyhound's own remedies again.
// While an apply or a revert stands, the master proposes no remedy of its own (it goes on detecting and
// localising). The master answers in "operator_plan:result".
struct OperatorPlanRequest {
  std::string id;
  std::string action = "apply";       // "apply", "revert", "release"
  std::vector<int> microbatches;      // apply: by DP index (empty: unchanged)
  std::vector<PlacementEntry> placement;  // apply: every launch rank's role (empty: unchanged)
  std::string reason;                 // the operator's words, in the plan's reason
  std::int64_t t_unix_ms = 0;
};
nlohmann::json to_json(const OperatorPlanRequest& r);
std::optional<OperatorPlanRequest> parse_operator_plan_request(const std::string& text, std::string* error);

struct OperatorPlanReport {
  std::string id;                // the request's
  std::string state;             // "published" (as plan `epoch`), "refused" (`reason` says why), "released"
  std::int64_t epoch = 0;
  std::string reason;
  std::int64_t t_unix_ms = 0;
};
nlohmann::json to_json(const OperatorPlanReport& r);
std::optional<OperatorPlanReport> parse_operator_plan_report(const std::string& text, std::string* error);

struct PlanAck {
  int rank = -1;
  std::int64_t epoch = 0;
  std::int64_t iteration = -1;       // the job's iteration from which it applies
  AckStatus status = AckStatus::kApplied;
  std::string detail;
  double apply_s = 0;                // job time this rank spent applying the plan (S3: new communicators and
                                     // state handover); 0: not measured
  std::int64_t t_unix_ms = 0;
};
nlohmann::json to_json(const PlanAck& a);
std::optional<PlanAck> parse_plan_ack(const std::string& text, std::string* error);

// ---- Event details: one struct per event type whose detail some component reads. The writer sets
// `Event::detail = to_json(d)`; the reader takes `parse_*(event.detail, &error)`.

// slowdown, recovery (agent).
struct ChangeDetail {
  std::string method;             // the detector ("bocd+validation", ...)
  double iteration_end_t_s = -1;  // job time at the end of the iteration that decided it
};
nlohmann::json to_json(const ChangeDetail& d);
std::optional<ChangeDetail> parse_change_detail(const nlohmann::json& detail, std::string* error);

// period_change (agent).
struct PeriodChangeDetail {
  int period = 0;  // NCCL calls per iteration now
};
nlohmann::json to_json(const PeriodChangeDetail& d);
std::optional<PeriodChangeDetail> parse_period_change_detail(const nlohmann::json& detail, std::string* error);

// command_ack (agent).
struct CommandAckDetail {
  std::string cmd, id, stream_id;
};
nlohmann::json to_json(const CommandAckDetail& d);
std::optional<CommandAckDetail> parse_command_ack_detail(const nlohmann::json& detail, std::string* error);

// agent_stop (agent).
// Detail of a "pause" event: one rank's state in a validation pause, as its hook reported it.
struct PauseTransferResult {
  PauseTransferSpec spec;
  std::vector<double> ms;  // per size of the pause, the median device time (0: not run)
};
struct PauseReport {
  std::string id;                 // the pause
  std::string state;              // "trapped", "running", "done", "resumed", "refused"
  std::string reason;             // refused / resumed: why ("past", "in_group", "capturing", "no_cuda",
                                  // "no_group", "deadline", "told", "aborted")
  double drain_ms = 0;            // trapped: the device drain at the cut
  double paused_ms = 0;           // resumed: from the trap to the resume
  std::vector<double> gemm_ms;    // done: FP32, FP16 (0: not run)
  std::vector<double> gemm_tflops;
  std::string gemm_fp8;           // done: the FP8 GEMM's outcome (kGemmFp8Names); "": not run, or a hook without it
  double gemm_fp8_ms = 0;         // done: its median when gemm_fp8 is "done" (apart from gemm_ms: masters that
  double gemm_fp8_tflops = 0;     //   sum gemm_ms know nothing of FP8)
  int compute_capability = 0;     // done: the device's, major * 10 + minor, when the hook reported FP8 (0: unknown)
  std::vector<PauseTransferResult> transfers;  // done
};
nlohmann::json to_json(const PauseReport& r);
std::optional<PauseReport> parse_pause_report(const nlohmann::json& detail, std::string* error);

// The FP8 GEMM outcomes a hook reports (ring_layout.h's kGemmFp8*, from Done on): "done", "unsupported"
// (compute capability below 8.9), "no_library" (no cuBLASLt in the process), "no_algorithm", "failed",
// "skipped" (the deadline came first).
inline constexpr const char* kGemmFp8Names[] = {"done", "unsupported", "no_library", "no_algorithm", "failed", "skipped"};

// Detail of a "validated" event: what a validation pause measured and concluded (docs/validation.md).
struct ValidatedGpu {
  int rank = -1, node = -1;
  double ms = 0, peers_ms = 0, ratio = 0, tflops = 0;  // ms: the GEMMs of gemm_types, weighted alike
                                                       // (validate::gemm_times); tflops: FP32's
  bool slow = false;
  double fp8_tflops = 0;  // 0: not measured
  std::string fp8;        // the FP8 GEMM's outcome on it (kGemmFp8Names; "": not reported)
};
struct ValidatedLink {
  int src = -1, dst = -1, src_node = -1, dst_node = -1;
  std::string link_class;  // "intra-node", "inter-node"
  double ms = 0, peers_ms = 0, ratio = 0, gb_per_s = 0;
  bool slow = false;
};
struct ValidatedReport {
  std::string id;              // the pause
  std::string cause = "none";  // "gpu", "link", "host", "none"
  bool aborted = false;        // no verdict: the pause did not complete (`reason` says why)
  int rank = -1, node = -1;    // gpu / host
  int node_a = -1, node_b = -1;  // link
  double ratio = 0;            // the GPU's or the transfer's time over its peers'
  double gb_per_s = 0, peers_gb_per_s = 0;
  std::string reason;
  std::int64_t at_iteration = 0;
  int ranks = 0;               // ranks paused
  double localised_t_s = 0;    // job time of the localisation it validates
  double pause_s = 0;          // the longest pause of a rank (trap to resume)
  double tests_s = 0;          // from the run command to the last result
  std::vector<std::string> gemm_types;  // the GEMMs whose times were compared ("fp32", "fp16", "fp8": FP8 only
                                        // when every GPU compared measured it)
  std::vector<ValidatedGpu> gpus;
  std::vector<ValidatedLink> links;
};
nlohmann::json to_json(const ValidatedReport& v);
std::optional<ValidatedReport> parse_validated_report(const nlohmann::json& detail, std::string* error);

struct AgentStopDetail {
  std::uint64_t events_dropped = 0;
};
// Pre-flight (docs/validation.md, "Pre-flight"): `greyhoundctl preflight` asks (key "preflight"), the master
// runs the validation tests on every GPU and over every group's ring at the job's first iteration it can
// reach, and answers (key "preflight:result", and a "preflight" event with the same detail).
struct PreflightRequest {
  std::string id;             // the request (the answer names it)
  bool fail_on_slow = false;  // something slow: the job's ranks exit (kPauseExitStatus, 75) instead of training on
  std::int64_t t_unix_ms = 0;
};
nlohmann::json to_json(const PreflightRequest& r);
std::optional<PreflightRequest> parse_preflight_request(const std::string& text, std::string* error);

struct PreflightLink {
  int node_a = -1, node_b = -1;  // node_a < node_b
  std::string link_class;        // "intra-node", "inter-node"
  double ratio = 0;              // its slowest transfer's time over the median of its class
  double gb_per_s = 0, peers_gb_per_s = 0;
  int transfers = 0;             // its transfers judged slow
};
struct PreflightReport {
  std::string id;                 // the request's
  std::string state = "waiting";  // waiting (for the job's ranks), running (the pause), passed, slow, failed
                                  // (no verdict: `reason` says why)
  bool fail_on_slow = false;
  bool exit = false;              // the ranks were told to exit (fail_on_slow and something slow)
  std::vector<ValidatedGpu> slow_gpus;    // against the median of every other GPU
  std::vector<std::string> gemm_types;    // the GEMMs compared (ValidatedReport::gemm_types)
  std::vector<PreflightLink> slow_links;  // against the median of their class
  int gpus_tested = 0, transfers_tested = 0, groups_tested = 0;
  std::string reason;
  std::string pause;              // the pause's id ("" until it starts)
  std::int64_t at_iteration = 0;
  int ranks = 0;
  double pause_s = 0, tests_s = 0;
  std::int64_t t_unix_ms = 0;     // of this state
  bool done() const { return state == "passed" || state == "slow" || state == "failed"; }
};
nlohmann::json to_json(const PreflightReport& r);
std::optional<PreflightReport> parse_preflight_report(const nlohmann::json& detail, std::string* error);
std::optional<PreflightReport> parse_preflight_report_text(const std::string& text, std::string* error);

nlohmann::json to_json(const AgentStopDetail& d);
std::optional<AgentStopDetail> parse_agent_stop_detail(const nlohmann::json& detail, std::string* error);

// fail_stop (agent, one per rank): the rank's process is gone without having finished: killed by a signal,
// crashed, left by _exit(), or ended through exit() with a status other than 0 (an uncaught exception): the
// job cannot go on without it.
struct FailStopDetail {
  std::int64_t pid = 0;
  int exit_status = -1;         // the status it passed to exit() (not 0); -1: it did not exit (killed, crashed)
  double last_record_t_s = -1;  // job time of the rank's newest NCCL record; -1: none
};
nlohmann::json to_json(const FailStopDetail& d);
std::optional<FailStopDetail> parse_fail_stop_detail(const nlohmann::json& detail, std::string* error);

// leader (master, --ha): the master `master` leads the job from now on, at fencing epoch `epoch` (every
// write of an earlier epoch's master is refused from then on).
struct LeaderDetail {
  std::string master;
  std::int64_t epoch = 0;
};
nlohmann::json to_json(const LeaderDetail& d);
std::optional<LeaderDetail> parse_leader_detail(const nlohmann::json& detail, std::string* error);

// profile (agent, one per rank): device times of one profiling window.
struct ProfileGroup {
  double share = 0;        // fraction of the window inside this group's calls
  double calls_per_s = 0;  // the group's call rate
};
struct ProfileReport {
  std::string request;       // the profile command's id
  double window_s = 0;
  int iterations = 0;        // iterations that ended in the window
  double iter_ms = 0;        // their mean (0 when none did)
  double iter_ms_min = 0;    // the least and greatest of them (0 when none did, or from an agent that
  double iter_ms_max = 0;    // did not report them)
  double comm_share = 0;     // fraction of the window inside NCCL calls
  std::int64_t timings = 0;  // device timings taken
  std::string status = "active";  // "active", or "unavailable" (no CUDA runtime to time with: not used)
  std::map<std::uint64_t, ProfileGroup> groups;
};
nlohmann::json to_json(const ProfileReport& p);
std::optional<ProfileReport> parse_profile_report(const nlohmann::json& detail, std::string* error);

// incident_open, incident_update, incident_close (master).
struct IncidentDetail {
  std::vector<int> ranks;
  std::vector<int> nodes;
  double onset_t_s = 0;
  double detected_t_s = 0;
  Phase state = Phase::kHealthy;  // the master's phase after the event
  double duration_s = -1;   // incident_close: closed - onset
  std::string reason;       // incident_close: why
};
nlohmann::json to_json(const IncidentDetail& d);
std::optional<IncidentDetail> parse_incident_detail(const nlohmann::json& detail, std::string* error);

// localised (master): the pause-free localisation (docs/analysis.md, "Localisation").
struct SuspectLinkReport {
  int node_a = 0, node_b = 0;
  double ratio = 1;
};
struct LocalisationReport {
  Cause cause = Cause::kUnknown;
  int culprit = -1;
  int culprit_node = -1;
  std::string kind = "NONE";
  std::string severity = "none";
  double score = 0;
  std::uint64_t group = 0;
  std::vector<std::pair<std::uint64_t, double>> slow_groups;  // group, time / its cluster's median
  std::vector<SuspectLinkReport> suspect_links;
  double dp_transfer_ms = 0, pp_transfer_ms = 0;  // 0: unknown
  int ranks_profiled = 0;
  int ranks_expected = 0;
  std::vector<double> replica_ms_per_microbatch;  // empty without a layout
  int culprit_replica = -1;
  double replica_skew = 1.0;
  double pace_spread = 1.0;  // the window's slowest over its fastest iteration (its most spread rank's); 1: steady or unknown
  double iter_ms = 0;        // the job's iteration in the window (median of the ranks'); 0: none measured
  std::string request;
};
nlohmann::json to_json(const LocalisationReport& l);
std::optional<LocalisationReport> parse_localisation_report(const nlohmann::json& detail, std::string* error);

// baseline (master): a healthy reference profile was taken.
struct BaselineReport {
  std::string request;
  int ranks_profiled = 0;
  int groups = 0;
  double iter_ms = 0;
};
nlohmann::json to_json(const BaselineReport& b);
std::optional<BaselineReport> parse_baseline_report(const nlohmann::json& detail, std::string* error);

// plan_applied, plan_rejected, plan_timeout (master): how the job answered a plan.
struct PlanOutcome {
  std::int64_t epoch = 0;
  Strategy strategy = Strategy::kS1;
  PlanAction action = PlanAction::kApply;
  int applied = 0, unsupported = 0, rejected = 0;
  int ranks = 0;
  std::int64_t from_iteration = -1;
  double apply_s = 0;  // the slowest rank's time applying it, as acknowledged (0: not measured)
};
nlohmann::json to_json(const PlanOutcome& o);
std::optional<PlanOutcome> parse_plan_outcome(const nlohmann::json& detail, std::string* error);

// fail_slow_open / fail_slow_end: the FailSlow (fail_slow_from_json) and why.
struct FailSlowDetail {
  FailSlow fail_slow;
  std::string reason;
};
nlohmann::json to_json(const FailSlowDetail& d);
std::optional<FailSlowDetail> parse_fail_slow_detail(const nlohmann::json& detail, std::string* error);

// remedy_check: a plan in force measured over a few iterations against the configuration it replaced and
// its prediction; one that does not pay is reverted and not tried again for these fail-slows.
struct RemedyCheck {
  std::int64_t epoch = 0;
  Strategy strategy = Strategy::kS2;
  std::vector<std::int64_t> fail_slows;  // the fail-slows it was made for
  double before_ms = 0;                  // iterations before it (median)
  double predicted_ms = 0;               // 0: no prediction
  double measured_ms = 0;                // iterations under it (median)
  int iterations = 0;                    // how many were measured
  bool pays = false;
  std::string reason;
};
nlohmann::json to_json(const RemedyCheck& c);
std::optional<RemedyCheck> parse_remedy_check(const nlohmann::json& detail, std::string* error);

// job_restart: the job published its layout again after the S4 plan `epoch` stopped it (a checkpoint-restart
// without some nodes; epoch 0: a restart seen only from a layout of another shape): what it was and what it
// is now.
struct JobRestart {
  std::int64_t epoch = 0;
  Strategy strategy = Strategy::kS4;  // S4 (without some nodes), or S3 (by restart: the roles placed anew)
  int world_before = 0, dp_before = 0;
  int world = 0, dp = 0;
  std::vector<int> microbatches;  // the split it restarted with (the same global batch)
};
nlohmann::json to_json(const JobRestart& r);
std::optional<JobRestart> parse_job_restart(const nlohmann::json& detail, std::string* error);

// The plan event's detail is the Plan itself (plan_from_json).

// ---- Registry records that are not JSON texts of their own.

// One communication group (hash group:<gid>): members by group rank, how it was created, and per member the
// op kinds and counts it moved ("AllReduce:8192" -> n).
// NCCL's ring over a group as the graph dump of one of its members shows it (field nccl_ring of the group's
// hash, written by that member's agent; docs/validation.md, "NCCL's ring order"): the dumping node's part
// of ring channel 0, in group ranks.
// With it, when the dump holds NCCL's tree graph, that graph's pattern and channel 0's chain through the
// same node (docs/validation.md, "NCCL's trees").
struct NcclTreeChain {
  validate::NcclTreePattern pattern = validate::NcclTreePattern::kBalanced;
  std::vector<int> segment;    // the dumping node's group ranks, in the chain's order (the ring segment's ranks)
  bool crosses_nodes = false;  // the chain enters and leaves its node by the network
  bool operator==(const NcclTreeChain&) const = default;
};

struct NcclRingDump {
  int group_rank = -1;        // the member that dumped it
  std::vector<int> segment;   // its node's group ranks, in ring order
  bool crosses_nodes = false;  // the channel enters and leaves its node by the network
  int channels = 0;           // ring channels in the dump
  std::optional<NcclTreeChain> tree;  // absent: the dump had no tree graph (or an unusable one)
  bool operator==(const NcclRingDump&) const = default;
};

nlohmann::json to_json(const NcclRingDump& d);
// Fails (naming the field) on anything but what to_json writes: a JSON object, its segment 1 to 4096
// distinct ranks holding group_rank, crosses_nodes a boolean, channels 1 to 1024; a tree, when present, an
// object with pattern "balanced", "split" or "tree", a segment of the same ranks as the ring's, and
// crosses_nodes a boolean.
Result<NcclRingDump> parse_nccl_ring_dump(const std::string& text);

struct GroupRecord {
  std::uint64_t id = 0;
  int size = 0;                                    // 0: unknown
  std::map<int, int> members;                      // group rank -> global rank
  std::map<int, int> nodes;                        // group rank -> the node its agent runs on
  std::string created_by;                          // "CommInitRank", "CommSplit", ...
  std::map<int, std::map<std::string, std::uint64_t>> ops;  // global rank -> op kind -> count
  std::optional<NcclRingDump> nccl_ring;           // when a member's job set NCCL_GRAPH_DUMP_FILE
  bool complete() const { return size > 0 && static_cast<int>(members.size()) == size; }
};

// A restart request from the job (key restart): the framework asks for a checkpoint-restart without the
// ranks or nodes named (S4), or with its roles placed anew (S3 by restart). The cluster scheduler acts on
// the first, the restarted job's own launch (greyhound_megatron.place_rank) on the second; greyhound records it.
struct RestartRequest {
  int rank = -1;            // who asked
  std::int64_t epoch = 0;   // the S4 (or S3) plan it answers (0: the job's own decision)
  std::string reason;
  std::vector<int> exclude_nodes;
  std::vector<int> exclude_ranks;
  // An S3 plan's placement to restart with (launch rank r takes the role placement[r] names; the launcher
  // starts each rank as that role's global rank); empty: every rank keeps its own role.
  std::vector<PlacementEntry> placement;
  std::int64_t t_unix_ms = 0;
};
nlohmann::json to_json(const RestartRequest& r);
std::optional<RestartRequest> parse_restart_request(const std::string& text, std::string* error);

namespace store {

// One entry of a stream or hash as the job store reads it: its id (stream id, or hash field / group id), the
// message, and what was wrong with it (empty when nothing). A value may come with an error when only a part
// of it was malformed.
template <class T>
struct Entry {
  std::string id;
  std::optional<T> value;
  std::string error;
};

// What the master commits in one MULTI/EXEC: its state (with the stream cursor), the incidents that changed
// and its own events. A master killed at any point restarts from the last commit.
struct MasterCommit {
  MasterState state;
  std::vector<Incident> incidents;  // the newest snapshot of each incident that changed (upsert_incident)
  std::vector<Event> events;
};

// Adds an incident's newest snapshot to `snapshots`: it replaces one of the same id (only the newest is
// written: an incident of 10,000 ranks changes with each rank's report, and a copy of each was once kept).
void upsert_incident(std::vector<Incident>& snapshots, Incident snapshot);

}  // namespace store

// Wall-clock milliseconds: the system clock read once, at a process's first call, and carried forward on the
// monotonic clock. A step of the system clock (NTP, an operator's `date -s`) moves no stamp of a running
// process, and the difference of two stamps of one host is a true duration; a process started after the
// step reads the new time. (An agent stamps its records the same way: Agent::unix_ms_of.)
std::int64_t unix_ms_now();

}  // namespace greyhound
