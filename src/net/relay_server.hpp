/// net/relay_server: this peer carrying other members' links (a relay ask: "carry my link to
/// peer B"). The relay holds the ask until B's ask for the same link arrives, answers both, and
/// from then on passes bytes both ways. The two ends run their TLS handshake and records
/// through it end to end: the relay sees ciphertext and sizes, and a byte it alters fails the
/// records' authentication (Session::altered), after which the ends do not use it for that link
/// again. A member relays only while it has found itself reachable (a relay named in net.relays
/// relays regardless). The asking side is the relay client (relay_client.hpp).
#pragma once
#if !defined(GOSSIP_ROOM_NET)
#error "src/net/relay_server.hpp belongs to room net, which this room does not use (see the room table in meson.build)"
#endif

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "src/net/reachability.hpp"
#include "src/net/rendezvous_io.hpp"

namespace gossip::net {

class RelayServer {
 public:
  using Socket = RendezvousIo::Socket;

  RelayServer(const NetConfig& config, RendezvousIo& io, const ReachabilityCheck& reachability,
              std::function<void(const std::string&)> log);

  /// A relay ask that came to our port (I/O thread).
  void serve(Socket asker, const wire::Rendezvous& ask);
  /// Asks waiting for their other end are dropped (shutdown); relayed links run on.
  void stop() { waiting_.clear(); }
  /// Bytes passed on for other members' links (any thread).
  std::uint64_t bytes_relayed() const { return bytes_relayed_.load(); }
  /// Links this peer relays now (I/O thread).
  std::size_t relayed_links() const { return relayed_links_; }

 private:
  /// A relay ask waiting at this peer for the other end of its link.
  struct Waiting {
    Socket socket;
    std::uint32_t from = 0;
    std::shared_ptr<asio::steady_timer> timer;
  };
  using Key = std::pair<std::uint32_t, std::uint32_t>;
  /// Why this peer cannot relay the link `ask` names now, and with which status ("" if it can).
  std::pair<wire::RendezvousStatus, std::string> refusal(const wire::Rendezvous& ask) const;
  void refuse(Socket asker, std::uint32_t to, wire::RendezvousStatus status,
              const std::string& why);
  /// Both ends of `key` asked: answer both, then pass bytes.
  void join(Socket asker, std::uint32_t asker_rank, Waiting other, Key key);
  void hold(Socket asker, const wire::Rendezvous& ask, Key key);
  /// Passes bytes both ways between two connections until either closes; counts them.
  void splice(Socket a, Socket b, std::string what);

  const NetConfig& config_;
  RendezvousIo& io_;
  const ReachabilityCheck& reachability_;
  const std::function<void(const std::string&)> log_;
  std::map<Key, Waiting> waiting_;  // relay asks, by link
  std::size_t relayed_links_ = 0;
  std::atomic<std::uint64_t> bytes_relayed_{0};
};

}  // namespace gossip::net
