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
//    oldest is dropped);
//  - poll_plan() hands out the next outcome the I/O thread judged (a plan, a plan turned down, a stale one),
//    or kNone; the I/O thread's latest failed Redis attempt (kUnavailable while Redis is away, kRefused for a
//    write Redis refused) is reported once, as a poll of the synchronous client reports it, only without the
//    wait. A plan judged against an older layout than the latest published is checked again, on the training
//    thread (the pure check_plan), against the latest.
// Writes Redis could not take (kUnavailable) wait and are retried, in order; a write Redis refuses (an error
// reply: a read-only replica, out of memory, a key of the wrong type) is reported and dropped, and blocks
// nothing. The plan is read only once the latest layout is written (or dropped), every poll_interval while no
// outcome waits to be taken; after a plan is taken the I/O thread waits (up to kLayoutWaitS) for the job to
// publish the layout it now runs, so that the next plan is judged against the configuration in force.
// request_restart() stays synchronous (a job that restarts stops anyway): it first writes what is queued;
// restart_request() (a launch reads its placement once) is one synchronous read.
// close (the destructor) writes what is queued, reaching for Redis at once whatever the reconnect backoff
// says and giving up at the first write Redis does not take, and joins the thread: at most one connect and
// one command timeout per write. A process that ends without closing its client (killed) loses what waits.
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

 private:
  // What the I/O thread judged, with the layout it judged it against (its generation).
  struct Outcome {
    PlanPoll poll;
    std::uint64_t generation = 0;
  };
  void run();
  // The I/O thread's writes: false when one waits for Redis (it stays queued, with what came after it).
  // Needs client_mu_.
  bool write_queued();
  // Past kMaxQueuedAcks waiting, the oldest go. Needs mu_.
  void drop_oldest_acks();

  const std::string job_;
  const Options options_;
  std::unique_ptr<JobClient> client_;  // used under client_mu_ only (the I/O thread, and the synchronous calls)
  std::mutex client_mu_;

  // Training thread only.
  std::optional<JobLayout> layout_;  // the latest published, as the client takes it
  std::uint64_t generation_ = 0;     // of layout_: one per publish_layout()
  std::optional<PlanPoll> last_good_;

  // Shared, under mu_ (held only to move data).
  mutable std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::optional<JobLayout> layout_queued_;
  std::uint64_t generation_queued_ = 0;  // of layout_queued_ (0: none was ever published: nothing is read)
  std::uint64_t generation_judged_ = 0;  // I/O thread: of the layout the client judges against
  std::deque<PlanAck> acks_queued_;
  std::deque<Outcome> outcomes_;
  std::optional<Error> io_failure_;  // the I/O thread's latest failed attempt, until reported
  bool await_layout_ = false;        // a plan was taken: the next read waits for the layout it brings
  double await_layout_since_s_ = 0;  // steady seconds

  std::thread thread_;
};

}  // namespace greyhound::job
