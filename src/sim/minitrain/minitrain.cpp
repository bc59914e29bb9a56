// greyhound-minitrain: a small TP x DP x PP training job that issues Megatron-LM's NCCL call pattern:
//  - TP: an AllReduce after every layer's partial product, in forward and in backward (row-parallel layers);
//  - PP: Send/Recv of activations and gradients per micro-batch under a 1F1B schedule, the steady-state
//    pairs fused in ncclGroupStart/End as Megatron's batched p2p does;
//  - DP: one gradient AllReduce per iteration (or ReduceScatter + AllGather with --dp-sync rs-ag, the
//    distributed optimizer), plus the DP AllReduce of the loss on the last stage.
// It is written against the real NCCL / CUDA runtime / cuBLAS APIs and computes a real (linear) model, so
// the same source builds for a GPU; on CPU it runs on greyhound's stand-ins (build/lib/sim).
//
// Ranks are processes started by a launcher with RANK, WORLD_SIZE and LOCAL_RANK set; rank 0 publishes the
// world's ncclUniqueId in the rendezvous directory. Global rank = tp + TP * (dp + DP * pp) (Megatron order).
// One line per iteration on stdout:
//   iter <i> t_s <job seconds at the end> iter_ms <ms> loss <loss> checksum <hash of this rank's weights> role <r>
// (r: the global rank whose (tp, dp, pp) this rank held in the iteration; its own unless S3 moved it).
//
// With --plan it also applies greyhound's mitigation plans, as the framework plugin would, through the job
// client (greyhound/job.h, which checks each plan against the layout): rank 0 publishes the job's layout,
// reads the latest plan before every iteration and broadcasts its epoch, micro-batch vector and placement to
// all ranks over NCCL (so every rank switches at the same iteration); every rank acknowledges. It applies
// S2 (micro-batches per DP replica; the global batch and the result do not change: each micro-batch keeps
// its global index and gradients are averaged over the global batch), S3 (roles move between launch ranks:
// weights handed over by P2P, new TP/DP/PP communicators; the result does not change either) and their
// reverts, and S4 with --checkpoint-dir: every rank saves its state at the iteration boundary
// (minitrain/checkpoint.h), rank 0 asks for a restart without the nodes or ranks the plan names, every rank
// acknowledges, and the job exits with status 3 (kExitRestart) for its launcher to start it again, possibly
// with fewer DP replicas; started with a checkpoint in --checkpoint-dir, it resumes from it with the same
// global batch (--global-microbatches), so training continues where it stopped. A strategy left out of
// --capabilities is acknowledged as unsupported.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <fcntl.h>
#include <nccl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/args.h"
#include "greyhound/config.h"
#include "greyhound/hash.h"
#include "greyhound/job.h"
#include "greyhound/parallel_shape.h"
#include "sim/minitrain/checkpoint.h"
#include "sim/pipeline_schedule.h"

namespace {

using greyhound::sim::PipeAction;
using greyhound::sim::PipeStep;

int g_rank = 0;
constexpr int kExitRestart = 3;  // the job stopped for an S4 restart (its checkpoint is in --checkpoint-dir)

[[noreturn]] void die(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void die(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::fprintf(stderr, "greyhound-minitrain rank %d: ", g_rank);
  std::vfprintf(stderr, fmt, ap);
  std::fputc('\n', stderr);
  va_end(ap);
  std::exit(1);
}

#define CUDA_CHECK(expr)                                                                     \
  do {                                                                                       \
    const cudaError_t e_ = (expr);                                                           \
    if (e_ != cudaSuccess) die("%s failed: %s", #expr, cudaGetErrorString(e_));              \
  } while (0)
#define CUBLAS_CHECK(expr)                                                                   \
  do {                                                                                       \
    const cublasStatus_t s_ = (expr);                                                        \
    if (s_ != CUBLAS_STATUS_SUCCESS) die("%s failed: cuBLAS status %d", #expr, static_cast<int>(s_)); \
  } while (0)

std::uint64_t mono_ns() {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

// Deterministic values in [-1, 1) from a seed.
void fill_uniform(std::vector<float>& v, std::uint64_t seed) {
  for (std::size_t i = 0; i < v.size(); ++i) {
    v[i] = static_cast<float>(static_cast<double>(greyhound::splitmix64(seed ^ (i * 0x632be59bd9b4e019ull)) >> 11) * 0x1.0p-52 - 1.0);
  }
}

int env_int(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') die("%s is not set (start ranks with greyhound-simcluster or a launcher)", name);
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  if (*end != '\0' || x < 0) die("%s='%s' is not a non-negative integer", name, v);
  return static_cast<int>(x);
}

// Every NCCL call the job makes goes through here, so that --call-log can list them in issue order.
class Nccl {
 public:
  explicit Nccl(const std::string& log_path) {
    if (!log_path.empty()) {
      log_ = std::fopen(log_path.c_str(), "w");
      if (log_ == nullptr) die("cannot write --call-log %s", log_path.c_str());
      std::fprintf(log_, "op,comm,count,dtype,peer,root\n");
    }
  }
  ~Nccl() {
    if (log_ != nullptr) std::fclose(log_);
  }

  void check(ncclResult_t rc, const char* what, ncclComm_t comm) {
    if (rc != ncclSuccess) die("%s failed: %s (%s)", what, ncclGetErrorString(rc), ncclGetLastError(comm));
  }
  void log(const char* op, const char* comm, std::size_t count, int dtype, int peer, int root) {
    if (log_ != nullptr) std::fprintf(log_, "%s,%s,%zu,%d,%d,%d\n", op, comm, count, dtype, peer, root);
  }

  void all_reduce(const char* name, ncclComm_t comm, float* buf, std::size_t count, ncclRedOp_t op, cudaStream_t s) {
    log("AllReduce", name, count, ncclFloat32, -1, -1);
    check(ncclAllReduce(buf, buf, count, ncclFloat32, op, comm, s), "ncclAllReduce", comm);
  }
  void reduce_scatter(const char* name, ncclComm_t comm, const float* in, float* out, std::size_t recvcount,
                      cudaStream_t s) {
    log("ReduceScatter", name, recvcount, ncclFloat32, -1, -1);
    check(ncclReduceScatter(in, out, recvcount, ncclFloat32, ncclSum, comm, s), "ncclReduceScatter", comm);
  }
  void all_gather(const char* name, ncclComm_t comm, const float* in, float* out, std::size_t sendcount,
                  cudaStream_t s) {
    log("AllGather", name, sendcount, ncclFloat32, -1, -1);
    check(ncclAllGather(in, out, sendcount, ncclFloat32, comm, s), "ncclAllGather", comm);
  }
  void broadcast_ints(const char* name, ncclComm_t comm, int* buf, std::size_t count, int root, cudaStream_t s) {
    log("Broadcast", name, count, ncclInt32, -1, root);
    check(ncclBroadcast(buf, buf, count, ncclInt32, root, comm, s), "ncclBroadcast", comm);
  }
  void send(const char* name, ncclComm_t comm, const float* buf, std::size_t count, int peer, cudaStream_t s) {
    log("Send", name, count, ncclFloat32, peer, -1);
    check(ncclSend(buf, count, ncclFloat32, peer, comm, s), "ncclSend", comm);
  }
  void recv(const char* name, ncclComm_t comm, float* buf, std::size_t count, int peer, cudaStream_t s) {
    log("Recv", name, count, ncclFloat32, peer, -1);
    check(ncclRecv(buf, count, ncclFloat32, peer, comm, s), "ncclRecv", comm);
  }
  void group_start() {
    log("GroupStart", "", 0, -1, -1, -1);
    check(ncclGroupStart(), "ncclGroupStart", nullptr);
  }
  void group_end() {
    log("GroupEnd", "", 0, -1, -1, -1);
    check(ncclGroupEnd(), "ncclGroupEnd", nullptr);
  }
  void unique_id(ncclUniqueId* id) {
    log("GetUniqueId", "", 0, -1, -1, -1);
    check(ncclGetUniqueId(id), "ncclGetUniqueId", nullptr);
  }
  ncclComm_t init_rank(const char* name, int nranks, const ncclUniqueId& id, int rank) {
    log("CommInitRank", name, 0, -1, -1, -1);
    ncclComm_t c = nullptr;
    check(ncclCommInitRank(&c, nranks, id, rank), "ncclCommInitRank", nullptr);
    return c;
  }
  ncclComm_t split(const char* name, ncclComm_t parent, int color, int key) {
    log("CommSplit", name, 0, -1, -1, -1);
    ncclComm_t c = nullptr;
    check(ncclCommSplit(parent, color, key, &c, nullptr), "ncclCommSplit", parent);
    return c;
  }
  void destroy(const char* name, ncclComm_t comm) {
    log("CommDestroy", name, 0, -1, -1, -1);
    check(ncclCommDestroy(comm), "ncclCommDestroy", nullptr);
  }

 private:
  std::FILE* log_ = nullptr;
};

// Unique ids travel through files: the owner writes <dir>/<name>.id atomically, the others wait for it.
ncclUniqueId exchange_id(Nccl& nccl, const std::string& dir, const std::string& name, bool owner) {
  const std::string path = dir + "/" + name + ".id";
  ncclUniqueId id{};
  if (owner) {
    nccl.unique_id(&id);
    const std::string tmp = path + ".tmp" + std::to_string(getpid());
    {
      std::ofstream out(tmp, std::ios::binary);
      out.write(id.internal, sizeof id.internal);
      if (!out) die("cannot write %s", tmp.c_str());
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0) die("cannot rename %s: %s", tmp.c_str(), std::strerror(errno));
    return id;
  }
  const std::uint64_t deadline = mono_ns() + 300'000'000'000ull;
  for (;;) {
    std::ifstream in(path, std::ios::binary);
    if (in && in.read(id.internal, sizeof id.internal)) return id;
    if (mono_ns() > deadline) die("no unique id appeared at %s within 300 s", path.c_str());
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

struct Layout {
  int tp, dp, pp, T, D, P;
};

// Greyhound's plans (--plan) through the job client (greyhound/job.h), which checks every plan against the
// layout and does its Redis I/O on a thread of its own: rank 0 publishes the layout (at start and after each
// applied plan) and takes the latest plan the client read; every rank acknowledges. The decision reaches all ranks in one NCCL broadcast of
//   [epoch, m_0 .. m_{D-1}, role_0 .. role_{W-1}]
// (m_d: micro-batches of DP replica d; role_r: the global rank, in Megatron order, whose (tp, dp, pp) launch
// rank r holds), always the whole configuration to be in force, with a marker in place of m_0 for a plan
// this job does not take; this class only encodes it.
class PlanChannel {
 public:
  static constexpr int kUnsupported = -1;  // a strategy this job does not advertise
  static constexpr int kRejected = -2;     // a plan that does not fit this job
  static constexpr int kRestart = -3;      // S4: checkpoint, ask for a restart, stop

  // nullptr and *error when the Redis URL (or password file) is not usable.
  static std::unique_ptr<PlanChannel> open(const std::string& job, const std::string& redis_url, std::string* error) {
    char err[512] = "";
    greyhound_job_client* c = nullptr;
    // Its Redis I/O on the client's own thread: no iteration waits on Redis, whatever Redis does.
    if (greyhound_job_open_v2(job.c_str(), redis_url.c_str(), GREYHOUND_JOB_OPEN_BACKGROUND, &c, err, sizeof err) !=
        GREYHOUND_JOB_OK) {
      *error = err;
      return nullptr;
    }
    // Its schedule is Megatron's 1F1B without interleaving (pipeline_schedule.h): any count from 1 runs.
    greyhound_job_set_microbatch_multiple_v1(c, 1);
    return std::unique_ptr<PlanChannel>(new PlanChannel(c));
  }
  ~PlanChannel() { greyhound_job_close_v1(client_); }
  PlanChannel(const PlanChannel&) = delete;
  PlanChannel& operator=(const PlanChannel&) = delete;

  // The configuration in force changed: the layout is published again before the next read.
  void layout_changed() { layout_due_ = true; }

  // Rank 0: the job's estimate of what an S3 switch costs it, sent with the next layout.
  void estimate_s3(double seconds) {
    if (greyhound_job_set_cost_estimate_v1(client_, GREYHOUND_JOB_S3, seconds) == GREYHOUND_JOB_OK) layout_due_ = true;
  }

  // What rank 0 knows of the job for the layout it publishes.
  struct JobInfo {
    int T, D, P, gpus_per_node;
    std::uint32_t capabilities;          // GREYHOUND_JOB_CAP_*
    const std::vector<int>& alloc;       // micro-batches per DP replica in force
    const std::vector<int>& initial_alloc;
    const std::vector<int>& role_of;     // placement in force: role (Megatron rank) of each launch rank
  };

  // Rank 0, before the broadcast: fills buf (above) with a new plan's decision, or leaves it zero when there
  // is none (or Redis is away: training goes on).
  void read(const JobInfo& job, std::vector<int>& buf) {
    const int T = job.T, D = job.D, P = job.P;
    const greyhound::ParallelShape shape{T, D, P};
    if (layout_due_) {
      greyhound_job_layout l{};
      l.tp = T;
      l.dp = D;
      l.pp = P;
      l.world = shape.world();
      l.microbatches = job.alloc.data();
      l.microbatches_len = job.alloc.size();
      l.initial_microbatches = job.initial_alloc.data();
      l.initial_microbatches_len = job.initial_alloc.size();
      l.capabilities = job.capabilities;
      l.gpus_per_node = job.gpus_per_node;
      std::vector<greyhound_job_placement> placed;
      for (std::size_t r = 0; r < job.role_of.size(); ++r) {
        const greyhound::RankCoords c = shape.coords(job.role_of[r]);
        placed.push_back({static_cast<int32_t>(r), c.tp, c.dp, c.pp});
      }
      layout_due_ = greyhound_job_publish_layout_v2(client_, &l, placed.data(), placed.size()) != GREYHOUND_JOB_OK;
      const std::string why = layout_due_ ? greyhound_job_last_error_v1(client_) : "";
      if (!why.empty() && why != layout_error_) {  // once per reason, not once per iteration
        std::fprintf(stderr, "greyhound-minitrain: layout not published yet (retried every iteration): %s\n", why.c_str());
      }
      layout_error_ = why;
    }
    greyhound_job_plan plan{};
    const int rc = greyhound_job_poll_plan_v1(client_, &plan);
    if (plan.epoch <= 0 || plan.epoch >= (1 << 30)) {  // nothing new, malformed, or beyond the broadcast's int
      if (rc == GREYHOUND_JOB_PLAN_REJECTED) {
        std::fprintf(stderr, "greyhound-minitrain: ignoring the plan key: %s\n", plan.verdict);
      }
      return;
    }
    if (rc == GREYHOUND_JOB_OK && plan.strategy == GREYHOUND_JOB_S4 && plan.action == GREYHOUND_JOB_ACTION_APPLY) {
      buf[0] = static_cast<int>(plan.epoch);
      buf[1] = kRestart;
      restart_nodes_.assign(plan.exclude_nodes, plan.exclude_nodes + plan.exclude_nodes_len);
      restart_ranks_.assign(plan.exclude_ranks, plan.exclude_ranks + plan.exclude_ranks_len);
      restart_reason_ = plan.reason != nullptr ? plan.reason : "";
    } else if (rc == GREYHOUND_JOB_OK) {
      buf[0] = static_cast<int>(plan.epoch);
      for (int d = 0; d < D; ++d) {
        const auto i = static_cast<std::size_t>(d);
        buf[i + 1] = plan.microbatches_len > 0 ? plan.microbatches[i] : job.alloc[i];  // none: unchanged
      }
      const std::size_t roles = 1 + static_cast<std::size_t>(D);
      for (std::size_t r = 0; r < job.role_of.size(); ++r) buf[roles + r] = job.role_of[r];  // none: unchanged
      for (std::size_t i = 0; i < plan.placement_len; ++i) {  // checked: every rank and role once
        const greyhound_job_placement& e = plan.placement[i];
        buf[roles + static_cast<std::size_t>(e.rank)] = shape.rank({e.tp, e.dp, e.pp});
      }
    } else if (rc == GREYHOUND_JOB_PLAN_UNSUPPORTED || rc == GREYHOUND_JOB_PLAN_REJECTED) {
      buf[0] = static_cast<int>(plan.epoch);
      buf[1] = rc == GREYHOUND_JOB_PLAN_UNSUPPORTED ? kUnsupported : kRejected;
      std::fprintf(stderr, "greyhound-minitrain: plan %lld not applied: %s\n", static_cast<long long>(plan.epoch),
                   plan.verdict);
    }
  }

  // Rank 0, for the S4 plan `epoch` read last: the restart request (without what it excludes). False with
  // *error.
  bool request_restart(std::int64_t epoch, std::string* error) {
    const std::string reason = "S4 plan " + std::to_string(epoch) + ": " + restart_reason_;
    if (greyhound_job_request_restart_v1(client_, 0, epoch, reason.c_str(), restart_nodes_.data(), restart_nodes_.size(),
                                         restart_ranks_.data(), restart_ranks_.size()) == GREYHOUND_JOB_OK) {
      return true;
    }
    *error = greyhound_job_last_error_v1(client_);
    return false;
  }

  // Every rank, once per new epoch: queued, and written by the client (retried while Redis is away).
  void ack(int rank, std::int64_t epoch, std::uint64_t iter, int status, const char* detail, double apply_s) {
    greyhound_job_ack_v2(client_, rank, epoch, static_cast<std::int64_t>(iter), status, detail, apply_s);
  }

 private:
  explicit PlanChannel(greyhound_job_client* c) : client_(c) {}
  greyhound_job_client* client_;
  bool layout_due_ = true;
  std::string layout_error_;  // why the last layout was not published ("" when it was)
  std::vector<int32_t> restart_nodes_, restart_ranks_;  // the latest S4 plan's exclusions
  std::string restart_reason_;
};


// Everything the command line decides.
struct Options {
  int T = 0, D = 0, P = 0, M = 0, H = 0, B = 0, L = 0;
  int global_mb = 0;  // micro-batches of the global batch: D * M, or --global-microbatches
  std::int64_t iterations = 0;
  double duration_s = 0, lr = 0;
  std::string rdzv, group_init, dp_sync, call_log, job, checkpoint_dir;
  std::uint64_t seed = 0;
  bool plan_mode = false;
  std::string redis_url;  // empty: GREYHOUND_REDIS
  std::uint32_t capabilities = GREYHOUND_JOB_CAP_S2 | GREYHOUND_JOB_CAP_S3;  // what --plan advertises
};

void usage() {
  std::printf(
      "usage: greyhound-minitrain --tp T --dp D --pp P (--microbatches M | --global-microbatches G)\n"
      "         (--iterations N | --duration-s S) --rdzv DIR [--hidden H] [--rows B] [--layers L]\n"
      "         [--group-init split|uniqueid] [--dp-sync allreduce|rs-ag] [--seed N] [--lr X] [--call-log FILE]\n"
      "         [--checkpoint-dir DIR] [--plan [--redis URL] [--job J] [--capabilities S2,S3,S4]]\n"
      "  --microbatches: per DP replica (default 4); --global-microbatches: the global batch, split as evenly as\n"
      "    it goes (the first replicas one more)\n"
      "  --iterations: the last iteration index + 1 (a resumed job runs only those left)\n"
      "  --checkpoint-dir: resume from its latest checkpoint when there is one; S4 plans save one there\n"
      "  --plan: apply greyhound's mitigation plans; --capabilities: the strategies advertised, a comma list\n"
      "    of S2, S3 and S4 (S4 needs --checkpoint-dir), or none; default S2,S3\n"
      "exit status: 0 done, 3 stopped for an S4 restart (checkpoint saved), 1 failed, 2 bad usage\n"
      "env: RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE (set by the launcher; LOCAL_WORLD_SIZE, the GPUs per\n"
      "     node, is optional and published in the layout); GREYHOUND_REDIS, GREYHOUND_JOB with --plan\n");
}

// Throws ArgError or std::invalid_argument with a message for the user; *help when --help was given.
Options parse_options(const std::vector<std::string>& argvv, bool* help) {
  const greyhound::Args args(argvv,
                             {"tp", "dp", "pp", "microbatches", "global-microbatches", "iterations", "duration-s", "hidden",
                              "rows", "layers", "rdzv", "group-init", "dp-sync", "seed", "call-log", "lr", "redis", "job",
                              "capabilities", "checkpoint-dir"},
                             {"help", "plan"});
  Options o;
  *help = args.flag("help");
  if (*help) return o;
  o.T = static_cast<int>(args.integer_in("tp", 1, 1, 1024));
  o.D = static_cast<int>(args.integer_in("dp", 1, 1, 1 << 20));
  o.P = static_cast<int>(args.integer_in("pp", 1, 1, 1024));
  if (args.has("microbatches") && args.has("global-microbatches")) {
    throw greyhound::ArgError("give one of --microbatches, --global-microbatches");
  }
  o.M = static_cast<int>(args.integer_in("microbatches", 4, 1, 1 << 16));
  o.global_mb = static_cast<int>(args.integer_in("global-microbatches", static_cast<std::int64_t>(o.D) * o.M, 1, 1 << 20));
  if (o.global_mb < o.D) throw greyhound::ArgError("--global-microbatches must give every DP replica at least one");
  o.M = (o.global_mb + o.D - 1) / o.D;  // the most any replica holds (activation buffers)
  o.checkpoint_dir = args.str("checkpoint-dir", "");
  o.H = static_cast<int>(args.integer_in("hidden", 64, 1, 1 << 14));
  o.B = static_cast<int>(args.integer_in("rows", 32, 1, 1 << 16));
  o.L = static_cast<int>(args.integer_in("layers", 2, 1, 1024));
  o.iterations = args.integer_in("iterations", 0, 0, 1 << 30);
  o.duration_s = args.number("duration-s", 0.0);
  o.lr = args.number("lr", 1e-3);
  o.seed = static_cast<std::uint64_t>(args.integer("seed", 1));
  o.rdzv = args.str("rdzv");
  o.group_init = args.str("group-init", "split");
  o.dp_sync = args.str("dp-sync", "allreduce");
  o.call_log = args.str("call-log", "");
  o.plan_mode = args.flag("plan");
  if (o.plan_mode) {
    o.redis_url = args.str("redis", "");
    o.job = args.str("job", greyhound::read_env_config().job);
    const std::string caps = args.str("capabilities", "S2,S3");
    o.capabilities = 0;
    if (caps != "none") {
      std::size_t from = 0;
      for (;;) {
        const std::size_t comma = caps.find(',', from);
        const std::string c = caps.substr(from, comma == std::string::npos ? std::string::npos : comma - from);
        if (c == "S2") {
          o.capabilities |= GREYHOUND_JOB_CAP_S2;
        } else if (c == "S3") {
          o.capabilities |= GREYHOUND_JOB_CAP_S3;
        } else if (c == "S4") {
          if (o.checkpoint_dir.empty()) throw greyhound::ArgError("--capabilities S4 needs --checkpoint-dir");
          o.capabilities |= GREYHOUND_JOB_CAP_S4;
        } else {
          throw greyhound::ArgError("--capabilities: '" + c + "' is not S2, S3 or S4 (a comma list, or none)");
        }
        if (comma == std::string::npos) break;
        from = comma + 1;
      }
    }
  } else if (args.has("capabilities")) {
    throw greyhound::ArgError("--capabilities needs --plan");
  }
  if ((o.iterations > 0) == (o.duration_s > 0)) throw greyhound::ArgError("give exactly one of --iterations, --duration-s");
  if (o.group_init != "split" && o.group_init != "uniqueid") throw greyhound::ArgError("--group-init: split or uniqueid");
  if (o.dp_sync != "allreduce" && o.dp_sync != "rs-ag") throw greyhound::ArgError("--dp-sync: allreduce or rs-ag");
  if (o.dp_sync == "rs-ag" && (static_cast<std::int64_t>(o.L) * o.H * o.H) % o.D != 0) {
    throw greyhound::ArgError("--dp-sync rs-ag needs layers*hidden*hidden divisible by --dp");
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  try {
    bool help = false;
    o = parse_options(std::vector<std::string>(argv + 1, argv + argc), &help);
    if (help) {
      usage();
      return 0;
    }
  } catch (const greyhound::ArgError& e) {
    std::fprintf(stderr, "greyhound-minitrain: %s\n", e.what());
    return 2;
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "greyhound-minitrain: %s\n", e.what());
    return 2;
  }
  const int T = o.T, D = o.D, P = o.P, M = o.M, H = o.H, B = o.B, L = o.L;
  const std::int64_t iterations = o.iterations;
  const double duration_s = o.duration_s, lr = o.lr;
  const std::string &rdzv = o.rdzv, &group_init = o.group_init, &dp_sync = o.dp_sync, &call_log = o.call_log;
  const std::uint64_t seed = o.seed;
  const bool plan_mode = o.plan_mode;
  const std::uint32_t capabilities = o.capabilities;
  const std::string &job = o.job, &redis_url = o.redis_url;
  std::unique_ptr<PlanChannel> plans;
  if (plan_mode) {
    std::string err;
    plans = PlanChannel::open(job, redis_url, &err);
    if (!plans) {
      std::fprintf(stderr, "greyhound-minitrain: %s\n", err.c_str());
      return 2;
    }
  }

  g_rank = env_int("RANK");
  const int world = env_int("WORLD_SIZE");
  const int local_rank = env_int("LOCAL_RANK");
  const greyhound::ParallelShape shape{T, D, P};
  if (world != shape.world()) die("WORLD_SIZE=%d but --tp %d x --dp %d x --pp %d = %d", world, T, D, P, shape.world());
  if (g_rank >= world) die("RANK=%d outside WORLD_SIZE=%d", g_rank, world);
  // The placement in force: role_of[r] is the global rank (Megatron order) whose (tp, dp, pp) launch rank r
  // holds. It starts as Megatron's (every rank its own); an S3 plan moves roles between launch ranks, while
  // a rank's GPU and node stay those of its launch rank.
  std::vector<int> role_of(static_cast<std::size_t>(world));
  for (int r = 0; r < world; ++r) role_of[static_cast<std::size_t>(r)] = r;
  const greyhound::RankCoords me = shape.coords(g_rank);
  Layout lay{me.tp, me.dp, me.pp, T, D, P};
  bool first_stage = lay.pp == 0;
  bool last_stage = lay.pp == P - 1;
  int gpus_per_node = 0;  // published in the layout (S3 needs it); 0: unknown
  if (const char* g = std::getenv("LOCAL_WORLD_SIZE"); g != nullptr && *g != '\0') gpus_per_node = env_int("LOCAL_WORLD_SIZE");
  if (gpus_per_node > 0 && (world % gpus_per_node != 0 || gpus_per_node % T != 0)) {
    if (g_rank == 0) {
      std::fprintf(stderr, "greyhound-minitrain: LOCAL_WORLD_SIZE=%d does not divide the world in whole TP groups; "
                   "the layout says GPUs per node unknown\n", gpus_per_node);
    }
    gpus_per_node = 0;
  }

  int ndev = 0;
  CUDA_CHECK(cudaGetDeviceCount(&ndev));
  if (ndev < 1) die("no CUDA device");
  CUDA_CHECK(cudaSetDevice(local_rank % ndev));
  cudaStream_t stream = nullptr;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cublasHandle_t blas = nullptr;
  CUBLAS_CHECK(cublasCreate(&blas));
  CUBLAS_CHECK(cublasSetStream(blas, stream));

  // ---- communicators ----
  Nccl nccl(call_log);
  const ncclUniqueId world_id = exchange_id(nccl, rdzv, "world", g_rank == 0);
  ncclComm_t world_comm = nccl.init_rank("world", world, world_id, g_rank);
  ncclComm_t tp_comm = nullptr, dp_comm = nullptr, pp_comm = nullptr;
  // The groups of this rank's role; a member's rank in each is its coordinate (so PP peers are pp -+ 1 and
  // reductions run in role order, whoever holds the roles). `tag` names a placement's unique ids apart.
  auto make_groups = [&](const std::string& tag) {
    const int tp_color = lay.pp * D + lay.dp, dp_color = lay.pp * T + lay.tp, pp_color = lay.dp * T + lay.tp;
    if (group_init == "split") {
      tp_comm = nccl.split("tp", world_comm, tp_color, lay.tp);
      dp_comm = nccl.split("dp", world_comm, dp_color, lay.dp);
      pp_comm = nccl.split("pp", world_comm, pp_color, lay.pp);
    } else {
      tp_comm = nccl.init_rank("tp", T, exchange_id(nccl, rdzv, "tp-" + std::to_string(tp_color) + tag, lay.tp == 0), lay.tp);
      dp_comm = nccl.init_rank("dp", D, exchange_id(nccl, rdzv, "dp-" + std::to_string(dp_color) + tag, lay.dp == 0), lay.dp);
      pp_comm = nccl.init_rank("pp", P, exchange_id(nccl, rdzv, "pp-" + std::to_string(pp_color) + tag, lay.pp == 0), lay.pp);
    }
  };
  const std::uint64_t groups_start_ns = mono_ns();
  make_groups("");
  // What building this rank's groups took: part of the S3 estimate below (a switch builds them again).
  const double groups_s = static_cast<double>(mono_ns() - groups_start_ns) * 1e-9;

  // ---- model state (column-major H x H weights, H x B activations) ----
  const std::size_t hh = static_cast<std::size_t>(H) * H;
  const std::size_t hb = static_cast<std::size_t>(H) * B;
  const std::size_t nparams = static_cast<std::size_t>(L) * hh;
  float *W = nullptr, *G = nullptr, *act = nullptr, *dy = nullptr, *dx = nullptr, *target = nullptr, *loss_buf = nullptr;
  float* shard = nullptr;
  CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&W), nparams * sizeof(float)));
  CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&G), nparams * sizeof(float)));
  std::size_t act_capacity = static_cast<std::size_t>(M);  // micro-batches the activation buffer holds
  CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&act), act_capacity * (L + 1) * hb * sizeof(float)));
  CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&dy), hb * sizeof(float)));
  CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&dx), hb * sizeof(float)));
  CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&target), hb * sizeof(float)));
  CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&loss_buf), sizeof(float)));
  int* plan_dev = nullptr;
  CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&plan_dev), (static_cast<std::size_t>(D) + 1 + world) * sizeof(int)));
  if (dp_sync == "rs-ag") CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&shard), nparams / D * sizeof(float)));
  {
    // W_l = (I + 0.05 U) / T on every TP shard, so the sum over shards stays near the identity.
    std::vector<float> w(nparams), noise(hh);
    for (int l = 0; l < L; ++l) {
      fill_uniform(noise, greyhound::splitmix64(seed * 1000003 + static_cast<std::uint64_t>(lay.pp * L + l) * 131 + lay.tp));
      for (std::size_t i = 0; i < hh; ++i) {
        const bool diag = (i % static_cast<std::size_t>(H)) == (i / static_cast<std::size_t>(H));
        w[static_cast<std::size_t>(l) * hh + i] = ((diag ? 1.0f : 0.0f) + 0.05f * noise[i]) / static_cast<float>(T);
      }
    }
    CUDA_CHECK(cudaMemcpy(W, w.data(), nparams * sizeof(float), cudaMemcpyHostToDevice));
  }
  // Resume from the latest checkpoint (an S4 restart): the weights of this rank's (tp, pp), the next
  // iteration; the DP width may have changed, the global batch may not.
  std::uint64_t start_iter = 0;
  const greyhound::sim::CheckpointMeta this_job{0, T, P, D, H, L, o.global_mb, seed, B, lr};
  if (!o.checkpoint_dir.empty()) {
    std::string path, err;
    if (auto saved = greyhound::sim::latest_checkpoint(o.checkpoint_dir, &path, &err)) {
      if (auto why = greyhound::sim::resume_mismatch(*saved, this_job); !why.empty()) {
        die("cannot resume from %s: %s", path.c_str(), why.c_str());
      }
      std::vector<float> w(nparams);
      if (!greyhound::sim::read_shard(path, lay.tp, lay.pp, w, &err)) die("cannot resume: %s", err.c_str());
      CUDA_CHECK(cudaMemcpy(W, w.data(), nparams * sizeof(float), cudaMemcpyHostToDevice));
      start_iter = static_cast<std::uint64_t>(saved->next_iteration);
      if (g_rank == 0) {
        std::printf("resumed from %s at iteration %lld: %d global micro-batches over %d DP replicas (was %d)\n",
                    path.c_str(), static_cast<long long>(saved->next_iteration), o.global_mb, D, saved->dp);
        std::fflush(stdout);
      }
    } else if (!err.empty()) {
      die("cannot resume: %s", err.c_str());
    }
  }
  auto act_at = [&](int mb, int l) { return act + (static_cast<std::size_t>(mb) * (L + 1) + l) * hb; };
  std::vector<float> host_batch(hb);
  std::vector<float> host_w(nparams);  // the weights on the host (checksums, checkpoints)
  const float one = 1.0f, zero = 0.0f, minus_one = -1.0f;

  // Micro-batches per DP replica (S2 plans change it; the global batch stays the same): this replica's are
  // the global micro-batches first_mb .. first_mb + my_mb - 1 of the iteration.
  // The global batch split as evenly as it goes, the first replicas one more (a job restarted with fewer
  // replicas keeps its global batch).
  std::vector<int> alloc(static_cast<std::size_t>(D));  // micro-batches per DP replica, in force
  for (int d = 0; d < D; ++d) alloc[static_cast<std::size_t>(d)] = o.global_mb / D + (d < o.global_mb % D ? 1 : 0);
  const std::vector<int> initial_alloc = alloc;
  int my_mb = alloc[static_cast<std::size_t>(lay.dp)], global_mb = o.global_mb, first_mb = 0;
  for (int d = 0; d < lay.dp; ++d) first_mb += alloc[static_cast<std::size_t>(d)];
  auto load_batch = [&](float* dst, std::uint64_t iter, int mb, std::uint64_t salt) {
    const auto g = static_cast<std::uint64_t>(first_mb + mb);
    fill_uniform(host_batch, greyhound::splitmix64(seed ^ (iter * 0x9e37ull) ^ (g << 20) ^ salt));
    CUDA_CHECK(cudaMemcpyAsync(dst, host_batch.data(), hb * sizeof(float), cudaMemcpyHostToDevice, stream));
  };

  double iter_loss = 0;
  auto forward = [&](std::uint64_t iter, int mb) {
    if (first_stage) load_batch(act_at(mb, 0), iter, mb, 0x1);
    for (int l = 0; l < L; ++l) {
      CUBLAS_CHECK(cublasSgemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, H, B, H, &one, W + static_cast<std::size_t>(l) * hh, H,
                               act_at(mb, l), H, &zero, act_at(mb, l + 1), H));
      if (T > 1) nccl.all_reduce("tp", tp_comm, act_at(mb, l + 1), hb, ncclSum, stream);
    }
  };
  // Leaves the gradient of the stage input in `dy`.
  auto backward = [&](std::uint64_t iter, int mb) {
    if (last_stage) {
      load_batch(target, iter, mb, 0x2);
      CUDA_CHECK(cudaMemcpyAsync(dy, act_at(mb, L), hb * sizeof(float), cudaMemcpyDeviceToDevice, stream));
      CUBLAS_CHECK(cublasSaxpy(blas, static_cast<int>(hb), &minus_one, target, 1, dy, 1));
      float sq = 0;
      CUBLAS_CHECK(cublasSdot(blas, static_cast<int>(hb), dy, 1, dy, 1, &sq));
      // Averaged over the global batch: the DP sum of the gradients is then the mean, whatever the split.
      iter_loss += 0.5 * sq / (static_cast<double>(B) * global_mb);
      const float scale = 1.0f / (static_cast<float>(B) * static_cast<float>(global_mb));
      CUBLAS_CHECK(cublasSscal(blas, static_cast<int>(hb), &scale, dy, 1));
    }
    for (int l = L - 1; l >= 0; --l) {
      float* Wl = W + static_cast<std::size_t>(l) * hh;
      CUBLAS_CHECK(cublasSgemm(blas, CUBLAS_OP_N, CUBLAS_OP_T, H, H, B, &one, dy, H, act_at(mb, l), H, &one,
                               G + static_cast<std::size_t>(l) * hh, H));
      CUBLAS_CHECK(cublasSgemm(blas, CUBLAS_OP_T, CUBLAS_OP_N, H, B, H, &one, Wl, H, dy, H, &zero, dx, H));
      if (T > 1) nccl.all_reduce("tp", tp_comm, dx, hb, ncclSum, stream);
      std::swap(dy, dx);
    }
  };

  std::vector<PipeStep> steps = greyhound::sim::one_f_one_b(lay.pp, P, my_mb);

  // Plans (--plan): the job's side of greyhound's mitigation.
  std::int64_t applied_epoch = 0;
  const std::size_t roles_at = static_cast<std::size_t>(D) + 1;  // where plan_buf's placement starts
  // [epoch, m_0 .. m_D-1, role_0 .. role_W-1], from rank 0 (PlanChannel)
  std::vector<int> plan_buf(roles_at + static_cast<std::size_t>(world), 0);
  int prev = lay.pp - 1, next = lay.pp + 1;
  // Switches this rank to the allocation in plan_buf: its micro-batches, their global indices, the schedule.
  auto apply_allocation = [&] {
    for (int d = 0; d < D; ++d) alloc[static_cast<std::size_t>(d)] = plan_buf[static_cast<std::size_t>(d) + 1];
    my_mb = alloc[static_cast<std::size_t>(lay.dp)];
    first_mb = 0;
    global_mb = 0;
    for (int d = 0; d < D; ++d) {
      if (d < lay.dp) first_mb += alloc[static_cast<std::size_t>(d)];
      global_mb += alloc[static_cast<std::size_t>(d)];
    }
    if (static_cast<std::size_t>(my_mb) > act_capacity) {
      CUDA_CHECK(cudaFree(act));
      act_capacity = static_cast<std::size_t>(my_mb);
      CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&act), act_capacity * (L + 1) * hb * sizeof(float)));
    }
    steps = greyhound::sim::one_f_one_b(lay.pp, P, my_mb);
  };
  // Switches every rank to the placement in plan_buf (S3, or a revert that carries one), at an iteration
  // boundary, on all ranks alike: the weights of each role go from the launch rank that held it to the one
  // that takes it (P2P on the world communicator, all pairs in one group), then the TP, DP and PP groups of
  // the new roles are built (split from the world, or from new unique ids) and the old ones destroyed.
  // The only state a role carries across iterations is its weights: gradients are zeroed every iteration,
  // SGD keeps no optimizer state, and the allocation is global (plan_buf). Returns the job time the switch
  // took: the slowest rank's, as every rank waits for it at its next collective.
  auto apply_placement = [&](std::int64_t epoch) -> double {
    const std::uint64_t t_start = mono_ns();
    std::vector<int> new_role(plan_buf.begin() + static_cast<std::ptrdiff_t>(roles_at), plan_buf.end());
    std::vector<int> old_holder(static_cast<std::size_t>(world)), new_holder(static_cast<std::size_t>(world));
    for (int r = 0; r < world; ++r) {
      old_holder[static_cast<std::size_t>(role_of[static_cast<std::size_t>(r)])] = r;
      new_holder[static_cast<std::size_t>(new_role[static_cast<std::size_t>(r)])] = r;
    }
    const int mine_before = role_of[static_cast<std::size_t>(g_rank)];
    const int mine_after = new_role[static_cast<std::size_t>(g_rank)];
    if (mine_before != mine_after) {
      float* incoming = nullptr;
      CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&incoming), nparams * sizeof(float)));
      nccl.group_start();
      nccl.send("world", world_comm, W, nparams, new_holder[static_cast<std::size_t>(mine_before)], stream);
      nccl.recv("world", world_comm, incoming, nparams, old_holder[static_cast<std::size_t>(mine_after)], stream);
      nccl.group_end();
      CUDA_CHECK(cudaStreamSynchronize(stream));
      CUDA_CHECK(cudaFree(W));
      W = incoming;
    }
    nccl.destroy("pp", pp_comm);
    nccl.destroy("dp", dp_comm);
    nccl.destroy("tp", tp_comm);
    role_of = std::move(new_role);
    const greyhound::RankCoords c = shape.coords(mine_after);
    lay.tp = c.tp;
    lay.dp = c.dp;
    lay.pp = c.pp;
    first_stage = lay.pp == 0;
    last_stage = lay.pp == P - 1;
    prev = lay.pp - 1;
    next = lay.pp + 1;
    make_groups(".e" + std::to_string(epoch));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    float took_s = static_cast<float>(static_cast<double>(mono_ns() - t_start) * 1e-9);
    CUDA_CHECK(cudaMemcpyAsync(loss_buf, &took_s, sizeof took_s, cudaMemcpyHostToDevice, stream));
    nccl.all_reduce("world", world_comm, loss_buf, 1, ncclMax, stream);
    CUDA_CHECK(cudaMemcpyAsync(&took_s, loss_buf, sizeof took_s, cudaMemcpyDeviceToHost, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    return took_s;
  };
  // A world-wide "did any rank fail": every rank passes its own flag, all get the OR.
  auto any_rank = [&](bool failed) {
    float f = failed ? 1.0f : 0.0f;
    CUDA_CHECK(cudaMemcpyAsync(loss_buf, &f, sizeof f, cudaMemcpyHostToDevice, stream));
    nccl.all_reduce("world", world_comm, loss_buf, 1, ncclMax, stream);
    CUDA_CHECK(cudaMemcpyAsync(&f, loss_buf, sizeof f, cudaMemcpyDeviceToHost, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    return f > 0.5f;
  };
  // S4 at the boundary before iteration `iter`: the holder of each (tp, pp)'s replica-0 role saves those
  // weights, rank 0 commits the checkpoint and asks for the restart, and only then does every rank
  // acknowledge (so the master sees the request before the plan counts as applied). True: stop now.
  // A failure anywhere leaves the job running as it was, the plan rejected.
  auto checkpoint_and_stop = [&](std::int64_t epoch, std::uint64_t iter) -> bool {
    const std::uint64_t t_start = mono_ns();
    std::string err;
    greyhound::sim::CheckpointMeta meta = this_job;
    meta.next_iteration = static_cast<std::int64_t>(iter);
    const std::string ckpt = greyhound::sim::checkpoint_path(o.checkpoint_dir, meta.next_iteration);
    bool failed = false;
    if (lay.dp == 0) {
      CUDA_CHECK(cudaMemcpy(host_w.data(), W, nparams * sizeof(float), cudaMemcpyDeviceToHost));
      failed = !greyhound::sim::write_shard(ckpt, lay.tp, lay.pp, host_w, &err);
    }
    if (!any_rank(failed)) {
      failed = g_rank == 0 && (!greyhound::sim::commit_checkpoint(o.checkpoint_dir, meta, &err) ||
                               !plans->request_restart(epoch, &err));
      if (!any_rank(failed)) {
        const double took_s = static_cast<double>(mono_ns() - t_start) * 1e-9;
        char detail[200];
        std::snprintf(detail, sizeof detail, "checkpoint %s saved in %.1f ms; stopping for the restart", ckpt.c_str(),
                      took_s * 1e3);
        std::printf("plan %lld applied at iter %llu: %s\n", static_cast<long long>(epoch),
                    static_cast<unsigned long long>(iter), detail);
        plans->ack(g_rank, epoch, iter, GREYHOUND_JOB_ACK_APPLIED, detail, took_s);
        return true;
      }
    }
    const std::string why = err.empty() ? "the checkpoint failed on another rank" : "checkpoint failed: " + err;
    // The restart request may have reached Redis, and with it the layout's removal: publish it again.
    if (g_rank == 0) plans->layout_changed();
    std::fprintf(stderr, "greyhound-minitrain: plan %lld not applied: %s\n", static_cast<long long>(epoch), why.c_str());
    plans->ack(g_rank, epoch, iter, GREYHOUND_JOB_ACK_REJECTED, why.c_str(), 0);
    return false;
  };
  // Rank 0 reads the latest plan; everyone gets its epoch and configuration through one NCCL broadcast, so
  // all ranks switch at the same iteration (Redis is never on the others' critical path).
  // True when the job stops here for an S4 restart.
  auto check_plan = [&](std::uint64_t iter) -> bool {
    std::fill(plan_buf.begin(), plan_buf.end(), 0);
    if (g_rank == 0) {
      plans->read({T, D, P, gpus_per_node, capabilities, alloc, initial_alloc, role_of}, plan_buf);
    }
    CUDA_CHECK(cudaMemcpyAsync(plan_dev, plan_buf.data(), plan_buf.size() * sizeof(int), cudaMemcpyHostToDevice, stream));
    nccl.broadcast_ints("world", world_comm, plan_dev, plan_buf.size(), 0, stream);
    CUDA_CHECK(cudaMemcpyAsync(plan_buf.data(), plan_dev, plan_buf.size() * sizeof(int), cudaMemcpyDeviceToHost, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    const std::int64_t epoch = plan_buf[0];
    if (epoch <= applied_epoch) return false;
    applied_epoch = epoch;
    if (plan_buf[1] == PlanChannel::kRestart) {
      return checkpoint_and_stop(epoch, iter);
    } else if (plan_buf[1] == PlanChannel::kUnsupported) {
      plans->ack(g_rank, epoch, iter, GREYHOUND_JOB_ACK_UNSUPPORTED, "a strategy this job does not advertise", 0);
    } else if (plan_buf[1] == PlanChannel::kRejected) {
      plans->ack(g_rank, epoch, iter, GREYHOUND_JOB_ACK_REJECTED, "the plan does not fit this job", 0);
    } else {
      const int role_before = role_of[static_cast<std::size_t>(g_rank)];
      const bool moves =
          !std::equal(role_of.begin(), role_of.end(), plan_buf.begin() + static_cast<std::ptrdiff_t>(roles_at));
      const std::uint64_t t_start = mono_ns();
      const double switch_s = moves ? apply_placement(epoch) : 0.0;
      apply_allocation();
      const double apply_s = moves ? switch_s : static_cast<double>(mono_ns() - t_start) * 1e-9;
      plans->layout_changed();  // the layout names the configuration in force
      char detail[160] = "";
      if (moves) {
        std::snprintf(detail, sizeof detail, "placement switched in %.1f ms (new communicators and weight handover)",
                      switch_s * 1e3);
      }
      std::printf("plan %lld applied at iter %llu: %d micro-batches on this replica, %d in the global batch; role %d "
                  "(tp %d dp %d pp %d), was %d; switch %.3f ms\n",
                  static_cast<long long>(epoch), static_cast<unsigned long long>(iter), my_mb, global_mb,
                  role_of[static_cast<std::size_t>(g_rank)], lay.tp, lay.dp, lay.pp, role_before, switch_s * 1e3);
      plans->ack(g_rank, epoch, iter, GREYHOUND_JOB_ACK_APPLIED, detail, apply_s);
    }
    return false;
  };
  std::uint64_t epoch_ns = mono_ns();
  if (const char* e = std::getenv("GREYHOUND_SIM_EPOCH_NS"); e != nullptr && *e != '\0') {
    epoch_ns = std::strtoull(e, nullptr, 10);
  }
  const std::uint64_t run_start = mono_ns();
  // GREYHOUND_SIM_UNMARKED_RANK (a test fixture): this rank's framework marks no iterations, so it never
  // reaches a validation pause's cut.
  bool mark_iterations = true;
  if (const char* e = std::getenv("GREYHOUND_SIM_UNMARKED_RANK"); e != nullptr && *e != '\0') {
    mark_iterations = std::atoi(e) != g_rank;
  }
  // GREYHOUND_SIM_SETUP_S (a test fixture): seconds between making the communicators and the first iteration,
  // as a real job spends them building its model and loading its data.
  if (const char* e = std::getenv("GREYHOUND_SIM_SETUP_S"); e != nullptr && *e != '\0') {
    const double s = std::strtod(e, nullptr);
    if (s > 0 && s <= 600) std::this_thread::sleep_for(std::chrono::duration<double>(s));
  }
  int stop = iterations > 0 && static_cast<std::int64_t>(start_iter) >= iterations;  // resumed with nothing left
  constexpr std::uint64_t kS3EstimateIterations = 3;  // iterations after the first that the S3 estimate measures
  double fastest_sync_s = 1e9;
  bool restart = false;

  for (std::uint64_t iter = start_iter; stop == 0; ++iter) {
    // The iteration's start, before its first NCCL call: the cut of a validation pause (harmless without
    // greyhound: no ring, nothing marked).
    if (mark_iterations) greyhound_job_mark_iteration_v1(static_cast<std::int64_t>(iter));
    if (plan_mode && check_plan(iter)) {  // before the clock: a plan switch is not part of an iteration
      restart = true;
      break;
    }
    const std::uint64_t t0 = mono_ns();
    iter_loss = 0;
    CUDA_CHECK(cudaMemsetAsync(G, 0, nparams * sizeof(float), stream));
    for (const PipeStep& s : steps) {
      switch (s.action) {
        case PipeAction::kRecvForward:
          nccl.recv("pp", pp_comm, act_at(s.mb, 0), hb, prev, stream);
          break;
        case PipeAction::kForward:
          forward(iter, s.mb);
          break;
        case PipeAction::kSendForward:
          nccl.send("pp", pp_comm, act_at(s.mb, L), hb, next, stream);
          break;
        case PipeAction::kSendForwardRecvBackward:
          nccl.group_start();
          nccl.send("pp", pp_comm, act_at(s.mb, L), hb, next, stream);
          nccl.recv("pp", pp_comm, dy, hb, next, stream);
          nccl.group_end();
          break;
        case PipeAction::kBackward:
          backward(iter, s.mb);
          break;
        case PipeAction::kSendBackward:
          nccl.send("pp", pp_comm, dy, hb, prev, stream);
          break;
        case PipeAction::kSendBackwardRecvForward:
          nccl.group_start();
          nccl.send("pp", pp_comm, dy, hb, prev, stream);
          nccl.recv("pp", pp_comm, act_at(s.mb2, 0), hb, prev, stream);
          nccl.group_end();
          break;
        case PipeAction::kRecvBackward:
          nccl.recv("pp", pp_comm, dy, hb, next, stream);
          break;
      }
    }
    // Data-parallel gradient synchronisation and the optimizer step (SGD). The micro-batch gradients were
    // scaled by the global batch, so their sum over DP is the global mean.
    // The S3 estimate below times the DP sync alone: on a real GPU the pipeline's work is still queued here.
    const bool estimating = plans && g_rank == 0 && (capabilities & GREYHOUND_JOB_CAP_S3) != 0 && iter > start_iter &&
                            iter <= start_iter + kS3EstimateIterations;
    if (estimating) CUDA_CHECK(cudaStreamSynchronize(stream));
    const std::uint64_t sync_start = mono_ns();
    const float step = -static_cast<float>(lr);
    if (dp_sync == "allreduce") {
      if (D > 1) nccl.all_reduce("dp", dp_comm, G, nparams, ncclSum, stream);
      CUBLAS_CHECK(cublasSaxpy(blas, static_cast<int>(nparams), &step, G, 1, W, 1));
    } else {
      const std::size_t part = nparams / D;
      float* my_w = W + static_cast<std::size_t>(lay.dp) * part;
      nccl.reduce_scatter("dp", dp_comm, G, shard, part, stream);
      CUBLAS_CHECK(cublasSaxpy(blas, static_cast<int>(part), &step, shard, 1, my_w, 1));
      CUDA_CHECK(cudaMemcpyAsync(shard, my_w, part * sizeof(float), cudaMemcpyDeviceToDevice, stream));
      nccl.all_gather("dp", dp_comm, shard, W, part, stream);
    }
    if (last_stage && D > 1) {
      float l = static_cast<float>(iter_loss);
      CUDA_CHECK(cudaMemcpyAsync(loss_buf, &l, sizeof l, cudaMemcpyHostToDevice, stream));
      nccl.all_reduce("dp", dp_comm, loss_buf, 1, ncclSum, stream);
      CUDA_CHECK(cudaMemcpyAsync(&l, loss_buf, sizeof l, cudaMemcpyDeviceToHost, stream));
      CUDA_CHECK(cudaStreamSynchronize(stream));
      iter_loss = l;
    }
    CUDA_CHECK(cudaStreamSynchronize(stream));
    const std::uint64_t t1 = mono_ns();
    // Rank 0 estimates what an S3 switch costs this job from what it measured: building the groups twice
    // (the old ones go, new ones come) and handing a role's weights over, which takes no longer than the DP
    // sync that moves 2 (D - 1) / D of them (the quickest of the first iterations after the first).
    if (estimating) {
      fastest_sync_s = std::min(fastest_sync_s, static_cast<double>(t1 - sync_start) * 1e-9);
      if (iter == start_iter + kS3EstimateIterations) plans->estimate_s3(2.0 * groups_s + fastest_sync_s);
    }

    CUDA_CHECK(cudaMemcpy(host_w.data(), W, nparams * sizeof(float), cudaMemcpyDeviceToHost));
    std::uint64_t h = 0xcbf29ce484222325ull;
    for (float f : host_w) {
      std::uint32_t bits;
      std::memcpy(&bits, &f, sizeof bits);
      h = (h ^ bits) * 0x100000001b3ull;
    }
    std::printf("iter %" PRIu64 " t_s %.6f iter_ms %.3f loss %.6g checksum %016" PRIx64 " role %d\n", iter,
                static_cast<double>(t1 - epoch_ns) * 1e-9, static_cast<double>(t1 - t0) * 1e-6, iter_loss, h,
                role_of[static_cast<std::size_t>(g_rank)]);
    std::fflush(stdout);

    if (iterations > 0) {
      stop = static_cast<std::int64_t>(iter) + 1 >= iterations;
    } else {
      // Every rank must stop after the same iteration: rank 0's clock decides, the world agrees.
      int flag = g_rank == 0 && static_cast<double>(mono_ns() - run_start) * 1e-9 >= duration_s;
      float f = static_cast<float>(flag);
      CUDA_CHECK(cudaMemcpyAsync(loss_buf, &f, sizeof f, cudaMemcpyHostToDevice, stream));
      nccl.all_reduce("world", world_comm, loss_buf, 1, ncclMax, stream);
      CUDA_CHECK(cudaMemcpyAsync(&f, loss_buf, sizeof f, cudaMemcpyDeviceToHost, stream));
      CUDA_CHECK(cudaStreamSynchronize(stream));
      stop = f > 0.5f;
    }
  }

  nccl.destroy("pp", pp_comm);
  nccl.destroy("dp", dp_comm);
  nccl.destroy("tp", tp_comm);
  nccl.destroy("world", world_comm);
  cublasDestroy(blas);
  cudaStreamDestroy(stream);
  for (float* p : {W, G, act, dy, dx, target, loss_buf, shard}) cudaFree(p);
  cudaFree(plan_dev);
  return restart ? kExitRestart : 0;
}
