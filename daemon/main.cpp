// greyhound-master: the cluster daemon. Thin composition root over Master (master.h): flags and
// environment in, a Boost.Asio event loop with a polling timer, clean stop on SIGTERM/SIGINT.
#include <utility>  // before Boost.Asio 1.74, whose awaitable.hpp forgets it under C++20

#include <boost/asio.hpp>

#include <csignal>
#include <cstdio>
#include <functional>
#include <string>

#include <spdlog/spdlog.h>

#include "common/args.h"
#include "common/log.h"
#include "daemon/master.h"
#include "greyhound/config.h"
#include "greyhound/ring.h"

int main(int argc, char** argv) {
  greyhound::init_logging("greyhound-master");
  greyhound::master::MasterConfig cfg;
  int poll_ms = 100;
  try {
    const greyhound::Args a(std::vector<std::string>(argv + 1, argv + argc),
                            {"job", "redis", "event-log", "poll-ms", "profile-s", "ack-timeout-s", "s3-pause-s",
                             "s4-restart-s", "baseline-after-s", "baseline-every-s"},
                            {"help", "mitigate"});
    if (a.flag("help")) {
      std::printf("usage: greyhound-master [--job J] [--redis URL] [--event-log FILE] [--poll-ms MS] [--mitigate]\n"
                  "         [--profile-s S] [--ack-timeout-s S] [--s3-pause-s S] [--s4-restart-s S]\n"
                  "         [--baseline-after-s S] [--baseline-every-s S]\n"
                  "defaults from GREYHOUND_JOB and GREYHOUND_REDIS\n");
      return 0;
    }
    cfg.job = greyhound::sanitize_job_name(a.str("job", greyhound::read_env_config().job));
    cfg.redis = a.has("redis") ? greyhound::parse_redis_url(a.str("redis")) : greyhound::redis_endpoint_from_env();
    cfg.event_log = a.str("event-log", "");
    poll_ms = static_cast<int>(a.integer_in("poll-ms", 100, 1, 60000));
    cfg.mitigate = a.flag("mitigate");
    cfg.profile_s = a.number("profile-s", cfg.profile_s);
    cfg.ack_timeout_s = a.number("ack-timeout-s", cfg.ack_timeout_s);
    cfg.planner.ski.s3_pause_s = a.number("s3-pause-s", cfg.planner.ski.s3_pause_s);
    cfg.planner.ski.s4_restart_s = a.number("s4-restart-s", cfg.planner.ski.s4_restart_s);
    cfg.baseline_after_s = a.number("baseline-after-s", cfg.baseline_after_s);
    cfg.baseline_every_s = a.number("baseline-every-s", cfg.baseline_every_s);
    if (cfg.profile_s <= 0 || cfg.ack_timeout_s <= 0) throw greyhound::ArgError("--profile-s and --ack-timeout-s must be > 0");
    if (cfg.baseline_after_s < 0 || cfg.baseline_every_s < 0 || cfg.planner.ski.s3_pause_s < 0 ||
        cfg.planner.ski.s4_restart_s < 0) {
      throw greyhound::ArgError("--baseline-after-s, --baseline-every-s, --s3-pause-s and --s4-restart-s must be >= 0");
    }
  } catch (const greyhound::ArgError& e) {
    std::fprintf(stderr, "greyhound-master: %s\n", e.what());
    return 2;
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "greyhound-master: %s\n", e.what());
    return 2;
  }
  std::signal(SIGPIPE, SIG_IGN);
  spdlog::info("master for job {} on Redis {}", cfg.job, cfg.redis.describe());
  greyhound::master::Master master(cfg);

  boost::asio::io_context io;
  boost::asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](const boost::system::error_code&, int sig) {
    spdlog::info("signal {}: stopping", sig);
    io.stop();
  });
  boost::asio::steady_timer timer(io);
  std::function<void()> schedule = [&] {
    timer.expires_after(std::chrono::milliseconds(poll_ms));
    timer.async_wait([&](const boost::system::error_code& ec) {
      if (ec) return;
      // Drain what is there before sleeping again.
      while (master.tick() > 0) {
      }
      schedule();
    });
  };
  schedule();
  io.run();
  return 0;
}
