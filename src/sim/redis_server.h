// A private redis-server for tests and the simulated cluster (a test fixture, not part of the product): on 127.0.0.1 and a free port, in its own
// directory (append-only file with fsync on every write, so an acknowledged write survives kill -9 and a
// restart from the same directory), stopped with the object. Never touches a system Redis.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>

namespace greyhound::sim {

class RedisServer {
 public:
  struct Options {
    std::string dir;                    // required: data and log live here (the caller removes it)
    int port = 0;                       // 0: pick a free one
    std::string password;               // non-empty: requirepass
    std::string binary = "redis-server";
    // "always" (the default: an acknowledged write survives kill -9), "everysec" (what a production Redis
    // usually runs: at most a second lost on a crash; the load bench) or "no".
    std::string appendfsync = "always";
  };

  // Starts the server and waits (up to 10 s) until it answers PING. nullptr and *error on failure.
  static std::unique_ptr<RedisServer> start(const Options& options, std::string* error);
  ~RedisServer();
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  void stop();                             // SIGTERM and wait
  void kill_hard();                        // SIGKILL, as a crash would
  bool restart(std::string* error);        // start again on the same port and directory
  bool running() const { return pid_ > 0; }
  int port() const { return options_.port; }
  pid_t pid() const { return pid_; }
  std::string url() const;                 // redis://[:password@]127.0.0.1:<port>/0

 private:
  RedisServer() = default;
  bool launch(std::string* error);
  Options options_;
  pid_t pid_ = -1;
};

// A TCP port on 127.0.0.1 that was free a moment ago (bind to port 0 and read it back).
int pick_free_port();

}  // namespace greyhound::sim
