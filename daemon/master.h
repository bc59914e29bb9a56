// greyhound-master: one process for every job of the cluster (started beside the scheduler). Serves the
// jobs registered in gh:v1:jobs whose names match --jobs PATTERN (fnmatch), picked up once one of their
// agents is alive (a registered job without one is looked at again every 30 s) and retired, and removed
// from gh:v1:jobs, when every agent has been gone for retire_after_s; or exactly one job
// (--job J), never retired. Each job has its own JobDriver and Controller (job_driver.h, controller.h) over
// one shared Redis client: per-job state stays independent, and a malformed value in one job's keys is
// that job's warning, never another's stall.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "common/redis_client.h"
#include "daemon/controller.h"
#include "daemon/http_server.h"
#include "daemon/job_driver.h"

namespace greyhound::master {

struct MasterConfig {
  std::string job;           // one job (when jobs_pattern is empty)
  std::string jobs_pattern;  // non-empty: every registered job whose name matches (fnmatch)
  RedisEndpoint redis;
  std::string event_log;     // empty: none
  int batch = 256;           // events per read
  double discover_every_s = 2.0;   // look for new jobs (and gone agents) this often
  double retire_after_s = 300.0;   // a job whose agents have all been gone this long is retired
  // --ha: several masters serving the same jobs (the same --job or --jobs), one leading through a lease
  // (store::JobStore::acquire_lease) renewed every lease_ms / 3, its writes fenced by the lease's epoch; the
  // others stand by and take over once it lapses (docs/operations.md, "High availability").
  bool ha = false;
  std::string id;       // this master's name in the lease (default host:pid)
  int lease_ms = 3000;
  ControllerConfig controller;
};

class Master {
 public:
  explicit Master(MasterConfig config);

  // One poll of every job; returns the number of events consumed.
  int tick();
  // True while ranks of a served job stand still in a pause (Controller::pause_standing).
  bool pause_standing() const;

  std::size_t jobs() const { return drivers_.size(); }
  // A clean stop: gives the lease up (--ha) so that a standby leads at once.
  void stop();
  // The HTTP endpoint's answers (--http): /metrics (Prometheus text, every job served), /status?job=J (what
  // `greyhoundctl status --json` prints; the job may be left out when the master serves one), /healthz.
  // Answered from memory, never reading Redis: the jobs' statuses are snapshots tick() reads while they are
  // wanted (a request in the last 5 minutes), at most once a second and at most a tenth of the loop's time;
  // one older than twice that spacing (3 s at least: Redis away, or not wanted for a while) is not served:
  // /status is then 503 ("try again in a second") and /metrics leaves the status's samples out.
  HttpResponse http(const HttpRequest& request);
  const JobDriver* driver(const std::string& job) const;

 private:
  void discover(double now_s);
  std::unique_ptr<JobDriver> make_driver(const std::string& job);
  // --ha: renews or takes the lease when it is time; false while another master leads.
  bool hold_lease(double now_s);
  void stand_by(const std::string& why);
  // The status snapshots, when wanted and due (above).
  void read_statuses(double now_s);

  MasterConfig cfg_;
  RedisClient redis_;
  EventLog log_;
  std::string run_tag_;
  struct Served {
    std::unique_ptr<JobDriver> driver;
    double last_alive_s = 0;
  };
  std::map<std::string, Served> drivers_;
  std::map<std::string, double> dormant_;  // registered jobs without a live agent: when to look again
  double next_discovery_s_ = 0;
  bool redis_down_logged_ = false;
  std::string lease_scope_;  // --ha: "job:<job>" or "jobs:<pattern>", the masters that share a lease
  std::string holder_;       // --ha: "<id> <nonce>"
  std::int64_t lease_epoch_ = 0;  // --ha: the epoch of the lease this master holds; 0 while it stands by
  // --ha: leader values (the masters' lease, a job's leader key) found that no master wrote, and taken over.
  std::uint64_t lease_values_taken_over_ = 0;
  std::uint64_t leader_values_taken_over_done_ = 0;  // of drivers since gone (their stores counted the rest)
  std::string fenced_;  // --ha: why this master's writes are fenced while it holds the lease ("" when they are not)
  double next_lease_s_ = 0;
  std::string metrics_cache_;  // the latest /metrics answer, and when it was made
  double metrics_cache_at_s_ = 0;
  // Each served job's status (store::job_status; null when Redis could not say) as the loop read it last,
  // at statuses_at_s_; nullptr when it is too old to serve.
  const nlohmann::json* fresh_status(const std::string& job, double now_s) const;
  std::map<std::string, nlohmann::json> statuses_;
  double statuses_at_s_ = -1;
  double statuses_wanted_until_s_ = -1;  // steady seconds: a request wanted them until then
  double next_statuses_s_ = 0;
  double statuses_read_s_ = 0;  // what the last reading cost the loop
};

}  // namespace greyhound::master
