// The one reader of greyhound's environment variables (documented in README, "Configuration").
// Plain std only: libgreyhound.so uses it at initialisation.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace greyhound {

enum class LogLevel { kTrace = 0, kDebug, kInfo, kWarn, kError, kOff };

struct EnvConfig {
  std::string job = "default";      // GREYHOUND_JOB
  std::string redis;                // GREYHOUND_REDIS (empty: redis://127.0.0.1:6379/0)
  std::string redis_password_file;  // GREYHOUND_REDIS_PASSWORD_FILE (used when the URL has no password)
  bool disable = false;             // GREYHOUND_DISABLE=1
  LogLevel log_level = LogLevel::kWarn;  // GREYHOUND_LOG_LEVEL
  bool log_level_set = false;            // ... was set (and valid): it overrides a program's own default
  std::string shm_dir = "/dev/shm"; // GREYHOUND_SHM_DIR
  std::uint64_t ring_records = 32768;  // GREYHOUND_RING_RECORDS
  int rank = -1;        // GREYHOUND_RANK, else RANK, OMPI_COMM_WORLD_RANK, PMI_RANK, SLURM_PROCID
  int local_rank = -1;  // GREYHOUND_LOCAL_RANK, else LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID
  int node = 0;         // GREYHOUND_NODE, else GROUP_RANK, NODE_RANK, SLURM_NODEID
  std::uint64_t job_epoch_ns = 0;  // GREYHOUND_JOB_EPOCH_NS: CLOCK_MONOTONIC origin of job time (0: unset)
  std::vector<std::string> warnings;  // one line per variable that was set but invalid (default used)
};

// Reads the process environment.
EnvConfig read_env_config();
// Reads from a lookup function (tests): returns nullptr for unset variables.
EnvConfig read_env_config(const char* (*getenv_fn)(const char*));

LogLevel parse_log_level(const std::string& s, bool* ok);

}  // namespace greyhound
