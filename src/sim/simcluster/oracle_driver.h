// The I/O side of greyhound-simcluster --oracle: on the launcher's tick, at each fault's onset and end (the
// fault schedule against the job clock), it asks the pure oracle (oracle.h) for the remedy and publishes it
// through the job store as the master would (plan and plan:<epoch>, growing epochs), reads the ranks'
// acknowledgements, and appends plan / plan_applied / plan_rejected / plan_timeout events (source "oracle",
// the same details as the master's) to the job's event stream, so reports and timelines read them alike.
// One plan at a time: a change that comes while a plan awaits its acknowledgements is planned after them.
// Not thread-safe; the launcher calls it from its one loop.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/redis_client.h"
#include "sim/fault_schedule.h"
#include "sim/simcluster/oracle.h"
#include "store/job_store.h"

namespace greyhound::sim {

class OracleDriver {
 public:
  struct Options {
    std::string redis_url;
    std::string job;
    FaultSchedule faults;
    double ack_timeout_s = 20;  // as the master's default --ack-timeout-s
  };
  explicit OracleDriver(Options o);

  // At job time t_s (seconds since the job's epoch).
  void on_tick(double t_s);
  // Plans published, for the summary.
  int plans() const { return plans_; }

 private:
  struct Pending {
    Plan plan;
    double deadline_s = 0;
  };
  void emit(const char* type, double t_s, const nlohmann::json& detail);
  void warn_once(const std::string& what);

  Options opt_;
  RedisClient client_;
  store::JobStore store_;
  std::vector<double> changes_;
  std::size_t next_change_ = 0;
  bool due_ = false;
  // After a plan's outcome, plan again once the job has re-published its layout (at its next iteration
  // boundary): the other remedy (a split, a placement) may be due for the same faults. < 0: nothing due.
  double recheck_at_s_ = -1;
  std::int64_t layout_after_ms_ = 0;  // ... and plan on a layout published after this (unix ms) only
  std::optional<Pending> pending_;
  std::int64_t epoch_ = 0;
  int plans_ = 0;
  std::vector<std::string> warned_;
};

}  // namespace greyhound::sim
