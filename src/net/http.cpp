// net/http.cpp: the small read-only HTTP/1.1 server behind the dashboard and /metrics, and the
// GET the launcher scrapes its peers with. One request per connection (Connection: close), the
// session pattern of the peers' links in miniature: read the head with a cap and a deadline,
// answer, close. The handler runs on this server's own I/O thread, never on the caller's.
#include <algorithm>
#include <atomic>
#include <thread>

#include <asio.hpp>

#include "gossip/core.hpp"
#include "gossip/net.hpp"
#include "src/net/socket.hpp"

namespace gossip {
namespace {

const char* reason(int status) {
  switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 431: return "Request Header Fields Too Large";
    case 503: return "Service Unavailable";
    default: return status < 500 ? "Client Error" : "Server Error";
  }
}

std::string response_bytes(const HttpResponse& r, bool head) {
  std::string out = cat("HTTP/1.1 ", r.status, " ", reason(r.status), "\r\nContent-Type: ",
                        r.content_type, "\r\nContent-Length: ", r.body.size(),
                        "\r\nCache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\n"
                        "Connection: close\r\n");
  if (r.status == 405) out += "Allow: GET, HEAD\r\n";
  out += "\r\n";
  if (!head) out += r.body;
  return out;
}

HttpResponse error_response(int status, const std::string& why) {
  return {status, "text/plain; charset=utf-8", why + "\n"};
}

/// The response to one request head ("GET /path HTTP/1.1\r\n..."); `head_only` is set for HEAD.
HttpResponse answer(std::string_view head, const HttpServer::Handler& handler, bool* head_only) {
  const auto line_end = head.find("\r\n");
  const std::string_view line = head.substr(0, line_end);
  const auto sp1 = line.find(' ');
  const auto sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos)
    return error_response(400, "malformed request line");
  const std::string_view method = line.substr(0, sp1);
  std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  const std::string_view version = line.substr(sp2 + 1);
  if (version != "HTTP/1.1" && version != "HTTP/1.0")
    return error_response(400, "not an HTTP/1.x request");
  *head_only = method == "HEAD";
  if (method != "GET" && method != "HEAD")
    return error_response(405, cat("method ", method, " not allowed: this server is read-only"));
  if (target.empty() || target.front() != '/')
    return error_response(400, "the request target must be a path");
  if (const auto q = target.find_first_of("?#"); q != std::string_view::npos)
    target = target.substr(0, q);
  for (char c : target)
    if (static_cast<unsigned char>(c) <= 0x20 || static_cast<unsigned char>(c) >= 0x7f)
      return error_response(400, "the request target has a control or non-ASCII byte");
  try {
    return handler(std::string(target));
  } catch (const std::exception& e) {
    return error_response(500, e.what());
  }
}

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(asio::ip::tcp::socket socket, std::shared_ptr<const HttpServer::Handler> handler,
             std::shared_ptr<std::atomic<int>> open)
      : socket_(std::move(socket)), timer_(socket_.get_executor()), handler_(std::move(handler)),
        buffer_(HttpServer::kMaxRequestBytes), open_(std::move(open)) {
    ++*open_;
  }
  ~Connection() { --*open_; }

  void start(bool over_limit) {
    if (over_limit) return reply(error_response(503, "too many open connections"), false);
    timer_.expires_after(HttpServer::kRequestTimeout);
    timer_.async_wait([self = shared_from_this()](std::error_code ec) {
      if (!ec) self->socket_.close(ec);  // silent too long: dropped
    });
    asio::async_read_until(socket_, buffer_, "\r\n\r\n",
                           [self = shared_from_this()](std::error_code ec, std::size_t n) {
                             self->on_head(ec, n);
                           });
  }

 private:
  void on_head(std::error_code ec, std::size_t n) {
    if (ec == asio::error::not_found)  // the head outgrew kMaxRequestBytes
      return reply(error_response(431, cat("request head over ", HttpServer::kMaxRequestBytes,
                                           " bytes")),
                   false);
    if (ec) return;  // closed, or timed out
    const auto data = buffer_.data();
    const std::string head(asio::buffers_begin(data), asio::buffers_begin(data) + n);
    bool head_only = false;
    const HttpResponse r = answer(head, *handler_, &head_only);
    reply(r, head_only);
  }

  void reply(const HttpResponse& r, bool head_only) {
    out_ = response_bytes(r, head_only);
    timer_.expires_after(HttpServer::kRequestTimeout);
    timer_.async_wait([self = shared_from_this()](std::error_code ec) {
      if (!ec) self->socket_.close(ec);
    });
    asio::async_write(socket_, asio::buffer(out_),
                      [self = shared_from_this()](std::error_code, std::size_t) {
                        std::error_code ignored;
                        self->socket_.shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
                        self->socket_.close(ignored);
                        self->timer_.cancel();
                      });
  }

  asio::ip::tcp::socket socket_;
  asio::steady_timer timer_;
  std::shared_ptr<const HttpServer::Handler> handler_;
  asio::streambuf buffer_;
  std::string out_;
  std::shared_ptr<std::atomic<int>> open_;  // connections open (shared: they may outlive it)
};

}  // namespace

struct HttpServer::Impl {
  asio::io_context io;
  asio::ip::tcp::acceptor acceptor{io};
  std::shared_ptr<const Handler> handler;
  std::string host;
  std::shared_ptr<std::atomic<int>> open = std::make_shared<std::atomic<int>>(0);
  std::thread thread;

  void accept() {
    acceptor.async_accept([this](std::error_code ec, asio::ip::tcp::socket socket) {
      if (ec == asio::error::operation_aborted) return;
      if (!ec)
        std::make_shared<Connection>(std::move(socket), handler, open)
            ->start(open->load() >= kMaxConnections);
      accept();
    });
  }
};

HttpServer::HttpServer(const std::string& address, Handler handler, const std::string& what)
    : impl_(std::make_unique<Impl>()) {
  const auto [host, port] = net::split_address(address);
  impl_->host = host;
  impl_->handler = std::make_shared<const Handler>(std::move(handler));
  std::error_code ec;
  const auto endpoint = net::resolve(impl_->io, address).begin()->endpoint();
  auto& acc = impl_->acceptor;
  acc.open(endpoint.protocol(), ec);
  if (!ec) acc.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acc.bind(endpoint, ec);
  if (!ec) acc.listen(asio::socket_base::max_listen_connections, ec);
  if (ec)
    throw RuntimeError(cat(what, ": cannot listen on ", address, ": ", ec.message(),
                           ec == asio::error::address_in_use
                               ? " (another program, or another run, has that port)"
                               : ""));
  impl_->accept();
  impl_->thread = std::thread([impl = impl_.get()] { impl->io.run(); });
}

HttpServer::~HttpServer() {
  impl_->io.stop();
  if (impl_->thread.joinable()) impl_->thread.join();
}

std::string HttpServer::address() const {
  const int port = impl_->acceptor.local_endpoint().port();
  const bool v6 = impl_->host.find(':') != std::string::npos;
  return v6 ? cat("[", impl_->host, "]:", port) : cat(impl_->host, ":", port);
}

std::optional<std::string> http_get(const std::string& address, const std::string& path,
                                    std::chrono::milliseconds timeout) {
  constexpr std::size_t kMaxAnswerBytes = 64u << 20;
  try {
    asio::io_context io;
    asio::ip::tcp::socket socket(io);
    const auto endpoints = net::resolve(io, address);
    const auto [host, port] = net::split_address(address);
    const std::string request =
        cat("GET ", path, " HTTP/1.1\r\nHost: ", host, ":", port, "\r\nConnection: close\r\n\r\n");
    asio::streambuf answer(kMaxAnswerBytes);
    bool ok = false;
    asio::async_connect(socket, endpoints, [&](std::error_code ec, const auto&) {
      if (ec) return;
      asio::async_write(socket, asio::buffer(request), [&](std::error_code ec2, std::size_t) {
        if (ec2) return;
        asio::async_read(socket, answer, [&](std::error_code ec3, std::size_t) {
          ok = ec3 == asio::error::eof;
        });
      });
    });
    io.run_for(timeout);
    if (!ok) return std::nullopt;
    const auto data = answer.data();
    const std::string text(asio::buffers_begin(data), asio::buffers_end(data));
    const auto body = text.find("\r\n\r\n");
    if (text.rfind("HTTP/1.1 200 ", 0) != 0 || body == std::string::npos) return std::nullopt;
    return text.substr(body + 4);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

}  // namespace gossip
