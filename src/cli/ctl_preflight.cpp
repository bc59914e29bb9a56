// greyhoundctl preflight --job J [--redis URL] [--fail-on-slow] [--timeout-s S] [--json] [--no-wait]: asks the
// job's master for a pre-flight check (key "preflight"; docs/validation.md, "Pre-flight") and waits for its
// answer (key "preflight:result"): every rank runs the validation tests (GEMM, the ring passes of every
// group) once, at the first iteration the master can reach, and the slow GPUs and links against the fleet's
// median are printed. It may be run before the job starts: the master serves it once the job's ranks, groups
// and first iterations are known. Progress goes to stderr, the verdict to stdout.
// Exit status: 0 nothing slow; 3 something slow (with --fail-on-slow the job's ranks were told to exit);
// 1 no verdict (the pause failed, Redis failed, or --timeout-s passed: then the request is withdrawn unless
// its pause is running); 2 bad usage. --no-wait leaves the request to the master (nobody withdraws it).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "cli/ctl_commands.h"
#include "common/args.h"
#include "common/redis_client.h"
#include "greyhound/ring.h"
#include "store/job_store.h"
#include "store/messages.h"

namespace greyhound::ctl {
namespace {

void print_verdict(const std::string& job, const PreflightReport& r) {
  const char* state = r.state == "passed" ? "PASSED" : r.state == "slow" ? "SLOW" : "FAILED";
  std::printf("pre-flight %s of job %s: %s", r.id.c_str(), job.c_str(), state);
  if (r.state != "failed") {
    std::printf(" (%d ranks paused %.2f s at iteration %lld, tests %.2f s; %d GPUs and %d transfers over %d groups judged)",
                r.ranks, r.pause_s, static_cast<long long>(r.at_iteration), r.tests_s, r.gpus_tested,
                r.transfers_tested, r.groups_tested);
  }
  std::printf("\n  %s\n", r.reason.c_str());
  for (const ValidatedGpu& g : r.slow_gpus) {
    std::printf("  slow GPU: rank %d (node %d): GEMM %.3g ms, %.2fx the median of the others (%.3g ms)\n", g.rank, g.node,
                g.ms, g.ratio, g.peers_ms);
  }
  for (const PreflightLink& l : r.slow_links) {
    std::printf("  slow link: nodes %d-%d (%s): %.3g GB/s against %.3g GB/s for its class, %.2fx the time (%d transfer%s)\n",
                l.node_a, l.node_b, l.link_class.c_str(), l.gb_per_s, l.peers_gb_per_s, l.ratio, l.transfers,
                l.transfers == 1 ? "" : "s");
  }
  if (r.exit) std::printf("  the job's ranks were told to exit with status %d (--fail-on-slow)\n", kPauseExitStatus);
}

}  // namespace

int cmd_preflight(const Argv& argv) {
  const Args args(argv, {"job", "redis", "timeout-s"}, {"fail-on-slow", "json", "no-wait"});
  const std::string job = job_arg(args);
  const double timeout_s = args.number("timeout-s", 600);
  if (!(timeout_s > 0 && timeout_s <= 86400)) throw ArgError("--timeout-s must be in (0, 86400]");
  RedisClient::Options o;
  o.endpoint = redis_endpoint_from_env(args.str("redis", ""));
  RedisClient client(o);
  if (!client.ensure_connected()) throw std::runtime_error(client.last_error());
  store::JobStore st(client, job);
  PreflightRequest req;
  req.t_unix_ms = unix_ms_now();
  req.id = "pf-" + std::to_string(req.t_unix_ms) + "-" + std::to_string(::getpid());
  req.fail_on_slow = args.flag("fail-on-slow");
  if (const Status s = st.request_preflight(req); !s) throw std::runtime_error(s.error());
  std::fprintf(stderr, "greyhoundctl preflight: requested %s for job %s%s\n", req.id.c_str(), job.c_str(),
               req.fail_on_slow ? " (fail on slow)" : "");
  if (args.flag("no-wait")) {
    std::printf("%s\n", req.id.c_str());
    return 0;
  }
  const auto start = std::chrono::steady_clock::now();
  std::string last;
  while (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < timeout_s) {
    auto got = st.preflight_result();
    if (!got && got.code() == Errc::kUnavailable) throw std::runtime_error(got.error());
    if (!got) {
      if (last != got.error()) std::fprintf(stderr, "greyhoundctl preflight: the answer is malformed: %s\n", got.error().c_str());
      last = got.error();
    } else if (*got && (*got)->id == req.id) {
      const PreflightReport& r = **got;
      if (r.done()) {
        if (args.flag("json")) {
          std::printf("%s\n", to_json(r).dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
        } else {
          print_verdict(job, r);
        }
        return r.state == "passed" ? 0 : r.state == "slow" ? 3 : 1;
      }
      const std::string now = r.state + ": " + r.reason;
      if (now != last) std::fprintf(stderr, "greyhoundctl preflight: %s\n", now.c_str());
      last = now;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  // Given up on: a request left behind would pause (or, with --fail-on-slow, end) a later job of this name.
  auto withdrawn = st.withdraw_preflight(req.id);
  std::fprintf(stderr,
               "greyhoundctl preflight: no verdict within %.0f s (is a master serving job %s? `greyhoundctl status --job "
               "%s` shows it); %s\n",
               timeout_s, job.c_str(), job.c_str(),
               withdrawn && *withdrawn ? "the request is withdrawn"
                                       : "the request was not withdrawn (it is running, or another replaced it)");
  return 1;
}

}  // namespace greyhound::ctl
