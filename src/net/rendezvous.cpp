// net/rendezvous.cpp: the rendezvous messages that come to this peer's port (gossip/wire.hpp),
// handed to the service each asks for — a dial-back (reachability.hpp), a relay (relay_server.hpp),
// an address ask (address_gossip.hpp). The asking side of the relays is relay_client.cpp.
#include "gossip/core.hpp"
#include "src/net/links.hpp"
#include "src/net/socket.hpp"

namespace gossip::net {

void Links::serve_rendezvous(Socket socket) {
  ++serving_;
  rv_.read(socket, config_.timeouts.handshake,
                  [this, socket](std::optional<wire::Rendezvous> m, std::string why) {
                    --serving_;
                    std::error_code ignored;
                    const std::string from = remote_name(*socket);
                    if (!m) {
                      log_refusal(cat("rendezvous from ", from, " refused: ", why));
                      return socket->close(ignored);
                    }
                    if (m->from >= static_cast<std::uint32_t>(config_.size) ||
                        m->from == static_cast<std::uint32_t>(config_.rank)) {
                      log_refusal(cat("rendezvous from ", from, " refused: rank ", m->from,
                                      " is not another member of this run"));
                      return socket->close(ignored);
                    }
                    switch (m->kind) {
                      case wire::RendezvousKind::kDialBackAsk:
                        return reach_.serve_dial_back(socket, *m);
                      case wire::RendezvousKind::kDialBackProbe:
                        reach_.probe_came(*m);
                        return socket->close(ignored);
                      case wire::RendezvousKind::kRelayAsk:
                        return relays_.serve(socket, *m);
                      case wire::RendezvousKind::kAddressAsk:
                        return addresses_.serve_ask(socket, *m);
                      default:
                        log_refusal(cat("rendezvous from ", from, " refused: an answer nobody "
                                        "asked for"));
                        return socket->close(ignored);
                    }
                  });
}

}  // namespace gossip::net
