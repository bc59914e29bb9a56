// The job client with its Redis I/O off the training thread (greyhound_job_open_v2 with
// GREYHOUND_JOB_OPEN_BACKGROUND): the training job never waits on Redis, whatever Redis does.
//
// One I/O thread owns a JobClient (job_client.h) and does everything that reaches Redis: it writes the latest
// layout the job published (only the latest: a newer one replaces one not yet written), then the queued
// acknowledgements in order, then reads and judges the plan (JobClient::poll_plan: the check against the
// layout, the epochs answered, the plan lease and the job's own revert). The training thread's calls only
// check their arguments and move data through a mutex that the I/O thread holds to move data, never during
// I/O:
//  - publish_layout() checks the layout (job/plan_check.h) and queues it: kInvalid for one that is not one;
//  - acknowledge() checks the acknowledgement and queues it (at most kMaxQueuedAcks waiting; past that the
//    oldest is dropped and counted);
//  - poll_plan() hands out the next outcome the I/O thread judged (a plan, a plan turned down, a stale one),
//    or kNone; the failure of the I/O thread's latest Redis attempt (kUnavailable while Redis is away) is
//    reported once per attempt, as a poll of the synchronous client reports it, only without the wait.
// The I/O thread reads the plan every poll_interval while no outcome waits to be taken, and after a plan is
// taken it waits (up to kLayoutWaitS) for the job to publish the layout it now runs, so that the next plan is
// judged against the configuration in force, as the synchronous client's caller orders it.
// request_restart() and restart_request() stay synchronous (a job that restarts stops anyway; a launch reads
// its placement once): they first write what is queued, then do their one call.
// close (the destructor) writes what is queued, giving up at the first write Redis does not take, and joins
// the thread: at most one connect and one command timeout per write.
// Not thread-safe, as JobClient: one training thread calls it.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "job/job_client.h"

namespace greyhound::job {

class BackgroundJobClient {
 public:
  static constexpr std::size_t kMaxQueuedAcks = 4096;
  static constexpr double kLayoutWaitS = 2.0;
  struct Options {
    double poll_interval_s = 0.1;  // how often the plan is read while nothing waits to be taken
  };

  BackgroundJobClient(std::unique_ptr<JobClient> client, Options options);
  ~BackgroundJobClient();
  BackgroundJobClient(const BackgroundJobClient&) = delete;
  BackgroundJobClient& operator=(const BackgroundJobClient&) = delete;

  const std::string& job() const { return job_; }

  // Checked here, written by the I/O thread: kInvalid for a layout that is not one, else ok.
  Status publish_layout(const JobLayout& layout);
  // kInvalid before any layout was published. Never waits on Redis.
  Result<PlanPoll> poll_plan();
  // The last plan taken through poll_plan() that passed the check (nullopt before the first).
  const std::optional<PlanPoll>& last_good() const { return last_good_; }
  // Checked here (as JobClient::acknowledge checks it), written by the I/O thread.
  Status acknowledge(const PlanAck& ack);
  // Synchronous: what is queued is written first.
  Status request_restart(const RestartRequest& request);
  Result<std::optional<RestartRequest>> restart_request();

  // Acknowledgements dropped because kMaxQueuedAcks waited (Redis away for long).
  std::uint64_t acks_dropped() const;
  // Writes waiting (layout and acknowledgements): tests.
  std::size_t queued_writes() const;

 private:
  void run();
  // The I/O thread's writes: false when Redis did not take one (it stays queued). Needs client_mu_.
  bool write_queued();

  const std::string job_;
  const Options options_;
  std::unique_ptr<JobClient> client_;  // used under client_mu_ only (the I/O thread, and the synchronous calls)
  std::mutex client_mu_;

  // Training thread only.
  bool layout_published_ = false;
  std::optional<PlanPoll> last_good_;

  // Shared, under mu_ (held only to move data).
  mutable std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::optional<JobLayout> layout_queued_;
  bool layout_given_ = false;  // a layout was published: plans can be judged (none is read before)
  std::deque<PlanAck> acks_queued_;
  std::uint64_t acks_dropped_ = 0;
  std::deque<PlanPoll> outcomes_;
  std::optional<Error> io_failure_;  // the I/O thread's latest failed attempt, until reported
  bool await_layout_ = false;        // a plan was taken: the next read waits for the layout it brings
  double await_layout_since_s_ = 0;  // steady seconds

  std::thread thread_;
};

}  // namespace greyhound::job
