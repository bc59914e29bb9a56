#include "store/timeline.h"

#include <algorithm>
#include <cstdio>

#include "common/record_json.h"
#include "common/text.h"
#include "store/messages.h"

namespace greyhound::store {

std::string format_timeline(const nlohmann::json& faults, const nlohmann::json& events) {
  struct Entry {
    double t;
    std::string text;
  };
  std::vector<Entry> entries;
  char buf[512];
  // A fault as the simulated cluster's report writes it (sim/fault_schedule.h); a field missing or of another
  // type reads as absent, an entry that is not an object is left out.
  static const nlohmann::json kAbsent;
  const auto field = [](const nlohmann::json& f, const char* key) -> const nlohmann::json& {
    const auto it = f.find(key);
    return it == f.end() ? kAbsent : *it;
  };
  const auto number = [](const nlohmann::json& v, double absent) { return v.is_number() ? v.get<double>() : absent; };
  const auto index = [](const nlohmann::json& v) {  // a rank or a node, else -1
    return v.is_number_integer() && v.get<std::int64_t>() >= -1 && v.get<std::int64_t>() <= (1 << 24)
               ? static_cast<int>(v.get<std::int64_t>())
               : -1;
  };
  for (const auto& f : faults) {
    if (!f.is_object()) continue;
    const nlohmann::json& k = field(f, "kind");
    const std::string kind = k.is_string() ? k.get<std::string>() : "?";
    if (kind == "link") {
      const nlohmann::json& n = field(f, "nodes");
      const bool pair = n.is_array() && n.size() == 2;
      std::snprintf(buf, sizeof buf, "link between nodes %d and %d at %.0f%% bandwidth", index(pair ? n[0] : kAbsent),
                    index(pair ? n[1] : kAbsent), 100.0 * number(field(f, "bandwidth_factor"), 1.0));
    } else if (kind == "kill" || kind == "hang") {
      std::snprintf(buf, sizeof buf, "%s of rank %d", kind.c_str(), index(field(f, "rank")));
    } else {
      std::snprintf(buf, sizeof buf, "%s of rank %d slowed %.2fx", kind == "gpu" ? "GPU" : "CPU",
                    index(field(f, "rank")), number(field(f, "slowdown"), 1.0));
    }
    const std::string what = buf;
    entries.push_back({number(field(f, "start_s"), 0.0), "FAULT  start: " + what});
    entries.push_back({number(field(f, "end_s"), 0.0), "FAULT  end:   " + what});
  }
  // Agent reports of one change arrive from every rank: one line per (type, burst), listing the ranks.
  struct Burst {
    std::string type;
    double first_detected = 0, onset = 0, ratio = 0;
    std::vector<int> ranks;
    std::vector<int> periods;  // period_change: the new periods (ops per iteration)
  };
  std::vector<Burst> bursts;
  std::vector<Entry> master_lines;  // after the detections they follow from, at equal times
  for (const auto& j : events) {
    std::string err;
    const std::optional<Event> parsed = event_from_json(j, &err);
    if (!parsed) continue;  // what the job store read back is well formed: only a hand-edited report has these
    const Event& e = *parsed;
    const std::string& type = e.type;
    if ((type == event_type::kSlowdown || type == event_type::kRecovery || type == event_type::kPeriodChange) &&
        e.source.rfind("agent:", 0) == 0) {
      const double detected = e.detected_t_s >= 0 ? e.detected_t_s : e.t_s;
      Burst* b = nullptr;
      for (auto& x : bursts) {
        if (x.type == type && detected - x.first_detected < 3.0) b = &x;
      }
      if (b == nullptr) {
        bursts.push_back({type, detected, e.t_s, e.ratio, {}, {}});
        b = &bursts.back();
      }
      b->onset = std::min(b->onset, e.t_s);
      b->ranks.push_back(e.rank);
      if (type == event_type::kPeriodChange) {
        if (auto d = parse_period_change_detail(e.detail, &err)) b->periods.push_back(d->period);
      }
      continue;
    }
    // Per-rank profiles, acknowledgements and stalls are the evidence behind the master's lines, not lines of
    // their own.
    if (type == event_type::kAgentStart || type == event_type::kAgentStop || type == event_type::kCommandAck ||
        type == event_type::kProfile || type == event_type::kPause || type == event_type::kStall ||
        type == event_type::kStallEnd) {
      continue;
    }
    if (type == event_type::kFailStop) {
      const auto d = parse_fail_stop_detail(e.detail, &err);
      std::string how = !d ? "died" : d->exit_status >= 0 ? "exited with status " + std::to_string(d->exit_status)
                                                          : std::string("was killed or crashed");
      std::snprintf(buf, sizeof buf, "FAILSTOP rank %d (node %d) %s", e.rank, e.node, how.c_str());
      std::string text = buf;
      if (d && d->last_record_t_s >= 0) {
        std::snprintf(buf, sizeof buf, "; its last NCCL call t=%.2fs", d->last_record_t_s);
        text += buf;
      }
      master_lines.push_back({e.t_s, text});
      continue;
    }
    if (type == event_type::kHang) {
      std::string text;
      if (const auto h = parse_hang_detail(e.detail, &err)) {
        std::snprintf(buf, sizeof buf, "HANG   group %s call %llu (%s): ranks %s wait since t=%.2fs for ranks %s",
                      group_id_hex(h->group).c_str(), static_cast<unsigned long long>(h->seq), h->op.c_str(),
                      nlohmann::json(h->waiting).dump().c_str(), h->since_t_s, nlohmann::json(h->missing).dump().c_str());
        text = buf;
      } else {
        text = "HANG   (malformed detail: " + err + ")";
      }
      master_lines.push_back({e.t_s, text});
      continue;
    }
    if (type == event_type::kLeader) {
      const auto l = parse_leader_detail(e.detail, &err);
      master_lines.push_back({e.t_s, l ? "LEADER master " + printable(l->master, 64) + " leads (epoch " +
                                             std::to_string(l->epoch) + ")"
                                       : "LEADER (malformed detail: " + err + ")"});
      continue;
    }
    if (type == event_type::kPreflight) {
      const auto p = parse_preflight_report(e.detail, &err);
      if (!p) {
        master_lines.push_back({e.t_s, "PREFLIGHT (malformed detail: " + err + ")"});
        continue;
      }
      std::string text = "PREFLIGHT " + p->id + " " + p->state + ": " + p->reason;
      for (const ValidatedGpu& g : p->slow_gpus) {
        std::snprintf(buf, sizeof buf, "; GPU of rank %d (node %d) %.2fx", g.rank, g.node, g.ratio);
        text += buf;
      }
      for (const PreflightLink& l : p->slow_links) {
        std::snprintf(buf, sizeof buf, "; link %d-%d %.3g GB/s against %.3g", l.node_a, l.node_b, l.gb_per_s,
                      l.peers_gb_per_s);
        text += buf;
      }
      if (p->exit) text += "; the ranks were told to exit";
      master_lines.push_back({e.t_s, text});
      continue;
    }
    if (type == event_type::kValidated) {
      const auto v = parse_validated_report(e.detail, &err);
      if (!v) {
        master_lines.push_back({e.t_s, "VALIDATE (malformed detail: " + err + ")"});
        continue;
      }
      // A link probe (docs/validation.md) is a pause too, but asks only whether one link is still slow.
      const char* what = v->id.rfind("probe-", 0) == 0 ? "PROBE   " : "VALIDATE";
      if (v->aborted) {
        std::snprintf(buf, sizeof buf, "%s aborted: %s", what, v->reason.c_str());
      } else if (v->cause == "gpu" || v->cause == "host") {
        std::snprintf(buf, sizeof buf, "%s %s of rank %d (node %d): %s", what, v->cause == "gpu" ? "GPU" : "host",
                      v->rank, v->node, v->reason.c_str());
      } else if (v->cause == "link") {
        std::snprintf(buf, sizeof buf, "%s link %d-%d: %.3g GB/s against its peers' %.3g", what, v->node_a, v->node_b,
                      v->gb_per_s, v->peers_gb_per_s);
      } else {
        std::snprintf(buf, sizeof buf, "%s nothing slow: %s", what, v->reason.c_str());
      }
      std::string text = buf;
      std::snprintf(buf, sizeof buf, " [%d ranks paused %.2f s at iteration %lld, tests %.2f s; %.2f s after the localisation]",
                    v->ranks, v->pause_s, static_cast<long long>(v->at_iteration), v->tests_s, e.t_s - v->localised_t_s);
      master_lines.push_back({e.t_s, text + buf});
      continue;
    }
    if (type == event_type::kLocalised) {
      const auto l = parse_localisation_report(e.detail, &err);
      if (!l) {
        master_lines.push_back({e.t_s, "LOCATE (malformed detail: " + err + ")"});
        continue;
      }
      const bool communication = l->cause == Cause::kCommunication;
      const std::string cause(name(l->cause));
      if (communication) {
        std::snprintf(buf, sizeof buf, "LOCATE cause communication");
      } else if (l->culprit >= 0) {
        std::snprintf(buf, sizeof buf, "LOCATE rank %d (node %d): %s, cause %s", l->culprit, l->culprit_node,
                      l->kind.c_str(), cause.c_str());
      } else {
        std::snprintf(buf, sizeof buf, "LOCATE no straggler, cause %s", cause.c_str());
      }
      std::string text = buf;
      if (!l->replica_ms_per_microbatch.empty()) {  // the replica skew is written with the per-replica times
        std::snprintf(buf, sizeof buf, "; slowest DP replica %.2fx the median per micro-batch", l->replica_skew);
        text += buf;
      }
      if (!l->slow_groups.empty()) text += "; " + std::to_string(l->slow_groups.size()) + " suspect group(s)";
      for (const auto& link : l->suspect_links) {
        std::snprintf(buf, sizeof buf, "; link %d-%d suspect (x%.1f)", link.node_a, link.node_b, link.ratio);
        text += buf;
      }
      if (communication && l->culprit >= 0) text += "; last to arrive: rank " + std::to_string(l->culprit);
      std::snprintf(buf, sizeof buf, " [%d/%d ranks profiled]", l->ranks_profiled, l->ranks_expected);
      master_lines.push_back({e.t_s, text + buf});
      continue;
    }
    if (type == event_type::kBaseline) {
      const BaselineReport b = parse_baseline_report(e.detail, &err).value_or(BaselineReport{});
      std::snprintf(buf, sizeof buf, "BASELINE healthy reference profile: %d groups of %d ranks, iteration %.1f ms",
                    b.groups, b.ranks_profiled, b.iter_ms);
      master_lines.push_back({e.t_s, buf});
      continue;
    }
    if (type == event_type::kPlan) {
      const auto p = plan_from_json(e.detail, &err);
      if (!p) {
        master_lines.push_back({e.t_s, "PLAN   (malformed detail: " + err + ")"});
        continue;
      }
      const std::string by = e.source == "oracle" ? "(oracle) " : "";
      std::string text = "PLAN   " + by + "epoch " + std::to_string(p->epoch) + " " + std::string(name(p->strategy)) +
                         " " + std::string(name(p->action));
      if (!p->microbatches.empty()) {
        text += ", micro-batches per DP replica " + nlohmann::json(p->microbatches).dump();
      }
      master_lines.push_back({e.t_s, text});
      continue;
    }
    if (type == event_type::kPlanApplied || type == event_type::kPlanRejected || type == event_type::kPlanTimeout) {
      const auto o = parse_plan_outcome(e.detail, &err);
      if (!o) {
        master_lines.push_back({e.t_s, "PLAN   " + type + " (malformed detail: " + err + ")"});
        continue;
      }
      std::snprintf(buf, sizeof buf, "%s epoch %lld: applied by %d of %d ranks",
                    type == event_type::kPlanApplied    ? "APPLIED"
                    : type == event_type::kPlanRejected ? "REJECTED"
                                                        : "TIMEOUT",
                    static_cast<long long>(o->epoch), o->applied, o->ranks);
      std::string text = buf;
      if (o->from_iteration >= 0) text += ", from iteration " + std::to_string(o->from_iteration);
      master_lines.push_back({e.t_s, text});
      continue;
    }
    std::string text = "EVENT  " + type;
    if (e.incident >= 0) text += " #" + std::to_string(e.incident);
    if (e.ratio > 0) {
      std::snprintf(buf, sizeof buf, " x%.2f", e.ratio);
      text += buf;
    }
    const bool incident_event = type == event_type::kIncidentOpen || type == event_type::kIncidentUpdate ||
                                type == event_type::kIncidentClose;
    if (incident_event) {
      if (auto d = parse_incident_detail(e.detail, &err)) {
        text += " ranks " + nlohmann::json(d->ranks).dump();
        if (d->duration_s >= 0) {
          std::snprintf(buf, sizeof buf, " lasted %.1f s", d->duration_s);
          text += buf;
        }
        if (!d->reason.empty()) text += ": " + d->reason;
      }
    }
    master_lines.push_back({e.t_s, text});
  }
  for (auto& b : bursts) {
    std::sort(b.ranks.begin(), b.ranks.end());
    std::string ranks;
    for (int r : b.ranks) ranks += (ranks.empty() ? "" : ",") + std::to_string(r);
    if (b.type == "period_change") {
      const auto [lo, hi] = std::minmax_element(b.periods.begin(), b.periods.end());
      std::snprintf(buf, sizeof buf, "PERIOD re-detected on ranks [%s]: %d..%d ops per iteration", ranks.c_str(),
                    b.periods.empty() ? 0 : *lo, b.periods.empty() ? 0 : *hi);
    } else {
      std::snprintf(buf, sizeof buf, "DETECT %s x%.2f on ranks [%s], onset t=%.2fs", b.type.c_str(), b.ratio,
                    ranks.c_str(), b.onset);
    }
    entries.push_back({b.first_detected, buf});
  }
  entries.insert(entries.end(), master_lines.begin(), master_lines.end());
  std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.t < b.t; });
  std::string out;
  for (const auto& e : entries) {
    std::snprintf(buf, sizeof buf, "  t=%7.2fs  ", e.t);
    out += buf + e.text + "\n";
  }
  return out;
}

}  // namespace greyhound::store
