// The typed vocabulary of the master, the planner and the plan protocol: strategies, plan actions, causes,
// phases, incident and ack statuses. Each enum has exactly one table of {value, wire name}; name() and
// parse_*() are generated from it, so a name is spelt once. The wire names are part of the Redis/plan
// format (docs/redis-keys.md): change them only on purpose. Pure, std only.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string_view>

namespace greyhound {

// S1..S4 of the paper: S1 ignore, S2 adjust micro-batches, S3 re-place stages, S4 checkpoint and restart.
enum class Strategy { kS1, kS2, kS3, kS4 };
enum class PlanAction { kApply, kRevert };
// What a fail-slow is attributed to: a slow GPU (computation), a congested link (communication), a rank
// whose host is contended (late everywhere while its links are at their baseline: host), or not known.
enum class Cause { kComputation, kCommunication, kUnknown, kHost };
// The master's per-job state.
enum class Phase { kHealthy, kSlow, kProfiling, kValidating, kMitigating };
enum class IncidentStatus { kOpen, kClosed };
// A job's answer to a published plan.
enum class AckStatus { kApplied, kUnsupported, kRejected };

namespace vocabulary_detail {

template <typename E>
struct Entry {
  E value;
  std::string_view name;
};

inline constexpr std::array<Entry<Strategy>, 4> kStrategies{{
    {Strategy::kS1, "S1"}, {Strategy::kS2, "S2"}, {Strategy::kS3, "S3"}, {Strategy::kS4, "S4"}}};
inline constexpr std::array<Entry<PlanAction>, 2> kPlanActions{{
    {PlanAction::kApply, "apply"}, {PlanAction::kRevert, "revert"}}};
inline constexpr std::array<Entry<Cause>, 4> kCauses{{
    {Cause::kComputation, "computation"}, {Cause::kCommunication, "communication"},
    {Cause::kUnknown, "unknown"}, {Cause::kHost, "host"}}};
inline constexpr std::array<Entry<Phase>, 5> kPhases{{
    {Phase::kHealthy, "healthy"}, {Phase::kSlow, "slow"}, {Phase::kProfiling, "profiling"},
    {Phase::kValidating, "validating"}, {Phase::kMitigating, "mitigating"}}};
inline constexpr std::array<Entry<IncidentStatus>, 2> kIncidentStatuses{{
    {IncidentStatus::kOpen, "open"}, {IncidentStatus::kClosed, "closed"}}};
inline constexpr std::array<Entry<AckStatus>, 3> kAckStatuses{{
    {AckStatus::kApplied, "applied"}, {AckStatus::kUnsupported, "unsupported"},
    {AckStatus::kRejected, "rejected"}}};

// Every table lists its enum's values in declaration order, so name() can index by value.
template <typename E, std::size_t N>
constexpr bool in_order(const std::array<Entry<E>, N>& table) {
  for (std::size_t i = 0; i < N; ++i) {
    if (static_cast<std::size_t>(table[i].value) != i) return false;
  }
  return true;
}
static_assert(in_order(kStrategies) && in_order(kPlanActions) && in_order(kCauses) && in_order(kPhases) &&
              in_order(kIncidentStatuses) && in_order(kAckStatuses));

// "" for a value outside the table (only reachable through a cast).
template <typename E, std::size_t N>
constexpr std::string_view name_of(const std::array<Entry<E>, N>& table, E value) {
  const auto i = static_cast<std::size_t>(value);
  return i < N ? table[i].name : std::string_view{};
}

// Exact, case-sensitive match of a wire name.
template <typename E, std::size_t N>
constexpr std::optional<E> parse(const std::array<Entry<E>, N>& table, std::string_view text) {
  for (const auto& entry : table) {
    if (entry.name == text) return entry.value;
  }
  return std::nullopt;
}

}  // namespace vocabulary_detail

constexpr std::string_view name(Strategy v) {
  return vocabulary_detail::name_of(vocabulary_detail::kStrategies, v);
}
constexpr std::string_view name(PlanAction v) {
  return vocabulary_detail::name_of(vocabulary_detail::kPlanActions, v);
}
constexpr std::string_view name(Cause v) {
  return vocabulary_detail::name_of(vocabulary_detail::kCauses, v);
}
constexpr std::string_view name(Phase v) {
  return vocabulary_detail::name_of(vocabulary_detail::kPhases, v);
}
constexpr std::string_view name(IncidentStatus v) {
  return vocabulary_detail::name_of(vocabulary_detail::kIncidentStatuses, v);
}
constexpr std::string_view name(AckStatus v) {
  return vocabulary_detail::name_of(vocabulary_detail::kAckStatuses, v);
}

constexpr std::optional<Strategy> parse_strategy(std::string_view s) {
  return vocabulary_detail::parse(vocabulary_detail::kStrategies, s);
}
constexpr std::optional<PlanAction> parse_plan_action(std::string_view s) {
  return vocabulary_detail::parse(vocabulary_detail::kPlanActions, s);
}
constexpr std::optional<Cause> parse_cause(std::string_view s) {
  return vocabulary_detail::parse(vocabulary_detail::kCauses, s);
}
constexpr std::optional<Phase> parse_phase(std::string_view s) {
  return vocabulary_detail::parse(vocabulary_detail::kPhases, s);
}
constexpr std::optional<IncidentStatus> parse_incident_status(std::string_view s) {
  return vocabulary_detail::parse(vocabulary_detail::kIncidentStatuses, s);
}
constexpr std::optional<AckStatus> parse_ack_status(std::string_view s) {
  return vocabulary_detail::parse(vocabulary_detail::kAckStatuses, s);
}

}  // namespace greyhound
