#include "sim/simcluster/time_scale.h"

#include <cmath>

#include <nlohmann/json.hpp>

#include "common/bounded_json.h"

namespace greyhound::sim {

std::string time_scale_error(double x) {
  if (!std::isfinite(x) || x <= 0 || x > kMaxTimeScale) {
    return "must be a number > 0 and <= 1e6 (job seconds per simulated second)";
  }
  return "";
}

FaultFile parse_fault_file(const std::string& text) {
  auto parsed = parse_bounded(text);
  if (!parsed) throw FaultScheduleError(parsed.error());
  nlohmann::json& j = *parsed;
  FaultFile out;
  if (j.is_object() && j.contains("time_scale")) {
    const nlohmann::json& x = j.at("time_scale");
    if (!x.is_number()) throw FaultScheduleError("time_scale: " + time_scale_error(NAN));
    if (const std::string why = time_scale_error(x.get<double>()); !why.empty()) {
      throw FaultScheduleError("time_scale: " + why);
    }
    out.time_scale = x.get<double>();
    j.erase("time_scale");
  }
  out.faults = FaultSchedule::parse(j);
  return out;
}

}  // namespace greyhound::sim
