// greyhound-bench-load: one greyhound-master fed a synthetic job of 10,000 ranks on 1,250 nodes through Redis
// (docs/operations.md, "Scale"). Synthetic agents (threads, not processes) publish what the agents of such a
// job publish: the registry, an iteration update per rank per iteration, a heartbeat per node per second,
// agent_start events, and answers to the master's commands (a command_ack per node, then a profile event
// per rank). Slow GPUs are injected on a schedule: every rank's agent reports the job's slowdown (and later
// its recovery) a few iterations after its onset, and the profiles show the slow rank as the job's real
// ones would (bench/scale/synthetic_job.h). The master runs unmodified, as a process.
//
// It prints what the master handled (events/s, how long events waited before it consumed them), what each
// decision took (detection to incident, incident to localisation, the culprit named), the master's memory
// and CPU over the run and Redis' memory. Exit status 0 when every injected slow GPU was named and the master
// had caught up at the end; 1 otherwise; 2 on bad flags or a setup failure.
//
// Usage: greyhound-bench-load [flags] [-- master flags]   (--help lists them)
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
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

#include "bench/scale/synthetic_job.h"
#include "common/args.h"
#include "common/redis_client.h"
#include "greyhound/hash.h"
#include "sim/redis_server.h"
#include "sim/simcluster/rank_launcher.h"
#include "store/job_store.h"

namespace {

using namespace greyhound;
using bench::SlowGpu;
using bench::SyntheticJob;
using Clock = std::chrono::steady_clock;

// Ctrl-C or SIGTERM ends the run early, with the usual cleanup (the master and Redis run in their own
// process groups and would otherwise be left behind).
volatile sig_atomic_t g_interrupted = 0;
void on_signal(int) { g_interrupted = 1; }

constexpr const char* kUsage = R"(usage: greyhound-bench-load [flags] [-- flags for greyhound-master]
  --ranks N             ranks of the synthetic job (default: 10000)
  --gpus-per-node N     ranks per node (default: 8)
  --tp N, --pp N        tensor and pipeline parallel sizes; DP = ranks / (TP x PP) (default: 8, 10)
  --iter-ms MS          the job's healthy iteration time (default: 1000)
  --faults N            slow GPUs injected one after another (default: 2)
  --first-fault-s S     job time of the first (after the master's healthy baseline) (default: 25)
  --fault-s S           how long each lasts (default: 30)
  --gap-s S             healthy time after each (default: 30)
  --slow-factor F       the slow GPU computes this many times slower (default: 1.5)
  --connections N       synthetic agents' Redis connections (threads), nodes split among them (default: 4)
  --agent-poll-ms MS    how often each synthetic agent reads its command stream, as the agent's --poll-ms (default: 50)
  --master PATH         the greyhound-master binary (default: next to this one)
  --redis URL           use this Redis; the job's keys (gh:v1:{loadbench-<pid>}:*) stay there
                        (default: start a private redis-server, AOF fsync every second)
  --redis-server PATH   the redis-server binary (default: redis-server)
  --json FILE           also write the figures here
  --keep                keep the work directory (the master's log, Redis' files)
)";

struct Fault {
  int rank = 0;
  double factor = 1.5;
  double start_s = 0, end_s = 0;
};

std::optional<SlowGpu> slow_at(const std::vector<Fault>& faults, double t_s) {
  for (const Fault& f : faults) {
    if (t_s >= f.start_s && t_s < f.end_s) return SlowGpu{f.rank, f.factor};
  }
  return std::nullopt;
}

std::int64_t stream_ms(const std::string& id) {  // "1700000000000-3" -> 1700000000000
  return std::strtoll(id.c_str(), nullptr, 10);
}

// The job's iterations, identical in every thread: iteration k starts where k-1 ended and lasts as long as
// the job's state at its start makes it.
class IterationClock {
 public:
  IterationClock(const SyntheticJob& job, const std::vector<Fault>& faults) : job_(job), faults_(faults) {
    len_ms_ = job_.iteration_ms(slow_at(faults_, 0));
  }
  struct Iteration {
    std::int64_t index;
    double start_s, end_s, iter_ms;
  };
  // Iterations that ended by `t_s`, in order.
  std::vector<Iteration> advance(double t_s) {
    std::vector<Iteration> out;
    while (start_s_ + len_ms_ * 1e-3 <= t_s) {
      out.push_back({index_, start_s_, start_s_ + len_ms_ * 1e-3, len_ms_});
      start_s_ += len_ms_ * 1e-3;
      ++index_;
      len_ms_ = job_.iteration_ms(slow_at(faults_, start_s_));
    }
    return out;
  }

 private:
  const SyntheticJob& job_;
  const std::vector<Fault>& faults_;
  std::int64_t index_ = 0;
  double start_s_ = 0, len_ms_ = 0;
};

struct Shared {
  const SyntheticJob* job = nullptr;
  std::vector<Fault> faults;
  std::string job_name;
  RedisEndpoint endpoint;
  Clock::time_point start;
  std::int64_t start_unix_ms = 0;
  int poll_ms = 50;
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> iteration_updates{0}, commands_answered{0}, profiles{0}, redis_errors{0};

  double job_s() const { return std::chrono::duration<double>(Clock::now() - start).count(); }
  std::int64_t unix_ms(double job_s) const { return start_unix_ms + static_cast<std::int64_t>(job_s * 1000.0); }
};

// One connection's share of the synthetic agents: nodes [first, last).
class AgentGroup {
 public:
  AgentGroup(Shared& s, int first, int last)
      : s_(s), first_(first), last_(last),
        client_(RedisClient::Options::for_daemon(s.endpoint, std::chrono::milliseconds(5000))),
        store_(client_, s.job_name), clock_(*s.job, s.faults) {
    cursors_.resize(static_cast<std::size_t>(last - first));
  }

  void run() {
    const auto period = std::chrono::milliseconds(s_.poll_ms);
    auto next = Clock::now();
    while (!s_.stop.load()) {
      step();
      next += period;
      const auto now = Clock::now();
      if (next < now) next = now;  // behind: no catch-up burst
      std::this_thread::sleep_until(next);
    }
  }

 private:
  struct Change {  // a level change of the job's iteration, which every rank's agent reports
    std::string type;
    std::int64_t index;
    double onset_s, before_ms, after_ms;
    int reported_delay = 2;  // ranks with detection delays up to this one have reported it
  };
  struct Window {
    int node;
    std::string request;
    double start_s, end_s;
  };

  static int detection_delay(int rank, std::int64_t index) {  // 3..5 iterations, as BOCD plus validation take
    return 3 + static_cast<int>(fnv1a64(std::to_string(rank) + "@" + std::to_string(index)) % 3);
  }

  void append(const Event& e) {
    if (!store_.append_event(e)) s_.redis_errors.fetch_add(1);
  }

  Event event(const std::string& type, int node, int rank, double t_s) const {
    Event e;
    e.type = type;
    e.t_s = t_s;
    e.t_unix_ms = s_.unix_ms(t_s);
    e.source = "agent:" + std::to_string(node);
    e.node = node;
    e.rank = rank;
    return e;
  }

  void step() {
    const SyntheticJob& job = *s_.job;
    const double now = s_.job_s();
    if (!started_) {  // as an agent does when it comes up: its start, then the newest command is its cursor
      for (int n = first_; n < last_; ++n) {
        auto last = store_.last_command_id(n);
        cursors_[static_cast<std::size_t>(n - first_)] = last ? *last : "0-0";
        append(event(event_type::kAgentStart, n, -1, now));
      }
      started_ = true;
    }
    // Commands: an acknowledgement each, and a profiling window for "profile".
    for (int n = first_; n < last_; ++n) {
      std::string& cursor = cursors_[static_cast<std::size_t>(n - first_)];
      auto entries = store_.read_commands(n, cursor, 16);
      if (!entries) {
        s_.redis_errors.fetch_add(1);
        continue;
      }
      for (const auto& entry : *entries) {
        cursor = entry.id;
        if (!entry.value) continue;
        if (entry.value->cmd == "profile") windows_.push_back({n, entry.value->id, now, now + entry.value->duration_s});
        Event ack = event(event_type::kCommandAck, n, -1, now);
        ack.detail = to_json(CommandAckDetail{entry.value->cmd, entry.value->id, entry.id});
        append(ack);
        s_.commands_answered.fetch_add(1);
      }
    }
    // Iterations that ended: each rank's newest (one round trip per node), level changes noted.
    const auto done = clock_.advance(now);
    for (const auto& it : done) {
      if (last_iter_ms_ > 0 && std::fabs(it.iter_ms - last_iter_ms_) > 1e-9) {
        changes_.push_back({it.iter_ms > last_iter_ms_ ? event_type::kSlowdown : event_type::kRecovery, it.index,
                            it.start_s, last_iter_ms_, it.iter_ms});
      }
      last_iter_ms_ = it.iter_ms;
      newest_ = it;
    }
    const bool heartbeat = now >= next_heartbeat_s_;
    if (heartbeat) next_heartbeat_s_ = now + 1.0;
    if (!done.empty() || heartbeat) {
      for (int n = first_; n < last_; ++n) {
        store::AgentUpdate u = store_.agent_update();
        AgentHeartbeat hb;
        hb.node = n;
        hb.host = "bench-node-" + std::to_string(n);
        hb.pid = static_cast<int>(getpid());
        hb.t_unix_ms = s_.unix_ms(now);
        for (int r = n * job.gpus_per_node(); r < (n + 1) * job.gpus_per_node(); ++r) {
          hb.ranks.push_back(r);
          if (done.empty()) continue;
          IterationUpdate iu;
          iu.rank = r;
          iu.index = newest_->index;
          iu.t_s = newest_->end_s;
          iu.iter_ms = newest_->iter_ms;
          iu.period = 84;
          iu.t_unix_ms = s_.unix_ms(newest_->end_s);
          u.iteration(iu);
          s_.iteration_updates.fetch_add(1);
        }
        if (heartbeat) u.heartbeat(hb);
        if (!store_.publish(u)) s_.redis_errors.fetch_add(1);
      }
    }
    // Each rank's agent reports a change 3-5 iterations after its onset.
    if (newest_) {
      for (Change& c : changes_) {
        while (c.reported_delay < 5 && newest_->index >= c.index + c.reported_delay + 1) {
          ++c.reported_delay;
          for (int r = first_ * job.gpus_per_node(); r < last_ * job.gpus_per_node(); ++r) {
            if (detection_delay(r, c.index) != c.reported_delay) continue;
            Event e = event(c.type, job.node_of(r), r, c.onset_s);
            e.index = c.index;
            e.detected_index = c.index + c.reported_delay;
            e.detected_t_s = now;
            e.before_ms = c.before_ms;
            e.after_ms = c.after_ms;
            e.ratio = c.after_ms / c.before_ms;
            e.detail = to_json(ChangeDetail{"bocd", newest_->end_s});
            append(e);
          }
        }
      }
      changes_.erase(std::remove_if(changes_.begin(), changes_.end(), [](const Change& c) { return c.reported_delay >= 5; }),
                     changes_.end());
    }
    // Profiling windows that ended: one profile event per rank of the node.
    for (auto it = windows_.begin(); it != windows_.end();) {
      if (it->end_s > now) {
        ++it;
        continue;
      }
      const auto slow = slow_at(s_.faults, 0.5 * (it->start_s + it->end_s));
      const std::uint64_t window = fnv1a64(it->request);
      for (int r = it->node * job.gpus_per_node(); r < (it->node + 1) * job.gpus_per_node(); ++r) {
        Event e = event(event_type::kProfile, it->node, r, now);
        e.detail = to_json(job.profile(r, it->request, it->end_s - it->start_s, slow, window));
        append(e);
        s_.profiles.fetch_add(1);
      }
      it = windows_.erase(it);
    }
  }

  Shared& s_;
  int first_, last_;
  RedisClient client_;
  store::JobStore store_;
  IterationClock clock_;
  std::vector<std::string> cursors_;
  std::vector<Change> changes_;
  std::vector<Window> windows_;
  std::optional<IterationClock::Iteration> newest_;
  double last_iter_ms_ = 0;
  double next_heartbeat_s_ = 0;
  bool started_ = false;
};

struct ProcSample {
  double rss_mib = 0, hwm_mib = 0, cpu_s = 0;
};

std::optional<ProcSample> sample_process(pid_t pid) {
  ProcSample s;
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  if (!status) return std::nullopt;
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) s.rss_mib = std::strtod(line.c_str() + 6, nullptr) / 1024.0;
    if (line.rfind("VmHWM:", 0) == 0) s.hwm_mib = std::strtod(line.c_str() + 6, nullptr) / 1024.0;
  }
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const auto close = text.rfind(')');
  if (close == std::string::npos) return s;
  std::istringstream rest(text.substr(close + 2));
  std::string field;
  unsigned long long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && rest >> field; ++i) {  // fields 14 and 15: utime, stime (clock ticks)
    if (i == 14) utime = std::strtoull(field.c_str(), nullptr, 10);
    if (i == 15) stime = std::strtoull(field.c_str(), nullptr, 10);
  }
  s.cpu_s = static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
  return s;
}

// A field of INFO's text ("used_memory:123\r\n").
std::optional<double> info_field(RedisClient& c, const std::string& section, const std::string& name) {
  auto r = c.command({"INFO", section});
  if (!r || r->type != RedisReply::Type::kString) return std::nullopt;
  const auto at = r->str.find(name + ":");
  if (at == std::string::npos) return std::nullopt;
  return std::strtod(r->str.c_str() + at + name.size() + 1, nullptr);
}

struct FaultResult {
  std::int64_t injected_ms = 0;  // wall clock of its onset
  std::int64_t first_slowdown_ms = -1, incident_open_ms = -1, localised_ms = -1, first_recovery_ms = -1,
               incident_close_ms = -1;
  std::int64_t last_report_ms = -1;  // the last profile report of the window the localisation used
  int culprit = -1;
  std::string kind, cause;
  double rss_after_close_mib = -1;
};

std::string self_dir() {
  std::error_code ec;
  auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(".") : p.parent_path().string();
}

double ms_between(std::int64_t from, std::int64_t to) {
  return from >= 0 && to >= 0 ? static_cast<double>(to - from) : -1;
}

int run(int argc, char** argv) {
  std::vector<std::string> raw(argv + 1, argv + argc);
  for (const auto& a : raw) {
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (a == "--") break;
  }
  Args a(raw,
         {"ranks", "gpus-per-node", "tp", "pp", "iter-ms", "faults", "first-fault-s", "fault-s", "gap-s", "slow-factor",
          "connections", "agent-poll-ms", "master", "redis", "redis-server", "json"},
         {"keep"});
  const int ranks = static_cast<int>(a.integer_in("ranks", 10000, 2, 1000000));
  const int gpn = static_cast<int>(a.integer_in("gpus-per-node", 8, 1, 64));
  const int tp = static_cast<int>(a.integer_in("tp", 8, 1, 1024));
  const int pp = static_cast<int>(a.integer_in("pp", 10, 1, 1024));
  const double iter_ms = a.number("iter-ms", 1000);
  const int nfaults = static_cast<int>(a.integer_in("faults", 2, 0, 100));
  const double first_s = a.number("first-fault-s", 25), fault_s = a.number("fault-s", 30), gap_s = a.number("gap-s", 30);
  const double factor = a.number("slow-factor", 1.5);
  const int connections = static_cast<int>(a.integer_in("connections", 4, 1, 64));
  const int poll_ms = static_cast<int>(a.integer_in("agent-poll-ms", 50, 1, 10000));
  if (!(iter_ms >= 10 && iter_ms <= 600000)) throw ArgError("--iter-ms must be 10..600000");
  if (!(first_s >= 0 && fault_s > 0 && gap_s >= 0 && first_s + nfaults * (fault_s + gap_s) <= 86400)) {
    throw ArgError("--first-fault-s, --fault-s and --gap-s must be >= 0 (--fault-s > 0) and the run at most a day");
  }
  if (!(factor > 1.0 && factor <= 100)) throw ArgError("--slow-factor must be above 1 and at most 100");
  SyntheticJob job(ranks, gpn, tp, pp, iter_ms);
  if (connections > job.nodes()) throw ArgError("--connections must not exceed the nodes");

  Shared s;
  s.job = &job;
  s.poll_ms = poll_ms;
  for (int i = 0; i < nfaults; ++i) {  // culprits spread over nodes and stages
    Fault f;
    f.rank = static_cast<int>((static_cast<std::int64_t>(i) * 7919 + ranks / 3 + 5) % ranks);
    f.factor = factor;
    f.start_s = first_s + i * (fault_s + gap_s);
    f.end_s = f.start_s + fault_s;
    s.faults.push_back(f);
  }
  const double end_s = first_s + nfaults * (fault_s + gap_s);

  char tmpl[] = "/tmp/greyhound-load.XXXXXX";
  if (mkdtemp(tmpl) == nullptr) {
    std::perror("greyhound-bench-load: mkdtemp");
    return 2;
  }
  const std::string work = tmpl;
  std::unique_ptr<sim::RedisServer> server;
  std::string url = a.str("redis", "");
  if (url.empty()) {
    sim::RedisServer::Options o;
    o.dir = work;
    o.binary = a.str("redis-server", "redis-server");
    o.appendfsync = "everysec";
    std::string err;
    server = sim::RedisServer::start(o, &err);
    if (!server) {
      std::fprintf(stderr, "greyhound-bench-load: cannot start redis-server: %s\n", err.c_str());
      return 2;
    }
    url = server->url();
  }
  s.endpoint = redis_endpoint_from_env(url);
  s.job_name = "loadbench-" + std::to_string(getpid());
  RedisClient client(RedisClient::Options::for_daemon(s.endpoint, std::chrono::milliseconds(5000)));
  store::JobStore store(client, s.job_name);

  std::printf("greyhound-bench-load: %d ranks on %d nodes (TP %d x DP %d x PP %d), %zu groups, iteration %.0f ms; "
              "%d slow GPU(s) x%.2f for %.0f s each; %d connections, agents poll every %d ms\n",
              ranks, job.nodes(), tp, job.dp(), pp, job.groups().size(), iter_ms, nfaults, factor, fault_s, connections,
              poll_ms);
  std::fflush(stdout);

  // The registry, as the agents publish it when they come up (and the layout, as rank 0 does).
  const auto reg_start = Clock::now();
  std::map<int, std::vector<const bench::SyntheticGroup*>> groups_of_node;
  for (const auto& g : job.groups()) {
    for (int r : g.members) {
      auto& v = groups_of_node[job.node_of(r)];
      if (v.empty() || v.back() != &g) v.push_back(&g);
    }
  }
  const std::int64_t reg_ms = unix_ms_now();
  for (int n = 0; n < job.nodes(); ++n) {
    store::AgentUpdate u = store.agent_update();
    u.register_job();
    for (int r = n * gpn; r < (n + 1) * gpn; ++r) {
      RankRegistration reg;
      reg.rank = r;
      reg.local_rank = r - n * gpn;
      reg.node = n;
      reg.host = "bench-node-" + std::to_string(n);
      reg.pid = 100000 + r;
      reg.device = reg.local_rank;
      reg.t_unix_ms = reg_ms;
      u.rank(reg);
    }
    for (const bench::SyntheticGroup* g : groups_of_node[n]) {
      for (std::size_t i = 0; i < g->members.size(); ++i) {
        if (job.node_of(g->members[i]) != n) continue;
        u.group_member(g->id, static_cast<int>(g->members.size()), static_cast<int>(i), g->members[i], "CommSplit", n);
        u.group_ops(g->id, g->members[i], g->ops);
      }
    }
    if (!store.publish(u)) {
      std::fprintf(stderr, "greyhound-bench-load: cannot write the registry: %s\n", client.last_error().c_str());
      return 2;
    }
  }
  JobLayout layout = job.layout();
  layout.t_unix_ms = reg_ms;
  if (!store.write_layout(layout)) {
    std::fprintf(stderr, "greyhound-bench-load: cannot write the layout\n");
    return 2;
  }
  const double reg_s = std::chrono::duration<double>(Clock::now() - reg_start).count();

  // The master, unmodified.
  const std::string master = a.str("master", self_dir() + "/greyhound-master");
  std::vector<std::string> margs = {"--job", s.job_name, "--redis", url};
  bool has_poll = false;
  for (const auto& extra : a.rest()) {
    margs.push_back(extra);
    has_poll = has_poll || extra.rfind("--poll-ms", 0) == 0;
  }
  if (!has_poll) {
    margs.push_back("--poll-ms");
    margs.push_back("100");
  }
  const std::string master_log = work + "/master.log";
  s.start = Clock::now();
  s.start_unix_ms = unix_ms_now();
  sim::ChildSpec spec;
  spec.name = "greyhound-master";
  spec.argv = {master};
  spec.argv.insert(spec.argv.end(), margs.begin(), margs.end());
  spec.stdout_path = spec.stderr_path = master_log;
  std::string spawn_error;
  const pid_t master_pid = sim::spawn(spec, &spawn_error);
  if (master_pid < 0) {
    std::fprintf(stderr, "greyhound-bench-load: %s\n", spawn_error.c_str());
    return 2;
  }

  std::vector<std::unique_ptr<AgentGroup>> groups;
  std::vector<std::thread> threads;
  for (int c = 0; c < connections; ++c) {
    const int first = job.nodes() * c / connections, last = job.nodes() * (c + 1) / connections;
    groups.push_back(std::make_unique<AgentGroup>(s, first, last));
  }
  for (auto& g : groups) threads.emplace_back([&g] { g->run(); });

  // Watch: the stream (the master's decisions), the master's cursor, memory and CPU.
  std::vector<FaultResult> results(static_cast<std::size_t>(nfaults));
  for (int i = 0; i < nfaults; ++i) results[static_cast<std::size_t>(i)].injected_ms = s.unix_ms(s.faults[static_cast<std::size_t>(i)].start_s);
  std::string cursor = "0-0";
  std::map<std::int64_t, std::uint64_t> per_second;  // stream entries by their id's second
  std::map<std::string, std::int64_t> last_report;  // per profile request: its last report's stream time
  std::uint64_t entries_total = 0;
  int lag_samples = 0;
  double max_lag_ms = 0, lag_sum_ms = 0, cpu_peak = 0, rss_peak = 0, redis_peak_mib = 0;
  std::vector<double> rss_series;
  double last_cpu_s = 0;
  auto last_sample = Clock::now();
  std::optional<ProcSample> first_sample;
  double commands_at_start = info_field(client, "stats", "total_commands_processed").value_or(0);
  bool master_gone = false;
  int master_status = 0;
  auto fault_at = [&](std::int64_t ms) -> FaultResult* {  // the fault an event at `ms` belongs to
    FaultResult* f = nullptr;
    for (auto& r : results) {
      if (ms >= r.injected_ms) f = &r;
    }
    return f;
  };
  auto watch = [&] {
    for (;;) {
      auto entries = store.read_events(cursor, 5000);
      if (!entries) break;
      for (const auto& e : *entries) {
        cursor = e.id;
        ++entries_total;
        const std::int64_t ms = stream_ms(e.id);
        ++per_second[ms / 1000];
        if (!e.value) continue;
        FaultResult* f = fault_at(ms);
        if (f == nullptr) continue;
        const Event& v = *e.value;
        if (v.type == event_type::kProfile && v.detail.is_object()) {
          auto req = v.detail.find("request");
          if (req != v.detail.end() && req->is_string()) last_report[req->get<std::string>()] = ms;
        }
        if (v.type == event_type::kSlowdown && f->first_slowdown_ms < 0) f->first_slowdown_ms = ms;
        if (v.type == event_type::kRecovery && f->first_recovery_ms < 0) f->first_recovery_ms = ms;
        if (v.source != "master") continue;
        if (v.type == event_type::kIncidentOpen && f->incident_open_ms < 0) f->incident_open_ms = ms;
        if (v.type == event_type::kLocalised && f->incident_open_ms >= 0 && f->localised_ms < 0) {
          std::string err;
          if (auto loc = parse_localisation_report(v.detail, &err)) {
            f->localised_ms = ms;
            if (auto it = last_report.find(loc->request); it != last_report.end()) f->last_report_ms = it->second;
            f->culprit = loc->culprit;
            f->kind = loc->kind;
            f->cause = std::string(name(loc->cause));
          }
        }
        if (v.type == event_type::kIncidentClose && f->incident_open_ms >= 0 && f->incident_close_ms < 0) {
          f->incident_close_ms = ms;
          if (auto p = sample_process(master_pid)) f->rss_after_close_mib = p->rss_mib;
        }
      }
      if (entries->size() < 5000) break;
    }
    if (Clock::now() - last_sample >= std::chrono::seconds(1)) {
      const double dt = std::chrono::duration<double>(Clock::now() - last_sample).count();
      last_sample = Clock::now();
      if (auto p = sample_process(master_pid)) {
        if (!first_sample) first_sample = p;
        if (last_cpu_s > 0) cpu_peak = std::max(cpu_peak, (p->cpu_s - last_cpu_s) / dt);
        last_cpu_s = p->cpu_s;
        rss_peak = std::max(rss_peak, p->rss_mib);
        rss_series.push_back(p->rss_mib);
      }
      if (auto m = info_field(client, "memory", "used_memory")) redis_peak_mib = std::max(redis_peak_mib, *m / 1048576.0);
      // The master's lag: how long the oldest event it has not consumed yet has waited (0: none waits).
      if (auto st = store.master_state(); st && *st) {
        if (auto next = store.read_events((*st)->cursor, 1); next && !next->empty()) {
          const double lag = static_cast<double>(unix_ms_now() - stream_ms(next->front().id));
          max_lag_ms = std::max(max_lag_ms, lag);
          lag_sum_ms += lag;
        }
        ++lag_samples;
      }
    }
    if (!master_gone && waitpid(master_pid, &master_status, WNOHANG) == master_pid) master_gone = true;
  };
  while (s.job_s() < end_s && !master_gone && !g_interrupted) {
    watch();
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  // The run is over: does the master catch up with the stream (within 30 s)?
  double final_lag_ms = -1;
  const auto catch_up_by = Clock::now() + std::chrono::seconds(30);
  s.stop = true;
  for (auto& t : threads) t.join();
  const double run_s = s.job_s();
  const double commands_at_end = info_field(client, "stats", "total_commands_processed").value_or(0);
  while (!master_gone && !g_interrupted && Clock::now() < catch_up_by) {
    watch();
    auto st = store.master_state();
    auto last = store.last_event_id();
    if (st && *st && last && (*st)->cursor == *last) {
      final_lag_ms = 0;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  watch();
  const auto end_sample = sample_process(master_pid);
  if (!master_gone) {
    sim::stop_all({master_pid}, 10.0);
  }
  if (server) server->stop();

  // Figures.
  std::uint64_t peak_events = 0;
  for (const auto& [sec, n] : per_second) peak_events = std::max(peak_events, n);
  const double cpu_mean = end_sample && first_sample ? (end_sample->cpu_s) / run_s : -1;
  std::printf("\nregistry: %d rank registrations, %zu groups and the layout written in %.1f s\n", ranks,
              job.groups().size(), reg_s);
  std::printf("load over %.0f s: %" PRIu64 " stream entries (%.0f/s mean, %" PRIu64 " in the busiest second), "
              "%" PRIu64 " iteration updates (%.0f/s), %" PRIu64 " profile reports, %" PRIu64 " commands answered; "
              "Redis %.0f commands/s, %.1f MiB at most; %" PRIu64 " Redis errors\n",
              run_s, entries_total, entries_total / run_s, peak_events, s.iteration_updates.load(),
              s.iteration_updates.load() / run_s, s.profiles.load(), s.commands_answered.load(),
              (commands_at_end - commands_at_start) / run_s, redis_peak_mib, s.redis_errors.load());
  std::printf("master: the oldest event not consumed yet waited %.0f ms at most (%.0f ms mean, sampled every second), %s at "
              "the end; CPU %.0f %% mean, %.0f %% in the busiest "
              "second; RSS %.1f MiB after start, %.1f MiB peak, %.1f MiB at the end\n",
              max_lag_ms, lag_samples > 0 ? lag_sum_ms / lag_samples : 0.0, final_lag_ms == 0 ? "caught up" : "NOT caught up", cpu_mean * 100, cpu_peak * 100,
              rss_series.empty() ? -1.0 : rss_series.front(), end_sample ? end_sample->hwm_mib : rss_peak,
              end_sample ? end_sample->rss_mib : -1.0);
  bool all_found = true;
  nlohmann::json jfaults = nlohmann::json::array();
  for (int i = 0; i < nfaults; ++i) {
    const FaultResult& r = results[static_cast<std::size_t>(i)];
    const Fault& f = s.faults[static_cast<std::size_t>(i)];
    const bool found = r.culprit == f.rank;
    all_found = all_found && found;
    std::printf("fault %d: rank %d (node %d) x%.2f at %.0f s: first slowdown report +%.0f ms, incident +%.0f ms after it, "
                "localised +%.0f ms after that (+%.0f ms after the window's last report): rank %d %s (%s) -> %s; recovery: incident closed %.0f ms after the first "
                "report; master RSS %.1f MiB then\n",
                i + 1, f.rank, job.node_of(f.rank), f.factor, f.start_s, ms_between(r.injected_ms, r.first_slowdown_ms),
                ms_between(r.first_slowdown_ms, r.incident_open_ms), ms_between(r.incident_open_ms, r.localised_ms),
                ms_between(r.last_report_ms, r.localised_ms), r.culprit, r.kind.c_str(), r.cause.c_str(), found ? "found" : "NOT FOUND",
                ms_between(r.first_recovery_ms, r.incident_close_ms), r.rss_after_close_mib);
    jfaults.push_back({{"rank", f.rank},
                       {"start_s", f.start_s},
                       {"first_report_ms", ms_between(r.injected_ms, r.first_slowdown_ms)},
                       {"detection_to_incident_ms", ms_between(r.first_slowdown_ms, r.incident_open_ms)},
                       {"incident_to_localised_ms", ms_between(r.incident_open_ms, r.localised_ms)},
                       {"last_report_to_localised_ms", ms_between(r.last_report_ms, r.localised_ms)},
                       {"culprit", r.culprit},
                       {"kind", r.kind},
                       {"found", found},
                       {"recovery_to_close_ms", ms_between(r.first_recovery_ms, r.incident_close_ms)},
                       {"rss_after_close_mib", r.rss_after_close_mib}});
  }
  if (master_gone) std::printf("the master exited early (status %d): see %s\n", master_status, master_log.c_str());
  if (g_interrupted) std::printf("interrupted at %.0f s of %.0f\n", run_s, end_s);
  const bool ok = all_found && final_lag_ms == 0 && !master_gone && !g_interrupted;
  std::printf("%s\n", ok ? "PASS: every slow GPU named, the master kept up"
                         : "FAIL: a slow GPU not named, or the master behind or gone");
  if (a.has("json")) {
    nlohmann::json j = {{"ranks", ranks},
                        {"nodes", job.nodes()},
                        {"shape", {{"tp", tp}, {"dp", job.dp()}, {"pp", pp}}},
                        {"groups", job.groups().size()},
                        {"iter_ms", iter_ms},
                        {"run_s", run_s},
                        {"stream_entries", entries_total},
                        {"stream_entries_per_s", entries_total / run_s},
                        {"busiest_second_entries", peak_events},
                        {"iteration_updates_per_s", s.iteration_updates.load() / run_s},
                        {"redis_commands_per_s", (commands_at_end - commands_at_start) / run_s},
                        {"redis_peak_mib", redis_peak_mib},
                        {"redis_errors", s.redis_errors.load()},
                        {"master_max_lag_ms", max_lag_ms},
                        {"master_mean_lag_ms", lag_samples > 0 ? lag_sum_ms / lag_samples : 0.0},
                        {"master_caught_up", final_lag_ms == 0},
                        {"master_cpu_mean", cpu_mean},
                        {"master_cpu_peak", cpu_peak},
                        {"master_rss_start_mib", rss_series.empty() ? -1.0 : rss_series.front()},
                        {"master_rss_peak_mib", end_sample ? end_sample->hwm_mib : rss_peak},
                        {"master_rss_end_mib", end_sample ? end_sample->rss_mib : -1.0},
                        {"faults", jfaults},
                        {"pass", ok}};
    std::ofstream(a.str("json")) << j.dump(2) << '\n';
  }
  if (a.has("keep")) {
    std::printf("work directory kept: %s\n", work.c_str());
  } else {
    std::error_code ec;
    std::filesystem::remove_all(work, ec);
  }
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  signal(SIGPIPE, SIG_IGN);
  signal(SIGINT, on_signal);
  signal(SIGTERM, on_signal);
  try {
    return run(argc, argv);
  } catch (const greyhound::ArgError& e) {
    std::fprintf(stderr, "greyhound-bench-load: %s\n", e.what());
    return 2;
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "greyhound-bench-load: %s\n", e.what());
    return 2;
  }
}
