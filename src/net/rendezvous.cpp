// net/rendezvous.cpp: the rendezvous messages that come to this peer's port (gossip/wire.hpp),
// handed to the service each asks for — a dial-back (reachability.hpp), a relay (relay_server.hpp),
// an address ask (address_gossip.hpp) — and the dialler's side of the relays: a link neither end
// can dial is asked of the relay candidates in order (both ends go down the same list), with one
// direct dial between rounds of the list (the other end may have started meanwhile, reachable).
#include <algorithm>

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

// --- the relays, asked (the dialler's side) ---------------------------------------------------

std::vector<std::pair<int, std::string>> Links::relay_candidates(int peer) const {
  std::vector<std::pair<int, std::string>> out = config_.relays;
  if (config_.relays_auto)
    for (int r = 0; r < config_.size; ++r)
      if (r != config_.rank && r != peer && !address_of(r).empty())
        out.emplace_back(r, address_of(r));
  const auto& refused = links_[peer]->relays_refused;  // relays that altered this link's bytes
  std::erase_if(out, [&](const auto& c) {
    return c.first == peer ||
           std::find(refused.begin(), refused.end(), c.second) != refused.end();
  });
  return out;
}

void Links::relay_dial(int peer) {
  Link& l = *links_[peer];
  if (rv_.stopping() || mail_.state(peer) == LinkState::kUp) {
    l.relaying = false;
    return;
  }
  const auto candidates = relay_candidates(peer);
  if (l.relay_next >= candidates.size()) {
    l.relay_next = 0;  // every relay tried: from the first again, after a direct dial
    return redial_between_relays(peer);
  }
  const auto [relay, address] = candidates[l.relay_next];
  auto next = [this, peer](const std::string& why) {
    if (!why.empty()) mail_.note_failure(peer, {LinkFailureKind::kRelay, why});
    ++links_[peer]->relay_next;
    relay_dial(peer);
  };
  auto socket = rv_.new_socket();
  auto timer = rv_.close_after(socket, config_.timeouts.handshake).timer;
  const bool named = relay < 0 || !config_.relays_auto;
  asio::async_connect(
      *socket, rv_.endpoints_of(address),
      [this, socket, timer, peer, relay, address, next, named](std::error_code ec,
                                                               const asio::ip::tcp::endpoint&) {
        timer->cancel();
        if (rv_.stopping()) return;
        if (ec) return next("");  // we cannot reach this one: the next
        tune(*socket);
        wire::Rendezvous ask =
            rv_.message(wire::RendezvousKind::kRelayAsk, static_cast<std::uint32_t>(peer));
        ask.nonce = named ? kNamedRelay : 0;
        rv_.send(socket, ask, [this, socket, peer, relay, address, next](std::error_code w) {
          if (w) return next("");
          rv_.read(
              socket, kRelayWait + config_.timeouts.handshake,
              [this, socket, peer, relay, address, next](std::optional<wire::Rendezvous> m,
                                                         std::string why) {
                relay_answered(peer, socket, relay, address, next, std::move(m), why);
              });
        });
      });
}

void Links::relay_answered(int peer, const Socket& socket, int relay, const std::string& address,
                           const std::function<void(const std::string&)>& next,
                           std::optional<wire::Rendezvous> m, const std::string& why) {
  if (mail_.state(peer) == LinkState::kUp) {  // it came another way meanwhile
    std::error_code ignored;
    socket->close(ignored);
    links_[peer]->relaying = false;
    return;
  }
  if (!m || m->kind != wire::RendezvousKind::kRelayAnswer)
    return next(cat("relay ", address, ": ", m ? "an answer of another kind" : why));
  if (m->status == wire::RendezvousStatus::kNotYet) {  // the same one, soon
    auto again = rv_.new_timer(kAskAgain);
    again->async_wait([this, again, peer](std::error_code e) {
      if (!e && !rv_.stopping()) relay_dial(peer);
    });
    return;
  }
  if (m->status == wire::RendezvousStatus::kAbsent) {
    // The other end did not come: the same relay again (both ends go down one
    // list), after one direct dial (it may have started meanwhile, reachable).
    mail_.note_failure(peer, {LinkFailureKind::kRelay,
                              cat("relay ", address, ": ", m->text)});
    return redial_between_relays(peer);
  }
  if (m->status != wire::RendezvousStatus::kOk)
    return next(cat("relay ", address, ": ", m->text));
  start_relayed(peer, socket, relay, address);
}

void Links::redial_between_relays(int peer) {
  Link& l = *links_[peer];
  l.relaying = false;
  // A dial on its way, or waiting its turn: its failure asks the relays again.
  if (l.connecting || l.dialling) return;
  l.dialling = true;
  l.dial_timer.expires_after(std::max(l.backoff, kAskAgain));
  l.dial_timer.async_wait([this, peer](std::error_code ec) {
    if (!ec && !rv_.stopping() && mail_.state(peer) != LinkState::kUp) dial(peer);
  });
}

void Links::start_relayed(int peer, std::shared_ptr<asio::ip::tcp::socket> socket, int relay,
                          const std::string& relay_address) {
  // The TLS client (the hello's sender) is the lower rank of the pair at either end.
  const bool lower = config_.rank < peer;
  auto s = std::make_shared<Session>(std::move(*socket), *this,
                                     lower ? Session::Role::kDialled : Session::Role::kAccepted,
                                     peer);
  s->set_relay(relay, relay_address);
  links_[peer]->relaying = false;
  links_[peer]->dialling = lower;
  track(s);
  s->start();
}

}  // namespace gossip::net
