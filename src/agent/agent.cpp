#include "agent/agent.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <ctime>

#include <spdlog/spdlog.h>

#include "agent/nccl_ring.h"
#include "common/clock.h"
#include "common/record_json.h"
#include "greyhound/hash.h"
#include "greyhound/ops.h"

namespace greyhound::agent {

Agent::Agent(AgentConfig config)
    : cfg_(std::move(config)),
      redis_(RedisClient::Options::for_daemon(cfg_.redis, std::chrono::milliseconds(500))),
      store_(redis_, cfg_.job) {
  started_ns_ = clock_ns(CLOCK_MONOTONIC);
  mono_to_unix_ns_ = static_cast<std::int64_t>(clock_ns(CLOCK_REALTIME)) - static_cast<std::int64_t>(started_ns_);
  last_activity_ns_ = started_ns_;
  if (cfg_.host.empty()) {
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    cfg_.host = host;
  }
}

// An event of this agent's at `mono_ns` (job time and wall clock), of `rank` when it is a rank's.
Event Agent::event_at(std::string type, std::uint64_t mono_ns, int rank) const {
  Event e;
  e.type = std::move(type);
  e.t_s = job_time_s(mono_ns);
  e.t_unix_ms = unix_ms_of(mono_ns);
  e.rank = rank;
  return e;
}

double Agent::job_time_s(std::uint64_t mono_ns) const {
  const std::uint64_t epoch = cfg_.epoch_ns != 0 ? cfg_.epoch_ns : started_ns_;  // no ring yet: our own start
  return (static_cast<double>(mono_ns) - static_cast<double>(epoch)) * 1e-9;
}

std::int64_t Agent::unix_ms_of(std::uint64_t mono_ns) const {
  return (static_cast<std::int64_t>(mono_ns) + mono_to_unix_ns_) / 1'000'000;
}

void Agent::discover(std::uint64_t now_ns) {
  std::vector<std::string> refused;
  const std::vector<std::string> rings = list_ring_files(cfg_.shm_dir, cfg_.job, &refused);
  for (const std::string& why : refused) {
    // Each once, and at most 32 of them: anyone who can write the directory can make files there.
    if (refused_logged_ >= 32 || !logged_.insert("refused:" + why).second) continue;
    spdlog::warn("not a ring this agent reads: {}{}", why, ++refused_logged_ == 32 ? " (no more of these are logged)" : "");
  }
  for (const std::string& path : rings) {
    if (trackers_.count(path) != 0 || ignored_rings_.count(path) != 0) continue;
    std::string err;
    auto reader = RingReader::open(path, &err);
    if (!reader) {
      if (logged_.insert("open:" + path).second) spdlog::warn("skipping ring {}", err);
      ignored_rings_.insert(path);
      continue;
    }
    // A ring whose writer was gone before this agent started belongs to an earlier run.
    if (!reader->writer_alive() && reader->header().created_mono_ns < started_ns_) {
      ignored_rings_.insert(path);
      continue;
    }
    if (cfg_.epoch_ns == 0) cfg_.epoch_ns = reader->header().created_mono_ns;  // the job's clock: first ring
    auto t = std::make_unique<RankTracker>(std::move(reader), cfg_.method);
    tune(*t);
    spdlog::info("tracking rank {} ({})", t->rank(), path);
    trackers_[path] = std::move(t);
    last_activity_ns_ = now_ns;
    published_reconnects_ = ~0ull;  // a new rank: publish its registration
  }
}

// NCCL's ring order over a group this rank made, when the job set NCCL_GRAPH_DUMP_FILE and the rank is the
// one NCCL dumped on: the hook left copies of the dumps beside the ring before the group's record.
void Agent::take_nccl_ring_of(const std::string& path, const GroupMembership& g) {
  std::string tree_error;
  auto ring = take_nccl_ring(path, g.group_id, g.group_rank, g.group_size, &tree_error);
  if (ring) {
    spdlog::info("NCCL's ring over group {} from the graph dump of its rank {}: {} of its ranks on this node, {} channels; "
                 "its trees: {}",
                 group_id_hex(g.group_id), g.group_rank, ring->segment.size(), ring->channels,
                 ring->tree ? std::string(validate::nccl_tree_pattern_name(ring->tree->pattern)) + " pattern"
                            : "no tree graph");
    if (!tree_error.empty() && logged_.insert("nccl-tree:" + path).second) {
      spdlog::warn("NCCL's tree graph of group {} (rank {}) not used, validation assumes the balanced pattern over the "
                   "ring's order: {}",
                   group_id_hex(g.group_id), g.group_rank, tree_error);
    }
    nccl_rings_[path][g.group_id] = std::move(*ring);
  } else if (ring.status().code != Errc::kUnavailable && logged_.insert("nccl-ring:" + path).second) {
    spdlog::warn("NCCL's graph dump of group {} (rank {}) not used, validation follows group-rank order: {}",
                 group_id_hex(g.group_id), g.group_rank, ring.error());
  }
}

void Agent::queue_event(Event e) {
  e.source = "agent:" + std::to_string(cfg_.node);
  e.node = cfg_.node;
  if (events_.size() >= cfg_.event_queue_max) {
    events_.pop_front();
    ++events_dropped_;
    if (logged_.insert("queue-full").second) {
      spdlog::warn("event queue full ({} events) while Redis is unavailable: dropping the oldest", cfg_.event_queue_max);
    }
  }
  events_.push_back(std::move(e));
}

void Agent::flush_events() {
  while (!events_.empty()) {
    const Status s = store_.append_event(events_.front());
    if (!s && s.code() == Errc::kUnavailable) return;  // keep it for the next attempt
    if (!s && logged_.insert("append:" + s.error()).second) spdlog::error("event refused: {}", s.error());
    events_.pop_front();
  }
}

void Agent::publish_state(std::uint64_t now_ns, bool full) {
  if (!redis_.ensure_connected()) {
    if (logged_.insert("redis-down").second) {
      spdlog::warn("{}; will retry (the ranks are not affected)", redis_.last_error());
    }
    return;
  }
  if (logged_.erase("redis-down") != 0) spdlog::info("connected to Redis at {}", redis_.endpoint().describe());
  store::AgentUpdate update = store_.agent_update();
  if (full || published_reconnects_ != redis_.reconnects()) {
    update.register_job();
    for (const auto& [path, t] : trackers_) {
      RankRegistration reg;
      reg.rank = t->rank();
      reg.local_rank = t->local_rank();
      reg.node = cfg_.node;
      reg.host = cfg_.host;
      reg.pid = t->pid();
      reg.device = t->local_rank();
      reg.ring = path;
      reg.t_unix_ms = unix_ms_of(t->created_mono_ns());
      update.rank(reg);
      for (const auto& [gid, g] : t->groups()) update.group_member(gid, g.group_size, g.group_rank, t->rank(), g.created_by, cfg_.node);
      if (const auto dumps = nccl_rings_.find(path); dumps != nccl_rings_.end()) {
        for (const auto& [gid, ring] : dumps->second) update.group_nccl_ring(gid, ring);
      }
    }
    if (!started_event_sent_) {
      Event e = event_at(event_type::kAgentStart, now_ns);
      queue_event(e);
      started_event_sent_ = true;
    }
  }
  for (const auto& [rank, u] : pending_iters_) update.iteration(u);
  if (now_ns >= next_heartbeat_ns_) {
    read_settings();
    AgentHeartbeat hb;
    hb.node = cfg_.node;
    hb.host = cfg_.host;
    hb.pid = static_cast<int>(getpid());
    hb.t_unix_ms = unix_ms_of(now_ns);
    for (const auto& [path, t] : trackers_) {
      hb.ranks.push_back(t->rank());
      hb.records_read += t->records_read();
      hb.records_lost += t->records_lost();
      for (const auto& [gid, counts] : t->op_counts()) update.group_ops(gid, t->rank(), counts);
    }
    std::sort(hb.ranks.begin(), hb.ranks.end());
    if (hb.records_lost > records_lost_logged_) {
      // Once a heartbeat at most: the writers lapped this reader (it was stalled, or the rings are small
      // for the call rate); detection resumes from the records that are left.
      spdlog::warn("{} ring records lost since the last heartbeat ({} in all): they were overwritten before "
                   "this agent read them (it was stalled, or GREYHOUND_RING_RECORDS is small for the call rate)",
                   hb.records_lost - records_lost_logged_, hb.records_lost);
    }
    records_lost_logged_ = hb.records_lost;
    hb.events_dropped = events_dropped_;
    hb.redis_reconnects = redis_.reconnects();
    hb.settings_version = settings_.version;
    hb.detection_paused = settings_.detection_paused.value_or(false);
    update.heartbeat(hb);
    next_heartbeat_ns_ = now_ns + static_cast<std::uint64_t>(cfg_.heartbeat_ms) * 1'000'000ull;
  }
  if (!update.empty()) {
    const Status s = store_.publish(update);
    if (!s && s.code() == Errc::kUnavailable) return;  // state is re-sent after the reconnect
    if (!s && logged_.insert("state:" + s.error()).second) spdlog::error("Redis refused a state update: {}", s.error());
    pending_iters_.clear();
    published_reconnects_ = redis_.reconnects();
  }
  flush_events();
}

void Agent::read_settings() {
  auto st = store_.settings();
  if (!st) {
    if (st.code() != Errc::kUnavailable && logged_.insert("settings:" + st.error()).second) {
      spdlog::warn("ignoring the job's settings: {}", st.error());
    }
    return;  // the ones in force stay
  }
  const JobSettings next = st->value_or(JobSettings{});
  if (to_json(next) == to_json(settings_)) return;
  settings_ = next;
  spdlog::info("settings version {}: {}", settings_.version, to_json(settings_).dump());
  for (auto& [path, t] : trackers_) tune(*t);
}

void Agent::tune(RankTracker& t) const {
  analysis::DetectionTuning tuning;
  tuning.validation_ratio = settings_.validation_ratio;
  tuning.bocd_threshold = settings_.bocd_threshold;
  tuning.bocd_hazard = settings_.bocd_hazard;
  t.tune(tuning, settings_.acf_threshold, settings_.detection_paused.value_or(false));
}

void Agent::poll_commands(std::uint64_t now_ns) {
  if (!redis_.connected()) return;
  if (command_cursor_.empty()) {
    // Start after the newest command: commands are for agents that are running when they are issued.
    auto last = store_.last_command_id(cfg_.node);
    if (!last) return;
    command_cursor_ = *last;
  }
  auto entries = store_.read_commands(cfg_.node, command_cursor_, 16);
  if (!entries) return;
  for (const auto& entry : *entries) {
    command_cursor_ = entry.id;
    if (!entry.value) {
      if (logged_.insert("bad-command").second) spdlog::warn("ignoring a malformed command ({})", entry.error);
      continue;
    }
    const Command* cmd = &*entry.value;
    if (cmd->cmd == "resync") published_reconnects_ = ~0ull;
    if (cmd->cmd == "pause") start_pause(*cmd, now_ns);
    if (cmd->cmd == "pause_run" || cmd->cmd == "pause_resume" || cmd->cmd == "pause_abort" || cmd->cmd == "pause_exit") {
      steer_pause(*cmd);
    }
    if (cmd->cmd == "profile") {
      const double secs = cmd->duration_s;
      profile_request_ = cmd->id;
      for (auto& [path, t] : trackers_) {
        std::string err;
        if (!t->start_profile(now_ns, now_ns + static_cast<std::uint64_t>(secs * 1e9), &err) &&
            logged_.insert("profile:" + path).second) {
          spdlog::warn("cannot profile rank {}: {}", t->rank(), err);
        }
      }
      spdlog::info("profiling {} ranks for {:.1f} s (request {})", trackers_.size(), secs, cmd->id);
    }
    Event ack;
    ack.type = event_type::kCommandAck;
    ack.t_s = job_time_s(now_ns);
    ack.t_unix_ms = unix_ms_of(now_ns);
    ack.detail = to_json(CommandAckDetail{cmd->cmd, cmd->id, command_cursor_});
    queue_event(ack);
  }
}

void Agent::step(std::uint64_t now_ns) {
  if (now_ns >= next_discovery_ns_) {
    discover(now_ns);
    next_discovery_ns_ = now_ns + 500'000'000ull;
  }
  for (auto& [path, t] : trackers_) {
    RankObservation obs;
    t->poll(now_ns, obs);
    if (!obs.iterations.empty() || !obs.new_groups.empty()) last_activity_ns_ = now_ns;
    if (!obs.new_groups.empty()) published_reconnects_ = ~0ull;
    for (const GroupMembership& g : obs.new_groups) take_nccl_ring_of(path, g);
    if (!obs.iterations.empty()) {
      const TrackedIteration& it = obs.iterations.back();
      IterationUpdate u;
      u.rank = t->rank();
      u.index = static_cast<std::int64_t>(it.index);
      u.t_s = job_time_s(it.end_t_ns);
      u.iter_ms = it.iter_ms;
      u.period = static_cast<int>(it.period);
      u.t_unix_ms = unix_ms_of(it.end_t_ns);
      u.mark = t->framework_iteration();
      pending_iters_[u.rank] = u;
    }
    if (auto prof = t->finish_profile(now_ns)) {
      Event e = event_at(event_type::kProfile, now_ns, t->rank());
      ProfileReport report;
      report.request = profile_request_;
      report.window_s = prof->window_s;
      report.iterations = prof->iterations;
      report.iter_ms = prof->iter_ms;
      report.iter_ms_min = prof->iter_ms_min;
      report.iter_ms_max = prof->iter_ms_max;
      report.comm_share = prof->comm_share;
      report.timings = static_cast<std::int64_t>(prof->timings);
      report.status = prof->status;
      for (const auto& [gid, g] : prof->groups) report.groups[gid] = {g.first, g.second};
      e.detail = to_json(report);
      queue_event(e);
    }
    if (obs.period_changed) {
      Event e = event_at(event_type::kPeriodChange, now_ns, t->rank());
      e.detail = to_json(PeriodChangeDetail{static_cast<int>(obs.period)});
      queue_event(e);
    }
    for (const TrackedChange& c : obs.changes) {
      Event e = event_at(std::string(analysis::direction_name(c.change.direction)), c.onset_start_t_ns, t->rank());
      e.index = static_cast<std::int64_t>(c.change.index);
      e.detected_index = static_cast<std::int64_t>(c.change.detected_index);
      e.detected_t_s = job_time_s(now_ns);
      e.before_ms = c.change.before_ms;
      e.after_ms = c.change.after_ms;
      e.ratio = c.change.ratio;
      e.detail = to_json(ChangeDetail{std::string(analysis::method_name(cfg_.method)), job_time_s(c.detected_end_t_ns)});
      spdlog::info("rank {}: {} at iteration {} ({:.1f} -> {:.1f} ms), detected at iteration {}", e.rank, e.type,
                   e.index, e.before_ms, e.after_ms, e.detected_index);
      queue_event(e);
    }
  }
  // Each rank's health, its liveness read once: gone (a fail-stop unless it finished; its stall is over), or
  // stalled. A validation pause holds the ranks on purpose (up to its deadline): no stall counts meanwhile.
  for (const auto& [path, t] : trackers_) {
    if (t->writer_alive()) {
      if (!pause_) watch_stall(path, *t, now_ns);
      continue;
    }
    if (stalls_.erase(path) != 0) queue_event(event_at(event_type::kStallEnd, now_ns, t->rank()));
    if (fail_stops_.count(path) != 0 || t->writer_exited_normally()) continue;
    if (told_to_exit_.count(path) != 0 && t->writer_exit_status() == kPauseExitStatus) {  // as the pre-flight told it: no fail-stop
      fail_stops_.insert(path);
      spdlog::info("rank {} exited on the pre-flight's verdict (status {})", t->rank(), kPauseExitStatus);
      continue;
    }
    report_fail_stop(path, *t, now_ns);
  }
  // Commands and the pause's state go before the publication, so that a rank's pause report (trapped, done,
  // resumed) leaves in the step that saw it rather than a poll later: the ranks stand still meanwhile. (The
  // connection is made first, so that the command cursor starts at the newest command before this agent's
  // registration is published: a command sent in answer to the registration is read.)
  redis_.ensure_connected();
  poll_commands(now_ns);
  watch_pause(now_ns);
  publish_state(now_ns, false);
}

bool Agent::pause_standing() const {
  if (!pause_) return false;
  for (const auto& [path, state] : pause_->reported) {
    if (state != kPauseTrapped && state != kPauseRunning && state != kPauseDone) continue;
    // A rank that died while it stood (or left as the pre-flight told it, its last state "done") stands
    // no more: without this the loop would step fast until the pause is forgotten, its deadline later.
    const auto t = trackers_.find(path);
    if (t == trackers_.end() || !t->second->writer_alive() || told_to_exit_.count(path) != 0) continue;
    return true;
  }
  return false;
}

// A rank that has been inside one NCCL call (blocked: a peer never joined it), or in none (stuck outside
// NCCL: in a kernel that never ends, a deadlock, a debugger), for longer than the threshold: a `stall`
// event, once, with what it waits in and the newest call it completed in each group, for the master to name
// the ranks that never joined; `stall_end` once it goes on.
void Agent::watch_stall(const std::string& path, const RankTracker& t, std::uint64_t now_ns) {
  const std::optional<InCall> call = t.in_call();
  const std::uint64_t since = call ? call->enter_ns : t.last_record_ns();
  if (since == 0 || since > now_ns) return;  // no NCCL call yet
  const double threshold_s = std::max(cfg_.hang_min_s, cfg_.hang_iterations * t.last_iter_ms() * 1e-3);
  const double quiet_s = static_cast<double>(now_ns - since) * 1e-9;
  auto it = stalls_.find(path);
  if (quiet_s > threshold_s && it == stalls_.end()) {
    stalls_[path] = since;
    Event e = event_at(event_type::kStall, now_ns, t.rank());
    StallDetail d;
    d.in_call = call.has_value();
    if (call) {
      d.op = std::string(op_name(static_cast<Op>(call->op)));
      d.group = call->group_id;
      d.group_seq = call->group_seq;
    }
    d.since_t_s = job_time_s(since);
    d.threshold_s = threshold_s;
    for (const auto& [g, s] : t.last_group_seq()) {
      if (d.last_seq.size() >= 64) break;
      d.last_seq[g] = s;
    }
    e.detail = to_json(d);
    spdlog::warn("rank {}: {} for {:.1f} s (threshold {:.1f} s): stalled", e.rank,
                 call ? "inside " + d.op + " (call " + std::to_string(d.group_seq) + " of group " + group_id_hex(d.group) + ")"
                      : std::string("no NCCL call"),
                 quiet_s, threshold_s);
    queue_event(e);
  } else if (it != stalls_.end() && since != it->second) {  // a new record or a new call: it went on
    Event e = event_at(event_type::kStallEnd, now_ns, t.rank());
    spdlog::info("rank {}: going on again after {:.1f} s", e.rank, static_cast<double>(now_ns - it->second) * 1e-9);
    stalls_.erase(it);
    queue_event(e);
  }
}

// A rank whose process is gone without having finished (killed by a signal, crashed, or exit() with a status
// other than 0): a fail-stop, reported once. One that finished (the hook marked its ring at exit with
// status 0) is not one.
void Agent::report_fail_stop(const std::string& path, const RankTracker& t, std::uint64_t now_ns) {
  fail_stops_.insert(path);
  Event e = event_at(event_type::kFailStop, now_ns, t.rank());
  FailStopDetail d;
  d.pid = t.pid();
  d.exit_status = t.writer_exit_status().value_or(-1);
  d.last_record_t_s = t.last_record_ns() != 0 ? job_time_s(t.last_record_ns()) : -1;
  e.detail = to_json(d);
  spdlog::warn("rank {} (pid {}) {}: a fail-stop; its last NCCL call at {:.2f} s", e.rank, d.pid,
               d.exit_status >= 0 ? "exited with status " + std::to_string(d.exit_status)
                                  : std::string("is gone without exiting (killed or crashed)"),
               d.last_record_t_s);
  queue_event(e);
}

namespace {

// A pause's number in the rings: a hash of its id, never 0 (a restarted agent must not reuse a number).
std::uint64_t pause_number(const std::string& id) {
  const std::uint64_t h = fnv1a64(id);
  return h == 0 ? 1 : h;
}

const char* pause_state_name(std::uint32_t s) {
  switch (s) {
    case kPauseTrapped: return "trapped";
    case kPauseRunning: return "running";
    case kPauseDone: return "done";
    case kPauseResumed: return "resumed";
    case kPauseRefused: return "refused";
    default: return "";
  }
}

const char* pause_reason_name(std::uint32_t r) {
  switch (r) {
    case kPauseWhyPast: return "past";
    case kPauseWhyInGroup: return "in_group";
    case kPauseWhyCapturing: return "capturing";
    case kPauseWhyNoCuda: return "no_cuda";
    case kPauseWhyDeadline: return "deadline";
    case kPauseWhyTold: return "told";
    case kPauseWhyAborted: return "aborted";
    case kPauseWhyNoGroup: return "no_group";
    case kPauseWhyNoMemory: return "no_memory";
    case kPauseWhyCudaError: return "cuda_error";
    default: return "";
  }
}

}  // namespace

void Agent::start_pause(const Command& cmd, std::uint64_t now_ns) {
  if (!cmd.pause) return;
  const PauseSpec& spec = *cmd.pause;
  if (pause_ && pause_->id != cmd.id) {  // a new pause ends the old one for good
    Command abort;
    abort.cmd = "pause_abort";
    abort.id = pause_->id;
    steer_pause(abort);
  }
  Pause p;
  p.id = cmd.id;
  p.num = pause_number(cmd.id);
  const std::uint64_t deadline = now_ns + static_cast<std::uint64_t>(spec.deadline_s * 1e9);
  p.forget_ns = deadline + 5'000'000'000ull;
  for (auto& [path, t] : trackers_) {
    const auto tests = spec.ranks.find(t->rank());
    if (tests == spec.ranks.end() || !t->writer_alive()) continue;  // not a rank of the job's layout
    std::string err;
    PauseControl* pc = t->pause_control(&err);
    if (pc == nullptr) {
      if (logged_.insert("pause:" + path).second) spdlog::warn("cannot arm a pause for rank {}: {}", t->rank(), err);
      continue;
    }
    // The request's fields first, its id last (release): the hook reads the id first.
    pc->id.store(0, std::memory_order_release);
    // The state left by the previous pause goes first: a hook reporting for this one writes its id, then
    // its state, and a read between the two must not pass the old state off as this pause's.
    pc->state.store(kPauseIdle, std::memory_order_relaxed);
    pc->state_id.store(0, std::memory_order_release);
    pc->command.store(kPauseCmdArm, std::memory_order_relaxed);
    pc->at_iteration = static_cast<std::uint64_t>(spec.at_iteration);
    pc->deadline_ns = deadline;
    pc->gemm_n = tests->second.gemm ? static_cast<std::uint32_t>(spec.gemm_n) : 0;
    pc->repeats = static_cast<std::uint32_t>(spec.repeats);
    pc->n_sizes = static_cast<std::uint32_t>(std::min<std::size_t>(spec.sizes.size(), kPauseMaxSizes));
    for (std::uint32_t i = 0; i < pc->n_sizes; ++i) pc->sizes[i] = spec.sizes[i];
    const auto& tr = tests->second.transfers;
    pc->n_transfers = static_cast<std::uint32_t>(std::min<std::size_t>(tr.size(), kPauseMaxTransfers));
    for (std::uint32_t i = 0; i < pc->n_transfers; ++i) {
      PauseTransfer& x = pc->transfers[i];
      x.group_id = tr[i].group;
      x.pass = tr[i].pass;
      x.peer = tr[i].peer;
      x.send = tr[i].send ? 1 : 0;
      for (double& ms : x.ms) ms = 0;
    }
    pc->id.store(p.num, std::memory_order_release);
    p.reported[path] = kPauseIdle;
  }
  spdlog::info("pause {}: armed {} ranks at iteration {} (deadline {:.0f} s)", cmd.id, p.reported.size(),
               spec.at_iteration, spec.deadline_s);
  pause_ = std::move(p);
}

void Agent::steer_pause(const Command& cmd) {
  if (!pause_ || pause_->id != cmd.id) return;  // not ours, or already forgotten
  const std::uint32_t c = cmd.cmd == "pause_run"      ? kPauseCmdRun
                          : cmd.cmd == "pause_resume" ? kPauseCmdResume
                          : cmd.cmd == "pause_exit"   ? kPauseCmdExit
                                                      : kPauseCmdAbort;
  if (c == kPauseCmdExit) {
    for (const auto& [path, state] : pause_->reported) told_to_exit_.insert(path);
    spdlog::warn("pause {}: the master's pre-flight check found the job's hardware slow (--fail-on-slow): its ranks "
                 "exit with status {}", cmd.id, kPauseExitStatus);
  }
  for (const auto& [path, state] : pause_->reported) {
    const auto t = trackers_.find(path);
    if (t == trackers_.end()) continue;
    std::string err;
    PauseControl* pc = t->second->pause_control(&err);
    if (pc == nullptr || pc->id.load(std::memory_order_acquire) != pause_->num) continue;
    pc->command.store(c, std::memory_order_release);
  }
}

void Agent::watch_pause(std::uint64_t now_ns) {
  if (!pause_) return;
  for (auto& [path, last] : pause_->reported) {
    const auto t = trackers_.find(path);
    if (t == trackers_.end()) continue;
    std::string err;
    PauseControl* pc = t->second->pause_control(&err);
    if (pc == nullptr) continue;
    const std::uint32_t state = pc->state.load(std::memory_order_acquire);
    if (pc->state_id.load(std::memory_order_relaxed) != pause_->num || state == last) continue;
    if (state == kPauseRunning) {  // not worth an event: "done" follows
      last = state;
      continue;
    }
    last = state;
    PauseReport r;
    r.id = pause_->id;
    r.state = pause_state_name(state);
    r.reason = pause_reason_name(pc->reason);
    if (state == kPauseTrapped) r.drain_ms = pc->drain_ms;
    if (state == kPauseResumed && pc->resumed_ns > pc->trapped_ns) {
      r.paused_ms = static_cast<double>(pc->resumed_ns - pc->trapped_ns) * 1e-6;
    }
    if (state == kPauseDone) {
      r.gemm_ms.assign(pc->gemm_ms, pc->gemm_ms + kPauseGemmTypes);
      r.gemm_tflops.assign(pc->gemm_tflops, pc->gemm_tflops + kPauseGemmTypes);
      // The FP8 GEMM, when the hook reported on it for this pause (a hook without it leaves the block alone);
      // copied once: the ring is another process's memory.
      PauseGemmFp8 fp8;
      std::memcpy(&fp8, &pause_fp8_of(*pc), sizeof fp8);
      constexpr std::uint32_t kOutcomes = sizeof kGemmFp8Names / sizeof kGemmFp8Names[0];
      if (fp8.id == pause_->num && fp8.status >= kGemmFp8Done && fp8.status < kGemmFp8Done + kOutcomes) {
        r.gemm_fp8 = kGemmFp8Names[fp8.status - kGemmFp8Done];
        r.compute_capability = std::clamp(fp8.compute_capability, 0, 199);
        const auto measured = [](double x) { return std::isfinite(x) && x > 0 ? x : 0.0; };
        if (fp8.status == kGemmFp8Done) {
          r.gemm_fp8_ms = measured(fp8.ms);
          r.gemm_fp8_tflops = measured(fp8.tflops);
        }
      }
      const std::uint32_t ns = std::min<std::uint32_t>(pc->n_sizes, kPauseMaxSizes);
      for (std::uint32_t i = 0; i < std::min<std::uint32_t>(pc->n_transfers, kPauseMaxTransfers); ++i) {
        const PauseTransfer& x = pc->transfers[i];
        PauseTransferResult res;
        res.spec = {x.group_id, x.pass, x.peer, x.send != 0};
        res.ms.assign(x.ms, x.ms + ns);
        r.transfers.push_back(std::move(res));
      }
    }
    Event e = event_at(event_type::kPause, now_ns, t->second->rank());
    e.detail = to_json(r);
    queue_event(e);
    spdlog::info("pause {}: rank {} {}{}{}", pause_->id, e.rank, r.state, r.reason.empty() ? "" : " ", r.reason);
  }
  if (now_ns >= pause_->forget_ns) pause_.reset();
}

bool Agent::idle(std::uint64_t now_ns) const {
  if (cfg_.idle_exit_s <= 0) return false;
  for (const auto& [path, t] : trackers_) {
    if (t->writer_alive() || !t->drained()) return false;
  }
  return static_cast<double>(now_ns - last_activity_ns_) * 1e-9 >= cfg_.idle_exit_s;
}

void Agent::shutdown(std::uint64_t now_ns, std::uint64_t deadline_ns) {
  step(now_ns);  // what the rings hold now
  Event e = event_at(event_type::kAgentStop, now_ns);
  e.detail = to_json(AgentStopDetail{events_dropped_});
  queue_event(e);
  while (!events_.empty() && clock_ns(CLOCK_MONOTONIC) < deadline_ns) {
    redis_.ensure_connected();
    flush_events();
    if (!events_.empty()) usleep(50'000);
  }
  if (!events_.empty()) spdlog::warn("{} events not delivered (Redis unavailable)", events_.size());
}

}  // namespace greyhound::agent
