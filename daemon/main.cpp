// greyhound-master: the cluster daemon. Thin composition root over Master (master.h): flags and
// environment in, a Boost.Asio event loop with a polling timer, clean stop on SIGTERM/SIGINT.
#include <utility>  // before Boost.Asio 1.74, whose awaitable.hpp forgets it under C++20

#include <boost/asio.hpp>

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <spdlog/spdlog.h>

#include "common/args.h"
#include "common/log.h"
#include "common/redis_client.h"
#include "daemon/master.h"
#include "greyhound/config.h"
#include "greyhound/ring.h"

namespace {

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// Every flag with its default, the defaults read from the config structs themselves (docs/configuration.md
// lists the same, and a test holds the two together).
void print_help() {
  const greyhound::master::MasterConfig m;
  const greyhound::master::ControllerConfig& c = m.controller;
  std::string sizes;
  for (std::uint64_t b : c.pause.sizes) sizes += (sizes.empty() ? "" : ",") + std::to_string(b);
  struct Flag {
    const char* flag;
    std::string def;
    const char* what;
  };
  const Flag flags[] = {
      {"--job J", "GREYHOUND_JOB, else default", "serve this one job (never retired)"},
      {"--jobs PATTERN", "", "serve every registered job whose name matches (fnmatch, e.g. '*'); excludes --job"},
      {"--redis URL", "GREYHOUND_REDIS", "the job store (redis://[[user]:password@]host[:port][/db], unix:///path)"},
      {"--event-log FILE", "none", "also write every event the master makes here, JSON lines"},
      {"--poll-ms MS", "100", "how often the master steps its jobs"},
      {"--pause-poll-ms MS", "10",
       "how often it steps while ranks of a job stand still in a validation pause (one trapped, not all resumed)"},
      {"--retire-after-s S", num(m.retire_after_s), "a served job whose agents have all been gone this long is retired"},
      {"--mitigate", "off", "plan and publish remedies (docs/mitigation.md)"},
      {"--profile-s S", num(c.profile_s), "a profiling window until the job's iteration time is known"},
      {"--profile-iterations N", std::to_string(c.profile_iterations), "... then a window of this many iterations"},
      {"--reprofile-iterations N", std::to_string(c.reprofile_iterations),
       "while fail-slows are open, profile again this many iterations after a window"},
      {"--baseline-after-s S", num(c.baseline_after_s), "healthy this long: take a baseline profile"},
      {"--baseline-every-s S", num(c.baseline_every_s), "refresh it this often while healthy (0: never profile a healthy job)"},
      {"--suspect-iterations N", std::to_string(c.suspect_iterations),
       "while healthy, this many iterations in a row 10 % slower than the level: profile before any agent decides (0: off)"},
      {"--ack-timeout-s S", num(c.ack_timeout_s), "every rank acknowledges a plan within this"},
      {"--check-iterations N", std::to_string(c.check_iterations), "a remedy in force is judged on this many iterations"},
      {"--pay-margin F", num(c.pay_margin), "... and kept when they are this much faster than before it"},
      {"--s3-pause-s S", num(c.planner.ski.s3_pause_s), "S3's overhead for a job that gives no estimate of its own"},
      {"--s4-restart-s S", num(c.planner.ski.s4_restart_s), "S4's overhead (checkpoint and restart), likewise"},
      {"--validate MODE", greyhound::master::validate_mode_name(c.validate),
       "never, auto (ambiguous profiles, and before S3/S4) or always: confirm with a pause (docs/validation.md)"},
      {"--validate-gemm-n N", std::to_string(c.pause.gemm_n), "n of a pause's n x n x n GEMMs"},
      {"--validate-bytes B,B,..", sizes, "a pause's P2P sizes, bytes"},
      {"--validate-repeats N", std::to_string(c.pause.repeats), "runs of each test"},
      {"--validate-topologies T,..", "ring,tree",
       "a group's P2P passes: ring, tree (less the links its ring passes time) or both (NCCL picks either at run time)"},
      {"--pause-deadline-s S", num(c.pause.deadline_s), "every rank resumes by itself after this"},
      {"--pause-estimate-s S", num(c.pause.expected_pause_s),
       "what a validation pause costs until one was measured on the job (auto: part of the S3/S4 price)"},
      {"--validate-min-excess-ms MS", num(c.pause.min_link_excess_ms),
       "a slow transfer also exceeds its class's median by this much (the timer's noise)"},
      {"--probe-iterations N", std::to_string(c.probe_iterations),
       "probe a congested link that S3 moved the job off this many iterations later, then twice as long after "
       "each probe that finds it slow, up to 16x (0: never)"},
      {"--plan-lease-s S", num(c.plan_lease_s),
       "renew the job's plan lease; with no master for this long, a job running a remedy reverts it itself"},
      {"--http ADDR:PORT", "off", "serve /metrics, /status?job=J and /healthz (PORT alone: 127.0.0.1; docs/operations.md)"},
      {"--ha", "off", "one of several masters on this Redis: lead through a lease, or stand by (docs/operations.md)"},
      {"--master-id ID", "host:pid", "--ha: this master's name in the lease and the leader events"},
      {"--lease-ms MS", std::to_string(m.lease_ms), "--ha: the lease's time to live; a standby leads within about 4/3 of it"},
  };
  std::printf("usage: greyhound-master [flags]   (docs/configuration.md)\n");
  for (const Flag& f : flags) {
    std::printf("  %-28s %s%s%s%s\n", f.flag, f.what, f.def.empty() ? "" : " (default: ", f.def.c_str(),
                f.def.empty() ? "" : ")");
  }
}

}  // namespace

int main(int argc, char** argv) {
  greyhound::init_logging("greyhound-master");
  const std::vector<std::string> args(argv + 1, argv + argc);
  greyhound::hide_redis_passwords(argc, argv, "greyhound-master");
  greyhound::master::MasterConfig cfg;
  int poll_ms = 100;
  int pause_poll_ms = 10;
  std::optional<greyhound::master::HttpAddress> http;
  try {
    const greyhound::Args a(args,
                            {"job", "jobs", "redis", "event-log", "poll-ms", "pause-poll-ms", "profile-s", "ack-timeout-s", "s3-pause-s",
                             "s4-restart-s", "baseline-after-s", "baseline-every-s", "retire-after-s",
                             "profile-iterations", "reprofile-iterations", "suspect-iterations", "check-iterations", "pay-margin",
                             "validate", "validate-gemm-n", "validate-bytes", "validate-repeats", "pause-deadline-s",
                             "validate-min-excess-ms", "validate-topologies", "probe-iterations", "http", "pause-estimate-s",
                             "master-id", "lease-ms", "plan-lease-s"},
                            {"help", "mitigate", "ha"});
    if (a.flag("help")) {
      print_help();
      return 0;
    }
    if (a.has("job") && a.has("jobs")) throw greyhound::ArgError("--job and --jobs exclude each other");
    cfg.jobs_pattern = a.str("jobs", "");
    if (a.has("jobs") && cfg.jobs_pattern.empty()) throw greyhound::ArgError("--jobs needs a pattern");
    cfg.job = a.str("job", greyhound::read_env_config().job);
    if (auto why = greyhound::job_name_error(cfg.job); !why.empty() && cfg.jobs_pattern.empty()) {
      throw greyhound::ArgError("--job: " + why);
    }
    cfg.retire_after_s = a.number("retire-after-s", cfg.retire_after_s);
    cfg.redis = greyhound::redis_endpoint_from_env(a.str("redis", ""));
    cfg.event_log = a.str("event-log", "");
    cfg.ha = a.flag("ha");
    if ((a.has("master-id") || a.has("lease-ms")) && !cfg.ha) throw greyhound::ArgError("--master-id and --lease-ms need --ha");
    cfg.lease_ms = static_cast<int>(a.integer_in("lease-ms", cfg.lease_ms, 300, 600000));
    cfg.id = a.str("master-id", "");
    if (cfg.id.empty()) {
      char host[256] = {};
      gethostname(host, sizeof host - 1);
      cfg.id = std::string(host) + ":" + std::to_string(getpid());
    }
    if (cfg.id.size() > 128 ||
        std::any_of(cfg.id.begin(), cfg.id.end(), [](char ch) { return static_cast<unsigned char>(ch) <= 0x20 || ch == 0x7f; })) {
      throw greyhound::ArgError("--master-id: 1 to 128 bytes, no blanks or control bytes");
    }
    poll_ms = static_cast<int>(a.integer_in("poll-ms", 100, 1, 60000));
    pause_poll_ms = static_cast<int>(a.integer_in("pause-poll-ms", 10, 1, 60000));
    if (cfg.ha && poll_ms * 3 > cfg.lease_ms) {
      throw greyhound::ArgError("--poll-ms must be at most a third of --lease-ms (the lease is renewed between steps)");
    }
    cfg.controller.mitigate = a.flag("mitigate");
    cfg.controller.profile_s = a.number("profile-s", cfg.controller.profile_s);
    cfg.controller.ack_timeout_s = a.number("ack-timeout-s", cfg.controller.ack_timeout_s);
    cfg.controller.planner.ski.s3_pause_s = a.number("s3-pause-s", cfg.controller.planner.ski.s3_pause_s);
    cfg.controller.planner.ski.s4_restart_s = a.number("s4-restart-s", cfg.controller.planner.ski.s4_restart_s);
    cfg.controller.baseline_after_s = a.number("baseline-after-s", cfg.controller.baseline_after_s);
    cfg.controller.baseline_every_s = a.number("baseline-every-s", cfg.controller.baseline_every_s);
    cfg.controller.profile_iterations = static_cast<int>(a.integer_in("profile-iterations", cfg.controller.profile_iterations, 0, 1000));
    cfg.controller.reprofile_iterations =
        static_cast<int>(a.integer_in("reprofile-iterations", cfg.controller.reprofile_iterations, 0, 1000));
    cfg.controller.suspect_iterations =
        static_cast<int>(a.integer_in("suspect-iterations", cfg.controller.suspect_iterations, 0, 1000));
    cfg.controller.check_iterations = static_cast<int>(a.integer_in("check-iterations", cfg.controller.check_iterations, 1, 1000));
    cfg.controller.pay_margin = a.number("pay-margin", cfg.controller.pay_margin);
    cfg.controller.plan_lease_s = a.number("plan-lease-s", cfg.controller.plan_lease_s);
    if (!(cfg.controller.plan_lease_s >= 2 && cfg.controller.plan_lease_s <= 3600)) {
      throw greyhound::ArgError("--plan-lease-s: 2 to 3600 seconds");
    }
    // The plan lease is renewed between steps, every quarter of its length: a step must come that often. A
    // standby (--ha) leads within about 4/3 of --lease-ms, and must renew it before it lapses.
    if (poll_ms * 4 > cfg.controller.plan_lease_s * 1000) {
      throw greyhound::ArgError("--poll-ms must be at most a quarter of --plan-lease-s (the plan lease is renewed "
                                "between steps; a longer gap lets the job revert its remedy)");
    }
    if (cfg.ha && cfg.lease_ms * 2 > cfg.controller.plan_lease_s * 1000) {
      throw greyhound::ArgError("--lease-ms must be at most half of --plan-lease-s (a standby takes over within "
                                "about 4/3 of --lease-ms, before the plan lease lapses)");
    }
    if (a.has("http")) {
      auto h = greyhound::master::parse_http_address(a.str("http"));
      if (!h) throw greyhound::ArgError(h.error());
      http = *h;
    }
    cfg.controller.probe_iterations =
        static_cast<int>(a.integer_in("probe-iterations", cfg.controller.probe_iterations, 0, 100000));
    if (a.has("validate")) {
      const auto m = greyhound::master::parse_validate_mode(a.str("validate"));
      if (!m) throw greyhound::ArgError("--validate must be never, auto or always");
      cfg.controller.validate = *m;
    }
    auto& pause = cfg.controller.pause;
    pause.gemm_n = static_cast<int>(a.integer_in("validate-gemm-n", pause.gemm_n, 0, 16384));
    pause.repeats = static_cast<int>(a.integer_in("validate-repeats", pause.repeats, 1, 9));
    pause.deadline_s = a.number("pause-deadline-s", pause.deadline_s);
    pause.min_link_excess_ms = a.number("validate-min-excess-ms", pause.min_link_excess_ms);
    pause.expected_pause_s = a.number("pause-estimate-s", pause.expected_pause_s);
    if (!(pause.expected_pause_s >= 0 && pause.expected_pause_s <= greyhound::kMaxPauseDeadlineS)) {
      throw greyhound::ArgError("--pause-estimate-s must be in [0, 600]");
    }
    if (!(pause.min_link_excess_ms >= 0 && pause.min_link_excess_ms <= 1e4)) {
      throw greyhound::ArgError("--validate-min-excess-ms must be in [0, 10000]");
    }
    if (!(pause.deadline_s >= 1 && pause.deadline_s <= greyhound::kMaxPauseDeadlineS)) {
      throw greyhound::ArgError("--pause-deadline-s must be in [1, 600]");
    }
    if (a.has("validate-bytes")) pause.sizes = greyhound::byte_list(a.str("validate-bytes"), "--validate-bytes");
    if (a.has("validate-topologies")) {
      const std::string list = a.str("validate-topologies");
      if (!greyhound::master::parse_validate_topologies(list, &cfg.controller.validator)) {
        throw greyhound::ArgError("--validate-topologies takes ring, tree or ring,tree, not '" + list + "'");
      }
    }
    if (!(cfg.controller.pay_margin >= 0 && cfg.controller.pay_margin < 1)) throw greyhound::ArgError("--pay-margin must be in [0, 1)");
    const auto& c = cfg.controller;
    if (c.profile_s <= 0 || c.ack_timeout_s <= 0) throw greyhound::ArgError("--profile-s and --ack-timeout-s must be > 0");
    if (cfg.retire_after_s <= 0) throw greyhound::ArgError("--retire-after-s must be > 0");
    if (c.baseline_after_s < 0 || c.baseline_every_s < 0 || c.planner.ski.s3_pause_s < 0 || c.planner.ski.s4_restart_s < 0) {
      throw greyhound::ArgError("--baseline-after-s, --baseline-every-s, --s3-pause-s and --s4-restart-s must be >= 0");
    }
  } catch (const greyhound::ArgError& e) {
    std::fprintf(stderr, "greyhound-master: %s\n", e.what());
    return 2;
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "greyhound-master: %s\n", e.what());
    return 2;
  }
  if (!cfg.event_log.empty() && !std::ofstream(cfg.event_log, std::ios::app)) {
    std::fprintf(stderr, "greyhound-master: --event-log %s: cannot open it for appending: %s\n", cfg.event_log.c_str(),
                 std::strerror(errno));
    return 2;
  }
  std::signal(SIGPIPE, SIG_IGN);
  if (cfg.jobs_pattern.empty()) {
    spdlog::info("master for job {} on Redis {}", cfg.job, cfg.redis.describe());
  } else {
    spdlog::info("master for the jobs matching '{}' on Redis {}", cfg.jobs_pattern, cfg.redis.describe());
  }
  greyhound::master::Master master(cfg);

  boost::asio::io_context io;
  std::shared_ptr<greyhound::master::HttpServer> server;
  if (http) {
    auto started = greyhound::master::HttpServer::start(
        io, *http, [&master](const greyhound::master::HttpRequest& r) { return master.http(r); });
    if (!started) {
      spdlog::error("{}", started.error());
      return 1;
    }
    server = *started;
    spdlog::info("serving /metrics, /status and /healthz on http://{}:{}", http->host, server->port());
  }
  boost::asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](const boost::system::error_code&, int sig) {
    spdlog::info("signal {}: stopping", sig);
    io.stop();
  });
  boost::asio::steady_timer timer(io);
  std::function<void()> schedule = [&] {
    // While ranks stand still in a pause, each of its round trips (trapped -> run, done -> resume) waits on
    // this loop: step faster then.
    timer.expires_after(std::chrono::milliseconds(master.pause_standing() ? std::min(poll_ms, pause_poll_ms) : poll_ms));
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
  master.stop();
  return 0;
}
