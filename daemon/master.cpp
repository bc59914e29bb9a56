#include "daemon/master.h"

#include <fnmatch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>

#include <spdlog/spdlog.h>

#include "daemon/metrics.h"
#include "greyhound/ring.h"
#include "store/job_status.h"
#include "store/job_store.h"

namespace greyhound::master {
namespace {

// A registered job without a live agent is looked at again after this long.
constexpr double kDormantRecheckS = 30.0;
// /metrics answers younger than this are served again.
constexpr double kHttpCacheS = 1.0;
// The jobs' status snapshots: read while a request wanted them this recently, at most this often, and
// spaced so that reading them takes at most kStatusLoopShare of the loop's time (a planted ranks set costs
// the reading more, and the loop no more).
constexpr double kStatusWantedS = 300.0;  // Prometheus scrapes every 15 s to a minute
constexpr double kStatusEveryS = 1.0;
constexpr double kStatusLoopShare = 0.1;

// This run's tag in profile request ids: its start time, base 36.
std::string run_tag() {
  constexpr const char* kDigits = "0123456789abcdefghijklmnopqrstuvwxyz";
  std::string tag;
  for (auto t = static_cast<std::uint64_t>(unix_ms_now()); t > 0; t /= 36) tag.insert(tag.begin(), kDigits[t % 36]);
  return tag;
}

}  // namespace

Master::Master(MasterConfig config)
    : cfg_(std::move(config)),
      redis_(RedisClient::Options::for_daemon(cfg_.redis, std::chrono::milliseconds(1000))),
      log_(cfg_.event_log),
      run_tag_(run_tag()) {
  if (cfg_.jobs_pattern.empty() && !cfg_.ha) drivers_[cfg_.job].driver = make_driver(cfg_.job);
  lease_scope_ = cfg_.jobs_pattern.empty() ? "job:" + cfg_.job : "jobs:" + cfg_.jobs_pattern;
  // This process's token in the lease: its id and a nonce, so that two masters given the same id (pid 1 in
  // two containers of one host) are never taken for one.
  std::random_device rd;
  char nonce[20];
  std::snprintf(nonce, sizeof nonce, "%08x%08x", rd(), rd());
  holder_ = cfg_.id + " " + nonce;
}

std::unique_ptr<JobDriver> Master::make_driver(const std::string& job) {
  return std::make_unique<JobDriver>(redis_, job, cfg_.controller, run_tag_, log_, cfg_.batch);
}

bool Master::hold_lease(double now_s) {
  if (now_s < next_lease_s_) return lease_epoch_ > 0;
  next_lease_s_ = now_s + cfg_.lease_ms / 3000.0;
  if (lease_epoch_ > 0) {
    auto renewed = store::JobStore::renew_lease(redis_, lease_scope_, holder_, lease_epoch_, cfg_.lease_ms);
    // Unreachable: lead on (every write is fenced, so a master that took over meanwhile is safe from us).
    if (!renewed || *renewed) return true;
    stand_by("the lease of epoch " + std::to_string(lease_epoch_) + " lapsed or was taken");
  }
  bool took_over = false;
  auto taken = store::JobStore::acquire_lease(redis_, lease_scope_, holder_, cfg_.lease_ms, &took_over);
  if (!taken || *taken == 0) return false;
  if (took_over) {
    ++lease_values_taken_over_;
    spdlog::warn("master {}: the lease held a value no master writes (a planted one?): taken over", cfg_.id);
  }
  lease_epoch_ = *taken;
  fenced_.clear();
  spdlog::info("master {} leads (epoch {})", cfg_.id, lease_epoch_);
  if (cfg_.jobs_pattern.empty()) drivers_[cfg_.job].driver = make_driver(cfg_.job);
  next_discovery_s_ = 0;  // look for the jobs to serve now
  return true;
}

void Master::stand_by(const std::string& why) {
  if (lease_epoch_ > 0 || !drivers_.empty()) spdlog::warn("master {} stands by: {}", cfg_.id, why);
  lease_epoch_ = 0;
  fenced_.clear();
  for (const auto& [job, served] : drivers_) leader_values_taken_over_done_ += served.driver->leader_values_taken_over();
  // What it knew goes with it: a master that leads again reads every job's state back from Redis.
  drivers_.clear();
  statuses_.clear();
  dormant_.clear();
}

void Master::stop() {
  if (!cfg_.ha || lease_epoch_ == 0) return;
  if (const Status s = store::JobStore::release_lease(redis_, lease_scope_, holder_, lease_epoch_); !s) {
    spdlog::warn("the lease was not given up ({}): a standby leads once it lapses", s.error());
  } else {
    spdlog::info("master {} gave the lease up", cfg_.id);
  }
  lease_epoch_ = 0;
}

const JobDriver* Master::driver(const std::string& job) const {
  auto it = drivers_.find(job);
  return it == drivers_.end() ? nullptr : it->second.driver.get();
}

void Master::discover(double now_s) {
  if (cfg_.jobs_pattern.empty() || now_s < next_discovery_s_) return;
  next_discovery_s_ = now_s + cfg_.discover_every_s;
  auto jobs = store::JobStore::jobs(redis_);
  if (!jobs) return;
  for (const std::string& job : *jobs) {
    if (drivers_.count(job) != 0 || fnmatch(cfg_.jobs_pattern.c_str(), job.c_str(), 0) != 0) continue;
    if (auto it = dormant_.find(job); it != dormant_.end() && now_s < it->second) continue;
    auto d = make_driver(job);
    // A job of the past, or not started yet: look again later, not every pass. Unless a master served it
    // with the plan lease until lately (this one restarted, its agents too): the lease is renewed without a
    // gap, or the job would revert a remedy in force while its agents come back.
    if (!d->agents_alive() && !d->plan_lease_held()) {
      dormant_[job] = now_s + kDormantRecheckS;
      continue;
    }
    dormant_.erase(job);
    spdlog::info("serving job {}", job);
    drivers_[job] = Served{std::move(d), now_s};
  }
  for (auto it = drivers_.begin(); it != drivers_.end();) {
    if (it->second.driver->agents_alive()) {
      it->second.last_alive_s = now_s;
    } else if (now_s - it->second.last_alive_s >= cfg_.retire_after_s) {
      spdlog::info("job {}: every agent gone for {:.0f} s: retired", it->first, now_s - it->second.last_alive_s);
      // Out of the registry of jobs (its agents register it again if it comes back); its keys stay.
      if (const Status s = store::JobStore::unregister_job(redis_, it->first); !s) {
        spdlog::warn("job {}: could not be removed from the registry of jobs: {}", it->first, s.error());
      }
      it = drivers_.erase(it);
      continue;
    }
    ++it;
  }
}

HttpResponse Master::http(const HttpRequest& r) {
  const char* kText = "text/plain; charset=utf-8";
  if (r.path == "/healthz") {
    if (!redis_.connected()) return {503, kText, "redis unavailable: " + redis_.last_error() + "\n"};
    if (cfg_.ha) {
      if (lease_epoch_ > 0) {
        for (const auto& [job, served] : drivers_) {
          if (served.driver->fenced_by() > lease_epoch_) {
            return {503, kText, "leading (epoch " + std::to_string(lease_epoch_) + ") but job " + job +
                                    "'s writes are fenced at epoch " + std::to_string(served.driver->fenced_by()) + "\n"};
          }
        }
      }
      return {200, kText, lease_epoch_ > 0 ? "ok: leading (epoch " + std::to_string(lease_epoch_) + ")\n" : "ok: standing by\n"};
    }
    return {200, kText, "ok\n"};
  }
  if (r.path == "/status") {
    std::string job = query_value(r.query, "job");
    if (job.empty()) {
      if (!cfg_.jobs_pattern.empty()) {
        std::string served;
        for (const auto& [name, d] : drivers_) served += (served.empty() ? "" : ", ") + name;
        return {400, kText, "name the job: /status?job=J (served: " + (served.empty() ? "none" : served) + ")\n"};
      }
      job = cfg_.job;
    }
    if (!job_name_error(job).empty()) return {400, kText, "not a job name\n"};
    // Only a job this master serves: any other name (a planted one, a scanner's) would cost the loop the reads
    // of a job nobody looks after.
    if (drivers_.count(job) == 0) return {404, kText, "not a job this master serves: " + job + "\n"};
    const double now_s = steady_s();
    statuses_wanted_until_s_ = now_s + kStatusWantedS;
    const nlohmann::json* status = fresh_status(job, now_s);
    if (status == nullptr) {
      if (!redis_.connected()) return {503, kText, "redis unavailable: " + redis_.last_error() + "\n"};
      return {503, kText, "the status of job " + job + " is being read: try again in a second\n"};
    }
    return {200, "application/json", status->dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n"};
  }
  if (r.path == "/metrics") {
    // Many scrapers, one exposition: one younger than a second is served again.
    const double t = steady_s();
    statuses_wanted_until_s_ = t + kStatusWantedS;
    if (!metrics_cache_.empty() && t - metrics_cache_at_s_ < kHttpCacheS) {
      return {200, "text/plain; version=0.0.4; charset=utf-8", metrics_cache_};
    }
    Exposition out;
    std::uint64_t taken_over = lease_values_taken_over_ + leader_values_taken_over_done_;
    for (const auto& [job, served] : drivers_) taken_over += served.driver->leader_values_taken_over();
    master_metrics(out, {drivers_.size(), redis_.reconnects(), taken_over, statuses_read_s_});
    static const nlohmann::json kUnknown;  // not read yet, too old, or Redis could not say
    for (const auto& [job, served] : drivers_) {
      const nlohmann::json* status = fresh_status(job, t);
      job_metrics(out, job, served.driver->controller(), status != nullptr ? *status : kUnknown);
    }
    metrics_cache_ = out.text();
    metrics_cache_at_s_ = t;
    return {200, "text/plain; version=0.0.4; charset=utf-8", metrics_cache_};
  }
  return {404, kText, "not found: try /metrics, /status or /healthz\n"};
}

bool Master::pause_standing() const {
  for (const auto& [job, served] : drivers_) {
    if (served.driver->controller().pause_standing()) return true;
  }
  return false;
}

const nlohmann::json* Master::fresh_status(const std::string& job, double now_s) const {
  const auto it = statuses_.find(job);
  if (it == statuses_.end() || it->second.is_null()) return nullptr;
  const double spacing = std::max(kStatusEveryS, statuses_read_s_ / kStatusLoopShare);
  return now_s - statuses_at_s_ <= std::max(3.0, 2 * spacing) ? &it->second : nullptr;
}

void Master::read_statuses(double now_s) {
  if (now_s >= statuses_wanted_until_s_ || now_s < next_statuses_s_) return;
  std::map<std::string, nlohmann::json> read;
  for (const auto& [job, served] : drivers_) {
    store::JobStore st(redis_, job);
    auto s = store::job_status(st, unix_ms_now());
    read[job] = s ? std::move(*s) : nlohmann::json();
  }
  statuses_ = std::move(read);
  statuses_at_s_ = now_s;
  statuses_read_s_ = steady_s() - now_s;
  next_statuses_s_ = now_s + std::max(kStatusEveryS, statuses_read_s_ / kStatusLoopShare);
}

int Master::tick() {
  if (!redis_.ensure_connected()) {
    if (!redis_down_logged_) spdlog::warn("{}; retrying", redis_.last_error());
    redis_down_logged_ = true;
    return 0;
  }
  if (redis_down_logged_) spdlog::info("connected to Redis at {}", redis_.endpoint().describe());
  redis_down_logged_ = false;
  if (cfg_.ha && !hold_lease(steady_s())) return 0;
  discover(steady_s());
  int n = 0;
  for (auto& [job, served] : drivers_) {
    if (cfg_.ha && served.driver->epoch() != lease_epoch_) {
      auto newer = served.driver->lead(lease_epoch_, cfg_.id);
      if (!newer) continue;  // Redis: try again next tick
      if (*newer != 0) {
        // The epoch counter fell behind this job's (evicted, deleted, or rolled back by a failover): give the
        // lease up and raise the counter, so that the next lease, whoever takes it, is newer than the job's.
        (void)store::JobStore::raise_lease_epoch(redis_, *newer);
        (void)store::JobStore::release_lease(redis_, lease_scope_, holder_, lease_epoch_);
        stand_by("job " + job + " is led at epoch " + std::to_string(*newer) + ", newer than this lease's " +
                 std::to_string(lease_epoch_));
        return n;
      }
    }
    n += served.driver->tick();
    if (cfg_.ha && served.driver->fenced_by() > lease_epoch_) {
      // Writes fenced by a newer epoch while this master holds the lease: no master can have taken it (its
      // lease would be newer than ours, and ours would not renew), so the job's leader key is ahead of the
      // lease counter (planted, or a failover that lost the counter). Leading on would write nothing for ever:
      // stand down, and raise the counter past it, so that the next lease, ours again or a standby's, is newer.
      const std::int64_t newer = served.driver->fenced_by();
      fenced_ = "job " + job + "'s writes are fenced at epoch " + std::to_string(newer) + ", newer than this lease's " +
                std::to_string(lease_epoch_);
      (void)store::JobStore::raise_lease_epoch(redis_, newer);
      (void)store::JobStore::release_lease(redis_, lease_scope_, holder_, lease_epoch_);
      stand_by(fenced_);
      return n;
    }
  }
  read_statuses(steady_s());
  return n;
}

}  // namespace greyhound::master
