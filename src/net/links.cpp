// net/links.cpp: which handshakes become the link to a neighbour. Accepts handshakes from
// lower-ranked neighbours (and, of a pair that dialled at once, keeps the lower rank's), takes
// over what a replaced connection had not sent, turns lost links into kDown (the dialler
// redials when we dial) and into kGone after the reconnect window; and wires the parts together.
#include "src/net/links.hpp"

#include <algorithm>

#include "gossip/core.hpp"
#include "src/net/socket.hpp"

namespace gossip::net {
namespace {
// Alerts about one identity's second connections: at most one per this period per rank.
constexpr std::chrono::seconds kConflictAlertEvery{5};
}  // namespace

Links::Links(asio::io_context& io, asio::ip::tcp::acceptor& acceptor, const NetConfig& config,
             std::uint64_t max_frame_bytes, Mailboxes& mailboxes,
             std::vector<asio::ip::tcp::resolver::results_type> endpoints)
    : io_(io), config_(config), max_frame_bytes_(max_frame_bytes), mail_(mailboxes),
      tls_(config.tls.enabled ? make_tls_context(config.tls, config.handshake.run_id, config.rank)
                              : nullptr),
      refusals_([this](const std::string& line) { log(line); }),
      rv_(io, config, [this](const std::string& line) { log(line); }),
      addresses_(config, rv_, tls_ ? tls_->native_handle() : nullptr, address_hooks()),
      reach_(config, rv_, addresses_, [this](const std::string& line) { log(line); },
             [this] { dialler_.dial_all(); }),
      relays_(config, rv_, reach_, [this](const std::string& line) { log(line); }),
      acceptor_(acceptor, config, rv_, refusals_, [this](const std::string& line) { log(line); },
                acceptor_hooks()),
      links_(io, config.size, mailboxes.neighbours(), mailboxes,
             [this](const std::string& line) { log(line); }),
      relay_client_(config, rv_, links_, addresses_, relay_hooks()),
      dialler_(io, config, rv_, links_, reach_, addresses_, dialler_hooks(), std::move(endpoints)),
      stream_path_(config.rank, config.tls.enabled), paths_{&stream_path_}, heartbeat_(io) {
  if (!config.tls.enabled)
    log("WARNING: TLS is off (net.tls: off): anyone who can reach this peer's port can join "
        "the run and read or forge its parameters");
  hello_.protocol_version = wire::kVersion;
  hello_.rank = config.rank;
  hello_.info = config.handshake;
  offer_shared_memory();
}

void Links::start(Clock::time_point give_up) {
  acceptor_.start();
  heartbeat();
  if (config_.reachable == ReachableSetting::kAuto)
    reach_.start(Clock::now() + config_.timeouts.start / 2);
  dialler_.start(give_up);
  addresses_.ask(give_up);
}

void Links::not_formed_by_start(int peer, const std::string& line) {
  if (Link* l = links_.find(peer); l && l->state() == LinkState::kConnecting)
    l->become(LinkState::kGone, line);
}

void Links::offer_shared_memory() {
  auto shm = ShmPath::create(config_, [this](const std::string& line) { log(line); });
  if (!shm) return;
  hello_.shm = shm->offer();
  add_side_path(std::move(shm));
}

void Links::add_side_path(std::unique_ptr<SidePath> path) {
  paths_.insert(paths_.end() - 1, path.get());  // asked before the stream, which takes all
  side_paths_.push_back(std::move(path));
}

AddressGossip::Hooks Links::address_hooks() {
  AddressGossip::Hooks h;
  h.learned = [this](int peer, const std::string&, int) { dialler_.learned(peer); };
  h.pass_on = [this](const FrameBytes& frame, int except) { pass_on(frame, except); };
  h.missing = [this] { return address_missing(); };
  h.alert = [this](TransportAlert alert) { mail_.alert(std::move(alert)); };
  h.log = [this](const std::string& line) { log(line); };
  h.log_refusal = [this](const std::string& line) { log_refusal(line); };
  return h;
}

Dialler::Hooks Links::dialler_hooks() {
  Dialler::Hooks h;
  h.connected = [this](int peer, asio::ip::tcp::socket socket) {
    start_dialled(peer, std::move(socket));
  };
  h.ask_relays = [this](int peer) { relay_client_.ask(peer); };
  h.asking_relays = [this](int peer) { return relay_client_.asking(peer); };
  h.has_relays = [this](int peer) { return relay_client_.has_relays(peer); };
  h.log = [this](const std::string& line) { log(line); };
  return h;
}

RelayClient::Hooks Links::relay_hooks() {
  RelayClient::Hooks h;
  h.start = [this](int peer, Socket socket, int relay, const std::string& address) {
    start_relayed(peer, std::move(socket), relay, address);
  };
  h.dial_between = [this](int peer) { dialler_.dial_between_relays(peer); };
  h.tune = [this](asio::ip::tcp::socket& socket) { tune(socket); };
  return h;
}

Acceptor::Hooks Links::acceptor_hooks() {
  Acceptor::Hooks h;
  h.pending = [this] {
    std::erase_if(sessions_, [](const std::weak_ptr<Session>& w) { return w.expired(); });
    return unfinished_handshakes() + serving_ + addresses_.serving();
  };
  h.rendezvous = [this](Socket socket) { serve_rendezvous(std::move(socket)); };
  h.session = [this](asio::ip::tcp::socket socket) { start_session(std::move(socket)); };
  return h;
}

bool Links::address_missing() const {
  for (int p : links_.neighbours())
    if (!dialler_.later(p) && address_of(p).empty() && !links_[p].up()) return true;
  return false;
}

void Links::pass_on(const FrameBytes& frame, int except) {
  for (int p : links_.neighbours())
    if (Link& l = links_[p]; p != except && l.live())
      l.session->send_view(frame);  // a control frame, queued as a view is
}

void Links::log(const std::string& line) { config_.log(cat("net[", config_.rank, "]: ", line)); }

void Links::log_refusal(const std::string& line) { refusals_(line); }

std::size_t Links::unfinished_handshakes() const {
  std::size_t n = 0;
  for (const auto& w : sessions_)
    if (auto s = w.lock(); s && s->role() == Session::Role::kAccepted && !s->established() &&
                           !s->closed())
      ++n;
  return n;
}

void Links::on_established(Session& s) {
  const int p = s.peer();
  if (Link* l = links_.find(p); !l || l->session.get() != &s) return;
  for (const FrameBytes& frame : addresses_.frames()) s.send_view(frame);  // queued as a view is
}

void Links::on_address(Session& s, const wire::AddressRecord& record) {
  addresses_.take(record, s.peer());
}

void Links::track(const std::shared_ptr<Session>& s) {
  std::erase_if(sessions_, [](const std::weak_ptr<Session>& w) { return w.expired(); });
  sessions_.push_back(s);
}

void Links::start_session(asio::ip::tcp::socket socket) {
  tune(socket);
  auto s = std::make_shared<Session>(std::move(socket), *this, Session::Role::kAccepted, -1);
  track(s);
  s->start();
}

void Links::tune(asio::ip::tcp::socket& socket) {
  const std::string refused =
      set_socket_options(socket, config_.socket_buffer_bytes, config_.congestion);
  if (congestion_said_ || config_.congestion.empty()) return;
  congestion_said_ = true;
  log(refused.empty() ? cat("TCP congestion control ", config_.congestion, " (net.congestion)")
                      : refused);
}

void Links::start_dialled(int peer, asio::ip::tcp::socket socket) {
  tune(socket);
  auto s = std::make_shared<Session>(std::move(socket), *this, Session::Role::kDialled, peer);
  track(s);
  s->start();
}

void Links::start_relayed(int peer, Socket socket, int relay, const std::string& relay_address) {
  // The TLS client (the hello's sender) is the lower rank of the pair at either end.
  const bool lower = config_.rank < peer;
  auto s = std::make_shared<Session>(std::move(*socket), *this,
                                     lower ? Session::Role::kDialled : Session::Role::kAccepted,
                                     peer);
  s->set_relay(relay, relay_address);
  dialler_.relayed(peer, lower);
  track(s);
  s->start();
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
  const bool preferred = claimable && p < me && links_[p].session &&
                         !links_[p].session->closed() && !dialled_by_lower(*links_[p].session);
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
  if (p > me && links_[p].up() && links_[p].session && !links_[p].session->closed())
    return wire::Refusal{RefusalKind::kDuplicate,
                         cat("peer ", p, " dialled us, but its link is up (the lower rank's dial "
                             "is the link)")};
  adopt(p, s, hello);
  return std::nullopt;
}

std::optional<wire::Refusal> Links::identity_conflict(int peer, const Session& s) {
  Link& l = links_[peer];
  // The link we have is live (it is up and we heard from it within the silence bound): a second
  // connection with the same certificate is someone else holding that identity, or a copy of
  // the peer started twice. The first stays. (A restarted peer's old connection is closed, or
  // falls silent, so its new one is taken; and when this process was itself stopped, the link
  // that carried nothing meanwhile is taken for closed, as is any link in the grace after such a
  // stop: the neighbour closed it on us and redials, before we have read its close.)
  const double silent_s = static_cast<double>(config_.timeouts.silent.count()) / 1000.0;
  if (!l.session || !l.session->established() || l.session->closed() ||
      !l.up() || mail_.recovering() ||
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
  Link& l = links_[s.peer()];
  dialler_.acked(s.peer());
  if (l.session && l.session.get() != &s && !l.session->closed() && l.up() &&
      dialled_by_lower(*l.session) && !dialled_by_lower(s)) {
    // The neighbour's own dial came first and is the link (both ends keep the lower rank's).
    s.close("", CloseKind::kShutdown);
    return;
  }
  dialler_.formed(s.peer());
  adopt(s.peer(), s, hello);
}

std::unique_ptr<SidePathReader> Links::side_reader_for(int peer, const wire::Hello& hello) {
  for (const auto& path : side_paths_)
    if (auto reader = path->reader_for(peer, hello, [this](const std::string& line) { log(line); }))
      return reader;
  return nullptr;
}

void Links::adopt(int peer, Session& s, const wire::Hello& hello) {
  Link& l = links_[peer];
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
  // The neighbour's side path, when it has one we can read (before the link counts as up).
  s.attach_side_path(side_reader_for(peer, hello));
  l.gone_timer.cancel();
  dialler_.came(peer);  // a later loss is redialled, and given up on, as any other
  relay_client_.done(peer);
  const double rtt = s.rtt_ms();
  if (s.relayed())
    mail_.note_path(peer, LinkPath::kRelayed, -1, s.relay(), s.relay_address(), rtt);
  else
    mail_.note_path(peer, LinkPath::kDirect,
                    s.role() == Session::Role::kDialled ? config_.rank : peer, -1, "", rtt);
  l.become(LinkState::kUp,
           cat(s.who(), " connected",
               s.relayed() ? cat(" through the relay ", s.relay_address()) : std::string()));
  // An elastic run's membership changes reach a link that comes up later too.
  if (last_announce_) s.send_view(last_announce_);
}

void Links::relay_altered(const Session& s, int peer, const std::string& what,
                          const std::string& why) {
  relay_client_.refuse(peer, s.relay_address());
  mail_.alert(TransportAlert{MemberEventKind::kRelayAltered, peer,
                             cat("the relay ", s.relay_address(), " altered ", what, " (", why,
                                 "); not using it for this link again")});
}

void Links::handshake_closed(Session& s, Link& l, CloseKind kind, const std::string& why) {
  const int p = l.peer();
  if (s.relayed() && s.altered() && !l.up())
    relay_altered(s, p, cat("the handshake with peer ", p), why);
  if (s.relayed() && !l.up()) {  // either end: to the relays again
    if (!why.empty())
      l.fail({s.altered() ? LinkFailureKind::kRelayAltered : s.failure(),
              cat("handshake through the relay ", s.relay_address(), ": ", why)});
    dialler_.stop(p);
    return dialler_.retry(p, why.empty() ? "handshake failed" : why);
  }
  if (s.role() == Session::Role::kAccepted && !l.up() &&
      (s.failure() == LinkFailureKind::kModel || s.failure() == LinkFailureKind::kTopology))
    // We refused its hello: the two ends train different models (or graphs), and the link
    // cannot form whoever dials. (A caller refuses to start then: PeerSession::connect.)
    l.fail({s.failure(), cat("handshake from ", s.remote(), ": refused: ", s.refusal_text())});
  if (s.role() == Session::Role::kDialled && !l.up()) {
    if (!why.empty())
      l.fail({s.failure(), cat("handshake with ", address_of(p), ": ", why)});
    if (kind == CloseKind::kRefused && !s.altered()) {
      dialler_.stop(p);
      l.become(LinkState::kGone);
    } else {
      dialler_.retry(p, why.empty() ? "handshake failed" : why);
    }
  }
}

void Links::on_closed(Session& s, CloseKind kind, const std::string& why) {
  if (rv_.stopping()) return;
  Link* found = links_.find(s.peer());
  if (!found) return;  // a stranger
  Link& l = *found;
  const int p = l.peer();
  if (l.session.get() != &s) {
    // Not the live link: a handshake that failed (or a replaced connection).
    return handshake_closed(s, l, kind, why);
  }
  l.session.reset();
  if (s.relayed() && s.altered())
    // The records passed the relay intact or not at all: it altered them. Not that relay again.
    relay_altered(s, p, cat("the link to peer ", p), why);
  if (kind == CloseKind::kBye) mail_.set_left(p);
  if (kind == CloseKind::kBye || kind == CloseKind::kRefused) return l.become(LinkState::kGone);
  l.fail({LinkFailureKind::kLost, why.empty() ? std::string("link lost") : cat("link lost: ", why)});
  l.become(LinkState::kDown,
           cat("peer ", p, ": link lost; ",
               dialler_.we_dial(p) ? "redialling" : "waiting for it to redial", " for up to ",
               config_.timeouts.reconnect.count(), " ms"));
  watch_gone(p);
  dialler_.redial_lost(p);
}

void Links::watch_gone(int peer) {
  Link& l = links_[peer];
  l.gone_timer.expires_after(config_.timeouts.reconnect);
  l.gone_timer.async_wait([this, peer](std::error_code ec) {
    Link& link = links_[peer];
    if (ec || rv_.stopping() || link.gone_timer.expiry() > Clock::now()) return;
    if (link.state() == LinkState::kDown)
      link.become(LinkState::kGone, cat("peer ", peer, " did not come back within ",
                                        config_.timeouts.reconnect.count(), " ms"));
  });
}

void Links::shutdown() {
  // Rendezvous in flight (asks, dial-backs, relay waits) end; links we relay run on (splice).
  rv_.stop();
  relays_.stop();
  acceptor_.stop();
  heartbeat_.cancel();
  dialler_.shutdown();
  for (int p : links_.neighbours()) {
    links_[p].gone_timer.cancel();
    links_[p].session.reset();
  }
  for (auto& w : sessions_)
    if (auto s = w.lock()) s->say_bye();  // established: bye, then close; else close now
  sessions_.clear();
  refusals_.flush();
}

void Links::count_sent(int peer, std::size_t bytes) {
  bytes_sent_ += bytes;
  if (Link* l = links_.find(peer)) l->sent += bytes;
}

void Links::count_received(int peer, std::size_t bytes) {
  if (Link* l = links_.find(peer)) l->received += bytes;
}

std::vector<LinkTraffic> Links::link_traffic() const {
  std::vector<LinkTraffic> out;
  for (int p : links_.neighbours())
    out.push_back({p, links_[p].sent.load(), links_[p].received.load()});
  return out;
}

}  // namespace gossip::net
