#include "daemon/fail_slows.h"

#include <algorithm>

#include "greyhound/analysis/robust_stats.h"
#include "greyhound/parallel_shape.h"

namespace greyhound::master {
namespace {

bool on_a_rank(Cause c) { return c == Cause::kComputation || c == Cause::kHost; }

// With the layout: rank r's time outside NCCL per micro-batch over the median of its peers': its tensor-
// parallel peers (the same work, the same micro-batches), or without TP the same stage in the other replicas
// (the same work per micro-batch; an uneven split adds per-iteration overheads to the replicas with fewer).
std::optional<double> compute_ratio(const Localisation& loc, int rank, const std::optional<JobLayout>& layout) {
  if (!layout || rank < 0 || rank >= layout->world ||
      loc.compute_ms_per_microbatch.size() != static_cast<std::size_t>(layout->world)) {
    return std::nullopt;
  }
  const ParallelShape shape{layout->tp, layout->dp, layout->pp};
  const RankCoords me = shape.coords(rank);
  std::vector<double> peers, scratch;
  for (int r = 0; r < layout->world; ++r) {
    const double c = loc.compute_ms_per_microbatch[static_cast<std::size_t>(r)];
    const RankCoords o = shape.coords(r);
    const bool peer = o.pp == me.pp && (layout->tp > 1 ? o.dp == me.dp : true);
    if (r != rank && peer && c > 0) peers.push_back(c);
  }
  const double own = loc.compute_ms_per_microbatch[static_cast<std::size_t>(rank)];
  const double med = analysis::median(peers, scratch);
  if (!(med > 0) || !(own > 0)) return std::nullopt;
  return own / med;
}

bool same(const Finding& a, const FailSlow& f) {
  if (on_a_rank(a.cause)) return on_a_rank(f.cause) && a.rank == f.rank;
  return f.cause == Cause::kCommunication && a.link_a == f.link_a && a.link_b == f.link_b;
}

}  // namespace

std::vector<Finding> findings(const Localisation& loc) {
  std::vector<Finding> out;
  if (on_a_rank(loc.cause) && loc.culprit >= 0) {
    Finding f;
    f.cause = loc.cause;
    f.rank = loc.culprit;
    f.node = loc.culprit_node;
    f.severity = loc.replica_skew;
    out.push_back(f);
  }
  for (const SuspectLink& l : loc.suspect_links) {
    Finding f;
    f.cause = Cause::kCommunication;
    f.link_a = std::min(l.node_a, l.node_b);
    f.link_b = std::max(l.node_a, l.node_b);
    f.severity = l.ratio;
    out.push_back(f);
  }
  return out;
}

std::optional<double> sighting(const Localisation& loc, const FailSlow& f, const std::optional<JobLayout>& layout,
                               const FailSlowRules& rules) {
  for (const Finding& x : findings(loc)) {
    if (same(x, f)) return x.severity;
  }
  if (on_a_rank(f.cause)) {
    if (auto r = compute_ratio(loc, f.rank, layout); r && *r >= rules.still_slow_ratio) return *r;
  }
  if (f.cause == Cause::kCommunication) {
    for (const SuspectLink& l : loc.link_readings) {
      if (std::min(l.node_a, l.node_b) == f.link_a && std::max(l.node_a, l.node_b) == f.link_b &&
          l.ratio >= rules.slow_link_ratio) {
        return l.ratio;
      }
    }
  }
  return std::nullopt;
}

bool observed(const Localisation& loc, const FailSlow& f) {
  if (f.cause != Cause::kCommunication) return true;
  return std::any_of(loc.link_readings.begin(), loc.link_readings.end(), [&](const SuspectLink& l) {
    return std::min(l.node_a, l.node_b) == f.link_a && std::max(l.node_a, l.node_b) == f.link_b;
  });
}

FailSlowChanges track(std::vector<FailSlow>& open, std::int64_t& total, const Localisation& loc,
                      const std::optional<JobLayout>& layout, std::int64_t incident, double onset_t_s, double t_s,
                      bool may_open, const FailSlowRules& rules) {
  FailSlowChanges out;
  std::vector<FailSlow> kept;
  for (FailSlow& f : open) {
    if (auto sev = sighting(loc, f, layout, rules)) {
      f.last_seen_t_s = t_s;
      f.severity = *sev;
      f.misses = 0;
      // A culprit named again keeps the cause its latest localisation gives (host and computation may swap),
      // unless a validation pause measured it (settle_cause).
      if (on_a_rank(f.cause) && on_a_rank(loc.cause) && loc.culprit == f.rank && !f.cause_validated) {
        f.cause = loc.cause;
      }
      out.seen.push_back(f);
      kept.push_back(f);
    } else if (!observed(loc, f)) {
      kept.push_back(f);  // nothing crossed its link (a new placement may avoid it): no evidence either way
    } else if (++f.misses >= rules.end_after_misses) {
      f.ended_t_s = t_s;
      out.ended.push_back(f);
    } else {
      kept.push_back(f);
    }
  }
  open = std::move(kept);
  if (!may_open) return out;
  for (const Finding& x : findings(loc)) {
    const bool known = std::any_of(open.begin(), open.end(), [&](const FailSlow& f) { return same(x, f); }) ||
                       std::any_of(out.ended.begin(), out.ended.end(), [&](const FailSlow& f) { return same(x, f); });
    if (known || open.size() >= kMaxOpenFailSlows) continue;
    FailSlow f;
    f.id = ++total;
    f.incident = incident;
    f.cause = x.cause;
    f.rank = x.rank;
    f.node = x.node;
    f.link_a = x.link_a;
    f.link_b = x.link_b;
    f.onset_t_s = std::min(onset_t_s, t_s);
    f.localised_t_s = f.last_seen_t_s = t_s;
    f.severity = x.severity;
    open.push_back(f);
    out.opened.push_back(f);
  }
  return out;
}

std::vector<FailSlow> settle_cause(std::vector<FailSlow>& open, const ValidatedReport& v,
                                   const std::set<std::int64_t>& ids) {
  std::vector<FailSlow> changed;
  if (v.aborted || (v.cause != "gpu" && v.cause != "host") || v.rank < 0) return changed;
  const Cause measured = v.cause == "gpu" ? Cause::kComputation : Cause::kHost;
  for (FailSlow& f : open) {
    if (ids.count(f.id) == 0 || f.rank != v.rank || !on_a_rank(f.cause)) continue;
    const bool differs = f.cause != measured;
    f.cause = measured;
    f.cause_validated = true;
    if (differs) changed.push_back(f);
  }
  return changed;
}

}  // namespace greyhound::master
