#include "common/redis_client.h"

#include "common/text.h"
#include "greyhound/config.h"

#include <hiredis/hiredis.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>

namespace greyhound {
namespace {

timeval to_timeval(std::chrono::milliseconds ms) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(ms.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((ms.count() % 1000) * 1000);
  return tv;
}

RedisReply convert(const redisReply* r) {
  RedisReply out;
  switch (r->type) {
    case REDIS_REPLY_STRING:
      out.type = RedisReply::Type::kString;
      out.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_STATUS:
      out.type = RedisReply::Type::kStatus;
      out.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_ERROR:
      out.type = RedisReply::Type::kError;
      out.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_INTEGER:
      out.type = RedisReply::Type::kInteger;
      out.integer = r->integer;
      break;
    case REDIS_REPLY_ARRAY:
      out.type = RedisReply::Type::kArray;
      for (std::size_t i = 0; i < r->elements; ++i) out.elements.push_back(convert(r->element[i]));
      break;
    default:
      out.type = RedisReply::Type::kNil;
      break;
  }
  return out;
}

int parse_int(const std::string& s, int lo, int hi, const std::string& what) {
  const auto v = parse_integer(s);
  if (!v || *v < lo || *v > hi) {
    throw std::invalid_argument("Redis URL: " + what + " '" + s + "' is not an integer in [" + std::to_string(lo) +
                                ", " + std::to_string(hi) + "]");
  }
  return static_cast<int>(*v);
}

}  // namespace

std::string RedisEndpoint::describe() const {
  return (unix_path.empty() ? host + ":" + std::to_string(port) : "unix:" + unix_path) + "/" + std::to_string(db);
}

std::string RedisEndpoint::url_without_password() const {
  if (!unix_path.empty()) return "unix://" + unix_path + "?db=" + std::to_string(db);
  return "redis://" + (user.empty() ? std::string() : user + ":@") + host + ":" + std::to_string(port) + "/" +
         std::to_string(db);
}

namespace {

// [begin, end) of the credentials (everything before the URL's last '@', as parse_redis_url reads it: a
// password may hold '/') of the redis:// URL starting at `at` in `text`; begin == end when there are none.
std::pair<std::size_t, std::size_t> credentials_at(std::string_view text, std::size_t at, bool whole = false) {
  const std::size_t begin = at + 8;  // after "redis://"
  // A URL inside a message ends at a blank; a command-line argument is the URL whole (a password may hold one).
  std::size_t end = whole ? std::string_view::npos : text.find(' ', begin);
  if (end == std::string_view::npos) end = text.size();
  const std::size_t last_at = text.substr(0, end).rfind('@');
  if (last_at == std::string_view::npos || last_at < begin) return {begin, begin};
  return {begin, last_at};
}

}  // namespace

std::string redact_redis_url(std::string_view text) {
  std::string out(text);
  for (std::size_t at = out.find("redis://"); at != std::string::npos; at = out.find("redis://", at + 8)) {
    const auto [b, e] = credentials_at(out, at);
    if (b != e) out.replace(b, e - b, "***");
  }
  return out;
}

bool hide_redis_passwords(int argc, char** argv, const char* program) {
  // Two passes: the warning is on stderr before any argument changes, so whoever sees the hidden command line
  // (a test reading /proc/PID/cmdline, then stopping the process) finds the warning already written.
  const auto each_password = [&](auto&& on_password) {
    bool found = false;
    for (int i = 1; i < argc; ++i) {
      const std::string_view arg(argv[i]);
      for (std::size_t at = arg.find("redis://"); at != std::string_view::npos; at = arg.find("redis://", at + 8)) {
        const auto [b, e] = credentials_at(arg, at, true);
        if (b == e) continue;
        found = true;
        on_password(argv[i], b, e);
      }
    }
    return found;
  };
  const bool found = each_password([](char*, std::size_t, std::size_t) {});
  if (found && program != nullptr) {
    std::fprintf(stderr,
                 "%s: a Redis password on the command line can be read by other users of this machine until the "
                 "process starts; give it in a file named by GREYHOUND_REDIS_PASSWORD_FILE instead\n",
                 program);
  }
  each_password([](char* arg, std::size_t b, std::size_t e) {
    for (std::size_t k = b; k < e; ++k) arg[k] = '*';
  });
  return found;
}

namespace {

// A control byte (or, with `blank`, a blank) in a part of a URL: no host, user or socket path holds one, and
// the URL written back (url_without_password) would not read the same.
bool holds_control(std::string_view s, bool blank) {
  return std::any_of(s.begin(), s.end(), [blank](char c) {
    const auto u = static_cast<unsigned char>(c);
    return u < 0x20 || u == 0x7f || (blank && u == ' ');
  });
}

// The redis:// URL `text` (one URL, whole: a password may hold a blank) with its credentials as "***".
std::string redact_whole_url(const std::string& text) {
  const auto [b, e] = credentials_at(text, 0, true);
  return b == e ? text : text.substr(0, b) + "***" + text.substr(e);
}

std::string socket_path(std::string path) {
  if (holds_control(path, false)) throw std::invalid_argument("Redis URL: the socket path holds a control byte");
  return path;
}

}  // namespace

RedisEndpoint parse_redis_url(const std::string& text) {
  RedisEndpoint e;
  if (text.empty()) return e;
  if (text[0] == '/') {
    if (text.find("?db=") != std::string::npos) {
      throw std::invalid_argument("Redis URL: a socket path with a database is written unix:///path?db=N");
    }
    e.unix_path = socket_path(text);
    return e;
  }
  if (text.rfind("unix://", 0) == 0) {
    std::string rest = text.substr(7);
    // The last "?db=": the one url_without_password appends.
    if (const auto q = rest.rfind("?db="); q != std::string::npos) {
      e.db = parse_int(rest.substr(q + 4), 0, 1 << 16, "database");
      rest = rest.substr(0, q);
    }
    if (rest.empty() || rest[0] != '/') throw std::invalid_argument("Redis URL: unix:// needs an absolute path");
    e.unix_path = socket_path(rest);
    return e;
  }
  if (text.rfind("redis://", 0) != 0) {
    // Not a URL: whatever comes before an '@' may still be a password.
    const std::size_t at = text.rfind('@');
    const std::string shown = at == std::string::npos ? text : "***" + text.substr(at);
    throw std::invalid_argument("Redis URL '" + printable(shown, 128) +
                                "': expected redis://[:password@]host:port/db or a unix path");
  }
  std::string rest = text.substr(8);
  if (const auto at = rest.rfind('@'); at != std::string::npos) {
    const std::string cred = rest.substr(0, at);
    rest = rest.substr(at + 1);
    if (const auto colon = cred.find(':'); colon != std::string::npos) {
      e.user = cred.substr(0, colon);
      e.password = cred.substr(colon + 1);
    } else {
      e.password = cred;
    }
  }
  if (const auto slash = rest.find('/'); slash != std::string::npos) {
    const std::string db = rest.substr(slash + 1);
    if (!db.empty()) e.db = parse_int(db, 0, 1 << 16, "database");
    rest = rest.substr(0, slash);
  }
  if (const auto colon = rest.rfind(':'); colon != std::string::npos) {
    e.port = parse_int(rest.substr(colon + 1), 1, 65535, "port");
    rest = rest.substr(0, colon);
  }
  if (rest.empty()) throw std::invalid_argument("Redis URL '" + printable(redact_whole_url(text), 128) + "': missing host");
  if (holds_control(rest, true) || holds_control(e.user, true)) {
    throw std::invalid_argument("Redis URL '" + printable(redact_whole_url(text), 128) +
                                "': a blank or a control byte in the host or the user");
  }
  e.host = rest;
  return e;
}

RedisEndpoint redis_endpoint_from_env(const std::string& url) {
  const EnvConfig env = read_env_config();
  RedisEndpoint e = parse_redis_url(url.empty() ? env.redis : url);
  const std::string& file = env.redis_password_file;
  if (e.password.empty() && !file.empty()) {
    std::ifstream in(file);
    if (!in) throw std::invalid_argument("GREYHOUND_REDIS_PASSWORD_FILE: cannot read " + file);
    std::getline(in, e.password);
    while (!e.password.empty() && (e.password.back() == '\r' || e.password.back() == ' ')) e.password.pop_back();
  }
  return e;
}

RedisClient::RedisClient(Options options) : options_(std::move(options)) {}

RedisClient::~RedisClient() { disconnect(); }

void RedisClient::disconnect() {
  if (ctx_ != nullptr) {
    redisFree(ctx_);
    ctx_ = nullptr;
  }
}

void RedisClient::fail(const std::string& why) {
  last_error_ = why;
  disconnect();
  // Exponential backoff with jitter: many agents must not reconnect in lockstep.
  backoff_ = backoff_.count() == 0 ? options_.backoff_min : std::min(options_.backoff_max, backoff_ * 2);
  static thread_local std::minstd_rand jitter(std::random_device{}());
  const auto j = std::chrono::milliseconds(jitter() % (backoff_.count() / 4 + 1));
  next_attempt_ = std::chrono::steady_clock::now() + backoff_ + j;
}

bool RedisClient::ensure_connected() {
  if (ctx_ != nullptr) return true;
  if (std::chrono::steady_clock::now() < next_attempt_) return false;
  return connect_now();
}

bool RedisClient::connect_now() {
  const RedisEndpoint& e = options_.endpoint;
  const timeval ctv = to_timeval(options_.connect_timeout);
  redisContext* c = e.unix_path.empty() ? redisConnectWithTimeout(e.host.c_str(), e.port, ctv)
                                        : redisConnectUnixWithTimeout(e.unix_path.c_str(), ctv);
  if (c == nullptr || c->err != 0) {
    const std::string why = c != nullptr ? c->errstr : "out of memory";
    if (c != nullptr) redisFree(c);
    fail("cannot connect to Redis at " + e.describe() + ": " + why);
    return false;
  }
  if (redisSetTimeout(c, to_timeval(options_.command_timeout)) != REDIS_OK) {
    redisFree(c);
    fail("cannot set the Redis command timeout");
    return false;
  }
  ctx_ = c;
  if (!e.password.empty()) {
    auto r = e.user.empty() ? command({"AUTH", e.password}) : command({"AUTH", e.user, e.password});
    if (!r) return false;
    if (r->is_error()) {
      fail("Redis AUTH failed: " + r->str);
      return false;
    }
  }
  if (e.password.empty()) {  // a Redis that wants a password answers every command NOAUTH: say so now
    auto r = command({"PING"});
    if (!r) return false;
    if (r->is_error()) {
      fail("Redis at " + e.describe() + " refused: " + r->str +
           (r->str.rfind("NOAUTH", 0) == 0 ? " (its password goes in GREYHOUND_REDIS_PASSWORD_FILE)" : ""));
      return false;
    }
  }
  if (e.db != 0) {
    auto r = command({"SELECT", std::to_string(e.db)});
    if (!r) return false;
    if (r->is_error()) {
      fail("Redis SELECT " + std::to_string(e.db) + " failed: " + r->str);
      return false;
    }
  }
  if (ever_connected_) ++reconnects_;
  ever_connected_ = true;
  backoff_ = std::chrono::milliseconds(0);
  return true;
}

std::optional<RedisReply> RedisClient::command(const std::vector<std::string>& argv) {
  auto r = pipeline({argv});
  if (!r) return std::nullopt;
  return std::move(r->front());
}

std::optional<std::vector<RedisReply>> RedisClient::pipeline(const std::vector<std::vector<std::string>>& commands) {
  if (!ensure_connected()) return std::nullopt;
  for (const auto& argv : commands) {
    std::vector<const char*> ptrs;
    std::vector<std::size_t> lens;
    for (const auto& a : argv) {
      ptrs.push_back(a.data());
      lens.push_back(a.size());
    }
    if (redisAppendCommandArgv(ctx_, static_cast<int>(argv.size()), ptrs.data(), lens.data()) != REDIS_OK) {
      fail(std::string("Redis: cannot queue a command: ") + ctx_->errstr);
      return std::nullopt;
    }
  }
  std::vector<RedisReply> out;
  for (std::size_t i = 0; i < commands.size(); ++i) {
    void* raw = nullptr;
    if (redisGetReply(ctx_, &raw) != REDIS_OK || raw == nullptr) {
      fail(std::string("Redis connection to ") + options_.endpoint.describe() + " lost: " +
           (ctx_ != nullptr && ctx_->errstr[0] != '\0' ? ctx_->errstr : "no reply"));
      return std::nullopt;
    }
    out.push_back(convert(static_cast<redisReply*>(raw)));
    freeReplyObject(raw);
  }
  return out;
}

}  // namespace greyhound
