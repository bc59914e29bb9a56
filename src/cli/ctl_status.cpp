// greyhoundctl status --job J [--redis URL] [--json]: ranks, nodes, groups, current iteration times,
// the master's state and open incidents of one job, read from Redis. Malformed values are reported per
// entry (and once on stderr), never fatal.
#include <algorithm>
#include <cstdio>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/ctl_commands.h"
#include "common/args.h"
#include "common/messages.h"
#include "common/redis_client.h"
#include "greyhound/config.h"
#include "greyhound/redis_keys.h"
#include "greyhound/ring.h"

namespace greyhound::ctl {
namespace {

using nlohmann::json;

class Reader {
 public:
  explicit Reader(RedisClient& c) : c_(c) {}
  std::vector<std::string> members(const std::string& key) {
    std::vector<std::string> out;
    auto r = c_.command({"SMEMBERS", key});
    if (!r) throw std::runtime_error(c_.last_error());
    for (const auto& e : r->elements) out.push_back(e.str);
    return out;
  }
  // The string at key; nullopt when absent or not a string (noted).
  std::optional<std::string> get(const std::string& key) {
    auto r = c_.command({"GET", key});
    if (!r) throw std::runtime_error(c_.last_error());
    if (r->type == RedisReply::Type::kString) return r->str;
    if (r->is_error()) note(key, r->str);
    return std::nullopt;
  }
  std::map<std::string, std::string> hash(const std::string& key) {
    std::map<std::string, std::string> out;
    auto r = c_.command({"HGETALL", key});
    if (!r) throw std::runtime_error(c_.last_error());
    if (r->is_error()) note(key, r->str);
    for (std::size_t i = 0; i + 1 < r->elements.size(); i += 2) out[r->elements[i].str] = r->elements[i + 1].str;
    return out;
  }
  void note(const std::string& key, const std::string& why) {
    if (warned_.insert(why.substr(0, why.find(':'))).second) {
      std::fprintf(stderr, "greyhoundctl status: %s: %s (shown as malformed)\n", key.c_str(), why.c_str());
    }
  }

 private:
  RedisClient& c_;
  std::set<std::string> warned_;
};

int to_int(const std::string& s, int def) {
  char* end = nullptr;
  const long v = std::strtol(s.c_str(), &end, 10);
  return s.empty() || *end != '\0' ? def : static_cast<int>(v);
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
  Reader rd(client);
  const std::int64_t now_ms = unix_ms_now();
  json out = {{"job", job}};

  // Master and incidents.
  MasterState master;
  bool master_ok = false;
  if (auto t = rd.get(keys::master(job))) {
    std::string err;
    if (auto m = parse_master_state(*t, &err)) {
      master = *m;
      master_ok = true;
    } else {
      rd.note(keys::master(job), err);
    }
  }
  out["state"] = master_ok ? master.state : "unknown (no master state)";
  out["master"] = master_ok ? to_json(master) : json(nullptr);
  out["incidents"] = json::array();
  {
    auto r = client.command({"ZREVRANGE", keys::incidents(job), "0", "9"});
    if (r && r->type == RedisReply::Type::kArray) {
      for (const auto& id : r->elements) {
        const auto text = rd.get(keys::incident(job, std::atoll(id.str.c_str())));
        if (!text) continue;
        std::string err;
        if (auto i = parse_incident(*text, &err)) {
          out["incidents"].push_back(to_json(*i));
        } else {
          rd.note(keys::incident(job, std::atoll(id.str.c_str())), err);
          out["incidents"].push_back({{"id", id.str}, {"malformed", err}});
        }
      }
    }
  }

  // Ranks with their registration and current iteration time.
  std::vector<int> ranks;
  for (const auto& s : rd.members(keys::ranks(job))) {
    const int r = to_int(s, -1);
    if (r >= 0) ranks.push_back(r);
  }
  std::sort(ranks.begin(), ranks.end());
  out["ranks"] = json::array();
  for (int r : ranks) {
    json row = {{"rank", r}};
    std::string err;
    if (auto t = rd.get(keys::rank(job, r))) {
      if (auto reg = parse_rank_registration(*t, &err)) {
        row.update(to_json(*reg));
      } else {
        rd.note(keys::rank(job, r), err);
        row["malformed"] = err;
      }
    }
    if (auto t = rd.get(keys::iter(job, r))) {
      if (auto u = parse_iteration_update(*t, &err)) {
        row["iteration"] = u->index;
        row["iter_ms"] = u->iter_ms;
        row["period"] = u->period;
        row["age_s"] = static_cast<double>(now_ms - u->t_unix_ms) * 1e-3;
      } else {
        rd.note(keys::iter(job, r), err);
        row["iteration_malformed"] = err;
      }
    }
    out["ranks"].push_back(row);
  }

  // Nodes: agents' heartbeats (they expire: an absent one means the agent is gone).
  out["nodes"] = json::array();
  std::vector<int> nodes;
  for (const auto& s : rd.members(keys::agents(job))) {
    const int n = to_int(s, -1);
    if (n >= 0) nodes.push_back(n);
  }
  std::sort(nodes.begin(), nodes.end());
  for (int n : nodes) {
    json row = {{"node", n}, {"alive", false}};
    if (auto t = rd.get(keys::agent(job, n))) {
      std::string err;
      if (auto hb = parse_agent_heartbeat(*t, &err)) {
        row.update(to_json(*hb));
        row["alive"] = true;
        row["heartbeat_age_s"] = static_cast<double>(now_ms - hb->t_unix_ms) * 1e-3;
      } else {
        rd.note(keys::agent(job, n), err);
        row["malformed"] = err;
      }
    }
    out["nodes"].push_back(row);
  }

  // Groups: members in group-rank order, what they move.
  out["groups"] = json::array();
  auto gids = rd.members(keys::groups(job));
  std::sort(gids.begin(), gids.end());
  for (const auto& gid : gids) {
    const auto h = rd.hash(keys::group(job, gid));
    json row = {{"group", gid}, {"size", to_int(h.count("size") ? h.at("size") : "", -1)}};
    json members = json::array();
    const int size = row["size"].get<int>();
    for (int i = 0; i < std::max(size, 0) && i < 1 << 20; ++i) {
      const auto it = h.find("member:" + std::to_string(i));
      members.push_back(it == h.end() ? json(nullptr) : json(to_int(it->second, -1)));
    }
    row["members"] = members;
    if (h.count("created_by")) {
      try {
        row["created_by"] = json::parse(h.at("created_by"));
      } catch (const json::exception&) {
        rd.note(keys::group(job, gid), "created_by: not JSON");
      }
    }
    std::set<std::string> ops;
    for (const auto& [k, v] : h) {
      if (k.rfind("ops:", 0) != 0) continue;
      try {
        const json per_op = json::parse(v);  // named: items() of a temporary would dangle
        if (per_op.is_object()) {
          for (const auto& [op, n] : per_op.items()) ops.insert(op);
        }
      } catch (const json::exception&) {
        rd.note(keys::group(job, gid), k + ": not JSON");
      }
    }
    row["ops"] = ops;
    out["groups"].push_back(row);
  }

  if (args.flag("json")) {
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  std::printf("job %s: %s", job.c_str(), out["state"].get<std::string>().c_str());
  if (master_ok) {
    std::printf(" (%lld incidents, %lld events processed, %lld rejected)", static_cast<long long>(master.incidents_total),
                static_cast<long long>(master.events_processed), static_cast<long long>(master.events_rejected));
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
