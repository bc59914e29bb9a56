// greyhound-agent: the per-node agent (see agent.h). Thin composition root: flags and environment in,
// Agent loop, clean stop on SIGTERM/SIGINT. At most one agent per job and node: it holds an exclusive lock
// on <shm-dir>/greyhound.<job>.agent.lock (holding its pid) for its lifetime.
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>

#include <spdlog/spdlog.h>

#include "agent/agent.h"
#include "common/args.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/private_file.h"
#include "common/redis_client.h"
#include "greyhound/config.h"
#include "greyhound/ring.h"

namespace {

volatile std::sig_atomic_t g_stop = 0;
void on_signal(int) { g_stop = 1; }

}  // namespace

std::string agent_lock_path(const std::string& shm_dir, const std::string& job) {
  return shm_dir + "/" + greyhound::ring_file_name(job, "agent.lock");
}

int main(int argc, char** argv) {
  greyhound::init_logging("greyhound-agent");
  const std::vector<std::string> args(argv + 1, argv + argc);
  greyhound::hide_redis_passwords(argc, argv, "greyhound-agent");
  const greyhound::EnvConfig env = greyhound::read_env_config();
  greyhound::agent::AgentConfig cfg;
  try {
    const greyhound::Args a(args,
                            {"job", "node", "shm-dir", "redis", "poll-ms", "heartbeat-ms", "idle-exit-s", "method",
                             "epoch-ns", "hang-iterations", "hang-min-s", "pause-poll-ms"},
                            {"help"});
    if (a.flag("help")) {
      std::printf(
          "usage: greyhound-agent [--job J] [--node N] [--shm-dir DIR] [--redis URL] [--poll-ms MS] [--pause-poll-ms MS]\n"
          "         [--heartbeat-ms MS] [--idle-exit-s S] [--method bocd+v|bocd|window] [--epoch-ns NS]\n"
          "         [--hang-iterations K] [--hang-min-s S]\n"
          "a rank inside one NCCL call, or in none, for K x its iteration time (default 10) and at least S seconds\n"
          "(default 60) is reported as stalled; while ranks stand still in a validation pause the agent steps every\n"
          "--pause-poll-ms (default 10) instead of --poll-ms (default 50)\n"
          "defaults from GREYHOUND_JOB, GREYHOUND_NODE, GREYHOUND_SHM_DIR, GREYHOUND_REDIS, GREYHOUND_JOB_EPOCH_NS\n");
      return 0;
    }
    cfg.job = a.str("job", env.job);
    if (auto why = greyhound::job_name_error(cfg.job); !why.empty()) throw greyhound::ArgError("--job: " + why);
    cfg.node = static_cast<int>(a.integer_in("node", env.node, 0, 1 << 24));
    cfg.shm_dir = a.str("shm-dir", env.shm_dir);
    if (cfg.shm_dir.empty()) throw greyhound::ArgError("--shm-dir must name a directory");
    cfg.redis = greyhound::redis_endpoint_from_env(a.str("redis", ""));
    cfg.poll_ms = static_cast<int>(a.integer_in("poll-ms", 50, 1, 60000));
    cfg.pause_poll_ms = static_cast<int>(a.integer_in("pause-poll-ms", 10, 1, 60000));
    cfg.hang_iterations = a.number("hang-iterations", cfg.hang_iterations);
    if (!(cfg.hang_iterations >= 1 && cfg.hang_iterations <= 1e6)) throw greyhound::ArgError("--hang-iterations must be in [1, 1000000]");
    cfg.hang_min_s = a.number("hang-min-s", cfg.hang_min_s);
    if (!(cfg.hang_min_s >= 0.1 && cfg.hang_min_s <= 86400)) throw greyhound::ArgError("--hang-min-s must be in [0.1, 86400]");
    cfg.heartbeat_ms = static_cast<int>(a.integer_in("heartbeat-ms", 1000, 10, 600000));
    cfg.idle_exit_s = a.number("idle-exit-s", 0.0);
    const auto method = greyhound::analysis::method_from_name(a.str("method", "bocd+v"));
    if (!method) throw greyhound::ArgError("--method: bocd+v, bocd or window");
    cfg.method = *method;
    cfg.epoch_ns = static_cast<std::uint64_t>(a.integer("epoch-ns", static_cast<std::int64_t>(env.job_epoch_ns)));
  } catch (const greyhound::ArgError& e) {
    std::fprintf(stderr, "greyhound-agent: %s\n", e.what());
    return 2;
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "greyhound-agent: %s\n", e.what());
    return 2;
  }

  const std::string lock = agent_lock_path(cfg.shm_dir, cfg.job);
  // The lock is only trusted when it is this user's own file: a symlink or another user's file planted at its
  // name in a shared directory is refused loudly (exit 1), never followed nor taken for a running agent.
  std::string lock_error;
  const int fd = greyhound::open_private_file(lock, &lock_error);
  if (fd < 0) {
    spdlog::error("cannot use the agent lock {} (use a --shm-dir only this user can write to)", lock_error);
    return 1;
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    spdlog::info("an agent for job {} already runs on this node ({}): exiting", cfg.job, lock);
    return 0;
  }
  const std::string pid = std::to_string(getpid()) + "\n";
  if (ftruncate(fd, 0) != 0 || pwrite(fd, pid.data(), pid.size(), 0) < 0) spdlog::warn("cannot write {}", lock);

  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);

  spdlog::info("agent for job {} node {}: rings in {}, Redis {}", cfg.job, cfg.node, cfg.shm_dir, cfg.redis.describe());
  greyhound::agent::Agent agent(cfg);
  while (g_stop == 0) {
    const std::uint64_t now = greyhound::clock_ns(CLOCK_MONOTONIC);
    agent.step(now);
    if (agent.idle(now)) {
      spdlog::info("every rank has finished: exiting");
      break;
    }
    usleep(static_cast<useconds_t>(agent.sleep_ms()) * 1000);
  }
  const std::uint64_t now = greyhound::clock_ns(CLOCK_MONOTONIC);
  agent.shutdown(now, now + 3'000'000'000ull);
  ::close(fd);  // releases the lock; the file stays (unlinking it could let two agents lock two inodes)
  return 0;
}
