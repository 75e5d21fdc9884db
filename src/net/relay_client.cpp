// net/relay_client.cpp: asking the relays for a link neither end can dial (relay_client.hpp).
#include "src/net/relay_client.hpp"

#include <algorithm>

#include "gossip/core.hpp"

namespace gossip::net {

RelayClient::RelayClient(const NetConfig& config, RendezvousIo& rv, LinkTable& links,
                         const AddressGossip& addresses, Hooks hooks)
    : config_(config), rv_(rv), links_(links), addresses_(addresses), hooks_(std::move(hooks)),
      per_link_(config.size) {}

std::vector<std::pair<int, std::string>> RelayClient::candidates(int peer) const {
  std::vector<std::pair<int, std::string>> out = config_.relays;
  if (config_.relays_auto)
    for (int r = 0; r < config_.size; ++r)
      if (r != config_.rank && r != peer && !addresses_.address_of(r).empty())
        out.emplace_back(r, addresses_.address_of(r));
  const auto& refused = state(peer).refused;  // relays that altered this link's bytes
  std::erase_if(out, [&](const auto& c) {
    return c.first == peer ||
           std::find(refused.begin(), refused.end(), c.second) != refused.end();
  });
  return out;
}

void RelayClient::ask(int peer) {
  if (state(peer).asking || candidates(peer).empty()) return;
  state(peer).asking = true;
  ask_next(peer);
}

void RelayClient::ask_next(int peer) {
  PerLink& l = state(peer);
  if (rv_.stopping() || links_[peer].up()) {
    l.asking = false;
    return;
  }
  const auto list = candidates(peer);
  if (l.next >= list.size()) {
    l.next = 0;  // every relay tried: from the first again, after a direct dial
    return between_rounds(peer);
  }
  const auto [relay, address] = list[l.next];
  auto next = [this, peer](const std::string& why) {
    if (!why.empty()) links_[peer].fail({LinkFailureKind::kRelay, why});
    ++state(peer).next;
    ask_next(peer);
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
        hooks_.tune(*socket);
        wire::Rendezvous ask =
            rv_.message(wire::RendezvousKind::kRelayAsk, static_cast<std::uint32_t>(peer));
        ask.nonce = named ? kNamedRelay : 0;
        rv_.send(socket, ask, [this, socket, peer, relay, address, next](std::error_code w) {
          if (w) return next("");
          rv_.read(
              socket, kRelayWait + config_.timeouts.handshake,
              [this, socket, peer, relay, address, next](std::optional<wire::Rendezvous> m,
                                                         std::string why) {
                answered(peer, socket, relay, address, next, std::move(m), why);
              });
        });
      });
}

void RelayClient::answered(int peer, const Socket& socket, int relay, const std::string& address,
                           const std::function<void(const std::string&)>& next,
                           std::optional<wire::Rendezvous> m, const std::string& why) {
  if (links_[peer].up()) {  // it came another way meanwhile
    std::error_code ignored;
    socket->close(ignored);
    state(peer).asking = false;
    return;
  }
  if (!m || m->kind != wire::RendezvousKind::kRelayAnswer)
    return next(cat("relay ", address, ": ", m ? "an answer of another kind" : why));
  if (m->status == wire::RendezvousStatus::kNotYet) {  // the same one, soon
    auto again = rv_.new_timer(kAskAgain);
    again->async_wait([this, again, peer](std::error_code e) {
      if (!e && !rv_.stopping()) ask_next(peer);
    });
    return;
  }
  if (m->status == wire::RendezvousStatus::kAbsent) {
    // The other end did not come: the same relay again (both ends go down one list), after one
    // direct dial (it may have started meanwhile, reachable).
    links_[peer].fail({LinkFailureKind::kRelay, cat("relay ", address, ": ", m->text)});
    return between_rounds(peer);
  }
  if (m->status != wire::RendezvousStatus::kOk)
    return next(cat("relay ", address, ": ", m->text));
  state(peer).asking = false;
  hooks_.start(peer, socket, relay, address);
}

void RelayClient::between_rounds(int peer) {
  state(peer).asking = false;
  hooks_.dial_between(peer);
}

}  // namespace gossip::net
