#include "daemon/hang.h"

#include <algorithm>
#include <limits>

namespace greyhound::master {

std::vector<HangDetail> find_hangs(const std::map<int, RankStall>& stalls, const std::vector<GroupMembers>& groups) {
  const auto blocked = [&](int rank) {
    const auto it = stalls.find(rank);
    return it != stalls.end() && it->second.detail.in_call;
  };
  std::vector<HangDetail> out, cycles;
  for (const GroupMembers& g : groups) {
    // The highest call number a member of the group waits inside.
    std::uint64_t seq = 0;
    for (int m : g.members) {
      const auto it = stalls.find(m);
      if (it == stalls.end() || !it->second.detail.in_call || it->second.detail.group != g.group) continue;
      seq = std::max(seq, it->second.detail.group_seq);
    }
    if (seq == 0) continue;
    HangDetail h;
    h.group = g.group;
    h.seq = seq;
    h.since_t_s = std::numeric_limits<double>::infinity();
    for (int m : g.members) {
      const auto it = stalls.find(m);
      const bool inside = it != stalls.end() && it->second.detail.in_call && it->second.detail.group == g.group &&
                          it->second.detail.group_seq == seq;
      if (inside) {
        h.waiting.push_back(m);
        h.op = it->second.detail.op;
        h.since_t_s = std::min(h.since_t_s, it->second.detail.since_t_s);
        continue;
      }
      h.missing.push_back(m);
      std::int64_t last = -1;
      if (it != stalls.end()) {
        const auto s = it->second.detail.last_seq.find(g.group);
        if (s != it->second.detail.last_seq.end()) last = static_cast<std::int64_t>(s->second);
      }
      h.missing_last_seq[m] = last;
    }
    if (h.missing.empty()) continue;
    std::sort(h.waiting.begin(), h.waiting.end());
    std::sort(h.missing.begin(), h.missing.end());
    HangDetail root = h;
    root.missing.clear();
    root.missing_last_seq.clear();
    for (int m : h.missing) {
      if (blocked(m)) continue;
      root.missing.push_back(m);
      root.missing_last_seq[m] = h.missing_last_seq[m];
    }
    if (!root.missing.empty()) {
      out.push_back(std::move(root));
    } else {
      cycles.push_back(std::move(h));
    }
  }
  return out.empty() ? cycles : out;
}

}  // namespace greyhound::master
