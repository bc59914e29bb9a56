// greyhoundctl plan --job J (--microbatches M1,M2,.. [--placement JSON|FILE] | --placement JSON|FILE | --revert
// | --release) [--reason TEXT] [--redis URL] [--timeout-s S] [--no-wait]: an operator's manual plan
// (docs/operations.md, "Manual plans"). It is written to the job store (key "operator_plan") after the same
// checks the master's reader makes; the master checks it against the job's layout, publishes it as the
// job's next plan within a second and answers (key "operator_plan:result"). While an apply or a revert
// stands, greyhound proposes no remedy of its own; --release gives the configuration back to it.
// --placement: a JSON array of {"rank","tp","dp","pp"} (every launch rank's role), inline or in a file.
// Once published, it waits (within --timeout-s) for the job's answer and says it: applied by every rank (from
// which iteration), turned down by a rank (its reason), or not answered yet.
// Exit status: 0 published (applied by the job, or not answered yet), or released; 2 bad usage, refused by the
// master, or turned down by the job (the reason); 1 no answer from a master within --timeout-s (default 30;
// the request stays), or Redis failed.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "cli/ctl_commands.h"
#include "common/args.h"
#include "common/bounded_json.h"
#include "common/redis_client.h"
#include "greyhound/ring.h"
#include "store/job_store.h"
#include "store/messages.h"

namespace greyhound::ctl {

namespace {

// What the job did with plan `epoch`, waited for until `timeout_s` after `start`: every rank of its layout
// applied it (0), a rank turned it down (2, its reason), or no rank answered everything yet (0, said so).
int report_job_answer(store::JobStore& st, std::int64_t epoch, std::chrono::steady_clock::time_point start,
                      double timeout_s) {
  std::string said;
  while (true) {
    auto layout = st.layout();
    auto acks = st.plan_acks();
    if (acks && layout && *layout) {
      int applied = 0;
      std::int64_t from = -1;
      for (const auto& e : *acks) {
        if (!e.value || e.value->epoch != epoch) continue;
        if (e.value->status != AckStatus::kApplied) {
          std::printf("the job %s it (rank %d): %s\n", std::string(name(e.value->status)).c_str(), e.value->rank,
                      e.value->detail.c_str());
          return 2;
        }
        ++applied;
        from = std::max(from, e.value->iteration);
      }
      if (applied >= (**layout).world) {
        std::printf("the job applied it: all %d ranks, from iteration %lld\n", applied, static_cast<long long>(from));
        return 0;
      }
      said = std::to_string(applied) + " of " + std::to_string((**layout).world) + " ranks applied it so far";
    }
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() >= timeout_s) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  std::printf("the job has not answered yet%s (`greyhoundctl events --job %s` shows plan_applied or plan_rejected)\n",
              said.empty() ? "" : (": " + said).c_str(), st.job().c_str());
  return 0;
}

}  // namespace

int cmd_operator_plan(const Argv& argv) {
  const Args args(argv, {"job", "redis", "microbatches", "placement", "reason", "timeout-s"},
                  {"revert", "release", "no-wait"});
  const std::string job = job_arg(args);
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
      if (!std::ifstream(text)) throw ArgError("--placement: neither a JSON array nor a readable file: " + text);
      text = read_file(text, JsonLimits{}.max_bytes);
    }
    auto parsed = parse_bounded(text);  // the reader every outside text goes through: bounded depth and size
    if (!parsed) throw ArgError("--placement: " + parsed.error());
    req["placement"] = std::move(*parsed);
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
      if (a.state != "published") {
        std::printf("%s: %s\n", a.id.c_str(), a.reason.c_str());
        return 0;
      }
      std::printf("%s published as plan %lld: %s\n", a.id.c_str(), static_cast<long long>(a.epoch), a.reason.c_str());
      return report_job_answer(st, a.epoch, start, timeout_s);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  std::fprintf(stderr, "greyhoundctl plan: no answer within %.0f s (is a master serving job %s?); the request stays\n",
               timeout_s, job.c_str());
  return 1;
}

}  // namespace greyhound::ctl
