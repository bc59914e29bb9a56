#include "daemon/metrics.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "greyhound/vocabulary.h"

namespace greyhound::master {
namespace {

using nlohmann::json;

// Every family the master exports: name, type, help (docs/operations.md lists them).
struct Spec {
  const char* name;
  const char* type;
  const char* help;
};
constexpr Spec kFamilies[] = {
    {"greyhound_master_up", "gauge", "1 while the master serves (its HTTP endpoint answers)"},
    {"greyhound_master_jobs", "gauge", "Jobs the master serves"},
    {"greyhound_master_redis_reconnects_total", "counter", "Reconnections of the master's Redis client"},
    {"greyhound_master_leader_values_taken_over_total", "counter",
     "Values in the masters' lease or a job's leader key that no master wrote (planted), taken over"},
    {"greyhound_master_status_read_seconds", "gauge",
     "What reading the served jobs' statuses (for /metrics and /status) cost the master's loop the last time"},
    {"greyhound_iteration_seconds", "gauge", "The job's latest iteration time (its pacing rank's, as the agents measure it)"},
    {"greyhound_rank_iteration_seconds", "gauge", "Each rank's latest iteration time"},
    {"greyhound_rank_iteration_age_seconds", "gauge", "Seconds since each rank's latest iteration was published"},
    {"greyhound_incident_open", "gauge", "1 while the job has an open incident (a slowdown not yet over)"},
    {"greyhound_incidents_total", "counter", "Incidents of the job (kept in the job store)"},
    {"greyhound_events_processed_total", "counter", "Events of the job's stream the master applied"},
    {"greyhound_events_rejected_total", "counter", "Malformed events of the job's stream the master skipped"},
    {"greyhound_event_gaps_total", "counter",
     "Times entries were trimmed from the job's stream before the master read them (events lost to it)"},
    {"greyhound_fail_slows_open", "gauge", "Fail-slows open, by cause"},
    {"greyhound_fail_slows_total", "counter", "Fail-slows opened since the master started, by cause"},
    {"greyhound_detections_total", "counter", "Slowdowns detected (incidents opened) since the master started"},
    {"greyhound_detection_latency_seconds", "summary", "From a slowdown's onset to its detection (job seconds)"},
    {"greyhound_localisations_total", "counter", "Localisations since the master started, by the cause they named"},
    {"greyhound_localisation_latency_seconds", "summary",
     "From an incident's detection to its first localisation that named a cause (job seconds)"},
    {"greyhound_remedy_latency_seconds", "summary",
     "From a fail-slow's localisation to its first remedy in force (job seconds)"},
    {"greyhound_plans_total", "counter", "Plans the job answered or let time out, by strategy and outcome"},
    {"greyhound_remedy_in_force", "gauge", "1 while a remedy is in force: S2 (an uneven split), S3 (a new placement)"},
    {"greyhound_microbatches", "gauge", "Micro-batches per DP replica in force"},
    {"greyhound_pauses_total", "counter", "Pauses finished since the master started: validations and link probes"},
    {"greyhound_early_profiles_total", "counter",
     "Early profiles (iterations slower than the job's level, before any agent decided a slowdown) since the master "
     "started: started, and used (an incident was localised from one)"},
    {"greyhound_unsteady_windows_total", "counter",
     "Profile windows the job's pace moved in by more than 5 % (a fault began or ended inside), from which no "
     "fail-slow was opened, since the master started"},
    {"greyhound_fail_stops_total", "counter", "Ranks whose process died (killed, crashed) since the master started, by rank"},
    {"greyhound_hangs_total", "counter", "Hung collectives named (members waiting for ranks that never joined) since the master started"},
    {"greyhound_group_collective_seconds", "gauge",
     "Device time per call of each communication group in the latest profile that timed the groups (its least member's)"},
    {"greyhound_group_bus_bandwidth_gbps", "gauge",
     "Bus bandwidth of each communication group in the latest profile that timed the groups (GB/s, as NCCL's tests count it)"},
    {"greyhound_settings_version", "gauge", "The version of the operator's settings (greyhoundctl set) the master applies"},
    {"greyhound_agent_settings_version", "gauge", "The version of the operator's settings the node's agent applies"},
    {"greyhound_detection_paused", "gauge", "1 while an operator has paused detection (greyhoundctl pause-detection)"},
    {"greyhound_agent_up", "gauge", "1 while the node's agent has a live heartbeat"},
    {"greyhound_agent_heartbeat_age_seconds", "gauge", "Seconds since the node agent's latest heartbeat"},
    {"greyhound_ring_records_read_total", "counter", "Ring records the node's agent read"},
    {"greyhound_ring_records_lost_total", "counter", "Ring records the node's agent lost (overwritten before read)"},
    {"greyhound_agent_events_dropped_total", "counter", "Events the node's agent dropped while Redis was away"},
    {"greyhound_agent_redis_reconnects_total", "counter", "Reconnections of the node agent's Redis client"},
};

constexpr Cause kCauses[] = {Cause::kComputation, Cause::kHost, Cause::kCommunication, Cause::kUnknown};

std::string hex_group(std::uint64_t g) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(g));
  return buf;
}

double number_or(const json& j, const char* key, double def) {
  const auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : def;
}

std::string int_label(const json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_number_integer() ? std::to_string(it->get<std::int64_t>()) : "";
}

}  // namespace

std::string prometheus_number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[32];
  if (v == std::trunc(v) && std::fabs(v) < 1e15) {  // counts and whole numbers as integers
    std::snprintf(buf, sizeof buf, "%.0f", v);
    return buf;
  }
  for (int precision = 1; precision <= 17; ++precision) {  // the shortest that reads back exactly
    std::snprintf(buf, sizeof buf, "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

std::string prometheus_label(const std::string& v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

void Exposition::family(const std::string& name, const char* type, const std::string& help) {
  if (families_.count(name) != 0) return;
  order_.push_back(name);
  Family& f = families_[name];
  f.type = type;
  for (char c : help) {  // HELP escapes backslash and newline
    if (c == '\\') {
      f.help += "\\\\";
    } else if (c == '\n') {
      f.help += "\\n";
    } else {
      f.help += c;
    }
  }
}

void Exposition::sample(const std::string& name, const Labels& labels, double value, const char* suffix) {
  const auto it = families_.find(name);
  if (it == families_.end()) return;  // undeclared: a bug here, not a line out of its block
  std::string line = name + suffix;
  if (!labels.empty()) {
    line += '{';
    for (std::size_t i = 0; i < labels.size(); ++i) {
      line += (i ? "," : "") + labels[i].first + "=\"" + prometheus_label(labels[i].second) + "\"";
    }
    line += '}';
  }
  line += ' ' + prometheus_number(value);
  it->second.lines.push_back(std::move(line));
}

std::string Exposition::text() const {
  std::string out;
  for (const std::string& name : order_) {
    const Family& f = families_.at(name);
    out += "# HELP " + name + " " + f.help + "\n# TYPE " + name + " " + f.type + "\n";
    for (const std::string& l : f.lines) out += l + "\n";
  }
  return out;
}

void master_metrics(Exposition& out, const MasterMetrics& m) {
  for (const Spec& s : kFamilies) out.family(s.name, s.type, s.help);
  out.sample("greyhound_master_up", {}, 1);
  out.sample("greyhound_master_jobs", {}, static_cast<double>(m.jobs));
  out.sample("greyhound_master_redis_reconnects_total", {}, static_cast<double>(m.redis_reconnects));
  out.sample("greyhound_master_leader_values_taken_over_total", {}, static_cast<double>(m.leader_values_taken_over));
  out.sample("greyhound_master_status_read_seconds", {}, m.status_read_s);
}

void job_metrics(Exposition& out, const std::string& job, const Controller& c, const json& status) {
  for (const Spec& s : kFamilies) out.family(s.name, s.type, s.help);
  const Exposition::Labels j = {{"job", job}};
  const auto with = [&](Exposition::Labels more) {
    Exposition::Labels l = j;
    l.insert(l.end(), more.begin(), more.end());
    return l;
  };
  const ControllerStats& st = c.stats();

  if (c.iteration_s() > 0) out.sample("greyhound_iteration_seconds", j, c.iteration_s());
  if (c.loaded()) {
    const MasterState& ms = c.state();
    out.sample("greyhound_incident_open", j, c.open_incident() ? 1 : 0);
    out.sample("greyhound_incidents_total", j, static_cast<double>(ms.incidents_total));
    out.sample("greyhound_events_processed_total", j, static_cast<double>(ms.events_processed));
    out.sample("greyhound_events_rejected_total", j, static_cast<double>(ms.events_rejected));
    out.sample("greyhound_event_gaps_total", j, static_cast<double>(ms.event_gaps));
    std::map<Cause, int> open;
    for (const FailSlow& f : ms.fail_slows) ++open[f.cause];
    for (Cause cause : kCauses) {
      out.sample("greyhound_fail_slows_open", with({{"cause", std::string(name(cause))}}), open[cause]);
    }
  }
  for (Cause cause : kCauses) {
    const std::string n(name(cause));
    const auto f = st.fail_slows.find(n);
    out.sample("greyhound_fail_slows_total", with({{"cause", n}}), f == st.fail_slows.end() ? 0 : static_cast<double>(f->second));
    const auto l = st.localisations.find(n);
    out.sample("greyhound_localisations_total", with({{"cause", n}}),
               l == st.localisations.end() ? 0 : static_cast<double>(l->second));
  }
  out.sample("greyhound_detections_total", j, static_cast<double>(st.detections));
  for (const auto& [family, lat] : {std::pair<const char*, const Latency*>{"greyhound_detection_latency_seconds", &st.detection},
                                    {"greyhound_localisation_latency_seconds", &st.localisation},
                                    {"greyhound_remedy_latency_seconds", &st.remedy}}) {
    out.sample(family, j, lat->sum_s, "_sum");
    out.sample(family, j, static_cast<double>(lat->count), "_count");
  }
  for (const auto& [key, n] : st.plans) {
    out.sample("greyhound_plans_total", with({{"strategy", key.first}, {"outcome", key.second}}), static_cast<double>(n));
  }
  out.sample("greyhound_settings_version", j, static_cast<double>(c.settings().version));
  out.sample("greyhound_detection_paused", j, c.settings().detection_paused.value_or(false) ? 1 : 0);
  out.sample("greyhound_pauses_total", with({{"kind", "validation"}}), static_cast<double>(st.validations));
  out.sample("greyhound_pauses_total", with({{"kind", "probe"}}), static_cast<double>(st.probes));
  out.sample("greyhound_early_profiles_total", with({{"outcome", "started"}}), static_cast<double>(st.early_profiles));
  out.sample("greyhound_early_profiles_total", with({{"outcome", "used"}}), static_cast<double>(st.early_localisations));
  out.sample("greyhound_unsteady_windows_total", j, static_cast<double>(st.unsteady_windows));
  out.sample("greyhound_hangs_total", j, static_cast<double>(st.hangs));
  for (const auto& [rank, n] : st.fail_stops) {
    out.sample("greyhound_fail_stops_total", with({{"rank", std::to_string(rank)}}), static_cast<double>(n));
  }
  if (const Planner* p = c.planner()) {
    out.sample("greyhound_remedy_in_force", with({{"strategy", "S2"}}), p->split_in_force() ? 1 : 0);
    out.sample("greyhound_remedy_in_force", with({{"strategy", "S3"}}), p->moved() ? 1 : 0);
    const auto& mb = p->current().microbatches;
    for (std::size_t d = 0; d < mb.size(); ++d) {
      out.sample("greyhound_microbatches", with({{"dp", std::to_string(d)}}), mb[d]);
    }
  }
  for (const GroupTiming& g : st.groups) {
    const Exposition::Labels l = with({{"group", hex_group(g.group)}, {"op", g.op}});
    out.sample("greyhound_group_collective_seconds", l, g.seconds_per_call);
    if (g.bus_gb_per_s > 0) out.sample("greyhound_group_bus_bandwidth_gbps", l, g.bus_gb_per_s);
  }

  if (!status.is_object()) return;
  for (const json& r : status.value("ranks", json::array())) {
    if (!r.is_object() || !r.contains("iter_ms")) continue;
    const std::string rank = int_label(r, "rank");
    out.sample("greyhound_rank_iteration_seconds", with({{"rank", rank}, {"node", int_label(r, "node")}}),
               number_or(r, "iter_ms", 0) * 1e-3);
    out.sample("greyhound_rank_iteration_age_seconds", with({{"rank", rank}}), number_or(r, "age_s", 0));
  }
  for (const json& n : status.value("nodes", json::array())) {
    if (!n.is_object()) continue;
    const Exposition::Labels l = with({{"node", int_label(n, "node")}});
    const bool alive = n.value("alive", false);
    out.sample("greyhound_agent_up", l, alive ? 1 : 0);
    if (!alive) continue;
    out.sample("greyhound_agent_heartbeat_age_seconds", l, number_or(n, "heartbeat_age_s", 0));
    out.sample("greyhound_agent_settings_version", l, number_or(n, "settings_version", 0));
    out.sample("greyhound_ring_records_read_total", l, number_or(n, "records_read", 0));
    out.sample("greyhound_ring_records_lost_total", l, number_or(n, "records_lost", 0));
    out.sample("greyhound_agent_events_dropped_total", l, number_or(n, "events_dropped", 0));
    out.sample("greyhound_agent_redis_reconnects_total", l, number_or(n, "redis_reconnects", 0));
  }
}

}  // namespace greyhound::master
