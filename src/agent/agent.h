// greyhound-agent's LocalController: one per node. Discovers the rings of its job in the node's shm dir,
// runs a RankTracker per rank, and publishes to Redis: registrations, group membership, heartbeats,
// iteration times and slowdown/recovery events; answers commands from its command stream.
//
// It never blocks the ranks (they only write their rings). Redis being slow or absent only delays its own
// reports: state (registrations, groups, heartbeats, iteration times) is re-published after a reconnect,
// events wait in a bounded queue (the oldest are dropped, and counted, when it is full).
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "agent/rank_tracker.h"
#include "common/redis_client.h"
#include "store/job_store.h"
#include "store/messages.h"

namespace greyhound::agent {

struct AgentConfig {
  std::string job = "default";
  int node = 0;
  std::string shm_dir = "/dev/shm";
  RedisEndpoint redis;
  analysis::DetectionMethod method = analysis::DetectionMethod::kBocdValidated;
  int poll_ms = 50;
  // While the ranks of a pause stand still (one has trapped, not every one has resumed), the loop steps this
  // often instead: each of the pause's two round trips through the master (trapped -> run, done -> resume)
  // then costs a few of these, not a few poll_ms, and the job stands still that much less.
  int pause_poll_ms = 10;
  int heartbeat_ms = 1000;
  double idle_exit_s = 0;            // > 0: exit once every ring is finished and nothing new came for this long
  std::uint64_t epoch_ns = 0;        // job clock origin (CLOCK_MONOTONIC); 0: the earliest ring's creation
  std::size_t event_queue_max = 4096;
  // A rank inside one NCCL call, or in none, for longer than hang_iterations x its iteration time, and at
  // least hang_min_s, is reported as stalled (a `stall` event; `stall_end` once it goes on).
  double hang_iterations = 10;
  double hang_min_s = 60;
  std::string host;
};

class Agent {
 public:
  explicit Agent(AgentConfig config);

  // One pass: discover rings, read them, publish. `now_ns` is CLOCK_MONOTONIC.
  void step(std::uint64_t now_ns);
  // True when idle_exit_s has passed with every ring finished.
  bool idle(std::uint64_t now_ns) const;
  // Last attempts to deliver queued events (until `deadline_ns`), then agent_stop.
  void shutdown(std::uint64_t now_ns, std::uint64_t deadline_ns);

  std::uint64_t events_dropped() const { return events_dropped_; }
  // True while a rank of this node stands still in a pause: its last state trapped, running or done, its
  // process alive and not told to exit. The loop then steps every pause_poll_ms.
  bool pause_standing() const;
  // How long the loop sleeps before the next step.
  int sleep_ms() const { return pause_standing() ? std::min(cfg_.poll_ms, cfg_.pause_poll_ms) : cfg_.poll_ms; }
  std::size_t ranks() const { return trackers_.size(); }

 private:
  void discover(std::uint64_t now_ns);
  void publish_state(std::uint64_t now_ns, bool full);
  void queue_event(Event e);
  void flush_events();
  void poll_commands(std::uint64_t now_ns);
  // The operator's settings (greyhoundctl set), read once per heartbeat and handed to every rank's tracker.
  void read_settings();
  void tune(RankTracker& t) const;
  double job_time_s(std::uint64_t mono_ns) const;
  Event event_at(std::string type, std::uint64_t mono_ns, int rank = -1) const;
  std::int64_t unix_ms_of(std::uint64_t mono_ns) const;

  AgentConfig cfg_;
  RedisClient redis_;
  store::JobStore store_;
  std::map<std::string, std::unique_ptr<RankTracker>> trackers_;  // by ring path
  std::set<std::string> ignored_rings_;  // stale rings from earlier runs
  std::map<int, IterationUpdate> pending_iters_;
  std::deque<Event> events_;  // waiting for the event stream
  std::uint64_t events_dropped_ = 0;
  std::uint64_t records_lost_logged_ = 0;  // the rings' lost records as of the last warning
  std::uint64_t next_discovery_ns_ = 0;
  std::uint64_t next_heartbeat_ns_ = 0;
  std::uint64_t last_activity_ns_ = 0;
  std::uint64_t started_ns_ = 0;
  std::uint64_t published_reconnects_ = ~0ull;  // re-publish state when this differs from the client's
  std::int64_t mono_to_unix_ns_ = 0;            // CLOCK_REALTIME - CLOCK_MONOTONIC at start
  std::string command_cursor_;
  JobSettings settings_;  // in force (version 0: none read)
  std::string profile_request_;  // id of the profile command in progress
  // The validation pause in progress (docs/validation.md): its id, the number the rings know it by, the
  // ranks armed (by ring path) with the last state reported of each, and when the agent forgets it.
  struct Pause {
    std::string id;
    std::uint64_t num = 0;
    std::map<std::string, std::uint32_t> reported;  // ring path -> last kPause* state sent
    std::uint64_t forget_ns = 0;
  };
  std::optional<Pause> pause_;
  void start_pause(const Command& cmd, std::uint64_t now_ns);
  void steer_pause(const Command& cmd);
  void watch_pause(std::uint64_t now_ns);
  void report_fail_stop(const std::string& path, const RankTracker& t, std::uint64_t now_ns);
  void take_nccl_ring_of(const std::string& path, const GroupMembership& g);
  std::map<std::string, std::map<std::uint64_t, NcclRingDump>> nccl_rings_;  // by ring path, group
  void watch_stall(const std::string& path, const RankTracker& t, std::uint64_t now_ns);
  std::map<std::string, std::uint64_t> stalls_;  // rings whose rank is stalled, by path: since when (mono ns)
  std::set<std::string> fail_stops_;  // rings whose writer died (reported), by path
  std::set<std::string> told_to_exit_;  // rings whose rank a pre-flight told to exit (kPauseExitStatus: no fail-stop)
  bool started_event_sent_ = false;
  std::set<std::string> logged_;  // one log line per kind of problem
  int refused_logged_ = 0;        // files refused as rings that were logged (at most 32)
};

}  // namespace greyhound::agent
