// net/acceptor.cpp: accept, bound the connections in their handshake, sort by first byte.
#include "src/net/acceptor.hpp"

#include <array>

#include "gossip/core.hpp"
#include "src/net/socket.hpp"

namespace gossip::net {

Acceptor::Acceptor(asio::ip::tcp::acceptor& acceptor, const NetConfig& config, RendezvousIo& io,
                   RefusalLog& refusals, std::function<void(const std::string&)> log, Hooks hooks)
    : acceptor_(acceptor), config_(config), io_(io), refusals_(refusals), log_(std::move(log)),
      hooks_(std::move(hooks)), retry_(io.io()) {}

void Acceptor::start() {
  acceptor_.async_accept([this](std::error_code ec, asio::ip::tcp::socket socket) {
    if (io_.stopping()) return;
    if (ec) {
      log_(cat("accept failed: ", ec.message(), "; retrying in 100 ms"));
      retry_.expires_after(std::chrono::milliseconds(100));
      retry_.async_wait([this](std::error_code e) {
        if (!e && !io_.stopping()) start();
      });
      return;
    }
    if (const std::size_t n = hooks_.pending() + sniffing_; n >= config_.max_pending_handshakes) {
      refusals_(cat("connection from ", remote_name(socket), " refused: ", n,
                    " connections have not finished their handshake (the limit)"));
      std::error_code ignored;
      socket.close(ignored);
      return start();
    }
    auto s = std::make_shared<asio::ip::tcp::socket>(std::move(socket));
    io_.watch(s);
    sniff(s);
    start();
  });
}

void Acceptor::stop() {
  std::error_code ignored;
  acceptor_.close(ignored);
  retry_.cancel();
}

void Acceptor::sniff(Socket socket) {
  // The first byte says what the connection is: a rendezvous message, or a session (TLS, or a
  // hello frame). Peeked, not read: a session's stream starts with it.
  ++sniffing_;
  auto first = std::make_shared<std::array<std::byte, 1>>();
  auto timer = io_.close_after(socket, config_.timeouts.handshake).timer;  // said nothing by then
  socket->async_receive(asio::buffer(*first), asio::socket_base::message_peek,
                        [this, socket, first, timer](std::error_code ec, std::size_t n) {
                          --sniffing_;
                          timer->cancel();
                          if (io_.stopping()) return;
                          if (ec || n == 0) {
                            refusals_(cat("connection from ", remote_name(*socket),
                                          " closed before it said anything"));
                            return;
                          }
                          if (wire::is_rendezvous_start((*first)[0]))
                            return hooks_.rendezvous(socket);
                          hooks_.session(std::move(*socket));
                        });
}

}  // namespace gossip::net
