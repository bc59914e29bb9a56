#include "sim/simcluster/cluster_services.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <thread>

#include "common/redis_client.h"
#include "common/text.h"
#include "greyhound/ring.h"
#include "sim/simcluster/rank_launcher.h"
#include "store/job_store.h"
#include "store/messages.h"

namespace greyhound::sim {
namespace {

bool alive(pid_t pid) { return pid > 0 && kill(pid, 0) == 0; }

// A chaos "busy" script: holds Redis for 0.25 s (Redis runs one script at a time, nothing else meanwhile).
constexpr const char* kBusyScript = R"lua(
local t = redis.call('TIME')
local start = tonumber(t[1]) * 1000000 + tonumber(t[2])
repeat
  local n = redis.call('TIME')
until tonumber(n[1]) * 1000000 + tonumber(n[2]) - start >= 250000
return 1
)lua";

void reap(pid_t pid) {
  int status = 0;
  if (pid > 0) waitpid(pid, &status, WNOHANG);
}

void terminate(pid_t pid, double grace_s) {
  if (!alive(pid)) return;
  kill(pid, SIGTERM);
  kill(pid, SIGCONT);  // one a chaos "stop" left stopped handles its SIGTERM now
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(grace_s);
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid || !alive(pid)) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, WNOHANG);
}

RedisClient client(const std::string& url) {
  RedisClient::Options o;
  o.endpoint = redis_endpoint_from_env(url);  // GREYHOUND_REDIS_PASSWORD_FILE too
  o.connect_timeout = std::chrono::milliseconds(300);
  o.backoff_min = std::chrono::milliseconds(0);
  o.backoff_max = std::chrono::milliseconds(0);
  return RedisClient(o);
}

}  // namespace

ClusterServices::ClusterServices(Options options) : opt_(std::move(options)) {}

ClusterServices::~ClusterServices() { stop_all(); }

bool ClusterServices::start(std::string* error) {
  if (!opt_.external_redis.empty()) {
    redis_url_ = opt_.external_redis;
  } else {
    bool absent_first = false;
    for (const auto& c : opt_.chaos) {
      if (c.target == "redis") {
        absent_first = c.action == "start";
        break;
      }
    }
    redis_port_ = pick_free_port();
    RedisServer::Options ro;
    ro.dir = opt_.data_dir;
    ro.port = redis_port_;
    redis_url_ = "redis://127.0.0.1:" + std::to_string(redis_port_) + "/0";
    if (!absent_first) {
      redis_ = RedisServer::start(ro, error);
      if (!redis_) return false;
    } else {
      chaos_log_.push_back("t=   0.00s Redis absent at start");
    }
  }
  if (!opt_.start_master) return true;
  master_pids_.assign(static_cast<std::size_t>(std::max(1, opt_.masters)), -1);
  for (int i = 0; i < static_cast<int>(master_pids_.size()); ++i) {
    if (!start_master(error, i)) return false;
  }
  return true;
}

int ClusterServices::leader_index() {
  RedisClient c = client(redis_url_);
  auto holder = store::JobStore::lease_holder(c, "job:" + opt_.job);  // "<epoch> m<i> <nonce>"
  if (!holder || !*holder) return -1;
  const std::string& h = **holder;
  const std::size_t sp = h.find(" m");
  if (sp == std::string::npos) return -1;
  const std::string index = h.substr(sp + 2, h.find(' ', sp + 2) - (sp + 2));
  if (index.empty() || index.size() > 3 || index.find_first_not_of("0123456789") != std::string::npos) return -1;
  const int i = std::stoi(index);
  return i < static_cast<int>(master_pids_.size()) ? i : -1;
}

bool ClusterServices::start_master(std::string* error, int index) {
  ChildSpec spec;
  const bool ha = master_pids_.size() > 1;
  const std::string tag = index == 0 ? "" : std::to_string(index);
  spec.name = "master" + tag;
  spec.argv = {opt_.bin_dir + "/greyhound-master", "--job", opt_.job, "--redis", redis_url_, "--event-log",
               opt_.work_dir + "/master" + tag + "-events.jsonl", "--poll-ms", "50"};
  if (ha) spec.argv.insert(spec.argv.end(), {"--ha", "--master-id", "m" + std::to_string(index)});
  if (opt_.mitigate) spec.argv.push_back("--mitigate");
  char buf[64];
  if (opt_.s3_pause_s >= 0) {
    std::snprintf(buf, sizeof buf, "%.9g", opt_.s3_pause_s);
    spec.argv.insert(spec.argv.end(), {"--s3-pause-s", buf});
  }
  if (opt_.s4_restart_s >= 0) {
    std::snprintf(buf, sizeof buf, "%.9g", opt_.s4_restart_s);
    spec.argv.insert(spec.argv.end(), {"--s4-restart-s", buf});
  }
  spec.argv.insert(spec.argv.end(), opt_.master_args.begin(), opt_.master_args.end());
  for (const auto& [k, v] : opt_.master_env) spec.env[k] = v;
  pid_t& pid = master_pids_[static_cast<std::size_t>(index)];
  spec.stdout_path = spec.stderr_path = opt_.work_dir + "/master" + tag + ".log";
  // Another file after a restart: keep the first master's log.
  if (pid != -1) spec.stdout_path = spec.stderr_path = opt_.work_dir + "/master" + tag + ".restarted.log";
  pid = spawn(spec, error);
  return pid > 0;
}

pid_t ClusterServices::agent_pid(int node) const {
  if (node < 0 || node >= static_cast<int>(opt_.node_shm_dirs.size())) return -1;
  const std::string lock = opt_.node_shm_dirs[static_cast<std::size_t>(node)] + "/" + ring_file_name(opt_.job, "agent.lock");
  // The pid in the file counts only while its agent still holds the lock (a stale pid may be reused).
  const int fd = ::open(lock.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  pid_t pid = -1;
  if (flock(fd, LOCK_SH | LOCK_NB) != 0) {
    char buf[32] = {};
    if (pread(fd, buf, sizeof buf - 1, 0) > 0) pid = static_cast<pid_t>(std::atol(buf));
  } else {
    flock(fd, LOCK_UN);
  }
  ::close(fd);
  return pid;
}

bool ClusterServices::start_agent(int node, std::string* error) {
  if (node < 0 || node >= static_cast<int>(opt_.node_shm_dirs.size())) {
    if (error) *error = "no node " + std::to_string(node);
    return false;
  }
  ChildSpec spec;
  spec.name = "agent " + std::to_string(node);
  spec.argv = {opt_.bin_dir + "/greyhound-agent", "--job", opt_.job, "--node", std::to_string(node), "--shm-dir",
               opt_.node_shm_dirs[static_cast<std::size_t>(node)], "--redis", redis_url_, "--idle-exit-s", "2"};
  spec.argv.insert(spec.argv.end(), opt_.agent_args.begin(), opt_.agent_args.end());
  spec.env = {{"GREYHOUND_JOB_EPOCH_NS", std::to_string(opt_.epoch_ns)}};
  spec.unset_env = {"LD_PRELOAD"};
  spec.stdout_path = spec.stderr_path = opt_.work_dir + "/agent" + std::to_string(node) + ".restarted.log";
  const pid_t pid = spawn(spec, error);
  if (pid > 0) extra_agents_.push_back(pid);
  return pid > 0;
}

void ClusterServices::on_tick(double t_s) {
  for (pid_t p : master_pids_) reap(p);
  for (pid_t p : extra_agents_) reap(p);
  for (auto& c : opt_.chaos) {
    if (c.done || c.at_s > t_s) continue;
    c.done = true;
    std::string err;
    std::string which;  // "leader": the master it was
    bool ok = true;
    if (c.target == "redis" && c.action == "busy") {
      // Back-to-back scripts of 0.25 s on one connection: every other client's command waits behind one.
      if (busy_.joinable()) busy_.join();
      busy_stop_ = false;
      const double for_s = c.for_s;
      busy_ = std::thread([this, for_s] {
        RedisClient::Options o;
        o.endpoint = parse_redis_url(redis_url_);
        o.command_timeout = std::chrono::milliseconds(2000);
        RedisClient client(o);
        const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(for_s);
        while (!busy_stop_ && std::chrono::steady_clock::now() < until) {
          auto r = client.command({"EVAL", kBusyScript, "0"});
          if (!r) std::this_thread::sleep_for(std::chrono::milliseconds(50));  // Redis away: try again
        }
      });
    } else if (c.target == "redis" && opt_.external_redis.empty() && (c.action == "stop" || c.action == "cont")) {
      ok = redis_ && redis_->running() && kill(redis_->pid(), c.action == "stop" ? SIGSTOP : SIGCONT) == 0;
      if (!ok) err = "Redis is not running";
    } else if (c.target == "redis" && opt_.external_redis.empty()) {
      if (c.action == "kill") {
        if (redis_) redis_->kill_hard();
      } else if (!redis_) {
        RedisServer::Options ro;
        ro.dir = opt_.data_dir;
        ro.port = redis_port_;
        redis_ = RedisServer::start(ro, &err);
        ok = redis_ != nullptr;
      } else {
        ok = redis_->restart(&err);
      }
    } else if ((c.target == "master" || c.target == "leader") && !opt_.start_master) {
      ok = false;
      err = "the master is not started here";
    } else if (c.target == "master" || c.target == "leader") {
      // "master": the first one; "leader": the one holding the lease (--masters N), found now.
      const int i = c.target == "master" ? 0 : leader_index();
      if (i < 0) {
        ok = false;
        err = "no master leads";
      } else if (c.action == "stop" || c.action == "cont") {
        const pid_t pid = master_pids_[static_cast<std::size_t>(i)];
        ok = alive(pid) && kill(pid, c.action == "stop" ? SIGSTOP : SIGCONT) == 0;
        if (!ok) err = "the master is not running";
      } else if (c.action == "kill") {
        pid_t& pid = master_pids_[static_cast<std::size_t>(i)];
        if (alive(pid)) kill(pid, SIGKILL);
        int status = 0;
        waitpid(pid, &status, 0);
        if (c.target == "leader") which = " (m" + std::to_string(i) + ")";
      } else if (!alive(master_pids_[static_cast<std::size_t>(i)])) {
        ok = start_master(&err, i);
      }
    } else if (c.target.rfind("agent:", 0) == 0) {
      const int node = c.node;
      if (c.action == "kill") {
        const pid_t p = agent_pid(node);
        if (alive(p)) kill(p, SIGKILL);
      } else if (c.action == "stop" || c.action == "cont") {
        const pid_t p = agent_pid(node);
        ok = alive(p) && kill(p, c.action == "stop" ? SIGSTOP : SIGCONT) == 0;
        if (!ok) err = "the agent is not running";
      } else if (!alive(agent_pid(node))) {
        ok = start_agent(node, &err);
      }
    }
    char buf[160];
    std::snprintf(buf, sizeof buf, "t=%7.2fs %s %s%s", t_s, c.action.c_str(), c.target.c_str(),
                  ok ? which.c_str() : (" failed: " + err).c_str());
    chaos_log_.push_back(buf);
  }
}

void ClusterServices::stop_agents() {
  // Every agent at once: each reads what its rings still hold, writes agent_stop and flushes its events
  // within 3 s (src/agent/main.cpp), so 5 s is its grace before SIGKILL.
  std::vector<pid_t> agents = extra_agents_;
  for (std::size_t n = 0; n < opt_.node_shm_dirs.size(); ++n) agents.push_back(agent_pid(static_cast<int>(n)));
  for (pid_t p : agents) {
    if (!alive(p)) continue;
    kill(p, SIGTERM);
    kill(p, SIGCONT);  // one a chaos "stop" left stopped handles its SIGTERM now
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  for (pid_t p : agents) {
    while (alive(p) && std::chrono::steady_clock::now() < deadline) {
      reap(p);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (alive(p)) terminate(p, 0.0);
  }
  extra_agents_.clear();
}

std::optional<RestartRequest> ClusterServices::restart_request(std::string* error) {
  RedisClient c = client(redis_url_);
  store::JobStore st(c, opt_.job);
  auto r = st.restart_request();
  if (!r) {
    *error = r.error();
    return std::nullopt;
  }
  if (!*r) *error = "no restart request in the job store";
  return *r;
}

void ClusterServices::finish() {
  // The ranks are gone: the agents need not wait out their --idle-exit-s.
  stop_agents();
  // The master (ours, or the one already serving the job) catches up with the stream (its cursor reaches
  // the last entry); ours then stops.
  const bool any_master = std::any_of(master_pids_.begin(), master_pids_.end(), [](pid_t p) { return alive(p); });
  if (any_master || !opt_.start_master) {
    RedisClient c = client(redis_url_);
    store::JobStore st(c, opt_.job);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (std::chrono::steady_clock::now() < deadline) {
      auto last = st.last_event_id();
      auto state = st.master_state();
      if ((!last && last.code() == Errc::kUnavailable) || (!state && state.code() == Errc::kUnavailable)) break;
      if (last && state && *state && (*state)->cursor == *last) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  // Standbys first: the leader gives its lease up when it stops, and a standby still running would take it.
  const int leader = master_pids_.size() > 1 ? leader_index() : -1;
  for (int i = 0; i < static_cast<int>(master_pids_.size()); ++i) {
    if (i != leader) terminate(master_pids_[static_cast<std::size_t>(i)], 3.0);
  }
  if (leader >= 0) terminate(master_pids_[static_cast<std::size_t>(leader)], 3.0);
}

nlohmann::json ClusterServices::events() {
  // Read in pages (the stream holds up to keys::kEventsMaxLen entries); malformed entries are left out.
  constexpr int kPage = 1000;
  nlohmann::json out = nlohmann::json::array();
  RedisClient c = client(redis_url_);
  store::JobStore st(c, opt_.job);
  std::string after = "0-0";
  for (;;) {
    auto page = st.read_events(after, kPage);
    if (!page || page->empty()) break;
    for (const auto& entry : *page) {
      if (!entry.value) continue;
      nlohmann::json j = to_json(*entry.value);
      j["id"] = entry.id;
      out.push_back(j);
    }
    after = page->back().id;
    if (static_cast<int>(page->size()) < kPage) break;
  }
  return out;
}

void ClusterServices::stop_all() {
  busy_stop_ = true;
  if (busy_.joinable()) busy_.join();
  for (std::size_t n = 0; n < opt_.node_shm_dirs.size(); ++n) terminate(agent_pid(static_cast<int>(n)), 2.0);
  for (pid_t e : extra_agents_) terminate(e, 2.0);
  extra_agents_.clear();
  for (pid_t p : master_pids_) terminate(p, 2.0);
  master_pids_.clear();
  if (redis_ && redis_->running()) kill(redis_->pid(), SIGCONT);  // one a chaos "stop" left hung
  if (redis_) redis_->stop();
  redis_.reset();
}

}  // namespace greyhound::sim
