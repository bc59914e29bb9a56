// The greyhound side of a simulated cluster: a private redis-server, the master, and (through
// greyhound-run) one agent per virtual node; plus the chaos schedule that kills and restarts them while
// the job runs, for fault-tolerance tests (the chaos schedule: sim/chaos_schedule.h).
#pragma once

#include <sys/types.h>

#include <map>
#include <memory>
#include <atomic>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/chaos_schedule.h"
#include "sim/redis_server.h"
#include "store/messages.h"

namespace greyhound::sim {

class ClusterServices {
 public:
  struct Options {
    std::string bin_dir;       // where greyhound-master and greyhound-agent are
    std::string work_dir;      // logs
    std::string data_dir;      // Redis data (removed by the caller)
    std::string job;
    std::vector<std::string> node_shm_dirs;  // per virtual node
    std::string external_redis;  // non-empty: use this Redis, start none
    std::uint64_t epoch_ns = 0;
    std::vector<ChaosAction> chaos;
    bool mitigate = false;  // the master plans and publishes mitigation plans
    bool start_master = true;  // false: a master already serves the job on this Redis (chaos cannot touch it)
    int masters = 1;           // > 1: that many masters with --ha (m0, m1, ...), one leading, the others standing by
    // The remedies' overheads for the master (--s3-pause-s, --s4-restart-s), in simulated seconds;
    // < 0: the master's defaults.
    double s3_pause_s = -1;
    double s4_restart_s = -1;
    std::vector<std::string> master_args;  // more flags for the master
    std::map<std::string, std::string> master_env;  // more environment for the master
    std::vector<std::string> agent_args;   // more flags for the agents it restarts (chaos)
  };

  explicit ClusterServices(Options options);
  ~ClusterServices();

  // Starts Redis (unless absent at first by the chaos schedule) and the master (unless start_master is
  // false). False with *error.
  bool start(std::string* error);
  const std::string& redis_url() const { return redis_url_; }

  // Runs the chaos actions that are due at job time t_s.
  void on_tick(double t_s);
  // Once the ranks have ended: stops every node's agent (SIGTERM: it reads what its rings hold, reports
  // agent_stop and flushes its events), at once rather than after its --idle-exit-s (which stays, for an
  // agent nobody stops); SIGKILL for one still running 5 s later.
  void stop_agents();
  // The job's restart request (S4, key "restart"); nullopt with *error when none could be read.
  std::optional<RestartRequest> restart_request(std::string* error);
  // After the ranks are done: stops the agents, lets the master catch up, then stops it.
  void finish();
  // Every event of the job's stream, in order, each with its stream "id".
  nlohmann::json events();
  // Stops everything that still runs.
  void stop_all();
  // Lines describing the chaos actions taken ("t=..s kill redis").
  const std::vector<std::string>& chaos_log() const { return chaos_log_; }

 private:
  bool start_master(std::string* error, int index = 0);
  // The started master that holds the lease now (--ha), or -1.
  int leader_index();
  pid_t agent_pid(int node) const;
  bool start_agent(int node, std::string* error);

  Options opt_;
  std::unique_ptr<RedisServer> redis_;
  std::string redis_url_;
  int redis_port_ = 0;
  std::vector<pid_t> master_pids_;  // by index (m0, m1, ...); -1: not running
  std::vector<pid_t> extra_agents_;
  std::vector<std::string> chaos_log_;
  // A chaos "busy" on Redis: the thread running its scripts until the time is up or stop_all().
  std::thread busy_;
  std::atomic<bool> busy_stop_{false};
};

}  // namespace greyhound::sim
