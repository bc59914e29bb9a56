#include "sim/redis_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "common/redis_client.h"

namespace greyhound::sim {

int pick_free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  int port = -1;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  close(fd);
  return port;
}

std::unique_ptr<RedisServer> RedisServer::start(const Options& options, std::string* error) {
  std::unique_ptr<RedisServer> s(new RedisServer());
  s->options_ = options;
  for (int attempt = 0; attempt < 5; ++attempt) {
    if (options.port == 0) s->options_.port = pick_free_port();
    if (s->launch(error)) return s;
    if (options.port != 0) break;  // a fixed port: no point in retrying another
  }
  return nullptr;
}

RedisServer::~RedisServer() { stop(); }

std::string RedisServer::url() const {
  return "redis://" + (options_.password.empty() ? std::string() : ":" + options_.password + "@") + "127.0.0.1:" +
         std::to_string(options_.port) + "/0";
}

bool RedisServer::launch(std::string* error) {
  const std::string port = std::to_string(options_.port);
  std::vector<std::string> args = {options_.binary,  "--port",          port,         "--bind",
                                   "127.0.0.1",      "--dir",           options_.dir, "--save",
                                   "",               "--appendonly",    "yes",        "--appendfsync",
                                   options_.appendfsync,         "--daemonize",     "no",         "--logfile",
                                   options_.dir + "/redis.log", "--protected-mode", "yes"};
  if (!options_.password.empty()) {
    args.push_back("--requirepass");
    args.push_back(options_.password);
  }
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) {
    if (error) *error = std::string("fork: ") + std::strerror(errno);
    return false;
  }
  if (pid == 0) {
    setpgid(0, 0);  // Ctrl-C in the terminal reaches our launcher, which stops Redis itself
    execvp(argv[0], argv.data());
    _exit(127);
  }
  pid_ = pid;
  RedisClient::Options o;
  o.endpoint = parse_redis_url(url());
  o.connect_timeout = std::chrono::milliseconds(200);
  o.backoff_min = std::chrono::milliseconds(0);
  o.backoff_max = std::chrono::milliseconds(0);
  RedisClient c(o);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      if (error) {
        *error = "redis-server exited at start (port " + port + " taken, or redis-server missing: run scripts/deps); see " +
                 options_.dir + "/redis.log";
      }
      return false;
    }
    if (c.connected() || c.ensure_connected()) {
      auto r = c.command({"PING"});
      if (r && !r->is_error()) return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (error) *error = "redis-server did not answer PING within 10 s on port " + port;
  kill_hard();
  return false;
}

void RedisServer::stop() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  kill_hard();
}

void RedisServer::kill_hard() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
}

bool RedisServer::restart(std::string* error) {
  if (pid_ > 0) return true;
  return launch(error);
}

}  // namespace greyhound::sim
