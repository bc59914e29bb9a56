// greyhoundctl events --job J [--redis URL] [--json] [--follow] [--since ID] [--count N]: the job's event
// stream as a readable timeline (the lines the demo prints), or as JSON lines; --follow keeps reading new
// events until interrupted.
// greyhoundctl incidents --job J [--redis URL] [--json] [--count N]: the job's latest incidents, newest first,
// and the fail-slows open now.
// Both read Redis through the job store; a malformed entry is shown as such, never fatal; Redis going away
// is an error (exit 1).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "cli/ctl_commands.h"
#include "common/args.h"
#include "common/redis_client.h"
#include "greyhound/ring.h"
#include "store/job_store.h"
#include "store/messages.h"
#include "store/timeline.h"

namespace greyhound::ctl {
namespace {

using nlohmann::json;

constexpr int kBatch = 512;
constexpr int kFollowPollMs = 500;

RedisClient::Options redis_options(const Args& args) {
  RedisClient::Options o;
  o.endpoint = redis_endpoint_from_env(args.str("redis", ""));
  return o;
}

void connect(RedisClient& client) {
  if (!client.ensure_connected()) throw std::runtime_error(client.last_error());
}

// Prints one batch: as JSON lines, or as the timeline of its events (malformed entries on a line of their
// own). Returns the id of the last entry.
std::string print_batch(const std::vector<store::Entry<Event>>& batch, bool as_json) {
  json events = json::array();
  for (const auto& e : batch) {
    if (as_json) {
      json line = e.value ? to_json(*e.value) : json{{"malformed", e.error}};
      line["id"] = e.id;
      std::printf("%s\n", line.dump(-1, ' ', false, json::error_handler_t::replace).c_str());
    } else if (e.value) {
      events.push_back(to_json(*e.value));
    } else {
      std::printf("  (malformed entry %s: %s)\n", e.id.c_str(), e.error.c_str());
    }
  }
  if (!as_json) std::printf("%s", store::format_timeline(json::array(), events).c_str());
  std::fflush(stdout);
  return batch.empty() ? "" : batch.back().id;
}

}  // namespace

int cmd_events(const Argv& argv) {
  const Args args(argv, {"job", "redis", "since", "count"}, {"json", "follow"});
  const std::string job = job_arg(args);
  const bool as_json = args.flag("json");
  const bool follow = args.flag("follow");
  const std::int64_t limit = args.integer_in("count", 0, 0, 1'000'000'000);  // 0: every event
  std::string after = args.str("since", "0-0");
  if (!valid_stream_id(after)) throw ArgError("--since: '" + after + "' is not a stream id (like 1700000000000-0)");
  RedisClient client(redis_options(args));
  connect(client);
  store::JobStore st(client, job);
  // Everything there is (up to --count), one timeline: agents' reports of one change are grouped across it.
  std::vector<store::Entry<Event>> all;
  for (;;) {
    const int want = limit > 0 ? static_cast<int>(std::min<std::int64_t>(kBatch, limit - static_cast<std::int64_t>(all.size())))
                               : kBatch;
    if (want <= 0) break;
    auto batch = st.read_events(after, want);
    if (!batch) throw std::runtime_error(batch.error());
    if (batch->empty()) break;
    after = batch->back().id;
    for (auto& e : *batch) all.push_back(std::move(e));
    if (static_cast<int>(batch->size()) < want) break;
  }
  print_batch(all, as_json);
  while (follow) {
    std::this_thread::sleep_for(std::chrono::milliseconds(kFollowPollMs));
    auto batch = st.read_events(after, kBatch);
    if (!batch) throw std::runtime_error(batch.error());
    if (!batch->empty()) after = print_batch(*batch, as_json);
  }
  return 0;
}

int cmd_incidents(const Argv& argv) {
  const Args args(argv, {"job", "redis", "count"}, {"json"});
  const std::string job = job_arg(args);
  const int count = static_cast<int>(args.integer_in("count", 20, 1, 1000));
  RedisClient client(redis_options(args));
  connect(client);
  store::JobStore st(client, job);
  auto ids = st.recent_incidents(count);
  if (!ids) throw std::runtime_error(ids.error());
  auto state = st.master_state();
  if (!state && state.code() == Errc::kUnavailable) throw std::runtime_error(state.error());
  json incidents = json::array();
  for (std::int64_t id : *ids) {
    auto i = st.incident(id);
    if (!i && i.code() == Errc::kUnavailable) throw std::runtime_error(i.error());
    if (i && *i) {
      incidents.push_back(to_json(**i));
    } else {
      incidents.push_back({{"id", id}, {"malformed", i ? "absent" : i.status().reason}});
    }
  }
  json fail_slows = json::array();
  if (state && *state) {
    for (const FailSlow& f : (*state)->fail_slows) fail_slows.push_back(to_json(f));
  }
  if (args.flag("json")) {
    json out = {{"job", job}, {"incidents", incidents}, {"fail_slows", fail_slows}};
    std::printf("%s\n", out.dump(2, ' ', false, json::error_handler_t::replace).c_str());
    return 0;
  }
  std::printf("job %s: %zu incident(s)\n", job.c_str(), incidents.size());
  for (const json& i : incidents) {
    if (i.contains("malformed")) {
      std::printf("  #%s (malformed: %s)\n", i["id"].dump().c_str(), i["malformed"].get<std::string>().c_str());
      continue;
    }
    std::string closed;
    if (i["status"] == "closed") {
      char buf[96];
      std::snprintf(buf, sizeof buf, " closed t=%.2fs (lasted %.1f s)", i["closed_t_s"].get<double>(),
                    i["closed_t_s"].get<double>() - i["onset_t_s"].get<double>());
      closed = buf;
    }
    std::printf("  #%lld %-6s onset t=%.2fs detected t=%.2fs x%.2f (%.1f -> %.1f ms) ranks %s nodes %s%s\n",
                i["id"].get<long long>(), i["status"].get<std::string>().c_str(), i["onset_t_s"].get<double>(),
                i["detected_t_s"].get<double>(), i["severity"].get<double>(), i["before_ms"].get<double>(),
                i["after_ms"].get<double>(), i["ranks"].dump().c_str(), i["nodes"].dump().c_str(), closed.c_str());
  }
  std::printf("fail-slows open: %zu\n", fail_slows.size());
  for (const json& f : fail_slows) {
    const std::string where = f.contains("link") ? "link " + f["link"].dump() : "rank " + f.value("rank", json(-1)).dump();
    std::printf("  fail-slow %s of incident %s: %s at %s since t=%.2fs, x%.2f, rung %s\n", f["id"].dump().c_str(),
                f["incident"].dump().c_str(), f["cause"].get<std::string>().c_str(), where.c_str(),
                f["onset_t_s"].get<double>(), f["severity"].get<double>(),
                f.contains("account") ? f["account"].value("rung", "?").c_str() : "?");
  }
  return 0;
}

}  // namespace greyhound::ctl
