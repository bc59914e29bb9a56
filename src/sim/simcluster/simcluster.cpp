// greyhound-simcluster: runs a simulated TP x DP x PP training job (greyhound-minitrain ranks on the CPU
// stand-ins, G GPUs per virtual node) with a fault schedule and, unless --no-greyhound, all of greyhound:
// a private redis-server, the master, and the ranks under greyhound-run (which preloads libgreyhound.so and
// starts one agent per virtual node). Each virtual node has its own shm dir, as each host has its own
// /dev/shm. Writes a report with the iterations and every event of the job's stream. Stops everything
// cleanly on Ctrl-C.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/args.h"
#include "common/clock.h"
#include "greyhound/config.h"
#include "greyhound/ring.h"
#include "sim/fault_schedule.h"
#include "sim/sim_model.h"
#include "sim/sim_process.h"
#include "sim/simcluster/cluster_services.h"
#include "sim/simcluster/rank_launcher.h"
#include "sim/simcluster/run_report.h"

namespace fs = std::filesystem;
namespace gs = greyhound::sim;
using nlohmann::json;

namespace {

volatile bool g_stop = false;
void on_signal(int) { g_stop = true; }

std::string self_dir() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(".") : exe.parent_path().string();
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, sep)) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

void usage() {
  std::printf(
      "usage: greyhound-simcluster --tp T --dp D --pp P --gpus-per-node G --microbatches M\n"
      "         (--iterations N | --duration-s S) [--faults FILE] [--report FILE] [--no-greyhound] [--seed N]\n"
      "         [--job NAME] [--work-dir DIR] [--keep] [--shm-dir DIR] [--model JSON|FILE]\n"
      "         [--hidden H] [--rows B] [--layers L] [--dp-sync allreduce|rs-ag] [--group-init split|uniqueid]\n"
      "         [--call-log] [--rank-env K=V,K=V] [--timeout-s S] [--redis URL] [--chaos JSON|FILE] [--mitigate]\n"
      "         [--quiet]\n");
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> argvv(argv + 1, argv + argc);
  json config;
  gs::FaultSchedule faults;
  std::string faults_path, report_path, job, work_dir, shm_dir, model_text, rank_env, external_redis;
  std::vector<gs::ChaosAction> chaos;
  bool hook = true, keep = false, call_log = false, quiet = false, mitigate = false;
  int T = 0, D = 0, P = 0, G = 0, M = 0;
  std::int64_t iterations = 0, seed = 1, timeout_s = 0;
  double duration_s = 0;
  std::vector<std::string> minitrain_extra;
  try {
    const greyhound::Args a(argvv,
                            {"tp", "dp", "pp", "gpus-per-node", "microbatches", "iterations", "duration-s", "faults",
                             "report", "seed", "job", "work-dir", "shm-dir", "model", "hidden", "rows", "layers",
                             "dp-sync", "group-init", "rank-env", "timeout-s", "redis", "chaos"},
                            {"no-greyhound", "keep", "call-log", "quiet", "help", "mitigate"});
    if (a.flag("help")) {
      usage();
      return 0;
    }
    T = static_cast<int>(a.integer_in("tp", 1, 1, 64));
    D = static_cast<int>(a.integer_in("dp", 1, 1, 1024));
    P = static_cast<int>(a.integer_in("pp", 1, 1, 64));
    G = static_cast<int>(a.integer_in("gpus-per-node", 4, 1, 1024));
    M = static_cast<int>(a.integer_in("microbatches", 4, 1, 4096));
    iterations = a.integer_in("iterations", 0, 0, 1 << 24);
    duration_s = a.number("duration-s", 0.0);
    if ((iterations > 0) == (duration_s > 0)) throw greyhound::ArgError("give exactly one of --iterations, --duration-s");
    if (duration_s < 0) throw greyhound::ArgError("--duration-s must be positive");
    if (T * D * P > 256) throw greyhound::ArgError("at most 256 ranks");
    if (T > G || G % T != 0) throw greyhound::ArgError("--gpus-per-node must be a multiple of --tp (TP stays in a node)");
    seed = a.integer("seed", 1);
    timeout_s = a.integer_in("timeout-s", 120, 1, 86400);
    hook = !a.flag("no-greyhound");
    keep = a.flag("keep");
    call_log = a.flag("call-log");
    mitigate = a.flag("mitigate");
    if (mitigate && !hook) throw greyhound::ArgError("--mitigate needs greyhound (drop --no-greyhound)");
    quiet = a.flag("quiet");
    faults_path = a.str("faults", "");
    report_path = a.str("report", "");
    job = a.str("job", "sim-" + std::to_string(getpid()));
    work_dir = a.str("work-dir", "");
    shm_dir = a.str("shm-dir", "");
    rank_env = a.str("rank-env", "");
    external_redis = a.str("redis", "");
    if (a.has("chaos")) chaos = gs::parse_chaos(json::parse(gs::read_json_arg(a.str("chaos"), "--chaos")));
    if (!hook && (!chaos.empty() || !external_redis.empty())) {
      throw greyhound::ArgError("--chaos and --redis need greyhound (drop --no-greyhound)");
    }
    // Default: the stand-ins' own defaults (sim_model.h), tuned for iterations of a few hundred ms.
    model_text = a.has("model") ? gs::read_json_arg(a.str("model"), "--model") : gs::SimModel{}.to_json().dump();
    {
      json m = json::parse(model_text);  // validate now, not in every rank
      gs::SimModel::parse(m);
      m["gpus_per_node"] = G;  // --gpus-per-node decides
      model_text = m.dump();
    }
    if (!faults_path.empty()) faults = gs::FaultSchedule::parse_text(gs::read_json_arg(faults_path, "--faults"));
    for (const char* k : {"hidden", "rows", "layers", "dp-sync", "group-init"}) {
      if (a.has(k)) {
        minitrain_extra.push_back(std::string("--") + k);
        minitrain_extra.push_back(a.str(k));
      }
    }
    config = {{"tp", T}, {"dp", D}, {"pp", P}, {"gpus_per_node", G}, {"microbatches", M},
              {"nodes", (T * D * P + G - 1) / G}, {"greyhound", hook}, {"mitigate", mitigate}, {"seed", seed}, {"job", job},
              {"model", json::parse(model_text)}};
    if (iterations > 0) config["iterations"] = iterations;
    if (duration_s > 0) config["duration_s"] = duration_s;
  } catch (const greyhound::ArgError& e) {
    std::fprintf(stderr, "greyhound-simcluster: %s\n", e.what());
    return 2;
  } catch (const gs::FaultScheduleError& e) {
    std::fprintf(stderr, "greyhound-simcluster: --faults %s: %s\n", faults_path.c_str(), e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "greyhound-simcluster: %s\n", e.what());
    return 2;
  }

  const std::string bin = self_dir();
  const std::string minitrain = bin + "/greyhound-minitrain";
  const std::string hook_lib = fs::weakly_canonical(bin + "/../lib/libgreyhound.so").string();
  const std::string sim_lib_dir = fs::weakly_canonical(bin + "/../lib/sim").string();
  if (access(minitrain.c_str(), X_OK) != 0 || (hook && access(hook_lib.c_str(), R_OK) != 0)) {
    std::fprintf(stderr, "greyhound-simcluster: cannot find %s or %s (run from the build tree)\n", minitrain.c_str(),
                 hook_lib.c_str());
    return 1;
  }

  // Work dir: rank logs, rendezvous files, the fault schedule as given to the ranks.
  bool own_work_dir = false;
  if (work_dir.empty()) {
    char tmpl[] = "/tmp/greyhound-sim-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) {
      std::perror("greyhound-simcluster: mkdtemp");
      return 1;
    }
    work_dir = tmpl;
    own_work_dir = !keep;
  }
  // A work dir reused from an earlier run: its rendezvous files name that run's communicators.
  std::error_code rdzv_ec;
  fs::remove_all(work_dir + "/rdzv", rdzv_ec);
  fs::create_directories(work_dir + "/rdzv");
  // Communicator segments of the stand-ins: tmpfs when there is one.
  std::string sim_dir = "/dev/shm/greyhound-sim-" + std::to_string(getpid());
  if (!fs::create_directories(sim_dir) && !fs::is_directory(sim_dir)) sim_dir = work_dir + "/sim";
  fs::create_directories(sim_dir);
  // Each virtual node has its own shm dir (rings and its agent's lock), as each host has its own /dev/shm.
  const int world = T * D * P;
  const int nodes = (world + G - 1) / G;
  const std::string shm_base = !shm_dir.empty() ? shm_dir : keep ? work_dir + "/shm" : sim_dir + "/shm";
  std::vector<std::string> node_dirs;
  for (int n = 0; n < nodes; ++n) {
    node_dirs.push_back(shm_base + "/node" + std::to_string(n));
    fs::create_directories(node_dirs.back());
  }
  const std::string faults_file = work_dir + "/faults.json";
  std::ofstream(faults_file) << faults.to_json().dump(2) << "\n";

  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);

  const std::uint64_t epoch_ns = greyhound::clock_ns(CLOCK_MONOTONIC);
  auto job_time_now = [&] { return static_cast<double>(greyhound::clock_ns(CLOCK_MONOTONIC) - epoch_ns) * 1e-9; };

  int rc = 0;
  std::unique_ptr<gs::ClusterServices> services;
  if (hook) {
    gs::ClusterServices::Options so;
    so.bin_dir = bin;
    so.work_dir = work_dir;
    so.data_dir = sim_dir + "/redis";
    fs::create_directories(so.data_dir);
    so.job = job;
    so.node_shm_dirs = node_dirs;
    so.external_redis = external_redis;
    so.epoch_ns = epoch_ns;
    so.chaos = chaos;
    so.mitigate = mitigate;
    services = std::make_unique<gs::ClusterServices>(so);
    std::string err;
    if (!services->start(&err)) {
      std::fprintf(stderr, "greyhound-simcluster: %s\n", err.c_str());
      rc = 1;
    }
  }

  std::vector<pid_t> pids;
  std::vector<std::string> names;
  for (int r = 0; r < world && rc == 0; ++r) {
    const int node = r / G;
    gs::ChildSpec spec;
    spec.name = "rank " + std::to_string(r);
    if (hook) {
      // Through the operators' launcher: it preloads the hook and starts the node's agent once.
      spec.argv = {bin + "/greyhound-run", "--job", job, "--node", std::to_string(node), "--redis",
                   services->redis_url(), "--agent-log", work_dir + "/agent" + std::to_string(node) + ".log",
                   "--agent-args", "--idle-exit-s 2"};
      // The node's shm dir, unless --rank-env overrides it (tests of an unusable one).
      if (rank_env.find("GREYHOUND_SHM_DIR=") == std::string::npos) {
        spec.argv.insert(spec.argv.end(), {"--shm-dir", node_dirs[static_cast<std::size_t>(node)]});
      }
      spec.argv.push_back("--");
    }
    spec.argv.insert(spec.argv.end(),
                     {minitrain, "--tp", std::to_string(T), "--dp", std::to_string(D), "--pp", std::to_string(P),
                      "--microbatches", std::to_string(M), "--rdzv", work_dir + "/rdzv", "--seed", std::to_string(seed)});
    if (iterations > 0) {
      spec.argv.insert(spec.argv.end(), {"--iterations", std::to_string(iterations)});
    } else {
      spec.argv.insert(spec.argv.end(), {"--duration-s", std::to_string(duration_s)});
    }
    spec.argv.insert(spec.argv.end(), minitrain_extra.begin(), minitrain_extra.end());
    if (call_log) spec.argv.insert(spec.argv.end(), {"--call-log", work_dir + "/calls." + std::to_string(r) + ".csv"});
    if (mitigate) spec.argv.insert(spec.argv.end(), {"--plan", "--redis", services->redis_url(), "--job", job});
    spec.env = {{"RANK", std::to_string(r)},
                {"WORLD_SIZE", std::to_string(world)},
                {"LOCAL_RANK", std::to_string(r % G)},
                {"GREYHOUND_JOB", job},
                {"GREYHOUND_JOB_EPOCH_NS", std::to_string(epoch_ns)},
                {"GREYHOUND_SHM_DIR", node_dirs[static_cast<std::size_t>(node)]},
                {"GREYHOUND_SIM_GPUS_PER_NODE", std::to_string(G)},
                {"GREYHOUND_SIM_EPOCH_NS", std::to_string(epoch_ns)},
                {"GREYHOUND_SIM_FAULTS", faults_file},
                {"GREYHOUND_SIM_MODEL", model_text},
                {"GREYHOUND_SIM_DIR", sim_dir},
                {"GREYHOUND_SIM_TIMEOUT_S", std::to_string(timeout_s)},
                {"LD_LIBRARY_PATH", sim_lib_dir}};
    spec.unset_env = {"GREYHOUND_RANK", "GREYHOUND_SIM_RANK", "GREYHOUND_SIM_NODE", "LD_PRELOAD"};
    for (const auto& kv : split(rank_env, ',')) {
      const auto eq = kv.find('=');
      if (eq == std::string::npos) {
        std::fprintf(stderr, "greyhound-simcluster: --rank-env: '%s' is not K=V\n", kv.c_str());
        rc = 2;
        break;
      }
      spec.env[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
    if (rc != 0) break;
    spec.stdout_path = work_dir + "/rank" + std::to_string(r) + ".out";
    spec.stderr_path = work_dir + "/rank" + std::to_string(r) + ".err";
    std::string err;
    const pid_t pid = gs::spawn(spec, &err);
    if (pid < 0) {
      std::fprintf(stderr, "greyhound-simcluster: %s\n", err.c_str());
      rc = 1;
      break;
    }
    pids.push_back(pid);
    names.push_back(spec.name);
  }
  if (!quiet && rc == 0) {
    std::printf("greyhound-simcluster: %d ranks (TP%d x DP%d x PP%d) on %d virtual nodes of %d GPUs, %s, job %s\n",
                world, T, D, P, nodes, G,
                hook ? ("with greyhound (Redis " + services->redis_url() + ")").c_str() : "without greyhound",
                job.c_str());
    std::fflush(stdout);
  }

  // Follow rank 0's iteration lines while the job runs; run the chaos schedule.
  std::size_t shown = 0;
  const std::string rank0_out = work_dir + "/rank0.out";
  auto tick = [&] {
    if (services) services->on_tick(job_time_now());
    if (quiet) return;
    std::ifstream in(rank0_out);
    std::string line;
    std::size_t n = 0;
    while (std::getline(in, line)) {
      if (n++ < shown) continue;
      if (auto it = gs::parse_iteration_line(line)) {
        std::printf("  iter %4ld  t=%7.2fs  %8.1f ms\n", it->index, it->t_s, it->iter_ms);
      }
      shown = n;
    }
    std::fflush(stdout);
  };
  std::vector<gs::ChildExit> exits;
  if (rc == 0) exits = gs::wait_all(pids, names, &g_stop, true, tick);
  else gs::stop_all(pids, 2.0);

  for (const auto& e : exits) {
    if (e.exit_code != 0 && rc == 0) {
      rc = g_stop ? 130 : 1;
      if (!g_stop) {
        const std::string idx = e.name.substr(e.name.find(' ') + 1);
        std::fprintf(stderr, "greyhound-simcluster: %s exited with %d; its last lines:\n%s", e.name.c_str(),
                     e.exit_code, gs::tail_file(work_dir + "/rank" + idx + ".err", 10).c_str());
      }
    }
  }
  json events = json::array();
  if (services) {
    if (rc == 0) services->finish();
    events = services->events();
    services->stop_all();
  }

  std::ifstream in(rank0_out);
  std::stringstream ss;
  ss << in.rdbuf();
  const auto its = gs::parse_iteration_log(ss.str());
  json report;
  report["config"] = config;
  report["faults"] = faults.to_json()["faults"];
  report["iterations"] = json::array();
  for (const auto& it : its) report["iterations"].push_back({{"index", it.index}, {"t_s", it.t_s}, {"iter_ms", it.iter_ms}});
  report["throughput_iter_per_min"] = gs::throughput_iter_per_min(its);
  report["events"] = events;
  if (services) report["chaos"] = services->chaos_log();
  report["exit_code"] = rc;
  const double healthy = gs::healthy_mean_iter_ms(its, faults, 2);
  report["healthy_iter_ms"] = std::isnan(healthy) ? json(nullptr) : json(healthy);
  if (!report_path.empty()) {
    std::ofstream out(report_path);
    out << report.dump(2) << "\n";
    if (!out) {
      std::fprintf(stderr, "greyhound-simcluster: cannot write --report %s\n", report_path.c_str());
      if (rc == 0) rc = 1;
    }
  }
  if (!quiet) {
    std::printf("\n%zu iterations, %.1f iterations/min, healthy mean %.1f ms\n", its.size(),
                report["throughput_iter_per_min"].get<double>(), healthy);
    for (const auto& f : faults.faults()) {
      std::printf("  during %s fault [%.0f s, %.0f s): mean %.1f ms\n", gs::fault_kind_name(f.kind), f.start_s,
                  f.end_s, gs::mean_iter_ms_between(its, f.start_s, f.end_s));
    }
    const std::string tl = gs::format_timeline(report);
    if (!tl.empty()) std::printf("timeline:\n%s", tl.c_str());
  }

  std::error_code ec;
  fs::remove_all(sim_dir, ec);  // communicator segments, Redis data, and the rings unless kept
  if (own_work_dir) fs::remove_all(work_dir, ec);
  if (!own_work_dir && !quiet) std::printf("logs in %s\n", work_dir.c_str());
  return rc;
}
