// Every reader of a value in Redis (store/messages.h) on any text, the first byte choosing the reader: it
// never crashes, a refusal says why, and what it accepts it writes back in a form it reads again unchanged
// (a value greyhound writes is always one greyhound reads). The timeline (store/timeline.h) renders any
// events it is given.
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/bounded_json.h"
#include "fuzz/fuzz_check.h"
#include "store/messages.h"
#include "store/timeline.h"

namespace {

namespace gh = greyhound;
using greyhound::fuzz::check;

// A reader of a whole text value (a key's value or a stream entry's "json" field).
template <class T>
void text_reader(std::optional<T> (*parse)(const std::string&, std::string*), const std::string& text) {
  std::string error;
  const std::optional<T> v = parse(text, &error);
  if (!v) {
    check(!error.empty(), "a refusal says why");
    return;
  }
  const std::string once = gh::to_json(*v).dump();
  std::string again_error;
  const std::optional<T> again = parse(once, &again_error);
  check(again.has_value(), "what it accepted it reads back: " + again_error + " in " + once);
  check(gh::to_json(*again).dump() == once, "and unchanged: " + once);
}

// A reader of a part of a value (an event's detail, a plan inside an event), given the bounded JSON.
template <class T>
void json_reader(std::optional<T> (*parse)(const nlohmann::json&, std::string*), const std::string& text) {
  auto j = gh::parse_bounded(text);
  if (!j) return;
  std::string error;
  const std::optional<T> v = parse(*j, &error);
  if (!v) {
    check(!error.empty(), "a refusal says why");
    return;
  }
  const std::string once = gh::to_json(*v).dump();
  auto wire = gh::parse_bounded(once);
  check(wire.ok(), "what it writes is bounded JSON: " + wire.error());
  std::string again_error;
  const std::optional<T> again = parse(*wire, &again_error);
  check(again.has_value(), "what it accepted it reads back: " + again_error + " in " + once);
  check(gh::to_json(*again).dump() == once, "and unchanged: " + once);
}

void layout_rules(const std::string& text) {
  std::string error;
  const auto layout = gh::parse_job_layout(text, &error);
  if (!layout) return;
  check(gh::layout_error(*layout).empty(), "a layout read is one that meets the rules");
  check(gh::placement_error(*layout, gh::megatron_placement(*layout)).empty(), "Megatron's placement fits it");
}

void setting(const std::string& text) {
  const std::size_t eq = text.find('=');
  if (eq == std::string::npos) return;
  gh::JobSettings s;
  const std::string why = gh::apply_job_setting(s, text.substr(0, eq), text.substr(eq + 1));
  if (!why.empty()) return;
  std::string error;
  const auto back = gh::parse_job_settings(gh::to_json(s).dump(), &error);
  check(back.has_value(), "a setting accepted leaves settings that read back: " + error);
}

void timeline(const std::string& text) {
  auto j = gh::parse_bounded(text);
  if (!j) return;
  if (j->is_array() && j->size() == 2) {
    (void)gh::store::format_timeline((*j)[0], (*j)[1]);
  } else {
    (void)gh::store::format_timeline(nlohmann::json::array(), *j);
  }
}

const std::vector<std::function<void(const std::string&)>>& readers() {
  static const std::vector<std::function<void(const std::string&)>> all = {
      [](const std::string& t) { text_reader(gh::parse_event, t); },
      [](const std::string& t) { text_reader(gh::parse_rank_registration, t); },
      [](const std::string& t) { text_reader(gh::parse_agent_heartbeat, t); },
      [](const std::string& t) { text_reader(gh::parse_iteration_update, t); },
      [](const std::string& t) { text_reader(gh::parse_command, t); },
      [](const std::string& t) { text_reader(gh::parse_incident, t); },
      [](const std::string& t) { text_reader(gh::parse_master_state, t); },
      [](const std::string& t) { text_reader(gh::parse_job_layout, t); },
      [](const std::string& t) { text_reader(gh::parse_job_settings, t); },
      [](const std::string& t) { text_reader(gh::parse_plan, t); },
      [](const std::string& t) { text_reader(gh::parse_operator_plan_request, t); },
      [](const std::string& t) { text_reader(gh::parse_operator_plan_report, t); },
      [](const std::string& t) { text_reader(gh::parse_plan_ack, t); },
      [](const std::string& t) { text_reader(gh::parse_preflight_request, t); },
      [](const std::string& t) { text_reader(gh::parse_preflight_report_text, t); },
      [](const std::string& t) { text_reader(gh::parse_restart_request, t); },
      [](const std::string& t) { json_reader(gh::event_from_json, t); },
      [](const std::string& t) { json_reader(gh::fail_slow_from_json, t); },
      [](const std::string& t) { json_reader(gh::plan_from_json, t); },
      [](const std::string& t) { json_reader(gh::parse_stall_detail, t); },
      [](const std::string& t) { json_reader(gh::parse_hang_detail, t); },
      [](const std::string& t) { json_reader(gh::parse_change_detail, t); },
      [](const std::string& t) { json_reader(gh::parse_period_change_detail, t); },
      [](const std::string& t) { json_reader(gh::parse_command_ack_detail, t); },
      [](const std::string& t) { json_reader(gh::parse_pause_report, t); },
      [](const std::string& t) { json_reader(gh::parse_validated_report, t); },
      [](const std::string& t) { json_reader(gh::parse_preflight_report, t); },
      [](const std::string& t) { json_reader(gh::parse_agent_stop_detail, t); },
      [](const std::string& t) { json_reader(gh::parse_fail_stop_detail, t); },
      [](const std::string& t) { json_reader(gh::parse_profile_report, t); },
      [](const std::string& t) { json_reader(gh::parse_incident_detail, t); },
      [](const std::string& t) { json_reader(gh::parse_localisation_report, t); },
      [](const std::string& t) { json_reader(gh::parse_baseline_report, t); },
      [](const std::string& t) { json_reader(gh::parse_plan_outcome, t); },
      [](const std::string& t) { json_reader(gh::parse_fail_slow_detail, t); },
      [](const std::string& t) { json_reader(gh::parse_remedy_check, t); },
      [](const std::string& t) { json_reader(gh::parse_job_restart, t); },
      [](const std::string& t) { json_reader(gh::parse_leader_detail, t); },
      [](const std::string& t) { layout_rules(t); },
      [](const std::string& t) { (void)gh::plan_epoch_named(t); },
      [](const std::string& t) { setting(t); },
      [](const std::string& t) { timeline(t); },
  };
  return all;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const auto& all = readers();
  all[data[0] % all.size()](greyhound::fuzz::text_of(data + 1, size - 1));
  return 0;
}
