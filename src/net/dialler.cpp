// net/dialler.cpp: the dialling half of Links — who dials (the lower rank of a pair, or either
// end that cannot be dialled), dials with exponential back-off until the start's deadline, then
// quietly every kRejoinRedial in case the neighbour restarts; a later neighbour (an elastic
// run's) once the graph needs it; a neighbour without an address once its signed record comes.
#include "src/net/links.hpp"

#include <algorithm>

#include "gossip/core.hpp"
#include "src/net/socket.hpp"

namespace gossip::net {
namespace {
constexpr std::chrono::milliseconds kRejoinRedial{250};  // dialling a gone peer again
// Dialling an expected later neighbour (an elastic run's joiner, starting up): often, so that it
// is connected soon after it listens (a refused connect on a host costs next to nothing).
constexpr std::chrono::milliseconds kLaterRedial{50};
// An unreachable peer dials the neighbours that have not dialled it this long after it found out
// (a lower rank on its side of a NAT dials it within a few ms), and asks the relays for the links
// that have not formed as long again.
constexpr std::chrono::milliseconds kDialBackAfter{300};
// A peer whose address is not listed waits this long for its lower-ranked neighbours to dial it
// (they learn its address from its signed record) before it dials them itself.
constexpr std::chrono::milliseconds kUnlistedWait{1'000};
}  // namespace

void Links::start(Clock::time_point give_up) {
  acceptor_.start();
  heartbeat();
  if (config_.reachable == ReachableSetting::kAuto)
    reach_.start(Clock::now() + config_.timeouts.start / 2);
  for (int p : config_.contacts)  // a joiner's contacts: it dials them, lower ranks or not
    if (p < config_.rank) {
      links_[p]->give_up = give_up;
      links_[p]->backoff = config_.timeouts.backoff_first;
      dial(p);
    }
  for (int p : mail_.neighbours()) {
    if (p < config_.rank) continue;  // the lower rank of a pair dials
    // A later neighbour (an elastic run's) is dialled once the graph needs it (expect).
    links_[p]->later = std::find(config_.later.begin(), config_.later.end(), p) !=
                       config_.later.end();
    if (links_[p]->later) continue;
    links_[p]->give_up = give_up;
    links_[p]->backoff = config_.timeouts.backoff_first;
    dial(p);
  }
  for (int p : mail_.neighbours()) links_[p]->give_up = give_up;
  if (!config_.listed) {
    // Nobody was told where we are: our signed record tells them (the bootstrap ask sends it at
    // once), and the lower ranks then dial us as usual; those that have not within
    // kUnlistedWait we dial ourselves (two connections at once would be one too many).
    log(cat("this peer's address ", address_of(config_.rank), " is not in the run's "
            "configuration: its signed record tells the members where it is, and it dials the "
            "neighbours that have not dialled it within ", kUnlistedWait.count(), " ms"));
    auto timer = rv_.new_timer(kUnlistedWait);
    timer->async_wait([this, timer](std::error_code ec) {
      if (ec || rv_.stopping()) return;
      for (int p : mail_.neighbours())
        if (Link& l = *links_[p]; p < config_.rank && !l.later && !l.dialling &&
                                  mail_.state(p) != LinkState::kUp) {
          l.backoff = config_.timeouts.backoff_first;
          if (l.give_up < Clock::now()) l.give_up = Clock::now() + config_.timeouts.reconnect;
          dial(p);
        }
    });
  }
  if (reach_.unreachable()) dial_all();
  addresses_.ask(give_up);
}

bool Links::we_dial(int peer) const {
  return config_.rank < peer || reach_.unreachable() || !config_.listed;
}

void Links::learned(int peer) {
  if (!links_[peer]) return;  // not a neighbour: its address is passed on, and may relay
  Link& l = *links_[peer];
  l.endpoints = {};
  if (!l.awaiting_address || l.dialling || mail_.state(peer) == LinkState::kUp) return;
  l.awaiting_address = false;
  l.backoff = config_.timeouts.backoff_first;
  if (l.give_up < Clock::now()) l.give_up = Clock::now() + config_.timeouts.reconnect;
  dial(peer);
}

void Links::dial_all() {
  // First the neighbours that dial us anyway (a lower rank on our side of a NAT) have their
  // moment; then we dial whoever has not come; then, for a link that did not form either way
  // (its other end cannot be dialled either), we ask the relays too.
  auto timer = rv_.new_timer(kDialBackAfter);
  timer->async_wait([this, timer](std::error_code ec) {
    if (ec || rv_.stopping()) return;
    for (int p : mail_.neighbours()) {
      Link& l = *links_[p];
      if (l.later || l.dialling || l.relaying || mail_.state(p) == LinkState::kUp) continue;
      l.backoff = config_.timeouts.backoff_first;
      if (l.give_up < Clock::now()) l.give_up = Clock::now() + config_.timeouts.reconnect;
      dial(p);
    }
    auto relay = rv_.new_timer(kDialBackAfter);
    relay->async_wait([this, relay](std::error_code e) {
      if (e || rv_.stopping()) return;
      for (int p : mail_.neighbours()) {
        Link& l = *links_[p];
        if (l.later || l.relaying || mail_.state(p) == LinkState::kUp ||
            relay_candidates(p).empty())
          continue;
        l.relaying = true;
        relay_dial(p);
      }
    });
  });
}

void Links::expect(const std::vector<int>& peers) {
  for (int p : peers) {
    if (p <= config_.rank || !links_[p] || !links_[p]->later) continue;
    Link& l = *links_[p];
    if (l.dialling || mail_.state(p) == LinkState::kUp) continue;
    l.give_up = Clock::time_point::max();  // until it comes (it starts when it joins)
    l.backoff = config_.timeouts.backoff_first;
    dial(p);
  }
}

void Links::dial(int peer) {
  Link& l = *links_[peer];
  if (mail_.state(peer) == LinkState::kUp && l.session && !l.session->closed()) {
    l.dialling = false;  // it dialled us meanwhile (it cannot be dialled)
    return;
  }
  const std::string address = address_of(peer);
  if (address.empty()) {
    // Not listed, and its signed record has not reached us: dialled once it does (learned).
    l.dialling = false;
    l.awaiting_address = true;
    mail_.note_failure(peer, {LinkFailureKind::kNoAddress,
                              cat("no address for peer ", peer, " yet (not listed; it is learned "
                                  "from the peer's signed record)")});
    return;
  }
  l.dialling = true;
  auto socket = std::make_shared<asio::ip::tcp::socket>(io_);
  auto timed_out = std::make_shared<bool>(false);
  l.connecting = socket;
  l.dial_timer.expires_after(config_.timeouts.handshake);
  l.dial_timer.async_wait([socket, timed_out](std::error_code ec) {
    std::error_code ignored;
    if (ec) return;
    *timed_out = true;
    socket->close(ignored);  // connect took too long: its handler sees the error
  });
  if (l.endpoints.empty()) l.endpoints = rv_.endpoints_of(address);
  asio::async_connect(*socket, l.endpoints,
                      [this, peer, socket, timed_out, address](std::error_code ec,
                                                      const asio::ip::tcp::endpoint&) {
                        Link& link = *links_[peer];
                        link.dial_timer.cancel();
                        link.connecting.reset();
                        if (rv_.stopping()) return;
                        if (ec) {
                          mail_.note_failure(peer, connect_failure(ec, *timed_out,
                                                                   config_.timeouts.handshake,
                                                                   address));
                          return retry(peer, cat("connect: ", ec.message()));
                        }
                        tune(*socket);
                        auto s = std::make_shared<Session>(std::move(*socket), *this,
                                                           Session::Role::kDialled, peer);
                        track(s);
                        s->start();
                      });
}

void Links::tune(asio::ip::tcp::socket& socket) {
  const std::string refused =
      set_socket_options(socket, config_.socket_buffer_bytes, config_.congestion);
  if (congestion_said_ || config_.congestion.empty()) return;
  congestion_said_ = true;
  log(refused.empty() ? cat("TCP congestion control ", config_.congestion, " (net.congestion)")
                      : refused);
}

void Links::retry(int peer, const std::string& why) {
  Link& l = *links_[peer];
  if (mail_.state(peer) == LinkState::kUp) return;
  // We cannot be dialled, and we cannot dial it (yet): ask the relays too (the other end, if it
  // cannot be dialled either, asks the same relays in the same order), and dial on beside them:
  // the other end may only have been starting, and be reachable.
  if (reach_.unreachable() && !l.relaying &&
      !relay_candidates(peer).empty()) {
    l.relaying = true;
    relay_dial(peer);
  }
  if (!l.later && Clock::now() + l.backoff > l.give_up) {
    // Gone for the run's purposes; but a restarted peer comes back at the same address, so
    // keep dialling now and then (quietly) until we shut down.
    if (mail_.state(peer) != LinkState::kGone) {
      log(cat("peer ", peer, " (", address_of(peer), "): giving up dialling (", why,
              "); trying again every ", kRejoinRedial.count(), " ms in case it restarts"));
      mail_.set_state(peer, LinkState::kGone);
    }
    l.dial_timer.expires_after(kRejoinRedial);
    l.dial_timer.async_wait([this, peer](std::error_code ec) {
      if (!ec && !rv_.stopping() && mail_.state(peer) == LinkState::kGone) dial(peer);
    });
    return;
  }
  l.dial_timer.expires_after(l.backoff);
  l.backoff = std::min(l.backoff * 2, l.later ? kLaterRedial : config_.timeouts.backoff_max);
  l.dial_timer.async_wait([this, peer](std::error_code ec) {
    if (!ec && !rv_.stopping()) dial(peer);
  });
}

}  // namespace gossip::net
