#include "greyhound/mitigate/plan_decision.h"

namespace greyhound::mitigate {

std::string_view strategy_name(Strategy s) noexcept {
  switch (s) {
    case Strategy::kS1Ignore: return "S1";
    case Strategy::kS2Microbatches: return "S2";
    case Strategy::kS3Topology: return "S3";
    case Strategy::kS4Restart: return "S4";
  }
  return "unknown";
}

std::optional<Strategy> strategy_from_name(std::string_view name) noexcept {
  for (Strategy s : {Strategy::kS1Ignore, Strategy::kS2Microbatches, Strategy::kS3Topology,
                     Strategy::kS4Restart}) {
    if (name == strategy_name(s)) return s;
  }
  return std::nullopt;
}

}  // namespace greyhound::mitigate
