// greyhound-simcluster: runs a simulated TP x DP x PP training job (greyhound-minitrain ranks on the CPU
// stand-ins, G GPUs per virtual node) with a fault schedule and, unless --no-greyhound, all of greyhound:
// a private redis-server, the master, and the ranks under greyhound-run (which preloads libgreyhound.so and
// starts one agent per virtual node). Each virtual node has its own shm dir, as each host has its own
// /dev/shm. Writes a report with the iterations and every event of the job's stream. Stops everything
// cleanly on Ctrl-C. With --oracle: no detection at all (no master, no agents, no hook); the launcher itself
// plans the remedy for the faults in force from their schedule (oracle.h) and the ranks apply it.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/args.h"
#include "common/clock.h"
#include "common/private_file.h"
#include "common/redis_client.h"
#include "common/text.h"
#include "greyhound/config.h"
#include "greyhound/mitigate/ski_rental.h"
#include "greyhound/parallel_shape.h"
#include "greyhound/ring.h"
#include "sim/fault_schedule.h"
#include "sim/sim_model.h"
#include "sim/sim_process.h"
#include "sim/simcluster/cluster_services.h"
#include "sim/simcluster/oracle_driver.h"
#include "sim/simcluster/rank_launcher.h"
#include "sim/simcluster/restart_plan.h"
#include "sim/simcluster/run_report.h"
#include "sim/simcluster/time_scale.h"

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

// A validation pause's tests at the stand-ins' rates (sim_model.h: GEMM 0.035 GFLOP/s, links 400 and
// 4 MB/s): a 96^3 GEMM lasts ~50 ms (well above a launch, even on a host contended 40x); 8 and 16 KiB last
// ~2 and ~4 ms between nodes (the modeled clock times them exactly), ~70 and ~140 ms over a link at 3 %.
// Real hardware takes the master's defaults (8192^3, 16-64 MiB).
constexpr int kSimGemmN = 96;
constexpr const char* kSimP2pBytes = "8192,16384";
// Transfers inside a node last tens of microseconds here, where the host's scheduling on two shared cores
// adds as much and, with eight ranks in a pause, more than 1 ms at times (a CI run saw a transfer inside a
// node judged slow at that floor): a slow transfer must also exceed its class's median by 5 ms. The
// mildest congested link any test or schedule injects (10 %) adds 18 ms to an 8 KiB transfer, one at 3 %
// about 70 ms.
constexpr const char* kSimMinExcessMs = "5";
// A rank that fails: the others are stopped this much later (a launcher's monitor interval), so that the
// agents report the fail-stop first.
constexpr double kFailGraceS = 2.0;
// What such a pause lasts here, until the master measured one (1.0-2.2 s: docs/validation.md's figures).
constexpr const char* kSimPauseEstimateS = "1.5";

void usage() {
  std::printf(
      "usage: greyhound-simcluster --tp T --dp D --pp P --gpus-per-node G --microbatches M\n"
      "         (--iterations N | --duration-s S) [--faults FILE] [--report FILE] [--no-greyhound] [--seed N]\n"
      "         [--job NAME] [--work-dir DIR] [--keep] [--shm-dir DIR] [--model JSON|FILE]\n"
      "         [--hidden H] [--rows B] [--layers L] [--dp-sync allreduce|rs-ag] [--group-init split|uniqueid]\n"
      "         [--call-log] [--rank-env K=V,K=V] [--timeout-s S] [--redis URL] [--chaos JSON|FILE] [--mitigate]\n"
      "         [--external-master] [--oracle] [--time-scale X] [--s3-pause-s S] [--s4-restart-s S] [--quiet]\n"
      "         [--master-args 'ARGS'] [--master-env K=V,K=V] [--masters N] [--capabilities S2,S3,S4] [--max-restarts N]\n"
      "         [--validate never|auto|always] [--pause-deadline-s S] [--hang-min-s S]\n"
      "         [--preflight | --preflight-fail-on-slow]\n"
      "--preflight: `greyhoundctl preflight` is asked before the ranks start (the verdict lands in the work dir's\n"
      "          preflight.json and the report's \"preflight\"); --preflight-fail-on-slow: with --fail-on-slow\n"
      "--validate: the master confirms localisations with a validation pause (docs/validation.md), with tests\n"
      "          sized for the stand-ins' rates: %d^3 GEMMs, P2P of %s bytes; --pause-deadline-s: every rank\n"
      "          resumes by itself after this (default 30)\n"
      "--capabilities: the remedies the job advertises with --mitigate or --oracle (default S2,S3). With S4 the\n"
      "          job checkpoints into the work dir on an S4 plan and stops; this launcher, as the cluster's\n"
      "          scheduler, waits --s4-restart-s (job seconds, scaled) and starts it again from the checkpoint\n"
      "          on the nodes left after excluding those the restart request names: as many DP replicas as\n"
      "          fit, the same global batch. At most --max-restarts (default 3) restarts.\n"
      "--master-args: more flags for the master it starts, split on spaces (e.g. '--pay-margin 0.5')\n"
      "--master-env: more environment for the masters it starts (as --rank-env is for the ranks)\n"
      "--masters N: start N masters with --ha (m0, m1, ...): one leads, the others stand by (default 1,\n"
      "          without --ha); the chaos target \"leader\" is the one leading at that moment\n"
      "--hang-min-s: the agents report a rank stalled after S seconds (and 3 iterations) without NCCL progress\n"
      "--external-master: a master already serves the job on --redis (greyhound-master --jobs ...); start none\n"
      "--oracle: no detection (no master, agents or hook); the job applies plans (--plan) that this launcher\n"
      "          publishes at each fault's onset and end from the fault schedule: the S2 split the planner would\n"
      "          pick for the faults in force, the S3 placement for congested links (with S3 advertised), and\n"
      "          the original split and placement once none is left; excludes\n"
      "          --no-greyhound, --mitigate, --external-master and --chaos\n"
      "--time-scale X: job seconds per simulated second (default 1, or the fault file's \"time_scale\"; the\n"
      "          flag wins); --s3-pause-s and --s4-restart-s are in job seconds (defaults %g and %g, the\n"
      "          master's) and reach the master divided by X. Fault times stay on the simulated clock.\n",
      kSimGemmN, kSimP2pBytes, greyhound::mitigate::SkiRentalConfig{}.s3_pause_s,
      greyhound::mitigate::SkiRentalConfig{}.s4_restart_s);
}


// Everything the command line decides.
struct Options {
  json config;  // the report's "config"
  gs::FaultSchedule faults;
  std::string faults_path, report_path, job, work_dir, shm_dir, model_text, rank_env, external_redis;
  std::vector<std::string> agent_args;  // more flags for the agents
  std::string capabilities = "S2,S3";  // what the job advertises (--plan)
  bool s4 = false;                      // ... S4 among them: checkpoints and restarts
  int max_restarts = 3;
  std::vector<std::string> master_args;  // --master-args
  std::map<std::string, std::string> master_env;  // --master-env
  int masters = 1;                       // --masters
  std::vector<gs::ChaosAction> chaos;
  bool hook = true, keep = false, call_log = false, quiet = false, mitigate = false, external_master = false;
  bool oracle = false;  // plans from the fault schedule (OracleDriver); implies !hook
  bool preflight = false, preflight_fail_on_slow = false;  // greyhoundctl preflight, asked before the ranks start
  double time_scale = 1;                // job seconds per simulated second
  gs::RemedyCosts costs_job_s;          // --s3-pause-s, --s4-restart-s (job seconds)
  // Redis (and the plan channel) is needed with greyhound, and by the oracle.
  bool services() const { return hook || oracle; }
  int T = 0, D = 0, P = 0, G = 0, M = 0;
  std::int64_t iterations = 0, seed = 1, timeout_s = 0;
  double duration_s = 0;
  std::vector<std::string> minitrain_extra;
  std::int64_t hidden = 64, layers = 2;  // minitrain's model (its defaults), for the DP widths it accepts
  bool sharded = false;                  // --dp-sync rs-ag: the distributed optimizer shards the weights over DP
  int world() const { return greyhound::ParallelShape{T, D, P}.world(); }
  int nodes() const { return (world() + G - 1) / G; }
};

// Throws ArgError (a bad --faults schedule included) or another std::exception with a message for the user.
Options parse_options(const std::vector<std::string>& argvv, bool* help) {
  Options o;
  const greyhound::Args a(argvv,
                          {"tp", "dp", "pp", "gpus-per-node", "microbatches", "iterations", "duration-s", "faults",
                           "report", "seed", "job", "work-dir", "shm-dir", "model", "hidden", "rows", "layers",
                           "dp-sync", "group-init", "rank-env", "timeout-s", "redis", "chaos", "time-scale",
                           "s3-pause-s", "s4-restart-s", "master-args", "master-env", "capabilities", "max-restarts", "validate",
                           "pause-deadline-s", "hang-min-s", "masters"},
                          {"no-greyhound", "keep", "call-log", "quiet", "help", "mitigate", "external-master", "oracle",
                           "preflight", "preflight-fail-on-slow"});
  *help = a.flag("help");
  if (*help) return o;
  o.T = static_cast<int>(a.integer_in("tp", 1, 1, 64));
  o.D = static_cast<int>(a.integer_in("dp", 1, 1, 1024));
  o.P = static_cast<int>(a.integer_in("pp", 1, 1, 64));
  o.G = static_cast<int>(a.integer_in("gpus-per-node", 4, 1, 1024));
  o.M = static_cast<int>(a.integer_in("microbatches", 4, 1, 4096));
  o.iterations = a.integer_in("iterations", 0, 0, 1 << 24);
  o.duration_s = a.number("duration-s", 0.0);
  if ((o.iterations > 0) == (o.duration_s > 0)) throw greyhound::ArgError("give exactly one of --iterations, --duration-s");
  if (o.duration_s < 0) throw greyhound::ArgError("--duration-s must be positive");
  if (o.world() > 256) throw greyhound::ArgError("at most 256 ranks");
  if (o.T > o.G || o.G % o.T != 0) {
    throw greyhound::ArgError("--gpus-per-node must be a multiple of --tp (TP stays in a node)");
  }
  o.seed = a.integer("seed", 1);
  o.timeout_s = a.integer_in("timeout-s", 120, 1, 86400);
  o.hook = !a.flag("no-greyhound");
  o.keep = a.flag("keep");
  o.call_log = a.flag("call-log");
  o.mitigate = a.flag("mitigate");
  o.masters = static_cast<int>(a.integer_in("masters", 1, 1, 8));
  if (a.has("masters") && !o.hook) throw greyhound::ArgError("--masters needs greyhound (drop --no-greyhound)");
  if (a.has("masters") && (a.flag("external-master") || a.flag("oracle"))) {
    throw greyhound::ArgError("--masters starts masters: it excludes --external-master and --oracle");
  }
  if (a.has("validate")) {
    const std::string mode = a.str("validate");
    if (mode != "never" && mode != "auto" && mode != "always") {
      throw greyhound::ArgError("--validate must be never, auto or always");
    }
    if (!o.hook) throw greyhound::ArgError("--validate needs greyhound (drop --no-greyhound)");
    o.master_args.insert(o.master_args.end(), {"--validate", mode});
  }
  if (o.hook) {  // every pause (a validation, or a probe of a link S3 moved the job off) tests at the stand-ins' size
    o.master_args.insert(o.master_args.end(), {"--validate-gemm-n", std::to_string(kSimGemmN), "--validate-bytes",
                                               kSimP2pBytes, "--validate-min-excess-ms", kSimMinExcessMs,
                                               "--pause-estimate-s", kSimPauseEstimateS});
  }
  o.preflight_fail_on_slow = a.flag("preflight-fail-on-slow");
  o.preflight = a.flag("preflight") || o.preflight_fail_on_slow;
  if (o.preflight && !o.hook) throw greyhound::ArgError("--preflight needs greyhound (drop --no-greyhound)");
  if (o.preflight && a.flag("external-master")) {
    throw greyhound::ArgError("--preflight asks the master this launcher starts: drop --external-master");
  }
  if (a.has("hang-min-s")) {  // the agents' stall threshold: this many seconds, and 3 iterations
    const double h = a.number("hang-min-s", 60);
    if (!(h >= 0.1 && h <= 86400)) throw greyhound::ArgError("--hang-min-s must be in [0.1, 86400]");
    if (!o.hook) throw greyhound::ArgError("--hang-min-s needs greyhound (drop --no-greyhound)");
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.9g", h);
    o.agent_args = {"--hang-min-s", buf, "--hang-iterations", "3"};
  }
  if (a.has("pause-deadline-s")) {
    const double d = a.number("pause-deadline-s", 30);
    if (!(d >= 1 && d <= 600)) throw greyhound::ArgError("--pause-deadline-s must be in [1, 600]");
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.9g", d);
    o.master_args.insert(o.master_args.end(), {"--pause-deadline-s", buf});
  }
  {
    std::istringstream words(a.str("master-args", ""));
    for (std::string w; words >> w;) o.master_args.push_back(w);
  }
  for (const auto& kv : split(a.str("master-env", ""), ',')) {
    const auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) throw greyhound::ArgError("--master-env: '" + kv + "' is not K=V");
    o.master_env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  if (o.mitigate && !o.hook) throw greyhound::ArgError("--mitigate needs greyhound (drop --no-greyhound)");
  o.oracle = a.flag("oracle");
  if (o.oracle) {
    if (!o.hook) {
      throw greyhound::ArgError("--oracle runs without greyhound's detection already (drop --no-greyhound)");
    }
    if (o.mitigate) {
      throw greyhound::ArgError("--oracle and --mitigate are two planners of remedies: give one of them");
    }
    if (a.flag("external-master")) throw greyhound::ArgError("--oracle starts no master: drop --external-master");
    if (a.has("chaos")) throw greyhound::ArgError("--oracle has no greyhound services to fail: drop --chaos");
    o.hook = false;
  }
  o.quiet = a.flag("quiet");
  if (a.has("capabilities") && !o.mitigate && !o.oracle) {
    throw greyhound::ArgError("--capabilities needs --mitigate or --oracle (the job applies no plans otherwise)");
  }
  o.capabilities = a.str("capabilities", o.capabilities);
  for (const std::string& c : split(o.capabilities, ',')) {
    if (c != "S2" && c != "S3" && c != "S4") {
      throw greyhound::ArgError("--capabilities: '" + c + "' is not S2, S3 or S4 (a comma list)");
    }
    o.s4 |= c == "S4";
  }
  o.max_restarts = static_cast<int>(a.integer_in("max-restarts", 3, 0, 100));
  o.faults_path = a.str("faults", "");
  o.report_path = a.str("report", "");
  o.job = a.str("job", "sim-" + std::to_string(getpid()));
  o.work_dir = a.str("work-dir", "");
  o.shm_dir = a.str("shm-dir", "");
  o.rank_env = a.str("rank-env", "");
  o.external_redis = a.str("redis", "");
  o.external_master = a.flag("external-master");
  if (a.has("chaos")) o.chaos = gs::parse_chaos_text(gs::read_json_arg(a.str("chaos"), "--chaos"), o.nodes());
  if (!o.hook && !o.oracle && (!o.chaos.empty() || !o.external_redis.empty())) {
    throw greyhound::ArgError("--chaos and --redis need greyhound (drop --no-greyhound)");
  }
  if (o.external_master && o.external_redis.empty()) {
    throw greyhound::ArgError("--external-master needs --redis (the Redis that master serves)");
  }
  // Default: the stand-ins' own defaults (sim_model.h), tuned for iterations of a few hundred ms.
  o.model_text = a.has("model") ? gs::read_json_arg(a.str("model"), "--model") : gs::SimModel{}.to_json().dump();
  {
    json m = json::parse(o.model_text);  // validate now, not in every rank
    gs::SimModel::parse(m);
    m["gpus_per_node"] = o.G;  // --gpus-per-node decides
    o.model_text = m.dump();
  }
  std::optional<double> file_scale;
  if (!o.faults_path.empty()) {
    try {
      gs::FaultFile ff = gs::parse_fault_file(gs::read_json_arg(o.faults_path, "--faults"));
      o.faults = std::move(ff.faults);
      if (const std::string why = o.faults.shape_error(o.world(), o.nodes()); !why.empty()) throw gs::FaultScheduleError(why);
      file_scale = ff.time_scale;
    } catch (const gs::FaultScheduleError& e) {
      throw greyhound::ArgError("--faults " + o.faults_path + ": " + e.what());
    }
  }
  o.time_scale = a.has("time-scale") ? a.number("time-scale", 1.0) : file_scale.value_or(1.0);
  if (const std::string why = gs::time_scale_error(o.time_scale); !why.empty()) {
    throw greyhound::ArgError("--time-scale: " + why);
  }
  const greyhound::mitigate::SkiRentalConfig ski;
  o.costs_job_s = {a.number("s3-pause-s", ski.s3_pause_s), a.number("s4-restart-s", ski.s4_restart_s)};
  if (!(o.costs_job_s.s3_pause_s >= 0) || !(o.costs_job_s.s4_restart_s >= 0) ||
      !std::isfinite(o.costs_job_s.s3_pause_s) || !std::isfinite(o.costs_job_s.s4_restart_s)) {
    throw greyhound::ArgError("--s3-pause-s and --s4-restart-s must be finite numbers >= 0 (job seconds)");
  }
  o.hidden = a.integer_in("hidden", 64, 1, 1 << 14);
  o.layers = a.integer_in("layers", 2, 1, 1024);
  o.sharded = a.str("dp-sync", "allreduce") == "rs-ag";
  for (const char* k : {"hidden", "rows", "layers", "dp-sync", "group-init"}) {
    if (a.has(k)) {
      o.minitrain_extra.push_back(std::string("--") + k);
      o.minitrain_extra.push_back(a.str(k));
    }
  }
  o.config = {{"tp", o.T},       {"dp", o.D},           {"pp", o.P},
              {"gpus_per_node", o.G}, {"microbatches", o.M}, {"nodes", o.nodes()},
              {"greyhound", o.hook},  {"mitigate", o.mitigate}, {"seed", o.seed}, {"masters", o.masters},
              {"job", o.job},         {"model", json::parse(o.model_text)}, {"oracle", o.oracle},
              {"capabilities", o.capabilities}};
  const gs::RemedyCosts sim_costs = gs::simulated_costs(o.costs_job_s, o.time_scale);
  o.config["time_scale"] = o.time_scale;
  o.config["s3_pause_s"] = o.costs_job_s.s3_pause_s;      // job seconds
  o.config["s4_restart_s"] = o.costs_job_s.s4_restart_s;  // job seconds
  o.config["master_args"] = o.master_args;
  o.config["master_s3_pause_s"] = sim_costs.s3_pause_s;    // what the master was given (simulated seconds)
  o.config["master_s4_restart_s"] = sim_costs.s4_restart_s;
  if (o.iterations > 0) o.config["iterations"] = o.iterations;
  if (o.duration_s > 0) o.config["duration_s"] = o.duration_s;
  return o;
}

// Where the run keeps its files.
struct Dirs {
  std::string bin, minitrain, hook_lib, sim_lib_dir;
  std::string work_dir;
  bool own_work_dir = false;     // made here (removed at the end unless --keep)
  std::string sim_dir;           // the stand-ins' communicator segments and Redis data
  std::vector<std::string> node_dirs;  // one shm dir per virtual node, as each host has its own /dev/shm
  std::string faults_file;       // the fault schedule as given to the ranks
};

std::optional<Dirs> prepare_dirs(const Options& o) {
  Dirs d;
  d.bin = self_dir();
  d.minitrain = d.bin + "/greyhound-minitrain";
  d.hook_lib = fs::weakly_canonical(d.bin + "/../lib/libgreyhound.so").string();
  d.sim_lib_dir = fs::weakly_canonical(d.bin + "/../lib/sim").string();
  if (access(d.minitrain.c_str(), X_OK) != 0 || (o.hook && access(d.hook_lib.c_str(), R_OK) != 0)) {
    std::fprintf(stderr, "greyhound-simcluster: cannot find %s or %s (run from the build tree)\n", d.minitrain.c_str(),
                 d.hook_lib.c_str());
    return std::nullopt;
  }
  d.work_dir = o.work_dir;
  if (d.work_dir.empty()) {
    char tmpl[] = "/tmp/greyhound-sim-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) {
      std::perror("greyhound-simcluster: mkdtemp");
      return std::nullopt;
    }
    d.work_dir = tmpl;
    d.own_work_dir = !o.keep;
  } else {
    // A given work directory is created, or reused only when it is this user's alone: the ranks' rendezvous
    // files, the faults and the checkpoints go there, and another user must not be able to plant them.
    std::error_code parent_ec;
    const fs::path parent = fs::path(d.work_dir).parent_path();
    if (!parent.empty()) fs::create_directories(parent, parent_ec);
    std::string why;
    if (!greyhound::ensure_private_directory(d.work_dir, &why)) {
      std::fprintf(stderr, "greyhound-simcluster: --work-dir %s: a work directory must be this user's alone\n",
                   greyhound::printable(why, 256).c_str());
      return std::nullopt;
    }
  }
  // A work dir reused from an earlier run: its rendezvous files name that run's communicators.
  std::error_code rdzv_ec;
  for (const auto& e : fs::directory_iterator(d.work_dir, rdzv_ec)) {
    const std::string name = e.path().filename().string();
    if (name == "rdzv" || name.rfind("rdzv.r", 0) == 0 || name == "checkpoint") fs::remove_all(e.path(), rdzv_ec);
  }
  fs::create_directories(d.work_dir + "/rdzv");
  // Communicator segments of the stand-ins: tmpfs when there is one.
  // A fresh directory of an unpredictable name (mode 0700): a name another user can guess could be
  // pre-created by them and would be reused.
  char sim_tmpl[] = "/dev/shm/greyhound-sim-XXXXXX";
  if (mkdtemp(sim_tmpl) != nullptr) {
    d.sim_dir = sim_tmpl;
  } else {
    d.sim_dir = d.work_dir + "/sim";
    fs::create_directories(d.sim_dir);
  }
  const std::string shm_base = !o.shm_dir.empty() ? o.shm_dir : o.keep ? d.work_dir + "/shm" : d.sim_dir + "/shm";
  for (int n = 0; n < o.nodes(); ++n) {
    d.node_dirs.push_back(shm_base + "/node" + std::to_string(n));
    fs::create_directories(d.node_dirs.back());
  }
  d.faults_file = d.work_dir + "/faults.json";
  std::ofstream(d.faults_file) << o.faults.to_json().dump(2) << "\n";
  return d;
}

// Rewrites `url` (a --redis flag) without its password, which goes to a new file `file` (mode 0600) named
// by GREYHOUND_REDIS_PASSWORD_FILE in this process's environment (the children inherit it, and every Redis
// client here reads it: redis_endpoint_from_env). A password already given by that file stays there.
bool share_redis_password(std::string& url, const std::string& file, std::string* error) {
  greyhound::RedisEndpoint e;
  try {
    e = greyhound::redis_endpoint_from_env(url);
  } catch (const std::invalid_argument& ex) {
    *error = ex.what();
    return false;
  }
  if (!greyhound::parse_redis_url(url).password.empty()) {
    const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    const std::string line = e.password + "\n";
    const bool ok = fd >= 0 && ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
    if (fd >= 0) ::close(fd);
    if (!ok) {
      *error = "cannot write the password file " + file + ": " + std::strerror(errno);
      return false;
    }
    setenv("GREYHOUND_REDIS_PASSWORD_FILE", file.c_str(), 1);
  }
  url = e.url_without_password();
  return true;
}

// Rank r's process: minitrain, under greyhound-run (which preloads the hook and starts the node's agent
// once) unless --no-greyhound. nullopt (with *error) on a bad --rank-env.
// Rank r of incarnation `inc` runs on the GPU of slot inc.slots[r] (the stand-ins take their rank and node
// for faults and links from GREYHOUND_SIM_RANK / GREYHOUND_SIM_NODE, cluster numbers); its agent numbers
// the node as the incarnation does (restart_plan.h). A restarted incarnation resumes from the checkpoint
// with the same global batch and runs for what is left of the duration.
std::optional<gs::ChildSpec> rank_spec(const Options& o, const Dirs& d, const std::string& redis_url,
                                       std::uint64_t epoch_ns, const gs::Incarnation& inc, double duration_s, int r,
                                       std::string* error) {
  const int slot = inc.slots[static_cast<std::size_t>(r)];
  const int node = slot / o.G;  // the cluster's number
  const std::vector<int> ids = gs::node_ids(inc, o.G);
  const int job_node = static_cast<int>(std::find(ids.begin(), ids.end(), node) - ids.begin());  // the job's
  const int world = static_cast<int>(inc.slots.size());
  const std::string suffix = inc.index == 0 ? "" : ".r" + std::to_string(inc.index);
  const std::string rdzv = d.work_dir + "/rdzv" + suffix;
  const std::string& node_dir = d.node_dirs[static_cast<std::size_t>(node)];
  gs::ChildSpec spec;
  spec.name = "rank " + std::to_string(r) + suffix;
  std::string agent_args = "--idle-exit-s 2";
  for (const std::string& x : o.agent_args) agent_args += " " + x;
  if (o.hook) {
    spec.argv = {d.bin + "/greyhound-run", "--job", o.job, "--node", std::to_string(job_node), "--redis", redis_url,
                 "--agent-log", d.work_dir + "/agent" + std::to_string(node) + suffix + ".log", "--agent-args", agent_args};
    // The node's shm dir, unless --rank-env overrides it (tests of an unusable one).
    if (o.rank_env.find("GREYHOUND_SHM_DIR=") == std::string::npos) {
      spec.argv.insert(spec.argv.end(), {"--shm-dir", node_dir});
    }
    spec.argv.push_back("--");
  }
  spec.argv.insert(spec.argv.end(),
                   {d.minitrain, "--tp", std::to_string(o.T), "--dp", std::to_string(inc.dp), "--pp",
                    std::to_string(o.P), "--rdzv", rdzv, "--seed", std::to_string(o.seed)});
  if (inc.index == 0) {
    spec.argv.insert(spec.argv.end(), {"--microbatches", std::to_string(o.M)});
  } else {
    spec.argv.insert(spec.argv.end(), {"--global-microbatches", std::to_string(o.D * o.M)});
  }
  if (o.iterations > 0) {
    spec.argv.insert(spec.argv.end(), {"--iterations", std::to_string(o.iterations)});
  } else {
    spec.argv.insert(spec.argv.end(), {"--duration-s", std::to_string(duration_s)});
  }
  if (o.s4) spec.argv.insert(spec.argv.end(), {"--checkpoint-dir", d.work_dir + "/checkpoint"});
  spec.argv.insert(spec.argv.end(), o.minitrain_extra.begin(), o.minitrain_extra.end());
  if (o.call_log) {
    spec.argv.insert(spec.argv.end(), {"--call-log", d.work_dir + "/calls." + std::to_string(r) + suffix + ".csv"});
  }
  if (o.mitigate || o.oracle) {
    spec.argv.insert(spec.argv.end(), {"--plan", "--redis", redis_url, "--job", o.job, "--capabilities", o.capabilities});
  }
  spec.env = {{"RANK", std::to_string(r)},
              {"WORLD_SIZE", std::to_string(world)},
              {"LOCAL_RANK", std::to_string(slot % o.G)},
              {"LOCAL_WORLD_SIZE", std::to_string(o.G)},
              {"GREYHOUND_JOB", o.job},
              {"GREYHOUND_JOB_EPOCH_NS", std::to_string(epoch_ns)},
              {"GREYHOUND_SHM_DIR", node_dir},
              {"GREYHOUND_SIM_GPUS_PER_NODE", std::to_string(o.G)},
              {"GREYHOUND_SIM_EPOCH_NS", std::to_string(epoch_ns)},
              {"GREYHOUND_SIM_FAULTS", d.faults_file},
              {"GREYHOUND_SIM_MODEL", o.model_text},
              {"GREYHOUND_SIM_DIR", d.sim_dir},
              {"GREYHOUND_SIM_TIMEOUT_S", std::to_string(o.timeout_s)},
              {"LD_LIBRARY_PATH", d.sim_lib_dir}};
  spec.unset_env = {"GREYHOUND_RANK", "GREYHOUND_SIM_RANK", "GREYHOUND_SIM_NODE", "LD_PRELOAD"};
  if (inc.index > 0) {  // its hardware: the slot's GPU (faults) and node (links)
    spec.env["GREYHOUND_SIM_RANK"] = std::to_string(slot);
    spec.env["GREYHOUND_SIM_NODE"] = std::to_string(node);
  }
  for (const auto& kv : split(o.rank_env, ',')) {
    const auto eq = kv.find('=');
    if (eq == std::string::npos) {
      *error = "--rank-env: '" + kv + "' is not K=V";
      return std::nullopt;
    }
    spec.env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  spec.stdout_path = d.work_dir + "/rank" + std::to_string(r) + suffix + ".out";
  spec.stderr_path = d.work_dir + "/rank" + std::to_string(r) + suffix + ".err";
  std::error_code ec;
  fs::create_directories(rdzv, ec);
  return spec;
}

// The report: configuration, faults, the job's iterations (its period, and rank 0's loop time), throughput,
// every event of the job's stream.
json make_report(const Options& o, const std::vector<gs::JobIteration>& its, json events, json chaos, int rc) {
  json report;
  report["config"] = o.config;
  report["faults"] = o.faults.to_json()["faults"];
  report["iterations"] = json::array();
  for (const auto& it : its) {
    report["iterations"].push_back(
        {{"index", it.index}, {"t_s", it.t_s}, {"iter_ms", it.iter_ms}, {"loop_ms", it.loop_ms}, {"last_rank", it.last_rank}});
  }
  report["throughput_iter_per_min"] = gs::throughput_iter_per_min(its);
  report["events"] = std::move(events);
  if (!chaos.is_null()) report["chaos"] = std::move(chaos);
  report["exit_code"] = rc;
  const double healthy = gs::healthy_mean_iter_ms(its, o.faults, 2);
  report["healthy_iter_ms"] = std::isnan(healthy) ? json(nullptr) : json(healthy);
  return report;
}

void print_summary(const Options& o, const std::vector<gs::JobIteration>& its, const json& report) {
  const double healthy = report["healthy_iter_ms"].is_number() ? report["healthy_iter_ms"].get<double>() : NAN;
  std::printf("\n%zu iterations, %.1f iterations/min, healthy mean period %.1f ms\n", its.size(),
              report["throughput_iter_per_min"].get<double>(), healthy);
  for (const auto& f : o.faults.faults()) {
    std::printf("  during %s fault [%.0f s, %.0f s): mean %.1f ms\n", gs::fault_kind_name(f.kind), f.start_s, f.end_s,
                gs::mean_iter_ms_between(its, f.start_s, f.end_s));
  }
  const std::string tl = gs::format_timeline(report);
  if (!tl.empty()) std::printf("timeline:\n%s", tl.c_str());
}

// Exit code of the run from the ranks' exits (and the last lines on stderr of the rank that failed first: the
// others may have failed because of it).
int ranks_rc(std::vector<gs::ChildExit> exits, const std::string& work_dir) {
  std::stable_sort(exits.begin(), exits.end(), [](const gs::ChildExit& a, const gs::ChildExit& b) {
    return (a.order < 0 ? INT_MAX : a.order) < (b.order < 0 ? INT_MAX : b.order);
  });
  int rc = 0;
  for (const auto& e : exits) {
    if (e.exit_code == 0 || rc != 0) continue;
    rc = g_stop ? 130 : 1;
    if (!g_stop) {
      const std::string idx = e.name.substr(e.name.find(' ') + 1);
      std::fprintf(stderr, "greyhound-simcluster: %s exited with %d; its last lines:\n%s", e.name.c_str(), e.exit_code,
                   gs::tail_file(work_dir + "/rank" + idx + ".err", 10).c_str());
    }
  }
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  try {
    bool help = false;
    o = parse_options(std::vector<std::string>(argv + 1, argv + argc), &help);
    greyhound::hide_redis_passwords(argc, argv, "greyhound-simcluster");
    if (help) {
      usage();
      return 0;
    }
  } catch (const greyhound::ArgError& e) {
    std::fprintf(stderr, "greyhound-simcluster: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "greyhound-simcluster: %s\n", e.what());
    return 2;
  }
  const std::optional<Dirs> dirs = prepare_dirs(o);
  if (!dirs) return 1;
  const Dirs& d = *dirs;
  // A password for an external Redis reaches the processes started here in a file only this user can read
  // (GREYHOUND_REDIS_PASSWORD_FILE), never on their command lines nor in this run's banner and report.
  if (!o.external_redis.empty()) {
    std::string why;
    if (!share_redis_password(o.external_redis, d.sim_dir + "/redis-password", &why)) {
      std::fprintf(stderr, "greyhound-simcluster: --redis: %s\n", why.c_str());
      std::error_code ec;
      fs::remove_all(d.sim_dir, ec);
      if (d.own_work_dir) fs::remove_all(d.work_dir, ec);
      return 2;
    }
  }

  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);

  const std::uint64_t epoch_ns = greyhound::clock_ns(CLOCK_MONOTONIC);
  auto job_time_now = [&] { return static_cast<double>(greyhound::clock_ns(CLOCK_MONOTONIC) - epoch_ns) * 1e-9; };

  // greyhound's side: Redis (private unless --redis), the master (unless --external-master).
  int rc = 0;
  std::unique_ptr<gs::ClusterServices> services;
  if (o.services()) {
    gs::ClusterServices::Options so;
    so.bin_dir = d.bin;
    so.work_dir = d.work_dir;
    so.data_dir = d.sim_dir + "/redis";
    fs::create_directories(so.data_dir);
    so.job = o.job;
    so.node_shm_dirs = d.node_dirs;
    so.external_redis = o.external_redis;
    so.start_master = !o.external_master && !o.oracle;
    const gs::RemedyCosts sim_costs = gs::simulated_costs(o.costs_job_s, o.time_scale);
    so.s3_pause_s = sim_costs.s3_pause_s;
    so.s4_restart_s = sim_costs.s4_restart_s;
    so.epoch_ns = epoch_ns;
    so.chaos = o.chaos;
    so.mitigate = o.mitigate;
    so.master_args = o.master_args;
    so.master_env = o.master_env;
    so.masters = o.masters;
    so.agent_args = o.agent_args;
    services = std::make_unique<gs::ClusterServices>(so);
    std::string err;
    if (!services->start(&err)) {
      std::fprintf(stderr, "greyhound-simcluster: %s\n", err.c_str());
      rc = 1;
    }
  }
  const std::string redis_url = services ? services->redis_url() : "";
  std::unique_ptr<gs::OracleDriver> oracle;
  if (o.oracle && rc == 0) oracle = std::make_unique<gs::OracleDriver>(gs::OracleDriver::Options{redis_url, o.job, o.faults, 20});

  // The job's incarnations: as launched, then after each S4 restart (the ranks all exit with status 3, the
  // job store holds the restart request): this launcher waits the restart's cost and starts the job again
  // on the nodes that are left, from its checkpoint.
  // A pre-flight check, asked before the ranks start (as an operator would, beside the job's launch).
  pid_t preflight_pid = -1;
  if (o.preflight && services && rc == 0) {
    gs::ChildSpec spec;
    spec.name = "greyhoundctl preflight";
    spec.argv = {d.bin + "/greyhoundctl", "preflight", "--job", o.job, "--redis", redis_url, "--json", "--timeout-s", "600"};
    if (o.preflight_fail_on_slow) spec.argv.push_back("--fail-on-slow");
    spec.stdout_path = d.work_dir + "/preflight.json";
    spec.stderr_path = d.work_dir + "/preflight.err";
    std::string err;
    preflight_pid = gs::spawn(spec, &err);
    if (preflight_pid < 0) {
      std::fprintf(stderr, "greyhound-simcluster: %s\n", err.c_str());
      rc = 1;
    } else {  // the request is in the store before the first rank starts
      for (int i = 0; i < 100 && !greyhound::sim::tail_file(spec.stderr_path, 1).size(); ++i) usleep(20000);
    }
  }
  std::vector<gs::Incarnation> incs{gs::first_incarnation(o.T, o.D, o.P)};
  json restarts = json::array();
  std::string rank0_out = d.work_dir + "/rank0.out";
  std::size_t shown = 0;
  // Follow rank 0's iteration lines while the job runs; run the chaos schedule.
  auto tick = [&] {
    if (services) services->on_tick(job_time_now());
    if (oracle) oracle->on_tick(job_time_now());
    if (o.quiet) return;
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
  while (rc == 0) {
    const gs::Incarnation& inc = incs.back();
    const double left_s = o.duration_s - job_time_now();
    if (o.duration_s > 0 && left_s < 1.0) break;  // restarted too late to run at all
    std::vector<pid_t> pids;
    std::vector<std::string> names;
    for (int r = 0; r < static_cast<int>(inc.slots.size()) && rc == 0; ++r) {
      std::string err;
      const auto spec = rank_spec(o, d, redis_url, epoch_ns, inc, left_s, r, &err);
      const pid_t pid = spec ? gs::spawn(*spec, &err) : -1;
      if (pid < 0) {
        std::fprintf(stderr, "greyhound-simcluster: %s\n", err.c_str());
        rc = spec ? 1 : 2;
        break;
      }
      pids.push_back(pid);
      names.push_back(spec->name);
    }
    if (!o.quiet && rc == 0 && inc.index == 0) {
      std::printf("greyhound-simcluster: %d ranks (TP%d x DP%d x PP%d) on %d virtual nodes of %d GPUs, %s, job %s\n",
                  o.world(), o.T, o.D, o.P, o.nodes(), o.G,
                  o.hook     ? ("with greyhound (Redis " + redis_url + ")").c_str()
                  : o.oracle ? ("with the oracle's plans (Redis " + redis_url + ")").c_str()
                             : "without greyhound",
                  o.job.c_str());
      std::fflush(stdout);
    }
    if (rc != 0) {
      gs::stop_all(pids, 2.0);
      break;
    }
    const std::vector<gs::ChildExit> exits = gs::wait_all(pids, names, &g_stop, true, tick, o.s4 ? 3 : 0, kFailGraceS);
    const bool restart = o.s4 && !g_stop && std::all_of(exits.begin(), exits.end(), [](const gs::ChildExit& e) {
      return e.exit_code == 3;  // greyhound-minitrain's kExitRestart
    });
    if (!restart) {
      rc = ranks_rc(exits, d.work_dir);
      break;
    }
    // An S4 restart: where to, then the wait it costs.
    const double stopped_s = job_time_now();
    std::string err;
    const auto req = services ? services->restart_request(&err) : std::nullopt;
    gs::Incarnation next;
    if (!req) {
      std::fprintf(stderr, "greyhound-simcluster: the job stopped for a restart, but %s\n", err.c_str());
      rc = 1;
      break;
    }
    if (static_cast<int>(incs.size()) > o.max_restarts) {
      std::fprintf(stderr, "greyhound-simcluster: the job asked for restart %zu; --max-restarts is %d\n", incs.size(),
                   o.max_restarts);
      rc = 1;
      break;
    }
    // A distributed optimizer shards the weights over DP: only widths that divide them.
    const std::int64_t weights = o.layers * o.hidden * o.hidden;
    const auto dp_allowed = [&](int dp) { return !o.sharded || weights % dp == 0; };
    if (!gs::restart_without(inc, o.T, o.P, o.G, o.nodes(), req->exclude_nodes, req->exclude_ranks, o.D, &next, &err,
                             dp_allowed)) {
      std::fprintf(stderr, "greyhound-simcluster: cannot restart the job: %s\n", err.c_str());
      rc = 1;
      break;
    }
    // The old ranks' agents drain and stop first (a node's new ranks start a new one).
    if (services) services->stop_agents();
    const double cost_s = gs::simulated_costs(o.costs_job_s, o.time_scale).s4_restart_s;
    while (!g_stop && job_time_now() < stopped_s + cost_s) {
      tick();
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    if (g_stop) {
      rc = 130;
      break;
    }
    std::vector<int> nodes(next.excluded_nodes.begin(), next.excluded_nodes.end());
    restarts.push_back({{"t_s", stopped_s}, {"resumed_t_s", job_time_now()}, {"epoch", req->epoch},
                        {"exclude_nodes", req->exclude_nodes}, {"exclude_ranks", req->exclude_ranks},
                        {"excluded_nodes", nodes}, {"world", next.slots.size()}, {"dp", next.dp},
                        {"slots", next.slots}, {"reason", req->reason}});
    if (!o.quiet) {
      std::printf("greyhound-simcluster: restart %d at t=%.2fs (%s): without node(s) %s, now TP%d x DP%d x PP%d on %zu "
                  "ranks, %d global micro-batches\n",
                  next.index, stopped_s, req->reason.c_str(), json(nodes).dump().c_str(), o.T, next.dp, o.P,
                  next.slots.size(), o.D * o.M);
      std::fflush(stdout);
    }
    incs.push_back(std::move(next));
    rank0_out = d.work_dir + "/rank0.r" + std::to_string(incs.back().index) + ".out";
    shown = 0;
  }

  // The pre-flight's verdict: given by now, or within a few seconds (the job ended before one: none).
  json preflight;
  if (preflight_pid > 0) {
    const int code = gs::wait_child(preflight_pid, 10.0);
    if (code < 0) gs::stop_all({preflight_pid}, 1.0);
    preflight["exit_code"] = code < 0 ? json(nullptr) : json(code);
    try {
      preflight["verdict"] = json::parse(std::ifstream(d.work_dir + "/preflight.json"));
    } catch (const std::exception&) {
      preflight["verdict"] = nullptr;  // none printed: preflight.err says why
    }
  }
  json events = json::array(), chaos;
  if (services) {
    if (rc == 0 && !o.oracle) services->finish();  // the oracle's job has no agents or master to wait for
    events = services->events();
    chaos = services->chaos_log();
    services->stop_all();
  }
  // The job's iterations, incarnation after incarnation (a restarted one resumes after the checkpoint).
  std::vector<gs::JobIteration> its;
  for (const gs::Incarnation& inc : incs) {
    const std::string suffix = inc.index == 0 ? "" : ".r" + std::to_string(inc.index);
    std::vector<std::vector<gs::IterationLine>> per_rank;
    for (std::size_t r = 0; r < inc.slots.size(); ++r) {
      std::ifstream in(d.work_dir + "/rank" + std::to_string(r) + suffix + ".out");
      std::stringstream ss;
      ss << in.rdbuf();
      per_rank.push_back(gs::parse_iteration_log(ss.str()));
    }
    std::vector<gs::JobIteration> part = gs::job_iterations(per_rank);
    // The first iteration after a restart counts from the previous one's end: the restart's time is lost.
    if (!its.empty() && !part.empty()) part.front().iter_ms = (part.front().t_s - its.back().t_s) * 1e3;
    its.insert(its.end(), part.begin(), part.end());
  }
  json report = make_report(o, its, std::move(events), std::move(chaos), rc);
  if (o.s4) report["restarts"] = std::move(restarts);
  if (o.preflight) report["preflight"] = std::move(preflight);
  report["validations"] = gs::validation_summary(report["events"]);
  if (!o.report_path.empty()) {
    std::ofstream out(o.report_path);
    out << report.dump(2) << "\n";
    if (!out) {
      std::fprintf(stderr, "greyhound-simcluster: cannot write --report %s\n", o.report_path.c_str());
      if (rc == 0) rc = 1;
    }
  }
  if (!o.quiet) print_summary(o, its, report);

  std::error_code ec;
  fs::remove_all(d.sim_dir, ec);  // communicator segments, Redis data, and the rings unless kept
  if (d.own_work_dir) fs::remove_all(d.work_dir, ec);
  if (!d.own_work_dir && !o.quiet) std::printf("logs in %s\n", d.work_dir.c_str());
  return rc;
}
