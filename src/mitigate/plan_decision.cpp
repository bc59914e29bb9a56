#include "greyhound/mitigate/plan_decision.h"

#include "greyhound/vocabulary.h"

namespace greyhound::mitigate {

// Level n of the controller is the vocabulary's Sn: the wire names live in one table (vocabulary.h).
static_assert(static_cast<int>(greyhound::Strategy::kS1) + 1 == static_cast<int>(Strategy::kS1Ignore) &&
              static_cast<int>(greyhound::Strategy::kS4) + 1 == static_cast<int>(Strategy::kS4Restart));

std::string_view strategy_name(Strategy s) noexcept {
  const int level = static_cast<int>(s);
  if (level < static_cast<int>(Strategy::kS1Ignore) || level > static_cast<int>(Strategy::kS4Restart)) {
    return "unknown";
  }
  return name(static_cast<greyhound::Strategy>(level - 1));
}

std::optional<Strategy> strategy_from_name(std::string_view name) noexcept {
  const std::optional<greyhound::Strategy> s = parse_strategy(name);
  if (!s) return std::nullopt;
  return static_cast<Strategy>(static_cast<int>(*s) + 1);
}

}  // namespace greyhound::mitigate
