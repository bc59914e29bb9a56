#include "daemon/controller.h"

#include "daemon/operator_plan.h"

#include "common/record_json.h"
#include "store/placement_roles.h"

#include "greyhound/analysis/robust_stats.h"
#include "greyhound/validate/ring_order.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>

namespace greyhound::master {

namespace {

// The median of iteration times (0 for none), by the one robust median of src/analysis.
double median_of(const std::vector<double>& v) {
  std::vector<double> scratch;
  return v.empty() ? 0.0 : analysis::median(v, scratch);
}

std::string ids(const std::set<std::int64_t>& s) {
  std::string out;
  for (std::int64_t id : s) {
    if (id <= 0) continue;
    out += (out.empty() ? "" : ",") + std::to_string(id);
  }
  return out.empty() ? "none" : out;
}

}  // namespace

const char* validate_mode_name(ValidateMode m) {
  switch (m) {
    case ValidateMode::kNever: return "never";
    case ValidateMode::kAuto: return "auto";
    case ValidateMode::kAlways: return "always";
  }
  return "never";
}

std::optional<ValidateMode> parse_validate_mode(std::string_view s) {
  if (s == "never") return ValidateMode::kNever;
  if (s == "auto") return ValidateMode::kAuto;
  if (s == "always") return ValidateMode::kAlways;
  return std::nullopt;
}

std::vector<GroupMembers> comparable_groups(const std::vector<GroupRecord>& records, std::vector<std::string>* notes) {
  std::vector<GroupMembers> out;
  for (const GroupRecord& r : records) {
    if (!r.complete()) continue;
    GroupMembers g;
    g.group = r.id;
    for (const auto& [group_rank, rank] : r.members) g.members.push_back(rank);
    for (const auto& [group_rank, rank] : r.members) {
      const auto n = r.nodes.find(group_rank);
      if (n == r.nodes.end()) break;
      g.nodes.push_back(n->second);
    }
    if (g.nodes.size() != g.members.size()) g.nodes.clear();
    if (r.nccl_ring) {
      const auto order = !g.nodes.empty()
                             ? validate::nccl_ring_order(g.nodes, r.nccl_ring->segment, r.nccl_ring->crosses_nodes)
                             : Result<std::vector<int>>::failure("the nodes of its members are not all known");
      if (order) {
        for (int group_rank : *order) g.nccl_order.push_back(g.members[static_cast<std::size_t>(group_rank)]);
      } else if (notes) {
        notes->push_back("group " + group_id_hex(r.id) + ": NCCL's ring order left out: " + order.error());
      }
      // NCCL's trees: each node's chain at the dumping node's positions, the nodes in node order (as the
      // ring's parts are: validate::nccl_ring_order composes both).
      const auto& tree = r.nccl_ring->tree;
      if (order && tree) {
        const auto chains = validate::nccl_ring_order(g.nodes, tree->segment, tree->crosses_nodes);
        if (chains) {
          for (int group_rank : *chains) g.nccl_tree_order.push_back(g.members[static_cast<std::size_t>(group_rank)]);
          g.nccl_tree_pattern = tree->pattern;
        } else if (notes) {
          notes->push_back("group " + group_id_hex(r.id) + ": NCCL's tree chains left out: " + chains.error());
        }
      }
    }
    // What the group moves per iteration: the op/size kinds its first reporting member saw.
    g.signature = std::to_string(r.size);
    if (!r.ops.empty()) {
      for (const auto& [kind, n] : r.ops.begin()->second) g.signature += "|" + kind;
    }
    out.push_back(std::move(g));
  }
  return out;
}

std::map<std::uint64_t, GroupTraffic> group_traffic(const std::vector<GroupRecord>& records) {
  std::map<std::uint64_t, GroupTraffic> out;
  for (const GroupRecord& r : records) {
    if (r.ops.empty()) continue;
    // Kinds are "Op:bytes" with their counts (its first reporting member's): the mean bytes per call, and
    // the op that moves the most.
    GroupTraffic t;
    double calls = 0, bytes = 0, top = -1;
    for (const auto& [kind, n] : r.ops.begin()->second) {
      const auto colon = kind.rfind(':');
      if (colon == std::string::npos || n == 0) continue;
      const char* digits = kind.c_str() + colon + 1;
      char* end = nullptr;
      const double b = std::strtod(digits, &end);
      if (end == digits || *end != '\0' || !(b >= 0) || !std::isfinite(b)) continue;
      calls += static_cast<double>(n);
      bytes += b * static_cast<double>(n);
      if (b * static_cast<double>(n) > top) {
        top = b * static_cast<double>(n);
        t.op = kind.substr(0, colon);
      }
    }
    if (calls > 0) t.bytes_per_call = bytes / calls;
    out[r.id] = std::move(t);
  }
  return out;
}

Controller::Controller(ControllerConfig config, std::string run_tag)
    : cfg_(std::move(config)), base_(cfg_), run_tag_(std::move(run_tag)) {}

void Controller::apply_settings(const JobSettings& s) {
  if (to_json(s) == to_json(settings_)) return;
  settings_ = s;
  cfg_.profile_iterations = s.profile_iterations.value_or(base_.profile_iterations);
  cfg_.reprofile_iterations = s.reprofile_iterations.value_or(base_.reprofile_iterations);
  cfg_.pause.deadline_s = s.pause_deadline_s.value_or(base_.pause.deadline_s);
  cfg_.planner.ski.s3_pause_s = s.s3_pause_s.value_or(base_.planner.ski.s3_pause_s);
  cfg_.planner.ski.s4_restart_s = s.s4_restart_s.value_or(base_.planner.ski.s4_restart_s);
  if (planner_) {
    planner_->configure(cfg_.planner);
    refresh_costs();
  }
  spdlog::info("settings version {} in force: {}", s.version, to_json(s).dump());
}

void Controller::load(MasterState state, std::optional<Incident> open, std::int64_t latest_epoch,
                      const std::string& last_event_id, const Now& now) {
  tracker_.emplace(std::move(state), std::move(open));
  proposed_.reset();
  proposed_events_.clear();
  resume_open_incident_ = tracker_->open_incident().has_value();
  unmeasured_in_row_ = 0;
  epoch_ = std::max(epoch_, latest_epoch);
  // The fail-slows it holds continue (their accounts once the planner knows the job); an incident without
  // any is localised again before a remedy is touched.
  accounts_.clear();
  settled_ = !(tracker_->open_incident() && tracker_->state().fail_slows.empty());
  planner_.reset();
  split_for_.clear();  // the planner, made again from the layout, says what serves whom
  placement_for_.clear();
  check_.reset();
  probes_.clear();  // scheduled again by the next localisation
  trusted_.clear();  // which remedies an undo check showed paying: in the accounts
  for (const FailSlow& f : tracker_->state().fail_slows) {
    if (f.account.trusted) trusted_.insert(f.id);
  }
  layout_wanted_ = cfg_.mitigate;
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
    if (d.incident) store::upsert_incident(c.incidents, std::move(*d.incident));
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
  if (e.type == event_type::kPause && validating_) {
    std::string err;
    if (auto r = parse_pause_report(e.detail, &err)) {
      validating_->report(e.rank, e.node, *r, now.mono_s);
    } else {
      warn_once("pause-report", "a malformed pause report: " + err);
    }
  }
  if (!from_master) {
    react_to_rank_health(e, now);
    return;
  }
  if (e.type == event_type::kIncidentOpen || e.type == event_type::kIncidentUpdate) {
    if (profiling_ && profiling_->baseline) profiling_.reset();  // not healthy any more: no reference
    // A slowdown that began before the baseline's window ended was in it: the reference is not healthy.
    std::string err;
    const auto d = parse_incident_detail(e.detail, &err);
    // An early profile in progress serves the incident it foresaw; one that began before the incident's onset
    // measured the job healthy for part of its window: a window of the incident's own replaces it.
    if (e.type == event_type::kIncidentOpen && profiling_ && profiling_->suspect &&
        profiling_->started_job_s < (d ? d->onset_t_s : e.t_s)) {
      spdlog::info("early profile {} began before this slowdown's onset; profiling again", profiling_->id);
      profiling_.reset();
    }
    if (baseline_ && e.type == event_type::kIncidentOpen && (d ? d->onset_t_s : e.t_s) < baseline_end_t_s_) {
      spdlog::info("the baseline overlapped the onset of this slowdown; discarded");
      baseline_.reset();
      if (e.before_ms > 0) tracker_->mutable_state().healthy_ms = e.before_ms;
    }
    if (e.type == event_type::kIncidentOpen) {
      ++stats_.detections;
      if (d) stats_.detection.add(d->detected_t_s - d->onset_t_s);
      mitigated_ = false;
      // Without a healthy baseline, the level before the first incident is the job's healthy time.
      if (tracker_->state().healthy_ms <= 0 && e.before_ms > 0) tracker_->mutable_state().healthy_ms = e.before_ms;
    }
    want_profile_ = true;
    want_profile_why_ = e.type == event_type::kIncidentOpen ? "incident opened" : "incident worsened";
  }
  if (e.type == event_type::kIncidentClose) {
    healthy_since_s_ = now.mono_s;
    mitigated_ = false;
    // The job is back at its level: the fail-slows still open (a remedy may hide them) are checked soon;
    // with none known there is nothing left to await before the remedies follow them.
    if (!tracker_->state().fail_slows.empty()) last_profile_end_s_ = -1e18;
    if (tracker_->state().fail_slows.empty()) settled_ = true;
  }
}

void Controller::take(Decision d, const Now& now, Intents& out) {
  if (d.incident) store::upsert_incident(out.incidents, std::move(*d.incident));
  out.persist_state = true;
  for (Event& m : d.emit) {
    out.events.push_back(m);
    react(m, now);
  }
}


double Controller::window_s() const {
  if (cfg_.profile_iterations > 0 && last_iteration_s_ > 0) {
    return std::clamp(cfg_.profile_iterations * last_iteration_s_, 1.0, 30.0);
  }
  return cfg_.profile_s;
}

double Controller::reprofile_gap_s() const {
  const double gap = last_iteration_s_ > 0 ? cfg_.reprofile_iterations * last_iteration_s_ : cfg_.reprofile_s;
  // An incident in which nothing has been found yet is looked at less often; unless its last profile, the
  // first in a row, measured no iteration while it was unsettled (a master restarted while a plan was being
  // applied: a remedy may be in force that nothing tracks, and every iteration of it after the fault ends is
  // lost), or was held back because the job's pace moved in it (what it showed waits for this next window).
  // A job whose profiles keep measuring nothing, or keep moving, is not profiled back to back.
  const bool retry_soon = (unmeasured_ && unmeasured_in_row_ <= 1) || unsteady_in_row_ == 1;
  return tracker_->state().fail_slows.empty() && !retry_soon ? std::max(gap, cfg_.reprofile_s) : gap;
}

bool Controller::due_reprofile(const Now& now) const {
  const bool watching = !tracker_->state().fail_slows.empty() || tracker_->open_incident().has_value();
  return watching && (settled_ || unmeasured_) && !profiling_ && !want_profile_ && !restarting_ && !probe_due(now) &&
         now.mono_s - last_profile_end_s_ >= reprofile_gap_s();
}

// The job's iteration time, robust to the odd long one (a pause, a plan switch): the median of the latest.
double Controller::typical_iteration_s() const {
  if (!recent_s_.empty()) return median_of(recent_s_);
  return last_iteration_s_ > 0 ? last_iteration_s_ : 1.0;
}

// A link probe is due: it goes before the next re-profile (which would otherwise keep it waiting).
bool Controller::probe_due(const Now& now) const {
  return std::any_of(probes_.begin(), probes_.end(), [&](const auto& p) { return now.mono_s >= p.second.due_s; });
}

bool Controller::due_baseline(const Now& now) const {
  const bool original = !planner_ || (!planner_->split_in_force() && !planner_->moved());
  return cfg_.baseline_every_s > 0 && !profiling_ && !held_ && !tracker_->open_incident() && !pending_ && original && !restarting_ &&
         tracker_->state().fail_slows.empty() && now.mono_s - healthy_since_s_ >= cfg_.baseline_after_s &&
         (!baseline_ || now.mono_s - baseline_at_s_ >= cfg_.baseline_every_s) &&
         now.mono_s - last_profile_s_ >= cfg_.reprofile_s;
}

bool Controller::due_suspect(const Now& now, int ahead) const {
  if (cfg_.suspect_iterations <= 0 || slow_streak_ + ahead < cfg_.suspect_iterations) return false;
  // An early profile only pays for the remedy it brings forward: none follows while an operator's plan holds.
  const bool busy = profiling_ || want_profile_ || held_ || validating_ || restarting_ || pending_ || check_ ||
                    (preflight_ && preflight_->running) || operator_hold();
  return !busy && !tracker_->open_incident() && tracker_->state().fail_slows.empty() &&
         now.mono_s - last_suspect_s_ >= cfg_.suspect_gap_iterations * typical_iteration_s();
}

bool Controller::held_stale(const Now& now) const {
  return held_ && now.mono_s - held_->ended_s > cfg_.suspect_hold_iterations * typical_iteration_s();
}

const Controller::HeldProfile* Controller::usable_held(const Now& now) const {
  const auto& incident = tracker_->open_incident();
  if (!held_ || !incident) return nullptr;
  const bool fresh = !held_stale(now);
  const bool inside = held_->profile.started_job_s >= incident->onset_t_s;  // the whole window was slow
  return fresh && inside && last_change_s_ < held_->profile.started_s ? &*held_ : nullptr;
}

bool Controller::profiling_complete(const Now& now) const {
  return profiling_ && (profiling_->got.size() >= profiling_->expected.size() || now.mono_s >= profiling_->deadline_s);
}

Needs Controller::needs(const Now& now) const {
  Needs n;
  if (!tracker_) return n;
  const bool resume = resume_open_incident_ && tracker_->open_incident() && !profiling_;
  n.registry = !profiling_ && (want_profile_ || resume || due_reprofile(now) || due_baseline(now) ||
                              due_suspect(now, cfg_.suspect_iterations > 1 ? 1 : 0));
  // The registry's groups: for a profile's verdict, and for who a hung collective waits for.
  n.groups = profiling_complete(now) || (!stalls_.empty() && now.mono_s >= next_hang_check_s_);
  n.layout = profiling_complete(now) || layout_wanted_;
  if (preflight_ && !preflight_->running) n.registry = n.groups = n.layout = true;  // who is there to test
  if (operator_req_) n.layout = true;  // what an operator's plan is checked against
  n.acks = pending_.has_value();
  return n;
}

Intents Controller::step(const Now& now, const JobInputs& in) {
  Intents out;
  if (!tracker_) return out;
  // A pause is no iteration of the job: the iteration that held one counts without it (observe_iterations).
  if (in.pace && in.pace->iter_ms > 0 && !(validating_ && validating_->any_trapped())) {
    last_iteration_s_ = in.pace->index == paused_index_ ? paused_index_s_ : in.pace->iter_ms * 1e-3;
  }
  if (in.pace) last_pace_ = in.pace;
  if (validating_) step_validation(now, out);
  if (held_ && !usable_held(now) &&
      (tracker_->open_incident() || held_stale(now))) {
    const char* why = !tracker_->open_incident() ? "no incident followed it"
                      : held_->profile.started_job_s < tracker_->open_incident()->onset_t_s
                          ? "the incident's onset came after its window began"
                      : last_change_s_ >= held_->profile.started_s ? "the configuration changed since"
                                                                    : "it is stale";
    spdlog::info("early profile {}: {}; dropped", held_->profile.id, why);
    held_.reset();
  }
  if (want_profile_ && !validating_) {
    want_profile_ = false;
    if (usable_held(now) && !profiling_) {
      // The slowdown was profiled before it was decided: localised now, without a window of its own.
      const HeldProfile held = std::move(*held_);
      held_.reset();
      spdlog::info("{}: localising from early profile {}", want_profile_why_, held.profile.id);
      ++stats_.early_localisations;
      last_profile_end_s_ = now.mono_s;
      localise_profile(held.profile, held.groups, held.traffic, held.layout, now, out);
    } else {
      start_profiling(want_profile_why_, false, in, now, out);
      // An early window in progress serves the incident: it is this incident's profiling now.
      if (profiling_ && profiling_->suspect && tracker_->open_incident() && tracker_->state().state == Phase::kSlow) {
        tracker_->set_phase(Phase::kProfiling);
        out.persist_state = true;
      }
    }
  }
  if (in.layout) {
    if (!restarting_ && layout_ && (in.layout->world != layout_->world || in.layout->dp != layout_->dp)) {
      // A job that came back in another shape restarted without this master seeing its S4 plan applied
      // (the plan timed out, an acknowledgement was lost): the same as if it had.
      job_restarting("the job restarted in another shape (" + std::to_string(layout_->world) + " -> " +
                         std::to_string(in.layout->world) + " ranks)",
                     0, now, out);
    } else if (!restarting_ && layout_ && in.layout->s3_by_restart &&
               store::initial_placement(*in.layout) != store::initial_placement(*layout_)) {
      // The same for an S3 plan such a job applied by restarting (its checkpoint outlasted the plan's
      // deadline, or a restart request reached Redis though the call failed): it started with another
      // placement.
      job_restarting("the job restarted with another placement (an S3 plan it applied by restarting)", 0, now, out,
                     Strategy::kS3);
    }
    if (restarting_) {
      job_restarted(*in.layout, now, out);
    } else {
      if (!pending_) layout_ = in.layout;  // the job republishes it after each plan
      if (planner_) {
        planner_->layout_updated(*in.layout);  // with its cost estimates, which may have changed
        refresh_costs();
      }
    }
    layout_wanted_ = restarting_.has_value() || restart_unsettled_;
  }
  if (cfg_.mitigate && !planner_ && layout_) {
    planner_.emplace(cfg_.planner, *layout_);
    const auto& open = tracker_->state().fail_slows;
    if (planner_->split_in_force() || planner_->moved()) {
      if (tracker_->open_incident()) mitigated_ = true;  // a remedy in force: the master may close on its evidence
      if (open.empty() && tracker_->open_incident()) {
        adopt_split_ = true;  // an incident from before fail-slows were tracked: its localisation adopts the split
      } else {
        for (const FailSlow& f : open) {
          if (f.account.rung == Strategy::kS2) split_for_.insert(f.id);
          if (f.account.rung == Strategy::kS3) placement_for_.insert(f.id);
        }
        if (split_for_.empty() && planner_->split_in_force()) split_for_.insert(0);  // serves nothing: reconcile reverts
        if (placement_for_.empty() && planner_->moved()) placement_for_.insert(0);
      }
    }
    for (const FailSlow& f : open) open_account(f);
  }
  if (!stalls_.empty() && !in.groups.empty()) check_hangs(in, now, out);
  if (preflight_ && !preflight_->running) maybe_start_preflight(in, now, out);
  if (operator_req_) serve_operator_plan(in, now, out);
  if (profiling_complete(now)) finish_profiling(in, now, out);
  // An incident left open by an earlier run of this master (or across a Redis restart): localise it again.
  if (resume_open_incident_) {
    resume_open_incident_ = false;
    if (tracker_->open_incident() && !profiling_) start_profiling("resuming the open incident", false, in, now, out);
  }
  if (in.acks_read) check_acks(in, now, out);
  observe_iterations(in, now, out);
  reconcile(now, out);
  if (cfg_.mitigate) maybe_probe(now, out);
  // While fail-slows (or an incident) are open, keep measuring: one may have ended, another begun.
  if (due_reprofile(now)) start_profiling("re-profiling", false, in, now, out);
  // While healthy, a reference profile now and then: what each group's transfers take when all is well.
  if (due_baseline(now)) start_profiling("healthy baseline", true, in, now, out);
  // While healthy, iterations slower than the job's level: profile before any agent decides a slowdown.
  if (due_suspect(now)) {
    start_profiling("suspected slowdown (" + std::to_string(slow_streak_) + " iterations >= " +
                        std::to_string(cfg_.suspect_ratio).substr(0, 4) + "x the median before them)",
                    false, in, now, out, true);
    if (profiling_ && profiling_->suspect) {
      last_suspect_s_ = now.mono_s;
      slow_streak_ = 0;
      ++stats_.early_profiles;
    }
  }
  if (out.persist_state || !out.events.empty()) sync_accounts();
  return out;
}

void Controller::start_profiling(const std::string& why, bool baseline, const JobInputs& in, const Now& now,
                                 Intents& out, bool suspect) {
  if (profiling_ || in.agents.empty() || out.profile || restarting_ || validating_) return;
  unmeasured_ = false;
  last_agents_ = in.agents;
  Profiling p;
  p.baseline = baseline;
  p.suspect = suspect;
  p.started_s = now.mono_s;
  p.started_job_s = now.job_s;
  p.id = (baseline ? "baseline-" : suspect ? "early-" : "profile-") + std::to_string(tracker_->state().incidents_total) +
         "-" + std::to_string(++profiles_requested_) + "." + run_tag_;
  for (int r : in.ranks) {
    if (!layout_ || r < layout_->world) p.expected.insert(r);  // the registry keeps a restarted job's old ranks
  }
  const double window = std::clamp(window_s(), kMinProfileWindowS, kMaxProfileWindowS);
  p.deadline_s = now.mono_s + window + cfg_.profile_grace_s;
  ProfileRequest req;
  req.command.cmd = "profile";
  req.command.id = p.id;
  req.command.duration_s = window;
  req.nodes = in.agents;
  out.profile = std::move(req);
  spdlog::info("{}: profiling {} ranks for {:.2f} s ({})", why, p.expected.size(), window, p.id);
  profiling_ = std::move(p);
  last_profile_s_ = now.mono_s;
  if (!tracker_->open_incident()) unsteady_in_row_ = 0;  // "in a row" within one incident
  if (!baseline && tracker_->open_incident() && tracker_->state().state == Phase::kSlow) {
    tracker_->set_phase(Phase::kProfiling);
    out.persist_state = true;
  }
}

void Controller::finish_profiling(const JobInputs& in, const Now& now, Intents& out) {
  Profiling p = std::move(*profiling_);
  profiling_.reset();
  last_profile_end_s_ = now.mono_s;
  std::vector<ProfileView> views;
  for (const auto& [r, v] : p.got) {
    views.push_back(v);
    if (v.node >= 0) last_node_of_[r] = v.node;  // where the rank's process runs (its agent's node)
  }
  if (p.baseline) {
    if (auto b = group_baseline(views, in.groups); b && b->ranks == static_cast<int>(p.expected.size())) {
      baseline_ = std::move(b);
      baseline_at_s_ = now.mono_s;
      baseline_end_t_s_ = now.job_s;
      if (baseline_->step_ms > 0) tracker_->mutable_state().healthy_ms = baseline_->step_ms;
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
  if (p.suspect && !tracker_->open_incident()) {
    // Held only when every rank reported: a rank missing may be the slow one (its agent behind), and the
    // incident would then wait for a re-profile instead of a window of its own.
    if (p.got.size() < p.expected.size()) {
      spdlog::info("early profile {}: {} of {} ranks reported; not held", p.id, views.size(), p.expected.size());
      return;
    }
    spdlog::info("early profile {}: {} of {} ranks reported; held for the incident it may open", p.id, views.size(),
                 p.expected.size());
    held_ = HeldProfile{std::move(p), in.groups, in.traffic, in.layout, now.mono_s};
    return;
  }
  localise_profile(p, in.groups, in.traffic, in.layout, now, out);
}

void Controller::localise_profile(const Profiling& p, const std::vector<GroupMembers>& groups,
                                  const std::map<std::uint64_t, GroupTraffic>& traffic,
                                  const std::optional<JobLayout>& layout, const Now& now, Intents& out) {
  std::vector<ProfileView> views;
  for (const auto& [r, v] : p.got) views.push_back(v);
  if (layout && !pending_) layout_ = layout;
  const Localisation loc = localise(views, groups, layout_, baseline_ ? &*baseline_ : nullptr);
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
  ++stats_.localisations[std::string(name(loc.cause))];
  // The groups' gauges keep the latest profile that timed them (one taken as communicators were being
  // replaced may time none of the registry's groups).
  if (auto timed = group_timings(views, groups, traffic); !timed.empty()) stats_.groups = std::move(timed);
  if (const auto& inc = tracker_->open_incident();
      inc && inc->id != localised_incident_ && loc.cause != Cause::kUnknown && !holds_back(loc)) {
    localised_incident_ = inc->id;
    stats_.localisation.add(now.job_s - inc->detected_t_s);
  }
  // A window the configuration changed in shows two configurations at once: it ends nothing, opens nothing.
  if (loc.step_ms > 0) unmeasured_in_row_ = 0;
  if (!(loc.step_ms > 0)) {
    spdlog::info("profile {} measured no iteration: fail-slows left as they were", p.id);
    // An incident nothing was localised for yet (a master restarted while a plan was being applied) would
    // otherwise wait for ever: it is profiled again after the usual gap.
    if (!settled_) {
      unmeasured_ = true;
      ++unmeasured_in_row_;
    }
  } else if (last_change_s_ < p.started_s) {
    // What the planner and the validator work from: a profile of one configuration that measured
    // iterations. One that measured none, or spans a plan switch (two configurations at once), would give
    // them replica times of nothing (an S2 solve that finds no better split, which counts towards declining S2).
    // A window the job's pace moved in (a fault ended or began inside it) shows two states at once: the
    // waiting in its groups moved from one member to another, and transfers look slower than they are. It
    // keeps and ends fail-slows as any window does, opens none, and is not what the planner works from: the
    // next window, of one state, decides. Only one window in a row is held back: a job whose pace keeps
    // moving (a link that comes and goes, uneven iterations) is judged on what its windows show, a window
    // later.
    const bool held_back = holds_back(loc);
    unsteady_in_row_ = loc.unsteady() ? unsteady_in_row_ + 1 : 0;
    if (held_back) {
      ++stats_.unsteady_windows;
      spdlog::info("profile {}: the job's pace moved {:.1f} % within its window: no fail-slow opened from it", p.id,
                   (loc.pace_spread - 1.0) * 100.0);
    } else {
      last_loc_ = loc;
      last_loc_profile_s_ = p.started_s;
    }
    last_groups_ = groups;
    last_ranks_.assign(p.expected.begin(), p.expected.end());
    const std::vector<FailSlow> opened = track_fail_slows(loc, held_back, now, out);
    schedule_probes(loc, now);
    // A fail-slow like one validated already in this incident (same cause, rank and link: a fail-slow that
    // ended and came back) is not paused for again.
    std::set<std::int64_t> fresh, ambiguous;
    for (const FailSlow& f : opened) {
      const std::string key = std::to_string(f.incident) + ":" + std::string(name(f.cause)) + ":" +
                              std::to_string(f.rank) + ":" + std::to_string(f.link_a) + "-" + std::to_string(f.link_b);
      if (!validated_keys_.insert(key).second) {
        validated_.insert(f.id);
        continue;
      }
      fresh.insert(f.id);
      if (f.cause == Cause::kUnknown) ambiguous.insert(f.id);
    }
    if (cfg_.validate == ValidateMode::kAlways && !fresh.empty()) {
      start_validation(loc, fresh, "new fail-slow(s) " + ids(fresh), now, out);
    } else if (cfg_.validate == ValidateMode::kAuto && !ambiguous.empty()) {
      start_validation(loc, ambiguous, "ambiguous profile (no cause) for fail-slow(s) " + ids(ambiguous), now, out);
    }
  } else {
    spdlog::info("profile {} straddles a change of configuration: fail-slows left as they were", p.id);
  }
  if (tracker_->open_incident()) {
    const bool any = !tracker_->state().fail_slows.empty();
    tracker_->set_phase(cfg_.mitigate && planner_ && any ? Phase::kMitigating : Phase::kSlow);
  }
  maybe_close_incident(now, out);
}

std::vector<FailSlow> Controller::track_fail_slows(const Localisation& loc, bool held_back, const Now& now,
                                                   Intents& out) {
  MasterState& st = tracker_->mutable_state();
  const auto& incident = tracker_->open_incident();
  const bool may_open = (incident.has_value() || !st.fail_slows.empty()) && !held_back;
  // A fail-slow the previous localisation did not show began after it (or with the incident, if later);
  // a window held back showed nothing to go by.
  const double onset = std::max(incident ? incident->onset_t_s : now.job_s, previous_loc_t_s_);
  if (!held_back) previous_loc_t_s_ = now.job_s;
  const FailSlowChanges ch = track(st.fail_slows, st.fail_slows_total, loc, layout_, incident ? incident->id : -1,
                                   onset, now.job_s, may_open, cfg_.fail_slows);
  const auto event = [&](const char* type, const FailSlow& f, const char* reason) {
    Event e = master_event(type, now);
    e.rank = f.rank;
    e.node = f.node;
    e.incident = f.incident;
    e.detail = to_json(FailSlowDetail{f, reason});
    out.events.push_back(std::move(e));
  };
  for (const FailSlow& f : ch.ended) {
    accounts_.erase(f.id);
    event(event_type::kFailSlowEnd, f, "the profile no longer shows it");
  }
  for (const FailSlow& f : ch.opened) {
    ++stats_.fail_slows[std::string(name(f.cause))];
    open_account(f);
    if (adopt_split_ && (f.cause == Cause::kComputation || f.cause == Cause::kHost)) {
      auto it = accounts_.find(f.id);
      if (it != accounts_.end() && it->second.ski) it->second.ski->resume(Strategy::kS2);
      split_for_.insert(f.id);
    }
    event(event_type::kFailSlowOpen, f, "localised");
  }
  if (adopt_split_) {
    adopt_split_ = false;
    if (split_for_.empty() && planner_ && planner_->split_in_force()) split_for_.insert(0);
  }
  settled_ = true;
  out.persist_state = true;
  return ch.opened;
}

// The job's healthy iteration: the lesser of the baseline's (a window that overlapped an onset is slower)
// and the level before the open incident (which, with a remedy in force for an earlier fail-slow, is that).
double Controller::healthy_s() const {
  double ms = tracker_->state().healthy_ms;
  if (tracker_->open_incident() && tracker_->open_incident()->before_ms > 0) {
    ms = ms > 0 ? std::min(ms, tracker_->open_incident()->before_ms) : tracker_->open_incident()->before_ms;
  }
  return ms > 0 ? ms * 1e-3 : last_iteration_s_;
}

// A fail-slow's ski rental, once the planner knows what the job can apply; continued from its account.
void Controller::open_account(const FailSlow& f) {
  if (!planner_ || accounts_.count(f.id) != 0) return;
  mitigate::SkiRentalIncident si;
  si.cause = ski_cause(f.cause);
  si.healthy_iteration_s = healthy_s();
  si.s2_available = planner_->available(Strategy::kS2, f.cause);
  si.s3_available = planner_->available(Strategy::kS3, f.cause);
  si.s4_available = planner_->available(Strategy::kS4, f.cause);
  auto ski = mitigate::SkiRental::create(planner_->costs(measured_s3_s_), si);
  if (!ski) {
    warn_once("ski:" + ski.error(), "no mitigation for fail-slow " + std::to_string(f.id) + ": " + ski.error());
    accounts_[f.id] = Account{};
    return;
  }
  mitigate::SkiRentalState st;
  st.strategy = f.account.rung;
  st.previous = f.account.previous;
  st.loss_s = f.account.loss_s;
  st.strategy_loss_s = f.account.rung_loss_s;
  st.last_iteration_s = f.account.last_iteration_s;
  st.window = f.account.window_s;
  st.s2_available = f.account.s2;
  st.s3_available = f.account.s3;
  st.s4_available = f.account.s4;
  // A new fail-slow has already cost the job since its onset: the iterations since then, at the rate the
  // job runs slower now (ski rental's rent counts from the onset, not from when it was found).
  const bool fresh = f.account.loss_s == 0 && f.account.window_s.empty();
  if (fresh && last_iteration_s_ > si.healthy_iteration_s) {
    st.loss_s = std::max(0.0, f.localised_t_s - f.onset_t_s) * (1.0 - si.healthy_iteration_s / last_iteration_s_);
    st.strategy_loss_s = st.loss_s;  // all of it under S1, the rung it starts on
    st.last_iteration_s = last_iteration_s_;
  }
  ski->restore(st);
  ski->set_confirmation_overhead(validated_.count(f.id) == 0 ? expected_pause_s() : 0.0);
  // ... and the rung that loss already pays for is taken now, not at the next iteration.
  if (fresh) {
    if (const auto d = ski->decide(); d.action == mitigate::SkiRentalAction::kApply) {
      spdlog::info("fail-slow {}: {}", f.id, d.reason);
    }
  }
  accounts_[f.id] = Account{std::move(ski).value()};
}

// What S3 and S4 cost on this job (the planner says: measured, the job's estimate, or configured), in every
// account of the job.
void Controller::refresh_costs() {
  if (!planner_) return;
  const mitigate::SkiRentalConfig c = planner_->costs(measured_s3_s_);
  for (auto& [id, a] : accounts_) {
    if (!a.ski) continue;
    a.ski->set_overhead(Strategy::kS3, c.s3_pause_s);
    a.ski->set_overhead(Strategy::kS4, c.s4_restart_s);
  }
}

// Agents' stall and fail-stop reports: the stalls held (for check_hangs) and the fail-stop counts.
void Controller::react_to_rank_health(const Event& e, const Now& now) {
  if (e.type == event_type::kStall) {
    std::string err;
    if (auto d = parse_stall_detail(e.detail, &err)) {
      stalls_[e.rank] = RankStall{e.node, std::move(*d)};
      if (stalls_since_s_ < 0) stalls_since_s_ = now.mono_s;
    } else {
      warn_once("stall", "a malformed stall report: " + err);
    }
    return;
  }
  if (e.type == event_type::kAgentStop) {  // its ranks' stalls end with it (a new agent reports anew)
    for (auto it = stalls_.begin(); it != stalls_.end();) it = it->second.node == e.node ? stalls_.erase(it) : std::next(it);
  } else if (e.type == event_type::kStallEnd || e.type == event_type::kFailStop) {
    stalls_.erase(e.rank);
  } else {
    return;
  }
  if (stalls_.empty()) {
    stalls_since_s_ = -1;
    hangs_named_.clear();
  }
  if (e.type == event_type::kFailStop) {
    ++stats_.fail_stops[e.rank];
    spdlog::warn("rank {} on node {} died (a fail-stop, reported by its agent at {:.2f} s): the job cannot go on "
                 "without it",
                 e.rank, e.node, e.t_s);
  }
}

// The agents' stall reports against the groups: a collective some members wait in and others never joined
// is a hang, named once (with a `hang` event, in the state for greyhoundctl status, and in /metrics). The
// members it waits for report a stall too (a rank stuck outside NCCL makes no call): it is named once they
// did, or 10 s after the first stall report.
void Controller::check_hangs(const JobInputs& in, const Now& now, Intents& out) {
  next_hang_check_s_ = now.mono_s + 1.0;
  for (HangDetail& h : find_hangs(stalls_, in.groups)) {
    if (hangs_named_.count({h.group, h.seq}) != 0) continue;
    const bool all_reported =
        std::all_of(h.missing.begin(), h.missing.end(), [&](int m) { return stalls_.count(m) != 0; });
    if (!all_reported && now.mono_s - stalls_since_s_ < 10.0) continue;
    hangs_named_.insert({h.group, h.seq});
    ++stats_.hangs;
    std::string missing;
    for (int m : h.missing) missing += (missing.empty() ? "" : ",") + std::to_string(m);
    spdlog::warn("hang: {} of {} rank(s) of group {} wait in its call {} ({}) since {:.2f} s for rank(s) {}", h.waiting.size(),
                 h.waiting.size() + h.missing.size(), group_id_hex(h.group), h.seq, h.op, h.since_t_s, missing);
    Event e = master_event(event_type::kHang, now);
    e.rank = h.missing.size() == 1 ? h.missing[0] : -1;
    e.detail = to_json(h);
    out.events.push_back(std::move(e));
    MasterState& st = tracker_->mutable_state();
    st.hangs.push_back(std::move(h));
    if (st.hangs.size() > kMaxHangsKept) st.hangs.erase(st.hangs.begin());
    ++st.hangs_total;
    out.persist_state = true;
  }
}

// What confirming a fail-slow with a pause is expected to cost it under --validate auto: the median of the
// job's measured pauses, else --pause-estimate-s; nothing when no pause will be made (another mode, or a job
// that marks no iterations: its validation is given up at once).
double Controller::expected_pause_s() const {
  if (cfg_.validate != ValidateMode::kAuto || !last_pace_ || last_pace_->mark < 0) return 0.0;
  return pauses_s_.empty() ? cfg_.pause.expected_pause_s : median_of(pauses_s_);
}

// Under --validate auto, a fail-slow not validated yet is confirmed by a pause before S3 or S4: what that
// pause is expected to cost is part of their price in its account.
void Controller::charge_confirmation() {
  const double expected = expected_pause_s();
  for (auto& [id, a] : accounts_) {
    if (a.ski) a.ski->set_confirmation_overhead(validated_.count(id) == 0 ? expected : 0.0);
  }
}

void Controller::sync_accounts() {
  for (FailSlow& f : tracker_->mutable_state().fail_slows) {
    auto it = accounts_.find(f.id);
    if (it == accounts_.end() || !it->second.ski) continue;
    const mitigate::SkiRentalState st = it->second.ski->state();
    f.account.rung = st.strategy;
    f.account.previous = st.previous;
    f.account.loss_s = st.loss_s;
    f.account.rung_loss_s = st.strategy_loss_s;
    f.account.last_iteration_s = st.last_iteration_s;
    f.account.window_s = st.window;
    f.account.s2 = st.s2_available;
    f.account.s3 = st.s3_available;
    f.account.s4 = st.s4_available;
    f.account.trusted = trusted_.count(f.id) != 0;
  }
}

std::set<std::int64_t> Controller::wanting(Strategy s) const {
  std::set<std::int64_t> out;
  for (const auto& [id, a] : accounts_) {
    if (a.ski && a.ski->strategy() == s) out.insert(id);
  }
  // A slow GPU or host that climbed to S3 keeps its split: the placement was planned with the split in
  // force (it moves the straggler's neighbours, the split still offloads its replica).
  if (s == Strategy::kS2) {
    for (const auto& [id, a] : accounts_) {
      if (a.ski && a.ski->strategy() == Strategy::kS3 && a.ski->can_help(Strategy::kS2)) {
        out.insert(id);
      }
    }
  }
  return out;
}

// Once per iteration of the job: every fail-slow's ski rental, and the remedy being checked.
void Controller::observe_iterations(const JobInputs& in, const Now& now, Intents& out) {
  if (!in.pace) return;
  const IterationUpdate& u = *in.pace;
  // First look, a new period lock, or another pacing rank (whose agent counts from its own start).
  if (last_iteration_index_ < 0 || u.index < last_iteration_index_ || u.rank != last_iteration_rank_) {
    last_iteration_index_ = u.index;
    last_iteration_rank_ = u.rank;
    return;
  }
  const std::int64_t n = std::min<std::int64_t>(u.index - last_iteration_index_, 64);
  last_iteration_index_ = u.index;
  double t = u.iter_ms * 1e-3;
  if (!(t > 0)) return;
  // A validation pause is no iteration of the job: its time is charged to the remedy it confirms (the price
  // of S3 and S4 holds it, charge_confirmation), not to the fail-slows' rent nor to a remedy being checked.
  // An iteration that ends once a rank has trapped is not observed (it waited on the pause); the first one
  // after the pause is, less the pause (no less than the job's typical iteration).
  if (validating_ && validating_->any_trapped()) return;
  if (n > 0 && pause_credit_s_ > 0 && !validating_) {
    const double typical = recent_s_.empty() ? t : std::min(t, median_of(recent_s_));
    t = std::max(t - pause_credit_s_, typical);
    pause_credit_s_ = 0;
    paused_index_ = u.index;
    paused_index_s_ = t;
    last_iteration_s_ = t;
  }
  charge_confirmation();
  // A healthy job's iterations turning slow (an early profile, due_suspect): counted once per reading (the
  // iterations the master missed between polls are not known slow), and only while healthy, so that none
  // is left over from an incident when it closes.
  if (n > 0) {
    const bool healthy = !tracker_->open_incident() && tracker_->state().fail_slows.empty();
    const bool slow = healthy && recent_s_.size() >= 8 && t >= cfg_.suspect_ratio * median_of(recent_s_);
    slow_streak_ = slow ? slow_streak_ + 1 : 0;
  }
  // One observation per iteration (the latest time stands in for any the master missed between polls).
  for (std::int64_t i = 0; i < n; ++i) {
    recent_s_.push_back(t);
    if (recent_s_.size() > 16) recent_s_.erase(recent_s_.begin());
    for (auto& [id, a] : accounts_) {
      if (!a.ski) continue;
      // The account's rung judged only on iterations it ran in: not under an operator's plan, nor while its
      // S2 or S3 plan awaits its acknowledgements (or was never made), else it would be climbed past on
      // iterations without it.
      const Strategy rung = a.ski->strategy();
      const bool held = operator_hold() ||
                        (rung == Strategy::kS2 && split_for_.count(id) == 0) ||
                        (rung == Strategy::kS3 && placement_for_.count(id) == 0);
      const auto d = a.ski->observe({t, true, held});
      if (d.action == mitigate::SkiRentalAction::kApply) {
        spdlog::info("fail-slow {}: {}", id, d.reason);
        out.persist_state = true;
      }
    }
    if (check_) {
      if (check_->settle > 0) {
        --check_->settle;
      } else {
        check_->measured_s.push_back(t);
        if (static_cast<int>(check_->measured_s.size()) >= cfg_.check_iterations) {
          judge(now, out);
        }
      }
    }
    if (++unsaved_iterations_ >= 10) {  // the accounts reach the store now and then, not every iteration
      unsaved_iterations_ = 0;
      out.persist_state = true;
    }
  }
}

// The remedy in force against the configuration it replaced: kept when it pays, else undone and not tried
// again for its fail-slows.
void Controller::judge(const Now& now, Intents& out) {
  Check c = std::move(*check_);
  check_.reset();
  const double measured = median_of(c.measured_s);
  RemedyCheck r;
  r.epoch = c.plan.epoch;
  r.strategy = c.plan.strategy;
  r.fail_slows.assign(c.fail_slows.begin(), c.fail_slows.end());
  r.predicted_ms = c.plan.predicted_iteration_s * 1e3;
  r.iterations = static_cast<int>(c.measured_s.size());
  char buf[224];
  if (!c.undo) {
    r.before_ms = c.before_s * 1e3;
    r.measured_ms = measured * 1e3;
    r.pays = r.before_ms > 0 && r.measured_ms < r.before_ms * (1.0 - cfg_.pay_margin);
    std::snprintf(buf, sizeof buf, "%.1f ms per iteration under it vs %.1f ms before (predicted %.1f ms)", r.measured_ms,
                  r.before_ms, r.predicted_ms);
    r.reason = std::string(r.pays ? "pays: " : "does not pay: ") + buf;
  } else {
    // Undone: if the configuration it replaced is now clearly slower than the remedy was, the fault changed
    // under the first check and the remedy pays after all.
    r.before_ms = measured * 1e3;        // without it, now
    r.measured_ms = c.before_s * 1e3;    // under it
    r.pays = r.measured_ms > 0 && r.measured_ms < r.before_ms * (1.0 - cfg_.pay_margin);
    std::snprintf(buf, sizeof buf, "%.1f ms per iteration under it vs %.1f ms once undone", r.measured_ms, r.before_ms);
    r.reason = std::string(r.pays ? "pays after all (measured again without it): " : "confirmed, does not pay: ") + buf;
  }
  Event e = master_event(event_type::kRemedyCheck, now);
  e.incident = c.plan.incident;
  e.before_ms = r.before_ms;
  e.after_ms = r.measured_ms;
  e.detail = to_json(r);
  out.events.push_back(std::move(e));
  out.persist_state = true;
  if (c.undo) {
    if (r.pays) {
      trusted_.insert(c.fail_slows.begin(), c.fail_slows.end());  // applied again by reconcile, not judged again
    } else {
      for (std::int64_t id : c.fail_slows) {
        auto it = accounts_.find(id);
        if (it != accounts_.end() && it->second.ski) it->second.ski->decline(c.plan.strategy);
      }
      // Only this incident's are kept: another incident is another state of the job.
      std::erase_if(refuted_, [&](const Refuted& x) { return x.incident != c.plan.incident; });
      refuted_.push_back({c.plan.incident, c.replaced, c.plan.microbatches, c.plan.placement, c.plan.epoch});
    }
    return;
  }
  if (r.pays || !planner_ || pending_ || out.plan) return;
  spdlog::info("remedy of plan {} {}; undoing it", c.plan.epoch, r.reason);
  if (auto p = planner_->back_to(c.replaced, true, true, "plan " + std::to_string(c.plan.epoch) + " " + r.reason)) {
    p->incident = c.plan.incident;
    propose_plan(std::move(*p), {}, false, out);
    c.undo = true;
    c.before_s = measured;
    c.settle = 1;
    c.measured_s.clear();
    pending_meta_->undo = std::move(c);
  }
}

// A remedy measured not paying in this incident that made the same change from the configuration in force.
const Controller::Refuted* Controller::refuted(const Plan& p) const {
  if (!planner_) return nullptr;
  for (const Refuted& r : refuted_) {
    if (r.incident == p.incident && r.from == planner_->current() && r.microbatches == p.microbatches &&
        r.placement == p.placement) {
      return &r;
    }
  }
  return nullptr;
}

// The remedies in force follow the fail-slows that want them.
void Controller::reconcile(const Now& now, Intents& out) {
  if (!cfg_.mitigate || !planner_ || !settled_ || pending_ || out.plan || check_ || operator_hold()) return;
  // The open incident, else the last one (whose remedy a revert undoes).
  const std::int64_t incident = tracker_->open_incident() ? tracker_->open_incident()->id
                                                          : (tracker_->state().incidents_total > 0 ? tracker_->state().incidents_total : -1);
  // A split whose fail-slows have all ended is undone before anything new is planned: it only slows the
  // job now (the GPU it offloaded recovered), and a new remedy's check would otherwise hold it in force. A
  // split whose fail-slow is still open (climbed to S4, say) stays until that rung is settled, below.
  const bool orphaned = std::none_of(split_for_.begin(), split_for_.end(),
                                     [&](std::int64_t id) { return accounts_.count(id) != 0; });
  if (orphaned && wanting(Strategy::kS2).empty() && reconcile_split({}, incident, out)) return;
  // While a validation pause runs, S3 and S4 wait for its verdict (S2 and reverts do not).
  const std::set<std::int64_t> want3 = wanting(Strategy::kS3);
  if (want3 != placement_for_ && !(validating_ && !want3.empty())) {
    if (want3.empty()) {
      if (auto p = planner_->back_to(planner_->original(), false, true,
                                     "no fail-slow wants the placement any more: back to the original placement")) {
        p->incident = incident;
        propose_plan(std::move(*p), {}, false, out);
        return;
      }
      placement_for_.clear();
    } else if (last_loc_) {
      double onset = now.job_s;
      for (const FailSlow& f : tracker_->state().fail_slows) {
        if (want3.count(f.id)) onset = std::min(onset, f.onset_t_s);
      }
      // A fail-slow that lasted t is expected to last about t more.
      auto p = planner_->s3(*last_loc_, last_iteration_s_, 2.0 * std::max(0.0, now.job_s - onset),
                            planner_->costs(measured_s3_s_).s3_pause_s, cfg_.pay_margin, "S3 for fail-slow(s) " + ids(want3));
      if (p) p->incident = incident;
      const Refuted* r = p ? refuted(*p) : nullptr;
      // Only a placement worth applying is worth a validation pause first (--validate auto); the plan is made
      // again after the verdict.
      if (p && !r && validate_first(want3, "S3", now, out)) return;
      if (r) {
        spdlog::info("fail-slow(s) {}: S3 declined: the same placement from the same configuration did not pay in "
                     "this incident (plan {})",
                     ids(want3), r->epoch);
        decline_all(want3, Strategy::kS3, out);
        out.persist_state = true;
      } else if (std::any_of(want3.begin(), want3.end(), [&](std::int64_t id) { return not_confirmed_.count(id) != 0; })) {
        for (std::int64_t id : want3) {
          if (not_confirmed_.count(id) == 0) continue;
          spdlog::info("fail-slow {}: S3 declined: its validation found no slow GPU or link", id);
          if (auto it = accounts_.find(id); it != accounts_.end() && it->second.ski) {
            it->second.ski->decline(Strategy::kS3);
          }
        }
        out.persist_state = true;
      } else if (p) {
        propose_plan(std::move(*p), want3, p->action == PlanAction::kApply, out);
        return;
      } else if (planner_->moved()) {
        // Nothing better than what runs: a placement in force already serves them (one of the fail-slows it
        // was made for ended, and the rest keep it); else S3 cannot help them, unless the localisation was
        // of a configuration that no longer runs (then the next profile decides).
        placement_for_ = want3;
      } else if (current_localisation()) {
        decline_all(want3, Strategy::kS3, out);
      }
    }
  }
  for (const FailSlow& f : tracker_->state().fail_slows) {
    auto it = accounts_.find(f.id);
    if (validating_ || it == accounts_.end() || !it->second.ski ||
        it->second.ski->strategy() != Strategy::kS4 || s4_sent_.count(f.id)) {
      continue;
    }
    // A restart leaves fewer DP replicas: it must beat what runs now by the pay margin. Without iteration
    // times yet (or a healthy one to predict from), it waits for them.
    const double now_s =
        median_of(std::vector<double>(recent_s_.end() - std::min<std::ptrdiff_t>(5, recent_s_.size()), recent_s_.end()));
    auto p = planner_->s4(f, healthy_s(), "S4 for fail-slow " + std::to_string(f.id));
    if (p && (!(p->predicted_iteration_s > 0) || !(now_s > 0))) continue;
    // Only a restart that pays is worth a validation pause first (--validate auto).
    const bool pays = p && p->predicted_iteration_s <= now_s * (1.0 - cfg_.pay_margin);
    if (pays && last_loc_ && validate_first({f.id}, "S4", now, out)) return;
    if (not_confirmed_.count(f.id)) {
      spdlog::info("fail-slow {}: S4 declined: its validation found no slow GPU or link", f.id);
      s4_sent_.insert(f.id);
      it->second.ski->decline(Strategy::kS4);
      continue;
    }
    s4_sent_.insert(f.id);
    if (pays) {
      propose_plan(std::move(*p), {f.id}, false, out);
      return;
    }
    spdlog::info("fail-slow {}: S4 declined: {}", f.id,
                 !p ? std::string("no DP replica would be left")
                    : "a restart predicted at " + std::to_string(p->predicted_iteration_s) + " s per iteration against " +
                          std::to_string(now_s) + " s now does not pay");
    it->second.ski->decline(Strategy::kS4);
  }
  // S2 last: a fail-slow that climbed from S2 to S3 or S4 keeps its split until that rung is settled
  // (planned, or declined and back at S2), so the split is not undone and redone in between (only a split
  // of fail-slows that all ended was undone first, above).
  reconcile_split(wanting(Strategy::kS2), incident, out);
}

// The split follows the fail-slows that want it; true when a plan was proposed.
bool Controller::reconcile_split(const std::set<std::int64_t>& want2, std::int64_t incident, Intents& out) {
  if (want2 == split_for_) return false;
  if (want2.empty()) {
    if (auto p = planner_->back_to(planner_->original(), true, false,
                                   "no fail-slow wants the split any more (it served " + ids(split_for_) +
                                       "): back to the original allocation")) {
      p->incident = incident;
      propose_plan(std::move(*p), {}, false, out);
      return true;
    }
    split_for_.clear();
    return false;
  }
  if (!last_loc_) return false;
  if (auto p = planner_->s2(*last_loc_, last_iteration_s_, "S2 for fail-slow(s) " + ids(want2))) {
    p->incident = incident;
    if (const Refuted* r = refuted(*p)) {
      spdlog::info("fail-slow(s) {}: S2 declined: the same split from the same configuration did not pay in this "
                   "incident (plan {})",
                   ids(want2), r->epoch);
      decline_all(want2, Strategy::kS2, out);
      out.persist_state = true;
      return false;
    }
    propose_plan(std::move(*p), want2, p->action == PlanAction::kApply, out);
    return true;
  }
  // Nothing better than what runs: a split in force already serves them; else S2 cannot help them, unless
  // the localisation was of a configuration that no longer runs (the replica times it measured under
  // another split or placement): not declined on it, the profile that follows the change decides. Nor on
  // one window: a fail-slow is declined once kS2NothingBetterToDecline localisations of it found nothing.
  if (planner_->split_in_force()) {
    split_for_ = want2;
  } else if (current_localisation()) {
    std::set<std::int64_t> spent;
    for (std::int64_t id : want2) {
      auto it = accounts_.find(id);
      if (it == accounts_.end()) continue;
      Account& a = it->second;
      if (a.s2_nothing_better_profile_s < last_loc_profile_s_) {
        a.s2_nothing_better_profile_s = last_loc_profile_s_;
        ++a.s2_nothing_better;
        spdlog::info("fail-slow {}: S2 finds no split better than what runs ({} of {} localisations before it is "
                     "declined)",
                     id, a.s2_nothing_better, kS2NothingBetterToDecline);
      }
      if (a.s2_nothing_better >= kS2NothingBetterToDecline) spent.insert(id);
    }
    if (!spent.empty()) {
      spdlog::info("fail-slow(s) {}: S2 declined: no split better than what runs on {} localisations", ids(spent),
                   kS2NothingBetterToDecline);
      decline_all(spent, Strategy::kS2, out);
    }
  }
  return false;
}

// The rung declined for each of the fail-slows (those with an account).
void Controller::decline_all(const std::set<std::int64_t>& ids, Strategy rung, Intents& out) {
  for (std::int64_t id : ids) {
    if (auto it = accounts_.find(id); it != accounts_.end() && it->second.ski) it->second.ski->decline(rung);
  }
  out.persist_state = true;
}

// The master's own evidence closes the incident: no fail-slow left, and the configuration back to the
// original after a remedy (a mitigated job's iteration time may not change when the fault ends, so no
// recovery report may come).
void Controller::maybe_close_incident(const Now& now, Intents& out) {
  if (!tracker_->open_incident() || !mitigated_ || !tracker_->state().fail_slows.empty() || pending_ || !planner_ ||
      planner_->split_in_force() || planner_->moved()) {
    return;
  }
  mitigated_ = false;
  Decision d;
  tracker_->close(now.job_s, "fail-slows gone (profile) and configuration reverted to the original", d);
  take(std::move(d), now, out);
}

void Controller::propose_plan(Plan plan, std::set<std::int64_t> fail_slows, bool remedy, Intents& out) {
  plan.epoch = ++epoch_;
  pending_meta_ = PendingPlan{};
  pending_meta_->fail_slows = std::move(fail_slows);
  pending_meta_->remedy = remedy;
  pending_meta_->replaced = planner_ ? planner_->current() : JobConfig{};
  out.plan = std::move(plan);
}

Intents Controller::plan_published(const Plan& plan, const Now& now) {
  Intents out;
  if (pending_meta_ && !pending_meta_->operator_id.empty()) {
    OperatorPlanReport a;
    a.id = pending_meta_->operator_id;
    a.state = "published";
    a.epoch = plan.epoch;
    a.reason = plan.reason;
    a.t_unix_ms = now.unix_ms;
    out.operator_plan = std::move(a);
    set_operator_hold(true);
    spdlog::info("{} published as plan {}", plan.reason, plan.epoch);
  }
  out.events.push_back(plan_event(plan, now));
  MasterState& st = tracker_->mutable_state();
  st.plans_recorded = std::max(st.plans_recorded, plan.epoch);
  out.persist_state = true;
  PendingPlan p = pending_meta_ ? std::move(*pending_meta_) : PendingPlan{};
  pending_meta_.reset();
  p.plan = plan;
  p.deadline_s = now.mono_s + cfg_.ack_timeout_s;
  pending_ = std::move(p);
  return out;
}

Event Controller::plan_event(const Plan& plan, const Now& now) const {
  Event e = master_event(event_type::kPlan, now);
  e.t_unix_ms = plan.t_unix_ms != 0 ? plan.t_unix_ms : now.unix_ms;
  e.incident = plan.incident;
  e.detail = to_json(plan);
  return e;
}

Intents Controller::record_plans_late(const std::vector<Plan>& plans, std::int64_t recorded, const Now& now) {
  Intents out;
  if (!tracker_) return out;
  MasterState& st = tracker_->mutable_state();
  if (recorded > st.plans_recorded) {
    st.plans_recorded = recorded;
    out.persist_state = true;
  }
  for (const Plan& plan : plans) {
    if (plan.epoch <= st.plans_recorded) continue;
    spdlog::warn("plan {} has no plan event (a master stopped before recording it, or the job published it when the plan lease lapsed): written now",
                 plan.epoch);
    Event e = plan_event(plan, now);
    // In job time, when it was published (the job's clock then: now less the wall time since).
    if (plan.t_unix_ms > 0 && plan.t_unix_ms <= now.unix_ms) {
      e.t_s = std::max(0.0, now.job_s - static_cast<double>(now.unix_ms - plan.t_unix_ms) * 1e-3);
    }
    e.detail["recorded_late"] = true;
    out.events.push_back(std::move(e));
    st.plans_recorded = plan.epoch;
    out.persist_state = true;
  }
  return out;
}

void Controller::plan_failed(const Plan& plan) {
  if (plan.epoch == epoch_) --epoch_;
  if (pending_meta_ && !pending_meta_->operator_id.empty()) operator_seen_.clear();  // served again at the next read
  pending_meta_.reset();
  warn_once("plan", "could not publish a plan");
}

void Controller::check_acks(const JobInputs& in, const Now& now, Intents& out) {
  if (!pending_ || !layout_) return;
  const Plan& plan = pending_->plan;
  PlanOutcome o;
  o.epoch = plan.epoch;
  o.strategy = plan.strategy;
  o.action = plan.action;
  o.ranks = layout_->world;
  for (const PlanAck& a : in.acks) {
    if (a.epoch != plan.epoch) continue;
    o.apply_s = std::max(o.apply_s, a.apply_s);
    if (a.status == AckStatus::kApplied) ++o.applied;
    if (a.status == AckStatus::kUnsupported) ++o.unsupported;
    if (a.status == AckStatus::kRejected) ++o.rejected;
    o.from_iteration = std::max(o.from_iteration, a.iteration);
  }
  const int acks = o.applied + o.unsupported + o.rejected;
  const char* type = nullptr;
  const auto decline = [&] {
    for (std::int64_t id : pending_->fail_slows) {
      if (auto it = accounts_.find(id); it != accounts_.end() && it->second.ski) it->second.ski->decline(plan.strategy);
    }
  };
  const Plan applied_plan = plan;  // pending_ goes below
  const bool restarts = restart_plan(plan);  // before the plan's placement is taken as in force
  if (acks >= layout_->world) {
    type = o.applied == layout_->world ? event_type::kPlanApplied : event_type::kPlanRejected;
    if (o.applied == layout_->world) {
      if (planner_) planner_->applied(plan);
      last_change_s_ = now.mono_s;
      if (!plan.microbatches.empty()) layout_->microbatches = plan.microbatches;
      if (!plan.microbatches.empty()) split_for_ = planner_ && planner_->split_in_force() ? pending_->fail_slows : std::set<std::int64_t>{};
      if (plan.placement.is_array()) placement_for_ = planner_ && planner_->moved() ? pending_->fail_slows : std::set<std::int64_t>{};
      // A placement switch the job timed: S3 costs that on this job from now on, not the configured pause.
      if (plan.placement.is_array() && o.apply_s > 0) {
        measured_s3_s_ = o.apply_s;
        refresh_costs();
      }
      if (operator_hold()) {
        // The operator holds the configuration: no remedy of greyhound's is judged (or undone) meanwhile.
      } else if (pending_->undo) {
        check_ = std::move(*pending_->undo);
      } else if (pending_->remedy && std::all_of(pending_->fail_slows.begin(), pending_->fail_slows.end(),
                                                 [&](std::int64_t id) { return trusted_.count(id) != 0; })) {
        if (tracker_->open_incident()) mitigated_ = true;  // shown paying by an undo check: not judged again
      } else if (pending_->remedy) {
        if (tracker_->open_incident()) mitigated_ = true;
        Check c;
        c.plan = plan;
        c.fail_slows = pending_->fail_slows;
        c.replaced = pending_->replaced;
        c.before_s = median_of(std::vector<double>(recent_s_.end() - std::min<std::ptrdiff_t>(5, recent_s_.size()), recent_s_.end()));
        // A fail-slow that began a moment ago (one that overlaps another) has few of the iterations before the
        // remedy: the localisation the remedy was made from measured the job with it.
        if (last_loc_ && last_loc_->step_ms > 0) c.before_s = std::max(c.before_s, last_loc_->step_ms * 1e-3);
        if (c.before_s > 0) check_ = std::move(c);
      }
    } else {
      decline();
    }
    last_profile_end_s_ = std::min(last_profile_end_s_, now.mono_s - reprofile_gap_s() + 1.0);  // measure it soon
  } else if (now.mono_s >= pending_->deadline_s) {
    type = event_type::kPlanTimeout;
    decline();
    // A restart plan that timed out (S4, or S3 for a job that applies it by restarting: its checkpoint may
    // take longer than the deadline) may still have stopped the job: watch its layout for a restart.
    if (restarts) {
      restart_unsettled_ = true;
      layout_wanted_ = true;
    }
  } else {
    return;
  }
  ++stats_.plans[{std::string(name(plan.strategy)), type == event_type::kPlanApplied    ? "applied"
                                                    : type == event_type::kPlanRejected ? "rejected"
                                                                                        : "timeout"}];
  if (type == event_type::kPlanApplied && pending_->remedy) {
    for (const FailSlow& f : fail_slows()) {
      if (pending_->fail_slows.count(f.id) && remedied_.insert(f.id).second) stats_.remedy.add(now.job_s - f.localised_t_s);
    }
  }
  Event e = master_event(type, now);
  e.incident = plan.incident;
  e.detail = to_json(o);
  out.events.push_back(std::move(e));
  out.persist_state = true;
  pending_.reset();
  if (type == event_type::kPlanApplied && applied_plan.strategy == Strategy::kS4 && applied_plan.action == PlanAction::kApply) {
    std::string without;
    for (int n : applied_plan.exclude_nodes) without += (without.empty() ? "" : ", ") + std::to_string(n);
    job_restarting("the job restarts from its checkpoint without node(s) " + without + " (S4 plan " +
                       std::to_string(applied_plan.epoch) + ")",
                   applied_plan.epoch, now, out);
    return;
  }
  if (type == event_type::kPlanApplied && restarts && applied_plan.strategy != Strategy::kS4) {
    // A job that places its roles only when it builds its model (s3_by_restart) saved its checkpoint and is
    // going down, to come back with the new placement as its own: the restart is the remedy, as for S4.
    job_restarting("the job restarts from its checkpoint with its roles placed by S3 plan " +
                       std::to_string(applied_plan.epoch),
                   applied_plan.epoch, now, out, Strategy::kS3);
    return;
  }
  maybe_close_incident(now, out);
}

// Whether the job applies `plan` by restarting: S4, or a new placement for a job that applies S3 so.
bool Controller::restart_plan(const Plan& plan) const {
  if (plan.strategy == Strategy::kS4 && plan.action == PlanAction::kApply) return true;
  if (!layout_ || !layout_->s3_by_restart || !plan.placement.is_array()) return false;
  const auto placed = store::placement_of_plan(plan.placement, layout_->tp, layout_->dp, layout_->pp);
  return placed && *placed != store::placement_in_force(*layout_);
}

// An S4 plan in force: every rank saved its checkpoint and the job is going down, to come back without the
// nodes the plan names (the job store dropped its layout with the restart request). The restart is the
// remedy of every fail-slow of the old job: they end; what was measured on it no longer holds.
void Controller::job_restarting(const std::string& why, std::int64_t epoch, const Now& now, Intents& out,
                                Strategy strategy) {
  for (const FailSlow& f : open_fail_slows()) {
    Event e = master_event(event_type::kFailSlowEnd, now);
    e.rank = f.rank;
    e.node = f.node;
    e.incident = f.incident;
    e.detail = to_json(FailSlowDetail{f, why});
    out.events.push_back(std::move(e));
  }
  open_fail_slows().clear();
  accounts_.clear();
  split_for_.clear();
  placement_for_.clear();
  s4_sent_.clear();
  trusted_.clear();
  probes_.clear();
  check_.reset();
  last_loc_.reset();
  planner_.reset();
  measured_s3_s_ = 0;  // a new job: its switches are yet to be timed
  restarting_ = layout_ ? layout_ : JobLayout{};
  restarting_epoch_ = epoch;
  restarting_strategy_ = strategy;
  restart_unsettled_ = false;
  pending_.reset();  // a plan in flight to the old job: nobody is left to acknowledge it
  profiling_.reset();  // a window of the old job says nothing of the new one
  layout_.reset();
  layout_wanted_ = true;
  baseline_.reset();
  baseline_at_s_ = -1e18;
  tracker_->mutable_state().healthy_ms = 0;
  recent_s_.clear();
  last_iteration_index_ = -1;
  last_iteration_s_ = 0;
  previous_loc_t_s_ = -1e18;
  mitigated_ = false;
  want_profile_ = false;
  held_.reset();  // the old job's: nothing of it localises the restarted one
  slow_streak_ = 0;
  settled_ = true;
  adopt_split_ = false;
  if (tracker_->open_incident()) {
    Decision d;
    tracker_->close(now.job_s, why, d);
    take(std::move(d), now, out);
  }
  healthy_since_s_ = now.mono_s;
  out.persist_state = true;
  spdlog::info("{}: waiting for its layout", why);
}

// The restarted job's layout: a new planner (its original is what it restarted with), a new baseline once
// it has run healthy for baseline_after_s.
void Controller::job_restarted(const JobLayout& layout, const Now& now, Intents& out) {
  JobRestart r;
  r.epoch = restarting_epoch_;
  r.strategy = restarting_strategy_;
  r.world_before = restarting_->world;
  r.dp_before = restarting_->dp;
  r.world = layout.world;
  r.dp = layout.dp;
  r.microbatches = layout.microbatches;
  Event e = master_event(event_type::kJobRestart, now);
  e.detail = to_json(r);
  out.events.push_back(std::move(e));
  out.persist_state = true;
  spdlog::info("the job is back after {} plan {}: {} ranks (DP {}), was {} (DP {})", name(r.strategy), r.epoch, r.world,
               r.dp, r.world_before, r.dp_before);
  restarting_.reset();
  layout_ = layout;
  healthy_since_s_ = now.mono_s;
}

}  // namespace greyhound::master

namespace greyhound::master {

bool Controller::start_validation(const Localisation& loc, std::set<std::int64_t> fail_slows, const std::string& why,
                                  const Now& now, Intents& out) {
  if (validating_ || restarting_ || last_agents_.empty() || last_ranks_.empty()) return false;
  const auto give_up = [&](const std::string& reason) {
    for (std::int64_t id : fail_slows) validated_.insert(id);
    warn_once("validate:" + reason, "no validation pause: " + reason);
    ValidatedReport v;
    v.id = "validate-" + std::to_string(validations_ + 1) + "." + run_tag_;
    v.aborted = true;
    v.reason = reason;
    v.localised_t_s = now.job_s;
    Event e = master_event(event_type::kValidated, now);
    e.incident = tracker_->open_incident() ? tracker_->open_incident()->id : -1;
    e.detail = to_json(v);
    out.events.push_back(std::move(e));
    out.persist_state = true;
    return false;
  };
  if (!last_pace_ || last_pace_->mark < 0) return give_up("the job marks no iterations (greyhound_job_mark_iteration_v1)");
  launch_pause(loc, plan_validation(loc, last_groups_, cfg_.validator, last_node_of_),
               "validate-" + std::to_string(++validations_) + "." + run_tag_, why, now, out);
  validating_for_ = std::move(fail_slows);
  return true;
}

void Controller::launch_pause(const Localisation& loc, ValidationPlan plan, const std::string& id, const std::string& why,
                              const Now& now, Intents& out, std::optional<std::int64_t> at_given) {
  // The cut: far enough ahead that every rank is still before it when its agent arms it.
  const double iter_s = last_iteration_s_ > 0 ? last_iteration_s_ : 1.0;
  std::int64_t at = 0;
  double arm_timeout_s = cfg_.pause.arm_timeout_s;
  if (at_given) {  // the job's first iteration: the ranks get there when their setup is over (at most half the
                   // pause deadline is waited for them: ValidationRun's cap)
    at = *at_given;
    if (arm_timeout_s <= 0) arm_timeout_s = cfg_.pause.deadline_s;
  } else {
    const double stale_s = std::max(0.0, now.job_s - last_pace_->t_s);
    const std::int64_t ahead = cfg_.pause.lead_iterations + static_cast<std::int64_t>(std::ceil(stale_s / iter_s));
    at = last_pace_->mark + ahead;
    if (arm_timeout_s <= 0) arm_timeout_s = (static_cast<double>(ahead) + 3.0) * iter_s + 5.0;
  }
  const PauseSpec spec = pause_spec(plan, last_groups_, last_ranks_, at, cfg_.pause);
  spdlog::info("{}: pause {} at iteration {} ({} ranks; {})", why, id, at, spec.ranks.size(), plan.why);
  validating_.emplace(id, std::move(plan), spec, last_groups_, loc, now.job_s, now.mono_s, arm_timeout_s,
                      cfg_.pause.min_link_excess_ms);
  ProfileRequest req;
  req.command.cmd = "pause";
  req.command.id = id;
  req.command.pause = spec;
  req.nodes = last_agents_;
  out.commands.push_back(std::move(req));
}

// After each localisation: a link fail-slow it could not see (no group crossed the link) gets a probe, due
// probe_iterations after now; one it saw needs none.
void Controller::schedule_probes(const Localisation& loc, const Now& now) {
  for (auto it = probes_.begin(); it != probes_.end();) {
    const bool open = std::any_of(fail_slows().begin(), fail_slows().end(), [&](const FailSlow& f) { return f.id == it->first; });
    it = open ? std::next(it) : probes_.erase(it);
  }
  if (cfg_.probe_iterations <= 0 || !cfg_.mitigate) return;  // only a placement moves the job off a link
  const double iter_s = typical_iteration_s();
  for (const FailSlow& f : fail_slows()) {
    if (f.cause != Cause::kCommunication || observed(loc, f)) {
      probes_.erase(f.id);
    } else if (probes_.count(f.id) == 0) {
      probes_[f.id] = {now.mono_s + cfg_.probe_iterations * iter_s, cfg_.probe_iterations};
    }
  }
}

void Controller::maybe_probe(const Now& now, Intents& out) {
  if (probes_.empty() || validating_ || profiling_ || pending_ || out.plan || check_ || restarting_ || want_profile_ ||
      last_groups_.empty() || last_agents_.empty() || last_ranks_.empty()) {
    return;
  }
  const double iter_s = typical_iteration_s();
  for (auto& [id, p] : probes_) {
    if (now.mono_s < p.due_s) continue;
    const auto f = std::find_if(fail_slows().begin(), fail_slows().end(),
                                [probed = id](const FailSlow& x) { return x.id == probed; });
    if (f == fail_slows().end()) continue;
    // The next one (if this one finds the link still slow, or cannot run) twice as long after.
    p.gap_iterations = std::min(2 * p.gap_iterations, 16 * cfg_.probe_iterations);
    p.due_s = now.mono_s + p.gap_iterations * iter_s;
    if (!last_pace_ || last_pace_->mark < 0) {
      warn_once("probe-marks", "link fail-slows nothing crosses cannot be probed: the job marks no iterations "
                               "(greyhound_job_mark_iteration_v1); they stay open");
      return;
    }
    std::set<std::pair<int, int>> avoid;  // known slow links make no reference
    for (const FailSlow& o : fail_slows()) {
      if (o.cause == Cause::kCommunication && o.id != id) avoid.insert({o.link_a, o.link_b});
    }
    ValidationPlan plan = plan_link_probe(f->link_a, f->link_b, last_groups_, last_node_of_, avoid);
    if (!cfg_.pause.sizes.empty()) {  // slow or not is all a probe asks: the smallest size tells
      plan.sizes = {*std::min_element(cfg_.pause.sizes.begin(), cfg_.pause.sizes.end())};
    }
    if (plan.empty()) {
      warn_once("probe-plan:" + std::to_string(id),
                "fail-slow " + std::to_string(id) + ": no group holds ranks of both ends of link " +
                    std::to_string(f->link_a) + "-" + std::to_string(f->link_b) +
                    " and of another pair of nodes to compare with; it cannot be probed");
      continue;
    }
    probing_ = id;
    launch_pause(Localisation{}, std::move(plan), "probe-" + std::to_string(++probes_started_) + "." + run_tag_,
                 "fail-slow " + std::to_string(id) + " (link " + std::to_string(f->link_a) + "-" +
                     std::to_string(f->link_b) + ") crossed by no group",
                 now, out);
    return;
  }
}

// A probe's verdict: the link at its peers' level ends its fail-slow (its remedy then follows the set); still
// slow, or no verdict, it stays, probed again later.
void Controller::probe_judged(std::int64_t id, const ValidatedReport& v, const Now& now, Intents& out) {
  auto& open = open_fail_slows();
  const auto f = std::find_if(open.begin(), open.end(), [&](const FailSlow& x) { return x.id == id; });
  if (f == open.end() || v.aborted) return;
  // Back only when the transfer over its link was measured and judged at its peers' level: one that was not
  // measured (it did not finish, or its nodes are unknown) says nothing, whatever the others say.
  const auto link = std::find_if(v.links.begin(), v.links.end(), [&](const ValidatedLink& l) {
    return std::min(l.src_node, l.dst_node) == f->link_a && std::max(l.src_node, l.dst_node) == f->link_b &&
           l.ms > 0 && l.peers_ms > 0;
  });
  if (link == v.links.end() || link->slow || v.cause != "none") {
    spdlog::info("fail-slow {}: the probe {} ({}); probed again later", id,
                 link == v.links.end() ? "measured nothing of its link"
                 : link->slow          ? "finds its link still slow"
                                       : "finds something else slow",
                 v.reason);
    return;
  }
  FailSlow ended = *f;
  ended.ended_t_s = now.job_s;
  open.erase(f);
  accounts_.erase(id);
  probes_.erase(id);
  Event e = master_event(event_type::kFailSlowEnd, now);
  e.rank = ended.rank;
  e.node = ended.node;
  e.incident = ended.incident;
  e.detail = to_json(FailSlowDetail{ended, "a probe pause measured its link at its peers' level"});
  out.events.push_back(std::move(e));
  out.persist_state = true;
  spdlog::info("fail-slow {} (link {}-{}) ended: {}", id, ended.link_a, ended.link_b, v.reason);
}

void Controller::step_validation(const Now& now, Intents& out) {
  const ValidationRun::Step s = validating_->step(now.mono_s);
  if (s.command) {
    ProfileRequest req;
    req.command.cmd = *s.command;
    req.command.id = validating_->id();
    req.nodes = last_agents_;
    out.commands.push_back(std::move(req));
  }
  if (!s.finished) return;
  const ValidatedReport v = validating_->outcome();
  const bool told_to_exit = validating_->told_to_exit();
  validating_.reset();
  for (std::int64_t id : validating_for_) {
    validated_.insert(id);
    if (!v.aborted && v.cause == "none") not_confirmed_.insert(id);
  }
  if (!v.aborted) {
    for (const FailSlow& f : settle_cause(tracker_->mutable_state().fail_slows, v, validating_for_)) {
      spdlog::info("fail-slow {}: validation {} measured rank {}'s GPU: cause {}", f.id, v.id, f.rank, name(f.cause));
    }
  }
  validating_for_.clear();
  const std::int64_t probed = probing_;
  probing_ = 0;
  // The job stood still this long: taken off the iteration that held it, and (a validation's, not a link
  // probe's: those test one link) what the next validation is expected to cost.
  const bool preflight = preflight_ && preflight_->running && preflight_->report.pause == v.id;
  if (v.pause_s > 0) {
    pause_credit_s_ = v.pause_s;
    if (probed == 0 && !preflight) pauses_s_.push_back(v.pause_s);
    if (pauses_s_.size() > 5) pauses_s_.erase(pauses_s_.begin());
  }
  if (preflight) {
    last_profile_end_s_ = now.mono_s;
    preflight_finished(v, told_to_exit, now, out);
    return;
  }
  ++(probed != 0 ? stats_.probes : stats_.validations);
  Event e = master_event(event_type::kValidated, now);
  e.rank = v.cause == "gpu" || v.cause == "host" ? v.rank : -1;
  e.node = v.cause == "gpu" || v.cause == "host" ? v.node : -1;
  e.ratio = v.ratio;
  e.incident = tracker_->open_incident() ? tracker_->open_incident()->id : -1;
  e.detail = to_json(v);
  out.events.push_back(std::move(e));
  out.persist_state = true;
  if (v.aborted) {
    spdlog::warn("validation {} aborted: {} (paused {:.2f} s)", v.id, v.reason, v.pause_s);
  } else {
    spdlog::info("validation {}: {} ({}); paused {:.2f} s, tests {:.2f} s", v.id, v.cause, v.reason, v.pause_s, v.tests_s);
  }
  // The pause is no iteration of the job: the next profile starts after it.
  last_profile_end_s_ = now.mono_s;
  if (probed != 0) probe_judged(probed, v, now, out);
}

bool Controller::validate_first(const std::set<std::int64_t>& ids_in, const char* remedy, const Now& now,
                                Intents& out) {
  if (cfg_.validate != ValidateMode::kAuto || !last_loc_) return false;
  std::set<std::int64_t> todo;
  for (std::int64_t id : ids_in) {
    if (id > 0 && validated_.count(id) == 0) todo.insert(id);
  }
  if (todo.empty()) return false;
  return start_validation(*last_loc_, todo, std::string("before ") + remedy + " for fail-slow(s) " + ids(todo), now, out);
}

// Pre-flight (docs/validation.md, "Pre-flight").
Intents Controller::offer_preflight(const PreflightRequest& req, bool answered, const Now& now) {
  Intents out;
  if (req.id == preflight_seen_) return out;
  preflight_seen_ = req.id;
  if (answered) return out;  // an earlier run of this master answered it
  if (preflight_ && preflight_->running) {
    warn_once("preflight-busy", "pre-flight " + req.id + " arrived while " + preflight_->request.id +
                                    " is running: it is served after that one");
    preflight_seen_ = preflight_->request.id;  // seen again at the next read, once this one is over
    return out;
  }
  Preflight p;
  p.request = req;
  p.report.id = req.id;
  p.report.fail_on_slow = req.fail_on_slow;
  p.report.state = "waiting";
  p.report.reason = "waiting for the job's ranks, groups and first iterations";
  p.report.t_unix_ms = now.unix_ms;
  p.waiting_since_s = now.mono_s;
  spdlog::info("pre-flight {} requested{}: waiting for the job's ranks", req.id, req.fail_on_slow ? " (fail on slow)" : "");
  out.preflight = p.report;
  preflight_ = std::move(p);
  return out;
}

void Controller::preflight_withdrawn() {
  if (!preflight_ || preflight_->running) return;
  spdlog::info("pre-flight {} withdrawn before it ran", preflight_->request.id);
  preflight_.reset();
}

void Controller::maybe_start_preflight(const JobInputs& in, const Now& now, Intents& out) {
  Preflight& p = *preflight_;
  const auto answer = [&](const std::string& state, const std::string& reason) {  // waiting, running
    if (p.report.state == state && p.report.reason == reason) return;
    p.report.state = state;
    p.report.reason = reason;
    p.report.t_unix_ms = now.unix_ms;
    out.preflight = p.report;
  };
  if (validating_ || profiling_ || restarting_ || pending_ || out.plan || out.profile) return;
  std::vector<int> ranks;
  for (int r : in.ranks) {
    if (!in.layout || r < in.layout->world) ranks.push_back(r);  // the registry keeps a restarted job's old ranks
  }
  std::vector<GroupMembers> groups;
  std::set<int> grouped;
  for (const GroupMembers& g : in.groups) {
    if (std::all_of(g.members.begin(), g.members.end(),
                    [&](int r) { return std::binary_search(ranks.begin(), ranks.end(), r); })) {
      groups.push_back(g);
      grouped.insert(g.members.begin(), g.members.end());
    }
  }
  std::vector<std::uint64_t> ids;
  for (const GroupMembers& g : groups) ids.push_back(g.group);
  std::sort(ids.begin(), ids.end());
  if (ranks != p.ranks || ids != p.groups) {  // still coming up
    p.ranks = ranks;
    p.groups = ids;
    p.stable_since_s = now.mono_s;
  }
  const bool marks = last_pace_ && last_pace_->mark >= 0;
  if (ranks.empty() || in.agents.empty()) return answer("waiting", "waiting for the job's ranks to register");
  if (in.layout && static_cast<int>(ranks.size()) < in.layout->world) {
    return answer("waiting", "waiting for the job's ranks: " + std::to_string(ranks.size()) + " of " +
                                 std::to_string(in.layout->world) + " registered");
  }
  if (grouped.size() < ranks.size()) {
    return answer("waiting", "waiting for the job's groups: " + std::to_string(ranks.size() - grouped.size()) +
                                 " rank(s) in no complete group yet");
  }
  if (now.mono_s - p.stable_since_s < 1.0) return answer("waiting", "waiting for the job's ranks and groups to settle");
  // Before the job's pace is known, one try at its very first iteration (0): a job that still sets up (builds
  // its model, loads a checkpoint) after making its communicators traps there before training at all; ranks
  // already past it refuse, and the pause is tried again at the job's pace.
  std::optional<std::int64_t> first;
  if (!marks) {
    if (p.attempts == 0) {
      first = 0;
      p.waiting_since_s = now.mono_s;  // the marks are waited for from here
    } else if (now.mono_s - p.waiting_since_s > kPreflightMarkWaitS) {
      PreflightReport r = p.report;
      r.state = "failed";
      r.reason = "no iteration marks from the job within " + std::to_string(static_cast<int>(kPreflightMarkWaitS)) +
                 " s of the first try (does it call greyhound_job_mark_iteration_v1?): no rank can be paused";
      return finish_preflight(std::move(r), now, out);
    } else {
      return answer("waiting", "waiting for the job's first iterations");
    }
  }
  last_agents_ = in.agents;
  last_ranks_ = ranks;
  last_groups_ = groups;
  ValidationPlan plan = plan_preflight(groups, cfg_.validator);
  const int groups_tested = static_cast<int>(plan.p2p.size());
  const std::string id = "preflight-" + std::to_string(++preflights_started_) + "." + run_tag_;
  ++p.attempts;
  launch_pause(Localisation{}, std::move(plan), id, "pre-flight " + p.request.id, now, out, first);
  if (p.request.fail_on_slow) validating_->exit_on_slow();
  p.running = true;
  p.report.pause = id;
  p.report.groups_tested = groups_tested;
  p.report.ranks = static_cast<int>(ranks.size());
  p.report.at_iteration = validating_->spec().at_iteration;
  answer("running", "pausing " + std::to_string(ranks.size()) + " ranks at iteration " +
                        std::to_string(p.report.at_iteration) + " to test every GPU and " +
                        std::to_string(groups_tested) + " group(s)");
}

void Controller::preflight_finished(const ValidatedReport& v, bool told_to_exit, const Now& now, Intents& out) {
  Preflight& p = *preflight_;
  p.running = false;
  if (v.aborted && p.attempts < kPreflightAttempts) {  // e.g. a rank still warming up missed the cut: again
    spdlog::warn("pre-flight {}: pause {} aborted ({}); trying again", p.request.id, v.id, v.reason);
    p.report.state = "waiting";
    p.report.reason = "pause " + v.id + " aborted (" + v.reason + "); trying again";
    p.report.t_unix_ms = now.unix_ms;
    p.stable_since_s = now.mono_s;
    p.waiting_since_s = now.mono_s;  // the marks are waited for from the try that failed
    out.preflight = p.report;
    return;
  }
  PreflightReport r = preflight_report(v, p.request, p.report.groups_tested);
  r.exit = told_to_exit;
  finish_preflight(std::move(r), now, out);
}

// The final answer (passed, slow, failed): the `preflight` event, the answer to write, the request done.
void Controller::finish_preflight(PreflightReport r, const Now& now, Intents& out) {
  r.t_unix_ms = now.unix_ms;
  if (r.state == "passed") {
    spdlog::info("pre-flight {}: passed ({})", r.id, r.reason);
  } else {
    spdlog::warn("pre-flight {}: {}: {}{}", r.id, r.state, r.reason, r.exit ? "; the job's ranks were told to exit" : "");
  }
  Event e = master_event(event_type::kPreflight, now);
  e.detail = to_json(r);
  out.events.push_back(std::move(e));
  out.preflight = std::move(r);
  out.persist_state = true;
  preflight_.reset();
}

// An operator's manual plan (docs/operations.md, "Manual plans"). The configuration is the operator's from
// the moment an apply or a revert is published (operator_hold_), and while one waits to be served
// (operator_req_); a refused one changes nothing; a release, or the request gone, hands it back.
Intents Controller::offer_operator_plan(const std::optional<OperatorPlanRequest>& req, const std::string& answer,
                                        const Now& now) {
  Intents out;
  if (!req || req->action == "release") {
    operator_req_.reset();  // an apply not yet served is withdrawn with it
    set_operator_hold(false);
  }
  if (!req || req->id == operator_seen_) return out;
  operator_seen_ = req->id;
  if (!answer.empty()) {  // answered by an earlier run of this master: what it published still holds
    if (answer == "published") set_operator_hold(true);
    return out;
  }
  if (req->action == "release") {
    OperatorPlanReport a;
    a.id = req->id;
    a.state = "released";
    a.reason = "greyhound's own remedies again";
    a.t_unix_ms = now.unix_ms;
    out.operator_plan = std::move(a);
    return out;
  }
  operator_req_ = *req;  // served at the next step, with the job's layout
  return out;
}

void Controller::set_operator_hold(bool hold) {
  if (hold && !operator_hold_) {
    // From now on the configuration is the operator's: no remedy of greyhound's is checked or proposed.
    check_.reset();
    split_for_.clear();
    placement_for_.clear();
  } else if (!hold && operator_hold_) {
    // Back to greyhound's remedies: what the operator left in force serves no fail-slow, so reconcile
    // reverts it or replaces it with what the open fail-slows want.
    if (planner_ && planner_->split_in_force()) split_for_ = {0};
    if (planner_ && planner_->moved()) placement_for_ = {0};
    spdlog::info("the operator released the job's configuration: greyhound's remedies again");
  }
  operator_hold_ = hold;
}

void Controller::serve_operator_plan(const JobInputs& in, const Now& now, Intents& out) {
  if (pending_ || out.plan || restarting_) return;  // a plan in flight first: the operator's follows it
  const OperatorPlanRequest req = std::move(*operator_req_);
  operator_req_.reset();
  const std::optional<JobLayout>& layout = in.layout ? in.layout : layout_;
  OperatorPlanCheck c;
  if (!layout) {
    c.error = "the job publishes no layout: it applies no plans (a job launched without the plugin or --plan)";
  } else {
    c = check_operator_plan(req, *layout);
  }
  if (c.plan) {
    c.plan->incident = tracker_->open_incident() ? tracker_->open_incident()->id : -1;
    propose_plan(std::move(*c.plan), {}, false, out);
    pending_meta_->operator_id = req.id;
    return;  // answered, and held, once published
  }
  spdlog::warn("operator's plan {} refused: {}", req.id, c.error);
  OperatorPlanReport a;
  a.id = req.id;
  a.state = "refused";
  a.reason = c.error;
  a.t_unix_ms = now.unix_ms;
  out.operator_plan = std::move(a);
}

}  // namespace greyhound::master
