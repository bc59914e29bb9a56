// The job store: the one typed access to what greyhound keeps in Redis for a job (docs/redis-keys.md). Every
// key, stream, TTL and transaction is built here and nowhere else; every value goes in through one writer
// (messages.h to_json) and comes out through one validating, bounded reader (messages.h parse_*), so that no
// value anyone writes into Redis can crash or stall a reader.
//
// Results follow the project's error convention (greyhound/result.h):
//   - Result<std::optional<T>> for a key: ok and empty when the key is absent; Errc::kInvalid when it holds
//     something malformed (the message names the key and the field); kUnavailable when Redis could not be
//     reached or timed out (the client reconnects with backoff on a later call); kRefused for an error reply.
//   - Entries of streams and hashes are read one by one: a malformed entry is returned with its error and
//     without a value, never fails the read of the others.
// Not thread-safe (one RedisClient per thread); several JobStores (one per job) may share one client.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/redis_client.h"
#include "greyhound/result.h"
#include "store/messages.h"

namespace greyhound::store {

// An agent's registry and liveness updates, sent in one round trip (not a transaction: each item stands
// alone, and the agent sends all of it again after a reconnect).
class AgentUpdate {
 public:
  void register_job();
  void rank(const RankRegistration& r);
  void group_member(std::uint64_t group, int size, int group_rank, int rank, const std::string& created_by, int node);
  void group_ops(std::uint64_t group, int rank, const std::map<std::string, std::uint64_t>& ops);
  void group_nccl_ring(std::uint64_t group, const NcclRingDump& ring);
  void iteration(const IterationUpdate& u);
  void heartbeat(const AgentHeartbeat& h);
  bool empty() const { return commands_.empty() && !register_job_; }

 private:
  friend class JobStore;
  explicit AgentUpdate(std::string job) : job_(std::move(job)) {}
  std::string job_;
  std::vector<std::vector<std::string>> commands_;
  bool register_job_ = false;
};

class JobStore {
 public:
  // `job` must be sanitised (sanitize_job_name). The client must outlive the store.
  JobStore(RedisClient& client, std::string job);

  const std::string& job() const { return job_; }
  RedisClient& client() { return client_; }

  // Every job registered in gh:v1:jobs, sorted.
  static Result<std::vector<std::string>> jobs(RedisClient& client);
  // Removes a job from gh:v1:jobs (a retired job; its agents register it again when they come back).
  static Status unregister_job(RedisClient& client, const std::string& job);

  // ---- Leadership of the masters on this Redis (greyhound-master --ha; docs/operations.md).
  // A lease per scope (what a set of masters serves: "job:<job>" or "jobs:<pattern>"). `holder` is one
  // process's token ("<id> <nonce>": two processes never share one, whatever their ids). Takes the lease when
  // nobody holds it, or renews it when `holder` does: the lease's epoch (a new one, from a counter that only
  // grows, when taken), or 0 when another holds it. A value no master wrote (not "<epoch> <token>" with an
  // epoch of 1 to 15 digits, or without a TTL) is taken over, never trusted; `took_over` says so.
  static Result<std::int64_t> acquire_lease(RedisClient& client, const std::string& scope, const std::string& holder,
                                            int ttl_ms, bool* took_over = nullptr);
  // Renews the lease while it is still `holder`'s at `epoch`: false when it is not (expired, or another's).
  static Result<bool> renew_lease(RedisClient& client, const std::string& scope, const std::string& holder,
                                  std::int64_t epoch, int ttl_ms);
  // Gives the lease up if it is still `holder`'s at `epoch` (a clean stop: a standby leads at once).
  static Status release_lease(RedisClient& client, const std::string& scope, const std::string& holder,
                              std::int64_t epoch);
  // Raises the epoch counter to at least `epoch` (it fell behind a job's: the next lease is newer than both).
  static Status raise_lease_epoch(RedisClient& client, std::int64_t epoch);
  // The lease's value ("<epoch> <id> <nonce>", at most 256 bytes), or nullopt when none holds it.
  static Result<std::optional<std::string>> lease_holder(RedisClient& client, const std::string& scope);
  // Fences this job at `epoch`: raises the job's leader epoch to it (never lowers it) and, from then on,
  // every write of this store (commit, publish_plan, send_command, append_event, the answers) is refused, and
  // changes nothing, once a newer epoch holds the job. 0 when this store leads the job now, else the newer
  // epoch that does.
  Result<std::int64_t> take_job(std::int64_t epoch);
  std::int64_t fence() const { return fence_; }
  // The newer epoch the last fenced write found leading the job (0: the last write was not fenced by one).
  std::int64_t fenced_by() const { return fenced_by_; }
  // How many times take_job found a value in the job's leader key that was no epoch, and took it over.
  std::uint64_t leader_values_taken_over() const { return leader_values_taken_over_; }

  // ---- Event stream (append-only, trimmed to about keys::kEventsMaxLen entries).
  Status append_event(const Event& e);
  // Up to `count` entries after stream id `after` ("0-0": from the start), oldest first.
  Result<std::vector<Entry<Event>>> read_events(const std::string& after, int count);
  Result<std::string> last_event_id();  // "0-0" when the stream is empty
  // The oldest entry still in the stream ("0-0" when empty). The stream keeps about keys::kEventsMaxLen
  // entries: a reader whose cursor is older than this was trimmed past, and may have lost what lay between.
  Result<std::string> first_event_id();

  // ---- Per-node command streams.
  Status send_command(int node, const Command& c);
  Result<std::vector<Entry<Command>>> read_commands(int node, const std::string& after, int count);
  Result<std::string> last_command_id(int node);

  // ---- Registry (written by agents).
  AgentUpdate agent_update() const { return AgentUpdate(job_); }
  Status publish(const AgentUpdate& u);
  Result<std::vector<int>> ranks();   // sorted; members that are not ranks are skipped
  // The ranks below `world` in the job's ranks set, sorted, and how many members the set has in all: at a
  // cost that follows the smaller of `world` and the set (SCARD, then the members when they are no more than
  // `world`, else SMISMEMBER over 0..world-1 in batches).
  Result<std::pair<std::vector<int>, std::int64_t>> ranks_below(int world);
  // Each rank's registration and current iteration, read in pipelined batches (one round trip per
  // kRowBatch ranks rather than two per rank): what a status of many ranks costs.
  struct RankRow {
    Result<std::optional<RankRegistration>> registration;
    Result<std::optional<IterationUpdate>> iteration;
  };
  Result<std::vector<RankRow>> rank_rows(const std::vector<int>& ranks);
  Result<std::vector<int>> agents();  // nodes that ever had an agent, sorted
  Result<std::optional<RankRegistration>> rank(int r);
  Result<std::optional<IterationUpdate>> iteration(int r);
  Result<std::optional<AgentHeartbeat>> heartbeat(int node);  // absent: that agent is gone
  // Every group in the registry, by id; a group with a malformed member is returned without a value.
  Result<std::vector<Entry<GroupRecord>>> groups();

  // ---- Master state and incidents.
  Result<std::optional<MasterState>> master_state();
  Result<std::optional<Incident>> incident(std::int64_t id);
  Result<std::vector<std::int64_t>> recent_incidents(int n);  // newest first
  Status commit(const MasterCommit& c);

  // ---- Plan channel and the job's layout.
  // A malformed plan key fails as kInvalid; *named_epoch (if given) is then the epoch it names (0: none).
  Result<std::optional<Plan>> latest_plan(std::int64_t* named_epoch = nullptr);
  Result<std::optional<Plan>> plan(std::int64_t epoch);
  // Writes plan:<epoch> (immutable) and plan at once, unless plan:<epoch> exists: false then (the epoch is
  // taken: a job that reverted itself when the plan lease lapsed, or another master).
  Result<bool> publish_plan(const Plan& p);
  // The plan lease (docs/redis-keys.md, "Plan lease"): the serving master renews it (`master`: its name,
  // `ttl_ms` its length); while it is held, the plans in force are looked after.
  Status hold_plan_lease(const std::string& master, int ttl_ms);
  // Whether a lease is held; with `lease_ms`, the length its holder gave it (0 when its value does not say:
  // the lease counts as held whatever its value).
  Result<bool> plan_lease_held(int* lease_ms = nullptr);
  // The job's side: publishes `p` (a revert, at an epoch after every one it saw) only while no lease is held
  // and plan:<epoch> does not exist, in one step: false when either stopped it.
  Result<bool> publish_plan_unleased(const Plan& p);
  Result<std::vector<Entry<PlanAck>>> plan_acks();  // id: the rank
  Status write_ack(const PlanAck& a);
  Result<std::optional<JobLayout>> layout();
  Status write_layout(const JobLayout& l);

  // The operator's run-time settings (JobSettings): absent until the first `greyhoundctl set`.
  Result<std::optional<JobSettings>> settings();
  Status write_settings(const JobSettings& s);
  // An operator's manual plan (greyhoundctl plan), and the master's answer to it.
  Status write_operator_plan(const OperatorPlanRequest& r);
  Result<std::optional<OperatorPlanRequest>> operator_plan();
  Status write_operator_plan_result(const OperatorPlanReport& r);
  Result<std::optional<OperatorPlanReport>> operator_plan_result();
  // A pre-flight check (greyhoundctl preflight): the operator's request, and the master's answer to it.
  Status request_preflight(const PreflightRequest& r);
  Result<std::optional<PreflightRequest>> preflight_request();
  // Removes the request when it is still request `id` (its command gave up waiting); true when removed.
  Result<bool> withdraw_preflight(const std::string& id);
  Status write_preflight_result(const PreflightReport& r);
  Result<std::optional<PreflightReport>> preflight_result();
  Status request_restart(const RestartRequest& r);  // and removes the layout (the job is going down)
  Result<std::optional<RestartRequest>> restart_request();

 private:
  Result<RedisReply> run(const std::vector<std::string>& argv);
  Result<std::optional<std::string>> get(const std::string& key);
  // A value that does not parse fails as kInvalid; *unparsed (if given) then holds its text.
  template <class T, class Parse>
  Result<std::optional<T>> get_as(const std::string& key, Parse parse, std::string* unparsed = nullptr);
  Result<std::vector<int>> int_members(const std::string& key);
  Result<RedisReply> members(const std::string& key);  // a set, bounded (see job_store.cpp)
  Result<RedisReply> hash(const std::string& key);     // a hash, bounded
  template <class T, class Parse>
  Result<std::vector<Entry<T>>> read_stream(const std::string& key, const std::string& after, int count, Parse parse);
  Result<std::string> last_id(const std::string& key);
  // MULTI/EXEC; when fenced, under WATCH of the job's leader epoch, refused when another master leads.
  // `exec`: EXEC's replies, one per command (when given).
  Status transaction(std::vector<std::vector<std::string>> commands, std::vector<RedisReply>* exec = nullptr);
  // One write: a transaction when fenced, else the command alone.
  Status write(std::vector<std::string> command);

  RedisClient& client_;
  std::string job_;
  std::int64_t fence_ = 0;  // 0: writes unfenced
  std::int64_t fenced_by_ = 0;
  std::uint64_t leader_values_taken_over_ = 0;
};

// A group's hash as Redis returns it (an array: field, value, field, value, ...; a last field without a value
// is ignored), for the group named by `hex`: "size", "member:<group rank>" (a global rank), "created_by" (a
// JSON string), "ops:<global rank>" (a JSON object of op kind -> count), others ignored. No value (with
// `error`) for an id that is not one, a size or a member that is not a rank, or a member beyond the size;
// a value with `error` when only a created_by, an op count or the nccl_ring was malformed (left out). What the
// agents write (AgentUpdate::group_member, group_ops, group_nccl_ring) reads back as written. Pure; fuzzed (fuzz/fuzz_group_hash.cpp).
Entry<GroupRecord> parse_group_hash(const std::string& hex, const RedisReply& hash);

}  // namespace greyhound::store
