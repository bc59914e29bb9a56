// The job client: the framework's side of the plan protocol (docs/redis-keys.md: Job layout, Plan,
// Acknowledgement), in C++. The C API (greyhound/job.h) wraps exactly this class, so minitrain (C++) and the
// Megatron plugin (Python, ctypes) run the same code.
//
// - publish_layout(): the layout and capabilities; it also becomes the reference every plan is checked
//   against (job/plan_check.h), even when Redis is away (the write is then retried by calling it again).
// - poll_plan(): reads the latest plan once and judges it: a new good plan is returned and kept as the last
//   good one; a bad one (wrong shape, not advertised, stale, malformed JSON) is reported once, with its
//   reason, and never replaces the last good one. A plan turned down advances nothing: what is new is decided
//   by the last plan the job took (older epochs are stale) and the epochs it answered since (each answered
//   once), so that a plan planted at a high epoch cannot make every later plan of the master's stale. The
//   first poll starts after the newest epoch the job's ranks acknowledged as applied, and leaves alone the
//   epochs they turned down, so a restarted job does not apply (or, for S4, ask for) a plan again.
// - The plan lease (docs/redis-keys.md, "Plan lease"): while the job runs another configuration than the one
//   it started with, poll_plan() looks (at most once a second) whether a master still holds the job's plan
//   lease. Once it has seen the lease held (also when it took the plan: a plan published by a master that
//   holds no lease is not the job's to undo) and then finds it lapsed at every look for a quarter of the
//   lease's length more (every master gone for the lease's length and one renewal more), it publishes the
//   revert to the original configuration itself, at the epoch after the newest it saw and only while no
//   lease is held and that epoch is free, and returns it as a new plan: every rank applies it the way it
//   applies a master's. A master that comes back continues after that epoch.
// - Texts it writes (an ack's detail, a restart's reason) are at most kMaxTextBytes of valid UTF-8, what
//   the master's readers accept; longer or invalid ones are refused here (kInvalid), not lost there.
// - acknowledge(), request_restart(): one write each.
// All Redis access goes through store::JobStore, with short timeouts (connect 200 ms, command 300 ms): a
// missing Redis costs a training step at most that, and is reported as Errc::kUnavailable.
// Not thread-safe: one client per thread.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/redis_client.h"
#include "greyhound/result.h"
#include "job/plan_check.h"
#include "store/job_store.h"
#include "store/messages.h"

namespace greyhound::job {

// What one poll found.
struct PlanPoll {
  enum class Kind {
    kNone,         // no plan, or nothing new since the last poll
    kPlan,         // a new plan that passed the check: apply it
    kRejected,     // a new plan that does not fit this job, or a malformed plan key (epoch 0 then)
    kUnsupported,  // a new plan of a strategy this job did not advertise
    kStale,        // a plan older than the last one seen (reported once per epoch)
  };
  Kind kind = Kind::kNone;
  Plan plan;                             // kPlan; the others: what could be read (epoch 0 when nothing)
  std::vector<PlacementEntry> placement; // kPlan: the decoded placement (empty: unchanged)
  std::string reason;                    // why it was not accepted
};

class JobClient {
 public:
  // `redis_url` empty: GREYHOUND_REDIS. Connects lazily: a missing Redis is not an error here. kInvalid for a
  // job name Redis keys cannot carry (job_name_error: refused, not rewritten), a bad URL or password file.
  static Result<std::unique_ptr<JobClient>> open(const std::string& job, const std::string& redis_url);
  // The same over an endpoint (tests; `job` a valid name).
  JobClient(const std::string& job, const RedisEndpoint& endpoint);

  const std::string& job() const { return job_; }

  Status publish_layout(const JobLayout& layout);
  // kInvalid when no layout was published yet (there is nothing to check a plan against).
  Result<PlanPoll> poll_plan();
  // The last plan that passed the check (nullopt before the first).
  const std::optional<PlanPoll>& last_good() const { return last_good_; }
  // The newest epoch taken (a plan the job applies); what is older is stale.
  std::int64_t last_epoch() const { return last_epoch_; }

  Status acknowledge(const PlanAck& ack);
  // Why acknowledge() refuses `ack` without writing it ("" when it takes it): what the master's readers refuse.
  static std::string ack_error(const PlanAck& ack);
  // An S4 restart, or an S3 one (a placement, checked against the layout published last; no exclusions).
  Status request_restart(const RestartRequest& request);
  // The job's latest restart request (nullopt: none): its placement is what a restarted job launches with.
  Result<std::optional<RestartRequest>> restart_request();
  // The next call reaches for Redis at once, whatever the reconnect backoff says (a last write before close).
  void retry_now() { redis_.retry_now(); }

 private:
  // The plan lease above: publishes the revert when due. kUnavailable when Redis is away.
  Status revert_on_lapse();
  // A plan was just taken: whether its publisher holds the lease decides whether the job may revert it.
  void note_lease_at_plan();

  std::string job_;
  RedisClient redis_;
  store::JobStore store_;
  std::optional<JobLayout> layout_;
  std::optional<PlanPoll> last_good_;
  // Whether `epoch` was answered already (turned down since the last plan taken); notes it when not.
  bool answered(std::int64_t epoch);

  std::int64_t last_epoch_ = 0;       // newest epoch taken (applied)
  std::int64_t newest_seen_ = 0;      // newest epoch seen, taken or not (the job's own revert goes after it)
  std::vector<std::int64_t> answered_;  // epochs newer than last_epoch_ turned down (at most kMaxAnswered)
  bool seeded_ = false;               // last_epoch_ started from the job's acknowledgements in the store
  std::int64_t last_stale_ = 0;       // the stale epoch reported last (reported once)
  std::string last_malformed_;        // the malformed plan reported last, "<epoch it names>:<error>" (reported once)
  bool lease_seen_ = false;           // a master held the plan lease at some look since the last plan taken
  double next_lease_look_s_ = 0;      // steady seconds: the next look at the lease
  double lapsed_since_s_ = -1;        // steady seconds: the first of the looks in a row that found it lapsed
  double lapse_grace_s_ = 5.0;        // how long it stays lapsed before the revert (a quarter of its length)
  std::string last_revert_error_;     // why the last revert could not be written (reported once)
};

}  // namespace greyhound::job
