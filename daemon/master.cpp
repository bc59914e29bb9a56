#include "daemon/master.h"

#include <spdlog/spdlog.h>

#include "common/record_json.h"
#include "greyhound/redis_keys.h"

namespace greyhound::master {
namespace {

std::string field(const RedisReply& fields, const std::string& name) {
  for (std::size_t i = 0; i + 1 < fields.elements.size(); i += 2) {
    if (fields.elements[i].str == name) return fields.elements[i + 1].str;
  }
  return {};
}

}  // namespace

Master::Master(MasterConfig config)
    : cfg_(std::move(config)), redis_(RedisClient::Options::for_daemon(cfg_.redis, std::chrono::milliseconds(1000))) {
  constexpr const char* kDigits = "0123456789abcdefghijklmnopqrstuvwxyz";
  for (auto t = static_cast<std::uint64_t>(unix_ms_now()); t > 0; t /= 36) run_tag_.insert(run_tag_.begin(), kDigits[t % 36]);
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
  resume_open_incident_ = open.has_value();
  spdlog::info("job {}: state {}, cursor {}, {} incidents so far{}", cfg_.job, tracker_->state().state,
               tracker_->state().cursor, tracker_->state().incidents_total,
               open ? ", incident " + std::to_string(open->id) + " open" : "");
  return true;
}

int Master::read_events(std::vector<Event>& applied) {
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
  std::vector<Event> pending_applied;
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
    pending_applied.push_back(*e);
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
  applied.insert(applied.end(), pending_applied.begin(), pending_applied.end());
  applied.insert(applied.end(), emitted.begin(), emitted.end());
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



int Master::tick() {
  std::vector<Event> applied;
  const int n = read_events(applied);
  if (!tracker_ || !redis_.connected()) return n;
  for (const Event& e : applied) {
    if (e.type == event_type::kProfile && profiling_ && e.detail.is_object() &&
        e.detail.value("request", std::string()) == profiling_->id) {
      if (auto v = profile_view(e)) profiling_->got[e.rank] = *v;
    }
    if (e.source == "master" && (e.type == event_type::kIncidentOpen || e.type == event_type::kIncidentUpdate)) {
      if (profiling_ && profiling_->baseline) profiling_.reset();  // not healthy any more: no reference
      // A slowdown that began before the baseline's window ended was in it: the reference is not healthy.
      if (baseline_ && e.type == event_type::kIncidentOpen && e.detail.is_object() &&
          e.detail.value("onset_t_s", e.t_s) < baseline_end_t_s_) {
        spdlog::info("job {}: the baseline overlapped the onset of this slowdown; discarded", cfg_.job);
        baseline_.reset();
      }
      start_profiling(e.type == event_type::kIncidentOpen ? "incident opened" : "incident worsened");
    }
    if (e.source == "master" && e.type == event_type::kIncidentClose && cfg_.mitigate) {
      // Closed by recovery reports while a remedy is in force (also one applied before this master
      // restarted: the job's layout says so): put the original configuration back.
      if (auto l = read_layout()) layout_ = l;
      const bool changed = planner_ ? !planner_->reverted_to_original()
                                    : layout_ && layout_->microbatches != layout_->initial_microbatches;
      if (changed && layout_ && !pending_) {
        Plan p;
        p.strategy = "S1";
        p.action = "revert";
        p.incident = e.incident;
        p.microbatches = planner_ ? planner_->original_microbatches() : layout_->initial_microbatches;
        p.reason = "incident closed: back to the original configuration";
        publish_plan(p);
      }
      planner_.reset();
    }
    if (e.source == "master" && e.type == event_type::kIncidentClose) healthy_since_ = Clock::now();
  }
  if (profiling_ && (profiling_->got.size() >= profiling_->expected.size() || Clock::now() >= profiling_->deadline)) {
    finish_profiling();
  }
  // An incident left open by an earlier run of this master (or across a Redis restart): localise it again,
  // which also resumes its planning (the job's layout says what is in force).
  if (resume_open_incident_) {
    resume_open_incident_ = false;
    if (tracker_->open_incident() && !planner_ && !profiling_) start_profiling("resuming the open incident");
  }
  check_acks();
  drive_planner();
  // While a remedy is in force, keep measuring: the fail-slow may have ended.
  if (planner_ && !profiling_ && Clock::now() - last_profile_ >= std::chrono::duration<double>(cfg_.reprofile_s)) {
    start_profiling("re-profiling while mitigating");
  }
  // While healthy, a reference profile now and then: what each group's transfers take when all is well.
  const auto now = Clock::now();
  if (cfg_.baseline_every_s > 0 && !profiling_ && !tracker_->open_incident() && !pending_ &&
      now - healthy_since_ >= std::chrono::duration<double>(cfg_.baseline_after_s) &&
      (!baseline_ || now - baseline_at_ >= std::chrono::duration<double>(cfg_.baseline_every_s)) &&
      now - last_profile_ >= std::chrono::duration<double>(cfg_.reprofile_s)) {
    start_profiling("healthy baseline", true);
  }
  return n;
}

bool Master::publish(const Decision& d) {
  std::vector<std::vector<std::string>> cmds = {{"MULTI"}};
  if (d.incident) {
    cmds.push_back({"SET", keys::incident(cfg_.job, d.incident->id), to_json(*d.incident).dump()});
    cmds.push_back({"ZADD", keys::incidents(cfg_.job), std::to_string(d.incident->id), std::to_string(d.incident->id)});
  }
  for (const Event& m : d.emit) {
    cmds.push_back({"XADD", keys::events(cfg_.job), "MAXLEN", "~", "100000", "*", "json", to_json(m).dump()});
  }
  MasterState st = tracker_->state();
  st.updated_unix_ms = unix_ms_now();
  cmds.push_back({"SET", keys::master(cfg_.job), to_json(st).dump()});
  cmds.push_back({"EXEC"});
  auto r = redis_.pipeline(cmds);
  if (!r || r->back().type != RedisReply::Type::kArray) return false;
  for (const Event& m : d.emit) {
    log_line({{"t_unix_ms", unix_ms_now()}, {"job", cfg_.job}, {"emitted", to_json(m)}});
    spdlog::info("job {}: {} {}", cfg_.job, m.type, m.detail.dump());
  }
  return true;
}

bool Master::publish_event(const Event& e) {
  Decision d;
  d.emit.push_back(e);
  return publish(d);
}

double Master::job_now_s() {
  // The job's clock, read off the newest iteration report (the master has no clock of its own in job time).
  auto r = redis_.command({"GET", keys::iter(cfg_.job, iteration_rank_ >= 0 ? iteration_rank_ : 0)});
  if (r && r->type == RedisReply::Type::kString) {
    std::string err;
    if (auto u = parse_iteration_update(r->str, &err)) {
      return u->t_s + static_cast<double>(unix_ms_now() - u->t_unix_ms) * 1e-3;
    }
  }
  return tracker_ && tracker_->open_incident() ? tracker_->open_incident()->detected_t_s : 0.0;
}

void Master::start_profiling(const std::string& why, bool baseline) {
  if (profiling_) return;
  auto nodes = redis_.command({"SMEMBERS", keys::agents(cfg_.job)});
  auto ranks = redis_.command({"SMEMBERS", keys::ranks(cfg_.job)});
  if (!nodes || !ranks || nodes->elements.empty()) return;
  Profiling p;
  p.baseline = baseline;
  p.id = (baseline ? "baseline-" : "profile-") + std::to_string(tracker_->state().incidents_total) + "-" +
         std::to_string(++profiles_requested_) + "." + run_tag_;
  for (const auto& r : ranks->elements) {
    char* end = nullptr;
    const long v = std::strtol(r.str.c_str(), &end, 10);
    if (*end == '\0' && v >= 0) p.expected.insert(static_cast<int>(v));
  }
  Command c;
  c.cmd = "profile";
  c.id = p.id;
  c.args = {{"duration_s", cfg_.profile_s}};
  for (const auto& n : nodes->elements) {
    char* end = nullptr;
    const long node = std::strtol(n.str.c_str(), &end, 10);
    if (*end != '\0' || node < 0) continue;
    redis_.command({"XADD", keys::commands(cfg_.job, static_cast<int>(node)), "MAXLEN", "~", "1000", "*", "json",
                    to_json(c).dump()});
  }
  p.deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                  std::chrono::duration<double>(cfg_.profile_s + cfg_.profile_grace_s));
  spdlog::info("job {}: {}: profiling {} ranks ({})", cfg_.job, why, p.expected.size(), p.id);
  profiling_ = std::move(p);
  last_profile_ = Clock::now();
  if (!baseline && tracker_->open_incident() && tracker_->state().state == "slow") {
    tracker_->set_phase("profiling");
    publish(Decision{});
  }
}

std::optional<JobLayout> Master::read_layout() {
  auto r = redis_.command({"GET", keys::layout(cfg_.job)});
  if (!r || r->type != RedisReply::Type::kString) return std::nullopt;
  std::string err;
  auto l = parse_job_layout(r->str, &err);
  if (!l) warn_once("layout", "layout of job " + cfg_.job + " is malformed (" + err + ")");
  return l;
}

std::vector<GroupMembers> Master::read_groups() {
  std::vector<GroupMembers> out;
  auto ids = redis_.command({"SMEMBERS", keys::groups(cfg_.job)});
  if (!ids) return out;
  for (const auto& id : ids->elements) {
    auto h = redis_.command({"HGETALL", keys::group(cfg_.job, id.str)});
    if (!h || h->type != RedisReply::Type::kArray) continue;
    std::map<std::string, std::string> f;
    for (std::size_t i = 0; i + 1 < h->elements.size(); i += 2) f[h->elements[i].str] = h->elements[i + 1].str;
    GroupMembers g;
    if (!parse_group_id_hex(id.str, &g.group)) continue;
    const int size = f.count("size") ? std::atoi(f["size"].c_str()) : 0;
    if (size < 1 || size > (1 << 20)) continue;
    bool complete = true;
    for (int i = 0; i < size; ++i) {
      auto it = f.find("member:" + std::to_string(i));
      if (it == f.end()) {
        complete = false;
        break;
      }
      g.members.push_back(std::atoi(it->second.c_str()));
    }
    if (!complete) continue;
    // What the group moves per iteration: the op/size kinds its first member reported.
    std::set<std::string> kinds;
    for (const auto& [k, v] : f) {
      if (k.rfind("ops:", 0) != 0) continue;
      try {
        const nlohmann::json ops = nlohmann::json::parse(v);
        if (ops.is_object()) {
          for (const auto& [op, cnt] : ops.items()) kinds.insert(op);
        }
      } catch (const nlohmann::json::exception&) {
        warn_once("group-ops", "group " + id.str + " of job " + cfg_.job + " has malformed op counts");
      }
      break;
    }
    g.signature = std::to_string(size);
    for (const auto& k : kinds) g.signature += "|" + k;
    out.push_back(std::move(g));
  }
  return out;
}

void Master::finish_profiling() {
  Profiling p = std::move(*profiling_);
  profiling_.reset();
  std::vector<ProfileView> views;
  for (const auto& [r, v] : p.got) views.push_back(v);
  if (p.baseline) {
    if (auto b = group_baseline(views, read_groups()); b && b->ranks == static_cast<int>(p.expected.size())) {
      baseline_ = std::move(b);
      baseline_at_ = Clock::now();
      baseline_end_t_s_ = job_now_s();
      Event e;
      e.type = event_type::kBaseline;
      e.t_s = job_now_s();
      e.t_unix_ms = unix_ms_now();
      e.source = "master";
      e.detail = {{"request", p.id}, {"ranks_profiled", baseline_->ranks}, {"groups", baseline_->least_ms.size()},
                  {"iter_ms", baseline_->step_ms}};
      publish_event(e);
    } else {
      spdlog::info("job {}: baseline {} incomplete ({} of {} ranks with iterations); trying again later", cfg_.job,
                   p.id, views.size(), p.expected.size());
      baseline_at_ = Clock::now() - std::chrono::duration_cast<Clock::duration>(
                                        std::chrono::duration<double>(cfg_.baseline_every_s));
    }
    return;
  }
  if (auto l = read_layout(); l && !pending_) layout_ = l;  // the job republishes it after each plan
  const Localisation loc = localise(views, read_groups(), layout_, baseline_ ? &*baseline_ : nullptr);
  Event e;
  e.type = event_type::kLocalised;
  e.t_s = job_now_s();
  e.t_unix_ms = unix_ms_now();
  e.source = "master";
  e.rank = loc.culprit;
  e.node = loc.culprit_node;
  e.incident = tracker_->open_incident() ? tracker_->open_incident()->id : -1;
  e.detail = loc.to_json();
  e.detail["request"] = p.id;
  e.detail["ranks_expected"] = p.expected.size();
  publish_event(e);
  if (!tracker_->open_incident()) return;  // it closed meanwhile

  if (planner_) {
    planner_->update(loc);
  } else if (cfg_.mitigate && layout_) {
    std::string why;
    planner_ = Planner::start(cfg_.planner, *tracker_->open_incident(), loc, *layout_, &why);
    if (planner_) {
      iteration_rank_ = 0;
      last_iteration_index_ = -1;
      tracker_->set_phase("mitigating");
      publish(Decision{});
    } else {
      warn_once("planner:" + why, "job " + cfg_.job + ": no mitigation: " + why);
    }
  } else if (tracker_->state().state == "profiling") {
    tracker_->set_phase("slow");
    publish(Decision{});
  }
  // The remedy is back to the original configuration and the straggler is gone: the incident is over.
  if (planner_ && planner_->reverted_to_original() && planner_->was_mitigated() && !pending_ &&
      !planner_->fail_slow_present()) {
    Decision d;
    tracker_->close(job_now_s(), "straggler gone (profile) and configuration reverted", d);
    publish(d);
    planner_.reset();
  }
}

void Master::publish_plan(Plan plan) {
  // Epochs only grow, across restarts of the master too: continue after the latest plan in Redis.
  if (auto cur = redis_.command({"GET", keys::plan(cfg_.job)}); cur && cur->type == RedisReply::Type::kString) {
    std::string err;
    if (auto latest = parse_plan(cur->str, &err)) epoch_ = std::max(epoch_, latest->epoch);
  }
  plan.epoch = ++epoch_;
  plan.t_unix_ms = unix_ms_now();
  const std::string text = to_json(plan).dump();
  auto r = redis_.pipeline({{"MULTI"},
                            {"SET", keys::plan_epoch(cfg_.job, plan.epoch), text},
                            {"SET", keys::plan(cfg_.job), text},
                            {"EXEC"}});
  if (!r || r->back().type != RedisReply::Type::kArray) {
    --epoch_;
    warn_once("plan", "could not publish a plan for job " + cfg_.job);
    return;
  }
  Event e;
  e.type = event_type::kPlan;
  e.t_s = job_now_s();
  e.t_unix_ms = plan.t_unix_ms;
  e.source = "master";
  e.incident = plan.incident;
  e.detail = to_json(plan);
  publish_event(e);
  pending_ = PendingPlan{plan, Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                  std::chrono::duration<double>(cfg_.ack_timeout_s))};
}

void Master::drive_planner() {
  if (!planner_ || pending_) return;
  auto r = redis_.command({"GET", keys::iter(cfg_.job, iteration_rank_)});
  if (!r || r->type != RedisReply::Type::kString) return;
  std::string err;
  auto u = parse_iteration_update(r->str, &err);
  if (!u) return;
  if (last_iteration_index_ < 0 || u->index < last_iteration_index_) {  // first look, or a new period lock
    last_iteration_index_ = u->index;
    return;
  }
  // One observation per iteration (the latest time stands in for any the master missed between polls).
  for (std::int64_t i = last_iteration_index_ + 1; i <= u->index; ++i) {
    if (auto plan = planner_->observe(u->iter_ms * 1e-3)) {
      last_iteration_index_ = u->index;
      publish_plan(*plan);
      return;
    }
  }
  last_iteration_index_ = u->index;
}

void Master::check_acks() {
  if (!pending_ || !layout_) return;
  auto r = redis_.command({"HGETALL", keys::plan_acks(cfg_.job)});
  if (!r || r->type != RedisReply::Type::kArray) return;
  int applied = 0, unsupported = 0, rejected = 0;
  std::int64_t from_iteration = -1;
  for (std::size_t i = 0; i + 1 < r->elements.size(); i += 2) {
    std::string err;
    auto a = parse_plan_ack(r->elements[i + 1].str, &err);
    if (!a) {
      warn_once("ack", "malformed plan acknowledgement in job " + cfg_.job + " (" + err + ")");
      continue;
    }
    if (a->epoch != pending_->plan.epoch) continue;
    if (a->status == "applied") ++applied;
    if (a->status == "unsupported") ++unsupported;
    if (a->status == "rejected") ++rejected;
    from_iteration = std::max(from_iteration, a->iteration);
  }
  const int acks = applied + unsupported + rejected;
  Event e;
  e.t_s = job_now_s();
  e.t_unix_ms = unix_ms_now();
  e.source = "master";
  e.incident = pending_->plan.incident;
  e.detail = {{"epoch", pending_->plan.epoch}, {"strategy", pending_->plan.strategy}, {"action", pending_->plan.action},
              {"applied", applied},           {"unsupported", unsupported},           {"rejected", rejected},
              {"ranks", layout_->world},      {"from_iteration", from_iteration}};
  if (acks >= layout_->world) {
    e.type = applied == layout_->world ? event_type::kPlanApplied : event_type::kPlanRejected;
    if (applied == layout_->world) {
      if (planner_) planner_->applied(pending_->plan);
      if (!pending_->plan.microbatches.empty()) layout_->microbatches = pending_->plan.microbatches;
    } else if (planner_) {
      planner_->rejected(pending_->plan);
    }
    publish_event(e);
    pending_.reset();
    last_profile_ = Clock::now() - std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(cfg_.reprofile_s)) +
                    std::chrono::seconds(1);  // measure the new configuration soon
  } else if (Clock::now() >= pending_->deadline) {
    e.type = event_type::kPlanTimeout;
    if (planner_) planner_->rejected(pending_->plan);
    publish_event(e);
    pending_.reset();
  }
}

}  // namespace greyhound::master
