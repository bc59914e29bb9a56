// greyhoundctl plan --job J (--microbatches M1,M2,.. [--placement JSON|FILE] | --placement JSON|FILE | --revert
// | --release) [--reason TEXT] [--redis URL] [--timeout-s S] [--no-wait]: an operator's manual plan
// (docs/operations.md, "Manual plans"). It is written to the job store (key "operator_plan") after the same
// checks the master's reader makes; the master checks it against the job's layout, publishes it as the
// job's next plan within a second and answers (key "operator_plan:result"). While an apply or a revert
// stands, greyhound proposes no remedy of its own; --release gives the configuration back to it.
// --placement: a JSON array of {"rank","tp","dp","pp"} (every launch rank's role), inline or in a file.
// Exit status: 0 published (or released); 2 bad usage, or refused by the master (the reason on stderr);
// 1 no answer within --timeout-s (default 30; the request stays), or Redis failed.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
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

int cmd_operator_plan(const Argv& argv) {
  const Args args(argv, {"job", "redis", "microbatches", "placement", "reason", "timeout-s"},
                  {"revert", "release", "no-wait"});
  const std::string job = sanitize_job_name(args.str("job"));
  const bool apply = args.has("microbatches") || args.has("placement");
  if (apply + args.flag("revert") + args.flag("release") != 1) {
    throw ArgError("give one of: --microbatches and/or --placement (a plan), --revert, --release");
  }
  const double timeout_s = args.number("timeout-s", 30);
  if (!(timeout_s > 0 && timeout_s <= 86400)) throw ArgError("--timeout-s must be in (0, 86400]");
  nlohmann::json req = {{"action", apply ? "apply" : args.flag("revert") ? "revert" : "release"},
                        {"reason", args.str("reason", "")}};
  if (args.has("microbatches")) {
    nlohmann::json m = nlohmann::json::array();
    for (std::int64_t x : parse_integer_list(args.str("microbatches"), "--microbatches")) m.push_back(x);
    req["microbatches"] = m;
  }
  if (args.has("placement")) {
    std::string text = args.str("placement");
    if (text.empty() || text[0] != '[') {
      std::ifstream in(text);
      if (!in) throw ArgError("--placement: neither a JSON array nor a readable file: " + text);
      std::stringstream ss;
      ss << in.rdbuf();
      text = ss.str();
    }
    try {
      req["placement"] = nlohmann::json::parse(text);
    } catch (const std::exception& e) {
      throw ArgError(std::string("--placement: not JSON: ") + e.what());
    }
  }
  req["t_unix_ms"] = unix_ms_now();
  req["id"] = "op-" + std::to_string(req["t_unix_ms"].get<std::int64_t>()) + "-" + std::to_string(::getpid());
  std::string err;
  const auto checked = parse_operator_plan_request(req.dump(), &err);  // what the master's reader checks
  if (!checked) throw ArgError(err);

  RedisClient::Options o;
  o.endpoint = redis_endpoint_from_env(args.str("redis", ""));
  RedisClient client(o);
  if (!client.ensure_connected()) throw std::runtime_error(client.last_error());
  store::JobStore st(client, job);
  if (const Status s = st.write_operator_plan(*checked); !s) throw std::runtime_error(s.error());
  std::fprintf(stderr, "greyhoundctl plan: %s written for job %s (%s)\n", checked->id.c_str(), job.c_str(),
               checked->action.c_str());
  if (args.flag("no-wait")) {
    std::printf("%s\n", checked->id.c_str());
    return 0;
  }
  const auto start = std::chrono::steady_clock::now();
  while (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < timeout_s) {
    auto got = st.operator_plan_result();
    if (!got && got.code() == Errc::kUnavailable) throw std::runtime_error(got.error());
    if (got && *got && (*got)->id == checked->id) {
      const OperatorPlanReport& a = **got;
      if (a.state == "refused") {
        std::fprintf(stderr, "greyhoundctl plan: the master refused %s: %s\n", a.id.c_str(), a.reason.c_str());
        return 2;
      }
      if (a.state == "published") {
        std::printf("%s published as plan %lld: %s (the job applies it at its next iteration; `greyhoundctl events "
                    "--job %s` shows plan_applied)\n",
                    a.id.c_str(), static_cast<long long>(a.epoch), a.reason.c_str(), job.c_str());
      } else {
        std::printf("%s: %s\n", a.id.c_str(), a.reason.c_str());
      }
      return 0;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  std::fprintf(stderr, "greyhoundctl plan: no answer within %.0f s (is a master serving job %s?); the request stays\n",
               timeout_s, job.c_str());
  return 1;
}

}  // namespace greyhound::ctl
