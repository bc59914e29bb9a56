// The master's HTTP endpoint (Boost.Beast on the master's own Asio loop, one thread): GET requests in, the
// handler's answer out, one request per connection. Nothing a client does can hold the loop or the endpoint:
// every read and write is asynchronous and bounded in time (a whole request must arrive within
// request_timeout_s: a slow or silent client, slowloris, is cut off), a request larger than the limits is
// answered 431/413 and closed, and connections are limited in total and per client address. A connection
// beyond a limit makes room by closing the oldest connection (of that address, when its limit is the one
// reached) still waiting for its request; only when none is waiting is the new one closed. So clients that
// hold connections open without asking anything cannot keep a prober (/healthz) out. The handler runs on the
// loop and must itself be quick (the master's handlers read a few Redis keys).
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include <utility>  // before Boost.Asio 1.74, whose awaitable.hpp forgets it under C++20

#include <boost/asio/io_context.hpp>

#include "greyhound/result.h"

namespace greyhound::master {

struct HttpRequest {
  std::string method;  // "GET", ...
  std::string path;    // "/metrics" (no query)
  std::string query;   // "job=J" (after '?', undecoded); "" when none
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

using HttpHandler = std::function<HttpResponse(const HttpRequest&)>;

struct HttpLimits {
  std::size_t header_bytes = 8 * 1024;  // the request line and headers
  std::size_t body_bytes = 8 * 1024;    // a GET carries none; more is refused
  double request_timeout_s = 2;         // to read a whole request, from the connection's accept
  double timeout_s = 10;                // to write the answer
  int max_connections = 64;             // open at once
  int max_per_address = 16;             // open at once from one client address
};

// "ADDR:PORT" (IPv4 or [IPv6]), or ":PORT" / "PORT" for 127.0.0.1; nullopt with *error when not one.
struct HttpAddress {
  std::string host = "127.0.0.1";
  unsigned short port = 0;
};
Result<HttpAddress> parse_http_address(const std::string& text);

class HttpServer {
 public:
  // Listens on `address` (port 0: one the kernel picks, see port()); kUnavailable when it cannot bind.
  static Result<std::shared_ptr<HttpServer>> start(boost::asio::io_context& io, const HttpAddress& address,
                                                   HttpHandler handler, HttpLimits limits = {});
  virtual ~HttpServer() = default;
  virtual unsigned short port() const = 0;
  virtual void stop() = 0;  // stops accepting; connections in progress finish
};

// A query parameter's value ("" when absent), percent-decoded.
std::string query_value(const std::string& query, const std::string& key);

}  // namespace greyhound::master
