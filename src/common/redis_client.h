// The one Redis client of greyhound (agent, master, greyhoundctl, simcluster), over hiredis' synchronous API.
//
// - Every connect and every command has a timeout; a dead or absent server costs at most that.
// - After a failure the client is disconnected and reconnects on a later call, with exponential backoff
//   (so a missing Redis is not hammered and callers never sleep).
// - AUTH with the URL's password (or GREYHOUND_REDIS_PASSWORD_FILE), SELECT of the URL's database.
// - Errors are returned (status + message), never thrown; server error replies are replies of type kError.
// Not thread-safe: one client per thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

struct redisContext;

namespace greyhound {

struct RedisEndpoint {
  std::string host = "127.0.0.1";
  int port = 6379;
  std::string unix_path;  // set: connect to this socket instead of host:port
  std::string user;       // Redis 6 ACL user (optional)
  std::string password;   // empty: no AUTH
  int db = 0;
  std::string describe() const;  // "127.0.0.1:6379/0" or "unix:/path/0", never the password
  // The endpoint as a URL parse_redis_url reads back, without the password (the ACL user is kept as
  // "user:@"): what a launcher passes to the processes it starts, beside GREYHOUND_REDIS_PASSWORD_FILE.
  std::string url_without_password() const;
};

// `text` (a Redis URL, or any argument holding one) with the credentials of every redis:// URL in it
// replaced by "***": for messages, logs and banners.
std::string redact_redis_url(std::string_view text);

// Overwrites, in place, the credentials of every redis:// URL in argv[1..argc) with '*', so that a password
// given on a command line no longer shows in /proc/PID/cmdline or ps (it did until this call: the daemons
// warn and name GREYHOUND_REDIS_PASSWORD_FILE). Call once the arguments have been copied. True when one
// was found; with `program`, that is also said on stderr.
bool hide_redis_passwords(int argc, char** argv, const char* program = nullptr);

// redis://[[user]:password@]host[:port][/db], unix:///path[?db=N], or an absolute socket path.
// Empty text gives the default endpoint. Throws std::invalid_argument with a message naming the problem.
RedisEndpoint parse_redis_url(const std::string& text);

// `url` (a --redis flag), or GREYHOUND_REDIS when it is empty (default redis://127.0.0.1:6379/0), plus
// GREYHOUND_REDIS_PASSWORD_FILE when the URL has no password (so that a password never needs to be on a
// command line). Throws std::invalid_argument on a bad URL or an unreadable password file.
RedisEndpoint redis_endpoint_from_env(const std::string& url = "");

struct RedisReply {
  enum class Type { kString, kArray, kInteger, kNil, kStatus, kError };
  Type type = Type::kNil;
  std::string str;  // kString, kStatus, kError
  long long integer = 0;
  std::vector<RedisReply> elements;  // kArray

  bool is_error() const { return type == Type::kError; }
  bool is_nil() const { return type == Type::kNil; }
};

class RedisClient {
 public:
  struct Options {
    RedisEndpoint endpoint;
    std::chrono::milliseconds connect_timeout{500};
    std::chrono::milliseconds command_timeout{1000};
    std::chrono::milliseconds backoff_min{100};
    std::chrono::milliseconds backoff_max{5000};

    // What the daemons use (agent, master): a short connect timeout and reconnect attempts every 0.2..2 s,
    // so that a Redis restart is noticed within seconds; `command_timeout` is theirs to choose.
    static Options for_daemon(const RedisEndpoint& endpoint, std::chrono::milliseconds command_timeout) {
      Options o;
      o.endpoint = endpoint;
      o.connect_timeout = std::chrono::milliseconds(300);
      o.command_timeout = command_timeout;
      o.backoff_min = std::chrono::milliseconds(200);
      o.backoff_max = std::chrono::milliseconds(2000);
      return o;
    }
  };

  explicit RedisClient(Options options);
  ~RedisClient();
  RedisClient(const RedisClient&) = delete;
  RedisClient& operator=(const RedisClient&) = delete;

  // Connects if not connected and the backoff allows an attempt now. True when connected.
  bool ensure_connected();
  bool connected() const { return ctx_ != nullptr; }
  // The next ensure_connected() (or command) tries at once, whatever the backoff says: for a caller about to
  // give up (a client writing what waits before it closes).
  void retry_now() { next_attempt_ = {}; }
  void disconnect();

  // One command. nullopt on a connection problem (then disconnected; last_error() says why). A server
  // error reply is returned as a reply of type kError.
  std::optional<RedisReply> command(const std::vector<std::string>& argv);
  // Several commands in one round trip (e.g. MULTI ... EXEC). nullopt on a connection problem.
  std::optional<std::vector<RedisReply>> pipeline(const std::vector<std::vector<std::string>>& commands);

  const std::string& last_error() const { return last_error_; }
  const RedisEndpoint& endpoint() const { return options_.endpoint; }
  std::uint64_t reconnects() const { return reconnects_; }

 private:
  bool connect_now();
  void fail(const std::string& why);

  Options options_;
  redisContext* ctx_ = nullptr;
  std::string last_error_;
  std::chrono::steady_clock::time_point next_attempt_{};
  std::chrono::milliseconds backoff_{0};
  std::uint64_t reconnects_ = 0;
  bool ever_connected_ = false;
};

}  // namespace greyhound
