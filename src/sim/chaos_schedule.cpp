#include "sim/chaos_schedule.h"

#include <algorithm>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "common/bounded_json.h"
#include "common/text.h"

namespace greyhound::sim {

std::vector<ChaosAction> parse_chaos(const nlohmann::json& j, int nodes) {
  if (!j.is_array()) throw std::invalid_argument("--chaos: must be a JSON array of actions");
  std::vector<ChaosAction> out;
  for (std::size_t i = 0; i < j.size(); ++i) {
    const std::string where = "--chaos[" + std::to_string(i) + "]";
    const auto& a = j[i];
    if (!a.is_object()) throw std::invalid_argument(where + ": must be an object");
    ChaosAction c;
    if (!a.contains("at_s") || !a["at_s"].is_number() || a["at_s"].get<double>() < 0) {
      throw std::invalid_argument(where + ".at_s: must be a number >= 0");
    }
    c.at_s = a["at_s"].get<double>();
    if (!a.contains("action") || !a["action"].is_string() ||
        (a["action"] != "kill" && a["action"] != "start" && a["action"] != "stop" && a["action"] != "cont" &&
         a["action"] != "busy")) {
      throw std::invalid_argument(where + ".action: must be \"kill\", \"start\", \"stop\", \"cont\" or \"busy\"");
    }
    c.action = a["action"].get<std::string>();
    if (!a.contains("target") || !a["target"].is_string()) throw std::invalid_argument(where + ".target: missing");
    c.target = a["target"].get<std::string>();
    if (c.target != "redis" && c.target != "master" && c.target != "leader" && c.target.rfind("agent:", 0) != 0) {
      throw std::invalid_argument(where + ".target: must be \"redis\", \"master\", \"leader\" or \"agent:<node>\"");
    }
    if (c.action == "busy") {
      if (c.target != "redis") throw std::invalid_argument(where + ".action: only Redis is made busy");
      if (!a.contains("for_s") || !a["for_s"].is_number() || !(a["for_s"].get<double>() > 0) ||
          a["for_s"].get<double>() > 600) {
        throw std::invalid_argument(where + ".for_s: a busy Redis needs a duration in (0, 600] s");
      }
      c.for_s = a["for_s"].get<double>();
    }
    if (c.target == "leader" && c.action != "kill") {
      throw std::invalid_argument(where + ".action: the leader can only be killed (\"start\" it as \"master\")");
    }
    if (c.target.rfind("agent:", 0) == 0) {
      const std::string n = c.target.substr(6);
      if (n.empty() || n.find_first_not_of("0123456789") != std::string::npos) {
        throw std::invalid_argument(where + ".target: agent:<node> needs a node number");
      }
      if (n.size() > 6 || std::stoi(n) >= nodes) {
        throw std::invalid_argument(where + ".target: " + printable(c.target, 32) + ": the cluster has nodes 0.." +
                                    std::to_string(nodes - 1));
      }
      c.node = std::stoi(n);
    }
    out.push_back(c);
  }
  std::stable_sort(out.begin(), out.end(), [](const ChaosAction& a, const ChaosAction& b) { return a.at_s < b.at_s; });
  return out;
}

std::vector<ChaosAction> parse_chaos_text(const std::string& text, int nodes) {
  auto j = parse_bounded(text);
  if (!j) throw std::invalid_argument("--chaos: " + j.error());
  return parse_chaos(*j, nodes);
}

}  // namespace greyhound::sim
