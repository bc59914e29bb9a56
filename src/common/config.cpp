#include "greyhound/config.h"

#include <cstdlib>

#include "common/text.h"

namespace greyhound {
namespace {

bool parse_int(const char* s, long long lo, long long hi, long long* out) {
  if (s == nullptr) return false;
  const auto v = parse_integer(s);
  if (!v || *v < lo || *v > hi) return false;
  *out = *v;
  return true;
}

const char* first_set(const char* (*get)(const char*), std::initializer_list<const char*> names,
                      const char** which) {
  for (const char* n : names) {
    const char* v = get(n);
    if (v != nullptr && *v != '\0') {
      *which = n;
      return v;
    }
  }
  return nullptr;
}

const char* real_getenv(const char* name) { return std::getenv(name); }

}  // namespace

LogLevel parse_log_level(const std::string& s, bool* ok) {
  *ok = true;
  if (s == "trace") return LogLevel::kTrace;
  if (s == "debug") return LogLevel::kDebug;
  if (s == "info") return LogLevel::kInfo;
  if (s == "warn" || s == "warning") return LogLevel::kWarn;
  if (s == "error") return LogLevel::kError;
  if (s == "off") return LogLevel::kOff;
  *ok = false;
  return LogLevel::kWarn;
}

EnvConfig read_env_config() { return read_env_config(&real_getenv); }

EnvConfig read_env_config(const char* (*get)(const char*)) {
  EnvConfig c;
  auto warn = [&](const char* name, const char* value, const char* want) {
    c.warnings.push_back(std::string(name) + "='" + value + "' is not " + want + "; using the default");
  };
  if (const char* v = get("GREYHOUND_JOB"); v != nullptr && *v != '\0') c.job = v;
  if (const char* v = get("GREYHOUND_REDIS"); v != nullptr) c.redis = v;
  if (const char* v = get("GREYHOUND_REDIS_PASSWORD_FILE"); v != nullptr) c.redis_password_file = v;
  if (const char* v = get("GREYHOUND_DISABLE"); v != nullptr && *v != '\0') {
    const std::string s = v;
    if (s == "1" || s == "true" || s == "yes") {
      c.disable = true;
    } else if (s != "0" && s != "false" && s != "no") {
      warn("GREYHOUND_DISABLE", v, "0 or 1");
    }
  }
  if (const char* v = get("GREYHOUND_LOG_LEVEL"); v != nullptr && *v != '\0') {
    bool ok = false;
    const LogLevel level = parse_log_level(v, &ok);
    if (ok) {
      c.log_level = level;
      c.log_level_set = true;
    }
    if (!ok) warn("GREYHOUND_LOG_LEVEL", v, "one of trace, debug, info, warn, error, off");
  }
  if (const char* v = get("GREYHOUND_SHM_DIR"); v != nullptr && *v != '\0') c.shm_dir = v;
  if (const char* v = get("GREYHOUND_RING_RECORDS"); v != nullptr && *v != '\0') {
    long long n = 0;
    if (parse_int(v, 64, 1ll << 30, &n)) {
      c.ring_records = static_cast<std::uint64_t>(n);
    } else {
      warn("GREYHOUND_RING_RECORDS", v, "an integer in [64, 2^30]");
    }
  }
  const char* which = nullptr;
  if (const char* v = first_set(get, {"GREYHOUND_RANK", "RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK",
                                      "SLURM_PROCID"}, &which)) {
    long long n = 0;
    if (parse_int(v, 0, 1 << 30, &n)) {
      c.rank = static_cast<int>(n);
    } else {
      warn(which, v, "a rank (non-negative integer)");
    }
  }
  if (const char* v = first_set(get, {"GREYHOUND_LOCAL_RANK", "LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
                                      "SLURM_LOCALID"}, &which)) {
    long long n = 0;
    if (parse_int(v, 0, 1 << 30, &n)) {
      c.local_rank = static_cast<int>(n);
    } else {
      warn(which, v, "a local rank (non-negative integer)");
    }
  }
  if (const char* v = first_set(get, {"GREYHOUND_NODE", "GROUP_RANK", "NODE_RANK", "SLURM_NODEID"}, &which)) {
    long long n = 0;
    if (parse_int(v, 0, 1 << 24, &n)) {
      c.node = static_cast<int>(n);
    } else {
      warn(which, v, "a node index (non-negative integer)");
    }
  }
  if (const char* v = get("GREYHOUND_JOB_EPOCH_NS"); v != nullptr && *v != '\0') {
    long long n = 0;
    if (parse_int(v, 0, INT64_MAX, &n)) {
      c.job_epoch_ns = static_cast<std::uint64_t>(n);
    } else {
      warn("GREYHOUND_JOB_EPOCH_NS", v, "a CLOCK_MONOTONIC time in ns");
    }
  }
  return c;
}

}  // namespace greyhound
