#include "daemon/incident_tracker.h"

#include <algorithm>

#include "greyhound/thresholds.h"
#include "greyhound/vocabulary.h"

namespace greyhound::master {
namespace {

bool contains(const std::vector<int>& v, int x) { return std::find(v.begin(), v.end(), x) != v.end(); }

void insert_sorted(std::vector<int>& v, int x) {
  if (x < 0 || contains(v, x)) return;
  v.insert(std::upper_bound(v.begin(), v.end(), x), x);
}

}  // namespace

IncidentTracker::IncidentTracker(MasterState state, std::optional<Incident> open)
    : state_(std::move(state)), open_(std::move(open)) {
  if (open_ && open_->status != IncidentStatus::kOpen) open_.reset();
  state_.open_incident = open_ ? open_->id : -1;
  if (!open_ && state_.state == Phase::kSlow) state_.state = Phase::kHealthy;
}

Event IncidentTracker::master_event(const char* type, const Incident& i, double t_s, const std::string& reason) const {
  Event e;
  e.type = type;
  e.t_s = t_s;
  e.t_unix_ms = unix_ms_now();
  e.source = "master";
  e.incident = i.id;
  e.before_ms = i.before_ms;
  e.after_ms = i.after_ms;
  e.ratio = i.severity;
  IncidentDetail d;
  d.ranks = i.ranks;
  d.nodes = i.nodes;
  d.onset_t_s = i.onset_t_s;
  d.detected_t_s = i.detected_t_s;
  d.state = state_.state;
  if (i.closed_t_s >= 0) d.duration_s = i.closed_t_s - i.onset_t_s;
  d.reason = reason;
  e.detail = to_json(d);
  return e;
}

void IncidentTracker::close(double t_s, const std::string& reason, Decision& out) {
  if (!open_) return;
  Incident& i = *open_;
  i.status = IncidentStatus::kClosed;
  i.closed_t_s = t_s;
  state_.last_closed_t_s = t_s;
  state_.state = Phase::kHealthy;
  state_.open_incident = -1;
  out.emit.push_back(master_event(event_type::kIncidentClose, i, t_s, reason));
  out.incident = i;
  open_.reset();
}

void IncidentTracker::set_phase(Phase phase) {
  if (open_) state_.state = phase;
}

void IncidentTracker::apply(const Event& e, Decision& out) {
  ++state_.events_processed;
  if (e.source.rfind("agent:", 0) != 0 || e.rank < 0) return;
  const double detected = e.detected_t_s >= 0 ? e.detected_t_s : e.t_s;

  if (e.type == event_type::kFailStop) {  // kept for the status; the job cannot go on without the rank
    std::string why;
    const auto d = parse_fail_stop_detail(e.detail, &why);
    state_.fail_stops.push_back({e.rank, e.node, e.t_s, d ? d->pid : 0});
    if (state_.fail_stops.size() > kMaxFailStopsKept) state_.fail_stops.erase(state_.fail_stops.begin());
    ++state_.fail_stops_total;
    return;
  }

  if (e.type == event_type::kSlowdown) {
    if (!open_) {
      if (e.t_s < state_.last_closed_t_s) return;  // a late report of the incident that just closed
      Incident i;
      i.id = state_.incidents_total + 1;
      i.status = IncidentStatus::kOpen;
      i.onset_t_s = e.t_s;
      i.detected_t_s = detected;
      i.before_ms = e.before_ms;
      i.after_ms = e.after_ms;
      i.severity = e.after_ms / e.before_ms;
      insert_sorted(i.ranks, e.rank);
      insert_sorted(i.nodes, e.node);
      ++state_.incidents_total;
      state_.open_incident = i.id;
      state_.state = Phase::kSlow;
      open_ = i;
      out.emit.push_back(master_event(event_type::kIncidentOpen, i, detected));
      out.incident = i;
      return;
    }
    Incident& i = *open_;
    const bool new_rank = !contains(i.ranks, e.rank);
    insert_sorted(i.ranks, e.rank);
    insert_sorted(i.nodes, e.node);
    i.onset_t_s = std::min(i.onset_t_s, e.t_s);
    // Severity against the level before the incident: a further slowdown on top of it compounds.
    const double severity = e.after_ms / i.before_ms;
    if (severity >= i.severity * kSignificantRatio) {
      i.after_ms = e.after_ms;
      i.severity = severity;
      std::erase(i.recovered, e.rank);
      out.emit.push_back(master_event(event_type::kIncidentUpdate, i, detected));
      out.incident = i;
    } else if (new_rank) {
      out.incident = i;
    }
    return;
  }

  if (e.type == event_type::kRecovery && open_) {
    Incident& i = *open_;
    if (!contains(i.ranks, e.rank)) return;
    if (e.after_ms > i.before_ms * kSignificantRatio) {  // faster, but still slow: partial recovery
      const double severity = e.after_ms / i.before_ms;
      if (severity * kSignificantRatio <= i.severity) {
        i.after_ms = e.after_ms;
        i.severity = severity;
        out.emit.push_back(master_event(event_type::kIncidentUpdate, i, detected));
        out.incident = i;
      }
      return;
    }
    insert_sorted(i.recovered, e.rank);
    if (2 * i.recovered.size() > i.ranks.size()) {
      i.status = IncidentStatus::kClosed;
      i.closed_t_s = e.t_s;
      state_.last_closed_t_s = e.t_s;
      state_.state = Phase::kHealthy;
      state_.open_incident = -1;
      out.emit.push_back(master_event(event_type::kIncidentClose, i, detected));
      out.incident = i;
      open_.reset();
    } else {
      out.incident = i;
    }
  }
}

}  // namespace greyhound::master
