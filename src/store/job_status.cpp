#include "store/job_status.h"

#include <algorithm>
#include <optional>
#include <set>
#include <vector>

#include "greyhound/vocabulary.h"

namespace greyhound::store {
namespace {

using nlohmann::json;

// Redis went away midway: the whole status is unavailable (caught at the edge of job_status).
struct Unavailable {
  std::string why;
};

// Reads through the store: the value, or nullopt when absent or malformed (the reason to `note`, and to
// *malformed for the entry).
class Reader {
 public:
  explicit Reader(const StatusNote& note) : note_(note) {}
  template <class T>
  std::optional<T> take(Result<std::optional<T>> r, std::string* malformed = nullptr) {
    if (r.ok()) return std::move(*r);
    if (r.code() == Errc::kUnavailable) throw Unavailable{r.error()};
    noted(r.status().subject, r.status().reason);
    if (malformed != nullptr && r.code() == Errc::kInvalid) *malformed = r.status().reason;
    return std::nullopt;
  }
  // A list (ranks, nodes, groups): empty, noted, when it cannot be read as one.
  template <class T>
  std::vector<T> list(Result<std::vector<T>> r) {
    if (r.ok()) return std::move(*r);
    if (r.code() == Errc::kUnavailable) throw Unavailable{r.error()};
    noted(r.status().subject, r.status().reason);
    return {};
  }
  void noted(const std::string& where, const std::string& why) {
    if (note_) note_(where, why);
  }

 private:
  const StatusNote& note_;
};

json group_row(const Entry<GroupRecord>& e, Reader& reader) {
  json row = {{"group", e.id}};
  if (!e.error.empty()) reader.noted("group " + e.id, e.error);
  if (!e.value) {
    row["size"] = -1;
    row["members"] = json::array();
    row["ops"] = json::array();
    row["malformed"] = e.error;
    return row;
  }
  const GroupRecord& g = *e.value;
  row["size"] = g.size > 0 ? g.size : -1;
  json members = json::array();
  // Up to the last member present (a planted size must not make the listing huge); missing ones as null.
  const int shown = g.members.empty() ? 0 : std::min(g.size, g.members.rbegin()->first + 1);
  for (int i = 0; i < shown; ++i) {
    const auto it = g.members.find(i);
    members.push_back(it == g.members.end() ? json(nullptr) : json(it->second));
  }
  row["members"] = members;
  if (!g.created_by.empty()) row["created_by"] = g.created_by;
  std::set<std::string> ops;
  for (const auto& [rank, counts] : g.ops) {
    for (const auto& [op, n] : counts) ops.insert(op);
  }
  row["ops"] = ops;
  return row;
}

json build(JobStore& st, std::int64_t now_ms, Reader& reader) {
  json out = {{"job", st.job()}};

  // Master and incidents.
  const std::optional<MasterState> master = reader.take(st.master_state());
  out["state"] = master ? std::string(name(master->state)) : "unknown (no master state)";
  out["master"] = master ? to_json(*master) : json(nullptr);
  out["incidents"] = json::array();
  const auto ids = st.recent_incidents(10);
  if (ids.ok()) {
    for (std::int64_t id : *ids) {
      std::string err;
      if (auto i = reader.take(st.incident(id), &err)) {
        out["incidents"].push_back(to_json(*i));
      } else if (!err.empty()) {
        out["incidents"].push_back({{"id", std::to_string(id)}, {"malformed", err}});
      }
    }
  } else if (ids.code() == Errc::kUnavailable) {
    throw Unavailable{ids.error()};
  }

  // The operator's run-time settings (greyhoundctl set); null when none were ever set.
  const std::optional<JobSettings> settings = reader.take(st.settings());
  out["settings"] = settings ? to_json(*settings) : json(nullptr);
  // The operator's manual plan (greyhoundctl plan) and the master's answer; null when none was given. While
  // `request.action` is apply or revert, greyhound's own remedies wait.
  const std::optional<OperatorPlanRequest> op = reader.take(st.operator_plan());
  const std::optional<OperatorPlanReport> op_answer = reader.take(st.operator_plan_result());
  out["operator_plan"] = op ? json{{"request", to_json(*op)},
                                   {"answer", op_answer && op_answer->id == op->id ? to_json(*op_answer) : json(nullptr)},
                                   // a refused one leaves the hold as it was (unknown here: null)
                                   {"holds", op_answer && op_answer->id == op->id && op_answer->state == "refused"
                                                 ? json(nullptr)
                                                 : json(op->action != "release")}}
                            : json(nullptr);
  // The latest pre-flight check's answer (greyhoundctl preflight); null when none was asked for.
  const std::optional<PreflightReport> preflight = reader.take(st.preflight_result());
  out["preflight"] = preflight ? to_json(*preflight) : json(nullptr);

  // Ranks with their registration and current iteration time: the job's (below its layout's world, when it
  // published one; else the first kMaxStatusRanks), read in pipelined batches. Members beyond (a planted set)
  // are counted, not read: they cost the reader nothing.
  out["ranks"] = json::array();
  const std::optional<JobLayout> layout = reader.take(st.layout());
  std::vector<int> ranks;
  auto below = layout ? st.ranks_below(layout->world) : Result<std::pair<std::vector<int>, std::int64_t>>::failure("");
  if (below) {
    ranks = std::move(below->first);
    out["ranks_ignored"] = below->second - static_cast<std::int64_t>(ranks.size());
  } else {
    // No layout, or a Redis without SMISMEMBER (before 6.2): the members, read whole (the set script's bound).
    if (layout && below.code() == Errc::kUnavailable) throw Unavailable{below.error()};
    ranks = reader.list(st.ranks());
    const auto beyond = std::lower_bound(ranks.begin(), ranks.end(), layout ? layout->world : kMaxStatusRanks);
    out["ranks_ignored"] = static_cast<std::int64_t>(ranks.end() - beyond);
    ranks.erase(beyond, ranks.end());
  }
  const auto rows = reader.list(st.rank_rows(ranks));
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const int r = ranks[i];
    json row = {{"rank", r}};
    std::string err;
    if (auto reg = reader.take(rows[i].registration, &err)) {
      row.update(to_json(*reg));
    } else if (!err.empty()) {
      row["malformed"] = err;
    }
    err.clear();
    if (auto u = reader.take(rows[i].iteration, &err)) {
      row["iteration"] = u->index;
      row["iter_ms"] = u->iter_ms;
      row["period"] = u->period;
      row["age_s"] = static_cast<double>(now_ms - u->t_unix_ms) * 1e-3;
    } else if (!err.empty()) {
      row["iteration_malformed"] = err;
    }
    out["ranks"].push_back(row);
  }

  // Nodes: agents' heartbeats (they expire: an absent one means the agent is gone).
  out["nodes"] = json::array();
  for (int n : reader.list(st.agents())) {
    json row = {{"node", n}, {"alive", false}};
    std::string err;
    if (auto hb = reader.take(st.heartbeat(n), &err)) {
      row.update(to_json(*hb));
      row["alive"] = true;
      row["heartbeat_age_s"] = static_cast<double>(now_ms - hb->t_unix_ms) * 1e-3;
    } else if (!err.empty()) {
      row["malformed"] = err;
    }
    out["nodes"].push_back(row);
  }

  // Groups: members in group-rank order, what they move.
  out["groups"] = json::array();
  for (const auto& g : reader.list(st.groups())) out["groups"].push_back(group_row(g, reader));
  return out;
}

}  // namespace

Result<json> job_status(JobStore& store, std::int64_t now_unix_ms, const StatusNote& note) {
  Reader reader(note);
  try {
    return build(store, now_unix_ms, reader);
  } catch (const Unavailable& u) {
    return Result<json>::failure(u.why, Errc::kUnavailable);
  }
}

}  // namespace greyhound::store
