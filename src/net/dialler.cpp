// net/dialler.cpp: who dials, when, and how often (dialler.hpp).
#include "src/net/dialler.hpp"

#include <algorithm>

#include "gossip/core.hpp"

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

Dialler::Dialler(asio::io_context& io, const NetConfig& config, RendezvousIo& rv,
                 LinkTable& links, const ReachabilityCheck& reach,
                 const AddressGossip& addresses, Hooks hooks,
                 std::vector<asio::ip::tcp::resolver::results_type> endpoints)
    : io_(io), config_(config), rv_(rv), links_(links), reach_(reach), addresses_(addresses),
      hooks_(std::move(hooks)), attempts_(config.size) {
  for (int p : links_.neighbours()) {
    attempts_[p] = std::make_unique<Attempt>(io);
    if (p < static_cast<int>(endpoints.size())) attempts_[p]->endpoints = std::move(endpoints[p]);
    // A later neighbour we would dial (an elastic run's) waits for expect.
    attempts_[p]->later = p > config_.rank && std::find(config_.later.begin(), config_.later.end(),
                                                        p) != config_.later.end();
  }
}

void Dialler::start(Clock::time_point give_up) {
  for (int p : config_.contacts)  // a joiner's contacts: it dials them, lower ranks or not
    if (p < config_.rank) {
      attempts_[p]->give_up = give_up;
      attempts_[p]->backoff = config_.timeouts.backoff_first;
      dial(p);
    }
  for (int p : links_.neighbours()) {
    if (p < config_.rank) continue;  // the lower rank of a pair dials
    // A later neighbour (an elastic run's) is dialled once the graph needs it (expect).
    if (attempts_[p]->later) continue;
    attempts_[p]->give_up = give_up;
    attempts_[p]->backoff = config_.timeouts.backoff_first;
    dial(p);
  }
  for (int p : links_.neighbours()) attempts_[p]->give_up = give_up;
  if (!config_.listed) dial_unlisted();
  if (reach_.unreachable()) dial_all();
}

void Dialler::dial_unlisted() {
  // Nobody was told where we are: our signed record tells them (the bootstrap ask sends it at
  // once), and the lower ranks then dial us as usual; those that have not within kUnlistedWait
  // we dial ourselves (two connections at once would be one too many).
  hooks_.log(cat("this peer's address ", addresses_.address_of(config_.rank), " is not in the "
                 "run's configuration: its signed record tells the members where it is, and it "
                 "dials the neighbours that have not dialled it within ", kUnlistedWait.count(),
                 " ms"));
  auto timer = rv_.new_timer(kUnlistedWait);
  timer->async_wait([this, timer](std::error_code ec) {
    if (ec || rv_.stopping()) return;
    for (int p : links_.neighbours())
      if (p < config_.rank && !later(p) && !dialling(p) && !links_[p].up()) dial_afresh(p);
  });
}

bool Dialler::we_dial(int peer) const {
  return config_.rank < peer || reach_.unreachable() || !config_.listed;
}

void Dialler::dial_afresh(int peer) {
  Attempt& a = *attempts_[peer];
  a.backoff = config_.timeouts.backoff_first;
  if (a.give_up < Clock::now()) a.give_up = Clock::now() + config_.timeouts.reconnect;
  dial(peer);
}

void Dialler::learned(int peer) {
  if (!attempts_[peer]) return;  // not a neighbour: its address is passed on, and may relay
  Attempt& a = *attempts_[peer];
  a.endpoints = {};
  if (a.phase != DialPhase::kAwaitingAddress || links_[peer].up()) return;
  a.phase = DialPhase::kIdle;
  dial_afresh(peer);
}

void Dialler::dial_all() {
  // First the neighbours that dial us anyway (a lower rank on our side of a NAT) have their
  // moment; then we dial whoever has not come; then, for a link that did not form either way
  // (its other end cannot be dialled either), we ask the relays too.
  auto timer = rv_.new_timer(kDialBackAfter);
  timer->async_wait([this, timer](std::error_code ec) {
    if (ec || rv_.stopping()) return;
    for (int p : links_.neighbours())
      if (!later(p) && !dialling(p) && !hooks_.asking_relays(p) && !links_[p].up())
        dial_afresh(p);
    auto relay = rv_.new_timer(kDialBackAfter);
    relay->async_wait([this, relay](std::error_code e) {
      if (e || rv_.stopping()) return;
      for (int p : links_.neighbours())
        if (!later(p) && !links_[p].up()) hooks_.ask_relays(p);
    });
  });
}

void Dialler::expect(const std::vector<int>& peers) {
  for (int p : peers) {
    if (p <= config_.rank || !attempts_[p] || !attempts_[p]->later) continue;
    if (dialling(p) || links_[p].up()) continue;
    attempts_[p]->give_up = Clock::time_point::max();  // until it comes (it starts when it joins)
    attempts_[p]->backoff = config_.timeouts.backoff_first;
    dial(p);
  }
}

void Dialler::dial(int peer) {
  Attempt& a = *attempts_[peer];
  if (links_[peer].up() && links_[peer].session && !links_[peer].session->closed()) {
    a.phase = DialPhase::kIdle;  // it dialled us meanwhile (it cannot be dialled)
    return;
  }
  const std::string address = addresses_.address_of(peer);
  if (address.empty()) {
    // Not listed, and its signed record has not reached us: dialled once it does (learned).
    a.phase = DialPhase::kAwaitingAddress;
    links_[peer].fail({LinkFailureKind::kNoAddress,
                       cat("no address for peer ", peer, " yet (not listed; it is learned from "
                           "the peer's signed record)")});
    return;
  }
  a.phase = DialPhase::kDialling;
  auto socket = std::make_shared<asio::ip::tcp::socket>(io_);
  auto timed_out = std::make_shared<bool>(false);
  a.connecting = socket;
  a.timer.expires_after(config_.timeouts.handshake);
  a.timer.async_wait([socket, timed_out](std::error_code ec) {
    std::error_code ignored;
    if (ec) return;
    *timed_out = true;
    socket->close(ignored);  // connect took too long: its handler sees the error
  });
  if (a.endpoints.empty()) a.endpoints = rv_.endpoints_of(address);
  asio::async_connect(*socket, a.endpoints,
                      [this, peer, socket, timed_out, address](std::error_code ec,
                                                               const asio::ip::tcp::endpoint&) {
                        connect_done(peer, ec, *timed_out, address, socket);
                      });
}

void Dialler::connect_done(int peer, const std::error_code& ec, bool timed_out,
                           const std::string& address,
                           std::shared_ptr<asio::ip::tcp::socket> socket) {
  Attempt& a = *attempts_[peer];
  a.timer.cancel();
  a.connecting.reset();
  if (rv_.stopping()) return;
  if (ec) {
    links_[peer].fail(connect_failure(ec, timed_out, config_.timeouts.handshake, address));
    return retry(peer, cat("connect: ", ec.message()));
  }
  hooks_.connected(peer, std::move(*socket));
}

void Dialler::formed(int peer) { attempts_[peer]->backoff = config_.timeouts.backoff_first; }

void Dialler::retry(int peer, const std::string& why) {
  Attempt& a = *attempts_[peer];
  if (links_[peer].up()) return;
  // We cannot be dialled, and we cannot dial it (yet): ask the relays too (the other end, if it
  // cannot be dialled either, asks the same relays in the same order), and dial on beside them:
  // the other end may only have been starting, and be reachable.
  if (reach_.unreachable()) hooks_.ask_relays(peer);
  if (!a.later && Clock::now() + a.backoff > a.give_up) return give_up(peer, why);
  a.timer.expires_after(a.backoff);
  a.backoff = std::min(a.backoff * 2, a.later ? kLaterRedial : config_.timeouts.backoff_max);
  a.timer.async_wait([this, peer](std::error_code ec) {
    if (!ec && !rv_.stopping()) dial(peer);
  });
}

void Dialler::give_up(int peer, const std::string& why) {
  // Gone for the run's purposes; but a restarted peer comes back at the same address, so keep
  // dialling now and then (quietly) until we shut down.
  Link& link = links_[peer];
  if (link.state() != LinkState::kGone)
    link.become(LinkState::kGone,
                cat("peer ", peer, " (", addresses_.address_of(peer), "): giving up dialling (",
                    why, "); trying again every ", kRejoinRedial.count(),
                    " ms in case it restarts"));
  Attempt& a = *attempts_[peer];
  a.timer.expires_after(kRejoinRedial);
  a.timer.async_wait([this, peer](std::error_code ec) {
    if (!ec && !rv_.stopping() && links_[peer].state() == LinkState::kGone) dial(peer);
  });
}

void Dialler::dial_between_relays(int peer) {
  Attempt& a = *attempts_[peer];
  // A dial on its way, or waiting its turn: its failure asks the relays again.
  if (a.connecting || dialling(peer)) return;
  a.phase = DialPhase::kDialling;
  a.timer.expires_after(std::max(a.backoff, kAskAgain));
  a.timer.async_wait([this, peer](std::error_code ec) {
    if (!ec && !rv_.stopping() && !links_[peer].up()) dial(peer);
  });
}

void Dialler::redial_lost(int peer) {
  if (!we_dial(peer) || dialling(peer) || hooks_.asking_relays(peer)) return;
  attempts_[peer]->give_up = Clock::now() + config_.timeouts.reconnect;
  attempts_[peer]->backoff = config_.timeouts.backoff_first;
  dial(peer);
}

void Dialler::shutdown() {
  std::error_code ignored;
  for (auto& a : attempts_) {
    if (!a) continue;
    a->timer.cancel();
    if (a->connecting) a->connecting->close(ignored);
  }
}

}  // namespace gossip::net
