// greyhoundctl set --job J [--redis URL] [--reset] [KEY=VALUE ...]: changes the job's run-time settings
// (JobSettings, key "settings"): each KEY=VALUE sets one (checked against its range before anything is
// written), KEY= unsets it (back to the programs' own default), --reset unsets them all. The agents apply the
// detection ones at their next heartbeat, the master the others within a second (docs/operations.md).
// greyhoundctl pause-detection / resume-detection --job J [--redis URL]: detection_paused=true / unset.
// Each prints the settings now in force as JSON. Two operators writing at once: the last write wins.
#include <cstdio>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/ctl_commands.h"
#include "common/args.h"
#include "common/redis_client.h"
#include "greyhound/ring.h"
#include "store/job_store.h"
#include "store/messages.h"

namespace greyhound::ctl {
namespace {

// Reads the settings, changes them with `change` (which throws ArgError on a bad one), writes them back.
template <class Change>
int update(const Args& args, Change change) {
  const std::string job = job_arg(args);
  RedisClient::Options o;
  o.endpoint = redis_endpoint_from_env(args.str("redis", ""));
  RedisClient client(o);
  if (!client.ensure_connected()) throw std::runtime_error(client.last_error());
  store::JobStore st(client, job);
  auto current = st.settings();
  if (!current && current.code() == Errc::kUnavailable) throw std::runtime_error(current.error());
  JobSettings s;
  if (current && *current) {
    s = **current;
  } else if (!current) {
    std::fprintf(stderr, "greyhoundctl: the job's settings were malformed (%s); starting from none\n", current.error().c_str());
  }
  change(s);
  ++s.version;
  s.t_unix_ms = unix_ms_now();
  if (const Status w = st.write_settings(s); !w) throw std::runtime_error(w.error());
  std::printf("%s\n", to_json(s).dump(2).c_str());
  return 0;
}

}  // namespace

int cmd_set(const Argv& argv) {
  const Args args(argv, {"job", "redis"}, {"reset"}, true);
  if (args.rest().empty() && !args.flag("reset")) {
    std::string keys;
    for (const std::string& k : job_setting_keys()) keys += (keys.empty() ? "" : ", ") + k;
    throw ArgError("nothing to set: give KEY=VALUE (KEY= to unset), or --reset; keys: " + keys);
  }
  // Every pair checked before anything is written: a bad one changes nothing.
  JobSettings probe;
  for (const std::string& kv : args.rest()) {
    if (kv.rfind("--", 0) == 0) throw ArgError("flags go before the settings: '" + kv + "'");
    const auto eq = kv.find('=');
    if (eq == std::string::npos) throw ArgError("'" + kv + "' is not KEY=VALUE");
    if (const std::string why = apply_job_setting(probe, kv.substr(0, eq), kv.substr(eq + 1)); !why.empty()) {
      throw ArgError(why);
    }
  }
  return update(args, [&](JobSettings& s) {
    if (args.flag("reset")) {
      JobSettings none;
      none.version = s.version;
      s = none;
    }
    for (const std::string& kv : args.rest()) {
      const auto eq = kv.find('=');
      apply_job_setting(s, kv.substr(0, eq), kv.substr(eq + 1));
    }
  });
}

int cmd_pause_detection(const Argv& argv) {
  const Args args(argv, {"job", "redis"}, {});
  return update(args, [](JobSettings& s) { s.detection_paused = true; });
}

int cmd_resume_detection(const Argv& argv) {
  const Args args(argv, {"job", "redis"}, {});
  return update(args, [](JobSettings& s) { s.detection_paused.reset(); });
}

}  // namespace greyhound::ctl
