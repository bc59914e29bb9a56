#include "daemon/master.h"

#include <spdlog/spdlog.h>

#include "greyhound/redis_keys.h"

namespace greyhound::master {
namespace {

RedisClient::Options redis_options(const RedisEndpoint& e) {
  RedisClient::Options o;
  o.endpoint = e;
  o.connect_timeout = std::chrono::milliseconds(300);
  o.command_timeout = std::chrono::milliseconds(1000);
  o.backoff_min = std::chrono::milliseconds(200);
  o.backoff_max = std::chrono::milliseconds(2000);
  return o;
}

std::string field(const RedisReply& fields, const std::string& name) {
  for (std::size_t i = 0; i + 1 < fields.elements.size(); i += 2) {
    if (fields.elements[i].str == name) return fields.elements[i + 1].str;
  }
  return {};
}

}  // namespace

Master::Master(MasterConfig config) : cfg_(std::move(config)), redis_(redis_options(cfg_.redis)) {
  if (!cfg_.event_log.empty()) {
    log_.open(cfg_.event_log, std::ios::app);
    if (!log_) spdlog::error("cannot open the event log {}", cfg_.event_log);
  }
}

void Master::warn_once(const std::string& kind, const std::string& message) {
  if (warned_.insert(kind).second) spdlog::warn("{} (further ones of this kind are not logged)", message);
}

void Master::log_line(const nlohmann::json& j) {
  if (!log_.is_open()) return;
  log_ << j.dump() << '\n';
  log_.flush();
}

bool Master::load() {
  MasterState state;
  auto r = redis_.command({"GET", keys::master(cfg_.job)});
  if (!r) return false;
  if (r->type == RedisReply::Type::kString) {
    std::string err;
    if (auto s = parse_master_state(r->str, &err)) {
      state = *s;
    } else {
      warn_once("state", "master state of job " + cfg_.job + " is malformed (" + err + "): rebuilding from the stream");
    }
  } else if (r->is_error()) {
    warn_once("state", "master state of job " + cfg_.job + " unreadable (" + r->str + "): rebuilding from the stream");
  }
  std::optional<Incident> open;
  if (state.open_incident > 0) {
    auto ir = redis_.command({"GET", keys::incident(cfg_.job, state.open_incident)});
    if (!ir) return false;
    std::string err;
    if (ir->type == RedisReply::Type::kString) {
      open = parse_incident(ir->str, &err);
      if (!open) warn_once("incident", "incident " + std::to_string(state.open_incident) + " is malformed (" + err + ")");
    }
  }
  tracker_.emplace(state, open);
  loaded_at_reconnects_ = redis_.reconnects();
  spdlog::info("job {}: state {}, cursor {}, {} incidents so far{}", cfg_.job, tracker_->state().state,
               tracker_->state().cursor, tracker_->state().incidents_total,
               open ? ", incident " + std::to_string(open->id) + " open" : "");
  return true;
}

int Master::tick() {
  if (!redis_.ensure_connected()) {
    warn_once("redis-down", redis_.last_error() + "; retrying");
    return 0;
  }
  if (warned_.erase("redis-down") != 0) spdlog::info("connected to Redis at {}", redis_.endpoint().describe());
  if ((!tracker_ || loaded_at_reconnects_ != redis_.reconnects()) && !load()) return 0;

  auto r = redis_.command({"XREAD", "COUNT", std::to_string(cfg_.batch), "STREAMS", keys::events(cfg_.job),
                           tracker_->state().cursor});
  if (!r) return 0;
  if (r->is_error()) {
    warn_once("xread:" + r->str, "cannot read the event stream of job " + cfg_.job + ": " + r->str);
    return 0;
  }
  if (r->type != RedisReply::Type::kArray || r->elements.empty() || r->elements[0].elements.size() < 2) return 0;
  const auto& entries = r->elements[0].elements[1].elements;
  if (entries.empty()) return 0;

  IncidentTracker next = *tracker_;  // applied to a copy: committed only if Redis took it all
  MasterState st = next.state();
  std::vector<std::vector<std::string>> cmds = {{"MULTI"}};
  std::vector<nlohmann::json> log_lines;
  std::vector<Incident> changed;
  std::vector<Event> emitted;
  std::string cursor = st.cursor;
  std::int64_t rejected = 0;
  for (const auto& entry : entries) {
    if (entry.elements.size() < 2) continue;
    cursor = entry.elements[0].str;
    const std::string text = field(entry.elements[1], "json");
    std::string err;
    auto e = parse_event(text, &err);
    if (!e) {
      ++rejected;
      warn_once("event:" + err.substr(0, err.find(':')), "skipping malformed event " + cursor + " of job " + cfg_.job +
                                                             ": " + err);
      log_lines.push_back({{"id", cursor}, {"rejected", err}});
      continue;
    }
    log_lines.push_back({{"id", cursor}, {"event", to_json(*e)}});
    Decision d;
    next.apply(*e, d);
    if (d.incident) changed.push_back(*d.incident);
    for (auto& m : d.emit) emitted.push_back(std::move(m));
  }
  MasterState final_state = next.state();
  final_state.cursor = cursor;
  final_state.events_rejected += rejected;
  final_state.updated_unix_ms = unix_ms_now();
  for (const Incident& i : changed) {
    cmds.push_back({"SET", keys::incident(cfg_.job, i.id), to_json(i).dump()});
    cmds.push_back({"ZADD", keys::incidents(cfg_.job), std::to_string(i.id), std::to_string(i.id)});
  }
  for (const Event& m : emitted) {
    cmds.push_back({"XADD", keys::events(cfg_.job), "MAXLEN", "~", "100000", "*", "json", to_json(m).dump()});
  }
  cmds.push_back({"SET", keys::master(cfg_.job), to_json(final_state).dump()});
  cmds.push_back({"SADD", keys::jobs(), cfg_.job});
  cmds.push_back({"EXEC"});
  auto replies = redis_.pipeline(cmds);
  if (!replies || replies->back().type != RedisReply::Type::kArray) {
    warn_once("commit", "could not commit master state of job " + cfg_.job + "; will retry from the stored cursor");
    tracker_.reset();  // reload what Redis holds
    return 0;
  }
  *tracker_ = IncidentTracker(final_state, next.open_incident());
  const auto now = unix_ms_now();
  for (auto& l : log_lines) {
    l["t_unix_ms"] = now;
    l["job"] = cfg_.job;
    log_line(l);
  }
  for (const Event& m : emitted) {
    log_line({{"t_unix_ms", now}, {"job", cfg_.job}, {"emitted", to_json(m)}});
    spdlog::info("job {}: {} incident {} (x{:.2f}, ranks {})", cfg_.job, m.type, m.incident, m.ratio,
                 m.detail.value("ranks", nlohmann::json::array()).dump());
  }
  return static_cast<int>(entries.size());
}

}  // namespace greyhound::master
