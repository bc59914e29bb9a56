#include "job/background_client.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <utility>

#include "common/clock.h"

namespace greyhound::job {

BackgroundJobClient::BackgroundJobClient(std::unique_ptr<JobClient> client, Options options)
    : job_(client->job()), options_(options), client_(std::move(client)) {
  thread_ = std::thread([this] { run(); });
}

BackgroundJobClient::~BackgroundJobClient() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

Status BackgroundJobClient::publish_layout(const JobLayout& layout) {
  if (auto why = check_layout(layout); !why.empty()) return Status::failure("layout: " + why);
  JobLayout l = layout;
  if (l.initial_microbatches.empty()) l.initial_microbatches = l.microbatches;  // as JobClient takes it
  layout_ = l;
  ++generation_;
  {
    std::lock_guard<std::mutex> lk(mu_);
    layout_queued_ = std::move(l);  // a newer layout replaces one not yet written
    generation_queued_ = generation_;
    await_layout_ = false;
  }
  wake_.notify_one();
  return ok_status();
}

Result<PlanPoll> BackgroundJobClient::poll_plan() {
  using R = Result<PlanPoll>;
  if (!layout_) return R::failure("no layout published yet: plans cannot be checked");
  Outcome out;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (!outcomes_.empty()) {
      out = std::move(outcomes_.front());
      outcomes_.pop_front();
      if (out.poll.kind == PlanPoll::Kind::kPlan) {
        await_layout_ = true;
        await_layout_since_s_ = steady_s();
      }
    } else if (io_failure_) {
      Error e = std::move(*io_failure_);
      io_failure_.reset();
      return R(std::move(e));
    } else {
      return PlanPoll{};  // nothing new
    }
  }
  wake_.notify_one();  // the next read may start now
  PlanPoll& poll = out.poll;
  if (poll.kind == PlanPoll::Kind::kPlan && out.generation != generation_) {
    // Judged against an older layout than the job's latest (published meanwhile): checked against the latest.
    PlanCheck check = check_plan(*layout_, poll.plan, poll.plan.epoch - 1);
    if (check.verdict == Verdict::kRejected || check.verdict == Verdict::kUnsupported) {
      poll.kind = check.verdict == Verdict::kRejected ? PlanPoll::Kind::kRejected : PlanPoll::Kind::kUnsupported;
      poll.reason = check.reason;
      poll.placement.clear();
    } else {
      poll.placement = std::move(check.placement);
    }
  }
  if (poll.kind == PlanPoll::Kind::kPlan) last_good_ = poll;
  return std::move(poll);
}

Status BackgroundJobClient::acknowledge(const PlanAck& ack) {
  if (auto why = JobClient::ack_error(ack); !why.empty()) return Status::failure(why);
  PlanAck a = ack;
  if (a.t_unix_ms == 0) a.t_unix_ms = unix_ms_now();  // when it was given, not when Redis took it
  {
    std::lock_guard<std::mutex> lk(mu_);
    acks_queued_.push_back(std::move(a));
    drop_oldest_acks();
  }
  wake_.notify_one();
  return ok_status();
}

Status BackgroundJobClient::request_restart(const RestartRequest& request) {
  std::lock_guard<std::mutex> cl(client_mu_);
  write_queued();  // the layout it is checked against, and the acknowledgements before it
  return client_->request_restart(request);
}

Result<std::optional<RestartRequest>> BackgroundJobClient::restart_request() {
  std::lock_guard<std::mutex> cl(client_mu_);
  return client_->restart_request();
}

void BackgroundJobClient::drop_oldest_acks() {
  while (acks_queued_.size() > kMaxQueuedAcks) acks_queued_.pop_front();
}

bool BackgroundJobClient::write_queued() {
  std::optional<JobLayout> layout;
  std::uint64_t generation = 0;
  std::deque<PlanAck> acks;
  {
    std::lock_guard<std::mutex> lk(mu_);
    layout.swap(layout_queued_);
    generation = generation_queued_;
    acks.swap(acks_queued_);
  }
  // Put back, in order before what came meanwhile, what waits for Redis.
  auto requeue = [&](std::optional<JobLayout> l, std::deque<PlanAck>& rest) {
    std::lock_guard<std::mutex> lk(mu_);
    if (l && !layout_queued_) layout_queued_ = std::move(l);  // unless a newer one came
    acks_queued_.insert(acks_queued_.begin(), rest.begin(), rest.end());
    drop_oldest_acks();
  };
  auto failed = [&](const Error& e) {
    std::lock_guard<std::mutex> lk(mu_);
    io_failure_ = e;
  };
  if (layout) {
    // The client takes it as the reference for plans even when the write fails (JobClient::publish_layout).
    Status s = client_->publish_layout(*layout);
    generation_judged_ = generation;
    if (!s) failed(s.status());  // refused (or, not reached, invalid): reported and dropped
    if (!s && s.code() == Errc::kUnavailable) {
      requeue(std::move(layout), acks);
      return false;
    }
  }
  while (!acks.empty()) {
    Status s = client_->acknowledge(acks.front());
    if (!s) failed(s.status());
    if (!s && s.code() == Errc::kUnavailable) {
      requeue(std::nullopt, acks);
      return false;
    }
    acks.pop_front();  // written, or refused: reported and dropped
  }
  return true;
}

void BackgroundJobClient::run() {
  const auto interval = std::chrono::duration<double>(options_.poll_interval_s);
  double next_read_s = 0;   // steady seconds
  double next_write_s = 0;  // after a write Redis could not take, the next try
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    if (stopping_) break;
    const double now = steady_s();
    const bool writes = (layout_queued_ || !acks_queued_.empty()) && now >= next_write_s;
    const bool layout_awaited = await_layout_ && now - await_layout_since_s_ < kLayoutWaitS;
    const bool read = generation_queued_ > 0 && outcomes_.empty() && !layout_awaited && now >= next_read_s;
    // Read only once the latest layout is written (or refused): the plan is judged against it.
    if (!writes && !(read && !layout_queued_)) {
      wake_.wait_for(lk, interval);
      continue;
    }
    lk.unlock();
    try {
      std::lock_guard<std::mutex> cl(client_mu_);
      if (writes && !write_queued()) next_write_s = steady_s() + options_.poll_interval_s;
      bool layout_waits = false;
      {
        std::lock_guard<std::mutex> g(mu_);
        layout_waits = layout_queued_.has_value();
      }
      if (read && !layout_waits) {
        auto polled = client_->poll_plan();
        next_read_s = steady_s() + options_.poll_interval_s;
        std::lock_guard<std::mutex> g(mu_);
        if (!polled) {
          io_failure_ = polled.status();
        } else if (polled->kind != PlanPoll::Kind::kNone) {
          outcomes_.push_back({std::move(*polled), generation_judged_});
        }
      }
    } catch (const std::exception& e) {
      std::lock_guard<std::mutex> g(mu_);
      io_failure_ = Error{Errc::kRefused, std::string("internal error: ") + e.what(), {}};
      next_read_s = steady_s() + options_.poll_interval_s;
    } catch (...) {
      std::lock_guard<std::mutex> g(mu_);
      io_failure_ = Error{Errc::kRefused, "internal error", {}};
      next_read_s = steady_s() + options_.poll_interval_s;
    }
    lk.lock();
  }
  lk.unlock();
  // Closing: what is queued is written, up to the first write Redis does not take, with a connection tried
  // now rather than when the backoff would allow it.
  try {
    std::lock_guard<std::mutex> cl(client_mu_);
    client_->retry_now();
    write_queued();
  } catch (...) {
  }
}

}  // namespace greyhound::job
