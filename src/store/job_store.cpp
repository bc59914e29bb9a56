#include "store/job_store.h"

#include <algorithm>
#include <cstdlib>

#include "common/record_json.h"
#include "store/bounded_json.h"
#include "greyhound/ring.h"
#include "store/keys.h"

namespace greyhound::store {
namespace {

using Type = RedisReply::Type;

// A Redis reply is bounded by what the server holds; these bound what one read hands on.
constexpr std::size_t kMaxSetMembers = 1 << 20;
constexpr std::size_t kMaxHashFields = 1 << 20;
constexpr int kMaxReadCount = 10000;

std::string stream_field(const RedisReply& fields, const char* name) {
  for (std::size_t i = 0; i + 1 < fields.elements.size(); i += 2) {
    if (fields.elements[i].str == name) return fields.elements[i + 1].str;
  }
  return {};
}

bool to_int(const std::string& s, long lo, long hi, long* out) {
  if (s.empty() || s.size() > 20) return false;
  char* end = nullptr;
  const long v = std::strtol(s.c_str(), &end, 10);
  if (*end != '\0' || v < lo || v > hi) return false;
  *out = v;
  return true;
}

std::vector<std::string> xadd(const std::string& key, long maxlen, const std::string& json_text) {
  return {"XADD", key, "MAXLEN", "~", std::to_string(maxlen), "*", "json", json_text};
}

// A group's hash, field by field: "size", "member:<i>", "created_by" (a JSON string), "ops:<rank>".
Entry<GroupRecord> parse_group(const std::string& hex, const RedisReply& hash) {
  Entry<GroupRecord> out;
  out.id = hex;
  GroupRecord g;
  if (!parse_group_id_hex(hex, &g.id)) {
    out.error = "not a group id";
    return out;
  }
  auto note = [&](const std::string& why) {
    if (out.error.empty()) out.error = why;
  };
  bool bad_member = false;
  for (std::size_t i = 0; i + 1 < hash.elements.size(); i += 2) {
    const std::string& k = hash.elements[i].str;
    const std::string& v = hash.elements[i + 1].str;
    long x = 0;
    if (k == "size") {
      if (!to_int(v, 1, kMaxRank, &x)) {
        note("size: not a group size");
        bad_member = true;
      } else {
        g.size = static_cast<int>(x);
      }
    } else if (k.rfind("member:", 0) == 0) {
      long gr = 0;
      if (!to_int(k.substr(7), 0, kMaxRank, &gr) || !to_int(v, 0, kMaxRank, &x)) {
        note(k + ": not a rank");
        bad_member = true;
      } else {
        g.members[static_cast<int>(gr)] = static_cast<int>(x);
      }
    } else if (k == "created_by") {
      auto j = parse_bounded(v);
      if (j && j->is_string() && j->get_ref<const std::string&>().size() <= 64) {
        g.created_by = j->get<std::string>();
      } else {
        note("created_by: not a JSON string");
      }
    } else if (k.rfind("ops:", 0) == 0) {
      long rank = 0;
      auto j = parse_bounded(v);
      if (!to_int(k.substr(4), 0, kMaxRank, &rank) || !j || !j->is_object()) {
        note(k + ": not op counts");
        continue;
      }
      std::map<std::string, std::uint64_t> counts;
      bool ok = true;
      for (const auto& [op, n] : j->items()) {
        if (!n.is_number_unsigned() || op.size() > 64) {
          ok = false;
          break;
        }
        counts[op] = n.get<std::uint64_t>();
      }
      if (ok) {
        g.ops[static_cast<int>(rank)] = std::move(counts);
      } else {
        note(k + ": not op counts");
      }
    }
  }
  for (const auto& [gr, r] : g.members) {
    if (g.size > 0 && gr >= g.size) {
      note("member:" + std::to_string(gr) + ": beyond the group's size");
      bad_member = true;
    }
  }
  if (!bad_member) out.value = std::move(g);
  return out;
}

}  // namespace

// ---- AgentUpdate

void AgentUpdate::register_job() { commands_.push_back({"SADD", keys::jobs(), job_}); }

void AgentUpdate::rank(const RankRegistration& r) {
  commands_.push_back({"SET", keys::rank(job_, r.rank), to_json(r).dump()});
  commands_.push_back({"SADD", keys::ranks(job_), std::to_string(r.rank)});
}

void AgentUpdate::group_member(std::uint64_t group, int size, int group_rank, int rank, const std::string& created_by) {
  const std::string hex = group_id_hex(group);
  commands_.push_back({"SADD", keys::groups(job_), hex});
  commands_.push_back({"HSET", keys::group(job_, hex), "size", std::to_string(size), "member:" + std::to_string(group_rank),
                       std::to_string(rank), "created_by", nlohmann::json(created_by).dump()});
}

void AgentUpdate::group_ops(std::uint64_t group, int rank, const std::map<std::string, std::uint64_t>& ops) {
  commands_.push_back({"HSET", keys::group(job_, group_id_hex(group)), "ops:" + std::to_string(rank),
                       nlohmann::json(ops).dump()});
}

void AgentUpdate::iteration(const IterationUpdate& u) {
  commands_.push_back({"SET", keys::iter(job_, u.rank), to_json(u).dump(), "EX",
                       std::to_string(keys::kIterationTtl.count())});
}

void AgentUpdate::heartbeat(const AgentHeartbeat& h) {
  commands_.push_back({"SET", keys::agent(job_, h.node), to_json(h).dump(), "EX",
                       std::to_string(keys::kHeartbeatTtl.count())});
  commands_.push_back({"SADD", keys::agents(job_), std::to_string(h.node)});
}

// ---- JobStore

JobStore::JobStore(RedisClient& client, std::string job) : client_(client), job_(std::move(job)) {}

Result<RedisReply> JobStore::run(const std::vector<std::string>& argv) {
  if (!client_.ensure_connected()) return Result<RedisReply>::failure(client_.last_error(), Errc::kUnavailable);
  auto r = client_.command(argv);
  if (!r) return Result<RedisReply>::failure(client_.last_error(), Errc::kUnavailable);
  if (r->is_error()) return Result<RedisReply>::failure(argv[0] + " " + argv[1] + ": " + r->str, Errc::kRefused);
  return std::move(*r);
}

Result<std::optional<std::string>> JobStore::get(const std::string& key) {
  auto r = run({"GET", key});
  if (!r) return r.status();
  if (r->type == Type::kNil) return std::optional<std::string>();
  if (r->type != Type::kString) return Result<std::optional<std::string>>::failure(key + ": not a string value");
  return std::optional<std::string>(std::move(r->str));
}

template <class T, class Parse>
Result<std::optional<T>> JobStore::get_as(const std::string& key, Parse parse) {
  auto text = get(key);
  if (!text) return text.status();
  if (!*text) return std::optional<T>();
  std::string err;
  auto v = parse(**text, &err);
  if (!v) return Result<std::optional<T>>::failure(key + ": " + err);
  return std::optional<T>(std::move(*v));
}

Result<std::vector<int>> JobStore::int_members(const std::string& key) {
  auto r = run({"SMEMBERS", key});
  if (!r) return r.status();
  if (r->type != Type::kArray || r->elements.size() > kMaxSetMembers) {
    return Result<std::vector<int>>::failure(key + ": not a set of ids");
  }
  std::vector<int> out;
  for (const auto& m : r->elements) {
    long v = 0;
    if (to_int(m.str, 0, kMaxRank, &v)) out.push_back(static_cast<int>(v));
  }
  std::sort(out.begin(), out.end());
  return out;
}

template <class T, class Parse>
Result<std::vector<Entry<T>>> JobStore::read_stream(const std::string& key, const std::string& after, int count,
                                                    Parse parse) {
  using R = Result<std::vector<Entry<T>>>;
  if (!valid_stream_id(after)) return R::failure("cursor '" + after.substr(0, 64) + "' is not a stream id");
  auto r = run({"XREAD", "COUNT", std::to_string(std::clamp(count, 1, kMaxReadCount)), "STREAMS", key, after});
  if (!r) return r.status();
  std::vector<Entry<T>> out;
  if (r->type != Type::kArray || r->elements.empty() || r->elements[0].elements.size() < 2) return out;  // none
  for (const auto& entry : r->elements[0].elements[1].elements) {
    if (entry.elements.size() < 2) continue;
    Entry<T> e;
    e.id = entry.elements[0].str;
    const std::string text = stream_field(entry.elements[1], "json");
    std::string err;
    e.value = parse(text, &err);
    if (!e.value) e.error = err;
    out.push_back(std::move(e));
  }
  return out;
}

Result<std::string> JobStore::last_id(const std::string& key) {
  auto r = run({"XREVRANGE", key, "+", "-", "COUNT", "1"});
  if (!r) return r.status();
  if (r->type == Type::kArray && !r->elements.empty() && !r->elements[0].elements.empty()) {
    return r->elements[0].elements[0].str;
  }
  return std::string("0-0");
}

Status JobStore::transaction(std::vector<std::vector<std::string>> commands) {
  commands.insert(commands.begin(), {"MULTI"});
  commands.push_back({"EXEC"});
  if (!client_.ensure_connected()) return Status::failure(client_.last_error(), Errc::kUnavailable);
  auto r = client_.pipeline(commands);
  if (!r) return Status::failure(client_.last_error(), Errc::kUnavailable);
  for (const auto& reply : *r) {
    if (reply.is_error()) return Status::failure("transaction refused: " + reply.str, Errc::kRefused);
  }
  if (r->back().type != Type::kArray) return Status::failure("transaction aborted", Errc::kRefused);
  return ok_status();
}

Result<std::vector<std::string>> JobStore::jobs(RedisClient& client) {
  using R = Result<std::vector<std::string>>;
  if (!client.ensure_connected()) return R::failure(client.last_error(), Errc::kUnavailable);
  auto r = client.command({"SMEMBERS", keys::jobs()});
  if (!r) return R::failure(client.last_error(), Errc::kUnavailable);
  if (r->is_error()) return R::failure(keys::jobs() + ": " + r->str, Errc::kRefused);
  std::vector<std::string> out;
  for (const auto& m : r->elements) {
    // Only names a job can have (what sanitize_job_name produces): anything else would build foreign keys.
    if (!m.str.empty() && m.str == sanitize_job_name(m.str)) out.push_back(m.str);
  }
  std::sort(out.begin(), out.end());
  return out;
}

Status JobStore::append_event(const Event& e) {
  auto r = run(xadd(keys::events(job_), keys::kEventsMaxLen, to_json(e).dump()));
  if (!r) return r.status();
  return ok_status();
}

Result<std::vector<Entry<Event>>> JobStore::read_events(const std::string& after, int count) {
  return read_stream<Event>(keys::events(job_), after, count,
                            parse_event);
}

Result<std::string> JobStore::last_event_id() { return last_id(keys::events(job_)); }

Status JobStore::send_command(int node, const Command& c) {
  auto r = run(xadd(keys::commands(job_, node), keys::kCommandsMaxLen, to_json(c).dump()));
  if (!r) return r.status();
  return ok_status();
}

Result<std::vector<Entry<Command>>> JobStore::read_commands(int node, const std::string& after, int count) {
  return read_stream<Command>(keys::commands(job_, node), after, count, parse_command);
}

Result<std::string> JobStore::last_command_id(int node) { return last_id(keys::commands(job_, node)); }

Status JobStore::publish(const AgentUpdate& u) {
  if (u.empty()) return ok_status();
  if (!client_.ensure_connected()) return Status::failure(client_.last_error(), Errc::kUnavailable);
  auto r = client_.pipeline(u.commands_);
  if (!r) return Status::failure(client_.last_error(), Errc::kUnavailable);
  for (const auto& reply : *r) {
    if (reply.is_error()) return Status::failure("state update refused: " + reply.str, Errc::kRefused);
  }
  return ok_status();
}

Result<std::vector<int>> JobStore::ranks() { return int_members(keys::ranks(job_)); }
Result<std::vector<int>> JobStore::agents() { return int_members(keys::agents(job_)); }

Result<std::optional<RankRegistration>> JobStore::rank(int r) {
  return get_as<RankRegistration>(keys::rank(job_, r), parse_rank_registration);
}

Result<std::optional<IterationUpdate>> JobStore::iteration(int r) {
  return get_as<IterationUpdate>(keys::iter(job_, r), parse_iteration_update);
}

Result<std::optional<AgentHeartbeat>> JobStore::heartbeat(int node) {
  return get_as<AgentHeartbeat>(keys::agent(job_, node), parse_agent_heartbeat);
}

Result<std::vector<Entry<GroupRecord>>> JobStore::groups() {
  using R = Result<std::vector<Entry<GroupRecord>>>;
  auto ids = run({"SMEMBERS", keys::groups(job_)});
  if (!ids) return ids.status();
  if (ids->type != Type::kArray || ids->elements.size() > kMaxSetMembers) {
    return R::failure(keys::groups(job_) + ": not a set of group ids");
  }
  std::vector<std::string> hexes;
  for (const auto& m : ids->elements) hexes.push_back(m.str);
  std::sort(hexes.begin(), hexes.end());
  std::vector<Entry<GroupRecord>> out;
  for (const auto& hex : hexes) {
    std::uint64_t id = 0;
    if (!parse_group_id_hex(hex, &id)) {
      out.push_back({hex.substr(0, 32), std::nullopt, "not a group id"});
      continue;
    }
    auto h = run({"HGETALL", keys::group(job_, hex)});
    if (!h && h.code() == Errc::kUnavailable) return h.status();
    if (!h || h->type != Type::kArray || h->elements.size() > 2 * kMaxHashFields) {
      out.push_back({hex, std::nullopt, h ? "not a hash" : h.error()});
      continue;
    }
    out.push_back(parse_group(hex, *h));
  }
  return out;
}

Result<std::optional<MasterState>> JobStore::master_state() {
  return get_as<MasterState>(keys::master(job_), parse_master_state);
}

Result<std::optional<Incident>> JobStore::incident(std::int64_t id) {
  return get_as<Incident>(keys::incident(job_, id), parse_incident);
}

Result<std::vector<std::int64_t>> JobStore::recent_incidents(int n) {
  auto r = run({"ZREVRANGE", keys::incidents(job_), "0", std::to_string(std::max(n, 1) - 1)});
  if (!r) return r.status();
  std::vector<std::int64_t> out;
  for (const auto& m : r->elements) {
    long v = 0;
    if (to_int(m.str, 1, INT64_MAX, &v)) out.push_back(v);
  }
  return out;
}

Status JobStore::commit(const MasterCommit& c) {
  std::vector<std::vector<std::string>> cmds;
  for (const Incident& i : c.incidents) {
    cmds.push_back({"SET", keys::incident(job_, i.id), to_json(i).dump()});
    cmds.push_back({"ZADD", keys::incidents(job_), std::to_string(i.id), std::to_string(i.id)});
  }
  for (const Event& e : c.events) cmds.push_back(xadd(keys::events(job_), keys::kEventsMaxLen, to_json(e).dump()));
  cmds.push_back({"SET", keys::master(job_), to_json(c.state).dump()});
  cmds.push_back({"SADD", keys::jobs(), job_});
  return transaction(std::move(cmds));
}

Result<std::optional<Plan>> JobStore::latest_plan() {
  return get_as<Plan>(keys::plan(job_), parse_plan);
}

Result<std::optional<Plan>> JobStore::plan(std::int64_t epoch) {
  return get_as<Plan>(keys::plan_epoch(job_, epoch),
                      parse_plan);
}

Status JobStore::publish_plan(const Plan& p) {
  const std::string text = to_json(p).dump();
  return transaction({{"SET", keys::plan_epoch(job_, p.epoch), text}, {"SET", keys::plan(job_), text}});
}

Result<std::vector<Entry<PlanAck>>> JobStore::plan_acks() {
  auto r = run({"HGETALL", keys::plan_acks(job_)});
  if (!r) return r.status();
  if (r->type != Type::kArray || r->elements.size() > 2 * kMaxHashFields) {
    return Result<std::vector<Entry<PlanAck>>>::failure(keys::plan_acks(job_) + ": not a hash");
  }
  std::vector<Entry<PlanAck>> out;
  for (std::size_t i = 0; i + 1 < r->elements.size(); i += 2) {
    Entry<PlanAck> e;
    e.id = r->elements[i].str.substr(0, 32);
    e.value = parse_plan_ack(r->elements[i + 1].str, &e.error);
    if (e.value && std::to_string(e.value->rank) != r->elements[i].str) {
      e.value.reset();
      e.error = "rank: differs from the field it is stored under";
    }
    out.push_back(std::move(e));
  }
  return out;
}

Status JobStore::write_ack(const PlanAck& a) {
  auto r = run({"HSET", keys::plan_acks(job_), std::to_string(a.rank), to_json(a).dump()});
  if (!r) return r.status();
  return ok_status();
}

Result<std::optional<JobLayout>> JobStore::layout() { return get_as<JobLayout>(keys::layout(job_), parse_job_layout); }

Status JobStore::write_layout(const JobLayout& l) {
  auto r = run({"SET", keys::layout(job_), to_json(l).dump()});
  if (!r) return r.status();
  return ok_status();
}

Status JobStore::request_restart(const RestartRequest& req) {
  auto r = run({"SET", keys::restart(job_), to_json(req).dump()});
  if (!r) return r.status();
  return ok_status();
}

Result<std::optional<RestartRequest>> JobStore::restart_request() {
  return get_as<RestartRequest>(keys::restart(job_), parse_restart_request);
}

}  // namespace greyhound::store
