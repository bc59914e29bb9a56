// The C API of libgreyhound_job (greyhound/job.h) over job::JobClient: argument checks, copies in and out,
// and the one place where C++ exceptions stop (every entry point catches everything).
#include "greyhound/job.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "greyhound/config.h"
#include "greyhound/vocabulary.h"
#include "job/background_client.h"
#include "job/job_client.h"

static_assert(std::is_same_v<int32_t, int>, "the C API hands out std::vector<int> storage as int32_t arrays");

struct greyhound_job_client {
  // What a greyhound_job_plan points into: one slot per kind of call, so a poll does not invalidate the
  // plan a last_plan call handed out, and the other way round.
  struct PlanSlot {
    greyhound::Plan plan;
    std::vector<greyhound_job_placement> placement;
    std::string verdict;
  };
  // One of the two: the synchronous client (greyhound_job_open_v1), or the one whose Redis I/O runs on its
  // own thread (greyhound_job_open_v2 with GREYHOUND_JOB_OPEN_BACKGROUND).
  std::unique_ptr<greyhound::job::JobClient> impl;
  std::unique_ptr<greyhound::job::BackgroundJobClient> bg;
  const std::string& job() const { return bg ? bg->job() : impl->job(); }
  greyhound::Status publish_layout(const greyhound::JobLayout& l) {
    return bg ? bg->publish_layout(l) : impl->publish_layout(l);
  }
  greyhound::Result<greyhound::job::PlanPoll> poll_plan() { return bg ? bg->poll_plan() : impl->poll_plan(); }
  const std::optional<greyhound::job::PlanPoll>& last_good() const {
    return bg ? bg->last_good() : impl->last_good();
  }
  greyhound::Status acknowledge(const greyhound::PlanAck& a) { return bg ? bg->acknowledge(a) : impl->acknowledge(a); }
  greyhound::Status request_restart(const greyhound::RestartRequest& r) {
    return bg ? bg->request_restart(r) : impl->request_restart(r);
  }
  greyhound::Result<std::optional<greyhound::RestartRequest>> restart_request() {
    return bg ? bg->restart_request() : impl->restart_request();
  }
  std::string last_error;
  double s3_estimate_s = 0, s4_estimate_s = 0;  // greyhound_job_set_cost_estimate_v1, sent with every layout
  int32_t microbatch_multiple = 0;  // greyhound_job_set_microbatch_multiple_v1, sent with every layout
  std::vector<greyhound::PlacementEntry> initial_placement;  // greyhound_job_set_initial_placement_v1, likewise
  PlanSlot polled, last;
};

namespace {

using greyhound::Errc;
using greyhound::job::PlanPoll;

int code_of(Errc e) {
  switch (e) {
    case Errc::kInvalid: return GREYHOUND_JOB_ERR_INVALID;
    case Errc::kUnavailable: return GREYHOUND_JOB_ERR_UNAVAILABLE;
    case Errc::kRefused: return GREYHOUND_JOB_ERR_REFUSED;
  }
  return GREYHOUND_JOB_ERR_INTERNAL;
}

int fail(greyhound_job_client* c, int code, std::string why) {
  if (c != nullptr) c->last_error = std::move(why);
  return code;
}

template <class T>
int done(greyhound_job_client* c, const greyhound::Result<T>& r) {
  if (r.ok()) {
    c->last_error.clear();
    return GREYHOUND_JOB_OK;
  }
  return fail(c, code_of(r.code()), r.error());
}

// Runs `body` with every exception turned into ERR_INTERNAL (bad_alloc, or a bug): none crosses the C ABI.
template <class F>
int guarded(greyhound_job_client* c, F&& body) {
  try {
    return body();
  } catch (const std::exception& e) {
    return fail(c, GREYHOUND_JOB_ERR_INTERNAL, std::string("internal error: ") + e.what());
  } catch (...) {
    return fail(c, GREYHOUND_JOB_ERR_INTERNAL, "internal error");
  }
}

std::vector<greyhound::PlacementEntry> entries_of(const greyhound_job_placement* placement, size_t len) {
  std::vector<greyhound::PlacementEntry> out;
  for (size_t i = 0; i < len; ++i) out.push_back({placement[i].rank, placement[i].tp, placement[i].dp, placement[i].pp});
  return out;
}

bool copy_ints(const int32_t* p, size_t n, std::vector<int>* out) {
  if (n > 0 && p == nullptr) return false;
  out->assign(p, p + n);
  return true;
}

void fill(greyhound_job_client::PlanSlot& slot, const PlanPoll& poll, greyhound_job_plan* out) {
  slot.plan = poll.plan;
  slot.verdict = poll.reason;
  slot.placement.clear();
  for (const auto& e : poll.placement) slot.placement.push_back({e.rank, e.tp, e.dp, e.pp});
  const greyhound::Plan& p = slot.plan;
  *out = greyhound_job_plan{};
  out->epoch = p.epoch;
  out->strategy = static_cast<int32_t>(p.strategy) + GREYHOUND_JOB_S1;
  out->action = p.action == greyhound::PlanAction::kRevert ? GREYHOUND_JOB_ACTION_REVERT : GREYHOUND_JOB_ACTION_APPLY;
  out->incident = p.incident;
  out->predicted_iteration_s = p.predicted_iteration_s;
  out->microbatches = p.microbatches.data();
  out->microbatches_len = p.microbatches.size();
  out->placement = slot.placement.data();
  out->placement_len = slot.placement.size();
  out->exclude_ranks = p.exclude_ranks.data();
  out->exclude_ranks_len = p.exclude_ranks.size();
  out->exclude_nodes = p.exclude_nodes.data();
  out->exclude_nodes_len = p.exclude_nodes.size();
  out->reason = p.reason.c_str();
  out->verdict = slot.verdict.c_str();
}

}  // namespace

extern "C" {

int greyhound_job_api_version(void) { return GREYHOUND_JOB_API_VERSION; }

const char* greyhound_job_status_name(int status) {
  switch (status) {
    case GREYHOUND_JOB_OK: return "ok";
    case GREYHOUND_JOB_NO_PLAN: return "no_plan";
    case GREYHOUND_JOB_PLAN_REJECTED: return "plan_rejected";
    case GREYHOUND_JOB_PLAN_UNSUPPORTED: return "plan_unsupported";
    case GREYHOUND_JOB_PLAN_STALE: return "plan_stale";
    case GREYHOUND_JOB_ERR_INVALID: return "invalid";
    case GREYHOUND_JOB_ERR_UNAVAILABLE: return "unavailable";
    case GREYHOUND_JOB_ERR_REFUSED: return "refused";
    case GREYHOUND_JOB_ERR_INTERNAL: return "internal";
    default: return "unknown";
  }
}

int greyhound_job_open_v1(const char* job, const char* redis_url, greyhound_job_client** out, char* error,
                          size_t error_len) {
  return greyhound_job_open_v2(job, redis_url, 0, out, error, error_len);
}

int greyhound_job_open_v2(const char* job, const char* redis_url, uint32_t flags, greyhound_job_client** out,
                          char* error, size_t error_len) {
  std::string why;
  auto report = [&](int code) {
    if (error != nullptr && error_len > 0) {
      const size_t n = std::min(why.size(), error_len - 1);
      std::memcpy(error, why.data(), n);
      error[n] = '\0';
    }
    return code;
  };
  if (out == nullptr) {
    why = "out: must not be NULL";
    return report(GREYHOUND_JOB_ERR_INVALID);
  }
  *out = nullptr;
  if ((flags & ~static_cast<uint32_t>(GREYHOUND_JOB_OPEN_BACKGROUND)) != 0) {
    why = "flags: unknown bits";
    return report(GREYHOUND_JOB_ERR_INVALID);
  }
  try {
    const std::string name = job != nullptr ? std::string(job) : greyhound::read_env_config().job;
    auto opened = greyhound::job::JobClient::open(name, redis_url != nullptr ? redis_url : "");
    if (!opened) {
      why = opened.error();
      return report(code_of(opened.code()));
    }
    auto c = std::make_unique<greyhound_job_client>();
    if ((flags & GREYHOUND_JOB_OPEN_BACKGROUND) != 0) {
      c->bg = std::make_unique<greyhound::job::BackgroundJobClient>(std::move(opened.value()),
                                                                    greyhound::job::BackgroundJobClient::Options{});
    } else {
      c->impl = std::move(opened.value());
    }
    *out = c.release();
    why.clear();
    return report(GREYHOUND_JOB_OK);
  } catch (const std::exception& e) {
    why = std::string("internal error: ") + e.what();
  } catch (...) {
    why = "internal error";
  }
  return report(GREYHOUND_JOB_ERR_INTERNAL);
}

void greyhound_job_close_v1(greyhound_job_client* client) { delete client; }

const char* greyhound_job_last_error_v1(const greyhound_job_client* client) {
  return client != nullptr ? client->last_error.c_str() : "client: NULL";
}

const char* greyhound_job_name_v1(const greyhound_job_client* client) {
  return client != nullptr ? client->job().c_str() : "";
}

int greyhound_job_publish_layout_v1(greyhound_job_client* client, const greyhound_job_layout* layout) {
  return greyhound_job_publish_layout_v2(client, layout, nullptr, 0);
}

int greyhound_job_publish_layout_v2(greyhound_job_client* client, const greyhound_job_layout* layout,
                                    const greyhound_job_placement* placement, size_t placement_len) {
  if (client == nullptr) return GREYHOUND_JOB_ERR_INVALID;
  return guarded(client, [&]() -> int {
    if (layout == nullptr) return fail(client, GREYHOUND_JOB_ERR_INVALID, "layout: must not be NULL");
    if (placement == nullptr && placement_len > 0) {
      return fail(client, GREYHOUND_JOB_ERR_INVALID, "placement: NULL with a non-zero length");
    }
    greyhound::JobLayout l;
    l.tp = layout->tp;
    l.dp = layout->dp;
    l.pp = layout->pp;
    l.world = layout->world;
    l.gpus_per_node = layout->gpus_per_node;
    l.s3_estimate_s = client->s3_estimate_s;
    l.s4_estimate_s = client->s4_estimate_s;
    l.microbatch_multiple = client->microbatch_multiple;
    l.initial_placement = client->initial_placement;
    if (!copy_ints(layout->microbatches, layout->microbatches_len, &l.microbatches) ||
        !copy_ints(layout->initial_microbatches, layout->initial_microbatches_len, &l.initial_microbatches)) {
      return fail(client, GREYHOUND_JOB_ERR_INVALID, "layout: a NULL array with a non-zero length");
    }
    const struct {
      uint32_t bit;
      greyhound::Strategy strategy;
    } caps[] = {{GREYHOUND_JOB_CAP_S2, greyhound::Strategy::kS2},
                {GREYHOUND_JOB_CAP_S3, greyhound::Strategy::kS3},
                {GREYHOUND_JOB_CAP_S4, greyhound::Strategy::kS4}};
    uint32_t known = GREYHOUND_JOB_CAP_S3_BY_RESTART;
    const uint32_t s3_implied =
        (layout->capabilities & GREYHOUND_JOB_CAP_S3_BY_RESTART) != 0 ? static_cast<uint32_t>(GREYHOUND_JOB_CAP_S3) : 0u;
    const uint32_t capabilities = layout->capabilities | s3_implied;
    for (const auto& c : caps) {
      known |= c.bit;
      if (capabilities & c.bit) l.capabilities.emplace_back(greyhound::name(c.strategy));
    }
    l.s3_by_restart = (layout->capabilities & GREYHOUND_JOB_CAP_S3_BY_RESTART) != 0;
    if (layout->capabilities & ~known) return fail(client, GREYHOUND_JOB_ERR_INVALID, "capabilities: unknown bits");
    l.placement = entries_of(placement, placement_len);
    return done(client, client->publish_layout(l));
  });
}

int greyhound_job_set_cost_estimate_v1(greyhound_job_client* client, int32_t strategy, double seconds) {
  if (client == nullptr) return GREYHOUND_JOB_ERR_INVALID;
  if (strategy != GREYHOUND_JOB_S3 && strategy != GREYHOUND_JOB_S4) {
    return fail(client, GREYHOUND_JOB_ERR_INVALID, "strategy: only GREYHOUND_JOB_S3 and GREYHOUND_JOB_S4 have estimates");
  }
  if (!std::isfinite(seconds) || seconds < 0 || seconds > greyhound::kMaxCostEstimateS) {
    return fail(client, GREYHOUND_JOB_ERR_INVALID, "seconds: must be a finite number from 0 to a week");
  }
  (strategy == GREYHOUND_JOB_S3 ? client->s3_estimate_s : client->s4_estimate_s) = seconds;
  client->last_error.clear();
  return GREYHOUND_JOB_OK;
}

int greyhound_job_set_microbatch_multiple_v1(greyhound_job_client* client, int32_t multiple) {
  if (client == nullptr) return GREYHOUND_JOB_ERR_INVALID;
  if (multiple < 0 || multiple > greyhound::kMaxMicrobatchMultiple) {
    return fail(client, GREYHOUND_JOB_ERR_INVALID,
                "multiple: must be from 0 (not said) to " + std::to_string(greyhound::kMaxMicrobatchMultiple));
  }
  client->microbatch_multiple = multiple;
  client->last_error.clear();
  return GREYHOUND_JOB_OK;
}

int greyhound_job_set_initial_placement_v1(greyhound_job_client* client, const greyhound_job_placement* placement,
                                           size_t placement_len) {
  if (client == nullptr) return GREYHOUND_JOB_ERR_INVALID;
  if (placement == nullptr && placement_len > 0) {
    return fail(client, GREYHOUND_JOB_ERR_INVALID, "placement: NULL with a non-zero length");
  }
  return guarded(client, [&]() -> int {
    client->initial_placement = entries_of(placement, placement_len);
    client->last_error.clear();
    return GREYHOUND_JOB_OK;
  });
}

int greyhound_job_poll_plan_v1(greyhound_job_client* client, greyhound_job_plan* out) {
  if (client == nullptr) return GREYHOUND_JOB_ERR_INVALID;
  return guarded(client, [&]() -> int {
    if (out == nullptr) return fail(client, GREYHOUND_JOB_ERR_INVALID, "out: must not be NULL");
    auto poll = client->poll_plan();
    if (!poll) return done(client, poll);
    client->last_error = poll->reason;
    int code = GREYHOUND_JOB_NO_PLAN;
    switch (poll->kind) {
      case PlanPoll::Kind::kNone: return GREYHOUND_JOB_NO_PLAN;
      case PlanPoll::Kind::kPlan: code = GREYHOUND_JOB_OK; break;
      case PlanPoll::Kind::kRejected: code = GREYHOUND_JOB_PLAN_REJECTED; break;
      case PlanPoll::Kind::kUnsupported: code = GREYHOUND_JOB_PLAN_UNSUPPORTED; break;
      case PlanPoll::Kind::kStale: code = GREYHOUND_JOB_PLAN_STALE; break;
    }
    fill(client->polled, *poll, out);
    return code;
  });
}

int greyhound_job_last_plan_v1(greyhound_job_client* client, greyhound_job_plan* out) {
  if (client == nullptr) return GREYHOUND_JOB_ERR_INVALID;
  return guarded(client, [&]() -> int {
    if (out == nullptr) return fail(client, GREYHOUND_JOB_ERR_INVALID, "out: must not be NULL");
    client->last_error.clear();
    const auto& last = client->last_good();
    if (!last) return GREYHOUND_JOB_NO_PLAN;
    fill(client->last, *last, out);
    return GREYHOUND_JOB_OK;
  });
}

int greyhound_job_ack_v1(greyhound_job_client* client, int32_t rank, int64_t epoch, int64_t iteration, int32_t status,
                         const char* detail) {
  return greyhound_job_ack_v2(client, rank, epoch, iteration, status, detail, 0.0);
}

int greyhound_job_ack_v2(greyhound_job_client* client, int32_t rank, int64_t epoch, int64_t iteration, int32_t status,
                         const char* detail, double apply_s) {
  if (client == nullptr) return GREYHOUND_JOB_ERR_INVALID;
  return guarded(client, [&]() -> int {
    if (status < GREYHOUND_JOB_ACK_APPLIED || status > GREYHOUND_JOB_ACK_REJECTED) {
      return fail(client, GREYHOUND_JOB_ERR_INVALID, "status: not a GREYHOUND_JOB_ACK_* value");
    }
    if (!(apply_s >= 0) || !std::isfinite(apply_s)) {
      return fail(client, GREYHOUND_JOB_ERR_INVALID, "apply_s: must be a finite number >= 0");
    }
    greyhound::PlanAck a;
    a.rank = rank;
    a.epoch = epoch;
    a.iteration = iteration;
    a.status = static_cast<greyhound::AckStatus>(status);
    a.detail = detail != nullptr ? detail : "";
    a.apply_s = apply_s;
    return done(client, client->acknowledge(a));
  });
}

int greyhound_job_request_restart_v1(greyhound_job_client* client, int32_t rank, int64_t epoch, const char* reason,
                                     const int32_t* exclude_nodes, size_t exclude_nodes_len,
                                     const int32_t* exclude_ranks, size_t exclude_ranks_len) {
  return greyhound_job_request_restart_v2(client, rank, epoch, reason, exclude_nodes, exclude_nodes_len, exclude_ranks,
                                          exclude_ranks_len, nullptr, 0);
}

int greyhound_job_request_restart_v2(greyhound_job_client* client, int32_t rank, int64_t epoch, const char* reason,
                                     const int32_t* exclude_nodes, size_t exclude_nodes_len,
                                     const int32_t* exclude_ranks, size_t exclude_ranks_len,
                                     const greyhound_job_placement* placement, size_t placement_len) {
  if (client == nullptr) return GREYHOUND_JOB_ERR_INVALID;
  return guarded(client, [&]() -> int {
    greyhound::RestartRequest r;
    r.rank = rank;
    r.epoch = epoch;
    r.reason = reason != nullptr ? reason : "";
    if (!copy_ints(exclude_nodes, exclude_nodes_len, &r.exclude_nodes) ||
        !copy_ints(exclude_ranks, exclude_ranks_len, &r.exclude_ranks) || (placement == nullptr && placement_len > 0)) {
      return fail(client, GREYHOUND_JOB_ERR_INVALID, "restart: a NULL array with a non-zero length");
    }
    r.placement = entries_of(placement, placement_len);
    return done(client, client->request_restart(r));
  });
}

int greyhound_job_restart_placement_v1(greyhound_job_client* client, greyhound_job_placement* out, size_t capacity,
                                       size_t* len) {
  if (client == nullptr) return GREYHOUND_JOB_ERR_INVALID;
  if (len == nullptr || (out == nullptr && capacity > 0)) {
    return fail(client, GREYHOUND_JOB_ERR_INVALID, "len must not be NULL, nor out with a capacity");
  }
  *len = 0;
  return guarded(client, [&]() -> int {
    auto request = client->restart_request();
    if (!request) return done(client, request);
    if (!*request || (*request)->placement.empty()) {
      client->last_error.clear();
      return GREYHOUND_JOB_OK;
    }
    const auto& p = (*request)->placement;
    *len = p.size();
    if (p.size() > capacity) {
      return fail(client, GREYHOUND_JOB_ERR_INVALID,
                  "capacity: the restart's placement has " + std::to_string(p.size()) + " entries");
    }
    for (size_t i = 0; i < p.size(); ++i) out[i] = {p[i].rank, p[i].tp, p[i].dp, p[i].pp};
    client->last_error.clear();
    return GREYHOUND_JOB_OK;
  });
}

}  // extern "C"
