#include "sim/simcluster/run_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "store/messages.h"

namespace greyhound::sim {

std::optional<IterationLine> parse_iteration_line(const std::string& line) {
  std::istringstream in(line);
  std::string k_iter, k_t, k_ms, k_loss, k_sum;
  IterationLine it;
  if (!(in >> k_iter >> it.index >> k_t >> it.t_s >> k_ms >> it.iter_ms >> k_loss >> it.loss >> k_sum >> it.checksum)) {
    return std::nullopt;
  }
  if (k_iter != "iter" || k_t != "t_s" || k_ms != "iter_ms" || k_loss != "loss" || k_sum != "checksum") {
    return std::nullopt;
  }
  return it;
}

std::vector<IterationLine> parse_iteration_log(const std::string& text) {
  std::vector<IterationLine> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (auto it = parse_iteration_line(line)) out.push_back(*it);
  }
  return out;
}

std::vector<JobIteration> job_iterations(const std::vector<std::vector<IterationLine>>& per_rank) {
  std::vector<JobIteration> out;
  if (per_rank.empty()) return out;
  std::size_t n = per_rank.front().size();
  for (const auto& lines : per_rank) n = std::min(n, lines.size());
  for (std::size_t k = 0; k < n; ++k) {
    const IterationLine& first = per_rank.front()[k];
    JobIteration j;
    j.index = first.index;
    j.loop_ms = first.iter_ms;
    j.t_s = first.t_s;
    j.last_rank = 0;
    double earliest_start = first.t_s - first.iter_ms * 1e-3;
    bool same_index = true;
    for (std::size_t r = 0; r < per_rank.size(); ++r) {
      const IterationLine& l = per_rank[r][k];
      same_index &= l.index == j.index;
      if (l.t_s > j.t_s) {
        j.t_s = l.t_s;
        j.last_rank = static_cast<int>(r);
      }
      earliest_start = std::min(earliest_start, l.t_s - l.iter_ms * 1e-3);
    }
    if (!same_index) break;  // a rank's lines are out of step: nothing after this can be matched
    j.iter_ms = out.empty() ? (j.t_s - earliest_start) * 1e3 : (j.t_s - out.back().t_s) * 1e3;
    out.push_back(j);
  }
  return out;
}

double throughput_iter_per_min(const std::vector<JobIteration>& its) {
  if (its.empty()) return 0.0;
  const double start = its.front().t_s - its.front().iter_ms * 1e-3;
  const double span = its.back().t_s - start;
  return span > 0 ? 60.0 * static_cast<double>(its.size()) / span : 0.0;
}

double mean_iter_ms_between(const std::vector<JobIteration>& its, double start_s, double end_s) {
  double sum = 0;
  int n = 0;
  for (const auto& it : its) {
    if (it.t_s >= start_s && it.t_s < end_s) {
      sum += it.iter_ms;
      ++n;
    }
  }
  return n > 0 ? sum / n : std::nan("");
}

double healthy_mean_iter_ms(const std::vector<JobIteration>& its, const FaultSchedule& faults, int skip) {
  double sum = 0;
  int n = 0;
  for (std::size_t i = static_cast<std::size_t>(std::max(skip, 0)); i < its.size(); ++i) {
    const double end = its[i].t_s;
    const double start = end - its[i].iter_ms * 1e-3;
    bool touched = false;
    for (const auto& f : faults.faults()) touched |= start < f.end_s && end > f.start_s;
    if (!touched) {
      sum += its[i].iter_ms;
      ++n;
    }
  }
  return n > 0 ? sum / n : std::nan("");
}

std::string format_timeline(const nlohmann::json& report) {
  struct Entry {
    double t;
    std::string text;
  };
  std::vector<Entry> entries;
  char buf[512];
  for (const auto& f : report.value("faults", nlohmann::json::array())) {
    const std::string kind = f.value("kind", "?");
    std::string what;
    if (kind == "link") {
      std::snprintf(buf, sizeof buf, "link between nodes %d and %d at %.0f%% bandwidth",
                    f["nodes"][0].get<int>(), f["nodes"][1].get<int>(), 100.0 * f.value("bandwidth_factor", 1.0));
    } else {
      std::snprintf(buf, sizeof buf, "%s of rank %d slowed %.2fx", kind == "gpu" ? "GPU" : "CPU", f.value("rank", -1),
                    f.value("slowdown", 1.0));
    }
    what = buf;
    entries.push_back({f.value("start_s", 0.0), "FAULT  start: " + what});
    entries.push_back({f.value("end_s", 0.0), "FAULT  end:   " + what});
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
  for (const auto& j : report.value("events", nlohmann::json::array())) {
    std::string err;
    const std::optional<Event> parsed = event_from_json(j, &err);
    if (!parsed) continue;  // the report holds what the job store read back: only a hand-edited one has these
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
    // Per-rank profiles and acknowledgements are the evidence behind the master's lines, not lines of their own.
    if (type == event_type::kAgentStart || type == event_type::kAgentStop || type == event_type::kCommandAck ||
        type == event_type::kProfile || type == event_type::kPause) {
      continue;
    }
    if (type == event_type::kValidated) {
      const auto v = parse_validated_report(e.detail, &err);
      if (!v) {
        master_lines.push_back({e.t_s, "VALIDATE (malformed detail: " + err + ")"});
        continue;
      }
      if (v->aborted) {
        std::snprintf(buf, sizeof buf, "VALIDATE aborted: %s", v->reason.c_str());
      } else if (v->cause == "gpu" || v->cause == "host") {
        std::snprintf(buf, sizeof buf, "VALIDATE %s of rank %d (node %d): %s", v->cause == "gpu" ? "GPU" : "host",
                      v->rank, v->node, v->reason.c_str());
      } else if (v->cause == "link") {
        std::snprintf(buf, sizeof buf, "VALIDATE link %d-%d: %.3g GB/s against its peers' %.3g", v->node_a, v->node_b,
                      v->gb_per_s, v->peers_gb_per_s);
      } else {
        std::snprintf(buf, sizeof buf, "VALIDATE nothing slow: %s", v->reason.c_str());
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

}  // namespace greyhound::sim

namespace greyhound::sim {

nlohmann::json validation_summary(const nlohmann::json& events) {
  nlohmann::json out = nlohmann::json::array();
  double onset = -1, detected = -1;
  for (const auto& j : events) {
    std::string err;
    const std::optional<Event> e = event_from_json(j, &err);
    if (!e || e->source != "master") continue;
    if (e->type == event_type::kIncidentOpen) {
      const auto d = parse_incident_detail(e->detail, &err);
      onset = d ? d->onset_t_s : e->t_s;
      detected = d && d->detected_t_s > 0 ? d->detected_t_s : e->t_s;
      continue;
    }
    if (e->type != event_type::kValidated) continue;
    const auto v = parse_validated_report(e->detail, &err);
    if (!v) continue;
    nlohmann::json x = {{"id", v->id},
                        {"onset_t_s", onset},
                        {"detected_t_s", detected},
                        {"localised_t_s", v->localised_t_s},
                        {"validated_t_s", e->t_s},
                        {"cause", v->cause},
                        {"aborted", v->aborted},
                        {"reason", v->reason},
                        {"ratio", v->ratio},
                        {"pause_s", v->pause_s},
                        {"tests_s", v->tests_s},
                        {"ranks", v->ranks}};
    if (v->cause == "gpu" || v->cause == "host") {
      x["rank"] = v->rank;
      x["node"] = v->node;
    }
    if (v->cause == "link") x["link"] = {v->node_a, v->node_b};
    out.push_back(std::move(x));
  }
  return out;
}

}  // namespace greyhound::sim
