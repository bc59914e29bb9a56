// The master's HTTP endpoint (Boost.Beast on the master's own Asio loop, one thread): GET requests in, the
// handler's answer out, one request per connection. Nothing a client does can hold the loop: every read and
// write is asynchronous and bounded in time (a slow or silent client is cut off), a request larger than the
// limits is answered 431/413 and closed, and connections beyond the limit are closed at once. The handler
// runs on the loop and must itself be quick (the master's handlers read a few Redis keys).
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
  double timeout_s = 10;                // to read a request, and to write the answer
  int max_connections = 64;             // open at once; more are closed on accept
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
