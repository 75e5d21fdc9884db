/// net/rendezvous_io: the I/O that the transport's side services share (the acceptor's sniff,
/// reachability's dial-backs, the relays, the address asks): timers and sockets that shutdown
/// cancels and closes — but the two ends of a link this peer relays, which outlive it — a
/// deadline that closes a socket, rendezvous messages (gossip/wire.hpp) written and read within
/// a time, and addresses resolved once. Everything here runs on the I/O thread.
#pragma once
#if !defined(GOSSIP_ROOM_NET)
#error "src/net/rendezvous_io.hpp belongs to room net, which this room does not use (see the room table in meson.build)"
#endif

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <asio.hpp>

#include "gossip/net.hpp"
#include "gossip/wire.hpp"

namespace gossip::net {

// Shared by the rendezvous services and the ones that ask them.
inline constexpr std::chrono::milliseconds kAskAgain{250};  // a refused helper, a relay not ready
inline constexpr std::chrono::milliseconds kRelayWait{5'000};  // a relay ask waits this long
inline constexpr std::uint64_t kNamedRelay = 1;  // relay ask flag (nonce): the asker names it

class RendezvousIo {
 public:
  using Clock = std::chrono::steady_clock;
  using Socket = std::shared_ptr<asio::ip::tcp::socket>;
  using Log = std::function<void(const std::string&)>;

  RendezvousIo(asio::io_context& io, const NetConfig& config, Log log);

  asio::io_context& io() { return io_; }
  /// Set by stop(): the handlers of every part return at once from then on.
  bool stopping() const { return stopping_; }

  /// Timers and sockets registered for stop().
  std::shared_ptr<asio::steady_timer> new_timer(std::chrono::milliseconds after);
  std::shared_ptr<asio::steady_timer> new_timer(Clock::time_point at);
  Socket new_socket();
  void watch(const Socket& socket);
  /// The two ends of a link this peer relays: stop() leaves them open.
  void keep_open(const Socket& a, const Socket& b);

  /// A registered timer that closes `socket` after `within`, and whether it did (`late`): the
  /// pending operation on the socket then fails, and its handler says it timed out.
  struct Deadline {
    std::shared_ptr<asio::steady_timer> timer;
    std::shared_ptr<bool> late;
  };
  Deadline close_after(Socket socket, std::chrono::milliseconds within);

  /// A message of `kind` from this peer to `to`, stamped with the run's tag and the time.
  wire::Rendezvous message(wire::RendezvousKind kind, std::uint32_t to) const;
  /// Endpoints of `address` ("host:port"), resolved once; empty when it does not resolve.
  const asio::ip::tcp::resolver::results_type& endpoints_of(const std::string& address);
  /// Writes `m` to `socket`, then calls `then` (with the write's error).
  void send(Socket socket, const wire::Rendezvous& m, std::function<void(std::error_code)> then);
  /// Writes `m` and closes the socket.
  void answer(Socket socket, const wire::Rendezvous& m);
  /// Reads one rendezvous message of this run from `socket` within `within`; `then` gets it or
  /// why not.
  void read(Socket socket, std::chrono::milliseconds within,
            std::function<void(std::optional<wire::Rendezvous>, std::string)> then);

  /// Cancels every timer and closes every socket but the relayed links' ends.
  void stop();

 private:
  bool kept_open(const asio::ip::tcp::socket& socket) const;

  asio::io_context& io_;
  const NetConfig& config_;
  const Log log_;
  const std::uint64_t run_tag_;  // rendezvous_tag(run id)
  bool stopping_ = false;
  std::map<std::string, asio::ip::tcp::resolver::results_type> resolved_;
  std::vector<std::weak_ptr<asio::steady_timer>> timers_;
  std::vector<std::weak_ptr<asio::ip::tcp::socket>> sockets_;
  std::vector<std::weak_ptr<asio::ip::tcp::socket>> kept_;
};

}  // namespace gossip::net
