#include "job/job_client.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <stdexcept>

#include "common/clock.h"
#include "greyhound/ring.h"
#include "greyhound/vocabulary.h"

namespace greyhound::job {
namespace {

// How often a job running another configuration than its original looks at the plan lease: once a second,
// and at least twice within the grace below (a lease of a few seconds).
constexpr double kLeaseLookS = 1.0;
// How long the lease must stay lapsed, over looks that each find it absent, before the job reverts: a
// quarter of the lease's length (how often its master renews it), so that a key missing for a moment while a
// master serves the job (a Redis restarted without it, a new master's first tick) is no lapse; this when the
// lease's value did not say its length.
constexpr double kDefaultLapseGraceS = 5.0;
double lapse_grace_s(int lease_ms) { return lease_ms > 0 ? lease_ms / 4000.0 : kDefaultLapseGraceS; }

// How many turned-down epochs newer than the last plan taken a client remembers (answered once each); past
// that the oldest is forgotten, and answered again if its plan is still the latest.
constexpr std::size_t kMaxAnswered = 64;

// A plan poll runs before a training step: Redis may cost it this much at most.
RedisClient::Options client_options(const RedisEndpoint& endpoint) {
  RedisClient::Options o;
  o.endpoint = endpoint;
  o.connect_timeout = std::chrono::milliseconds(200);
  o.command_timeout = std::chrono::milliseconds(300);
  return o;
}

}  // namespace

Result<std::unique_ptr<JobClient>> JobClient::open(const std::string& job, const std::string& redis_url) {
  using R = Result<std::unique_ptr<JobClient>>;
  if (auto why = job_name_error(job); !why.empty()) return R::failure(why);
  RedisEndpoint endpoint;
  try {
    endpoint = redis_endpoint_from_env(redis_url);
  } catch (const std::exception& e) {
    return R::failure(std::string("redis: ") + e.what());
  }
  return std::make_unique<JobClient>(job, endpoint);
}

JobClient::JobClient(const std::string& job, const RedisEndpoint& endpoint)
    : job_(job), redis_(client_options(endpoint)), store_(redis_, job_) {}

Status JobClient::publish_layout(const JobLayout& layout) {
  if (auto why = check_layout(layout); !why.empty()) return Status::failure("layout: " + why);
  JobLayout l = layout;
  if (l.initial_microbatches.empty()) l.initial_microbatches = l.microbatches;
  if (l.t_unix_ms == 0) l.t_unix_ms = unix_ms_now();
  layout_ = l;  // the reference for plans from now on, whether or not Redis takes it
  return store_.write_layout(l);
}

Result<PlanPoll> JobClient::poll_plan() {
  if (!layout_) return Result<PlanPoll>::failure("no layout published yet: plans cannot be checked");
  if (!seeded_) {
    auto acks = store_.plan_acks();
    if (!acks && acks.code() == Errc::kUnavailable) return acks.status();
    if (acks) {
      for (const auto& a : *acks) {
        if (!a.value) continue;
        if (a.value->status == AckStatus::kApplied) {
          last_epoch_ = std::max(last_epoch_, a.value->epoch);
        }
        newest_seen_ = std::max(newest_seen_, a.value->epoch);
      }
      for (const auto& a : *acks) {  // turned down by the job's ranks: answered, not taken
        if (a.value && a.value->status != AckStatus::kApplied && a.value->epoch > last_epoch_) answered(a.value->epoch);
      }
    }
    seeded_ = true;
  }
  if (Status s = revert_on_lapse(); !s) {
    if (s.code() == Errc::kUnavailable) return s.status();
    // Refused otherwise (a read-only replica, Redis out of memory): said once per reason, or the remedy
    // would stay in force with nothing to tell why; the plan is read as usual from the next poll on.
    if (s.error() != last_revert_error_) {
      last_revert_error_ = s.error();
      return Result<PlanPoll>::failure("the plan lease lapsed but the revert could not be written: " + s.error(),
                                       s.code());
    }
  }
  std::int64_t named_epoch = 0;
  auto read = store_.latest_plan(&named_epoch);
  PlanPoll out;
  if (!read) {
    if (read.code() != Errc::kInvalid) return read.status();
    // A malformed plan key: reported once (until it changes), never applied. One that names an epoch newer
    // than any seen is rejected under that epoch, so that the job can acknowledge it as such.
    // Keyed on the epoch it names too: a second malformed plan with the same defect is a new plan.
    const std::string seen = std::to_string(named_epoch) + ":" + read.error();
    if (seen == last_malformed_) return out;
    last_malformed_ = seen;
    out.kind = PlanPoll::Kind::kRejected;
    out.plan.epoch = 0;
    out.reason = read.error();
    if (named_epoch > last_epoch_ && named_epoch <= kMaxContinuedEpoch && !answered(named_epoch)) {
      out.plan.epoch = named_epoch;
      newest_seen_ = std::max(newest_seen_, named_epoch);
    }
    return out;
  }
  last_malformed_.clear();
  if (!*read) return out;
  out.plan = std::move(**read);
  const auto already = std::find(answered_.begin(), answered_.end(), out.plan.epoch);
  if (already != answered_.end()) return PlanPoll{};  // turned down already (and acknowledged so)
  if (out.plan.epoch > kMaxContinuedEpoch) {
    // No master publishes that many plans: planted or corrupt. Turned down, and counted nowhere (the job's own
    // revert, and the master's next plan, stay in the range readers take).
    out.kind = PlanPoll::Kind::kRejected;
    out.reason = "epoch " + std::to_string(out.plan.epoch) + " is beyond any a master publishes (2^52)";
    answered(out.plan.epoch);
    return out;
  }
  PlanCheck check = check_plan(*layout_, out.plan, last_epoch_);
  out.reason = check.reason;
  switch (check.verdict) {
    case Verdict::kSeen:
      return PlanPoll{};
    case Verdict::kStale:
      if (out.plan.epoch == last_stale_) return PlanPoll{};
      last_stale_ = out.plan.epoch;
      out.kind = PlanPoll::Kind::kStale;
      return out;
    case Verdict::kUnsupported:
    case Verdict::kRejected:
      // Turned down: answered once, and nothing advances (a later plan at a lower epoch is still new).
      out.kind = check.verdict == Verdict::kRejected ? PlanPoll::Kind::kRejected : PlanPoll::Kind::kUnsupported;
      answered(out.plan.epoch);
      newest_seen_ = std::max(newest_seen_, out.plan.epoch);
      return out;
    case Verdict::kAccept:
      out.kind = PlanPoll::Kind::kPlan;
      out.placement = std::move(check.placement);
      last_good_ = out;
      note_lease_at_plan();
      break;
  }
  last_epoch_ = out.plan.epoch;
  newest_seen_ = std::max(newest_seen_, last_epoch_);
  answered_.erase(std::remove_if(answered_.begin(), answered_.end(), [&](std::int64_t e) { return e <= last_epoch_; }),
                  answered_.end());
  return out;
}

bool JobClient::answered(std::int64_t epoch) {
  if (std::find(answered_.begin(), answered_.end(), epoch) != answered_.end()) return true;
  if (answered_.size() >= kMaxAnswered) answered_.erase(answered_.begin());
  answered_.push_back(epoch);
  return false;
}

void JobClient::note_lease_at_plan() {
  // Whoever published the plan just taken: a master that holds the lease (the job reverts the plan if every
  // master goes), or a publisher that holds none (an older master, a test harness), whose plans are not the
  // job's to undo. Looked at now rather than once the job runs the plan (the framework republishes its
  // layout a few iterations later), so that a master that dies right after publishing is seen holding it.
  int lease_ms = 0;
  auto held = store_.plan_lease_held(&lease_ms);
  if (!held) return;  // Redis away: the looks while the job runs the plan decide
  lease_seen_ = *held;
  if (*held) lapse_grace_s_ = lapse_grace_s(lease_ms);
  lapsed_since_s_ = -1;
}

Status JobClient::revert_on_lapse() {
  if (!layout_ || !departs_from_original(*layout_)) {
    lapsed_since_s_ = -1;
    return ok_status();
  }
  const double now_s = steady_s();
  if (now_s < next_lease_look_s_) return ok_status();
  int lease_ms = 0;
  auto held = store_.plan_lease_held(&lease_ms);
  if (held && *held) lapse_grace_s_ = lapse_grace_s(lease_ms);
  next_lease_look_s_ = now_s + std::min(kLeaseLookS, lapse_grace_s_ / 2);  // with the grace just read
  if (!held) return held.status();
  if (*held) {
    lease_seen_ = true;
    lapsed_since_s_ = -1;
    return ok_status();
  }
  if (!lease_seen_) return ok_status();  // no master ever served this run of the job: its plans are not ours to undo
  if (lapsed_since_s_ < 0) lapsed_since_s_ = now_s;
  if (now_s - lapsed_since_s_ < lapse_grace_s_) return ok_status();  // lapsed at every look for the grace first
  Plan p = original_configuration_plan(*layout_);
  if (newest_seen_ >= kMaxCount) return Status::failure("no epoch is left after " + std::to_string(newest_seen_));
  p.epoch = std::max(last_epoch_, newest_seen_) + 1;
  p.reason = "the plan lease lapsed (no master serves the job): back to the job's original configuration";
  p.t_unix_ms = unix_ms_now();
  auto written = store_.publish_plan_unleased(p);
  if (!written) return written.status();
  if (*written) {
    lease_seen_ = false;  // the next remedy is a master's again, looked after by its lease
    lapsed_since_s_ = -1;
    last_revert_error_.clear();
  }
  return ok_status();
}

std::string JobClient::ack_error(const PlanAck& ack) {
  if (ack.rank < 0 || ack.rank > kMaxRank) return "ack: rank " + std::to_string(ack.rank) + " out of range";
  if (ack.epoch < 1 || ack.epoch > kMaxCount) return "ack: epoch must be within 1..2^53";
  if (ack.iteration < -1 || ack.iteration > kMaxCount) return "ack: iteration must be within 0..2^53 (or -1: unknown)";
  if (!(ack.apply_s >= 0) || !std::isfinite(ack.apply_s)) return "ack: apply_s must be a finite number >= 0";
  if (auto why = text_error(ack.detail); !why.empty()) return "ack: detail " + why;
  return {};
}

Status JobClient::acknowledge(const PlanAck& ack) {
  if (auto why = ack_error(ack); !why.empty()) return Status::failure(why);
  PlanAck a = ack;
  if (a.t_unix_ms == 0) a.t_unix_ms = unix_ms_now();
  return store_.write_ack(a);
}

Status JobClient::request_restart(const RestartRequest& request) {
  if (request.rank < 0 || request.rank > kMaxRank) return Status::failure("restart: rank out of range");
  if (request.epoch < 0 || request.epoch > kMaxCount) return Status::failure("restart: epoch must be within 0..2^53");
  if (auto why = text_error(request.reason); !why.empty()) return Status::failure("restart: reason " + why);
  for (int x : request.exclude_nodes) {
    if (x < 0) return Status::failure("restart: exclude_nodes entries must be >= 0");
  }
  for (int x : request.exclude_ranks) {
    if (x < 0) return Status::failure("restart: exclude_ranks entries must be >= 0");
  }
  if (!request.placement.empty()) {
    if (!layout_) return Status::failure("restart: a placement needs a layout published first (to check it against)");
    if (!request.exclude_nodes.empty() || !request.exclude_ranks.empty()) {
      return Status::failure("restart: a placement keeps every node; exclusions are an S4 restart's");
    }
    if (auto why = placement_error(*layout_, request.placement); !why.empty()) return Status::failure("restart: " + why);
  }
  RestartRequest r = request;
  if (r.t_unix_ms == 0) r.t_unix_ms = unix_ms_now();
  return store_.request_restart(r);
}

Result<std::optional<RestartRequest>> JobClient::restart_request() { return store_.restart_request(); }

}  // namespace greyhound::job
