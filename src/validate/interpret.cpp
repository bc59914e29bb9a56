#include "greyhound/validate/interpret.h"

#include <algorithm>
#include <cmath>

namespace greyhound::validate {
namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  const std::size_t h = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(h), v.end());
  if (v.size() % 2 == 1) return v[h];
  const double hi = v[h];
  return (hi + *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(h))) / 2;
}

LinkClass class_of(const TransferTime& t) {
  return t.src_node == t.dst_node ? LinkClass::kIntraNode : LinkClass::kInterNode;
}

// Element i of `times` against the median of the others that `peer(j)` admits: (peers' median, ratio,
// judged, slow).
struct Judged {
  double peers_ms = 0, ratio = 0;
  bool judged = false, slow = false;
};
template <class T, class Peer>
Judged against_peers(const std::vector<T>& times, std::size_t i, double excess, Peer peer) {
  std::vector<double> others;
  for (std::size_t j = 0; j < times.size(); ++j) {
    if (j != i && times[j].ms > 0 && peer(j)) others.push_back(times[j].ms);
  }
  Judged out;
  out.peers_ms = median(others);
  out.judged = out.peers_ms > 0 && times[i].ms > 0;
  if (out.judged) {
    out.ratio = times[i].ms / out.peers_ms;
    out.slow = out.ratio > 1.0 + excess;
  }
  return out;
}

template <class Verdict>
void take(Verdict& v, const Judged& j) {
  v.peers_ms = j.peers_ms;
  v.ratio = j.ratio;
  v.judged = j.judged;
  v.slow = j.slow;
}

}  // namespace

const char* link_class_name(LinkClass c) { return c == LinkClass::kIntraNode ? "intra-node" : "inter-node"; }

GemmTimes gemm_times(const std::vector<GemmReport>& reports) {
  const auto measured = [](const GemmReport& r, std::size_t type) {
    return r.ms.size() > type && std::isfinite(r.ms[type]) && r.ms[type] > 0;
  };
  GemmTimes out;
  std::vector<const GemmReport*> complete;
  for (const GemmReport& r : reports) {
    if (measured(r, 0) && measured(r, 1)) complete.push_back(&r);
  }
  if (complete.empty()) return out;
  out.with_fp8 = std::all_of(complete.begin(), complete.end(), [&](const GemmReport* r) { return measured(*r, 2); });
  const std::size_t types = out.with_fp8 ? 3 : 2;
  double medians[3] = {}, total = 0;
  for (std::size_t t = 0; t < types; ++t) {
    std::vector<double> v;
    for (const GemmReport* r : complete) v.push_back(r->ms[t]);
    medians[t] = median(std::move(v));
    total += medians[t];
  }
  for (const GemmReport* r : complete) {
    double ratios = 0;
    for (std::size_t t = 0; t < types; ++t) ratios += r->ms[t] / medians[t];
    out.times.push_back({r->rank, r->node, ratios * total / static_cast<double>(types)});
  }
  return out;
}

std::vector<GpuVerdict> judge_gemm(const std::vector<GemmTime>& times, double excess) {
  std::vector<GpuVerdict> out;
  for (std::size_t i = 0; i < times.size(); ++i) {
    GpuVerdict v;
    v.rank = times[i].rank;
    v.node = times[i].node;
    v.ms = times[i].ms;
    take(v, against_peers(times, i, excess, [](std::size_t) { return true; }));
    out.push_back(v);
  }
  return out;
}

std::vector<LinkVerdict> judge_links(const std::vector<TransferTime>& times, double excess, double min_excess_ms) {
  std::vector<LinkVerdict> out;
  for (std::size_t i = 0; i < times.size(); ++i) {
    const TransferTime& t = times[i];
    LinkVerdict v;
    v.transfer = t.transfer;
    v.src_node = t.src_node;
    v.dst_node = t.dst_node;
    v.link_class = class_of(t);
    v.ms = t.ms;
    if (t.ms > 0) v.gb_per_s = t.bytes / (t.ms * 1e-3) * 1e-9;
    take(v, against_peers(times, i, excess, [&](std::size_t k) { return class_of(times[k]) == v.link_class; }));
    v.slow = v.slow && v.ms - v.peers_ms > min_excess_ms;  // above the timer's noise as well
    out.push_back(v);
  }
  return out;
}

}  // namespace greyhound::validate
