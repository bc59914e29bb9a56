#include "sim/simcluster/run_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

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

double throughput_iter_per_min(const std::vector<IterationLine>& its) {
  if (its.empty()) return 0.0;
  const double start = its.front().t_s - its.front().iter_ms * 1e-3;
  const double span = its.back().t_s - start;
  return span > 0 ? 60.0 * static_cast<double>(its.size()) / span : 0.0;
}

double mean_iter_ms_between(const std::vector<IterationLine>& its, double start_s, double end_s) {
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

double healthy_mean_iter_ms(const std::vector<IterationLine>& its, const FaultSchedule& faults, int skip) {
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
  for (const auto& e : report.value("events", nlohmann::json::array())) {
    const std::string type = e.value("type", std::string("?"));
    const std::string source = e.value("source", std::string());
    if ((type == "slowdown" || type == "recovery" || type == "period_change") && source.rfind("agent:", 0) == 0) {
      const double detected = e.value("detected_t_s", e.value("t_s", 0.0));
      Burst* b = nullptr;
      for (auto& x : bursts) {
        if (x.type == type && detected - x.first_detected < 3.0) b = &x;
      }
      if (b == nullptr) {
        bursts.push_back({type, detected, e.value("t_s", 0.0), e.value("ratio", 0.0), {}, {}});
        b = &bursts.back();
      }
      b->onset = std::min(b->onset, e.value("t_s", 0.0));
      b->ranks.push_back(e.value("rank", -1));
      if (type == "period_change" && e.contains("detail") && e["detail"].contains("period")) {
        b->periods.push_back(e["detail"].value("period", 0));
      }
      continue;
    }
    // Per-rank profiles and acknowledgements are the evidence behind the master's lines, not lines of their own.
    if (type == "agent_start" || type == "agent_stop" || type == "command_ack" || type == "profile") continue;
    const nlohmann::json detail = e.value("detail", nlohmann::json::object());
    if (type == "localised") {
      if (detail.value("cause", std::string()) == "communication") {
        std::snprintf(buf, sizeof buf, "LOCATE cause communication");
      } else if (detail.value("culprit", -1) >= 0) {
        std::snprintf(buf, sizeof buf, "LOCATE rank %d (node %d): %s, cause %s", detail.value("culprit", -1),
                      detail.value("culprit_node", -1), detail.value("kind", std::string("?")).c_str(),
                      detail.value("cause", std::string("?")).c_str());
      } else {
        std::snprintf(buf, sizeof buf, "LOCATE no straggler, cause %s", detail.value("cause", std::string("?")).c_str());
      }
      std::string text = buf;
      if (detail.contains("replica_skew")) {
        std::snprintf(buf, sizeof buf, "; slowest DP replica %.2fx the median per micro-batch",
                      detail.value("replica_skew", 1.0));
        text += buf;
      }
      if (detail.contains("slow_groups") && detail["slow_groups"].is_array() && !detail["slow_groups"].empty()) {
        text += "; " + std::to_string(detail["slow_groups"].size()) + " suspect group(s)";
      }
      if (detail.contains("suspect_links") && detail["suspect_links"].is_array()) {
        for (const auto& l : detail["suspect_links"]) {
          if (!l.contains("nodes") || !l["nodes"].is_array() || l["nodes"].size() != 2) continue;
          std::snprintf(buf, sizeof buf, "; link %d-%d suspect (x%.1f)", l["nodes"][0].get<int>(),
                        l["nodes"][1].get<int>(), l.value("ratio", 0.0));
          text += buf;
        }
      }
      if (detail.value("cause", std::string()) == "communication" && detail.value("culprit", -1) >= 0) {
        text += "; last to arrive: rank " + std::to_string(detail.value("culprit", -1));
      }
      std::snprintf(buf, sizeof buf, " [%d/%d ranks profiled]", detail.value("ranks_profiled", 0),
                    detail.value("ranks_expected", 0));
      master_lines.push_back({e.value("t_s", 0.0), text + buf});
      continue;
    }
    if (type == "baseline") {
      std::snprintf(buf, sizeof buf, "BASELINE healthy reference profile: %d groups of %d ranks, iteration %.1f ms",
                    detail.value("groups", 0), detail.value("ranks_profiled", 0), detail.value("iter_ms", 0.0));
      master_lines.push_back({e.value("t_s", 0.0), buf});
      continue;
    }
    if (type == "plan") {
      std::string text = "PLAN   epoch " + std::to_string(detail.value("epoch", 0)) + " " +
                         detail.value("strategy", std::string("?")) + " " + detail.value("action", std::string("?"));
      if (detail.contains("microbatches") && detail["microbatches"].is_array() && !detail["microbatches"].empty()) {
        text += ", micro-batches per DP replica " + detail["microbatches"].dump();
      }
      master_lines.push_back({e.value("t_s", 0.0), text});
      continue;
    }
    if (type == "plan_applied" || type == "plan_rejected" || type == "plan_timeout") {
      std::snprintf(buf, sizeof buf, "%s epoch %d: applied by %d of %d ranks", type == "plan_applied" ? "APPLIED"
                    : type == "plan_rejected" ? "REJECTED" : "TIMEOUT", detail.value("epoch", 0),
                    detail.value("applied", 0), detail.value("ranks", 0));
      std::string text = buf;
      if (detail.value("from_iteration", -1) >= 0) text += ", from iteration " + std::to_string(detail.value("from_iteration", -1));
      master_lines.push_back({e.value("t_s", 0.0), text});
      continue;
    }
    std::string text = "EVENT  " + type;
    if (e.contains("incident")) text += " #" + std::to_string(e.value("incident", 0));
    if (e.contains("ratio")) {
      std::snprintf(buf, sizeof buf, " x%.2f", e.value("ratio", 0.0));
      text += buf;
    }
    if (e.contains("detail") && e["detail"].contains("ranks")) text += " ranks " + e["detail"]["ranks"].dump();
    if (e.contains("detail") && e["detail"].contains("duration_s")) {
      std::snprintf(buf, sizeof buf, " lasted %.1f s", e["detail"]["duration_s"].get<double>());
      text += buf;
    }
    if (detail.contains("reason") && detail["reason"].is_string()) text += ": " + detail["reason"].get<std::string>();
    master_lines.push_back({e.value("t_s", 0.0), text});
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
