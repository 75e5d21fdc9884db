// net/links.cpp: who talks to whom. Accepts handshakes from lower-ranked neighbours, dials the
// higher-ranked ones with exponential back-off, turns lost links into kDown (redialling when we
// are the dialler) and into kGone after the reconnect window.
#include "src/net/links.hpp"

#include <algorithm>
#include <cstring>

#include "gossip/core.hpp"
#include "src/net/socket.hpp"

namespace gossip::net {
namespace {
constexpr double kRefusalBurst = 20;   // refusal lines logged at once
constexpr double kRefusalsPerSecond = 1;  // and then at most this many a second
constexpr std::chrono::milliseconds kRejoinRedial{250};  // dialling a gone peer again
// Dialling an expected later neighbour (an elastic run's joiner, starting up): often, so that it
// is connected soon after it listens (a refused connect on a host costs next to nothing).
constexpr std::chrono::milliseconds kLaterRedial{50};
// Heartbeats: a link with nothing else to carry gets our view every kIdle, so that silence
// means a stopped or cut-off peer (NetTimeouts::silent is a few of these), never a busy one.
constexpr std::chrono::milliseconds kHeartbeatCheck{100};  // how often idle links are checked
constexpr std::chrono::milliseconds kIdle{250};            // a link this quiet gets the view
// Our own heartbeat timer firing this late means this process was stopped (SIGSTOP) or starved:
// the neighbours' silence meanwhile is ours (Lifeguard's local health), so it is forgiven.
constexpr std::chrono::milliseconds kOwnStall{750};
// Alerts about one identity's second connections: at most one per this period per rank.
constexpr std::chrono::seconds kConflictAlertEvery{5};
// An unreachable peer dials the neighbours that have not dialled it this long after it found out
// (a lower rank on its side of a NAT dials it within a few ms), and asks the relays for the links
// that have not formed as long again.
constexpr std::chrono::milliseconds kDialBackAfter{300};
// A peer whose address is not listed waits this long for its lower-ranked neighbours to dial it
// (they learn its address from its signed record) before it dials them itself.
constexpr std::chrono::milliseconds kUnlistedWait{1'000};

}  // namespace

Links::Links(asio::io_context& io, asio::ip::tcp::acceptor& acceptor, const NetConfig& config,
             std::uint64_t max_frame_bytes, Mailboxes& mailboxes,
             std::vector<asio::ip::tcp::resolver::results_type> endpoints)
    : io_(io), acceptor_(acceptor), config_(config), max_frame_bytes_(max_frame_bytes),
      mail_(mailboxes), links_(config.size), accept_retry_(io), heartbeat_(io), sent_to_(config.size),
      received_from_(config.size), refusal_tokens_(kRefusalBurst),
      run_tag_(wire::rendezvous_tag(config.handshake.run_id)) {
  if (config.reachable == ReachableSetting::kYes)
    reach_ = {Reachability::kReachable, true, "net.reachable: yes (not checked)"};
  else if (config.reachable == ReachableSetting::kNo)
    reach_ = {Reachability::kUnreachable, true, "net.reachable: no (not checked)"};
  addresses_ = config.addresses;
  learned_.assign(config.addresses.size(), false);
  if (config.tls.enabled)
    tls_ = make_tls_context(config.tls, config.handshake.run_id, config.rank);
  book_ = std::make_unique<AddressBook>(tls_ ? tls_->native_handle() : nullptr,
                                        config.handshake.run_id, config.rank, config.size,
                                        config.addresses[config.rank]);
  if (!config.tls.enabled)
    log("WARNING: TLS is off (net.tls: off): anyone who can reach this peer's port can join "
        "the run and read or forge its parameters");
  hello_.protocol_version = wire::kVersion;
  hello_.rank = config.rank;
  hello_.info = config.handshake;
  // Slots in our segment, reused round-robin: a same-host neighbour must copy a round out before
  // we have published this many more (else it sees a torn read and drops that round), and it
  // may hold up to max_queued_rounds of ours.
  const std::size_t slots = std::max<std::size_t>(4, config.max_queued_rounds + 1);
  if (config.shared_memory && slots > kMaxShmSlots) {
    log(cat("shared memory off: neighbours may hold ", config.max_queued_rounds,
            " of our rounds, more than ", kMaxShmSlots - 1, " slots; parameters go over TCP"));
  } else if (config.shared_memory) {
    std::string why;
    shm_ = ShmSegment::create(config.handshake.param_count, config.handshake.wire,
                              static_cast<std::uint32_t>(slots), &why);
    if (shm_) hello_.shm = shm_->offer();
    else log(cat("shared memory unavailable (", why, "); every link carries parameters over TCP"));
  }
  for (int p : mail_.neighbours()) {
    links_[p] = std::make_unique<Link>(io);
    if (p < static_cast<int>(endpoints.size())) links_[p]->endpoints = std::move(endpoints[p]);
  }
}

void Links::log(const std::string& line) { config_.log(cat("net[", config_.rank, "]: ", line)); }

void Links::log_refusal(const std::string& line) {
  const auto now = Clock::now();
  refusal_tokens_ = std::min(kRefusalBurst,
                             refusal_tokens_ + kRefusalsPerSecond *
                                 std::chrono::duration<double>(now - refusal_refill_).count());
  refusal_refill_ = now;
  if (refusal_tokens_ < 1) {
    ++refusals_unlogged_;
    return;
  }
  refusal_tokens_ -= 1;
  if (refusals_unlogged_ == 0) return log(line);
  log(cat(line, " (", refusals_unlogged_, " more refusals since the last one not logged)"));
  refusals_unlogged_ = 0;
}

std::size_t Links::unfinished_handshakes() const {
  std::size_t n = 0;
  for (const auto& w : sessions_)
    if (auto s = w.lock(); s && s->role() == Session::Role::kAccepted && !s->established() &&
                           !s->closed())
      ++n;
  return n;
}

void Links::start(Clock::time_point give_up) {
  accept();
  heartbeat();
  if (config_.reachable == ReachableSetting::kAuto)
    check_reachability(Clock::now() + config_.timeouts.start / 2);
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
    log(cat("this peer's address ", addresses_[config_.rank], " is not in the run's "
            "configuration: its signed record tells the members where it is, and it dials the "
            "neighbours that have not dialled it within ", kUnlistedWait.count(), " ms"));
    auto timer = new_timer(kUnlistedWait);
    timer->async_wait([this, timer](std::error_code ec) {
      if (ec || stopping_) return;
      for (int p : mail_.neighbours())
        if (Link& l = *links_[p]; p < config_.rank && !l.later && !l.dialling &&
                                  mail_.state(p) != LinkState::kUp) {
          l.backoff = config_.timeouts.backoff_first;
          if (l.give_up < Clock::now()) l.give_up = Clock::now() + config_.timeouts.reconnect;
          dial(p);
        }
    });
  }
  if (reach_.state == Reachability::kUnreachable) dial_all();
  ask_addresses(give_up);
}

bool Links::we_dial(int peer) const {
  return config_.rank < peer || reach_.state == Reachability::kUnreachable || !config_.listed;
}

std::string Links::address_of(int peer) const {
  std::lock_guard lk(addr_mu_);
  return addresses_[peer];
}

std::vector<PeerAddress> Links::addresses() const {
  std::lock_guard lk(addr_mu_);
  std::vector<PeerAddress> out;
  for (int r = 0; r < config_.size; ++r) {
    const AddressSource source = r == config_.rank      ? AddressSource::kOwn
                                 : learned_[r]          ? AddressSource::kLearned
                                 : addresses_[r].empty() ? AddressSource::kUnknown
                                                         : AddressSource::kListed;
    out.push_back({r, addresses_[r], source});
  }
  return out;
}

void Links::learned(int peer, const std::string& address, int from) {
  std::string before;
  {
    std::lock_guard lk(addr_mu_);
    before = std::exchange(addresses_[peer], address);
    learned_[peer] = true;
  }
  if (before != address)
    log(cat("peer ", peer, " announces ", address, " (its signed record, passed on by peer ",
            from, before.empty() ? ")" : cat("; listed as ", before, ")")));
  if (!links_[peer]) return;  // not a neighbour: its address is passed on, and may relay
  Link& l = *links_[peer];
  l.endpoints = {};
  if (!l.awaiting_address || l.dialling || mail_.state(peer) == LinkState::kUp) return;
  l.awaiting_address = false;
  l.backoff = config_.timeouts.backoff_first;
  if (l.give_up < Clock::now()) l.give_up = Clock::now() + config_.timeouts.reconnect;
  dial(peer);
}

void Links::on_established(Session& s) {
  const int p = s.peer();
  if (p < 0 || p >= config_.size || !links_[p] || links_[p]->session.get() != &s) return;
  for (const FrameBytes& frame : book_->frames()) s.send_view(frame);  // queued as a view is
}

void Links::on_address(Session& s, const wire::AddressRecord& record) {
  take_record(record, s.peer());
}

void Links::dial_all() {
  // First the neighbours that dial us anyway (a lower rank on our side of a NAT) have their
  // moment; then we dial whoever has not come; then, for a link that did not form either way
  // (its other end cannot be dialled either), we ask the relays too.
  auto timer = new_timer(kDialBackAfter);
  timer->async_wait([this, timer](std::error_code ec) {
    if (ec || stopping_) return;
    for (int p : mail_.neighbours()) {
      Link& l = *links_[p];
      if (l.later || l.dialling || l.relaying || mail_.state(p) == LinkState::kUp) continue;
      l.backoff = config_.timeouts.backoff_first;
      if (l.give_up < Clock::now()) l.give_up = Clock::now() + config_.timeouts.reconnect;
      dial(p);
    }
    auto relay = new_timer(kDialBackAfter);
    relay->async_wait([this, relay](std::error_code e) {
      if (e || stopping_) return;
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

void Links::track(const std::shared_ptr<Session>& s) {
  std::erase_if(sessions_, [](const std::weak_ptr<Session>& w) { return w.expired(); });
  sessions_.push_back(s);
}

void Links::accept() {
  acceptor_.async_accept([this](std::error_code ec, asio::ip::tcp::socket socket) {
    if (stopping_) return;
    if (ec) {
      log(cat("accept failed: ", ec.message(), "; retrying in 100 ms"));
      accept_retry_.expires_after(std::chrono::milliseconds(100));
      accept_retry_.async_wait([this](std::error_code e) {
        if (!e && !stopping_) accept();
      });
      return;
    }
    std::erase_if(sessions_, [](const std::weak_ptr<Session>& w) { return w.expired(); });
    if (const std::size_t n = unfinished_handshakes() + sniffing_ + serving_;
        n >= config_.max_pending_handshakes) {
      log_refusal(cat("connection from ", remote_name(socket), " refused: ", n,
                      " connections have not finished their handshake (the limit)"));
      std::error_code ignored;
      socket.close(ignored);
      return accept();
    }
    auto s = std::make_shared<asio::ip::tcp::socket>(std::move(socket));
    watch(s);
    sniff(s);
    accept();
  });
}

void Links::sniff(std::shared_ptr<asio::ip::tcp::socket> socket) {
  // The first byte says what the connection is: a rendezvous message, or a session (TLS, or a
  // hello frame). Peeked, not read: a session's stream starts with it.
  ++sniffing_;
  auto first = std::make_shared<std::array<std::byte, 1>>();
  auto timer = close_after(socket, config_.timeouts.handshake).timer;  // said nothing by then
  socket->async_receive(asio::buffer(*first), asio::socket_base::message_peek,
                        [this, socket, first, timer](std::error_code ec, std::size_t n) {
                          --sniffing_;
                          timer->cancel();
                          if (stopping_) return;
                          if (ec || n == 0) {
                            log_refusal(cat("connection from ", remote_name(*socket),
                                            " closed before it said anything"));
                            return;
                          }
                          if (wire::is_rendezvous_start((*first)[0]))
                            return serve_rendezvous(socket);
                          start_session(std::move(*socket));
                        });
}

void Links::start_session(asio::ip::tcp::socket socket) {
  tune(socket);
  auto s = std::make_shared<Session>(std::move(socket), *this, Session::Role::kAccepted, -1);
  track(s);
  s->start();
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
  if (l.endpoints.empty()) l.endpoints = endpoints_of(address);
  asio::async_connect(*socket, l.endpoints,
                      [this, peer, socket, timed_out, address](std::error_code ec,
                                                      const asio::ip::tcp::endpoint&) {
                        Link& link = *links_[peer];
                        link.dial_timer.cancel();
                        link.connecting.reset();
                        if (stopping_) return;
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
  if (reach_.state == Reachability::kUnreachable && !l.relaying &&
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
      if (!ec && !stopping_ && mail_.state(peer) == LinkState::kGone) dial(peer);
    });
    return;
  }
  l.dial_timer.expires_after(l.backoff);
  l.backoff = std::min(l.backoff * 2, l.later ? kLaterRedial : config_.timeouts.backoff_max);
  l.dial_timer.async_wait([this, peer](std::error_code ec) {
    if (!ec && !stopping_) dial(peer);
  });
}

std::optional<wire::Refusal> Links::on_hello(Session& s, const wire::Hello& hello,
                                             std::uint32_t sender) {
  using wire::RefusalKind;
  if (tls_ && s.cert_rank() != hello.rank)
    return wire::Refusal{RefusalKind::kIdentity,
                         cat("hello claims rank ", hello.rank, ", but its certificate is for rank ",
                             s.cert_rank())};
  const int p = hello.rank;
  const int me = config_.rank;
  const bool claimable = p >= 0 && p < config_.size && p != me && mail_.is_neighbour(p);
  // Both ends dialled at once (the higher one cannot be dialled, or believes so): the
  // connection the lower rank dialled is the link on both ends; this one replaces the other.
  const bool preferred = claimable && p < me && links_[p]->session &&
                         !links_[p]->session->closed() && !dialled_by_lower(*links_[p]->session);
  // An identity a certificate proves, whose link is live, is taken whatever else this hello
  // says (a duplicate learns nothing more). Without TLS a rank is only a claim: the handshake's
  // own refusals come first.
  if (tls_ && claimable && !preferred)
    if (auto refusal = identity_conflict(p, s)) return refusal;
  if (auto refusal = wire::refusal_of(hello_, hello)) return refusal;
  if (!tls_ && claimable && !preferred)
    if (auto refusal = identity_conflict(p, s)) return refusal;
  if (p < 0 || p >= config_.size)
    return wire::Refusal{RefusalKind::kMembership,
                         cat("rank ", p, " is not in this run of ", config_.size, " peers")};
  if (static_cast<std::int64_t>(sender) != p)
    return wire::Refusal{RefusalKind::kIdentity, cat("hello from sender ", sender,
                                                     " claims rank ", p)};
  if (p == me) return wire::Refusal{RefusalKind::kMembership, cat("it claims our own rank ", me)};
  if (!mail_.is_neighbour(p))
    return wire::Refusal{RefusalKind::kMembership, cat("peer ", p, " is not a neighbour of ", me)};
  // The lower rank of a pair dials; but a joiner (a later neighbour, not yet connected) dials
  // the members it was told to contact, and a peer that cannot be dialled dials all of its
  // neighbours: a higher rank's dial is taken while the link is not up.
  if (p > me && mail_.state(p) == LinkState::kUp && links_[p]->session &&
      !links_[p]->session->closed())
    return wire::Refusal{RefusalKind::kDuplicate,
                         cat("peer ", p, " dialled us, but its link is up (the lower rank's dial "
                             "is the link)")};
  adopt(p, s, hello);
  return std::nullopt;
}

std::optional<wire::Refusal> Links::identity_conflict(int peer, const Session& s) {
  Link& l = *links_[peer];
  // The link we have is live (it is up and we heard from it within the silence bound): a second
  // connection with the same certificate is someone else holding that identity, or a copy of
  // the peer started twice. The first stays. (A restarted peer's old connection is closed, or
  // falls silent, so its new one is taken; and when this process was itself stopped, the link
  // that carried nothing meanwhile is taken for closed, as is any link in the grace after such a
  // stop: the neighbour closed it on us and redials, before we have read its close.)
  const double silent_s = static_cast<double>(config_.timeouts.silent.count()) / 1000.0;
  if (!l.session || !l.session->established() || l.session->closed() ||
      mail_.state(peer) != LinkState::kUp || mail_.recovering() ||
      (silent_s > 0 && (mail_.silent_for(peer) >= silent_s ||
                        mail_.frame_silence(peer) >= silent_s)))
    return std::nullopt;
  ++l.conflicts;
  const std::string why =
      cat("identity_conflict: ", s.remote(), " presented the identity of peer ", peer,
          ", which is already connected from ", l.session->remote(),
          "; refused (the first connection stays)");
  const auto now = Clock::now();
  if (l.conflicts == 1 || now - l.last_conflict_alert >= kConflictAlertEvery) {
    mail_.alert(TransportAlert{MemberEventKind::kIdentityConflict, peer,
                               l.conflicts == 1 ? why
                                                : cat(why, " (", l.conflicts,
                                                      " such connections so far)")});
    l.last_conflict_alert = now;
  }
  return wire::Refusal{wire::RefusalKind::kIdentity, why};
}

bool Links::dialled_by_lower(const Session& s) const {
  // A relayed connection's TLS client is always the lower rank (start_relayed).
  return (s.role() == Session::Role::kDialled) == (config_.rank < s.peer());
}

void Links::on_hello_ack(Session& s, const wire::Hello& hello) {
  Link& l = *links_[s.peer()];
  l.dialling = false;
  if (l.session && l.session.get() != &s && !l.session->closed() &&
      mail_.state(s.peer()) == LinkState::kUp && dialled_by_lower(*l.session) &&
      !dialled_by_lower(s)) {
    // The neighbour's own dial came first and is the link (both ends keep the lower rank's).
    s.close("", CloseKind::kShutdown);
    return;
  }
  l.backoff = config_.timeouts.backoff_first;
  adopt(s.peer(), s, hello);
}

std::unique_ptr<ShmView> Links::map_segment(int peer, const wire::Hello& hello) {
  if (!shm_ || !hello.shm || hello.shm->host_key != host_key()) return nullptr;  // another host
  std::string why;
  auto view = ShmView::open(*hello.shm, config_.handshake.param_count, config_.handshake.wire,
                            &why);
  if (view)
    log(cat("peer ", peer, " is on this host: its parameters come through shared memory"));
  else
    log(cat("peer ", peer, " is on this host, but its shared memory cannot be used (", why,
            "); its parameters come over TCP"));
  return view;
}

void Links::adopt(int peer, Session& s, const wire::Hello& hello) {
  Link& l = *links_[peer];
  // Only a connection that proved the same identity (the rank's certificate, when TLS is on)
  // gets here. What the old one had not finished sending goes out on the new one, so the
  // round in flight is not lost with the old connection.
  if (auto old = std::exchange(l.session, nullptr); old && !old->closed()) {
    s.inherit(old->take_publishes());
    log(cat(old->who(), ": replaced by a new connection from the same peer (what it sent on the "
            "old one is still read)"));
    old->retire(config_.timeouts.handshake);
  }
  l.session = s.shared_from_this();
  s.attach_shm(map_segment(peer, hello));  // before the link counts as up
  l.gone_timer.cancel();
  l.later = false;  // it came: a later loss is redialled, and given up on, as any other
  l.relaying = false;
  const double rtt = s.rtt_ms();
  if (s.relayed())
    mail_.note_path(peer, LinkPath::kRelayed, -1, s.relay(), s.relay_address(), rtt);
  else
    mail_.note_path(peer, LinkPath::kDirect,
                    s.role() == Session::Role::kDialled ? config_.rank : peer, -1, "", rtt);
  mail_.set_state(peer, LinkState::kUp);
  log(cat(s.who(), " connected",
          s.relayed() ? cat(" through the relay ", s.relay_address()) : std::string()));
  // An elastic run's membership changes reach a link that comes up later too.
  if (last_announce_) s.send_view(last_announce_);
}

void Links::on_closed(Session& s, CloseKind kind, const std::string& why) {
  if (stopping_) return;
  const int p = s.peer();
  if (p < 0 || p >= config_.size || !links_[p]) return;  // a stranger
  Link& l = *links_[p];
  if (l.session.get() != &s) {
    // Not the live link: a handshake that failed (or a replaced connection).
    if (s.relayed() && s.altered() && mail_.state(p) != LinkState::kUp) {
      l.relays_refused.push_back(s.relay_address());
      mail_.alert(TransportAlert{MemberEventKind::kRelayAltered, p,
                                 cat("the relay ", s.relay_address(), " altered the handshake "
                                     "with peer ", p, " (", why, "); not using it for this link "
                                     "again")});
    }
    if (s.relayed() && mail_.state(p) != LinkState::kUp) {  // either end: to the relays again
      if (!why.empty())
        mail_.note_failure(p, {s.altered() ? LinkFailureKind::kRelayAltered : s.failure(),
                               cat("handshake through the relay ", s.relay_address(), ": ", why)});
      l.dialling = false;
      return retry(p, why.empty() ? "handshake failed" : why);
    }
    if (s.role() == Session::Role::kAccepted && mail_.state(p) != LinkState::kUp &&
        (s.failure() == LinkFailureKind::kModel || s.failure() == LinkFailureKind::kTopology))
      // We refused its hello: the two ends train different models (or graphs), and the link
      // cannot form whoever dials. (A caller refuses to start then: PeerSession::connect.)
      mail_.note_failure(p, {s.failure(), cat("handshake from ", s.remote(), ": refused: ",
                                              s.refusal_text())});
    if (s.role() == Session::Role::kDialled && mail_.state(p) != LinkState::kUp) {
      if (!why.empty())
        mail_.note_failure(p, {s.failure(), cat("handshake with ", address_of(p), ": ", why)});
      if (kind == CloseKind::kRefused && !s.altered()) {
        l.dialling = false;
        mail_.set_state(p, LinkState::kGone);
      } else {
        retry(p, why.empty() ? "handshake failed" : why);
      }
    }
    return;
  }
  l.session.reset();
  if (s.relayed() && s.altered()) {
    // The records passed the relay intact or not at all: it altered them. Not that relay again.
    l.relays_refused.push_back(s.relay_address());
    mail_.alert(TransportAlert{MemberEventKind::kRelayAltered, p,
                               cat("the relay ", s.relay_address(), " altered the link to peer ",
                                   p, " (", why, "); not using it for this link again")});
  }
  if (kind == CloseKind::kBye) mail_.set_left(p);
  if (kind == CloseKind::kBye || kind == CloseKind::kRefused) {
    mail_.set_state(p, LinkState::kGone);
    return;
  }
  mail_.note_failure(p, {LinkFailureKind::kLost,
                         why.empty() ? std::string("link lost") : cat("link lost: ", why)});
  mail_.set_state(p, LinkState::kDown);
  const bool dials = we_dial(p);
  log(cat("peer ", p, ": link lost; ", dials ? "redialling" : "waiting for it to redial",
          " for up to ", config_.timeouts.reconnect.count(), " ms"));
  watch_gone(p);
  if (dials && !l.dialling && !l.relaying) {
    l.give_up = Clock::now() + config_.timeouts.reconnect;
    l.backoff = config_.timeouts.backoff_first;
    dial(p);
  }
}

void Links::watch_gone(int peer) {
  Link& l = *links_[peer];
  l.gone_timer.expires_after(config_.timeouts.reconnect);
  l.gone_timer.async_wait([this, peer](std::error_code ec) {
    if (ec || stopping_ || links_[peer]->gone_timer.expiry() > Clock::now()) return;
    if (mail_.transition(peer, LinkState::kDown, LinkState::kGone))
      log(cat("peer ", peer, " did not come back within ", config_.timeouts.reconnect.count(),
              " ms"));
  });
}

void Links::publish(std::int64_t round, std::span<const std::byte> values,
                    std::shared_ptr<const void> keep, double weight, const std::vector<int>& to,
                    std::vector<SendToken> tokens) {
  // A link that is down takes nothing (its loss was logged): its token ends the send here.
  std::vector<std::pair<Session*, SendToken>> by_shm, by_tcp;
  for (std::size_t i = 0; i < to.size(); ++i) {
    Link& l = *links_[to[i]];
    if (l.session && l.session->established() && !l.session->closed())
      (l.session->peer_reads_shm() ? by_shm : by_tcp)
          .emplace_back(l.session.get(), std::move(tokens[i]));
    if (l.session) sent_to(to[i]);
  }
  const auto body = values;
  // Same-host neighbours: one copy into our segment, then a small frame each.
  if (!by_shm.empty()) {
    const wire::ShmNote note = shm_->write(weight, body);
    auto frame = std::make_shared<const std::vector<std::byte>>(wire::encode_frame(
        wire::FrameType::kShmParams, static_cast<std::uint32_t>(config_.rank), round,
        wire::encode_shm_note(note)));
    for (auto& [s, token] : by_shm)
      s->send_shm_note(frame, wire::kWeightBytes + body.size(), std::move(token));
  }
  if (by_tcp.empty()) return;
  // The header is the same for every target: compute the CRC (weight, then values) once. Under
  // TLS the frame travels in our records, whose AEAD tag authenticates every byte: no CRC, 0.
  auto head = std::make_shared<std::vector<std::byte>>(wire::kHeaderBytes + wire::kWeightBytes);
  std::memcpy(head->data() + wire::kHeaderBytes, &weight, sizeof weight);
  const auto weight_bytes = std::span(*head).subspan(wire::kHeaderBytes);
  wire::FrameHeader h;
  h.type = wire::FrameType::kParams;
  h.sender = static_cast<std::uint32_t>(config_.rank);
  h.round = round;
  h.payload_bytes = wire::kWeightBytes + body.size();
  h.payload_crc = tls_ ? 0 : wire::crc32c(body, wire::crc32c(weight_bytes));
  const auto header = wire::encode_header(h);
  std::copy(header.begin(), header.end(), head->begin());
  for (auto& [s, token] : by_tcp) s->send_params(head, body, keep, round, std::move(token));
}

void Links::send_ready(std::int64_t round) {
  for (int p : mail_.neighbours())
    if (Link& l = *links_[p]; l.session && l.session->established() && !l.session->closed())
      l.session->send_ready(round);
}

void Links::detach_held() {
  for (auto& w : sessions_)
    if (auto s = w.lock()) s->detach_held();
}

void Links::publish_packet(std::int64_t round, std::span<const std::byte> packet,
                           const std::vector<int>& to, std::vector<SendToken> tokens) {
  wire::FrameHeader h;
  h.type = wire::FrameType::kPacket;
  h.sender = static_cast<std::uint32_t>(config_.rank);
  h.round = round;
  h.payload_bytes = packet.size();
  h.payload_crc = wire::crc32c(packet);
  const auto header = wire::encode_header(h);
  auto head = std::make_shared<const std::vector<std::byte>>(header.begin(), header.end());
  for (std::size_t i = 0; i < to.size(); ++i) {
    Link& l = *links_[to[i]];
    // A link that is down takes nothing (its loss was logged): its token ends the send here.
    if (l.session && l.session->established() && !l.session->closed())
      l.session->send_params(head, packet, nullptr, -1, std::move(tokens[i]));
    if (l.session) sent_to(to[i]);
  }
}

void Links::send_view(std::shared_ptr<const std::vector<std::byte>> frame,
                      std::shared_ptr<const std::vector<std::byte>> heartbeat,
                      const std::vector<int>& to) {
  last_view_ = std::move(heartbeat);
  for (int p : to)
    if (Link& l = *links_[p]; l.session && l.session->established() && !l.session->closed()) {
      l.session->send_view(frame);
      sent_to(p);
    }
}

void Links::send_announce(std::shared_ptr<const std::vector<std::byte>> frame,
                          const std::vector<int>& to) {
  last_announce_ = frame;
  for (int p : to)
    if (Link& l = *links_[p]; l.session && l.session->established() && !l.session->closed())
      l.session->send_view(frame);  // a control frame, queued as a view is
}

void Links::heartbeat() {
  heartbeat_.expires_after(kHeartbeatCheck);
  const auto due = heartbeat_.expiry();
  heartbeat_.async_wait([this, due](std::error_code ec) {
    if (ec || stopping_) return;
    const auto now = Clock::now();
    if (now - due >= kOwnStall) {
      // Before the tick: silence is judged again only after this; and the links closed on us
      // meanwhile get the time a redial takes before anyone is suspected for them.
      mail_.excuse_silence(std::max(std::chrono::milliseconds(3000), 3 * config_.timeouts.silent));
      log(cat("this peer was stopped or starved for ",
              std::chrono::duration_cast<std::chrono::milliseconds>(now - due).count(),
              " ms: its neighbours' silence meanwhile is not held against them"));
    }
    mail_.io_tick();
    abandon_stalled_writes();
    if (last_view_)
      for (int p : mail_.neighbours())
        if (Link& l = *links_[p]; l.session && l.session->established() &&
                                  !l.session->closed() && now - l.last_sent >= kIdle) {
          l.session->send_view(last_view_);
          l.last_sent = now;
        }
    heartbeat();
  });
}

void Links::abandon_stalled_writes() {
  if (config_.timeouts.silent.count() <= 0) return;
  // Twice the silence bound: a peer back on a new connection before then takes the round in
  // flight over (adopt()).
  const double stuck_s = 2.0 * static_cast<double>(config_.timeouts.silent.count()) / 1000.0;
  for (int p : mail_.neighbours())
    if (Link& l = *links_[p]; l.session && l.session->established() && !l.session->closed() &&
                              l.session->writing() && mail_.silent_for(p) >= stuck_s)
      // A stopped peer reads nothing: our write to it would hold the caller's buffer (and its
      // collect) until the write deadline. Closing frees both; the peer reconnects when it wakes.
      l.session->close(cat("silent for ", static_cast<int>(mail_.silent_for(p) * 1000),
                           " ms with a write to it stalled; closing the link (it reconnects if "
                           "it comes back)"),
                       CloseKind::kError);
}

void Links::shutdown() {
  stopping_ = true;
  std::error_code ignored;
  acceptor_.close(ignored);
  accept_retry_.cancel();
  heartbeat_.cancel();
  for (auto& l : links_) {
    if (!l) continue;
    l->dial_timer.cancel();
    l->gone_timer.cancel();
    if (l->connecting) l->connecting->close(ignored);
    l->session.reset();
  }
  waiting_.clear();
  // Rendezvous in flight (asks, dial-backs, relay waits) end; links we relay run on (splice).
  for (auto& w : rendezvous_timers_)
    if (auto t = w.lock()) t->cancel();
  for (auto& w : rendezvous_sockets_)
    if (auto sock = w.lock(); sock && !spliced(*sock)) sock->close(ignored);
  for (auto& w : sessions_)
    if (auto s = w.lock()) s->say_bye();  // established: bye, then close; else close now
  sessions_.clear();
  if (refusals_unlogged_ > 0)
    log(cat(refusals_unlogged_, " more refusals of unauthenticated connections not logged"));
}


void Links::count_sent(int peer, std::size_t bytes) {
  bytes_sent_ += bytes;
  if (peer >= 0 && peer < static_cast<int>(sent_to_.size())) sent_to_[peer] += bytes;
}

void Links::count_received(int peer, std::size_t bytes) {
  if (peer >= 0 && peer < static_cast<int>(received_from_.size())) received_from_[peer] += bytes;
}

std::vector<LinkTraffic> Links::link_traffic() const {
  std::vector<LinkTraffic> out;
  for (int p = 0; p < static_cast<int>(links_.size()); ++p)
    if (links_[p]) out.push_back({p, sent_to_[p].load(), received_from_[p].load()});
  return out;
}

}  // namespace gossip::net
