// The wire names are part of the plan and event formats: these pin every one of them and check that
// parsing accepts exactly those names.
#include "greyhound/vocabulary.h"

#include <gtest/gtest.h>

#include <string_view>
#include <utility>
#include <vector>

namespace greyhound {
namespace {

template <typename E, typename Parse>
void expect_round_trip(const std::vector<std::pair<E, std::string_view>>& expected, Parse parse) {
  for (const auto& [value, wire] : expected) {
    EXPECT_EQ(name(value), wire);
    const auto parsed = parse(wire);
    ASSERT_TRUE(parsed.has_value()) << wire;
    EXPECT_EQ(*parsed, value) << wire;
  }
}

template <typename Parse>
void expect_rejected(Parse parse, const std::vector<std::string_view>& names) {
  for (const auto text : names) EXPECT_FALSE(parse(text).has_value()) << '"' << text << '"';
}

TEST(Vocabulary, StrategyRoundTrips) {
  expect_round_trip<Strategy>(
      {{Strategy::kS1, "S1"}, {Strategy::kS2, "S2"}, {Strategy::kS3, "S3"}, {Strategy::kS4, "S4"}},
      parse_strategy);
  expect_rejected(parse_strategy, {"", "s1", "S0", "S5", "S1 ", "apply"});
  // The ski rental climbs them in this order (ordered by overhead).
  EXPECT_LT(Strategy::kS1, Strategy::kS2);
  EXPECT_LT(Strategy::kS2, Strategy::kS3);
  EXPECT_LT(Strategy::kS3, Strategy::kS4);
}

TEST(Vocabulary, PlanActionRoundTrips) {
  expect_round_trip<PlanAction>({{PlanAction::kApply, "apply"}, {PlanAction::kRevert, "revert"}},
                                parse_plan_action);
  expect_rejected(parse_plan_action, {"", "Apply", "REVERT", "applied", "S1"});
}

TEST(Vocabulary, CauseRoundTrips) {
  expect_round_trip<Cause>({{Cause::kComputation, "computation"},
                            {Cause::kCommunication, "communication"},
                            {Cause::kUnknown, "unknown"}},
                           parse_cause);
  expect_rejected(parse_cause, {"", "compute", "Computation", "comm", "none"});
}

TEST(Vocabulary, PhaseRoundTrips) {
  expect_round_trip<Phase>({{Phase::kHealthy, "healthy"},
                            {Phase::kSlow, "slow"},
                            {Phase::kProfiling, "profiling"},
                            {Phase::kValidating, "validating"},
                            {Phase::kMitigating, "mitigating"}},
                           parse_phase);
  expect_rejected(parse_phase, {"", "Healthy", "slowdown", "validate", "open"});
}

TEST(Vocabulary, IncidentStatusRoundTrips) {
  expect_round_trip<IncidentStatus>({{IncidentStatus::kOpen, "open"}, {IncidentStatus::kClosed, "closed"}},
                                    parse_incident_status);
  expect_rejected(parse_incident_status, {"", "Open", "close", "healthy"});
}

TEST(Vocabulary, AckStatusRoundTrips) {
  expect_round_trip<AckStatus>({{AckStatus::kApplied, "applied"},
                                {AckStatus::kUnsupported, "unsupported"},
                                {AckStatus::kRejected, "rejected"}},
                               parse_ack_status);
  expect_rejected(parse_ack_status, {"", "apply", "Applied", "reject", "ok"});
}

// Usable at compile time, so callers may build constant tables from them.
static_assert(name(Strategy::kS3) == "S3");
static_assert(parse_phase("mitigating") == Phase::kMitigating);
static_assert(!parse_cause("network").has_value());

}  // namespace
}  // namespace greyhound
