// Redis key schema of greyhound, version 1 (docs/redis-keys.md is the reference; keep them in step).
// Every key of a job lives under "gh:v1:<job>:"; job names are sanitised (sanitize_job_name) so they hold
// no ':' or spaces. Values are JSON texts (or hashes whose values are JSON texts), validated on read.
#pragma once

#include <string>
#include <string_view>

namespace greyhound::keys {

inline constexpr std::string_view kPrefix = "gh:v1:";

inline std::string job(std::string_view j) { return std::string(kPrefix) + std::string(j) + ":"; }
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

}  // namespace greyhound::keys
