// greyhoundctl status --job J [--redis URL] [--json]: ranks, nodes, groups, current iteration times,
// the master's state and open incidents of one job, read from Redis through the job store. Malformed values
// are reported per entry (and once on stderr), never fatal; a Redis that goes away midway is an error.
#include <cstdio>
#include <set>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/ctl_commands.h"
#include "common/args.h"
#include "common/redis_client.h"
#include "greyhound/ring.h"
#include "store/job_status.h"
#include "store/job_store.h"
#include "store/messages.h"

namespace greyhound::ctl {

using nlohmann::json;

int cmd_status(const Argv& argv) {
  const Args args(argv, {"job", "redis"}, {"json"});
  const std::string job = job_arg(args);
  RedisClient::Options o;
  o.endpoint = redis_endpoint_from_env(args.str("redis", ""));
  RedisClient client(o);
  if (!client.ensure_connected()) {
    std::fprintf(stderr, "greyhoundctl status: %s\n", client.last_error().c_str());
    return 1;
  }
  store::JobStore st(client, job);
  std::set<std::string> warned;
  const auto note = [&](const std::string& where, const std::string& why) {
    if (warned.insert(why.substr(0, why.find(':'))).second) {
      std::fprintf(stderr, "greyhoundctl status: %s: %s (shown as malformed)\n", where.c_str(), why.c_str());
    }
  };
  auto status = store::job_status(st, unix_ms_now(), note);
  if (!status) throw std::runtime_error(status.error());
  const json& out = *status;

  if (args.flag("json")) {
    std::printf("%s\n", out.dump(2, ' ', false, json::error_handler_t::replace).c_str());
    return 0;
  }
  std::printf("job %s: %s", job.c_str(), out["state"].get<std::string>().c_str());
  if (const json& m = out["master"]; m.is_object()) {
    std::printf(" (%lld incidents, %lld events processed, %lld rejected)", m.value("incidents_total", 0LL),
                m.value("events_processed", 0LL), m.value("events_rejected", 0LL));
    if (const long long gaps = m.value("event_gaps", 0LL); gaps > 0) {
      std::printf(" [events were trimmed from the stream unread by the master %lld time(s)]", gaps);
    }
    // Collectives that waited for ranks that never joined them.
    for (const auto& h : m.value("hangs", json::array())) {
      if (!h.is_object()) continue;
      std::printf("\nHANG: group %s, call %lld (%s) since %.2f s: ranks %s wait for ranks %s", h.value("group", std::string("?")).c_str(),
                  h.value("seq", 0LL), h.value("op", std::string("?")).c_str(), h.value("since_t_s", 0.0),
                  h.value("waiting", json::array()).dump().c_str(), h.value("missing", json::array()).dump().c_str());
    }
    // Ranks whose process died: the job cannot go on without them.
    for (const auto& f : m.value("fail_stops", json::array())) {
      if (!f.is_object()) continue;
      std::printf("\nFAIL-STOP: rank %d (node %d, pid %lld) died at %.2f s", f.value("rank", -1), f.value("node", -1),
                  f.value("pid", 0LL), f.value("t_s", 0.0));
    }
  }
  if (const json& p = out["operator_plan"]; p.is_object()) {
    const json& q = p["request"];
    std::printf("\nOPERATOR'S PLAN %s: %s%s", q.value("id", std::string("?")).c_str(), q.value("action", std::string("?")).c_str(),
                p["holds"].is_boolean() && p["holds"].get<bool>() ? " (greyhound's own remedies wait until `greyhoundctl plan --release`)" : "");
    if (const json& a = p["answer"]; a.is_object()) {
      std::printf(": %s%s %s", a.value("state", std::string("?")).c_str(),
                  a.value("epoch", 0LL) > 0 ? (" as plan " + std::to_string(a.value("epoch", 0LL))).c_str() : "",
                  a.value("reason", std::string()).c_str());
    }
  }
  if (const json& p = out["preflight"]; p.is_object()) {
    std::printf("\nPRE-FLIGHT %s: %s (%s)", p.value("id", std::string("?")).c_str(), p.value("state", std::string("?")).c_str(),
                p.value("reason", std::string()).c_str());
    for (const auto& g : p.value("slow_gpus", json::array())) {
      std::printf("\n  slow GPU: rank %d (node %d) %.2fx", g.value("rank", -1), g.value("node", -1), g.value("ratio", 0.0));
    }
    for (const auto& l : p.value("slow_links", json::array())) {
      std::printf("\n  slow link: nodes %d-%d %.2fx", l.value("node_a", -1), l.value("node_b", -1), l.value("ratio", 0.0));
    }
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
