/// net/dialler: who dials and when — the lower rank of a pair, or either end that cannot be
/// dialled (it found itself unreachable, or is not listed), with exponential back-off until the
/// start's deadline, then quietly every kRejoinRedial in case the neighbour restarts; a later
/// neighbour (an elastic run's) once the graph needs it; a neighbour without an address once
/// its signed record comes. Each neighbour has one attempt, whose phase says what the dialler
/// is doing for it. A connect that succeeds is handed on (Hooks::connected) as a session's
/// socket; the handshake's outcome comes back through acked() or a retry. I/O thread only.
#pragma once
#if !defined(GOSSIP_ROOM_NET)
#error "src/net/dialler.hpp belongs to room net, which this room does not use (see the room table in meson.build)"
#endif

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <asio.hpp>

#include "gossip/net.hpp"
#include "src/net/address_gossip.hpp"
#include "src/net/link.hpp"
#include "src/net/reachability.hpp"
#include "src/net/rendezvous_io.hpp"

namespace gossip::net {

/// What the dialler is doing for one neighbour.
enum class DialPhase : std::uint8_t {
  kIdle,             // nothing: the link is up, or the other end dials, or it was refused
  kAwaitingAddress,  // dialled once its signed address record comes (learned)
  kDialling,         // a connect or its handshake under way, or the back-off before the next
};

class Dialler {
 public:
  using Clock = std::chrono::steady_clock;
  struct Hooks {
    /// A connect to `peer` succeeded: its session starts on `socket`.
    std::function<void(int peer, asio::ip::tcp::socket socket)> connected;
    /// Asks the relays for the link to `peer` unless they are asked already or there are none.
    std::function<void(int peer)> ask_relays;
    /// Whether the relays are being asked for `peer` now.
    std::function<bool(int peer)> asking_relays;
    /// Whether there is any relay this peer may ask for `peer`.
    std::function<bool(int peer)> has_relays;
    std::function<void(const std::string&)> log;
  };

  /// `endpoints[p]`: neighbour p's resolved address, where the run's configuration lists one.
  Dialler(asio::io_context& io, const NetConfig& config, RendezvousIo& rv, LinkTable& links,
          const ReachabilityCheck& reach, const AddressGossip& addresses, Hooks hooks,
          std::vector<asio::ip::tcp::resolver::results_type> endpoints);

  /// Dials the neighbours this peer dials until `give_up` (later neighbours wait for expect).
  void start(Clock::time_point give_up);
  /// Dials the later neighbours (NetConfig::later) in `peers` that we dial, every kLaterRedial
  /// until they come.
  void expect(const std::vector<int>& peers);
  /// Our reachability is kUnreachable: dial every neighbour not up, whatever its rank.
  void dial_all();
  /// A newer signed record of `peer` came: dialled at its address from now.
  void learned(int peer);
  /// Whether this peer dials `peer` (and redials it when the link is lost).
  bool we_dial(int peer) const;
  void dial(int peer);
  /// The dial (or its handshake) failed: again after the back-off, or given up for the run.
  void retry(int peer, const std::string& why);
  /// One direct dial of `peer` before the relays are asked again.
  void dial_between_relays(int peer);
  /// The link to `peer` was lost: redialled for up to the reconnect window, when we dial it.
  void redial_lost(int peer);

  /// The handshake of our dial is through (whichever connection becomes the link).
  void acked(int peer) { attempts_[peer]->phase = DialPhase::kIdle; }
  /// The link formed from our dial: the back-off starts over for a later loss.
  void formed(int peer);
  /// `peer` came: a later loss is redialled, and given up on, as any other's.
  void came(int peer) { attempts_[peer]->later = false; }
  /// Our handshake with `peer` ended for good (it refused us), or went through a relay.
  void stop(int peer) { attempts_[peer]->phase = DialPhase::kIdle; }
  /// A link through a relay starts: its lower end's session is our dial.
  void relayed(int peer, bool lower) {
    attempts_[peer]->phase = lower ? DialPhase::kDialling : DialPhase::kIdle;
  }
  bool dialling(int peer) const { return attempts_[peer]->phase == DialPhase::kDialling; }
  /// An elastic run's later neighbour that has not come yet.
  bool later(int peer) const { return attempts_[peer]->later; }
  /// Stops every timer and connect.
  void shutdown();

 private:
  struct Attempt {
    explicit Attempt(asio::io_context& io) : timer(io) {}
    DialPhase phase = DialPhase::kIdle;
    bool later = false;  // NetConfig::later: dialled every kLaterRedial until it comes
    asio::ip::tcp::resolver::results_type endpoints;
    std::shared_ptr<asio::ip::tcp::socket> connecting;  // a connect in progress
    asio::steady_timer timer;  // connect deadline, then back-off
    Clock::time_point give_up;
    std::chrono::milliseconds backoff{0};
  };
  /// Starts the attempt at `peer` over: first back-off, and a deadline of at least the
  /// reconnect window from now; then dials.
  void dial_afresh(int peer);
  /// A peer not listed waits for its lower-ranked neighbours to dial it, then dials them.
  void dial_unlisted();
  void connect_done(int peer, const std::error_code& ec, bool timed_out,
                    const std::string& address, std::shared_ptr<asio::ip::tcp::socket> socket);
  /// Gives up on `peer` for the run (after `why`) and redials it quietly now and then.
  void give_up(int peer, const std::string& why);

  asio::io_context& io_;
  const NetConfig& config_;
  RendezvousIo& rv_;
  LinkTable& links_;
  const ReachabilityCheck& reach_;
  const AddressGossip& addresses_;
  Hooks hooks_;
  std::vector<std::unique_ptr<Attempt>> attempts_;  // by rank; null for non-neighbours
};

}  // namespace gossip::net
