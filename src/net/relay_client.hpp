/// net/relay_client: the asking side of the relays, for a link neither end can dial. The relay
/// candidates (net.relays, then with net.relays: auto every other member with an address, less
/// those that altered this link's bytes) are asked in order — both ends go down the same list —
/// with one direct dial between rounds of the list (the other end may have started meanwhile,
/// reachable). An ask answered ok starts the link's session through that relay (Hooks::start).
/// The serving side is relay_server.hpp. I/O thread only.
#pragma once
#if !defined(GOSSIP_ROOM_NET)
#error "src/net/relay_client.hpp belongs to room net, which this room does not use (see the room table in meson.build)"
#endif

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <asio.hpp>

#include "gossip/net.hpp"
#include "src/net/address_gossip.hpp"
#include "src/net/link.hpp"
#include "src/net/rendezvous_io.hpp"

namespace gossip::net {

class RelayClient {
 public:
  using Socket = RendezvousIo::Socket;
  struct Hooks {
    /// The relay `address` (rank `relay`, or -1) carries the link to `peer` on `socket`.
    std::function<void(int peer, Socket socket, int relay, const std::string& address)> start;
    /// Every relay was asked: one direct dial before they are asked again.
    std::function<void(int peer)> dial_between;
    /// The socket options every connection gets.
    std::function<void(asio::ip::tcp::socket&)> tune;
  };

  RelayClient(const NetConfig& config, RendezvousIo& rv, LinkTable& links,
              const AddressGossip& addresses, Hooks hooks);

  /// Asks the relays for the link to `peer`, unless they are asked already or there are none.
  void ask(int peer);
  /// Whether the relays are being asked for the link to `peer` now.
  bool asking(int peer) const { return state(peer).asking; }
  /// Whether there is a relay this peer may ask for the link to `peer`.
  bool has_relays(int peer) const { return !candidates(peer).empty(); }
  /// The link to `peer` formed (or its relayed session starts): no more asks.
  void done(int peer) { state(peer).asking = false; }
  /// The relay at `address` altered the bytes of the link to `peer`: not asked for it again.
  void refuse(int peer, const std::string& address) {
    state(peer).refused.push_back(address);
  }

 private:
  struct PerLink {
    bool asking = false;
    std::size_t next = 0;              // the candidate asked next
    std::vector<std::string> refused;  // relays (addresses) that altered its bytes
  };
  PerLink& state(int peer) { return per_link_[peer]; }
  const PerLink& state(int peer) const { return per_link_[peer]; }
  /// The relays this peer may ask for `peer`, in order: (rank or -1, address).
  std::vector<std::pair<int, std::string>> candidates(int peer) const;
  /// Asks the next candidate.
  void ask_next(int peer);
  /// The relay `address` (rank `relay`, or -1) answered the ask for `peer` on `socket` (nullopt:
  /// `why` not): the link starts through it, or the same relay is asked again, or `next`.
  void answered(int peer, const Socket& socket, int relay, const std::string& address,
                const std::function<void(const std::string&)>& next,
                std::optional<wire::Rendezvous> m, const std::string& why);
  /// Every candidate was asked (or the other end was absent): one direct dial first.
  void between_rounds(int peer);

  const NetConfig& config_;
  RendezvousIo& rv_;
  LinkTable& links_;
  const AddressGossip& addresses_;
  Hooks hooks_;
  std::vector<PerLink> per_link_;  // by rank
};

}  // namespace gossip::net
