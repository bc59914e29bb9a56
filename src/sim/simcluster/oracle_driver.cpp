#include "sim/simcluster/oracle_driver.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "store/messages.h"
#include "store/placement_roles.h"

namespace greyhound::sim {
namespace {

RedisClient::Options client_options(const std::string& url) {
  RedisClient::Options o;
  o.endpoint = redis_endpoint_from_env(url);  // GREYHOUND_REDIS_PASSWORD_FILE too
  o.connect_timeout = std::chrono::milliseconds(300);
  o.command_timeout = std::chrono::milliseconds(500);
  o.backoff_min = std::chrono::milliseconds(0);
  o.backoff_max = std::chrono::milliseconds(200);
  return o;
}

}  // namespace

OracleDriver::OracleDriver(Options o)
    : opt_(std::move(o)),
      client_(client_options(opt_.redis_url)),
      store_(client_, opt_.job),
      changes_(fault_change_times(opt_.faults)) {}

void OracleDriver::warn_once(const std::string& what) {
  if (std::find(warned_.begin(), warned_.end(), what) != warned_.end()) return;
  warned_.push_back(what);
  std::fprintf(stderr, "greyhound-simcluster: oracle: %s\n", what.c_str());
}

void OracleDriver::emit(const char* type, double t_s, const nlohmann::json& detail) {
  Event e;
  e.type = type;
  e.t_s = t_s;
  e.t_unix_ms = unix_ms_now();
  e.source = "oracle";
  e.detail = detail;
  if (const Status s = store_.append_event(e); !s) warn_once("cannot append a " + std::string(type) + " event: " + s.error());
}

void OracleDriver::on_tick(double t_s) {
  if (recheck_at_s_ >= 0 && t_s >= recheck_at_s_) {
    recheck_at_s_ = -1;
    due_ = true;
  }
  while (next_change_ < changes_.size() && changes_[next_change_] <= t_s) {
    due_ = true;
    ++next_change_;
  }
  if (pending_) {
    auto acks = store_.plan_acks();
    if (!acks) return;  // Redis busy: the next tick asks again
    std::vector<PlanAck> read;
    for (const auto& a : *acks) {
      if (a.value) read.push_back(*a.value);
    }
    auto layout = store_.layout();
    const int world = layout && *layout ? (*layout)->world : 0;
    if (world > 0) {
      if (auto o = oracle_outcome(pending_->plan, read, world)) {
        emit(o->event_type.c_str(), t_s, to_json(o->outcome));
        pending_.reset();
        if (o->event_type == event_type::kPlanApplied) {  // a rejected plan is not tried again
          recheck_at_s_ = t_s + 1.0;
          layout_after_ms_ = unix_ms_now();
        }
      }
    }
    if (pending_ && t_s >= pending_->deadline_s) {
      PlanOutcome o;
      o.epoch = pending_->plan.epoch;
      o.strategy = pending_->plan.strategy;
      o.action = pending_->plan.action;
      o.ranks = world;
      emit(event_type::kPlanTimeout, t_s, to_json(o));
      pending_.reset();
    }
    if (pending_) return;
  }
  if (!due_) return;
  auto layout = store_.layout();
  if (!layout) {
    warn_once("cannot read the job's layout: " + layout.error());
    return;
  }
  if (!*layout) return;  // the job has not published it yet: plan once it has
  const JobLayout& l = **layout;
  if (l.t_unix_ms < layout_after_ms_) return;  // not yet the layout the last plan left: the next tick asks again
  layout_after_ms_ = 0;
  OracleJob job;
  job.shape = {l.tp, l.dp, l.pp};
  job.initial_microbatches = l.initial_microbatches.empty() ? l.microbatches : l.initial_microbatches;
  job.capabilities = l.capabilities;
  job.gpus_per_node = l.gpus_per_node;
  job.microbatch_multiple = l.microbatch_multiple;
  due_ = false;
  auto plan = oracle_plan(job, opt_.faults, t_s, l.microbatches);
  if (!plan) {
    warn_once("no plan: " + plan.error());
    return;
  }
  std::optional<Plan> p = *plan;
  if (!p) p = oracle_link_plan(job, opt_.faults, t_s, l.microbatches, store::placement_in_force(l));
  if (!p) return;
  p->epoch = epoch_ + 1;
  p->t_unix_ms = unix_ms_now();
  if (const auto s = store_.publish_plan(*p); !s || !*s) {
    warn_once(s ? "plan epoch " + std::to_string(p->epoch) + " is taken" : "cannot publish a plan: " + s.error());
    if (s) epoch_ = p->epoch;  // the next plan after it
    due_ = true;  // again on the next tick
    return;
  }
  epoch_ = p->epoch;
  ++plans_;
  emit(event_type::kPlan, t_s, to_json(*p));
  pending_ = Pending{*p, t_s + opt_.ack_timeout_s};
}

}  // namespace greyhound::sim
