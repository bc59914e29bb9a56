#include "store/job_store.h"

#include <algorithm>
#include <cstdlib>
#include <set>

#include "common/record_json.h"
#include "common/bounded_json.h"
#include "common/text.h"
#include "greyhound/ring.h"
#include "store/keys.h"

namespace greyhound::store {
namespace {

using Type = RedisReply::Type;

// What one read may bring over the connection, whatever the server holds (a value there can be 512 MB):
// strings are read with GETRANGE, sets, hashes and streams through the scripts below, which cut each value
// just past kMaxMessageBytes (so the reader still sees it is too large), skip oversized set members, refuse
// oversized sets and hashes, and stop a stream read once kMaxReadBytes have been gathered.
constexpr std::size_t kMaxSetMembers = 1 << 20;
constexpr std::size_t kMaxHashFields = 1 << 17;
constexpr int kMaxReadCount = 10000;
constexpr std::size_t kMaxReadBytes = 8 << 20;
constexpr std::size_t kMaxMemberBytes = 64;

// The masters' lease: KEYS[1] the lease, KEYS[2] the epoch counter; ARGV[1] the holder's token, ARGV[2] the
// TTL (ms). Renews it when this holder has it, takes it with a new epoch when nobody does; the epoch, or 0.
// A value that is no lease a master wrote ("<epoch> <token>" with an epoch of 1 to 15 digits, and a TTL) is
// taken over, never trusted: a planted one would keep every master standing by. So is an epoch counter that is
// no such number (INCR would fail for ever): it starts again, and a job led at a newer epoch raises it.
constexpr const char* kAcquireLeaseScript = R"lua(
local v = redis.call('GET', KEYS[1])
if v then
  local sp = string.find(v, ' ', 1, true)
  local epoch = sp and string.match(string.sub(v, 1, sp - 1), '^[1-9]%d?%d?%d?%d?%d?%d?%d?%d?%d?%d?%d?%d?%d?%d?$')
  if epoch and redis.call('PTTL', KEYS[1]) > 0 then
    if string.sub(v, sp + 1) == ARGV[1] then
      redis.call('PEXPIRE', KEYS[1], ARGV[2])
      return tonumber(epoch)
    end
    return 0
  end
end
local c = redis.call('GET', KEYS[2])
if c and not string.match(c, '^%d%d?%d?%d?%d?%d?%d?%d?%d?%d?%d?%d?%d?%d?%d?$') then redis.call('SET', KEYS[2], '0') end
local e = redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[1], e .. ' ' .. ARGV[1], 'PX', ARGV[2])
if v then return -e end
return e
)lua";

// KEYS[1] the lease; ARGV[1] "<epoch> <id>"; ARGV[2] the TTL (ms), or 0 to give it up. 1 when it was ours.
constexpr const char* kRenewLeaseScript = R"lua(
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if ARGV[2] == '0' then redis.call('DEL', KEYS[1]) else redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 1
)lua";

// KEYS[1] a job's leader epoch; ARGV[1] the epoch taking it. Raises it, never lowers it: 0 when it holds
// ARGV[1] now, else the newer epoch that does; -1 when it holds it now after a value that was no epoch (1 to
// 15 digits: `nan`, `1e308`, a negative or a huge number, planted) which it took over rather than trusted.
constexpr const char* kTakeJobScript = R"lua(
local v = redis.call('GET', KEYS[1])
local s = v and string.match(v, '^%d%d?%d?%d?%d?%d?%d?%d?%d?%d?%d?%d?%d?%d?%d?$')
local cur = tonumber(s or '0')
local e = tonumber(ARGV[1])
if v and not s then
  redis.call('SET', KEYS[1], ARGV[1])
  return -1
end
if cur > e then return cur end
if cur < e then redis.call('SET', KEYS[1], ARGV[1]) end
return 0
)lua";

// KEYS[1] the epoch counter; ARGV[1] an epoch it must reach (a counter that is no epoch is set to it).
constexpr const char* kRaiseEpochScript = R"lua(
local cur = tonumber(string.match(redis.call('GET', KEYS[1]) or '0', '^%d%d?%d?%d?%d?%d?%d?%d?%d?%d?%d?%d?%d?%d?%d?$') or '0')
if cur < tonumber(ARGV[1]) then redis.call('SET', KEYS[1], ARGV[1]) end
return 1
)lua";

// KEYS[1] a set; ARGV[1] max members, ARGV[2] max bytes per member.
constexpr const char* kSetScript = R"lua(
local n = redis.call('SCARD', KEYS[1])
if n > tonumber(ARGV[1]) then return redis.error_reply('set of ' .. n .. ' members is too large') end
local out = {}
for _, m in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  if #m <= tonumber(ARGV[2]) then out[#out + 1] = m end
end
return out
)lua";

// KEYS[1] a hash; ARGV[1] max fields, ARGV[2] max bytes per value (longer ones are cut to one byte more).
constexpr const char* kHashScript = R"lua(
local n = redis.call('HLEN', KEYS[1])
if n > tonumber(ARGV[1]) then return redis.error_reply('hash of ' .. n .. ' fields is too large') end
local all = redis.call('HGETALL', KEYS[1])
local max = tonumber(ARGV[2])
for i = 1, #all do
  if #all[i] > max then all[i] = string.sub(all[i], 1, max + 1) end
end
return all
)lua";

// KEYS[1] a stream: the id of its newest entry, '0-0' when empty.
constexpr const char* kLastIdScript = R"lua(
local e = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)
if #e == 0 then return '0-0' end
return e[1][1]
)lua";

// KEYS[1] a stream: the id of its oldest entry, '0-0' when empty.
constexpr const char* kFirstIdScript = R"lua(
local e = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', 1)
if #e == 0 then return '0-0' end
return e[1][1]
)lua";

// KEYS[1] a sorted set; ARGV[1] how many of the highest-scored members, ARGV[2] max bytes per member.
constexpr const char* kTopScript = R"lua(
local out = {}
for _, m in ipairs(redis.call('ZREVRANGE', KEYS[1], 0, tonumber(ARGV[1]) - 1)) do
  if #m <= tonumber(ARGV[2]) then out[#out + 1] = m end
end
return out
)lua";

// KEYS[1] a stream; ARGV[1] the id to read after, ARGV[2] count, ARGV[3] max bytes per value, ARGV[4] max
// bytes in all. Returns {id, json field (cut like above; '' when none)} per entry, at least one entry.
constexpr const char* kStreamScript = R"lua(
local entries = redis.call('XRANGE', KEYS[1], '(' .. ARGV[1], '+', 'COUNT', tonumber(ARGV[2]))
local max, budget = tonumber(ARGV[3]), tonumber(ARGV[4])
local out, total = {}, 0
for _, e in ipairs(entries) do
  local value = ''
  local fields = e[2]
  for i = 1, #fields - 1, 2 do
    if fields[i] == 'json' then value = fields[i + 1] end
  end
  if #value > max then value = string.sub(value, 1, max + 1) end
  if #out > 0 and total + #value > budget then break end
  total = total + #value
  out[#out + 1] = {e[1], value}
end
return out
)lua";

// KEYS[1] plan:<epoch>, KEYS[2] plan, KEYS[3] (optional) the plan lease; ARGV[1] the plan's text. Writes both
// plan keys unless plan:<epoch> exists or (given) the lease is held: 1 written, 0 not.
constexpr const char* kPublishPlanScript = R"lua(
if KEYS[3] and redis.call('EXISTS', KEYS[3]) == 1 then return 0 end
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('SET', KEYS[1], ARGV[1])
redis.call('SET', KEYS[2], ARGV[1])
return 1
)lua";

// One command: the reply, kUnavailable when Redis could not be reached, kRefused (about the command's key)
// for an error reply.
Result<RedisReply> run_on(RedisClient& client, const std::vector<std::string>& argv) {
  if (!client.ensure_connected()) return Result<RedisReply>::failure(client.last_error(), Errc::kUnavailable);
  auto r = client.command(argv);
  if (!r) return Result<RedisReply>::failure(client.last_error(), Errc::kUnavailable);
  if (r->is_error()) {
    const std::string& key = argv[0] == "EVAL" ? argv[3] : argv[1];  // a script: name its key, not its text
    return Result<RedisReply>::failure_about(key, r->str, Errc::kRefused);
  }
  return std::move(*r);
}

// Several commands in one round trip: the replies (error replies among them), or kUnavailable.
Result<std::vector<RedisReply>> pipeline_on(RedisClient& client, const std::vector<std::vector<std::string>>& cmds) {
  using R = Result<std::vector<RedisReply>>;
  if (!client.ensure_connected()) return R::failure(client.last_error(), Errc::kUnavailable);
  auto r = client.pipeline(cmds);
  if (!r) return R::failure(client.last_error(), Errc::kUnavailable);
  return std::move(*r);
}

// A set's members, bounded by kSetScript.
Result<RedisReply> set_members(RedisClient& client, const std::string& key) {
  auto r = run_on(client, {"EVAL", kSetScript, "1", key, std::to_string(kMaxSetMembers), std::to_string(kMaxMemberBytes)});
  if (r && r->type != Type::kArray) return Result<RedisReply>::failure_about(key, "not a set");
  return r;
}

// kRefused with the first error reply of a pipeline, about `what`.
Status first_refusal(const std::vector<RedisReply>& replies, const std::string& what) {
  for (const auto& reply : replies) {
    if (reply.is_error()) return Status::failure(what + " refused: " + reply.str, Errc::kRefused);
  }
  return ok_status();
}

// A decimal integer in [lo, hi], read strictly (parse_integer).
bool to_int(const std::string& s, long lo, long hi, long* out) {
  const auto v = parse_integer(s);
  if (!v || *v < lo || *v > hi) return false;
  *out = static_cast<long>(*v);
  return true;
}

std::vector<std::string> xadd(const std::string& key, long maxlen, const std::string& json_text) {
  return {"XADD", key, "MAXLEN", "~", std::to_string(maxlen), "*", "json", json_text};
}

}  // namespace


// A group's hash, field by field (job_store.h).
Entry<GroupRecord> parse_group_hash(const std::string& hex, const RedisReply& hash) {
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
        note(printable(k, 32) + ": not a rank");
        bad_member = true;
      } else {
        g.members[static_cast<int>(gr)] = static_cast<int>(x);
      }
    } else if (k.rfind("node:", 0) == 0) {
      long gr = 0;
      if (!to_int(k.substr(5), 0, kMaxRank, &gr) || !to_int(v, 0, kMaxRank, &x)) {
        note(printable(k, 32) + ": not a node");
      } else {
        g.nodes[static_cast<int>(gr)] = static_cast<int>(x);
      }
    } else if (k == "created_by") {
      auto j = parse_bounded(v);
      if (j && j->is_string() && j->get_ref<const std::string&>().size() <= 64) {
        g.created_by = j->get<std::string>();
      } else {
        note("created_by: not a JSON string");
      }
    } else if (k == "nccl_ring") {
      if (auto ring = parse_nccl_ring_dump(v)) {
        g.nccl_ring = std::move(*ring);
      } else {
        note("nccl_ring: " + ring.error());
      }
    } else if (k.rfind("ops:", 0) == 0) {
      long rank = 0;
      auto j = parse_bounded(v);
      if (!to_int(k.substr(4), 0, kMaxRank, &rank) || !j || !j->is_object()) {
        note(printable(k, 32) + ": not op counts");
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
        note(printable(k, 32) + ": not op counts");
      }
    }
  }
  for (const auto& [gr, r] : g.members) {
    if (g.size > 0 && gr >= g.size) {
      note("member:" + std::to_string(gr) + ": beyond the group's size");
      bad_member = true;
    }
  }
  if (g.nccl_ring && g.size > 0 &&
      *std::max_element(g.nccl_ring->segment.begin(), g.nccl_ring->segment.end()) >= g.size) {
    note("nccl_ring: a rank beyond the group's size");
    g.nccl_ring.reset();
  }
  if (!bad_member) out.value = std::move(g);
  return out;
}

// ---- AgentUpdate

void AgentUpdate::register_job() { register_job_ = true; }

void AgentUpdate::rank(const RankRegistration& r) {
  commands_.push_back({"SET", keys::rank(job_, r.rank), to_json(r).dump()});
  commands_.push_back({"SADD", keys::ranks(job_), std::to_string(r.rank)});
}

void AgentUpdate::group_member(std::uint64_t group, int size, int group_rank, int rank, const std::string& created_by,
                               int node) {
  const std::string hex = group_id_hex(group);
  commands_.push_back({"SADD", keys::groups(job_), hex});
  std::vector<std::string> hset = {"HSET",         keys::group(job_, hex), "size", std::to_string(size),
                                   "member:" + std::to_string(group_rank), std::to_string(rank), "created_by",
                                   nlohmann::json(created_by).dump()};
  if (node >= 0) {
    hset.push_back("node:" + std::to_string(group_rank));
    hset.push_back(std::to_string(node));
  }
  commands_.push_back(std::move(hset));
}

void AgentUpdate::group_ops(std::uint64_t group, int rank, const std::map<std::string, std::uint64_t>& ops) {
  commands_.push_back({"HSET", keys::group(job_, group_id_hex(group)), "ops:" + std::to_string(rank),
                       nlohmann::json(ops).dump()});
}

void AgentUpdate::group_nccl_ring(std::uint64_t group, const NcclRingDump& ring) {
  commands_.push_back({"HSET", keys::group(job_, group_id_hex(group)), "nccl_ring", to_json(ring).dump()});
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

Result<RedisReply> JobStore::run(const std::vector<std::string>& argv) { return run_on(client_, argv); }

Result<std::optional<std::string>> JobStore::get(const std::string& key) {
  // At most one byte more than a message may have: a longer value is reported as too large, never fetched.
  auto r = run({"GETRANGE", key, "0", std::to_string(kMaxMessageBytes)});
  if (!r) return r.status();
  if (r->type != Type::kString) return Result<std::optional<std::string>>::failure_about(key, "not a string value");
  if (r->str.empty()) return std::optional<std::string>();  // absent (an empty value is no message either)
  return std::optional<std::string>(std::move(r->str));
}

template <class T, class Parse>
Result<std::optional<T>> JobStore::get_as(const std::string& key, Parse parse, std::string* unparsed) {
  auto text = get(key);
  if (!text) return text.status();
  if (!*text) return std::optional<T>();
  std::string err;
  auto v = parse(**text, &err);
  if (!v) {
    if (unparsed) *unparsed = std::move(**text);
    return Result<std::optional<T>>::failure_about(key, err);
  }
  return std::optional<T>(std::move(*v));
}

Result<std::vector<int>> JobStore::int_members(const std::string& key) {
  auto r = members(key);
  if (!r) return r.status();
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
  auto r = run({"EVAL", kStreamScript, "1", key, after, std::to_string(std::clamp(count, 1, kMaxReadCount)),
                std::to_string(kMaxMessageBytes), std::to_string(kMaxReadBytes)});
  if (!r) return r.status();
  std::vector<Entry<T>> out;
  for (const auto& entry : r->elements) {
    if (entry.elements.size() < 2) continue;
    Entry<T> e;
    e.id = entry.elements[0].str;
    std::string err;
    e.value = parse(entry.elements[1].str, &err);
    if (!e.value) e.error = err;
    out.push_back(std::move(e));
  }
  return out;
}

Result<RedisReply> JobStore::members(const std::string& key) { return set_members(client_, key); }

Result<RedisReply> JobStore::hash(const std::string& key) {
  auto r = run({"EVAL", kHashScript, "1", key, std::to_string(kMaxHashFields), std::to_string(kMaxMessageBytes)});
  if (r && r->type != Type::kArray) return Result<RedisReply>::failure_about(key, "not a hash");
  return r;
}

Result<std::string> JobStore::last_id(const std::string& key) {
  auto r = run({"EVAL", kLastIdScript, "1", key});
  if (!r) return r.status();
  if (r->type != Type::kString || !valid_stream_id(r->str)) return Result<std::string>::failure_about(key, "not a stream");
  return std::move(r->str);
}

Status JobStore::transaction(std::vector<std::vector<std::string>> commands, std::vector<RedisReply>* exec) {
  // Fenced: WATCH the job's leader epoch first, so that if another master raises it before EXEC the
  // transaction does nothing. Any other epoch than this store's is taken once more (take_job).
  for (int attempt = 0; fence_ > 0; ++attempt) {
    auto w = pipeline_on(client_, {{"WATCH", keys::leader(job_)}, {"GETRANGE", keys::leader(job_), "0", "31"}});
    if (!w) return w.status();
    if (Status s = first_refusal(*w, "fence"); !s) {
      (void)run({"UNWATCH"});
      return s;
    }
    const RedisReply& held = (*w)[1];
    const std::string mine = std::to_string(fence_);
    if (held.type == Type::kString && held.str == mine) break;
    (void)run({"UNWATCH"});
    // take_job raises a missing or lower epoch (the key evicted or deleted) and names a newer one.
    // A value that is no epoch (planted) is taken over there too. A newer epoch is kept: fenced_by().
    if (attempt == 0) {
      auto t = take_job(fence_);
      if (t && *t == 0) continue;
      if (t && *t > fence_) fenced_by_ = *t;
    }
    const bool none = held.type != Type::kString || held.str.empty();  // GETRANGE of no key: ""
    return Status::failure("fenced: another master leads job " + job_ + " (its epoch " +
                               (none ? std::string("none") : printable(held.str, 24)) + ", this master's " + mine +
                               ")",
                           Errc::kRefused);
  }
  commands.insert(commands.begin(), {"MULTI"});
  commands.push_back({"EXEC"});
  auto r = pipeline_on(client_, commands);
  if (!r) return r.status();
  if (Status s = first_refusal(*r, "transaction"); !s) return s;
  if (r->back().type != Type::kArray) {
    return Status::failure(fence_ > 0 ? "transaction aborted: another master took job " + job_ : "transaction aborted",
                           Errc::kRefused);
  }
  if (exec) *exec = std::move(r->back().elements);
  fenced_by_ = 0;
  return ok_status();
}

Status JobStore::write(std::vector<std::string> command) {
  if (fence_ > 0) return transaction({std::move(command)});
  auto r = run(command);
  if (!r) return r.status();
  return first_refusal({*r}, command[0]);
}

Result<std::int64_t> JobStore::acquire_lease(RedisClient& client, const std::string& scope, const std::string& holder,
                                             int ttl_ms, bool* took_over) {
  if (took_over != nullptr) *took_over = false;
  const std::string key = keys::master_lease(scope);
  auto r = run_on(client, {"EVAL", kAcquireLeaseScript, "2", key, keys::master_epoch(), holder, std::to_string(ttl_ms)});
  if (!r) return r.status();
  if (r->type != Type::kInteger) return Result<std::int64_t>::failure_about(key, "not a lease");
  if (r->integer < 0) {  // taken over from a value no master wrote
    if (took_over != nullptr) *took_over = true;
    return static_cast<std::int64_t>(-r->integer);
  }
  return static_cast<std::int64_t>(r->integer);
}

Result<bool> JobStore::renew_lease(RedisClient& client, const std::string& scope, const std::string& holder,
                                   std::int64_t epoch, int ttl_ms) {
  auto r = run_on(client, {"EVAL", kRenewLeaseScript, "1", keys::master_lease(scope),
                           std::to_string(epoch) + " " + holder, std::to_string(ttl_ms)});
  if (!r) return r.status();
  return r->type == Type::kInteger && r->integer == 1;
}

Status JobStore::release_lease(RedisClient& client, const std::string& scope, const std::string& holder,
                               std::int64_t epoch) {
  auto r = run_on(client, {"EVAL", kRenewLeaseScript, "1", keys::master_lease(scope),
                           std::to_string(epoch) + " " + holder, "0"});
  if (!r) return r.status();
  return ok_status();
}

Status JobStore::raise_lease_epoch(RedisClient& client, std::int64_t epoch) {
  auto r = run_on(client, {"EVAL", kRaiseEpochScript, "1", keys::master_epoch(), std::to_string(epoch)});
  if (!r) return r.status();
  return ok_status();
}

Result<std::optional<std::string>> JobStore::lease_holder(RedisClient& client, const std::string& scope) {
  auto r = run_on(client, {"GETRANGE", keys::master_lease(scope), "0", "255"});
  if (!r) return r.status();
  if (r->type != Type::kString || r->str.empty()) return std::optional<std::string>();
  return std::optional<std::string>(printable(r->str, 256));
}

Result<std::int64_t> JobStore::take_job(std::int64_t epoch) {
  auto r = run({"EVAL", kTakeJobScript, "1", keys::leader(job_), std::to_string(epoch)});
  if (!r) return r.status();
  if (r->type != Type::kInteger) return Result<std::int64_t>::failure_about(keys::leader(job_), "not an epoch");
  if (r->integer == -1) ++leader_values_taken_over_;
  if (r->integer <= 0) {
    fence_ = epoch;
    return std::int64_t{0};
  }
  return static_cast<std::int64_t>(r->integer);
}

Result<std::vector<std::string>> JobStore::jobs(RedisClient& client) {
  auto r = set_members(client, keys::jobs());
  if (!r) return r.status();
  std::vector<std::string> out;
  for (const auto& m : r->elements) {
    // Only names a job can have (what sanitize_job_name produces): anything else would build foreign keys.
    if (!m.str.empty() && m.str == sanitize_job_name(m.str)) out.push_back(m.str);
  }
  std::sort(out.begin(), out.end());
  return out;
}

Status JobStore::unregister_job(RedisClient& client, const std::string& job) {
  auto r = run_on(client, {"SREM", keys::jobs(), job});
  if (!r) return r.status();
  return ok_status();
}

Status JobStore::append_event(const Event& e) {
  return write(xadd(keys::events(job_), keys::kEventsMaxLen, to_json(e).dump()));
}

Result<std::vector<Entry<Event>>> JobStore::read_events(const std::string& after, int count) {
  return read_stream<Event>(keys::events(job_), after, count,
                            parse_event);
}

Result<std::string> JobStore::last_event_id() { return last_id(keys::events(job_)); }

Result<std::string> JobStore::first_event_id() {
  const std::string key = keys::events(job_);
  auto r = run({"EVAL", kFirstIdScript, "1", key});
  if (!r) return r.status();
  if (r->type != Type::kString || !valid_stream_id(r->str)) return Result<std::string>::failure_about(key, "not a stream");
  return std::move(r->str);
}

Status JobStore::send_command(int node, const Command& c) {
  return write(xadd(keys::commands(job_, node), keys::kCommandsMaxLen, to_json(c).dump()));
}

Result<std::vector<Entry<Command>>> JobStore::read_commands(int node, const std::string& after, int count) {
  return read_stream<Command>(keys::commands(job_, node), after, count, parse_command);
}

Result<std::string> JobStore::last_command_id(int node) { return last_id(keys::commands(job_, node)); }

Status JobStore::publish(const AgentUpdate& u) {
  if (u.empty()) return ok_status();
  std::vector<std::vector<std::string>> commands = u.commands_;
  // The job is registered last, after its heartbeat: a master that finds it registered finds it alive.
  if (u.register_job_) commands.push_back({"SADD", keys::jobs(), job_});
  auto r = pipeline_on(client_, commands);
  if (!r) return r.status();
  return first_refusal(*r, "state update");
}

Result<std::vector<int>> JobStore::ranks() { return int_members(keys::ranks(job_)); }
Result<std::vector<int>> JobStore::agents() { return int_members(keys::agents(job_)); }

namespace {

// A GETRANGE reply (at most one byte more than a message, as get() reads) as the typed value, or why not.
template <class T, class Parse>
Result<std::optional<T>> typed_value(const std::string& key, const RedisReply& r, Parse parse) {
  if (r.type == Type::kError) return Result<std::optional<T>>::failure_about(key, printable(r.str, 128), Errc::kRefused);
  if (r.type != Type::kString) return Result<std::optional<T>>::failure_about(key, "not a string value");
  if (r.str.empty()) return std::optional<T>();
  std::string err;
  auto v = parse(r.str, &err);
  if (!v) return Result<std::optional<T>>::failure_about(key, err);
  return std::optional<T>(std::move(*v));
}

constexpr std::size_t kRowBatch = 256;  // ranks per round trip (two keys each)

}  // namespace

Result<std::pair<std::vector<int>, std::int64_t>> JobStore::ranks_below(int world) {
  using R = Result<std::pair<std::vector<int>, std::int64_t>>;
  const std::string key = keys::ranks(job_);
  auto card = run({"SCARD", key});
  if (!card) return card.status();
  if (card->type != Type::kInteger) return R::failure_about(key, "not a set");
  std::vector<int> found;
  if (card->integer <= world && card->integer <= static_cast<long long>(kMaxSetMembers)) {
    // A set no larger than the world (a layout planted with a huge world costs nothing either): read whole.
    auto all = ranks();
    if (!all) return all.status();
    for (int r : *all) {
      if (r < world) found.push_back(r);
    }
    return std::make_pair(std::move(found), static_cast<std::int64_t>(card->integer));
  }
  constexpr int kBatch = 1024;
  for (int first = 0; first < world; first += kBatch) {
    std::vector<std::string> cmd = {"SMISMEMBER", key};
    const int last = std::min(world, first + kBatch);
    for (int r = first; r < last; ++r) cmd.push_back(std::to_string(r));
    auto in = run(cmd);
    if (!in) return in.status();
    if (in->type == Type::kError) return R::failure_about(key, printable(in->str, 128), Errc::kRefused);
    if (in->type != Type::kArray || in->elements.size() != static_cast<std::size_t>(last - first)) {
      return R::failure_about(key, "not a set");
    }
    for (int r = first; r < last; ++r) {
      if (in->elements[r - first].integer == 1) found.push_back(r);
    }
  }
  return std::make_pair(std::move(found), static_cast<std::int64_t>(card->integer));
}

Result<std::vector<JobStore::RankRow>> JobStore::rank_rows(const std::vector<int>& ranks) {
  std::vector<RankRow> out;
  out.reserve(ranks.size());
  const std::string range = std::to_string(kMaxMessageBytes);
  for (std::size_t at = 0; at < ranks.size(); at += kRowBatch) {
    const std::size_t n = std::min(kRowBatch, ranks.size() - at);
    std::vector<std::vector<std::string>> cmds;
    cmds.reserve(2 * n);
    for (std::size_t i = at; i < at + n; ++i) {
      cmds.push_back({"GETRANGE", keys::rank(job_, ranks[i]), "0", range});
      cmds.push_back({"GETRANGE", keys::iter(job_, ranks[i]), "0", range});
    }
    auto replies = pipeline_on(client_, cmds);
    if (!replies) return replies.status();
    if (replies->size() != cmds.size()) return Result<std::vector<RankRow>>::failure("rank rows: short reply", Errc::kUnavailable);
    for (std::size_t i = 0; i < n; ++i) {
      const int r = ranks[at + i];
      out.push_back({typed_value<RankRegistration>(keys::rank(job_, r), (*replies)[2 * i], parse_rank_registration),
                     typed_value<IterationUpdate>(keys::iter(job_, r), (*replies)[2 * i + 1], parse_iteration_update)});
    }
  }
  return out;
}

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
  auto ids = members(keys::groups(job_));
  if (!ids) return ids.status();
  std::vector<std::string> hexes;
  for (const auto& m : ids->elements) hexes.push_back(m.str);
  std::sort(hexes.begin(), hexes.end());
  std::vector<Entry<GroupRecord>> out;
  std::vector<std::string> valid;
  for (const auto& hex : hexes) {
    std::uint64_t id = 0;
    if (parse_group_id_hex(hex, &id)) {
      valid.push_back(hex);
    } else {
      out.push_back({printable(hex, 32), std::nullopt, "not a group id"});
    }
  }
  // The groups' hashes in pipelined batches: a round trip per batch, not per group.
  constexpr std::size_t kBatch = 512;
  for (std::size_t first = 0; first < valid.size(); first += kBatch) {
    std::vector<std::vector<std::string>> cmds;
    for (std::size_t k = first; k < std::min(valid.size(), first + kBatch); ++k) {
      cmds.push_back({"EVAL", kHashScript, "1", keys::group(job_, valid[k]), std::to_string(kMaxHashFields),
                      std::to_string(kMaxMessageBytes)});
    }
    auto replies = pipeline_on(client_, cmds);
    if (!replies) return replies.status();
    for (std::size_t k = 0; k < replies->size(); ++k) {
      const std::string& hex = valid[first + k];
      const RedisReply& h = (*replies)[k];
      if (h.type != Type::kArray) {
        out.push_back({hex, std::nullopt, h.is_error() ? h.str : "not a hash"});
      } else {
        out.push_back(parse_group_hash(hex, h));
      }
    }
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
  return out;
}

Result<std::optional<MasterState>> JobStore::master_state() {
  return get_as<MasterState>(keys::master(job_), parse_master_state);
}

Result<std::optional<Incident>> JobStore::incident(std::int64_t id) {
  return get_as<Incident>(keys::incident(job_, id), parse_incident);
}

Result<std::vector<std::int64_t>> JobStore::recent_incidents(int n) {
  auto r = run({"EVAL", kTopScript, "1", keys::incidents(job_), std::to_string(std::clamp(n, 1, 1000)),
                std::to_string(kMaxMemberBytes)});
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
  if (Status s = transaction(std::move(cmds)); !s) return s;
  // The registry is outside the job's slot (keys.h): kept registered after the commit, not inside it. The
  // commit stands whatever this answers (a failed commit is retried; a committed one must not be, or its
  // events would be written twice): the next commit registers the job again.
  (void)run({"SADD", keys::jobs(), job_});
  return ok_status();
}

Result<std::optional<Plan>> JobStore::latest_plan(std::int64_t* named_epoch) {
  std::string unparsed;
  auto r = get_as<Plan>(keys::plan(job_), parse_plan, &unparsed);
  if (named_epoch) *named_epoch = unparsed.empty() ? 0 : plan_epoch_named(unparsed);
  return r;
}

Result<std::optional<Plan>> JobStore::plan(std::int64_t epoch) {
  return get_as<Plan>(keys::plan_epoch(job_, epoch),
                      parse_plan);
}

namespace {
// Writers refuse what readers refuse (parse_plan): an epoch outside 1..2^53 would be a plan no job reads.
Status plan_epoch_writable(const Plan& p) {
  if (p.epoch < 1 || p.epoch > kMaxCount) {
    return Status::failure("publish plan: epoch " + std::to_string(p.epoch) + " is outside 1..2^53, which readers take");
  }
  return ok_status();
}
}  // namespace

Result<bool> JobStore::publish_plan(const Plan& p) {
  if (Status s = plan_epoch_writable(p); !s) return s.status();
  std::vector<RedisReply> exec;
  const Status s = transaction(
      {{"EVAL", kPublishPlanScript, "2", keys::plan_epoch(job_, p.epoch), keys::plan(job_), to_json(p).dump()}}, &exec);
  if (!s) return s.status();
  if (Status refused = first_refusal(exec, "publish plan"); !refused) return refused.status();
  return exec.size() == 1 && exec[0].type == Type::kInteger && exec[0].integer == 1;
}

Status JobStore::hold_plan_lease(const std::string& master, int ttl_ms) {
  const nlohmann::json v = {{"master", master}, {"lease_ms", ttl_ms}, {"t_unix_ms", unix_ms_now()}};
  return write({"SET", keys::plan_lease(job_), v.dump(), "PX", std::to_string(std::max(ttl_ms, 1))});
}

Result<bool> JobStore::plan_lease_held(int* lease_ms) {
  if (lease_ms != nullptr) *lease_ms = 0;
  auto r = run({"EXISTS", keys::plan_lease(job_)});
  if (!r) return r.status();
  if (r->type != Type::kInteger || r->integer != 1) return false;
  if (lease_ms != nullptr) {
    // Its first bytes only (what a master writes is about 80): a hostile value is not fetched whole.
    auto v = run({"GETRANGE", keys::plan_lease(job_), "0", "255"});
    const auto j = v && v->type == Type::kString ? parse_bounded(v->str) : Result<nlohmann::json>::failure("");
    if (j && j->is_object() && j->contains("lease_ms") && (*j)["lease_ms"].is_number_integer()) {
      const std::int64_t ms = (*j)["lease_ms"].get<std::int64_t>();
      if (ms >= 1 && ms <= 3600 * 1000) *lease_ms = static_cast<int>(ms);
    }
  }
  return true;
}

Result<bool> JobStore::publish_plan_unleased(const Plan& p) {
  if (Status s = plan_epoch_writable(p); !s) return s.status();
  auto r = run({"EVAL", kPublishPlanScript, "3", keys::plan_epoch(job_, p.epoch), keys::plan(job_),
                keys::plan_lease(job_), to_json(p).dump()});
  if (!r) return r.status();
  return r->type == Type::kInteger && r->integer == 1;
}

Result<std::vector<Entry<PlanAck>>> JobStore::plan_acks() {
  auto r = hash(keys::plan_acks(job_));
  if (!r) return r.status();
  std::vector<Entry<PlanAck>> out;
  for (std::size_t i = 0; i + 1 < r->elements.size(); i += 2) {
    Entry<PlanAck> e;
    e.id = printable(r->elements[i].str, 32);
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

Result<std::optional<JobSettings>> JobStore::settings() {
  return get_as<JobSettings>(keys::settings(job_), parse_job_settings);
}

Status JobStore::write_settings(const JobSettings& st) {
  auto r = run({"SET", keys::settings(job_), to_json(st).dump()});
  if (!r) return r.status();
  return ok_status();
}

Status JobStore::write_operator_plan(const OperatorPlanRequest& req) {
  auto r = run({"SET", keys::operator_plan(job_), to_json(req).dump()});
  if (!r) return r.status();
  return ok_status();
}

Result<std::optional<OperatorPlanRequest>> JobStore::operator_plan() {
  return get_as<OperatorPlanRequest>(keys::operator_plan(job_), parse_operator_plan_request);
}

Status JobStore::write_operator_plan_result(const OperatorPlanReport& rep) {
  return write({"SET", keys::operator_plan_result(job_), to_json(rep).dump()});
}

Result<std::optional<OperatorPlanReport>> JobStore::operator_plan_result() {
  return get_as<OperatorPlanReport>(keys::operator_plan_result(job_), parse_operator_plan_report);
}

Status JobStore::request_preflight(const PreflightRequest& req) {
  auto r = run({"SET", keys::preflight(job_), to_json(req).dump()});
  if (!r) return r.status();
  return ok_status();
}

Result<std::optional<PreflightRequest>> JobStore::preflight_request() {
  return get_as<PreflightRequest>(keys::preflight(job_), parse_preflight_request);
}

Result<bool> JobStore::withdraw_preflight(const std::string& id) {
  auto req = preflight_request();
  if (!req && req.code() == Errc::kUnavailable) return req.status();
  if (!req || !*req || (*req)->id != id) return false;  // another request (or none) stands: not ours to remove
  auto r = run({"DEL", keys::preflight(job_)});
  if (!r) return r.status();
  return true;
}

Status JobStore::write_preflight_result(const PreflightReport& rep) {
  return write({"SET", keys::preflight_result(job_), to_json(rep).dump()});
}

Result<std::optional<PreflightReport>> JobStore::preflight_result() {
  return get_as<PreflightReport>(keys::preflight_result(job_), parse_preflight_report_text);
}

Status JobStore::request_restart(const RestartRequest& req) {
  // The job is going down: its layout no longer describes a running job (the restarted one publishes its
  // own, so the master never plans on the old one).
  return transaction({{"SET", keys::restart(job_), to_json(req).dump()}, {"DEL", keys::layout(job_)}});
}

Result<std::optional<RestartRequest>> JobStore::restart_request() {
  return get_as<RestartRequest>(keys::restart(job_), parse_restart_request);
}

}  // namespace greyhound::store
