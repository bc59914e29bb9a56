#include "daemon/http_server.h"

#include <chrono>
#include <list>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <spdlog/spdlog.h>

namespace greyhound::master {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

const char* reason_phrase(int status) {
  switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 413: return "Payload Too Large";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    default: return "";
  }
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string percent_decoded(const std::string& s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      out += ' ';
    } else if (s[i] == '%' && i + 2 < s.size() && hex_digit(s[i + 1]) >= 0 && hex_digit(s[i + 2]) >= 0) {
      out += static_cast<char>(hex_digit(s[i + 1]) * 16 + hex_digit(s[i + 2]));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

class Server;

// One connection: read one request within the limits, answer it, close.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, std::string address, std::shared_ptr<Server> server);
  ~Session();
  void run();
  void close();
  const std::string& address() const { return address_; }

 private:
  void on_read(beast::error_code ec);
  void reply(const HttpResponse& r);

  beast::tcp_stream stream_;
  std::string address_;  // the client's (for the per-address limit)
  std::shared_ptr<Server> server_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  http::response<http::string_body> response_;
};

class Server : public HttpServer, public std::enable_shared_from_this<Server> {
 public:
  Server(asio::io_context& io, HttpHandler handler, HttpLimits limits)
      : acceptor_(io), retry_(io), handler_(std::move(handler)), limits_(limits) {}

  Status listen(const HttpAddress& a) {
    beast::error_code ec;
    const auto address = asio::ip::make_address(a.host, ec);
    if (ec) return Status::failure("--http: '" + a.host + "' is not an IP address");
    const tcp::endpoint ep(address, a.port);
    acceptor_.open(ep.protocol(), ec);
    if (!ec) acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) acceptor_.bind(ep, ec);
    if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) {
      return Status::failure("--http: cannot listen on " + a.host + ":" + std::to_string(a.port) + ": " + ec.message(),
                             Errc::kUnavailable);
    }
    port_ = acceptor_.local_endpoint().port();
    return ok_status();
  }
  void accept() {
    acceptor_.async_accept([self = shared_from_this()](beast::error_code ec, tcp::socket socket) {
      if (ec == asio::error::operation_aborted || !self->acceptor_.is_open()) return;
      if (ec) {
        // Out of descriptors (EMFILE), say: the pending connection keeps the listener readable, so accepting
        // again at once would spin. Try again a little later.
        self->retry_.expires_after(std::chrono::milliseconds(100));
        self->retry_.async_wait([self](beast::error_code e) {
          if (!e) self->accept();
        });
        return;
      }
      beast::error_code e;
      const auto peer = socket.remote_endpoint(e);
      std::string address = e ? std::string("?") : peer.address().to_string();
      const bool over_address = self->per_address_[address] >= self->limits_.max_per_address;
      if ((self->connections_ >= self->limits_.max_connections || over_address) &&
          !self->evict_waiting(over_address ? &address : nullptr)) {
        beast::error_code ignored;
        socket.close(ignored);  // over the limit, and every connection is being answered: no answer, no wait
      } else {
        auto session = std::make_shared<Session>(std::move(socket), std::move(address), self);
        self->waiting_.push_back(session);
        session->run();
      }
      self->accept();
    });
  }
  // Closes the oldest connection still waiting for its request (from `address` only, when given): true when
  // there was one. Its session goes once its read is cancelled; the new one may meanwhile exceed the limit by
  // as many as were closed in that instant.
  bool evict_waiting(const std::string* address) {
    for (auto it = waiting_.begin(); it != waiting_.end();) {
      auto s = it->lock();
      if (!s) {
        it = waiting_.erase(it);
        continue;
      }
      if (address == nullptr || s->address() == *address) {
        waiting_.erase(it);
        s->close();
        ++evicted_;
        return true;
      }
      ++it;
    }
    return false;
  }
  void request_read(const Session* s) {
    waiting_.remove_if([s](const std::weak_ptr<Session>& w) {
      auto l = w.lock();
      return !l || l.get() == s;
    });
  }
  unsigned short port() const override { return port_; }
  void stop() override {
    beast::error_code ec;
    acceptor_.close(ec);
    retry_.cancel();
  }

  HttpResponse handle(const HttpRequest& r) {
    try {
      return handler_(r);
    } catch (const std::exception& e) {
      spdlog::warn("http: {} {}: {}", r.method, r.path, e.what());
      return {500, "text/plain; charset=utf-8", "internal error\n"};
    }
  }
  const HttpLimits& limits() const { return limits_; }
  int connections_ = 0;
  std::map<std::string, int> per_address_;      // open connections by client address
  std::list<std::weak_ptr<Session>> waiting_;   // connections whose request has not arrived, oldest first
  std::uint64_t evicted_ = 0;

 private:
  tcp::acceptor acceptor_;
  asio::steady_timer retry_;
  HttpHandler handler_;
  HttpLimits limits_;
  unsigned short port_ = 0;
};

std::chrono::milliseconds ms(double s) { return std::chrono::milliseconds(static_cast<long long>(s * 1000)); }

Session::Session(tcp::socket socket, std::string address, std::shared_ptr<Server> server)
    : stream_(std::move(socket)), address_(std::move(address)), server_(std::move(server)) {
  ++server_->connections_;
  ++server_->per_address_[address_];
}

Session::~Session() {
  --server_->connections_;
  if (auto it = server_->per_address_.find(address_); it != server_->per_address_.end() && --it->second <= 0) {
    server_->per_address_.erase(it);
  }
}

void Session::run() {
  parser_.emplace();
  parser_->header_limit(static_cast<std::uint32_t>(server_->limits().header_bytes));
  parser_->body_limit(server_->limits().body_bytes);
  stream_.expires_after(ms(server_->limits().request_timeout_s));  // the whole request, however it trickles in
  http::async_read(stream_, buffer_, *parser_,
                   [self = shared_from_this()](beast::error_code ec, std::size_t) { self->on_read(ec); });
}

void Session::on_read(beast::error_code ec) {
  server_->request_read(this);
  if (ec == http::error::header_limit) return reply({431, "text/plain; charset=utf-8", "request header too large\n"});
  if (ec == http::error::body_limit) return reply({413, "text/plain; charset=utf-8", "request body too large\n"});
  if (ec == beast::error::timeout || ec == http::error::end_of_stream || ec == asio::error::connection_reset ||
      ec == asio::error::eof || ec == asio::error::operation_aborted || ec == asio::error::bad_descriptor) {
    return close();  // a slow, silent or gone client: cut off
  }
  if (ec) return reply({400, "text/plain; charset=utf-8", "bad request\n"});
  const auto& req = parser_->get();
  HttpRequest r;
  r.method = std::string(req.method_string());
  const std::string target(req.target());
  const auto q = target.find('?');
  r.path = target.substr(0, q);
  if (q != std::string::npos) r.query = target.substr(q + 1);
  if (req.method() != http::verb::get) return reply({405, "text/plain; charset=utf-8", "only GET\n"});
  reply(server_->handle(r));
}

void Session::reply(const HttpResponse& r) {
  response_.version(11);
  response_.result(static_cast<unsigned>(r.status));
  response_.reason(reason_phrase(r.status));
  response_.set(http::field::server, "greyhound-master");
  response_.set(http::field::content_type, r.content_type);
  response_.keep_alive(false);
  response_.body() = r.body;
  response_.prepare_payload();
  stream_.expires_after(ms(server_->limits().timeout_s));
  http::async_write(stream_, response_, [self = shared_from_this()](beast::error_code, std::size_t) { self->close(); });
}

void Session::close() {
  beast::error_code ec;
  stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
  stream_.socket().close(ec);
}

}  // namespace

Result<HttpAddress> parse_http_address(const std::string& text) {
  HttpAddress a;
  std::string port = text;
  if (const auto colon = text.rfind(':'); colon != std::string::npos) {
    std::string host = text.substr(0, colon);
    port = text.substr(colon + 1);
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
    if (!host.empty()) a.host = host;
  }
  if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos ||
      std::stoul(port) > 65535) {
    return Result<HttpAddress>::failure("--http: '" + text + "' is not ADDR:PORT (e.g. 127.0.0.1:9400)");
  }
  a.port = static_cast<unsigned short>(std::stoul(port));
  beast::error_code ec;
  asio::ip::make_address(a.host, ec);
  if (ec) return Result<HttpAddress>::failure("--http: '" + a.host + "' is not an IP address (names are not resolved)");
  return a;
}

Result<std::shared_ptr<HttpServer>> HttpServer::start(asio::io_context& io, const HttpAddress& address,
                                                      HttpHandler handler, HttpLimits limits) {
  auto s = std::make_shared<Server>(io, std::move(handler), limits);
  if (Status st = s->listen(address); !st) return st.status();
  s->accept();
  return std::shared_ptr<HttpServer>(s);
}

std::string query_value(const std::string& query, const std::string& key) {
  std::size_t pos = 0;
  while (pos <= query.size()) {
    const auto amp = query.find('&', pos);
    const std::string part = query.substr(pos, amp == std::string::npos ? std::string::npos : amp - pos);
    const auto eq = part.find('=');
    if (percent_decoded(part.substr(0, eq)) == key) {
      return eq == std::string::npos ? "" : percent_decoded(part.substr(eq + 1));
    }
    if (amp == std::string::npos) break;
    pos = amp + 1;
  }
  return "";
}

}  // namespace greyhound::master
