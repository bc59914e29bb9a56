#include "store/messages.h"

#include "common/record_json.h"
#include "greyhound/vocabulary.h"
#include "common/text.h"
#include "common/bounded_json.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <iterator>
#include <cmath>
#include <map>
#include <set>
#include <tuple>
#include <utility>
#include <stdexcept>

namespace greyhound {
namespace {

using nlohmann::json;
using ::greyhound::JsonLimits;
using ::greyhound::parse_bounded;

struct Invalid : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Typed, named access to the fields of one JSON object; throws Invalid naming the field.
class Fields {
 public:
  explicit Fields(const json& j) : j_(j) {
    if (!j_.is_object()) throw Invalid("not a JSON object");
  }
  bool has(const char* k) const { return j_.contains(k) && !j_.at(k).is_null(); }
  std::string str(const char* k, std::size_t max_len = kMaxTextBytes) const {
    const json& v = need(k);
    if (!v.is_string()) throw Invalid(std::string(k) + ": must be a string");
    const auto& s = v.get_ref<const std::string&>();
    if (s.size() > max_len) throw Invalid(std::string(k) + ": longer than " + std::to_string(max_len));
    return s;
  }
  std::string str_or(const char* k, const std::string& def) const { return has(k) ? str(k) : def; }
  double num(const char* k) const {
    const json& v = need(k);
    if (!v.is_number() || !std::isfinite(v.get<double>())) throw Invalid(std::string(k) + ": must be a finite number");
    return v.get<double>();
  }
  double num_or(const char* k, double def) const { return has(k) ? num(k) : def; }
  bool flag(const char* k) const {
    const json& v = need(k);
    if (!v.is_boolean()) throw Invalid(std::string(k) + ": must be true or false");
    return v.get<bool>();
  }
  bool flag_or(const char* k, bool def) const { return has(k) ? flag(k) : def; }
  std::int64_t integer(const char* k, std::int64_t lo, std::int64_t hi) const {
    const json& v = need(k);
    if (!v.is_number_integer()) throw Invalid(std::string(k) + ": must be an integer");
    if (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(hi)) {
      throw Invalid(std::string(k) + ": " + std::to_string(v.get<std::uint64_t>()) + " out of range");
    }
    const auto x = v.get<std::int64_t>();
    if (x < lo || x > hi) throw Invalid(std::string(k) + ": " + std::to_string(x) + " out of range");
    return x;
  }
  std::int64_t integer_or(const char* k, std::int64_t def, std::int64_t lo, std::int64_t hi) const {
    return has(k) ? integer(k, lo, hi) : def;
  }
  std::vector<int> ints_or_empty(const char* k, std::size_t max_items = 1 << 16) const {
    std::vector<int> out;
    if (!has(k)) return out;
    const json& v = j_.at(k);
    if (!v.is_array() || v.size() > max_items) throw Invalid(std::string(k) + ": must be an array of integers");
    for (const auto& x : v) {
      if (!x.is_number_integer()) throw Invalid(std::string(k) + ": must be an array of integers");
      if (x.is_number_unsigned() && x.get<std::uint64_t>() > INT32_MAX) {
        throw Invalid(std::string(k) + ": " + std::to_string(x.get<std::uint64_t>()) + " out of range");
      }
      const auto v64 = x.get<std::int64_t>();
      if (v64 < INT32_MIN || v64 > INT32_MAX) throw Invalid(std::string(k) + ": " + std::to_string(v64) + " out of range");
      out.push_back(static_cast<int>(v64));
    }
    return out;
  }
  const json& raw(const char* k) const { return need(k); }
  // A word of the vocabulary (vocabulary.h): exactly one of its wire names.
  template <typename E>
  E word(const char* k, std::optional<E> (*parse)(std::string_view), const char* want) const {
    const std::string w = str(k, 32);
    const auto v = parse(w);
    if (!v) throw Invalid(std::string(k) + ": '" + w + "' is not " + want);
    return *v;
  }
  template <typename E>
  E word_or(const char* k, std::optional<E> (*parse)(std::string_view), const char* want, E def) const {
    return has(k) ? word(k, parse, want) : def;
  }

 private:
  const json& need(const char* k) const {
    if (!j_.contains(k)) throw Invalid(std::string(k) + ": missing");
    return j_.at(k);
  }
  const json& j_;
};

// Builds T from JSON already bounded; a field error becomes the error text.
template <typename T, typename F>
std::optional<T> build_from(const json& j, std::string* error, F&& build) {
  try {
    return build(Fields(j), j);
  } catch (const Invalid& e) {
    if (error) *error = e.what();
  } catch (const json::exception& e) {
    if (error) *error = printable(e.what(), 256);
  }
  return std::nullopt;
}

template <typename T, typename F>
std::optional<T> parse_with(const std::string& text, std::string* error, F&& build) {
  JsonLimits limits;
  limits.max_bytes = kMaxMessageBytes;
  auto j = parse_bounded(text, limits);
  if (!j) {
    if (error) *error = j.error();
    return std::nullopt;
  }
  return build_from<T>(*j, error, std::forward<F>(build));
}

// An operator's request's id (a pre-flight's, a manual plan's): printed in logs, plans and status.
std::string request_id(const Fields& f) {
  std::string id = f.str("id", 64);
  if (id.empty()) throw Invalid("id: must not be empty");
  for (unsigned char c : id) {
    if (!(std::isalnum(c) || c == '-' || c == '_' || c == '.')) throw Invalid("id: only letters, digits, '-', '_', '.'");
  }
  return id;
}

// Every launch rank's role, as a layout and an operator's plan name them: [{"rank","tp","dp","pp"}...].
std::vector<PlacementEntry> placement_entries(const json& p) {
  if (!p.is_array() || p.size() > static_cast<std::size_t>(kMaxRank) + 1) {
    throw Invalid("placement: must be an array of {rank, tp, dp, pp}");
  }
  std::vector<PlacementEntry> out;
  for (std::size_t i = 0; i < p.size(); ++i) {
    PlacementEntry x;
    try {
      const Fields e(p[i]);
      x.rank = static_cast<int>(e.integer("rank", 0, kMaxRank));
      x.tp = static_cast<int>(e.integer("tp", 0, kMaxRank));
      x.dp = static_cast<int>(e.integer("dp", 0, kMaxRank));
      x.pp = static_cast<int>(e.integer("pp", 0, kMaxRank));
    } catch (const Invalid& e) {
      throw Invalid("placement[" + std::to_string(i) + "]: " + e.what());
    }
    out.push_back(x);
  }
  return out;
}

std::vector<double> doubles_or_empty(const json& j, const char* k) {
  std::vector<double> out;
  if (!j.contains(k) || j.at(k).is_null()) return out;
  const json& v = j.at(k);
  if (!v.is_array()) throw Invalid(std::string(k) + ": must be an array of numbers");
  for (const auto& x : v) {
    if (!x.is_number() || !std::isfinite(x.get<double>())) throw Invalid(std::string(k) + ": must be an array of numbers");
    out.push_back(x.get<double>());
  }
  return out;
}

std::uint64_t group_id_of(const std::string& hex, const char* field) {
  std::uint64_t id = 0;
  if (!parse_group_id_hex(hex, &id)) throw Invalid(std::string(field) + ": not a group id");
  return id;
}

}  // namespace

bool valid_stream_id(const std::string& id) {
  // <ms>-<seq>, each part a decimal uint64 (what Redis accepts).
  const auto part_ok = [](std::string_view p) {
    if (p.empty() || p.size() > 20) return false;
    for (char c : p) {
      if (c < '0' || c > '9') return false;
    }
    return p.size() < 20 || p <= std::string_view("18446744073709551615");
  };
  const auto dash = id.find('-');
  if (dash == std::string::npos) return false;
  const std::string_view v(id);
  return part_ok(v.substr(0, dash)) && part_ok(v.substr(dash + 1));
}

std::string text_error(std::string_view text) {
  if (text.size() > kMaxTextBytes) return "is longer than " + std::to_string(kMaxTextBytes) + " bytes";
  // UTF-8: a lead byte and its continuation bytes (no overlong forms, no surrogates, at most U+10FFFF).
  for (std::size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    std::size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
    if (n == 0 || i + n > text.size() || (n == 2 && c < 0xc2) || (n == 4 && c > 0xf4)) return "is not valid UTF-8";
    for (std::size_t k = 1; k < n; ++k) {
      if ((static_cast<unsigned char>(text[i + k]) & 0xc0) != 0x80) return "is not valid UTF-8";
    }
    const auto c1 = n > 1 ? static_cast<unsigned char>(text[i + 1]) : 0;
    if ((n == 3 && c == 0xe0 && c1 < 0xa0) || (n == 3 && c == 0xed && c1 >= 0xa0) || (n == 4 && c == 0xf0 && c1 < 0x90) ||
        (n == 4 && c == 0xf4 && c1 >= 0x90)) {
      return "is not valid UTF-8";
    }
    i += n;
  }
  return "";
}

int compare_stream_ids(const std::string& a, const std::string& b) {
  const auto parts = [](const std::string& id) {
    const auto dash = id.find('-');
    return std::pair<std::uint64_t, std::uint64_t>(std::strtoull(id.c_str(), nullptr, 10),
                                                   std::strtoull(id.c_str() + dash + 1, nullptr, 10));
  };
  const auto pa = parts(a), pb = parts(b);
  return pa < pb ? -1 : pa > pb ? 1 : 0;
}

std::int64_t unix_ms_now() {
  using std::chrono::steady_clock;
  using std::chrono::system_clock;
  // The system clock once, at the first call; the monotonic clock from then on (as an agent stamps its
  // records): a stepped system clock moves no stamp of a running process.
  static const std::pair<system_clock::time_point, steady_clock::time_point> anchor{system_clock::now(),
                                                                                   steady_clock::now()};
  const auto since = std::chrono::duration_cast<system_clock::duration>(steady_clock::now() - anchor.second);
  return std::chrono::duration_cast<std::chrono::milliseconds>((anchor.first + since).time_since_epoch()).count();
}

json to_json(const Event& e) {
  json j = {{"type", e.type}, {"t_s", e.t_s}};
  if (e.t_unix_ms != 0) j["t_unix_ms"] = e.t_unix_ms;
  if (!e.source.empty()) j["source"] = e.source;
  if (e.rank >= 0) j["rank"] = e.rank;
  if (e.node >= 0) j["node"] = e.node;
  if (e.index >= 0) j["index"] = e.index;
  if (e.detected_index >= 0) j["detected_index"] = e.detected_index;
  if (e.detected_t_s >= 0) j["detected_t_s"] = e.detected_t_s;
  if (e.before_ms > 0) j["before_ms"] = e.before_ms;
  if (e.after_ms > 0) j["after_ms"] = e.after_ms;
  if (e.ratio > 0) j["ratio"] = e.ratio;
  if (e.incident >= 0) j["incident"] = e.incident;
  if (e.detail.is_object()) j["detail"] = e.detail;
  return j;
}

namespace {
Event build_event(const Fields& f, const json& j) {
    static const std::set<std::string> kTypes = {
        event_type::kSlowdown,   event_type::kRecovery,     event_type::kPeriodChange,    event_type::kAgentStart,
        event_type::kAgentStop,  event_type::kCommandAck,   event_type::kIncidentOpen,    event_type::kIncidentUpdate,
        event_type::kIncidentClose, event_type::kProfile,   event_type::kLocalised,       event_type::kPlan,
        event_type::kPlanApplied, event_type::kPlanTimeout, event_type::kPlanRejected,
        event_type::kBaseline,    event_type::kFailSlowOpen, event_type::kFailSlowEnd,   event_type::kRemedyCheck,
        event_type::kJobRestart,     event_type::kPause,          event_type::kValidated,      event_type::kFailStop,
        event_type::kStall,          event_type::kStallEnd,       event_type::kHang,           event_type::kPreflight,
        event_type::kLeader};
    Event e;
    e.type = f.str("type", 64);
    if (kTypes.count(e.type) == 0) throw Invalid("type: unknown event type '" + e.type + "'");
    e.t_s = f.num("t_s");
    e.t_unix_ms = f.integer_or("t_unix_ms", 0, 0, kMaxCount);
    e.source = f.str_or("source", "");
    e.rank = static_cast<int>(f.integer_or("rank", -1, -1, kMaxRank));
    e.node = static_cast<int>(f.integer_or("node", -1, -1, kMaxRank));
    e.index = f.integer_or("index", -1, -1, kMaxCount);
    e.detected_index = f.integer_or("detected_index", -1, -1, kMaxCount);
    e.detected_t_s = f.num_or("detected_t_s", -1);
    e.before_ms = f.num_or("before_ms", 0);
    e.after_ms = f.num_or("after_ms", 0);
    e.ratio = f.num_or("ratio", 0);
    e.incident = f.integer_or("incident", -1, -1, kMaxCount);
    if (f.has("detail")) {
      if (!j.at("detail").is_object()) throw Invalid("detail: must be an object");
      e.detail = j.at("detail");
    }
    const bool change = e.type == event_type::kSlowdown || e.type == event_type::kRecovery;
    if (change) {
      if (e.rank < 0) throw Invalid("rank: missing");
      if (e.before_ms <= 0 || e.after_ms <= 0) throw Invalid("before_ms/after_ms: must be positive");
    }
    return e;
}
}  // namespace

std::optional<Event> parse_event(const std::string& text, std::string* error) {
  return parse_with<Event>(text, error, build_event);
}

std::optional<Event> event_from_json(const json& j, std::string* error) { return build_from<Event>(j, error, build_event); }

json to_json(const RankRegistration& r) {
  return {{"rank", r.rank}, {"local_rank", r.local_rank}, {"node", r.node}, {"host", r.host},
          {"pid", r.pid},   {"device", r.device},         {"ring", r.ring}, {"t_unix_ms", r.t_unix_ms}};
}

std::optional<RankRegistration> parse_rank_registration(const std::string& text, std::string* error) {
  return parse_with<RankRegistration>(text, error, [](const Fields& f, const json&) {
    RankRegistration r;
    r.rank = static_cast<int>(f.integer("rank", 0, kMaxRank));
    r.local_rank = static_cast<int>(f.integer_or("local_rank", -1, -1, kMaxRank));
    r.node = static_cast<int>(f.integer("node", 0, kMaxRank));
    r.host = f.str("host", 255);
    r.pid = static_cast<int>(f.integer("pid", 0, INT32_MAX));
    r.device = static_cast<int>(f.integer_or("device", -1, -1, 1 << 16));
    r.ring = f.str_or("ring", "");
    r.t_unix_ms = f.integer_or("t_unix_ms", 0, 0, kMaxCount);
    return r;
  });
}

json to_json(const AgentHeartbeat& h) {
  return {{"node", h.node},
          {"host", h.host},
          {"pid", h.pid},
          {"t_unix_ms", h.t_unix_ms},
          {"ranks", h.ranks},
          {"records_read", h.records_read},
          {"records_lost", h.records_lost},
          {"events_dropped", h.events_dropped},
          {"redis_reconnects", h.redis_reconnects},
          {"settings_version", h.settings_version},
          {"detection_paused", h.detection_paused}};
}

std::optional<AgentHeartbeat> parse_agent_heartbeat(const std::string& text, std::string* error) {
  return parse_with<AgentHeartbeat>(text, error, [](const Fields& f, const json&) {
    AgentHeartbeat h;
    h.node = static_cast<int>(f.integer("node", 0, kMaxRank));
    h.host = f.str("host", 255);
    h.pid = static_cast<int>(f.integer("pid", 0, INT32_MAX));
    h.t_unix_ms = f.integer("t_unix_ms", 0, kMaxCount);
    h.ranks = f.ints_or_empty("ranks");
    h.records_read = static_cast<std::uint64_t>(f.integer_or("records_read", 0, 0, kMaxCount));
    h.records_lost = static_cast<std::uint64_t>(f.integer_or("records_lost", 0, 0, kMaxCount));
    h.events_dropped = static_cast<std::uint64_t>(f.integer_or("events_dropped", 0, 0, kMaxCount));
    h.redis_reconnects = static_cast<std::uint64_t>(f.integer_or("redis_reconnects", 0, 0, kMaxCount));
    h.settings_version = f.integer_or("settings_version", 0, 0, kMaxCount);
    if (f.has("detection_paused")) {
      const json& v = f.raw("detection_paused");
      if (!v.is_boolean()) throw Invalid("detection_paused: must be true or false");
      h.detection_paused = v.get<bool>();
    }
    return h;
  });
}

json to_json(const IterationUpdate& u) {
  json j = {{"rank", u.rank}, {"index", u.index}, {"t_s", u.t_s}, {"iter_ms", u.iter_ms}, {"period", u.period},
             {"t_unix_ms", u.t_unix_ms}};
  if (u.mark >= 0) j["mark"] = u.mark;
  return j;
}

std::optional<IterationUpdate> parse_iteration_update(const std::string& text, std::string* error) {
  return parse_with<IterationUpdate>(text, error, [](const Fields& f, const json&) {
    IterationUpdate u;
    u.rank = static_cast<int>(f.integer("rank", 0, kMaxRank));
    u.index = f.integer("index", 0, kMaxCount);
    u.t_s = f.num("t_s");
    u.iter_ms = f.num("iter_ms");
    if (u.iter_ms <= 0) throw Invalid("iter_ms: must be positive");
    u.period = static_cast<int>(f.integer_or("period", 0, 0, 1 << 24));
    u.t_unix_ms = f.integer_or("t_unix_ms", 0, 0, kMaxCount);
    u.mark = f.integer_or("mark", -1, -1, kMaxCount);
    return u;
  });
}

namespace {

json to_json(const PauseTransferSpec& t) {
  return {{"group", group_id_hex(t.group)}, {"pass", t.pass}, {"peer", t.peer}, {"send", t.send}};
}

PauseTransferSpec parse_transfer_spec(const json& j) {
  const Fields f(j);
  PauseTransferSpec t;
  t.group = group_id_of(f.str("group", 32), "group");
  t.pass = static_cast<int>(f.integer("pass", 0, 1 << 16));
  t.peer = static_cast<int>(f.integer("peer", 0, kMaxRank));
  const json& send = f.raw("send");
  if (!send.is_boolean()) throw Invalid("send: must be true or false");
  t.send = send.get<bool>();
  return t;
}

const json& array_of(const Fields& f, const char* k, std::size_t max_items) {
  const json& v = f.raw(k);
  if (!v.is_array() || v.size() > max_items) {
    throw Invalid(std::string(k) + ": must be an array of at most " + std::to_string(max_items));
  }
  return v;
}

}  // namespace

json to_json(const Command& c) {
  json j = {{"cmd", c.cmd}, {"id", c.id}, {"args", json::object()}};
  if (c.cmd == "profile") j["args"]["duration_s"] = c.duration_s;
  if (c.cmd == "pause" && c.pause) {
    const PauseSpec& p = *c.pause;
    json ranks = json::object();
    for (const auto& [r, t] : p.ranks) {
      json transfers = json::array();
      for (const auto& x : t.transfers) transfers.push_back(to_json(x));
      ranks[std::to_string(r)] = {{"gemm", t.gemm}, {"transfers", transfers}};
    }
    j["args"] = {{"at_iteration", p.at_iteration}, {"deadline_s", p.deadline_s}, {"gemm_n", p.gemm_n},
                 {"repeats", p.repeats}, {"sizes", p.sizes}, {"ranks", ranks}};
  }
  return j;
}

std::optional<Command> parse_command(const std::string& text, std::string* error) {
  return parse_with<Command>(text, error, [](const Fields& f, const json& j) {
    Command c;
    c.cmd = f.str("cmd", 64);
    static const std::set<std::string> known = {"ping", "resync", "profile", "pause", "pause_run", "pause_resume",
                                                 "pause_abort", "pause_exit"};
    if (known.count(c.cmd) == 0) throw Invalid("cmd: unknown command '" + c.cmd + "'");
    c.id = f.str("id", 128);
    if (c.cmd.rfind("pause", 0) == 0 && c.id.empty()) throw Invalid("id: a pause needs one");
    if (c.cmd == "pause") {
      if (!f.has("args")) throw Invalid("args: missing");
      const Fields args(j.at("args"));
      PauseSpec p;
      p.at_iteration = args.integer("at_iteration", 0, kMaxCount);
      p.deadline_s = args.num("deadline_s");
      if (!(p.deadline_s >= 1 && p.deadline_s <= kMaxPauseDeadlineS)) throw Invalid("deadline_s: out of range");
      p.gemm_n = static_cast<int>(args.integer_or("gemm_n", 0, 0, 16384));
      p.repeats = static_cast<int>(args.integer_or("repeats", 3, 1, 9));
      for (const auto& x : array_of(args, "sizes", kMaxPauseSizes)) {
        if (!x.is_number_unsigned() || x.get<std::uint64_t>() == 0 || x.get<std::uint64_t>() > (1ull << 32)) {
          throw Invalid("sizes: must be byte counts from 1 to 4 GiB");
        }
        p.sizes.push_back(x.get<std::uint64_t>());
      }
      const json& ranks = args.raw("ranks");
      if (!ranks.is_object() || ranks.size() > static_cast<std::size_t>(kMaxRank)) throw Invalid("ranks: must be an object");
      for (const auto& [key, v] : ranks.items()) {
        const auto r = parse_integer(key);
        if (!r || *r < 0 || *r > kMaxRank) throw Invalid("ranks: '" + printable(key, 32) + "' is not a rank");
        const Fields t(v);
        PauseRankTests tests;
        const json& gemm = t.raw("gemm");
        if (!gemm.is_boolean()) throw Invalid("gemm: must be true or false");
        tests.gemm = gemm.get<bool>();
        for (const auto& x : array_of(t, "transfers", kMaxPauseTransfers)) tests.transfers.push_back(parse_transfer_spec(x));
        p.ranks[static_cast<int>(*r)] = std::move(tests);
      }
      c.pause = std::move(p);
    } else if (f.has("args")) {
      const Fields args(j.at("args"));
      c.duration_s = std::clamp(args.num_or("duration_s", kDefaultProfileWindowS), kMinProfileWindowS, kMaxProfileWindowS);
    }
    return c;
  });
}

json to_json(const JobLayout& l) {
  json placement = json::array();
  for (const auto& e : l.placement) placement.push_back({{"rank", e.rank}, {"tp", e.tp}, {"dp", e.dp}, {"pp", e.pp}});
  json estimates = json::object();
  if (l.s3_estimate_s > 0) estimates[std::string(name(Strategy::kS3))] = l.s3_estimate_s;
  if (l.s4_estimate_s > 0) estimates[std::string(name(Strategy::kS4))] = l.s4_estimate_s;
  return {{"tp", l.tp}, {"dp", l.dp}, {"pp", l.pp}, {"world", l.world}, {"order", l.order},
          {"microbatches", l.microbatches}, {"initial_microbatches", l.initial_microbatches},
          {"capabilities", l.capabilities}, {"gpus_per_node", l.gpus_per_node},
          {"microbatch_multiple", l.microbatch_multiple}, {"placement", std::move(placement)},
          {"initial_placement", placement_json(l.initial_placement)}, {"s3_by_restart", l.s3_by_restart},
          {"cost_estimates_s", std::move(estimates)}, {"t_unix_ms", l.t_unix_ms}};
}

std::string placement_error(const JobLayout& l, const std::vector<PlacementEntry>& placement) {
  if (placement.empty()) return "";
  if (placement.size() != static_cast<std::size_t>(l.world)) {
    return "placement: " + std::to_string(placement.size()) + " entries for " + std::to_string(l.world) + " ranks";
  }
  std::set<int> ranks;
  std::set<std::tuple<int, int, int>> roles;
  std::map<std::pair<int, int>, int> group_node;  // (dp, pp) -> the node of its first rank
  for (std::size_t i = 0; i < placement.size(); ++i) {
    const std::string where = "placement[" + std::to_string(i) + "]";
    const PlacementEntry& p = placement[i];
    if (p.rank < 0 || p.tp < 0 || p.dp < 0 || p.pp < 0 || p.rank >= l.world || p.tp >= l.tp || p.dp >= l.dp ||
        p.pp >= l.pp) {
      return where + ": outside the job's " + std::to_string(l.tp) + "x" + std::to_string(l.dp) + "x" +
             std::to_string(l.pp) + " layout";
    }
    if (!ranks.insert(p.rank).second) return where + ": rank " + std::to_string(p.rank) + " placed twice";
    if (!roles.insert({p.tp, p.dp, p.pp}).second) return where + ": role taken twice";
    if (l.gpus_per_node > 0) {
      const int node = p.rank / l.gpus_per_node;
      const auto [it, first] = group_node.insert({{p.dp, p.pp}, node});
      if (!first && it->second != node) {
        return where + ": the TP group of dp " + std::to_string(p.dp) + ", pp " + std::to_string(p.pp) +
               " spans nodes " + std::to_string(it->second) + " and " + std::to_string(node);
      }
    }
  }
  return "";
}

std::vector<PlacementEntry> megatron_placement(const JobLayout& l) {
  std::vector<PlacementEntry> out;
  for (int r = 0; r < l.world; ++r) out.push_back({r, r % l.tp, (r / l.tp) % l.dp, r / (l.tp * l.dp)});
  return out;
}

json placement_json(const std::vector<PlacementEntry>& entries) {
  json out = json::array();
  for (const PlacementEntry& e : entries) out.push_back({{"rank", e.rank}, {"tp", e.tp}, {"dp", e.dp}, {"pp", e.pp}});
  return out;
}

namespace {
const std::vector<int>& initial_microbatches(const JobLayout& l) {
  return l.initial_microbatches.empty() ? l.microbatches : l.initial_microbatches;
}
// A placement's entries in rank order, Megatron's when it names none.
std::vector<PlacementEntry> by_rank_or_megatron(const JobLayout& l, const std::vector<PlacementEntry>& p) {
  if (p.empty()) return megatron_placement(l);
  std::vector<PlacementEntry> out = p;
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.rank < b.rank; });
  return out;
}
// Whether the placement in force is another than the one the job started with, in whatever order the job
// listed its entries.
bool placement_moved(const JobLayout& l) {
  if (l.placement.empty() && l.initial_placement.empty()) return false;
  return by_rank_or_megatron(l, l.placement) != by_rank_or_megatron(l, l.initial_placement);
}
}  // namespace

bool departs_from_original(const JobLayout& l) {
  return l.microbatches != initial_microbatches(l) || placement_moved(l);
}

Plan original_configuration_plan(const JobLayout& l) {
  Plan p;
  p.action = PlanAction::kRevert;
  p.strategy = Strategy::kS1;
  p.microbatches = initial_microbatches(l);
  if (placement_moved(l) && l.gpus_per_node > 0) p.placement = placement_json(by_rank_or_megatron(l, l.initial_placement));
  return p;
}

std::string layout_error(const JobLayout& l) {
  if (l.tp < 1 || l.dp < 1 || l.pp < 1) return "tp, dp and pp must be >= 1";
  // Each factor, then the product, bounded before the next multiplication: an untrusted tp x dp x pp may
  // overflow ParallelShape::world()'s int, and even int64.
  if (l.tp > kMaxRank || l.dp > kMaxRank || l.pp > kMaxRank) return "tp, dp and pp: too large";
  if (const std::int64_t tp_dp = static_cast<std::int64_t>(l.tp) * l.dp;
      tp_dp > kMaxRank || tp_dp * l.pp != l.world) {
    return tp_dp > kMaxRank ? "tp * dp: too large" : "world: must be tp * dp * pp";
  }
  if (l.world > kMaxRank) return "world: too large";
  if (l.order != "tp-dp-pp") return "order: only \"tp-dp-pp\" is understood";
  if (l.microbatches.size() != static_cast<std::size_t>(l.dp)) return "microbatches: one per DP replica";
  for (int m : l.microbatches) {
    if (m < 1) return "microbatches: every entry must be >= 1";
  }
  if (!l.initial_microbatches.empty()) {
    if (l.initial_microbatches.size() != l.microbatches.size()) return "initial_microbatches: one per DP replica";
    std::int64_t total = 0, initial_total = 0;
    for (std::size_t i = 0; i < l.microbatches.size(); ++i) {
      if (l.initial_microbatches[i] < 1) return "initial_microbatches: every entry must be >= 1";
      total += l.microbatches[i];
      initial_total += l.initial_microbatches[i];
    }
    if (total != initial_total) return "initial_microbatches: must add up to the same global batch";
  }
  if (l.microbatch_multiple < 0 || l.microbatch_multiple > kMaxMicrobatchMultiple) {
    return "microbatch_multiple: must be from 0 (not said) to " + std::to_string(kMaxMicrobatchMultiple);
  }
  for (const auto* v : {&l.microbatches, &l.initial_microbatches}) {
    for (int m : *v) {
      if (!schedule_takes(l, m)) {
        return std::string(v == &l.microbatches ? "microbatches" : "initial_microbatches") + ": " +
               std::to_string(m) + " is not a multiple of microbatch_multiple " + std::to_string(l.microbatch_multiple);
      }
    }
  }
  if (l.gpus_per_node < 0 || (l.gpus_per_node > 0 && (l.world % l.gpus_per_node != 0 || l.gpus_per_node % l.tp != 0))) {
    return "gpus_per_node: must divide world and be a multiple of tp";
  }
  for (double s : {l.s3_estimate_s, l.s4_estimate_s}) {
    if (!std::isfinite(s) || s < 0 || s > kMaxCostEstimateS) {
      return "cost_estimates_s: every estimate must be a finite number of seconds from 0 to a week";
    }
  }
  if (auto why = placement_error(l, l.initial_placement); !why.empty()) return "initial_" + why;
  return placement_error(l, l.placement);
}

std::optional<JobLayout> parse_job_layout(const std::string& text, std::string* error) {
  return parse_with<JobLayout>(text, error, [](const Fields& f, const json& j) {
    JobLayout l;
    l.tp = static_cast<int>(f.integer("tp", 1, 1 << 16));
    l.dp = static_cast<int>(f.integer("dp", 1, 1 << 20));
    l.pp = static_cast<int>(f.integer("pp", 1, 1 << 16));
    l.world = static_cast<int>(f.integer("world", 1, kMaxRank));
    l.order = f.str_or("order", "tp-dp-pp");
    l.microbatches = f.ints_or_empty("microbatches");
    l.initial_microbatches = f.ints_or_empty("initial_microbatches");
    if (f.has("capabilities")) {
      const json& c = j.at("capabilities");
      if (!c.is_array()) throw Invalid("capabilities: must be an array of strings");
      for (const auto& x : c) {
        if (!x.is_string()) throw Invalid("capabilities: must be an array of strings");
        l.capabilities.push_back(x.get<std::string>());
      }
    }
    l.gpus_per_node = static_cast<int>(f.integer_or("gpus_per_node", 0, 0, 1 << 16));
    l.microbatch_multiple = static_cast<int>(f.integer_or("microbatch_multiple", 0, 0, kMaxMicrobatchMultiple));
    if (f.has("placement")) l.placement = placement_entries(j.at("placement"));
    if (f.has("initial_placement")) {
      try {
        l.initial_placement = placement_entries(j.at("initial_placement"));
      } catch (const Invalid& e) {
        throw Invalid(std::string("initial_") + e.what());
      }
    }
    l.s3_by_restart = f.flag_or("s3_by_restart", false);
    if (f.has("cost_estimates_s")) {
      const json& c = j.at("cost_estimates_s");
      if (!c.is_object()) throw Invalid("cost_estimates_s: must be an object of strategy: seconds");
      const Fields e(c);
      for (const auto& [key, v] : c.items()) {
        const auto s = parse_strategy(key);
        if (!s || (*s != Strategy::kS3 && *s != Strategy::kS4)) {
          throw Invalid("cost_estimates_s: '" + printable(key, 32) + "' is not S3 or S4");
        }
        (*s == Strategy::kS3 ? l.s3_estimate_s : l.s4_estimate_s) = e.num(key.c_str());
      }
    }
    if (auto why = layout_error(l); !why.empty()) throw Invalid(why);
    if (l.initial_microbatches.empty()) l.initial_microbatches = l.microbatches;
    l.t_unix_ms = f.integer_or("t_unix_ms", 0, 0, kMaxCount);
    return l;
  });
}

namespace {

// The settings an operator may change, with their ranges: one table for the writer (greyhoundctl set) and
// the reader (every agent and the master).
struct SettingSpec {
  const char* key;
  std::optional<bool> JobSettings::*flag = nullptr;
  std::optional<double> JobSettings::*number = nullptr;
  std::optional<int> JobSettings::*integer = nullptr;
  double lo = 0, hi = 0;
  bool lo_open = false, hi_open = false;  // the range excludes its end
};
const SettingSpec kSettings[] = {
    {"detection_paused", &JobSettings::detection_paused, nullptr, nullptr, 0, 1},
    {"validation_ratio", nullptr, &JobSettings::validation_ratio, nullptr, 1.0, 10.0},
    {"bocd_threshold", nullptr, &JobSettings::bocd_threshold, nullptr, 0.0, 1.0, true, true},
    {"bocd_hazard", nullptr, &JobSettings::bocd_hazard, nullptr, 2.0, 1e7},
    {"acf_threshold", nullptr, &JobSettings::acf_threshold, nullptr, 0.0, 1.0, true, false},
    {"profile_iterations", nullptr, nullptr, &JobSettings::profile_iterations, 1, 1000},
    {"reprofile_iterations", nullptr, nullptr, &JobSettings::reprofile_iterations, 0, 1000},
    {"s3_pause_s", nullptr, &JobSettings::s3_pause_s, nullptr, 0, kMaxCostEstimateS},
    {"s4_restart_s", nullptr, &JobSettings::s4_restart_s, nullptr, 0, kMaxCostEstimateS},
    {"pause_deadline_s", nullptr, &JobSettings::pause_deadline_s, nullptr, 1, kMaxPauseDeadlineS},
};

// "" when `v` is in the range of `spec`, else what is wrong.
std::string setting_range_error(const SettingSpec& spec, double v) {
  const bool ok = std::isfinite(v) && (spec.lo_open ? v > spec.lo : v >= spec.lo) && (spec.hi_open ? v < spec.hi : v <= spec.hi);
  if (ok) return "";
  char buf[160];
  std::snprintf(buf, sizeof buf, "%s: must be in %c%g, %g%c", spec.key, spec.lo_open ? '(' : '[', spec.lo, spec.hi,
                spec.hi_open ? ')' : ']');
  return buf;
}

}  // namespace

json to_json(const JobSettings& st) {
  json j = json::object();
  for (const SettingSpec& spec : kSettings) {
    if (spec.flag && (st.*spec.flag)) j[spec.key] = *(st.*spec.flag);
    if (spec.number && (st.*spec.number)) j[spec.key] = *(st.*spec.number);
    if (spec.integer && (st.*spec.integer)) j[spec.key] = *(st.*spec.integer);
  }
  j["version"] = st.version;
  j["t_unix_ms"] = st.t_unix_ms;
  return j;
}

std::optional<JobSettings> parse_job_settings(const std::string& text, std::string* error) {
  return parse_with<JobSettings>(text, error, [](const Fields& f, const json& j) {
    JobSettings st;
    for (const SettingSpec& spec : kSettings) {
      if (!f.has(spec.key)) continue;
      const json& v = j.at(spec.key);
      if (spec.flag) {
        if (!v.is_boolean()) throw Invalid(std::string(spec.key) + ": must be true or false");
        st.*spec.flag = v.get<bool>();
      } else if (spec.integer) {
        st.*spec.integer = static_cast<int>(f.integer(spec.key, static_cast<std::int64_t>(spec.lo), static_cast<std::int64_t>(spec.hi)));
      } else {
        const double x = f.num(spec.key);
        if (auto why = setting_range_error(spec, x); !why.empty()) throw Invalid(why);
        st.*spec.number = x;
      }
    }
    st.version = f.integer_or("version", 0, 0, kMaxCount);
    st.t_unix_ms = f.integer_or("t_unix_ms", 0, 0, kMaxCount);
    return st;
  });
}

std::vector<std::string> job_setting_keys() {
  std::vector<std::string> out;
  for (const SettingSpec& spec : kSettings) out.emplace_back(spec.key);
  return out;
}

std::string apply_job_setting(JobSettings& st, const std::string& key, const std::string& value) {
  for (const SettingSpec& spec : kSettings) {
    if (key != spec.key) continue;
    if (value.empty()) {  // back to the program's own default
      if (spec.flag) (st.*spec.flag).reset();
      if (spec.number) (st.*spec.number).reset();
      if (spec.integer) (st.*spec.integer).reset();
      return "";
    }
    if (spec.flag) {
      if (value != "true" && value != "false") return key + ": must be true or false";
      st.*spec.flag = value == "true";
      return "";
    }
    const std::optional<double> parsed = parse_decimal(value);
    if (!parsed) return key + ": '" + printable(value, 32) + "' is not a finite number";
    const double x = *parsed;
    if (spec.integer) {
      if (x != std::trunc(x) || x < spec.lo || x > spec.hi) {
        char buf[96];
        std::snprintf(buf, sizeof buf, "%s: must be an integer in [%g, %g]", spec.key, spec.lo, spec.hi);
        return buf;
      }
      st.*spec.integer = static_cast<int>(x);
      return "";
    }
    if (auto why = setting_range_error(spec, x); !why.empty()) return why;
    st.*spec.number = x;
    return "";
  }
  std::string keys;
  for (const SettingSpec& spec : kSettings) keys += (keys.empty() ? "" : ", ") + std::string(spec.key);
  return "'" + printable(key, 32) + "' is not a setting (" + keys + ")";
}

json to_json(const Plan& p) {
  return {{"epoch", p.epoch},
          {"strategy", name(p.strategy)},
          {"action", name(p.action)},
          {"incident", p.incident},
          {"reason", p.reason},
          {"microbatches", p.microbatches},
          {"placement", p.placement},
          {"exclude_nodes", p.exclude_nodes},
          {"exclude_ranks", p.exclude_ranks},
          {"predicted_iteration_s", p.predicted_iteration_s},
          {"t_unix_ms", p.t_unix_ms}};
}

namespace {
Plan build_plan(const Fields& f, const json& j) {
    Plan p;
    p.epoch = f.integer("epoch", 1, kMaxCount);
    p.strategy = f.word("strategy", parse_strategy, "S1, S2, S3 or S4");
    p.action = f.word_or("action", parse_plan_action, "apply or revert", PlanAction::kApply);
    p.incident = f.integer_or("incident", -1, -1, kMaxCount);
    p.reason = f.str_or("reason", "");
    p.microbatches = f.ints_or_empty("microbatches");
    for (int m : p.microbatches) {
      if (m < 1) throw Invalid("microbatches: every entry must be >= 1");
    }
    if (f.has("placement")) {
      if (!j.at("placement").is_array()) throw Invalid("placement: must be an array");
      p.placement = j.at("placement");
    }
    p.exclude_nodes = f.ints_or_empty("exclude_nodes");
    p.exclude_ranks = f.ints_or_empty("exclude_ranks");
    for (int x : p.exclude_nodes) {
      if (x < 0) throw Invalid("exclude_nodes: entries must be >= 0");
    }
    for (int x : p.exclude_ranks) {
      if (x < 0) throw Invalid("exclude_ranks: entries must be >= 0");
    }
    p.predicted_iteration_s = f.num_or("predicted_iteration_s", 0);
    p.t_unix_ms = f.integer_or("t_unix_ms", 0, 0, kMaxCount);
    return p;
}
}  // namespace

std::optional<Plan> parse_plan(const std::string& text, std::string* error) {
  return parse_with<Plan>(text, error, build_plan);
}

std::optional<Plan> plan_from_json(const json& j, std::string* error) { return build_from<Plan>(j, error, build_plan); }

std::int64_t plan_epoch_named(const std::string& text) {
  JsonLimits limits;
  limits.max_bytes = kMaxMessageBytes;
  auto j = parse_bounded(text, limits);
  if (!j || !j->is_object()) return 0;
  const auto it = j->find("epoch");
  if (it == j->end() || !it->is_number_integer()) return 0;
  const std::int64_t e = it->get<std::int64_t>();
  return e >= 1 && e <= kMaxCount ? e : 0;
}

json to_json(const PlanAck& a) {
  return {{"rank", a.rank},     {"epoch", a.epoch},   {"iteration", a.iteration},
          {"status", name(a.status)}, {"detail", a.detail}, {"apply_s", a.apply_s}, {"t_unix_ms", a.t_unix_ms}};
}

std::optional<PlanAck> parse_plan_ack(const std::string& text, std::string* error) {
  return parse_with<PlanAck>(text, error, [](const Fields& f, const json&) {
    PlanAck a;
    a.rank = static_cast<int>(f.integer("rank", 0, kMaxRank));
    a.epoch = f.integer("epoch", 1, kMaxCount);
    a.iteration = f.integer_or("iteration", -1, -1, kMaxCount);
    a.status = f.word("status", parse_ack_status, "applied, unsupported or rejected");
    a.detail = f.str_or("detail", "");
    a.apply_s = f.num_or("apply_s", 0);
    if (a.apply_s < 0) throw Invalid("apply_s: must be >= 0");
    a.t_unix_ms = f.integer_or("t_unix_ms", 0, 0, kMaxCount);
    return a;
  });
}

json to_json(const Incident& i) {
  return {{"id", i.id},
          {"status", name(i.status)},
          {"onset_t_s", i.onset_t_s},
          {"detected_t_s", i.detected_t_s},
          {"closed_t_s", i.closed_t_s},
          {"before_ms", i.before_ms},
          {"after_ms", i.after_ms},
          {"severity", i.severity},
          {"ranks", i.ranks},
          {"recovered", i.recovered},
          {"nodes", i.nodes}};
}

std::optional<Incident> parse_incident(const std::string& text, std::string* error) {
  return parse_with<Incident>(text, error, [](const Fields& f, const json&) {
    Incident i;
    i.id = f.integer("id", 1, kMaxCount);
    i.status = f.word("status", parse_incident_status, "open or closed");
    i.onset_t_s = f.num("onset_t_s");
    i.detected_t_s = f.num("detected_t_s");
    i.closed_t_s = f.num_or("closed_t_s", -1);
    i.before_ms = f.num("before_ms");
    i.after_ms = f.num("after_ms");
    if (i.before_ms <= 0 || i.after_ms <= 0) throw Invalid("before_ms/after_ms: must be positive");
    i.severity = f.num("severity");
    i.ranks = f.ints_or_empty("ranks");
    i.recovered = f.ints_or_empty("recovered");
    i.nodes = f.ints_or_empty("nodes");
    return i;
  });
}

json to_json(const FailSlow& f) {
  json a = {{"rung", name(f.account.rung)},
            {"previous", name(f.account.previous)},
            {"loss_s", f.account.loss_s},
            {"rung_loss_s", f.account.rung_loss_s},
            {"last_iteration_s", f.account.last_iteration_s},
            {"window_s", f.account.window_s},
            {"s2", f.account.s2},
            {"s3", f.account.s3},
            {"s4", f.account.s4},
            {"trusted", f.account.trusted}};
  json j = {{"id", f.id},
            {"incident", f.incident},
            {"cause", name(f.cause)},
            {"onset_t_s", f.onset_t_s},
            {"localised_t_s", f.localised_t_s},
            {"last_seen_t_s", f.last_seen_t_s},
            {"ended_t_s", f.ended_t_s},
            {"severity", f.severity},
            {"misses", f.misses},
            {"account", std::move(a)}};
  if (f.rank >= 0) j["rank"] = f.rank;
  if (f.node >= 0) j["node"] = f.node;
  if (f.link_a >= 0) j["link"] = {f.link_a, f.link_b};
  if (f.cause_validated) j["cause_validated"] = true;
  return j;
}

std::optional<FailSlow> fail_slow_from_json(const json& j, std::string* error) {
  return build_from<FailSlow>(j, error, [](const Fields& f, const json& raw) {
    FailSlow x;
    x.id = f.integer("id", 1, kMaxCount);
    x.incident = f.integer_or("incident", -1, -1, kMaxCount);
    x.cause = f.word("cause", parse_cause, "computation, communication, host or unknown");
    x.rank = static_cast<int>(f.integer_or("rank", -1, -1, kMaxRank));
    x.node = static_cast<int>(f.integer_or("node", -1, -1, kMaxRank));
    const std::vector<int> link = f.ints_or_empty("link", 2);
    if (!link.empty()) {
      if (link.size() != 2 || link[0] < 0 || link[1] < 0 || link[0] > kMaxRank || link[1] > kMaxRank) {
        throw Invalid("link: must be two node ids");
      }
      x.link_a = link[0];
      x.link_b = link[1];
    }
    x.onset_t_s = f.num("onset_t_s");
    x.localised_t_s = f.num_or("localised_t_s", x.onset_t_s);
    x.last_seen_t_s = f.num_or("last_seen_t_s", x.localised_t_s);
    x.ended_t_s = f.num_or("ended_t_s", -1);
    x.severity = f.num_or("severity", 1);
    x.misses = static_cast<int>(f.integer_or("misses", 0, 0, 1 << 20));
    x.cause_validated = f.flag_or("cause_validated", false);
    if (f.has("account")) {
      const Fields a(raw.at("account"));
      x.account.rung = a.word_or("rung", parse_strategy, "S1, S2, S3 or S4", Strategy::kS1);
      x.account.previous = a.word_or("previous", parse_strategy, "S1, S2, S3 or S4", Strategy::kS1);
      x.account.loss_s = a.num_or("loss_s", 0);
      x.account.rung_loss_s = a.num_or("rung_loss_s", 0);
      x.account.last_iteration_s = a.num_or("last_iteration_s", 0);
      x.account.window_s = doubles_or_empty(raw.at("account"), "window_s");
      if (x.account.window_s.size() > 1024) throw Invalid("account.window_s: more than 1024 entries");
      for (const char* k : {"s2", "s3", "s4", "trusted"}) {
        if (a.has(k) && !a.raw(k).is_boolean()) throw Invalid(std::string("account.") + k + ": must be a boolean");
      }
      x.account.s2 = !a.has("s2") || a.raw("s2").get<bool>();
      x.account.s3 = !a.has("s3") || a.raw("s3").get<bool>();
      x.account.s4 = !a.has("s4") || a.raw("s4").get<bool>();
      x.account.trusted = a.has("trusted") && a.raw("trusted").get<bool>();
      if (x.account.loss_s < 0 || x.account.rung_loss_s < 0 || x.account.last_iteration_s < 0) {
        throw Invalid("account: losses and times must be >= 0");
      }
    }
    return x;
  });
}

json to_json(const MasterState& s) {
  json open = json::array();
  for (const FailSlow& f : s.fail_slows) open.push_back(to_json(f));
  json hangs = json::array();
  for (const HangDetail& h : s.hangs) hangs.push_back(to_json(h));
  json stops = json::array();
  for (const FailStopRecord& r : s.fail_stops) {
    stops.push_back({{"rank", r.rank}, {"node", r.node}, {"t_s", r.t_s}, {"pid", r.pid}});
  }
  return {{"cursor", s.cursor},
          {"state", name(s.state)},
          {"open_incident", s.open_incident},
          {"incidents_total", s.incidents_total},
          {"last_closed_t_s", s.last_closed_t_s},
          {"events_processed", s.events_processed},
          {"events_rejected", s.events_rejected},
          {"event_gaps", s.event_gaps},
          {"updated_unix_ms", s.updated_unix_ms},
          {"fail_slows", std::move(open)},
          {"fail_slows_total", s.fail_slows_total},
          {"healthy_ms", s.healthy_ms},
          {"fail_stops", std::move(stops)},
          {"fail_stops_total", s.fail_stops_total},
          {"hangs", std::move(hangs)},
          {"hangs_total", s.hangs_total},
          {"plans_recorded", s.plans_recorded}};
}

std::optional<MasterState> parse_master_state(const std::string& text, std::string* error) {
  return parse_with<MasterState>(text, error, [](const Fields& f, const json& raw) {
    MasterState s;
    s.cursor = f.str("cursor", 64);
    if (!valid_stream_id(s.cursor)) throw Invalid("cursor: not a stream id");
    s.state = f.word("state", parse_phase, "a state (healthy, slow, profiling, validating, mitigating)");
    s.open_incident = f.integer_or("open_incident", -1, -1, kMaxCount);
    s.incidents_total = f.integer_or("incidents_total", 0, 0, kMaxCount);
    s.last_closed_t_s = f.num_or("last_closed_t_s", -1);
    s.events_processed = f.integer_or("events_processed", 0, 0, kMaxCount);
    s.events_rejected = f.integer_or("events_rejected", 0, 0, kMaxCount);
    s.event_gaps = f.integer_or("event_gaps", 0, 0, kMaxCount);
    s.updated_unix_ms = f.integer_or("updated_unix_ms", 0, 0, kMaxCount);
    if (f.has("fail_slows")) {
      const json& a = raw.at("fail_slows");
      if (!a.is_array() || a.size() > kMaxOpenFailSlows) {
        throw Invalid("fail_slows: must be an array of at most " + std::to_string(kMaxOpenFailSlows));
      }
      for (const json& x : a) {
        std::string why;
        auto fs = fail_slow_from_json(x, &why);
        if (!fs) throw Invalid("fail_slows: " + why);
        s.fail_slows.push_back(std::move(*fs));
      }
    }
    s.fail_slows_total = f.integer_or("fail_slows_total", 0, 0, kMaxCount);
    s.healthy_ms = f.num_or("healthy_ms", 0);
    if (s.healthy_ms < 0) throw Invalid("healthy_ms: must be >= 0");
    if (f.has("fail_stops")) {
      const json& a = raw.at("fail_stops");
      if (!a.is_array() || a.size() > kMaxFailStopsKept) {
        throw Invalid("fail_stops: must be an array of at most " + std::to_string(kMaxFailStopsKept));
      }
      for (const json& x : a) {
        if (!x.is_object()) throw Invalid("fail_stops: must hold objects");
        const Fields g(x);
        FailStopRecord r;
        r.rank = static_cast<int>(g.integer("rank", 0, INT32_MAX));
        r.node = static_cast<int>(g.integer_or("node", -1, -1, INT32_MAX));
        r.t_s = g.num_or("t_s", 0);
        r.pid = g.integer_or("pid", 0, 0, INT32_MAX);
        s.fail_stops.push_back(r);
      }
    }
    s.fail_stops_total = f.integer_or("fail_stops_total", 0, 0, kMaxCount);
    if (f.has("hangs")) {
      const json& a = raw.at("hangs");
      if (!a.is_array() || a.size() > kMaxHangsKept) {
        throw Invalid("hangs: must be an array of at most " + std::to_string(kMaxHangsKept));
      }
      for (const json& x : a) {
        std::string why;
        auto h = parse_hang_detail(x, &why);
        if (!h) throw Invalid("hangs: " + why);
        s.hangs.push_back(std::move(*h));
      }
    }
    s.hangs_total = f.integer_or("hangs_total", 0, 0, kMaxCount);
    s.plans_recorded = f.integer_or("plans_recorded", -1, -1, kMaxCount);
    return s;
  });
}

// ---- Event details.

json to_json(const ChangeDetail& d) { return {{"method", d.method}, {"iteration_end_t_s", d.iteration_end_t_s}}; }

std::optional<ChangeDetail> parse_change_detail(const json& detail, std::string* error) {
  return build_from<ChangeDetail>(detail, error, [](const Fields& f, const json&) {
    ChangeDetail d;
    d.method = f.str_or("method", "");
    d.iteration_end_t_s = f.num_or("iteration_end_t_s", -1);
    return d;
  });
}

json to_json(const PeriodChangeDetail& d) { return {{"period", d.period}}; }

std::optional<PeriodChangeDetail> parse_period_change_detail(const json& detail, std::string* error) {
  return build_from<PeriodChangeDetail>(detail, error, [](const Fields& f, const json&) {
    PeriodChangeDetail d;
    d.period = static_cast<int>(f.integer("period", 0, 1 << 24));
    return d;
  });
}

json to_json(const CommandAckDetail& d) { return {{"cmd", d.cmd}, {"id", d.id}, {"stream_id", d.stream_id}}; }

std::optional<CommandAckDetail> parse_command_ack_detail(const json& detail, std::string* error) {
  return build_from<CommandAckDetail>(detail, error, [](const Fields& f, const json&) {
    CommandAckDetail d;
    d.cmd = f.str("cmd", 64);
    d.id = f.str("id", 128);
    d.stream_id = f.str_or("stream_id", "");
    return d;
  });
}

json to_json(const PauseReport& r) {
  json transfers = json::array();
  for (const auto& t : r.transfers) {
    json x = to_json(t.spec);
    x["ms"] = t.ms;
    transfers.push_back(std::move(x));
  }
  json j = {{"id", r.id},           {"state", r.state},         {"reason", r.reason},           {"drain_ms", r.drain_ms},
            {"paused_ms", r.paused_ms}, {"gemm_ms", r.gemm_ms}, {"gemm_tflops", r.gemm_tflops}, {"transfers", transfers}};
  if (!r.gemm_fp8.empty()) j["gemm_fp8"] = r.gemm_fp8;
  if (r.gemm_fp8 == "done") {
    j["gemm_fp8_ms"] = r.gemm_fp8_ms;
    j["gemm_fp8_tflops"] = r.gemm_fp8_tflops;
  }
  if (r.compute_capability != 0) j["compute_capability"] = r.compute_capability;
  return j;
}

std::optional<PauseReport> parse_pause_report(const json& detail, std::string* error) {
  return build_from<PauseReport>(detail, error, [](const Fields& f, const json& j) {
    static const std::set<std::string> states = {"trapped", "running", "done", "resumed", "refused"};
    PauseReport r;
    r.id = f.str("id", 128);
    r.state = f.str("state", 16);
    if (states.count(r.state) == 0) throw Invalid("state: '" + printable(r.state, 16) + "' is not a pause state");
    r.reason = f.str_or("reason", "");
    if (r.reason.size() > 32) throw Invalid("reason: longer than 32");
    const auto nonneg = [](double x, const char* k) {
      if (x < 0) throw Invalid(std::string(k) + ": must not be negative");
      return x;
    };
    r.drain_ms = nonneg(f.num_or("drain_ms", 0), "drain_ms");
    r.paused_ms = nonneg(f.num_or("paused_ms", 0), "paused_ms");
    r.gemm_ms = doubles_or_empty(j, "gemm_ms");
    r.gemm_tflops = doubles_or_empty(j, "gemm_tflops");
    if (r.gemm_ms.size() > 4 || r.gemm_tflops.size() > 4) throw Invalid("gemm_ms: at most 4 entries");
    for (double x : r.gemm_ms) nonneg(x, "gemm_ms");
    for (double x : r.gemm_tflops) nonneg(x, "gemm_tflops");
    r.gemm_fp8 = f.str_or("gemm_fp8", "");
    if (!r.gemm_fp8.empty() && std::find(std::begin(kGemmFp8Names), std::end(kGemmFp8Names), r.gemm_fp8) ==
                                   std::end(kGemmFp8Names)) {
      throw Invalid("gemm_fp8: '" + printable(r.gemm_fp8, 16) + "' is not an FP8 GEMM outcome");
    }
    r.gemm_fp8_ms = nonneg(f.num_or("gemm_fp8_ms", 0), "gemm_fp8_ms");
    r.gemm_fp8_tflops = nonneg(f.num_or("gemm_fp8_tflops", 0), "gemm_fp8_tflops");
    if (r.gemm_fp8 != "done" && (r.gemm_fp8_ms != 0 || r.gemm_fp8_tflops != 0)) {
      throw Invalid("gemm_fp8_ms: measured though the FP8 GEMM is not done");
    }
    r.compute_capability = static_cast<int>(f.integer_or("compute_capability", 0, 0, 199));
    if (f.has("transfers")) {
      for (const auto& x : array_of(f, "transfers", kMaxPauseTransfers)) {
        PauseTransferResult t;
        t.spec = parse_transfer_spec(x);
        t.ms = doubles_or_empty(x, "ms");
        if (t.ms.size() > static_cast<std::size_t>(kMaxPauseSizes)) throw Invalid("ms: too many sizes");
        for (double v : t.ms) nonneg(v, "ms");
        r.transfers.push_back(std::move(t));
      }
    }
    return r;
  });
}

namespace {

// One GPU's GEMM evidence, in a validated and a pre-flight report alike.
json gpu_json(const ValidatedGpu& g) {
  json j = {{"rank", g.rank},     {"node", g.node},     {"ms", g.ms},     {"peers_ms", g.peers_ms},
            {"ratio", g.ratio},   {"tflops", g.tflops}, {"slow", g.slow}, {"fp8_tflops", g.fp8_tflops}};
  if (!g.fp8.empty()) j["fp8"] = g.fp8;
  return j;
}

ValidatedGpu parse_gpu(const json& x, bool slow_by_default) {
  const Fields g(x);
  const auto nonneg = [](double v, const char* k) {
    if (!(v >= 0)) throw Invalid(std::string(k) + ": must not be negative");
    return v;
  };
  ValidatedGpu v;
  v.rank = static_cast<int>(g.integer("rank", 0, kMaxRank));
  v.node = static_cast<int>(g.integer_or("node", -1, -1, kMaxRank));
  v.ms = nonneg(g.num("ms"), "ms");
  v.peers_ms = nonneg(g.num_or("peers_ms", 0), "peers_ms");
  v.ratio = nonneg(g.num_or("ratio", 0), "ratio");
  v.tflops = nonneg(g.num_or("tflops", 0), "tflops");
  v.slow = g.flag_or("slow", slow_by_default);
  v.fp8_tflops = nonneg(g.num_or("fp8_tflops", 0), "fp8_tflops");
  v.fp8 = g.str_or("fp8", "");
  if (!v.fp8.empty() && std::find(std::begin(kGemmFp8Names), std::end(kGemmFp8Names), v.fp8) == std::end(kGemmFp8Names)) {
    throw Invalid("fp8: '" + printable(v.fp8, 16) + "' is not an FP8 GEMM outcome");
  }
  return v;
}

std::vector<std::string> parse_gemm_types(const Fields& f) {
  std::vector<std::string> out;
  if (!f.has("gemm_types")) return out;
  for (const auto& x : array_of(f, "gemm_types", 3)) {
    if (!x.is_string() || (x != "fp32" && x != "fp16" && x != "fp8")) throw Invalid("gemm_types: fp32, fp16 or fp8");
    out.push_back(x.get<std::string>());
  }
  return out;
}

}  // namespace

json to_json(const ValidatedReport& v) {
  json gpus = json::array(), links = json::array();
  for (const auto& g : v.gpus) gpus.push_back(gpu_json(g));
  for (const auto& l : v.links) {
    links.push_back({{"src", l.src}, {"dst", l.dst}, {"src_node", l.src_node}, {"dst_node", l.dst_node},
                     {"class", l.link_class}, {"ms", l.ms}, {"peers_ms", l.peers_ms}, {"ratio", l.ratio},
                     {"gb_per_s", l.gb_per_s}, {"slow", l.slow}});
  }
  return {{"id", v.id},           {"cause", v.cause},       {"aborted", v.aborted},
          {"rank", v.rank},       {"node", v.node},         {"node_a", v.node_a},
          {"node_b", v.node_b},   {"ratio", v.ratio},       {"gb_per_s", v.gb_per_s},
          {"peers_gb_per_s", v.peers_gb_per_s}, {"reason", v.reason}, {"at_iteration", v.at_iteration},
          {"ranks", v.ranks},     {"localised_t_s", v.localised_t_s}, {"pause_s", v.pause_s},
          {"tests_s", v.tests_s}, {"gemm_types", v.gemm_types}, {"gpus", gpus}, {"links", links}};
}

std::optional<ValidatedReport> parse_validated_report(const json& detail, std::string* error) {
  return build_from<ValidatedReport>(detail, error, [](const Fields& f, const json&) {
    static const std::set<std::string> causes = {"gpu", "link", "host", "none"};
    ValidatedReport v;
    v.id = f.str("id", 128);
    v.cause = f.str("cause", 16);
    if (causes.count(v.cause) == 0) throw Invalid("cause: '" + printable(v.cause, 16) + "' is not a cause");
    v.aborted = f.flag("aborted");
    v.rank = static_cast<int>(f.integer_or("rank", -1, -1, kMaxRank));
    v.node = static_cast<int>(f.integer_or("node", -1, -1, kMaxRank));
    v.node_a = static_cast<int>(f.integer_or("node_a", -1, -1, kMaxRank));
    v.node_b = static_cast<int>(f.integer_or("node_b", -1, -1, kMaxRank));
    v.ratio = f.num_or("ratio", 0);
    v.gb_per_s = f.num_or("gb_per_s", 0);
    v.peers_gb_per_s = f.num_or("peers_gb_per_s", 0);
    v.reason = f.str_or("reason", "");
    v.at_iteration = f.integer_or("at_iteration", 0, 0, kMaxCount);
    v.ranks = static_cast<int>(f.integer_or("ranks", 0, 0, kMaxRank));
    v.localised_t_s = f.num_or("localised_t_s", 0);
    v.pause_s = f.num_or("pause_s", 0);
    v.tests_s = f.num_or("tests_s", 0);
    if (v.pause_s < 0 || v.tests_s < 0) throw Invalid("pause_s: must not be negative");
    v.gemm_types = parse_gemm_types(f);
    if (f.has("gpus")) {
      for (const auto& x : array_of(f, "gpus", 4096)) v.gpus.push_back(parse_gpu(x, false));
    }
    if (f.has("links")) {
      for (const auto& x : array_of(f, "links", 4096)) {
        const Fields l(x);
        v.links.push_back({static_cast<int>(l.integer("src", 0, kMaxRank)), static_cast<int>(l.integer("dst", 0, kMaxRank)),
                           static_cast<int>(l.integer_or("src_node", -1, -1, kMaxRank)),
                           static_cast<int>(l.integer_or("dst_node", -1, -1, kMaxRank)), l.str_or("class", ""), l.num("ms"),
                           l.num_or("peers_ms", 0), l.num_or("ratio", 0), l.num_or("gb_per_s", 0), l.flag("slow")});
      }
    }
    return v;
  });
}

json to_json(const OperatorPlanRequest& r) {
  return {{"id", r.id},       {"action", r.action}, {"microbatches", r.microbatches}, {"placement", placement_json(r.placement)},
          {"reason", r.reason}, {"t_unix_ms", r.t_unix_ms}};
}

std::optional<OperatorPlanRequest> parse_operator_plan_request(const std::string& text, std::string* error) {
  return parse_with<OperatorPlanRequest>(text, error, [](const Fields& f, const json& j) {
    static const std::set<std::string> actions = {"apply", "revert", "release"};
    OperatorPlanRequest r;
    r.id = request_id(f);
    r.action = f.str("action", 16);
    if (actions.count(r.action) == 0) {
      throw Invalid("action: '" + printable(r.action, 16) + "' is not apply, revert or release");
    }
    r.microbatches = f.ints_or_empty("microbatches", 1 << 16);
    for (int m : r.microbatches) {
      if (m < 1 || m > 1'000'000) throw Invalid("microbatches: each must be in [1, 1000000]");
    }
    if (f.has("placement")) r.placement = placement_entries(j.at("placement"));
    if (r.action == "apply" && r.microbatches.empty() && r.placement.empty()) {
      throw Invalid("apply: needs microbatches or a placement");
    }
    if (r.action != "apply" && (!r.microbatches.empty() || !r.placement.empty())) {
      throw Invalid(r.action + ": takes no microbatches or placement");
    }
    r.reason = f.str_or("reason", "");
    if (r.reason.size() > 256) throw Invalid("reason: longer than 256");
    r.t_unix_ms = f.integer_or("t_unix_ms", 0, 0, kMaxCount);
    return r;
  });
}

json to_json(const OperatorPlanReport& r) {
  return {{"id", r.id}, {"state", r.state}, {"epoch", r.epoch}, {"reason", r.reason}, {"t_unix_ms", r.t_unix_ms}};
}

std::optional<OperatorPlanReport> parse_operator_plan_report(const std::string& text, std::string* error) {
  return parse_with<OperatorPlanReport>(text, error, [](const Fields& f, const json&) {
    static const std::set<std::string> states = {"published", "refused", "released"};
    OperatorPlanReport r;
    r.id = request_id(f);
    r.state = f.str("state", 16);
    if (states.count(r.state) == 0) throw Invalid("state: '" + printable(r.state, 16) + "' is not an answer");
    r.epoch = f.integer_or("epoch", 0, 0, kMaxCount);
    r.reason = f.str_or("reason", "");
    r.t_unix_ms = f.integer_or("t_unix_ms", 0, 0, kMaxCount);
    return r;
  });
}

json to_json(const PreflightRequest& r) {
  return {{"id", r.id}, {"fail_on_slow", r.fail_on_slow}, {"t_unix_ms", r.t_unix_ms}};
}

std::optional<PreflightRequest> parse_preflight_request(const std::string& text, std::string* error) {
  return parse_with<PreflightRequest>(text, error, [](const Fields& f, const json&) {
    PreflightRequest r;
    r.id = request_id(f);
    r.fail_on_slow = f.flag_or("fail_on_slow", false);
    r.t_unix_ms = f.integer_or("t_unix_ms", 0, 0, kMaxCount);
    return r;
  });
}

json to_json(const PreflightReport& r) {
  json gpus = json::array(), links = json::array();
  for (const auto& g : r.slow_gpus) gpus.push_back(gpu_json(g));
  for (const auto& l : r.slow_links) {
    links.push_back({{"node_a", l.node_a}, {"node_b", l.node_b}, {"class", l.link_class}, {"ratio", l.ratio},
                     {"gb_per_s", l.gb_per_s}, {"peers_gb_per_s", l.peers_gb_per_s}, {"transfers", l.transfers}});
  }
  return {{"id", r.id},
          {"state", r.state},
          {"fail_on_slow", r.fail_on_slow},
          {"exit", r.exit},
          {"slow_gpus", gpus},
          {"gemm_types", r.gemm_types},
          {"slow_links", links},
          {"gpus_tested", r.gpus_tested},
          {"transfers_tested", r.transfers_tested},
          {"groups_tested", r.groups_tested},
          {"reason", r.reason},
          {"pause", r.pause},
          {"at_iteration", r.at_iteration},
          {"ranks", r.ranks},
          {"pause_s", r.pause_s},
          {"tests_s", r.tests_s},
          {"t_unix_ms", r.t_unix_ms}};
}

std::optional<PreflightReport> parse_preflight_report(const json& detail, std::string* error) {
  return build_from<PreflightReport>(detail, error, [](const Fields& f, const json&) {
    static const std::set<std::string> states = {"waiting", "running", "passed", "slow", "failed"};
    PreflightReport r;
    r.id = request_id(f);
    r.state = f.str("state", 16);
    if (states.count(r.state) == 0) throw Invalid("state: '" + printable(r.state, 16) + "' is not a pre-flight state");
    r.fail_on_slow = f.flag_or("fail_on_slow", false);
    r.exit = f.flag_or("exit", false);
    const auto nonneg = [](double x, const char* k) {
      if (x < 0) throw Invalid(std::string(k) + ": must not be negative");
      return x;
    };
    // An item's error names its array and place.
    const auto item = [](const char* key, std::size_t i, const auto& parse) {
      try {
        parse();
      } catch (const Invalid& e) {
        throw Invalid(std::string(key) + "[" + std::to_string(i) + "]: " + e.what());
      }
    };
    std::size_t i = 0;
    if (f.has("slow_gpus")) {
      for (const auto& x : array_of(f, "slow_gpus", 4096)) item("slow_gpus", i++, [&] { r.slow_gpus.push_back(parse_gpu(x, true)); });
    }
    r.gemm_types = parse_gemm_types(f);
    i = 0;
    if (f.has("slow_links")) {
      for (const auto& x : array_of(f, "slow_links", 4096)) item("slow_links", i++, [&] {
        const Fields l(x);
        PreflightLink k;
        k.node_a = static_cast<int>(l.integer("node_a", 0, kMaxRank));
        k.node_b = static_cast<int>(l.integer("node_b", 0, kMaxRank));
        k.link_class = l.str_or("class", "");
        if (k.link_class.size() > 16) throw Invalid("class: longer than 16");
        k.ratio = nonneg(l.num_or("ratio", 0), "ratio");
        k.gb_per_s = nonneg(l.num_or("gb_per_s", 0), "gb_per_s");
        k.peers_gb_per_s = nonneg(l.num_or("peers_gb_per_s", 0), "peers_gb_per_s");
        k.transfers = static_cast<int>(l.integer_or("transfers", 0, 0, kMaxCount));
        r.slow_links.push_back(std::move(k));
      });
    }
    r.gpus_tested = static_cast<int>(f.integer_or("gpus_tested", 0, 0, kMaxRank));
    r.transfers_tested = static_cast<int>(f.integer_or("transfers_tested", 0, 0, kMaxCount));
    r.groups_tested = static_cast<int>(f.integer_or("groups_tested", 0, 0, kMaxCount));
    r.reason = f.str_or("reason", "");
    r.pause = f.str_or("pause", "");
    if (r.pause.size() > 128) throw Invalid("pause: longer than 128");
    r.at_iteration = f.integer_or("at_iteration", 0, 0, kMaxCount);
    r.ranks = static_cast<int>(f.integer_or("ranks", 0, 0, kMaxRank));
    r.pause_s = nonneg(f.num_or("pause_s", 0), "pause_s");
    r.tests_s = nonneg(f.num_or("tests_s", 0), "tests_s");
    r.t_unix_ms = f.integer_or("t_unix_ms", 0, 0, kMaxCount);
    return r;
  });
}

std::optional<PreflightReport> parse_preflight_report_text(const std::string& text, std::string* error) {
  return parse_with<PreflightReport>(text, error, [](const Fields&, const json& j) {
    std::string err;
    auto r = parse_preflight_report(j, &err);
    if (!r) throw Invalid(err);
    return *r;
  });
}

json to_json(const AgentStopDetail& d) { return {{"events_dropped", d.events_dropped}}; }

std::optional<AgentStopDetail> parse_agent_stop_detail(const json& detail, std::string* error) {
  return build_from<AgentStopDetail>(detail, error, [](const Fields& f, const json&) {
    AgentStopDetail d;
    d.events_dropped = static_cast<std::uint64_t>(f.integer_or("events_dropped", 0, 0, kMaxCount));
    return d;
  });
}

json to_json(const FailStopDetail& d) {
  return {{"pid", d.pid}, {"exit_status", d.exit_status}, {"last_record_t_s", d.last_record_t_s}};
}

std::optional<FailStopDetail> parse_fail_stop_detail(const json& detail, std::string* error) {
  return build_from<FailStopDetail>(detail, error, [](const Fields& f, const json&) {
    FailStopDetail d;
    d.pid = f.integer_or("pid", 0, 0, INT32_MAX);
    d.exit_status = static_cast<int>(f.integer_or("exit_status", -1, -1, 255));
    d.last_record_t_s = f.num_or("last_record_t_s", -1);
    return d;
  });
}

json to_json(const LeaderDetail& d) { return {{"master", d.master}, {"epoch", d.epoch}}; }

std::optional<LeaderDetail> parse_leader_detail(const json& detail, std::string* error) {
  return build_from<LeaderDetail>(detail, error, [](const Fields& f, const json&) {
    LeaderDetail d;
    d.master = f.str("master", 256);
    d.epoch = f.integer("epoch", 1, INT64_MAX);
    return d;
  });
}

json to_json(const StallDetail& d) {
  json last = json::object();
  for (const auto& [g, s] : d.last_seq) last[group_id_hex(g)] = s;
  return {{"in_call", d.in_call},        {"op", d.op},           {"group", group_id_hex(d.group)},
          {"group_seq", d.group_seq},    {"since_t_s", d.since_t_s}, {"threshold_s", d.threshold_s},
          {"last_seq", std::move(last)}};
}

std::optional<StallDetail> parse_stall_detail(const json& detail, std::string* error) {
  return build_from<StallDetail>(detail, error, [](const Fields& f, const json& raw) {
    StallDetail d;
    d.in_call = f.has("in_call") && raw.at("in_call").is_boolean() && raw.at("in_call").get<bool>();
    d.op = f.str_or("op", "");
    if (f.has("group") && !parse_group_id_hex(f.str("group", 32), &d.group)) throw Invalid("group: not a group id");
    d.group_seq = static_cast<std::uint64_t>(f.integer_or("group_seq", 0, 0, kMaxCount));
    d.since_t_s = f.num_or("since_t_s", 0);
    d.threshold_s = f.num_or("threshold_s", 0);
    if (f.has("last_seq")) {
      const json& m = raw.at("last_seq");
      if (!m.is_object() || m.size() > 64) throw Invalid("last_seq: must be an object of at most 64 groups");
      for (const auto& [k, v] : m.items()) {
        std::uint64_t g = 0;
        if (!parse_group_id_hex(k, &g)) throw Invalid("last_seq: '" + printable(k, 32) + "' is not a group id");
        if (!v.is_number_unsigned() || v.get<std::uint64_t>() > static_cast<std::uint64_t>(kMaxCount)) {
          throw Invalid("last_seq: call numbers must be non-negative integers");
        }
        d.last_seq[g] = v.get<std::uint64_t>();
      }
    }
    return d;
  });
}

json to_json(const HangDetail& d) {
  json last = json::object();
  for (const auto& [r, s] : d.missing_last_seq) last[std::to_string(r)] = s;
  return {{"group", group_id_hex(d.group)}, {"op", d.op},           {"seq", d.seq},
          {"waiting", d.waiting},           {"missing", d.missing}, {"missing_last_seq", std::move(last)},
          {"since_t_s", d.since_t_s}};
}

std::optional<HangDetail> parse_hang_detail(const json& detail, std::string* error) {
  return build_from<HangDetail>(detail, error, [](const Fields& f, const json& raw) {
    HangDetail d;
    if (!parse_group_id_hex(f.str("group", 32), &d.group)) throw Invalid("group: not a group id");
    d.op = f.str_or("op", "");
    d.seq = static_cast<std::uint64_t>(f.integer("seq", 0, kMaxCount));
    d.waiting = f.ints_or_empty("waiting");
    d.missing = f.ints_or_empty("missing");
    if (f.has("missing_last_seq")) {
      const json& m = raw.at("missing_last_seq");
      if (!m.is_object() || m.size() > (1 << 16)) throw Invalid("missing_last_seq: must be an object");
      for (const auto& [k, v] : m.items()) {
        const auto r = parse_decimal(k);
        if (!r || *r < 0 || *r > INT32_MAX || *r != std::floor(*r) || !v.is_number_integer()) {
          throw Invalid("missing_last_seq: ranks to call numbers");
        }
        d.missing_last_seq[static_cast<int>(*r)] = v.get<std::int64_t>();
      }
    }
    d.since_t_s = f.num_or("since_t_s", 0);
    return d;
  });
}

json to_json(const ProfileReport& p) {
  json groups = json::object();
  for (const auto& [gid, g] : p.groups) groups[group_id_hex(gid)] = {{"share", g.share}, {"calls_per_s", g.calls_per_s}};
  return {{"request", p.request},       {"window_s", p.window_s}, {"iterations", p.iterations},
          {"iter_ms", p.iter_ms},       {"iter_ms_min", p.iter_ms_min}, {"iter_ms_max", p.iter_ms_max},
          {"comm_share", p.comm_share}, {"timings", p.timings},       {"status", p.status},
          {"groups", groups}};
}

std::optional<ProfileReport> parse_profile_report(const json& detail, std::string* error) {
  return build_from<ProfileReport>(detail, error, [](const Fields& f, const json& j) {
    ProfileReport p;
    p.request = f.str_or("request", "");
    p.window_s = f.num_or("window_s", 0);
    p.iterations = static_cast<int>(f.integer_or("iterations", 0, 0, INT32_MAX));
    p.iter_ms = f.num_or("iter_ms", 0);
    p.iter_ms_min = f.num_or("iter_ms_min", 0);
    p.iter_ms_max = f.num_or("iter_ms_max", 0);
    p.comm_share = f.num_or("comm_share", 0);
    p.timings = f.integer_or("timings", 0, 0, kMaxCount);
    p.status = f.str_or("status", "active");
    if (p.status != "active" && p.status != "unavailable") throw Invalid("status: must be active or unavailable");
    if (p.window_s < 0 || p.iter_ms < 0 || p.comm_share < 0) throw Invalid("window_s/iter_ms/comm_share: negative");
    if (p.iter_ms_min < 0 || p.iter_ms_max < p.iter_ms_min) {
      throw Invalid("iter_ms_min/iter_ms_max: negative, or the least over the greatest");
    }
    if (f.has("groups")) {
      const json& g = j.at("groups");
      if (!g.is_object()) throw Invalid("groups: must be an object");
      for (const auto& [hex, v] : g.items()) {
        const Fields gf(v);
        ProfileGroup pg;
        pg.share = gf.num("share");
        pg.calls_per_s = gf.num_or("calls_per_s", 0);
        if (pg.share < 0 || pg.calls_per_s < 0) throw Invalid("groups: negative share or rate");
        p.groups[group_id_of(hex, "groups")] = pg;
      }
    }
    return p;
  });
}

json to_json(const IncidentDetail& d) {
  json j = {{"ranks", d.ranks}, {"nodes", d.nodes}, {"onset_t_s", d.onset_t_s}, {"detected_t_s", d.detected_t_s},
            {"state", name(d.state)}};
  if (d.duration_s >= 0) j["duration_s"] = d.duration_s;
  if (!d.reason.empty()) j["reason"] = d.reason;
  return j;
}

std::optional<IncidentDetail> parse_incident_detail(const json& detail, std::string* error) {
  return build_from<IncidentDetail>(detail, error, [](const Fields& f, const json&) {
    IncidentDetail d;
    d.ranks = f.ints_or_empty("ranks");
    d.nodes = f.ints_or_empty("nodes");
    d.onset_t_s = f.num("onset_t_s");
    d.detected_t_s = f.num_or("detected_t_s", d.onset_t_s);
    d.state = f.word_or("state", parse_phase, "a state", Phase::kHealthy);
    d.duration_s = f.num_or("duration_s", -1);
    d.reason = f.str_or("reason", "");
    return d;
  });
}

json to_json(const LocalisationReport& l) {
  json slow = json::array();
  for (const auto& [g, r] : l.slow_groups) slow.push_back({{"group", group_id_hex(g)}, {"ratio", r}});
  json links = json::array();
  for (const auto& k : l.suspect_links) links.push_back({{"nodes", {k.node_a, k.node_b}}, {"ratio", k.ratio}});
  json j = {{"cause", name(l.cause)},         {"culprit", l.culprit},         {"culprit_node", l.culprit_node},
            {"kind", l.kind},           {"severity", l.severity},       {"score", l.score},
            {"group", group_id_hex(l.group)}, {"slow_groups", slow},     {"suspect_links", links},
            {"ranks_profiled", l.ranks_profiled}, {"ranks_expected", l.ranks_expected}};
  if (l.dp_transfer_ms > 0) j["dp_transfer_ms"] = l.dp_transfer_ms;
  if (l.pp_transfer_ms > 0) j["pp_transfer_ms"] = l.pp_transfer_ms;
  if (!l.replica_ms_per_microbatch.empty()) {
    j["replica_ms_per_microbatch"] = l.replica_ms_per_microbatch;
    j["culprit_replica"] = l.culprit_replica;
    j["replica_skew"] = l.replica_skew;
  }
  if (l.pace_spread > 1.0) j["pace_spread"] = l.pace_spread;
  if (l.iter_ms > 0) j["iter_ms"] = l.iter_ms;
  if (!l.request.empty()) j["request"] = l.request;
  return j;
}

std::optional<LocalisationReport> parse_localisation_report(const json& detail, std::string* error) {
  return build_from<LocalisationReport>(detail, error, [](const Fields& f, const json& j) {
    LocalisationReport l;
    l.cause = f.word("cause", parse_cause, "computation, communication, host or unknown");
    l.culprit = static_cast<int>(f.integer_or("culprit", -1, -1, kMaxRank));
    l.culprit_node = static_cast<int>(f.integer_or("culprit_node", -1, -1, kMaxRank));
    l.kind = f.str_or("kind", "NONE");
    l.severity = f.str_or("severity", "none");
    l.score = f.num_or("score", 0);
    l.group = f.has("group") ? group_id_of(f.str("group", 32), "group") : 0;
    if (f.has("slow_groups")) {
      const json& a = j.at("slow_groups");
      if (!a.is_array()) throw Invalid("slow_groups: must be an array");
      for (const auto& x : a) {
        const Fields g(x);
        l.slow_groups.emplace_back(group_id_of(g.str("group", 32), "slow_groups"), g.num("ratio"));
      }
    }
    if (f.has("suspect_links")) {
      const json& a = j.at("suspect_links");
      if (!a.is_array()) throw Invalid("suspect_links: must be an array");
      for (const auto& x : a) {
        const Fields k(x);
        const std::vector<int> nodes = k.ints_or_empty("nodes");
        if (nodes.size() != 2) throw Invalid("suspect_links: nodes must be two node ids");
        l.suspect_links.push_back({nodes[0], nodes[1], k.num("ratio")});
      }
    }
    l.dp_transfer_ms = f.num_or("dp_transfer_ms", 0);
    l.pp_transfer_ms = f.num_or("pp_transfer_ms", 0);
    l.ranks_profiled = static_cast<int>(f.integer_or("ranks_profiled", 0, 0, kMaxRank));
    l.ranks_expected = static_cast<int>(f.integer_or("ranks_expected", 0, 0, kMaxRank));
    l.replica_ms_per_microbatch = doubles_or_empty(j, "replica_ms_per_microbatch");
    l.culprit_replica = static_cast<int>(f.integer_or("culprit_replica", -1, -1, kMaxRank));
    l.replica_skew = f.num_or("replica_skew", 1.0);
    l.pace_spread = f.num_or("pace_spread", 1.0);
    if (!(l.pace_spread >= 1.0)) throw Invalid("pace_spread: must be at least 1");
    l.iter_ms = f.num_or("iter_ms", 0);
    if (!(l.iter_ms >= 0)) throw Invalid("iter_ms: must be at least 0");
    l.request = f.str_or("request", "");
    return l;
  });
}

json to_json(const BaselineReport& b) {
  return {{"request", b.request}, {"ranks_profiled", b.ranks_profiled}, {"groups", b.groups}, {"iter_ms", b.iter_ms}};
}

std::optional<BaselineReport> parse_baseline_report(const json& detail, std::string* error) {
  return build_from<BaselineReport>(detail, error, [](const Fields& f, const json&) {
    BaselineReport b;
    b.request = f.str_or("request", "");
    b.ranks_profiled = static_cast<int>(f.integer_or("ranks_profiled", 0, 0, kMaxRank));
    b.groups = static_cast<int>(f.integer_or("groups", 0, 0, kMaxRank));
    b.iter_ms = f.num_or("iter_ms", 0);
    return b;
  });
}

json to_json(const PlanOutcome& o) {
  return {{"epoch", o.epoch},     {"strategy", name(o.strategy)}, {"action", name(o.action)},
          {"applied", o.applied}, {"unsupported", o.unsupported}, {"rejected", o.rejected},
          {"ranks", o.ranks},     {"from_iteration", o.from_iteration}, {"apply_s", o.apply_s}};
}

std::optional<PlanOutcome> parse_plan_outcome(const json& detail, std::string* error) {
  return build_from<PlanOutcome>(detail, error, [](const Fields& f, const json&) {
    PlanOutcome o;
    o.epoch = f.integer("epoch", 1, kMaxCount);
    o.strategy = f.word("strategy", parse_strategy, "S1, S2, S3 or S4");
    o.action = f.word_or("action", parse_plan_action, "apply or revert", PlanAction::kApply);
    o.applied = static_cast<int>(f.integer_or("applied", 0, 0, kMaxRank));
    o.unsupported = static_cast<int>(f.integer_or("unsupported", 0, 0, kMaxRank));
    o.rejected = static_cast<int>(f.integer_or("rejected", 0, 0, kMaxRank));
    o.ranks = static_cast<int>(f.integer_or("ranks", 0, 0, kMaxRank));
    o.from_iteration = f.integer_or("from_iteration", -1, -1, kMaxCount);
    o.apply_s = f.num_or("apply_s", 0);
    if (!(o.apply_s >= 0)) throw Invalid("apply_s: must be >= 0");
    return o;
  });
}

json to_json(const RestartRequest& r) {
  return {{"rank", r.rank},
          {"epoch", r.epoch},
          {"reason", r.reason},
          {"exclude_nodes", r.exclude_nodes},
          {"exclude_ranks", r.exclude_ranks},
          {"placement", placement_json(r.placement)},
          {"t_unix_ms", r.t_unix_ms}};
}

nlohmann::json to_json(const NcclRingDump& d) {
  nlohmann::json j = {
      {"group_rank", d.group_rank}, {"segment", d.segment}, {"crosses_nodes", d.crosses_nodes}, {"channels", d.channels}};
  if (d.tree) {
    j["tree"] = {{"pattern", std::string(validate::nccl_tree_pattern_name(d.tree->pattern))},
                 {"segment", d.tree->segment},
                 {"crosses_nodes", d.tree->crosses_nodes}};
  }
  return j;
}

// A group's nccl_ring field: {"group_rank":R,"segment":[R,...],"crosses_nodes":B,"channels":N}, the segment's
// ranks distinct and below kMaxRank, R among them.
Result<NcclRingDump> parse_nccl_ring_dump(const std::string& v) {
  using R = Result<NcclRingDump>;
  const auto j = parse_bounded(v);
  if (!j || !j->is_object()) return R::failure("not a JSON object");
  NcclRingDump d;
  const auto gr = j->find("group_rank");
  const auto seg = j->find("segment");
  const auto crosses = j->find("crosses_nodes");
  const auto channels = j->find("channels");
  if (gr == j->end() || !gr->is_number_integer() || gr->get<long long>() < 0 || gr->get<long long>() >= kMaxRank) {
    return R::failure("group_rank: not a rank");
  }
  d.group_rank = static_cast<int>(gr->get<long long>());
  if (seg == j->end() || !seg->is_array() || seg->empty() || seg->size() > 4096) {
    return R::failure("segment: not a list of 1 to 4096 ranks");
  }
  std::set<int> seen;
  for (const auto& r : *seg) {
    if (!r.is_number_integer() || r.get<long long>() < 0 || r.get<long long>() >= kMaxRank ||
        !seen.insert(static_cast<int>(r.get<long long>())).second) {
      return R::failure("segment: not distinct ranks");
    }
    d.segment.push_back(static_cast<int>(r.get<long long>()));
  }
  if (!seen.count(d.group_rank)) return R::failure("segment: does not hold group_rank");
  if (crosses == j->end() || !crosses->is_boolean()) return R::failure("crosses_nodes: not true or false");
  d.crosses_nodes = crosses->get<bool>();
  if (channels == j->end() || !channels->is_number_integer() || channels->get<long long>() < 1 ||
      channels->get<long long>() > 1024) {
    return R::failure("channels: not 1 to 1024");
  }
  d.channels = static_cast<int>(channels->get<long long>());
  const auto tree = j->find("tree");
  if (tree == j->end()) return d;
  if (!tree->is_object()) return R::failure("tree: not a JSON object");
  NcclTreeChain t;
  const auto pattern = tree->find("pattern");
  const auto tseg = tree->find("segment");
  const auto tcrosses = tree->find("crosses_nodes");
  const auto p = pattern != tree->end() && pattern->is_string()
                     ? validate::parse_nccl_tree_pattern(pattern->get<std::string>())
                     : std::nullopt;
  if (!p) return R::failure("tree.pattern: not \"balanced\", \"split\" or \"tree\"");
  t.pattern = *p;
  if (tseg == tree->end() || !tseg->is_array() || tseg->size() != d.segment.size()) {
    return R::failure("tree.segment: not a list of the ring segment's ranks");
  }
  std::set<int> chain;
  for (const auto& r : *tseg) {
    const long long x = r.is_number_integer() ? r.get<long long>() : -1;  // a huge unsigned one reads negative
    if (x < 0 || x >= kMaxRank || !seen.count(static_cast<int>(x)) || !chain.insert(static_cast<int>(x)).second) {
      return R::failure("tree.segment: not the ring segment's ranks");
    }
    t.segment.push_back(static_cast<int>(x));
  }
  if (tcrosses == tree->end() || !tcrosses->is_boolean()) return R::failure("tree.crosses_nodes: not true or false");
  t.crosses_nodes = tcrosses->get<bool>();
  d.tree = std::move(t);
  return d;
}

std::optional<RestartRequest> parse_restart_request(const std::string& text, std::string* error) {
  return parse_with<RestartRequest>(text, error, [](const Fields& f, const json& j) {
    RestartRequest r;
    r.rank = static_cast<int>(f.integer("rank", 0, kMaxRank));
    r.epoch = f.integer_or("epoch", 0, 0, kMaxCount);
    r.reason = f.str_or("reason", "");
    r.exclude_nodes = f.ints_or_empty("exclude_nodes");
    r.exclude_ranks = f.ints_or_empty("exclude_ranks");
    if (f.has("placement")) r.placement = placement_entries(j.at("placement"));
    for (int x : r.exclude_nodes) {
      if (x < 0) throw Invalid("exclude_nodes: entries must be >= 0");
    }
    for (int x : r.exclude_ranks) {
      if (x < 0) throw Invalid("exclude_ranks: entries must be >= 0");
    }
    r.t_unix_ms = f.integer_or("t_unix_ms", 0, 0, kMaxCount);
    return r;
  });
}

json to_json(const FailSlowDetail& d) {
  json j = to_json(d.fail_slow);
  if (!d.reason.empty()) j["reason"] = d.reason;
  return j;
}

std::optional<FailSlowDetail> parse_fail_slow_detail(const json& detail, std::string* error) {
  auto f = fail_slow_from_json(detail, error);
  if (!f) return std::nullopt;
  FailSlowDetail d;
  d.fail_slow = std::move(*f);
  if (detail.contains("reason") && detail.at("reason").is_string()) d.reason = detail.at("reason").get<std::string>();
  return d;
}

json to_json(const RemedyCheck& c) {
  return {{"epoch", c.epoch},           {"strategy", name(c.strategy)},     {"fail_slows", c.fail_slows},
          {"before_ms", c.before_ms},   {"predicted_ms", c.predicted_ms},   {"measured_ms", c.measured_ms},
          {"iterations", c.iterations}, {"pays", c.pays},                   {"reason", c.reason}};
}

std::optional<RemedyCheck> parse_remedy_check(const json& detail, std::string* error) {
  return build_from<RemedyCheck>(detail, error, [](const Fields& f, const json& j) {
    RemedyCheck c;
    c.epoch = f.integer("epoch", 1, kMaxCount);
    c.strategy = f.word("strategy", parse_strategy, "S1, S2, S3 or S4");
    if (f.has("fail_slows")) {
      const json& a = j.at("fail_slows");
      if (!a.is_array() || a.size() > kMaxOpenFailSlows) throw Invalid("fail_slows: must be an array of ids");
      for (const json& x : a) {
        if (!x.is_number_integer() || x.get<std::int64_t>() < 1) throw Invalid("fail_slows: must be an array of ids");
        c.fail_slows.push_back(x.get<std::int64_t>());
      }
    }
    c.before_ms = f.num_or("before_ms", 0);
    c.predicted_ms = f.num_or("predicted_ms", 0);
    c.measured_ms = f.num_or("measured_ms", 0);
    c.iterations = static_cast<int>(f.integer_or("iterations", 0, 0, 1 << 20));
    if (!f.has("pays") || !f.raw("pays").is_boolean()) throw Invalid("pays: must be a boolean");
    c.pays = f.raw("pays").get<bool>();
    c.reason = f.str_or("reason", "");
    return c;
  });
}

json to_json(const JobRestart& r) {
  return {{"epoch", r.epoch}, {"strategy", std::string(name(r.strategy))}, {"world_before", r.world_before}, {"dp_before", r.dp_before},
          {"world", r.world},  {"dp", r.dp},                     {"microbatches", r.microbatches}};
}

std::optional<JobRestart> parse_job_restart(const json& detail, std::string* error) {
  return build_from<JobRestart>(detail, error, [](const Fields& f, const json& j) {
    JobRestart r;
    r.epoch = f.integer("epoch", 0, kMaxCount);
    r.strategy = f.word_or("strategy", parse_strategy, "S3 or S4", Strategy::kS4);
    if (r.strategy != Strategy::kS3 && r.strategy != Strategy::kS4) throw Invalid("strategy: must be S3 or S4");
    r.world_before = static_cast<int>(f.integer("world_before", 1, kMaxRank));
    r.dp_before = static_cast<int>(f.integer("dp_before", 1, kMaxRank));
    r.world = static_cast<int>(f.integer("world", 1, kMaxRank));
    r.dp = static_cast<int>(f.integer("dp", 1, kMaxRank));
    if (f.has("microbatches")) {
      const json& a = j.at("microbatches");
      if (!a.is_array() || a.size() > static_cast<std::size_t>(kMaxRank)) throw Invalid("microbatches: must be an array");
      for (const json& x : a) {
        if (!x.is_number_integer() || x.get<std::int64_t>() < 1 || x.get<std::int64_t>() > (1 << 20)) {
          throw Invalid("microbatches: must be an array of counts >= 1");
        }
        r.microbatches.push_back(x.get<int>());
      }
    }
    return r;
  });
}

namespace store {

void upsert_incident(std::vector<Incident>& snapshots, Incident snapshot) {
  for (Incident& i : snapshots) {
    if (i.id == snapshot.id) {
      i = std::move(snapshot);
      return;
    }
  }
  snapshots.push_back(std::move(snapshot));
}

}  // namespace store

}  // namespace greyhound
