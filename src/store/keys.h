// Redis key schema of greyhound, version 1 (docs/redis-keys.md is the reference; keep them in step): every
// key builder, TTL and stream length in one place. Only the job store (store/job_store.h) uses them.
// Every key of a job lives under "gh:v1:{<job>}:": the braces are a Redis Cluster hash tag, so all of a
// job's keys hash to one slot and every transaction and script of the job store touches one slot only. The
// registry of jobs (gh:v1:jobs) and the masters' leases ({masters}) are the keys outside a job; no
// transaction holds them with a job's keys. Job names are sanitised (sanitize_job_name) so they hold no ':',
// braces or spaces. Values are JSON texts (or
// hashes whose values are JSON texts), validated on read.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

namespace greyhound::store::keys {

inline constexpr std::string_view kPrefix = "gh:v1:";

inline std::string job(std::string_view j) { return std::string(kPrefix) + "{" + std::string(j) + "}:"; }
inline std::string jobs() { return std::string(kPrefix) + "jobs"; }                       // SET of job names
inline std::string ranks(std::string_view j) { return job(j) + "ranks"; }                  // SET of ranks
inline std::string rank(std::string_view j, int r) { return job(j) + "rank:" + std::to_string(r); }  // JSON
inline std::string groups(std::string_view j) { return job(j) + "groups"; }                // SET of group ids
inline std::string group(std::string_view j, std::string_view gid) { return job(j) + "group:" + std::string(gid); }  // HASH
inline std::string agents(std::string_view j) { return job(j) + "agents"; }                // SET of nodes
inline std::string agent(std::string_view j, int node) { return job(j) + "agent:" + std::to_string(node); }  // JSON, TTL
inline std::string iter(std::string_view j, int r) { return job(j) + "iter:" + std::to_string(r); }  // JSON, TTL
inline std::string events(std::string_view j) { return job(j) + "events"; }                // STREAM
inline std::string commands(std::string_view j, int node) { return job(j) + "cmd:" + std::to_string(node); }  // STREAM
inline std::string master(std::string_view j) { return job(j) + "master"; }                // JSON
inline std::string incidents(std::string_view j) { return job(j) + "incidents"; }          // ZSET id -> id
inline std::string incident(std::string_view j, long id) { return job(j) + "incident:" + std::to_string(id); }  // JSON
inline std::string layout(std::string_view j) { return job(j) + "layout"; }                // JSON, by the job
inline std::string plan(std::string_view j) { return job(j) + "plan"; }                    // JSON, latest
inline std::string plan_epoch(std::string_view j, long e) { return job(j) + "plan:" + std::to_string(e); }  // JSON
inline std::string plan_acks(std::string_view j) { return job(j) + "plan:acks"; }          // HASH rank -> JSON
inline std::string plan_lease(std::string_view j) { return job(j) + "plan:lease"; }        // JSON, PX: a master serves

inline std::string leader(std::string_view j) { return job(j) + "leader"; }                // fencing epoch of the leading master

// Masters' leadership (--ha): one lease for the masters serving one scope ("job:<job>" or "jobs:<pattern>"),
// and the counter every lease's epoch comes from, on a slot of their own.
inline std::string master_lease(std::string_view scope) {  // "<epoch> <id> <nonce>", PX
  return std::string(kPrefix) + "{masters}:lease:" + std::string(scope);
}
inline std::string master_epoch() { return std::string(kPrefix) + "{masters}:epoch"; }  // INCR

inline std::string restart(std::string_view j) { return job(j) + "restart"; }              // JSON, by the job
inline std::string settings(std::string_view j) { return job(j) + "settings"; }            // JSON, by an operator
inline std::string operator_plan(std::string_view j) { return job(j) + "operator_plan"; }  // JSON, by an operator
inline std::string operator_plan_result(std::string_view j) { return job(j) + "operator_plan:result"; }  // JSON, by the master
inline std::string preflight(std::string_view j) { return job(j) + "preflight"; }          // JSON, by an operator
inline std::string preflight_result(std::string_view j) { return job(j) + "preflight:result"; }  // JSON, by the master

// Expiry of the keys that say "alive": an agent's heartbeat outlives a few missed beats, an iteration time
// a stalled rank by a minute (absent: nothing current).
inline constexpr std::chrono::seconds kHeartbeatTtl{10};
inline constexpr std::chrono::seconds kIterationTtl{60};
// Approximate lengths streams are trimmed to (XADD MAXLEN ~): the event stream holds hours of a large job's
// events; a node's command stream only what an agent may not have read yet.
inline constexpr long kEventsMaxLen = 100000;
inline constexpr long kCommandsMaxLen = 1000;

}  // namespace greyhound::store::keys
