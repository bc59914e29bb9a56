// greyhoundctl status --job J [--redis URL] [--json]: ranks, nodes, groups, current iteration times,
// the master's state and open incidents of one job, read from Redis through the job store. Malformed values
// are reported per entry (and once on stderr), never fatal; a Redis that goes away midway is an error.
#include <algorithm>
#include <cstdio>
#include <set>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/ctl_commands.h"
#include "common/args.h"
#include "common/redis_client.h"
#include "greyhound/ring.h"
#include "store/job_store.h"
#include "store/messages.h"

namespace greyhound::ctl {
namespace {

using nlohmann::json;

// Reads one value through the store: the value, or nullopt when absent or malformed. A malformed value's
// reason (without the key) goes to *malformed and, once per kind of problem, to stderr.
class Notes {
 public:
  template <class T>
  std::optional<T> take(Result<std::optional<T>> r, std::string* malformed = nullptr) {
    if (r.ok()) return std::move(*r);
    if (r.code() == Errc::kUnavailable) throw std::runtime_error(r.error());
    const std::string& where = r.status().subject;  // the key
    const std::string& why = r.status().reason;
    note(where, why);
    if (malformed != nullptr && r.code() == Errc::kInvalid) *malformed = why;
    return std::nullopt;
  }
  // A list (ranks, nodes, groups): empty, noted, when it cannot be read as one.
  template <class T>
  std::vector<T> list(Result<std::vector<T>> r) {
    if (r.ok()) return std::move(*r);
    if (r.code() == Errc::kUnavailable) throw std::runtime_error(r.error());
    note(r.status().subject, r.status().reason);
    return {};
  }
  void note(const std::string& where, const std::string& why) {
    if (warned_.insert(why.substr(0, why.find(':'))).second) {
      std::fprintf(stderr, "greyhoundctl status: %s: %s (shown as malformed)\n", where.c_str(), why.c_str());
    }
  }

 private:
  std::set<std::string> warned_;
};

json group_row(const store::Entry<GroupRecord>& e, Notes& notes) {
  json row = {{"group", e.id}};
  if (!e.error.empty()) notes.note("group " + e.id, e.error);
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

}  // namespace

int cmd_status(const Argv& argv) {
  const Args args(argv, {"job", "redis"}, {"json"});
  const std::string job = sanitize_job_name(args.str("job"));
  RedisClient::Options o;
  o.endpoint = args.has("redis") ? parse_redis_url(args.str("redis")) : redis_endpoint_from_env();
  RedisClient client(o);
  if (!client.ensure_connected()) {
    std::fprintf(stderr, "greyhoundctl status: %s\n", client.last_error().c_str());
    return 1;
  }
  store::JobStore st(client, job);
  Notes notes;
  const std::int64_t now_ms = unix_ms_now();
  json out = {{"job", job}};

  // Master and incidents.
  const std::optional<MasterState> master = notes.take(st.master_state());
  out["state"] = master ? std::string(name(master->state)) : "unknown (no master state)";
  out["master"] = master ? to_json(*master) : json(nullptr);
  out["incidents"] = json::array();
  if (auto ids = st.recent_incidents(10); ids.ok()) {
    for (std::int64_t id : *ids) {
      std::string err;
      if (auto i = notes.take(st.incident(id), &err)) {
        out["incidents"].push_back(to_json(*i));
      } else if (!err.empty()) {
        out["incidents"].push_back({{"id", std::to_string(id)}, {"malformed", err}});
      }
    }
  } else if (ids.code() == Errc::kUnavailable) {
    throw std::runtime_error(ids.error());
  }

  // Ranks with their registration and current iteration time.
  out["ranks"] = json::array();
  for (int r : notes.list(st.ranks())) {
    json row = {{"rank", r}};
    std::string err;
    if (auto reg = notes.take(st.rank(r), &err)) {
      row.update(to_json(*reg));
    } else if (!err.empty()) {
      row["malformed"] = err;
    }
    err.clear();
    if (auto u = notes.take(st.iteration(r), &err)) {
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
  for (int n : notes.list(st.agents())) {
    json row = {{"node", n}, {"alive", false}};
    std::string err;
    if (auto hb = notes.take(st.heartbeat(n), &err)) {
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
  for (const auto& g : notes.list(st.groups())) out["groups"].push_back(group_row(g, notes));

  if (args.flag("json")) {
    std::printf("%s\n", out.dump(2, ' ', false, json::error_handler_t::replace).c_str());
    return 0;
  }
  std::printf("job %s: %s", job.c_str(), out["state"].get<std::string>().c_str());
  if (master) {
    std::printf(" (%lld incidents, %lld events processed, %lld rejected)", static_cast<long long>(master->incidents_total),
                static_cast<long long>(master->events_processed), static_cast<long long>(master->events_rejected));
  }
  std::printf("\n\nRANK  NODE  HOST              PID     ITER     ITER_MS  PERIOD   AGE_S\n");
  for (const auto& r : out["ranks"]) {
    if (r.contains("malformed")) {
      std::printf("%4d  (malformed: %s)\n", r["rank"].get<int>(), r["malformed"].get<std::string>().c_str());
      continue;
    }
    std::printf("%4d  %4d  %-16s %6d  ", r["rank"].get<int>(), r.value("node", -1),
                r.value("host", std::string("?")).substr(0, 16).c_str(), r.value("pid", 0));
    if (r.contains("iter_ms")) {
      std::printf("%6lld  %9.1f  %6d  %6.1f\n", r["iteration"].get<long long>(), r["iter_ms"].get<double>(),
                  r["period"].get<int>(), r["age_s"].get<double>());
    } else {
      std::printf("     -          -       -       -\n");
    }
  }
  std::printf("\nNODE  AGENT   RANKS                     READ      LOST  DROPPED\n");
  for (const auto& n : out["nodes"]) {
    std::printf("%4d  %-6s  %-24s  %8llu  %6llu  %7llu\n", n["node"].get<int>(), n["alive"].get<bool>() ? "alive" : "gone",
                n.value("ranks", json::array()).dump().substr(0, 24).c_str(),
                n.value("records_read", 0ull), n.value("records_lost", 0ull), n.value("events_dropped", 0ull));
  }
  std::printf("\nGROUP             SIZE  MEMBERS                   OPS\n");
  for (const auto& g : out["groups"]) {
    std::string ops;
    for (const auto& o2 : g["ops"]) ops += (ops.empty() ? "" : " ") + o2.get<std::string>();
    std::printf("%-16s  %4d  %-24s  %s\n", g["group"].get<std::string>().c_str(), g["size"].get<int>(),
                g["members"].dump().substr(0, 24).c_str(), ops.substr(0, 60).c_str());
  }
  std::printf("\nINCIDENTS\n");
  bool any = false;
  for (const auto& i : out["incidents"]) {
    if (i.contains("malformed")) continue;
    any = true;
    std::printf("  #%lld %-6s onset t=%.2fs detected t=%.2fs x%.2f (%.1f -> %.1f ms) ranks %s%s\n",
                i["id"].get<long long>(), i["status"].get<std::string>().c_str(), i["onset_t_s"].get<double>(),
                i["detected_t_s"].get<double>(), i["severity"].get<double>(), i["before_ms"].get<double>(),
                i["after_ms"].get<double>(), i["ranks"].dump().c_str(),
                i["status"] == "closed" ? (" closed t=" + std::to_string(i["closed_t_s"].get<double>()) + "s").c_str() : "");
  }
  if (!any) std::printf("  none\n");
  return 0;
}

}  // namespace greyhound::ctl
