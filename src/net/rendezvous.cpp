// net/rendezvous.cpp: the part of Links that helps peers that cannot be dialled. A connection to
// a peer's port that starts with a rendezvous message (gossip/wire.hpp) asks for a service:
//  - dial-back: "dial me at the address the run gives me": the helper dials that address (its
//    own copy of the run's addresses, never one the asker names), sends a probe carrying the
//    asker's nonce and answers whether it could. A peer asks up to kMaxDialBackHelpers members
//    at the start (net.reachable: auto) and is reachable when every one that answered reached
//    it (and their probes arrived), unreachable as soon as one could not;
//  - relay: "carry my link to peer B": the relay holds the ask until B's ask for the same link
//    arrives, answers both, and from then on passes bytes both ways. The two ends run their TLS
//    handshake and records through it end to end: the relay sees ciphertext and sizes, and a
//    byte it alters fails the records' authentication (Session::altered), after which the ends
//    do not use it for that link again. A member relays only while it has found itself
//    reachable (a relay named in net.relays relays regardless).
#include <algorithm>
#include <random>

#include "gossip/core.hpp"
#include "src/net/links.hpp"
#include "src/net/socket.hpp"

namespace gossip::net {
namespace {
constexpr std::size_t kMaxDialBackHelpers = 16;
constexpr std::size_t kMaxRelayed = 64;       // links one peer relays at once
constexpr std::size_t kMaxWaiting = 64;       // relay asks waiting for their other end
constexpr std::chrono::milliseconds kRelayWait{5'000};   // a relay ask waits this long
constexpr std::chrono::milliseconds kAskAgain{250};      // a refused helper, a relay not yet ready
constexpr std::chrono::milliseconds kProbeGrace{1'000};  // a helper's probe may trail its answer
constexpr std::chrono::milliseconds kProbePoll{10};
// A dial back that has not connected within this is taken as failed (a firewall that drops
// connections says nothing): the peer then dials its neighbours itself, before their rounds
// would go on without it (monitor.round_timeout_s is seconds).
constexpr std::chrono::milliseconds kDialBackWithin{2'000};
constexpr std::uint64_t kNamedRelay = 1;  // relay ask flag (nonce): the asker's config names it
constexpr std::size_t kRelayBuffer = 64 * 1024;

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string ranks_text(const std::vector<int>& ranks) {
  std::string out;
  for (int r : ranks) out += (out.empty() ? "" : ", ") + std::to_string(r);
  return out;
}
}  // namespace

std::shared_ptr<asio::steady_timer> Links::new_timer(std::chrono::milliseconds after) {
  auto t = std::make_shared<asio::steady_timer>(io_, after);
  std::erase_if(rendezvous_timers_, [](const auto& w) { return w.expired(); });
  rendezvous_timers_.push_back(t);
  return t;
}

std::shared_ptr<asio::steady_timer> Links::new_timer(Clock::time_point at) {
  auto t = new_timer(std::chrono::milliseconds(0));
  t->expires_at(at);
  return t;
}

std::shared_ptr<asio::ip::tcp::socket> Links::new_socket() {
  auto s = std::make_shared<asio::ip::tcp::socket>(io_);
  watch(s);
  return s;
}

Links::Deadline Links::close_after(std::shared_ptr<asio::ip::tcp::socket> socket,
                                  std::chrono::milliseconds within) {
  Deadline d{new_timer(within), std::make_shared<bool>(false)};
  d.timer->async_wait([socket, late = d.late](std::error_code ec) {
    std::error_code ignored;
    if (ec) return;
    *late = true;
    socket->close(ignored);
  });
  return d;
}

void Links::watch(const std::shared_ptr<asio::ip::tcp::socket>& socket) {
  std::erase_if(rendezvous_sockets_, [](const auto& w) { return w.expired(); });
  rendezvous_sockets_.push_back(socket);
}

bool Links::spliced(const asio::ip::tcp::socket& socket) const {
  for (const auto& w : spliced_)
    if (auto s = w.lock(); s && s.get() == &socket) return true;
  return false;
}

ReachabilityReport Links::reachability() const {
  std::lock_guard lk(reach_mu_);
  return reach_;
}

wire::Rendezvous Links::rendezvous(wire::RendezvousKind kind, std::uint32_t to) const {
  wire::Rendezvous m;
  m.kind = kind;
  m.run_tag = run_tag_;
  m.from = static_cast<std::uint32_t>(config_.rank);
  m.to = to;
  m.time_ns = now_ns();
  return m;
}

const asio::ip::tcp::resolver::results_type& Links::endpoints_of(const std::string& address) {
  auto it = resolved_.find(address);
  if (it != resolved_.end()) return it->second;
  asio::ip::tcp::resolver::results_type results;
  try {
    results = resolve(io_, address);
  } catch (const InputError& e) {
    log(e.what());
  }
  return resolved_.emplace(address, std::move(results)).first->second;
}

void Links::send_rendezvous(std::shared_ptr<asio::ip::tcp::socket> socket,
                            const wire::Rendezvous& m, std::function<void(std::error_code)> then) {
  auto bytes = std::make_shared<std::array<std::byte, wire::kRendezvousBytes>>(
      wire::encode_rendezvous(m));
  asio::async_write(*socket, asio::buffer(*bytes),
                    [socket, bytes, then = std::move(then)](std::error_code ec, std::size_t) {
                      then(ec);
                    });
}

void Links::read_rendezvous(
    std::shared_ptr<asio::ip::tcp::socket> socket, std::chrono::milliseconds within,
    std::function<void(std::optional<wire::Rendezvous>, std::string)> then) {
  auto bytes = std::make_shared<std::array<std::byte, wire::kRendezvousBytes>>();
  auto [timer, late] = close_after(socket, within);
  asio::async_read(*socket, asio::buffer(*bytes),
                   [this, socket, bytes, timer, late, within,
                    then = std::move(then)](std::error_code ec, std::size_t) {
                     timer->cancel();
                     if (stopping_) return;
                     if (ec)
                       return then(std::nullopt,
                                   *late ? cat("no answer within ", within.count(), " ms")
                                         : cat("connection closed (", ec.message(), ")"));
                     auto m = wire::decode_rendezvous(*bytes);
                     if (!m) return then(std::nullopt, m.error);
                     if (m.value->run_tag != run_tag_)
                       return then(std::nullopt, "a rendezvous message of another run");
                     then(std::move(m.value), "");
                   });
}

// --- serving ---------------------------------------------------------------------------------

void Links::serve_rendezvous(std::shared_ptr<asio::ip::tcp::socket> socket) {
  ++serving_;
  read_rendezvous(socket, config_.timeouts.handshake,
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
                        return serve_dial_back(socket, *m);
                      case wire::RendezvousKind::kDialBackProbe:
                        if (m->nonce == probe_nonce_ && probe_nonce_ != 0)
                          probes_from_.push_back(static_cast<int>(m->from));
                        return socket->close(ignored);
                      case wire::RendezvousKind::kRelayAsk:
                        return serve_relay(socket, *m);
                      case wire::RendezvousKind::kAddressAsk:
                        return serve_address_ask(socket, *m);
                      default:
                        log_refusal(cat("rendezvous from ", from, " refused: an answer nobody "
                                        "asked for"));
                        return socket->close(ignored);
                    }
                  });
}

void Links::serve_dial_back(std::shared_ptr<asio::ip::tcp::socket> asker,
                            const wire::Rendezvous& ask) {
  // The address the run gives the asker, not one it names: a stranger cannot send us anywhere.
  const int rank = static_cast<int>(ask.from);
  const std::string address = address_of(rank);
  if (address.empty()) {
    // Not listed, and its signed record has not reached us yet: ask again later.
    wire::Rendezvous a = rendezvous(wire::RendezvousKind::kDialBackAnswer,
                                    static_cast<std::uint32_t>(rank));
    a.status = wire::RendezvousStatus::kNotYet;
    a.text = cat("peer ", config_.rank, " has no address for peer ", rank, " yet");
    return send_rendezvous(asker, a, [asker](std::error_code) {
      std::error_code ignored;
      asker->close(ignored);
    });
  }
  auto probe = new_socket();
  const auto within = std::min(config_.timeouts.handshake, kDialBackWithin);
  auto [timer, late] = close_after(probe, within);
  const std::uint64_t nonce = ask.nonce;
  auto answer = [this, asker, rank, address](bool ok, const std::string& why) {
    wire::Rendezvous a = rendezvous(wire::RendezvousKind::kDialBackAnswer,
                                    static_cast<std::uint32_t>(rank));
    a.status = ok ? wire::RendezvousStatus::kOk : wire::RendezvousStatus::kFailed;
    a.text = ok ? address : cat(address, ": ", why);
    send_rendezvous(asker, a, [asker](std::error_code) {
      std::error_code ignored;
      asker->close(ignored);
    });
  };
  asio::async_connect(
      *probe, endpoints_of(address),
      [this, probe, timer, late, nonce, answer, within](std::error_code ec,
                                                        const asio::ip::tcp::endpoint&) {
        timer->cancel();
        if (stopping_) return;
        if (ec) return answer(false, connect_failure(ec, *late, within).why);
        wire::Rendezvous p = rendezvous(wire::RendezvousKind::kDialBackProbe, 0);
        p.nonce = nonce;
        send_rendezvous(probe, p, [probe, answer](std::error_code wec) {
          std::error_code ignored;
          probe->close(ignored);
          answer(!wec, wec ? cat("the probe could not be sent (", wec.message(), ")") : "");
        });
      });
}

void Links::serve_relay(std::shared_ptr<asio::ip::tcp::socket> asker,
                        const wire::Rendezvous& ask) {
  auto refuse = [this, asker, &ask](wire::RendezvousStatus status, const std::string& why) {
    wire::Rendezvous a = rendezvous(wire::RendezvousKind::kRelayAnswer, ask.from);
    a.status = status;
    a.text = why;
    send_rendezvous(asker, a, [asker](std::error_code) {
      std::error_code ignored;
      asker->close(ignored);
    });
  };
  if (ask.to >= static_cast<std::uint32_t>(config_.size) || ask.to == ask.from ||
      ask.to == static_cast<std::uint32_t>(config_.rank))
    return refuse(wire::RendezvousStatus::kFailed, cat("rank ", ask.to, " cannot be relayed to"));
  const ReachabilityReport reach = reachability();
  if (!(ask.nonce & kNamedRelay) && reach.state != Reachability::kReachable)
    return refuse(reach.settled ? wire::RendezvousStatus::kFailed : wire::RendezvousStatus::kNotYet,
                  reach.settled ? cat("peer ", config_.rank, " relays only while reachable (it is ",
                                      reachability_name(reach.state), ")")
                                : cat("peer ", config_.rank, " does not know yet whether it is "
                                      "reachable"));
  if (relayed_links_ >= kMaxRelayed)
    return refuse(wire::RendezvousStatus::kFailed,
                  cat("peer ", config_.rank, " relays ", kMaxRelayed, " links already"));
  const std::pair<std::uint32_t, std::uint32_t> key = std::minmax(ask.from, ask.to);
  auto it = waiting_.find(key);
  if (it != waiting_.end() && it->second.from == ask.to) {
    // Both ends are here: answer both, then pass bytes.
    Waiting other = std::move(it->second);
    waiting_.erase(it);
    other.timer->cancel();
    ++relayed_links_;
    const std::string what = cat("the link ", key.first, "-", key.second, " (",
                                 remote_name(*other.socket), " and ", remote_name(*asker), ")");
    log(cat("relaying ", what));
    auto ok_to = [this](std::uint32_t rank) {
      return rendezvous(wire::RendezvousKind::kRelayAnswer, rank);
    };
    auto both = std::make_shared<int>(2);
    auto go = [this, a = other.socket, b = asker, both, what](std::error_code ec) {
      std::error_code ignored;
      if (ec) {
        a->close(ignored);
        b->close(ignored);
      }
      if (--*both == 0) splice(a, b, what);
    };
    send_rendezvous(other.socket, ok_to(other.from), go);
    send_rendezvous(asker, ok_to(ask.from), go);
    return;
  }
  if (it != waiting_.end()) {  // the same end asks again: the newer ask waits instead
    std::error_code ignored;
    it->second.timer->cancel();
    it->second.socket->close(ignored);
    waiting_.erase(it);
  }
  if (waiting_.size() >= kMaxWaiting)
    return refuse(wire::RendezvousStatus::kFailed,
                  cat("peer ", config_.rank, " holds ", kMaxWaiting, " relay asks already"));
  auto timer = new_timer(kRelayWait);
  waiting_[key] = Waiting{asker, ask.from, timer};
  timer->async_wait([this, key, asker, to = ask.to, from = ask.from](std::error_code ec) {
    if (ec || stopping_) return;
    auto w = waiting_.find(key);
    if (w == waiting_.end() || w->second.socket != asker) return;
    waiting_.erase(w);
    wire::Rendezvous a = rendezvous(wire::RendezvousKind::kRelayAnswer, from);
    a.status = wire::RendezvousStatus::kAbsent;
    a.text = cat("peer ", to, " did not ask for this link within ", kRelayWait.count(), " ms");
    send_rendezvous(asker, a, [asker](std::error_code) {
      std::error_code ignored;
      asker->close(ignored);
    });
  });
}

void Links::splice(std::shared_ptr<asio::ip::tcp::socket> a,
                   std::shared_ptr<asio::ip::tcp::socket> b, std::string what) {
  struct Pipe {
    std::shared_ptr<asio::ip::tcp::socket> from, to;
    std::vector<std::byte> buffer = std::vector<std::byte>(kRelayBuffer);
  };
  std::erase_if(spliced_, [](const auto& w) { return w.expired(); });
  spliced_.push_back(a);
  spliced_.push_back(b);
  auto closed = std::make_shared<bool>(false);
  auto end = [this, a, b, closed, what] {
    if (*closed) return;
    *closed = true;
    --relayed_links_;
    std::error_code ignored;
    a->close(ignored);
    b->close(ignored);
    log(cat("stopped relaying ", what));
  };
  for (auto [from, to] : {std::pair{a, b}, std::pair{b, a}}) {
    auto pipe = std::make_shared<Pipe>(Pipe{from, to});
    auto pump = std::make_shared<std::function<void()>>();
    *pump = [this, pipe, pump, end] {
      pipe->from->async_read_some(
          asio::buffer(pipe->buffer), [this, pipe, pump, end](std::error_code ec, std::size_t n) {
            // (On past our own shutdown: the two ends' link outlives our run; the I/O thread
            // runs until they close it, NetExchange waiting for that a while.)
            if (ec) return end();
            asio::async_write(*pipe->to, asio::buffer(pipe->buffer.data(), n),
                              [this, pipe, pump, end](std::error_code wec, std::size_t m) {
                                if (wec) return end();
                                bytes_relayed_ += m;
                                (*pump)();
                              });
          });
    };
    (*pump)();
  }
}

// --- asking ----------------------------------------------------------------------------------

void Links::check_reachability(Clock::time_point deadline) {
  probe_nonce_ = std::random_device{}() | (std::uint64_t{std::random_device{}()} << 32) | 1;
  probe_deadline_ = deadline;
  for (int r = 0; r < config_.size && helpers_.size() < kMaxDialBackHelpers; ++r)
    if (r != config_.rank && !address_of(r).empty()) helpers_.push_back(r);
  if (helpers_.empty())
    return settle_reachability(Reachability::kUnknown, "no other member to ask");
  for (int h : helpers_) ask_dial_back(h, deadline);
  auto timer = new_timer(deadline);
  timer->async_wait([this, timer](std::error_code ec) {
    if (ec || stopping_) return;
    std::unique_lock lk(reach_mu_);
    if (reach_.settled) return;
    lk.unlock();
    if (!helpers_ok_.empty())
      return settle_reachability(Reachability::kReachable,
                                 cat("peers ", ranks_text(helpers_ok_), " dialled ",
                                     address_of(config_.rank), " back (the others did "
                                     "not answer in time)"));
    settle_reachability(Reachability::kUnknown,
                        cat("no member answered a dial-back request within ",
                            config_.timeouts.start.count() / 2, " ms"));
  });
}

void Links::ask_dial_back(int helper, Clock::time_point deadline) {
  if (stopping_ || reachability().settled) return;
  auto socket = new_socket();
  auto timer = close_after(socket, std::min(config_.timeouts.handshake, kDialBackWithin)).timer;
  asio::async_connect(
      *socket, endpoints_of(address_of(helper)),
      [this, socket, timer, helper, deadline](std::error_code ec, const asio::ip::tcp::endpoint&) {
        timer->cancel();
        if (stopping_) return;
        // Not listening yet (it is starting too): ask again, until the deadline, or for a
        // while after another member has dialled us back (its address may be wrong).
        const bool waited = first_ok_ && Clock::now() > *first_ok_ + kProbeGrace;
        if (ec == asio::error::connection_refused && Clock::now() + kAskAgain < deadline &&
            !waited) {
          auto again = new_timer(kAskAgain);
          again->async_wait([this, again, helper, deadline](std::error_code e) {
            if (!e) ask_dial_back(helper, deadline);
          });
          return;
        }
        if (ec) return dial_back_answered(helper, false, "");  // we cannot reach it: no answer
        wire::Rendezvous ask = rendezvous(wire::RendezvousKind::kDialBackAsk,
                                          static_cast<std::uint32_t>(helper));
        ask.nonce = probe_nonce_;
        send_rendezvous(socket, ask, [this, socket, helper, deadline](std::error_code wec) {
          if (wec) return dial_back_answered(helper, false, "");
          read_rendezvous(socket, 2 * config_.timeouts.handshake,
                          [this, socket, helper, deadline](std::optional<wire::Rendezvous> m,
                                                           std::string) {
                            std::error_code ignored;
                            socket->close(ignored);
                            if (!m || m->kind != wire::RendezvousKind::kDialBackAnswer)
                              return dial_back_answered(helper, false, "");
                            if (m->status == wire::RendezvousStatus::kNotYet) {
                              // Our signed record has not reached it yet: ask again.
                              if (Clock::now() + kAskAgain >= deadline)
                                return dial_back_answered(helper, false, "");
                              auto again = new_timer(kAskAgain);
                              return again->async_wait(
                                  [this, again, helper, deadline](std::error_code e) {
                                    if (!e) ask_dial_back(helper, deadline);
                                  });
                            }
                            dial_back_answered(helper, m->status == wire::RendezvousStatus::kOk,
                                               m->text.empty() ? "?" : m->text);
                          });
        });
      });
}

void Links::dial_back_answered(int helper, bool ok, const std::string& text) {
  if (reachability().settled) return;
  if (ok && std::find(probes_from_.begin(), probes_from_.end(), helper) == probes_from_.end()) {
    // Its probe may still be on the way to our acceptor: look again, for a while.
    wait_for_probe(helper, text, Clock::now() + kProbeGrace);
    return;
  }
  if (!ok && !text.empty())
    return settle_reachability(Reachability::kUnreachable,
                               cat("peer ", helper, " could not dial ", text));
  ++helpers_done_;
  if (ok) helpers_ok_.push_back(helper);
  if (ok && !first_ok_) first_ok_ = Clock::now();
  if (helpers_done_ < helpers_.size()) return;
  if (helpers_ok_.empty())
    return settle_reachability(Reachability::kUnknown, "no member could be asked to dial back");
  std::sort(helpers_ok_.begin(), helpers_ok_.end());
  settle_reachability(Reachability::kReachable,
                      cat("peers ", ranks_text(helpers_ok_), " dialled ",
                          address_of(config_.rank), " back"));
}

void Links::wait_for_probe(int helper, const std::string& text, Clock::time_point until) {
  auto timer = new_timer(kProbePoll);
  timer->async_wait([this, timer, helper, text, until](std::error_code ec) {
    if (ec || stopping_) return;
    if (std::find(probes_from_.begin(), probes_from_.end(), helper) != probes_from_.end())
      return dial_back_answered(helper, true, text);
    if (Clock::now() < until) return wait_for_probe(helper, text, until);
    dial_back_answered(helper, false, cat(text, ": peer ", helper, " said it dialled back, but "
                                          "no probe came"));
  });
}

void Links::settle_reachability(Reachability state, std::string how) {
  {
    std::lock_guard lk(reach_mu_);
    if (reach_.settled) return;
    reach_ = {state, true, how};
  }
  log(cat("reachability: ", reachability_name(state), " (", how, ")",
          state == Reachability::kUnreachable
              ? "; this peer dials every neighbour itself, and relays a link neither end can dial"
              : ""));
  if (state == Reachability::kUnreachable) dial_all();
}

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
  if (stopping_ || mail_.state(peer) == LinkState::kUp) {
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
  auto socket = new_socket();
  auto timer = close_after(socket, config_.timeouts.handshake).timer;
  const bool named = relay < 0 || !config_.relays_auto;
  asio::async_connect(
      *socket, endpoints_of(address),
      [this, socket, timer, peer, relay, address, next, named](std::error_code ec,
                                                               const asio::ip::tcp::endpoint&) {
        timer->cancel();
        if (stopping_) return;
        if (ec) return next("");  // we cannot reach this one: the next
        tune(*socket);
        wire::Rendezvous ask =
            rendezvous(wire::RendezvousKind::kRelayAsk, static_cast<std::uint32_t>(peer));
        ask.nonce = named ? kNamedRelay : 0;
        send_rendezvous(socket, ask, [this, socket, peer, relay, address, next](std::error_code w) {
          if (w) return next("");
          read_rendezvous(
              socket, kRelayWait + config_.timeouts.handshake,
              [this, socket, peer, relay, address, next](std::optional<wire::Rendezvous> m,
                                                         std::string why) {
                if (mail_.state(peer) == LinkState::kUp) {  // it came another way meanwhile
                  std::error_code ignored;
                  socket->close(ignored);
                  links_[peer]->relaying = false;
                  return;
                }
                if (!m || m->kind != wire::RendezvousKind::kRelayAnswer)
                  return next(cat("relay ", address, ": ", m ? "an answer of another kind" : why));
                if (m->status == wire::RendezvousStatus::kNotYet) {  // the same one, soon
                  auto again = new_timer(kAskAgain);
                  again->async_wait([this, again, peer](std::error_code e) {
                    if (!e && !stopping_) relay_dial(peer);
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
              });
        });
      });
}

void Links::redial_between_relays(int peer) {
  Link& l = *links_[peer];
  l.relaying = false;
  // A dial on its way, or waiting its turn: its failure asks the relays again.
  if (l.connecting || l.dialling) return;
  l.dialling = true;
  l.dial_timer.expires_after(std::max(l.backoff, kAskAgain));
  l.dial_timer.async_wait([this, peer](std::error_code ec) {
    if (!ec && !stopping_ && mail_.state(peer) != LinkState::kUp) dial(peer);
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
