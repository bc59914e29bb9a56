#include "agent/agent.h"

#include <unistd.h>

#include <algorithm>
#include <ctime>

#include <spdlog/spdlog.h>

#include "common/clock.h"
#include "common/record_json.h"
#include "greyhound/redis_keys.h"

namespace greyhound::agent {

Agent::Agent(AgentConfig config)
    : cfg_(std::move(config)), redis_(RedisClient::Options::for_daemon(cfg_.redis, std::chrono::milliseconds(500))) {
  started_ns_ = clock_ns(CLOCK_MONOTONIC);
  mono_to_unix_ns_ = static_cast<std::int64_t>(clock_ns(CLOCK_REALTIME)) - static_cast<std::int64_t>(started_ns_);
  last_activity_ns_ = started_ns_;
  if (cfg_.host.empty()) {
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    cfg_.host = host;
  }
}

double Agent::job_time_s(std::uint64_t mono_ns) const {
  const std::uint64_t epoch = cfg_.epoch_ns != 0 ? cfg_.epoch_ns : started_ns_;  // no ring yet: our own start
  return (static_cast<double>(mono_ns) - static_cast<double>(epoch)) * 1e-9;
}

std::int64_t Agent::unix_ms_of(std::uint64_t mono_ns) const {
  return (static_cast<std::int64_t>(mono_ns) + mono_to_unix_ns_) / 1'000'000;
}

void Agent::discover(std::uint64_t now_ns) {
  for (const std::string& path : list_ring_files(cfg_.shm_dir, cfg_.job)) {
    if (trackers_.count(path) != 0 || ignored_rings_.count(path) != 0) continue;
    std::string err;
    auto reader = RingReader::open(path, &err);
    if (!reader) {
      if (logged_.insert("open:" + path).second) spdlog::warn("skipping ring {}", err);
      ignored_rings_.insert(path);
      continue;
    }
    // A ring whose writer was gone before this agent started belongs to an earlier run.
    if (!reader->writer_alive() && reader->header().created_mono_ns < started_ns_) {
      ignored_rings_.insert(path);
      continue;
    }
    if (cfg_.epoch_ns == 0) cfg_.epoch_ns = reader->header().created_mono_ns;  // the job's clock: first ring
    auto t = std::make_unique<RankTracker>(std::move(reader), cfg_.method);
    spdlog::info("tracking rank {} ({})", t->rank(), path);
    trackers_[path] = std::move(t);
    last_activity_ns_ = now_ns;
    published_reconnects_ = ~0ull;  // a new rank: publish its registration
  }
}

void Agent::queue_event(Event e) {
  e.source = "agent:" + std::to_string(cfg_.node);
  e.node = cfg_.node;
  if (events_.size() >= cfg_.event_queue_max) {
    events_.pop_front();
    ++events_dropped_;
    if (logged_.insert("queue-full").second) {
      spdlog::warn("event queue full ({} events) while Redis is unavailable: dropping the oldest", cfg_.event_queue_max);
    }
  }
  events_.push_back(to_json(e).dump());
}

void Agent::flush_events() {
  while (!events_.empty()) {
    auto r = redis_.command({"XADD", keys::events(cfg_.job), "MAXLEN", "~", "100000", "*", "json", events_.front()});
    if (!r) return;  // keep it for the next attempt
    if (r->is_error()) {
      if (logged_.insert("xadd:" + r->str).second) spdlog::error("XADD refused: {}", r->str);
    }
    events_.pop_front();
  }
}

void Agent::publish_state(std::uint64_t now_ns, bool full) {
  if (!redis_.ensure_connected()) {
    if (logged_.insert("redis-down").second) {
      spdlog::warn("{}; will retry (the ranks are not affected)", redis_.last_error());
    }
    return;
  }
  if (logged_.erase("redis-down") != 0) spdlog::info("connected to Redis at {}", redis_.endpoint().describe());
  std::vector<std::vector<std::string>> cmds;
  const std::string& job = cfg_.job;
  if (full || published_reconnects_ != redis_.reconnects()) {
    cmds.push_back({"SADD", keys::jobs(), job});
    for (const auto& [path, t] : trackers_) {
      RankRegistration reg;
      reg.rank = t->rank();
      reg.local_rank = t->local_rank();
      reg.node = cfg_.node;
      reg.host = cfg_.host;
      reg.pid = t->pid();
      reg.device = t->local_rank();
      reg.ring = path;
      reg.t_unix_ms = unix_ms_of(t->created_mono_ns());
      cmds.push_back({"SET", keys::rank(job, reg.rank), to_json(reg).dump()});
      cmds.push_back({"SADD", keys::ranks(job), std::to_string(reg.rank)});
      for (const auto& [gid, g] : t->groups()) {
        const std::string hex = group_id_hex(gid);
        cmds.push_back({"SADD", keys::groups(job), hex});
        cmds.push_back({"HSET", keys::group(job, hex), "size", std::to_string(g.group_size), "member:" +
                        std::to_string(g.group_rank), std::to_string(t->rank()), "created_by", nlohmann::json(g.created_by).dump()});
      }
    }
    if (!started_event_sent_) {
      Event e;
      e.type = event_type::kAgentStart;
      e.t_s = job_time_s(now_ns);
      e.t_unix_ms = unix_ms_of(now_ns);
      queue_event(e);
      started_event_sent_ = true;
    }
  }
  for (const auto& [rank, u] : pending_iters_) {
    cmds.push_back({"SET", keys::iter(job, rank), to_json(u).dump(), "EX", "60"});
  }
  if (now_ns >= next_heartbeat_ns_) {
    AgentHeartbeat hb;
    hb.node = cfg_.node;
    hb.host = cfg_.host;
    hb.pid = static_cast<int>(getpid());
    hb.t_unix_ms = unix_ms_of(now_ns);
    for (const auto& [path, t] : trackers_) {
      hb.ranks.push_back(t->rank());
      hb.records_read += t->records_read();
      hb.records_lost += t->records_lost();
      nlohmann::json ops = nlohmann::json::object();
      for (const auto& [gid, counts] : t->op_counts()) {
        for (const auto& [op, n] : counts) ops[group_id_hex(gid)][op] = n;
      }
      for (const auto& [gid, per_op] : ops.items()) {
        cmds.push_back({"HSET", keys::group(job, gid), "ops:" + std::to_string(t->rank()), per_op.dump()});
      }
    }
    std::sort(hb.ranks.begin(), hb.ranks.end());
    hb.events_dropped = events_dropped_;
    hb.redis_reconnects = redis_.reconnects();
    cmds.push_back({"SET", keys::agent(job, cfg_.node), to_json(hb).dump(), "EX", "10"});
    cmds.push_back({"SADD", keys::agents(job), std::to_string(cfg_.node)});
    next_heartbeat_ns_ = now_ns + static_cast<std::uint64_t>(cfg_.heartbeat_ms) * 1'000'000ull;
  }
  if (!cmds.empty()) {
    auto r = redis_.pipeline(cmds);
    if (!r) return;  // state is re-sent after the reconnect
    for (const auto& reply : *r) {
      if (reply.is_error() && logged_.insert("state:" + reply.str).second) {
        spdlog::error("Redis refused a state update: {}", reply.str);
      }
    }
    pending_iters_.clear();
    published_reconnects_ = redis_.reconnects();
  }
  flush_events();
}

void Agent::poll_commands(std::uint64_t now_ns) {
  if (!redis_.connected()) return;
  const std::string key = keys::commands(cfg_.job, cfg_.node);
  if (command_cursor_.empty()) {
    // Start after the newest command: commands are for agents that are running when they are issued.
    auto r = redis_.command({"XREVRANGE", key, "+", "-", "COUNT", "1"});
    if (!r) return;
    command_cursor_ = r->type == RedisReply::Type::kArray && !r->elements.empty() &&
                              !r->elements[0].elements.empty()
                          ? r->elements[0].elements[0].str
                          : "0-0";
  }
  auto r = redis_.command({"XREAD", "COUNT", "16", "STREAMS", key, command_cursor_});
  if (!r || r->type != RedisReply::Type::kArray || r->elements.empty()) return;
  for (const auto& entry : r->elements[0].elements.size() > 1 ? r->elements[0].elements[1].elements
                                                              : std::vector<RedisReply>{}) {
    if (entry.elements.size() < 2) continue;
    command_cursor_ = entry.elements[0].str;
    const auto& fields = entry.elements[1].elements;
    std::string text;
    for (std::size_t i = 0; i + 1 < fields.size(); i += 2) {
      if (fields[i].str == "json") text = fields[i + 1].str;
    }
    std::string err;
    auto cmd = parse_command(text, &err);
    if (!cmd) {
      if (logged_.insert("bad-command").second) spdlog::warn("ignoring a malformed command ({})", err);
      continue;
    }
    if (cmd->cmd == "resync") published_reconnects_ = ~0ull;
    if (cmd->cmd == "profile") {
      double secs = 3.0;
      if (cmd->args.is_object() && cmd->args.contains("duration_s") && cmd->args["duration_s"].is_number()) {
        secs = std::clamp(cmd->args["duration_s"].get<double>(), 0.2, 120.0);
      }
      profile_request_ = cmd->id;
      for (auto& [path, t] : trackers_) {
        std::string err;
        if (!t->start_profile(now_ns, now_ns + static_cast<std::uint64_t>(secs * 1e9), &err) &&
            logged_.insert("profile:" + path).second) {
          spdlog::warn("cannot profile rank {}: {}", t->rank(), err);
        }
      }
      spdlog::info("profiling {} ranks for {:.1f} s (request {})", trackers_.size(), secs, cmd->id);
    }
    Event ack;
    ack.type = event_type::kCommandAck;
    ack.t_s = job_time_s(now_ns);
    ack.t_unix_ms = unix_ms_of(now_ns);
    ack.detail = {{"cmd", cmd->cmd}, {"id", cmd->id}, {"stream_id", command_cursor_}};
    queue_event(ack);
  }
}

void Agent::step(std::uint64_t now_ns) {
  if (now_ns >= next_discovery_ns_) {
    discover(now_ns);
    next_discovery_ns_ = now_ns + 500'000'000ull;
  }
  for (auto& [path, t] : trackers_) {
    RankObservation obs;
    t->poll(now_ns, obs);
    if (!obs.iterations.empty() || !obs.new_groups.empty()) last_activity_ns_ = now_ns;
    if (!obs.new_groups.empty()) published_reconnects_ = ~0ull;
    if (!obs.iterations.empty()) {
      const TrackedIteration& it = obs.iterations.back();
      IterationUpdate u;
      u.rank = t->rank();
      u.index = static_cast<std::int64_t>(it.index);
      u.t_s = job_time_s(it.end_t_ns);
      u.iter_ms = it.iter_ms;
      u.period = static_cast<int>(it.period);
      u.t_unix_ms = unix_ms_of(it.end_t_ns);
      pending_iters_[u.rank] = u;
    }
    if (auto prof = t->finish_profile(now_ns)) {
      Event e;
      e.type = event_type::kProfile;
      e.t_s = job_time_s(now_ns);
      e.t_unix_ms = unix_ms_of(now_ns);
      e.rank = t->rank();
      nlohmann::json groups = nlohmann::json::object();
      for (const auto& [gid, g] : prof->groups) groups[group_id_hex(gid)] = {{"share", g.first}, {"calls_per_s", g.second}};
      e.detail = {{"request", profile_request_}, {"window_s", prof->window_s}, {"iterations", prof->iterations},
                  {"iter_ms", prof->iter_ms},       {"comm_share", prof->comm_share}, {"timings", prof->timings},
                  {"status", prof->status},         {"groups", groups}};
      queue_event(e);
    }
    if (obs.period_changed) {
      Event e;
      e.type = event_type::kPeriodChange;
      e.t_s = job_time_s(now_ns);
      e.t_unix_ms = unix_ms_of(now_ns);
      e.rank = t->rank();
      e.detail = {{"period", obs.period}};
      queue_event(e);
    }
    for (const TrackedChange& c : obs.changes) {
      Event e;
      e.type = std::string(analysis::direction_name(c.change.direction));
      e.t_s = job_time_s(c.onset_start_t_ns);
      e.t_unix_ms = unix_ms_of(c.onset_start_t_ns);
      e.rank = t->rank();
      e.index = static_cast<std::int64_t>(c.change.index);
      e.detected_index = static_cast<std::int64_t>(c.change.detected_index);
      e.detected_t_s = job_time_s(now_ns);
      e.before_ms = c.change.before_ms;
      e.after_ms = c.change.after_ms;
      e.ratio = c.change.ratio;
      e.detail = {{"iteration_end_t_s", job_time_s(c.detected_end_t_ns)}, {"method", std::string(analysis::method_name(cfg_.method))}};
      spdlog::info("rank {}: {} at iteration {} ({:.1f} -> {:.1f} ms), detected at iteration {}", e.rank, e.type,
                   e.index, e.before_ms, e.after_ms, e.detected_index);
      queue_event(e);
    }
  }
  publish_state(now_ns, false);
  poll_commands(now_ns);
}

bool Agent::idle(std::uint64_t now_ns) const {
  if (cfg_.idle_exit_s <= 0) return false;
  for (const auto& [path, t] : trackers_) {
    if (t->writer_alive() || !t->drained()) return false;
  }
  return static_cast<double>(now_ns - last_activity_ns_) * 1e-9 >= cfg_.idle_exit_s;
}

void Agent::shutdown(std::uint64_t now_ns, std::uint64_t deadline_ns) {
  step(now_ns);  // what the rings hold now
  Event e;
  e.type = event_type::kAgentStop;
  e.t_s = job_time_s(now_ns);
  e.t_unix_ms = unix_ms_of(now_ns);
  e.detail = {{"events_dropped", events_dropped_}};
  queue_event(e);
  while (!events_.empty() && clock_ns(CLOCK_MONOTONIC) < deadline_ns) {
    redis_.ensure_connected();
    flush_events();
    if (!events_.empty()) usleep(50'000);
  }
  if (!events_.empty()) spdlog::warn("{} events not delivered (Redis unavailable)", events_.size());
}

}  // namespace greyhound::agent
