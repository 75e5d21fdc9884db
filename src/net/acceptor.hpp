/// net/acceptor: this peer's port. Accepts connections up to net.max_pending_handshakes not yet
/// through their handshake, and sorts each by its first byte (peeked, not read): a rendezvous
/// message goes to the rendezvous services, anything else (TLS, or a hello frame) becomes a
/// session. A connection that says nothing within the handshake timeout is closed.
#pragma once
#if !defined(GOSSIP_ROOM_NET)
#error "src/net/acceptor.hpp belongs to room net, which this room does not use (see the room table in meson.build)"
#endif

#include <functional>

#include "src/net/refusal_log.hpp"
#include "src/net/rendezvous_io.hpp"

namespace gossip::net {

class Acceptor {
 public:
  using Socket = RendezvousIo::Socket;
  struct Hooks {
    /// Connections accepted earlier that have not finished their handshake (sessions, and
    /// rendezvous being served), beside those whose first byte is awaited here.
    std::function<std::size_t()> pending;
    std::function<void(Socket)> rendezvous;
    std::function<void(asio::ip::tcp::socket)> session;
  };

  Acceptor(asio::ip::tcp::acceptor& acceptor, const NetConfig& config, RendezvousIo& io,
           RefusalLog& refusals, std::function<void(const std::string&)> log, Hooks hooks);

  /// Accepts until stop() (I/O thread).
  void start();
  void stop();

 private:
  void sniff(Socket socket);

  asio::ip::tcp::acceptor& acceptor_;
  const NetConfig& config_;
  RendezvousIo& io_;
  RefusalLog& refusals_;
  const std::function<void(const std::string&)> log_;
  const Hooks hooks_;
  asio::steady_timer retry_;
  std::size_t sniffing_ = 0;  // accepted connections whose first byte is awaited
};

}  // namespace gossip::net
