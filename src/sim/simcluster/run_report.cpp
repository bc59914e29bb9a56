#include "sim/simcluster/run_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "store/messages.h"
#include "store/timeline.h"

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
  return store::format_timeline(report.value("faults", nlohmann::json::array()),
                                report.value("events", nlohmann::json::array()));
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
