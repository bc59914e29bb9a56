#include "daemon/controller.h"

#include <spdlog/spdlog.h>

namespace greyhound::master {

std::vector<GroupMembers> comparable_groups(const std::vector<GroupRecord>& records) {
  std::vector<GroupMembers> out;
  for (const GroupRecord& r : records) {
    if (!r.complete()) continue;
    GroupMembers g;
    g.group = r.id;
    for (const auto& [group_rank, rank] : r.members) g.members.push_back(rank);
    // What the group moves per iteration: the op/size kinds its first reporting member saw.
    g.signature = std::to_string(r.size);
    if (!r.ops.empty()) {
      for (const auto& [kind, n] : r.ops.begin()->second) g.signature += "|" + kind;
    }
    out.push_back(std::move(g));
  }
  return out;
}

Controller::Controller(ControllerConfig config, std::string run_tag)
    : cfg_(std::move(config)), run_tag_(std::move(run_tag)) {}

void Controller::load(MasterState state, std::optional<Incident> open, std::int64_t latest_epoch,
                      const std::string& last_event_id, const Now& now) {
  tracker_.emplace(std::move(state), std::move(open));
  proposed_.reset();
  proposed_events_.clear();
  resume_open_incident_ = tracker_->open_incident().has_value();
  epoch_ = std::max(epoch_, latest_epoch);
  if (!ever_loaded_) {  // a reload (after a reconnect) keeps what this run has seen and made
    ever_loaded_ = true;
    earlier_run_until_ = valid_stream_id(last_event_id) ? last_event_id : "0-0";
    healthy_since_s_ = now.mono_s;
  }
}

store::MasterCommit Controller::apply(const std::vector<store::Entry<Event>>& entries, const Now& now) {
  IncidentTracker next = *tracker_;  // applied to a copy: adopted only once committed
  store::MasterCommit c;
  proposed_events_.clear();
  std::vector<Event> reacting;  // agents' events, and a close an earlier run of the master committed
  std::string cursor = next.state().cursor;
  std::int64_t rejected = 0;
  for (const auto& entry : entries) {
    cursor = entry.id;
    if (!entry.value) {
      ++rejected;
      continue;
    }
    const Event& e = *entry.value;
    Decision d;
    next.apply(e, d);
    // This run reacts to its own events as it makes them. Of an earlier run's, only a close matters: it
    // may have left a remedy in force.
    if (e.source != "master" ||
        (e.type == event_type::kIncidentClose && compare_stream_ids(entry.id, earlier_run_until_) <= 0)) {
      reacting.push_back(e);
    }
    if (d.incident) c.incidents.push_back(*d.incident);
    for (Event& m : d.emit) c.events.push_back(std::move(m));
  }
  c.state = next.state();
  c.state.cursor = cursor;
  c.state.events_rejected += rejected;
  c.state.updated_unix_ms = now.unix_ms;
  proposed_events_ = std::move(reacting);
  for (const Event& m : c.events) proposed_events_.push_back(m);
  next = IncidentTracker(c.state, next.open_incident());
  proposed_ = std::move(next);
  return c;
}

void Controller::adopt(const Now& now) {
  if (!proposed_) return;
  tracker_ = std::move(proposed_);
  proposed_.reset();
  for (const Event& e : proposed_events_) react(e, now);
  proposed_events_.clear();
}

void Controller::discard() {
  proposed_.reset();
  proposed_events_.clear();
  tracker_.reset();  // the driver loads what the store holds
}

void Controller::warn_once(const std::string& kind, const std::string& message) {
  if (warned_.insert(kind).second) spdlog::warn("{} (further ones of this kind are not logged)", message);
}

Event Controller::master_event(const char* type, const Now& now) const {
  Event e;
  e.type = type;
  e.t_s = now.job_s;
  e.t_unix_ms = now.unix_ms;
  e.source = "master";
  return e;
}

// Agents' events as they are adopted, and the master's own as they are made.
void Controller::react(const Event& e, const Now& now) {
  const bool from_master = e.source == "master";
  if (e.type == event_type::kProfile && profiling_) {
    std::string err;
    if (auto r = parse_profile_report(e.detail, &err); r && r->request == profiling_->id) {
      if (auto v = profile_view(e); v && profiling_->expected.count(e.rank) != 0) profiling_->got[e.rank] = *v;
    }
  }
  if (!from_master) return;
  if (e.type == event_type::kIncidentOpen || e.type == event_type::kIncidentUpdate) {
    if (profiling_ && profiling_->baseline) profiling_.reset();  // not healthy any more: no reference
    // A slowdown that began before the baseline's window ended was in it: the reference is not healthy.
    std::string err;
    const auto d = parse_incident_detail(e.detail, &err);
    if (baseline_ && e.type == event_type::kIncidentOpen && (d ? d->onset_t_s : e.t_s) < baseline_end_t_s_) {
      spdlog::info("the baseline overlapped the onset of this slowdown; discarded");
      baseline_.reset();
    }
    want_profile_ = true;
    want_profile_why_ = e.type == event_type::kIncidentOpen ? "incident opened" : "incident worsened";
  }
  if (e.type == event_type::kIncidentClose) {
    healthy_since_s_ = now.mono_s;
    if (cfg_.mitigate) {
      // Closed by recovery reports while a remedy is in force (also one applied before this master
      // restarted: the job's layout says so): put the original configuration back.
      revert_ = Revert{};
      revert_->incident = e.incident;
      if (planner_) {
        // A plan still in flight may change what runs: then the layout in force decides, once it is answered.
        if (!pending_) revert_->changed = !planner_->reverted_to_original();
        revert_->to = planner_->original_microbatches();
      }
      planner_.reset();
    }
  }
}

void Controller::take(Decision d, const Now& now, Intents& out) {
  if (d.incident) out.incidents.push_back(*d.incident);
  out.persist_state = true;
  for (Event& m : d.emit) {
    out.events.push_back(m);
    react(m, now);
  }
}

bool Controller::due_reprofile(const Now& now) const {
  return planner_ && !profiling_ && now.mono_s - last_profile_s_ >= cfg_.reprofile_s;
}

bool Controller::due_baseline(const Now& now) const {
  return cfg_.baseline_every_s > 0 && !profiling_ && !tracker_->open_incident() && !pending_ &&
         now.mono_s - healthy_since_s_ >= cfg_.baseline_after_s &&
         (!baseline_ || now.mono_s - baseline_at_s_ >= cfg_.baseline_every_s) &&
         now.mono_s - last_profile_s_ >= cfg_.reprofile_s;
}

bool Controller::profiling_complete(const Now& now) const {
  return profiling_ && (profiling_->got.size() >= profiling_->expected.size() || now.mono_s >= profiling_->deadline_s);
}

Needs Controller::needs(const Now& now) const {
  Needs n;
  if (!tracker_) return n;
  const bool resume = resume_open_incident_ && tracker_->open_incident() && !planner_;
  n.registry = !profiling_ && (want_profile_ || resume || due_reprofile(now) || due_baseline(now));
  n.groups = profiling_complete(now);
  n.layout = n.groups || revert_.has_value();
  n.acks = pending_.has_value();
  return n;
}

Intents Controller::step(const Now& now, const JobInputs& in) {
  Intents out;
  if (!tracker_) return out;
  if (want_profile_) {
    want_profile_ = false;
    start_profiling(want_profile_why_, false, in, now, out);
  }
  // A revert waits for a plan in flight to be answered (it may have changed what runs).
  if (revert_ && !pending_) {
    if (in.layout) layout_ = in.layout;
    const bool changed = revert_->changed ? *revert_->changed
                                          : layout_ && layout_->microbatches != layout_->initial_microbatches;
    if (changed && layout_) {
      Plan p;
      p.strategy = Strategy::kS1;
      p.action = PlanAction::kRevert;
      p.incident = revert_->incident;
      p.microbatches = revert_->to.empty() ? layout_->initial_microbatches : revert_->to;
      p.reason = "incident closed: back to the original configuration";
      propose_plan(std::move(p), out);
    }
    revert_.reset();
  }
  if (profiling_complete(now)) finish_profiling(in, now, out);
  // An incident left open by an earlier run of this master (or across a Redis restart): localise it again,
  // which also resumes its planning (the job's layout says what is in force).
  if (resume_open_incident_) {
    resume_open_incident_ = false;
    if (tracker_->open_incident() && !planner_ && !profiling_) start_profiling("resuming the open incident", false, in, now, out);
  }
  if (in.acks_read) check_acks(in, now, out);
  drive_planner(in, out);
  // While a remedy is in force, keep measuring: the fail-slow may have ended.
  if (due_reprofile(now)) start_profiling("re-profiling while mitigating", false, in, now, out);
  // While healthy, a reference profile now and then: what each group's transfers take when all is well.
  if (due_baseline(now)) start_profiling("healthy baseline", true, in, now, out);
  return out;
}

void Controller::start_profiling(const std::string& why, bool baseline, const JobInputs& in, const Now& now,
                                 Intents& out) {
  if (profiling_ || in.agents.empty() || out.profile) return;
  Profiling p;
  p.baseline = baseline;
  p.id = (baseline ? "baseline-" : "profile-") + std::to_string(tracker_->state().incidents_total) + "-" +
         std::to_string(++profiles_requested_) + "." + run_tag_;
  p.expected.insert(in.ranks.begin(), in.ranks.end());
  p.deadline_s = now.mono_s + cfg_.profile_s + cfg_.profile_grace_s;
  ProfileRequest req;
  req.command.cmd = "profile";
  req.command.id = p.id;
  req.command.duration_s = cfg_.profile_s;
  req.nodes = in.agents;
  out.profile = std::move(req);
  spdlog::info("{}: profiling {} ranks ({})", why, p.expected.size(), p.id);
  profiling_ = std::move(p);
  last_profile_s_ = now.mono_s;
  if (!baseline && tracker_->open_incident() && tracker_->state().state == Phase::kSlow) {
    tracker_->set_phase(Phase::kProfiling);
    out.persist_state = true;
  }
}

void Controller::finish_profiling(const JobInputs& in, const Now& now, Intents& out) {
  Profiling p = std::move(*profiling_);
  profiling_.reset();
  std::vector<ProfileView> views;
  for (const auto& [r, v] : p.got) views.push_back(v);
  if (p.baseline) {
    if (auto b = group_baseline(views, in.groups); b && b->ranks == static_cast<int>(p.expected.size())) {
      baseline_ = std::move(b);
      baseline_at_s_ = now.mono_s;
      baseline_end_t_s_ = now.job_s;
      Event e = master_event(event_type::kBaseline, now);
      e.detail = to_json(BaselineReport{p.id, baseline_->ranks, static_cast<int>(baseline_->least_ms.size()),
                                        baseline_->step_ms});
      out.events.push_back(std::move(e));
      out.persist_state = true;
    } else {
      spdlog::info("baseline {} incomplete ({} of {} ranks with iterations); trying again later", p.id, views.size(),
                   p.expected.size());
      baseline_at_s_ = now.mono_s - cfg_.baseline_every_s;
    }
    return;
  }
  if (in.layout && !pending_) layout_ = in.layout;  // the job republishes it after each plan
  const Localisation loc = localise(views, in.groups, layout_, baseline_ ? &*baseline_ : nullptr);
  Event e = master_event(event_type::kLocalised, now);
  e.rank = loc.culprit;
  e.node = loc.culprit_node;
  e.incident = tracker_->open_incident() ? tracker_->open_incident()->id : -1;
  LocalisationReport report = loc.report();
  report.request = p.id;
  report.ranks_expected = static_cast<int>(p.expected.size());
  e.detail = to_json(report);
  out.events.push_back(std::move(e));
  out.persist_state = true;
  if (!tracker_->open_incident()) return;  // it closed meanwhile

  if (planner_) {
    planner_->update(loc);
  } else if (cfg_.mitigate && layout_) {
    std::string why;
    planner_ = Planner::start(cfg_.planner, *tracker_->open_incident(), loc, *layout_, &why);
    if (planner_) {
      last_iteration_index_ = -1;
      tracker_->set_phase(Phase::kMitigating);
    } else {
      warn_once("planner:" + why, "no mitigation: " + why);
    }
  } else if (tracker_->state().state == Phase::kProfiling) {
    tracker_->set_phase(Phase::kSlow);
  }
  // The remedy is back to the original configuration and the straggler is gone: the incident is over.
  if (planner_ && planner_->reverted_to_original() && planner_->was_mitigated() && !pending_ &&
      !planner_->fail_slow_present()) {
    planner_.reset();
    Decision d;
    tracker_->close(now.job_s, "straggler gone (profile) and configuration reverted", d);
    take(std::move(d), now, out);
  }
}

void Controller::propose_plan(Plan plan, Intents& out) {
  plan.epoch = ++epoch_;
  out.plan = std::move(plan);
}

Intents Controller::plan_published(const Plan& plan, const Now& now) {
  Intents out;
  Event e = master_event(event_type::kPlan, now);
  e.t_unix_ms = plan.t_unix_ms != 0 ? plan.t_unix_ms : now.unix_ms;
  e.incident = plan.incident;
  e.detail = to_json(plan);
  out.events.push_back(std::move(e));
  out.persist_state = true;
  pending_ = PendingPlan{plan, now.mono_s + cfg_.ack_timeout_s};
  return out;
}

void Controller::plan_failed(const Plan& plan) {
  if (plan.epoch == epoch_) --epoch_;
  warn_once("plan", "could not publish a plan");
}

void Controller::check_acks(const JobInputs& in, const Now& now, Intents& out) {
  if (!pending_ || !layout_) return;
  PlanOutcome o;
  o.epoch = pending_->plan.epoch;
  o.strategy = pending_->plan.strategy;
  o.action = pending_->plan.action;
  o.ranks = layout_->world;
  for (const PlanAck& a : in.acks) {
    if (a.epoch != pending_->plan.epoch) continue;
    if (a.status == AckStatus::kApplied) ++o.applied;
    if (a.status == AckStatus::kUnsupported) ++o.unsupported;
    if (a.status == AckStatus::kRejected) ++o.rejected;
    o.from_iteration = std::max(o.from_iteration, a.iteration);
  }
  const int acks = o.applied + o.unsupported + o.rejected;
  const char* type = nullptr;
  if (acks >= layout_->world) {
    type = o.applied == layout_->world ? event_type::kPlanApplied : event_type::kPlanRejected;
    if (o.applied == layout_->world) {
      if (planner_) planner_->applied(pending_->plan);
      if (!pending_->plan.microbatches.empty()) layout_->microbatches = pending_->plan.microbatches;
    } else if (planner_) {
      planner_->rejected(pending_->plan);
    }
    last_profile_s_ = now.mono_s - cfg_.reprofile_s + 1.0;  // measure the new configuration soon
  } else if (now.mono_s >= pending_->deadline_s) {
    type = event_type::kPlanTimeout;
    if (planner_) planner_->rejected(pending_->plan);
  } else {
    return;
  }
  Event e = master_event(type, now);
  e.incident = pending_->plan.incident;
  e.detail = to_json(o);
  out.events.push_back(std::move(e));
  out.persist_state = true;
  pending_.reset();
}

void Controller::drive_planner(const JobInputs& in, Intents& out) {
  if (!planner_ || pending_ || out.plan || !in.pace) return;
  const IterationUpdate& u = *in.pace;
  if (last_iteration_index_ < 0 || u.index < last_iteration_index_) {  // first look, or a new period lock
    last_iteration_index_ = u.index;
    return;
  }
  // One observation per iteration (the latest time stands in for any the master missed between polls).
  for (std::int64_t i = last_iteration_index_ + 1; i <= u.index; ++i) {
    if (auto plan = planner_->observe(u.iter_ms * 1e-3)) {
      last_iteration_index_ = u.index;
      propose_plan(std::move(*plan), out);
      return;
    }
  }
  last_iteration_index_ = u.index;
}

}  // namespace greyhound::master
