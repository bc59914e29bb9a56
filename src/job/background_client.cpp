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
  {
    std::lock_guard<std::mutex> lk(mu_);
    layout_queued_ = layout;  // a newer layout replaces one not yet written
    layout_given_ = true;
    await_layout_ = false;
  }
  layout_published_ = true;
  wake_.notify_one();
  return ok_status();
}

Result<PlanPoll> BackgroundJobClient::poll_plan() {
  using R = Result<PlanPoll>;
  if (!layout_published_) return R::failure("no layout published yet: plans cannot be checked");
  PlanPoll out;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (!outcomes_.empty()) {
      out = std::move(outcomes_.front());
      outcomes_.pop_front();
      if (out.kind == PlanPoll::Kind::kPlan) {
        await_layout_ = true;
        await_layout_since_s_ = steady_s();
      }
    } else if (io_failure_) {
      Error e = std::move(*io_failure_);
      io_failure_.reset();
      return R(std::move(e));
    } else {
      return out;  // nothing new
    }
  }
  wake_.notify_one();  // the next read may start now
  if (out.kind == PlanPoll::Kind::kPlan) last_good_ = out;
  return out;
}

Status BackgroundJobClient::acknowledge(const PlanAck& ack) {
  if (auto why = JobClient::ack_error(ack); !why.empty()) return Status::failure(why);
  PlanAck a = ack;
  if (a.t_unix_ms == 0) a.t_unix_ms = unix_ms_now();  // when it was given, not when Redis took it
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (acks_queued_.size() >= kMaxQueuedAcks) {
      acks_queued_.pop_front();
      ++acks_dropped_;
    }
    acks_queued_.push_back(std::move(a));
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

std::uint64_t BackgroundJobClient::acks_dropped() const {
  std::lock_guard<std::mutex> lk(mu_);
  return acks_dropped_;
}

std::size_t BackgroundJobClient::queued_writes() const {
  std::lock_guard<std::mutex> lk(mu_);
  return acks_queued_.size() + (layout_queued_ ? 1 : 0);
}

bool BackgroundJobClient::write_queued() {
  std::optional<JobLayout> layout;
  std::deque<PlanAck> acks;
  {
    std::lock_guard<std::mutex> lk(mu_);
    layout.swap(layout_queued_);
    acks.swap(acks_queued_);
  }
  auto failed = [&](const Error& e) {
    std::lock_guard<std::mutex> lk(mu_);
    io_failure_ = e;
  };
  if (layout) {
    // The client takes it as the reference for plans even when the write fails (JobClient::publish_layout).
    Status s = client_->publish_layout(*layout);
    if (!s && s.code() != Errc::kInvalid) {
      failed(s.status());
      std::lock_guard<std::mutex> lk(mu_);
      if (!layout_queued_) layout_queued_ = std::move(layout);  // retried, unless a newer one came
      acks_queued_.insert(acks_queued_.begin(), acks.begin(), acks.end());
      while (acks_queued_.size() > kMaxQueuedAcks) {
        acks_queued_.pop_front();
        ++acks_dropped_;
      }
      return false;
    }
    if (!s) failed(s.status());  // checked when queued: not reached
  }
  while (!acks.empty()) {
    Status s = client_->acknowledge(acks.front());
    if (!s && s.code() != Errc::kInvalid) {
      failed(s.status());
      std::lock_guard<std::mutex> lk(mu_);
      acks_queued_.insert(acks_queued_.begin(), acks.begin(), acks.end());  // in order, before newer ones
      while (acks_queued_.size() > kMaxQueuedAcks) {
        acks_queued_.pop_front();
        ++acks_dropped_;
      }
      return false;
    }
    if (!s) failed(s.status());  // checked when queued: not reached
    acks.pop_front();
  }
  return true;
}

void BackgroundJobClient::run() {
  const auto interval = std::chrono::duration<double>(options_.poll_interval_s);
  double next_read_s = 0;   // steady seconds
  double next_write_s = 0;  // after a write Redis did not take, the next try
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    const double now = steady_s();
    const bool writes = (layout_queued_ || !acks_queued_.empty()) && now >= next_write_s;
    const bool layout_awaited = await_layout_ && now - await_layout_since_s_ < kLayoutWaitS;
    const bool read = layout_given_ && outcomes_.empty() && !layout_awaited && now >= next_read_s;
    if (stopping_) break;
    if (!writes && !read) {
      wake_.wait_for(lk, interval);
      continue;
    }
    lk.unlock();
    try {
      std::lock_guard<std::mutex> cl(client_mu_);
      const bool written = write_queued();
      if (!written) next_write_s = steady_s() + options_.poll_interval_s;
      // Read only once the layout is written (or Redis refused it): the plan is judged against it.
      if (read && written) {
        auto polled = client_->poll_plan();
        next_read_s = steady_s() + options_.poll_interval_s;
        std::lock_guard<std::mutex> g(mu_);
        if (!polled) {
          io_failure_ = polled.status();
        } else {
          io_failure_.reset();
          if (polled->kind != PlanPoll::Kind::kNone) outcomes_.push_back(std::move(*polled));
        }
      } else if (read) {
        next_read_s = steady_s() + options_.poll_interval_s;
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
  // Closing: what is queued is written, up to the first write Redis does not take.
  try {
    std::lock_guard<std::mutex> cl(client_mu_);
    write_queued();
  } catch (...) {
  }
}

}  // namespace greyhound::job
