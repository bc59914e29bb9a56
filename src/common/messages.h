// The JSON messages greyhound keeps in Redis (docs/redis-keys.md): one struct, one writer and one
// validating reader per message. Readers never trust what they read: a value that is not valid JSON, has a
// field of the wrong type, a missing required field or an oversized text is rejected with a message
// naming the field; callers log it once and carry on.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace greyhound {

// Values larger than this are rejected before parsing (a planted huge string must not cost memory or time).
inline constexpr std::size_t kMaxMessageBytes = 1 << 20;

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
  nlohmann::json detail;           // free-form extras (object or null)
};
nlohmann::json to_json(const Event& e);
std::optional<Event> parse_event(const std::string& text, std::string* error);

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
};
nlohmann::json to_json(const IterationUpdate& u);
std::optional<IterationUpdate> parse_iteration_update(const std::string& text, std::string* error);

struct Command {
  std::string cmd;  // "ping", "resync", "profile" (args: {"duration_s": S})
  std::string id;
  nlohmann::json args;
};
nlohmann::json to_json(const Command& c);
std::optional<Command> parse_command(const std::string& text, std::string* error);

struct Incident {
  std::int64_t id = 0;
  std::string status = "open";  // "open", "closed"
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

struct MasterState {
  std::string cursor = "0-0";   // last event-stream id processed
  std::string state = "healthy";
  std::int64_t open_incident = -1;
  std::int64_t incidents_total = 0;
  double last_closed_t_s = -1;  // when the last incident closed (late reports of it are not new incidents)
  std::int64_t events_processed = 0;
  std::int64_t events_rejected = 0;
  std::int64_t updated_unix_ms = 0;
};
nlohmann::json to_json(const MasterState& s);
std::optional<MasterState> parse_master_state(const std::string& text, std::string* error);

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
  std::int64_t t_unix_ms = 0;
};
nlohmann::json to_json(const JobLayout& l);
std::optional<JobLayout> parse_job_layout(const std::string& text, std::string* error);

// A versioned mitigation plan (key "plan", and immutable "plan:<epoch>"). The job applies it at an iteration
// boundary and acknowledges per rank (hash "plan:acks").
struct Plan {
  std::int64_t epoch = 0;
  std::string strategy = "S1";       // "S1".."S4"
  std::string action = "apply";      // "apply", or "revert" (back to the original configuration)
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

struct PlanAck {
  int rank = -1;
  std::int64_t epoch = 0;
  std::int64_t iteration = -1;       // the job's iteration from which it applies
  std::string status = "applied";    // "applied", "unsupported", "rejected"
  std::string detail;
  std::int64_t t_unix_ms = 0;
};
nlohmann::json to_json(const PlanAck& a);
std::optional<PlanAck> parse_plan_ack(const std::string& text, std::string* error);

std::int64_t unix_ms_now();

}  // namespace greyhound
