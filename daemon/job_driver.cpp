#include "daemon/job_driver.h"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "common/failpoint.h"

namespace greyhound::master {
namespace {
constexpr std::size_t kLoggedDetailBytes = 1024;
}  // namespace

EventLog::EventLog(const std::string& path) {
  if (path.empty()) return;
  out_.open(path, std::ios::app);
  if (!out_) spdlog::error("cannot open the event log {}", path);
}

void EventLog::write(nlohmann::json line) {
  if (!out_.is_open()) return;
  out_ << line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
  out_.flush();
}

JobDriver::JobDriver(RedisClient& client, std::string job, ControllerConfig config, std::string run_tag,
                     EventLog& log, int batch)
    : client_(client),
      store_(client, std::move(job)),
      plan_lease_s_(config.plan_lease_s),
      lease_holder_(run_tag),
      ctl_(std::move(config), std::move(run_tag)),
      log_(log),
      batch_(batch) {}

bool JobDriver::renew_plan_lease(const Now& now) {
  if (now.mono_s < next_lease_s_) return false;
  const Status s = store_.hold_plan_lease(lease_holder_, static_cast<int>(plan_lease_s_ * 1000));
  if (!s) {
    warn_once("plan-lease:" + s.error(), "could not renew the plan lease (" + s.error() + "); retrying");
    next_lease_s_ = now.mono_s + 0.5;
    return false;
  }
  const bool lapsed = lease_renewed_s_ >= 0 && now.mono_s - lease_renewed_s_ >= plan_lease_s_;
  if (lapsed) {
    spdlog::warn("job {}: the plan lease lapsed ({:.1f} s since this master renewed it): loading the job's state "
                 "again (it may have reverted its remedy)", job(), now.mono_s - lease_renewed_s_);
  }
  lease_renewed_s_ = now.mono_s;
  next_lease_s_ = now.mono_s + plan_lease_s_ / 4;
  return lapsed;
}

Result<std::int64_t> JobDriver::lead(std::int64_t epoch, const std::string& master_id) {
  const std::int64_t before = store_.fence();
  auto r = store_.take_job(epoch);
  if (!r || *r != 0 || before == epoch) return r;
  spdlog::info("job {}: leading it (epoch {})", job(), epoch);
  Event e;
  e.type = event_type::kLeader;
  e.source = "master";
  e.t_unix_ms = unix_ms_now();
  std::optional<IterationUpdate> pace;  // the job's clock, as tick() reads it
  if (auto p = read_pace(); p && *p) pace = **p;
  e.t_s = now(pace).job_s;
  e.detail = to_json(LeaderDetail{master_id, epoch});
  if (const Status s = store_.append_event(e); !s) warn_once("leader-event", "the leader event was not written: " + s.error());
  return r;
}

void JobDriver::check_for_gap() {
  auto first = store_.first_event_id();
  if (!first) return;  // asked again with the next full batch
  check_gap_ = false;
  // The cursor is the newest entry the master read; trimming takes the oldest entries. Trimmed past it, the
  // stream may have dropped entries the master never read (unless the first one left is the next one).
  const std::string& cursor = ctl_.cursor();
  if (cursor == "0-0" || *first == "0-0" || compare_stream_ids(*first, cursor) <= 0) return;
  ctl_.events_lost();
  spdlog::error("job {}: the event stream was trimmed past the master's cursor {} (its oldest entry is now {}): "
                "events between them may be lost to the master; a standby master (--ha) keeps it from falling this "
                "far behind (docs/operations.md)",
                job(), cursor, *first);
}

void JobDriver::warn_once(const std::string& kind, const std::string& message) {
  if (warned_.insert(kind).second) spdlog::warn("job {}: {} (further ones of this kind are not logged)", job(), message);
}

// The job's clock (daemon/job_clock.h): the freshest of the pacing rank's newest iteration and the agents'
// events read so far, plus the wall time since. Before any (a master just started on a quiet job), the open
// incident's detection time.
Now JobDriver::now(const std::optional<IterationUpdate>& pace) {
  Now n;
  n.mono_s = steady_s();
  n.unix_ms = unix_ms_now();
  if (pace) clock_.observe(pace->t_s, pace->t_unix_ms);
  if (const auto t = clock_.at(n.unix_ms)) {
    n.job_s = *t;
  } else if (ctl_.loaded() && ctl_.open_incident()) {
    n.job_s = ctl_.open_incident()->detected_t_s;
  }
  return n;
}

Result<std::optional<IterationUpdate>> JobDriver::read_pace() {
  // A reading is taken for the rank whose key it was read under (a value naming another rank is not its).
  auto read = [&](int r) -> Result<std::optional<IterationUpdate>> {
    auto u = store_.iteration(r);
    if (u && *u && (*u)->rank != r) return std::optional<IterationUpdate>{};
    return u;
  };
  auto p = read(pace_rank_);
  if (!p && p.code() == Errc::kUnavailable) return p;
  std::optional<IterationUpdate> current;
  if (p && *p) current = **p;
  const double mono_s = steady_s();
  const std::int64_t now_ms = unix_ms_now();
  if (!pace_stale(current, now_ms)) {
    pace_search_.reset();
    return p;
  }
  if (!pace_search_.due(mono_s)) return p;
  pace_search_.started(mono_s);
  auto ranks = registered_ranks();
  if (!ranks) return p;
  std::vector<IterationUpdate> readings;
  for (int r : pace_candidates(*ranks, pace_rank_, kPaceCandidates, pace_search_.misses())) {
    auto u = read(r);
    if (!u && u.code() == Errc::kUnavailable) return p;
    if (u && *u) readings.push_back(**u);
  }
  const auto fresher = fresher_pace(current, readings, now_ms);
  if (!fresher) {
    pace_search_.missed();
    return p;
  }
  if (current) {
    spdlog::info("job {}: rank {}'s newest iteration in Redis ended {:.1f} s ago; rank {} paces the job from now on",
                 job(), pace_rank_, static_cast<double>(now_ms - current->t_unix_ms) * 1e-3, fresher->rank);
  } else {
    spdlog::info("job {}: rank {} has no iteration in Redis; rank {} paces the job from now on", job(), pace_rank_,
                 fresher->rank);
  }
  pace_rank_ = fresher->rank;
  pace_search_.reset();
  return std::optional<IterationUpdate>(*fresher);
}

// A master that died between publishing a plan and committing its event left the event out: recorded now (the
// newest 16 at most; older ones were superseded long ago). Plan events a failed commit left to send count as
// recorded (they go first with the next commit). False: Redis is unavailable.
bool JobDriver::record_missed_plans(std::int64_t recorded, const Result<std::optional<Plan>>& latest, const Now& now) {
  for (const Event& e : unsent_.events) {
    const auto at = e.detail.is_object() ? e.detail.find("epoch") : e.detail.end();
    if (e.type == event_type::kPlan && at != e.detail.end() && at->is_number_integer()) {
      recorded = std::max(recorded, at->get<std::int64_t>());
    }
  }
  const std::int64_t epoch = latest && *latest ? (*latest)->epoch : 0;
  std::vector<Plan> missed;
  for (std::int64_t e = std::max(recorded + 1, epoch - 15); e <= epoch; ++e) {
    auto p = e == epoch ? latest : store_.plan(e);
    if (!p && p.code() == Errc::kUnavailable) return false;
    if (p && *p && (*p)->epoch == e) missed.push_back(**p);
  }
  carry_out(ctl_.record_plans_late(missed, recorded, now), now);
  return true;
}

bool JobDriver::load(const Now& now) {
  MasterState state;
  auto st = store_.master_state();
  if (!st && st.code() == Errc::kUnavailable) return false;
  if (!st) {
    warn_once("state", "master state of job " + job() + (st.code() == Errc::kRefused ? " unreadable (" : " is malformed (") +
                           st.error() + "): rebuilding from the stream");
  } else if (*st) {
    state = **st;
  }
  std::optional<Incident> open;
  if (state.open_incident > 0) {
    auto i = store_.incident(state.open_incident);
    if (!i && i.code() == Errc::kUnavailable) return false;
    if (!i) {
      warn_once("incident", "incident " + std::to_string(state.open_incident) + " is malformed (" + i.error() + ")");
    } else if (*i) {
      open = **i;
    }
  }
  auto last = store_.last_event_id();
  if (!last) return false;
  std::int64_t epoch = 0;
  auto plan = store_.latest_plan();
  if (!plan && plan.code() == Errc::kUnavailable) return false;
  if (!plan) warn_once("plan", "the latest plan is malformed (" + plan.error() + ")");
  if (plan && *plan) epoch = (*plan)->epoch;
  if (epoch > kMaxContinuedEpoch) {
    // No master publishes that many plans: a planted or corrupt key. Continuing after it would publish epochs
    // no job reads (they stop at 2^53); the master's own count goes on instead (a taken epoch is stepped over).
    warn_once("plan", "the latest plan names epoch " + std::to_string(epoch) +
                          ", beyond any a master reaches: not continued from");
    epoch = 0;
    plan = std::optional<Plan>{};  // nor recorded as a plan of the job's
  }
  if ((!st || !*st) && epoch > 0) state.plans_recorded = -1;  // no state to say which plans have their events
  if (epoch > 0) state.plans_recorded = std::min(state.plans_recorded, epoch);  // none beyond the latest
  ctl_.load(state, open, epoch, *last, now);
  if (state.plans_recorded >= 0 && !record_missed_plans(state.plans_recorded, plan, now)) return false;
  loaded_at_reconnects_ = client_.reconnects();
  check_gap_ = true;
  spdlog::info("job {}: state {}, cursor {}, {} incidents so far{}", job(), name(ctl_.state().state), ctl_.cursor(),
               ctl_.state().incidents_total, open ? ", incident " + std::to_string(open->id) + " open" : "");
  return true;
}

int JobDriver::tick() {
  if (!client_.connected()) return 0;
  std::optional<IterationUpdate> pace;
  auto p = read_pace();  // once per step: the job clock and the planner's pace
  if (!p && p.code() == Errc::kUnavailable) return 0;
  if (!p) warn_once("iter", p.error());
  if (p && *p) pace = **p;
  Now t = now(pace);
  if (!ctl_.loaded() || loaded_at_reconnects_ != client_.reconnects()) {
    if (!load(t)) return 0;
    t = now(pace);  // with the open incident known (the job clock's fallback)
  }
  if (renew_plan_lease(t) && !load(t)) return 0;

  if (t.mono_s >= next_settings_s_) {  // an operator's settings: within a second
    next_settings_s_ = t.mono_s + 1.0;
    if (auto s = store_.settings()) {
      ctl_.apply_settings(s->value_or(JobSettings{}));
    } else if (s.code() != Errc::kUnavailable) {
      warn_once("settings:" + s.error(), "ignoring the job's settings: " + s.error());
    }
    // An operator's manual plan: it holds the configuration while it stands; served once.
    // A malformed value changes nothing (the hold in force stays): only a readable request, or none, counts.
    if (auto req = store_.operator_plan(); !req && req.code() != Errc::kUnavailable) {
      warn_once("operator-plan:" + req.error(), "ignoring the operator's plan: " + req.error());
    } else if (req) {
      const std::optional<OperatorPlanRequest> r = *req;
      auto answer = r ? store_.operator_plan_result() : Result<std::optional<OperatorPlanReport>>(std::nullopt);
      if (answer || answer.code() != Errc::kUnavailable) {  // else read both again next second
        const std::string state = answer && *answer && (*answer)->id == r->id ? (*answer)->state : "";
        carry_out(ctl_.offer_operator_plan(r, state, t), t);
      }
    }
    // An operator's pre-flight request: served once (the store's answer to it says whether it was).
    if (auto req = store_.preflight_request(); req && *req) {
      auto answer = store_.preflight_result();
      if (!answer && answer.code() != Errc::kUnavailable) {
        warn_once("preflight-result:" + answer.error(), "the pre-flight answer is malformed (" + answer.error() + ")");
      }
      const bool answered = answer && *answer && (*answer)->id == (*req)->id && (*answer)->done();
      if (answer || answer.code() != Errc::kUnavailable) carry_out(ctl_.offer_preflight(**req, answered, t), t);
    } else if (req) {
      ctl_.preflight_withdrawn();  // none in the store (its command gave up on it)
    } else if (req.code() != Errc::kUnavailable) {
      warn_once("preflight:" + req.error(), "ignoring the job's pre-flight request: " + req.error());
    }
  }

  int consumed = 0;
  auto entries = store_.read_events(ctl_.cursor(), batch_);
  if (!entries) {
    warn_once("read:" + entries.error(), "cannot read the event stream: " + entries.error());
    if (entries.code() == Errc::kUnavailable) return 0;
  } else if (!entries->empty()) {
    // Behind (a full batch), or just (re)loaded: were entries after the cursor trimmed before being read?
    if (check_gap_ || static_cast<int>(entries->size()) >= batch_) check_for_gap();
    // The agents' events are readings of the job's clock (the master's own are not: they were read off it).
    const bool had_reading = clock_.has_reading();
    for (const auto& e : *entries) {
      if (e.value && e.value->source.rfind("agent:", 0) == 0) clock_.observe(e.value->t_s, e.value->t_unix_ms);
    }
    if (!had_reading && clock_.has_reading()) t = now(pace);
    store::MasterCommit commit = ctl_.apply(*entries, t);
    // What an earlier step could not commit goes first (kept until a commit succeeds); a newer snapshot of an
    // incident replaces an older one.
    std::vector<Incident> incidents = unsent_.incidents;
    for (Incident& i : commit.incidents) store::upsert_incident(incidents, std::move(i));
    commit.incidents = std::move(incidents);
    commit.events.insert(commit.events.begin(), unsent_.events.begin(), unsent_.events.end());
    const Status s = store_.commit(commit);
    if (!s) {
      warn_once("commit", "could not commit the master state (" + s.error() + "); will retry from the stored cursor");
      ctl_.discard();
      return 0;
    }
    ctl_.adopt(t);
    unsent_ = store::MasterCommit{};
    unsent_state_ = false;
    consumed = static_cast<int>(entries->size());
    for (const auto& e : *entries) {
      if (e.value) {
        log_.write({{"t_unix_ms", t.unix_ms}, {"job", job()}, {"id", e.id}, {"event", to_json(*e.value)}});
      } else {
        warn_once("event:" + e.error.substr(0, e.error.find(':')), "skipping malformed event " + e.id + ": " + e.error);
        log_.write({{"t_unix_ms", t.unix_ms}, {"job", job()}, {"id", e.id}, {"rejected", e.error}});
      }
    }
    log_emitted(commit.events, t.unix_ms);
  }
  carry_out(ctl_.step(t, read_inputs(ctl_.needs(t), pace)), t);
  return consumed;
}

Result<std::vector<int>> JobDriver::registered_ranks() {
  auto layout = store_.layout();
  if (!layout && layout.code() == Errc::kUnavailable) return layout.status();
  if (layout && *layout) {
    auto below = store_.ranks_below((*layout)->world);
    if (below) return std::move(below->first);
    if (below.code() == Errc::kUnavailable) return below.status();
    // A Redis without SMISMEMBER (before 6.2): the members, read whole (the set reader's bound).
  }
  return store_.ranks();
}

JobInputs JobDriver::read_inputs(const Needs& needs, std::optional<IterationUpdate> pace) {
  JobInputs in;
  in.pace = std::move(pace);
  if (needs.registry) {  // both or neither: a window with no expected ranks would be complete at once
    auto a = store_.agents();
    auto r = registered_ranks();
    if (a && r) {
      in.agents = *a;
      in.ranks = *r;
    }
  }
  if (needs.groups) {
    if (auto g = store_.groups()) {
      std::vector<GroupRecord> records;
      for (const auto& e : *g) {
        if (!e.error.empty()) warn_once("group", "group " + e.id + " is malformed (" + e.error + ")");
        if (e.value) records.push_back(*e.value);
      }
      std::vector<std::string> notes;
      in.groups = comparable_groups(records, &notes);
      for (const std::string& n : notes) warn_once("nccl-ring:" + n, n);
      in.traffic = group_traffic(records);
    }
  }
  if (needs.layout) {
    auto l = store_.layout();
    if (!l) warn_once("layout", "layout is malformed (" + l.error() + ")");
    if (l && *l) in.layout = **l;
  }
  if (needs.acks) {
    if (auto a = store_.plan_acks()) {
      in.acks_read = true;
      for (const auto& e : *a) {
        if (e.value) {
          in.acks.push_back(*e.value);
        } else {
          warn_once("ack", "malformed plan acknowledgement (" + e.error + ")");
        }
      }
    }
  }
  return in;
}

void JobDriver::carry_out(Intents it, const Now& t) {
  for (const ProfileRequest& req : it.commands) {
    for (int node : req.nodes) {
      if (const Status s = store_.send_command(node, req.command); !s) {
        warn_once("command", "cannot send a " + req.command.cmd + " command to node " + std::to_string(node) + ": " +
                                 s.error());
      }
    }
  }
  if (it.profile) {
    for (int node : it.profile->nodes) {
      if (const Status s = store_.send_command(node, it.profile->command); !s) {
        warn_once("command", "cannot send a profile command to node " + std::to_string(node) + ": " + s.error());
      }
    }
  }
  if (it.plan) {
    Plan plan = *it.plan;
    plan.t_unix_ms = t.unix_ms;
    if (const auto s = store_.publish_plan(plan); s && *s) {
      failpoint("plan_published");
      Intents published = ctl_.plan_published(plan, t);
      for (Event& e : published.events) it.events.push_back(std::move(e));
      if (published.operator_plan) it.operator_plan = std::move(published.operator_plan);
      it.persist_state = true;
    } else {
      ctl_.plan_failed(plan);
      if (s) {  // the epoch is taken: learnt, with whatever else changed, by loading the state again
        ctl_.plan_epoch_taken(plan);
        spdlog::warn("job {}: plan epoch {} is already published (the job reverted its remedy while the plan lease "
                     "lapsed, or another master): loading the job's state again", job(), plan.epoch);
        loaded_at_reconnects_ = ~0ull;
      }
    }
  }
  // Answers to an operator's requests: the newest replaces one a failed write left, retried every step.
  write_answer(it.operator_plan, unsent_operator_plan_, &store::JobStore::write_operator_plan_result,
               "the answer to the operator's plan");
  write_answer(it.preflight, unsent_preflight_, &store::JobStore::write_preflight_result, "the pre-flight's answer");
  // What an earlier step could not commit goes first (the controller has already acted on it).
  for (Event& e : it.events) unsent_.events.push_back(std::move(e));
  for (Incident& i : it.incidents) store::upsert_incident(unsent_.incidents, std::move(i));
  if (unsent_.events.empty() && unsent_.incidents.empty() && !it.persist_state && !unsent_state_) return;
  store::MasterCommit c;
  c.state = ctl_.state();
  c.state.updated_unix_ms = t.unix_ms;
  c.incidents = unsent_.incidents;
  c.events = unsent_.events;
  if (const Status s = store_.commit(c); !s) {
    warn_once("publish", "could not publish the master's events (" + s.error() + "); will retry");
    unsent_state_ = true;
    return;
  }
  unsent_ = store::MasterCommit{};
  unsent_state_ = false;
  log_emitted(c.events, t.unix_ms);
}

template <class T>
void JobDriver::write_answer(std::optional<T>& fresh, std::optional<T>& unsent,
                             Status (store::JobStore::*write)(const T&), const char* what) {
  if (fresh) unsent = std::move(fresh);
  if (!unsent) return;
  if (const Status s = (store_.*write)(*unsent); s) {
    unsent.reset();
  } else {
    warn_once(std::string("answer:") + what, std::string("cannot write ") + what + " (" + s.error() + "); will retry");
  }
}

void JobDriver::log_emitted(const std::vector<Event>& events, std::int64_t unix_ms) {
  for (const Event& m : events) {
    log_.write({{"t_unix_ms", unix_ms}, {"job", job()}, {"emitted", to_json(m)}});
    // The log line carries at most 1 KiB of the detail (an incident of 10,000 ranks names them all); the
    // stream and the event log keep it whole.
    const std::string detail = m.detail.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    if (detail.size() <= kLoggedDetailBytes) {
      spdlog::info("job {}: {} {}", job(), m.type, detail);
    } else {
      spdlog::info("job {}: {} {}... ({} bytes; whole in the event stream)", job(), m.type,
                   detail.substr(0, kLoggedDetailBytes), detail.size());
    }
  }
}

bool JobDriver::plan_lease_held() {
  auto held = store_.plan_lease_held();
  return !held || *held;
}

bool JobDriver::agents_alive() {
  auto nodes = store_.agents();
  if (!nodes) return nodes.code() == Errc::kUnavailable;  // unknown: not a reason to retire
  for (int n : *nodes) {
    auto h = store_.heartbeat(n);
    if (!h || *h) return true;  // a malformed heartbeat was written by something alive
  }
  return false;
}

}  // namespace greyhound::master
