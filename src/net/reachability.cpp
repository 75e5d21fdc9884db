// net/reachability.cpp: dial-back asks, their answers and probes, and serving them.
#include "src/net/reachability.hpp"

#include <algorithm>
#include <random>

#include "gossip/core.hpp"
#include "src/net/link_failure.hpp"

namespace gossip::net {
namespace {
constexpr std::size_t kMaxDialBackHelpers = 16;
constexpr std::chrono::milliseconds kProbeGrace{1'000};  // a helper's probe may trail its answer
constexpr std::chrono::milliseconds kProbePoll{10};
// A dial back that has not connected within this is taken as failed (a firewall that drops
// connections says nothing): the peer then dials its neighbours itself, before their rounds
// would go on without it (monitor.round_timeout_s is seconds).
constexpr std::chrono::milliseconds kDialBackWithin{2'000};

std::string ranks_text(const std::vector<int>& ranks) {
  std::string out;
  for (int r : ranks) out += (out.empty() ? "" : ", ") + std::to_string(r);
  return out;
}
}  // namespace

ReachabilityCheck::ReachabilityCheck(const NetConfig& config, RendezvousIo& io,
                                     const AddressGossip& addresses,
                                     std::function<void(const std::string&)> log,
                                     std::function<void()> on_unreachable)
    : config_(config), io_(io), addresses_(addresses), log_(std::move(log)),
      on_unreachable_(std::move(on_unreachable)) {
  if (config.reachable == ReachableSetting::kYes)
    report_ = {Reachability::kReachable, true, "net.reachable: yes (not checked)"};
  else if (config.reachable == ReachableSetting::kNo)
    report_ = {Reachability::kUnreachable, true, "net.reachable: no (not checked)"};
}

ReachabilityReport ReachabilityCheck::report() const {
  std::lock_guard lk(mu_);
  return report_;
}

void ReachabilityCheck::start(Clock::time_point deadline) {
  nonce_ = std::random_device{}() | (std::uint64_t{std::random_device{}()} << 32) | 1;
  for (int r = 0; r < config_.size && helpers_.size() < kMaxDialBackHelpers; ++r)
    if (r != config_.rank && !addresses_.address_of(r).empty()) helpers_.push_back(r);
  if (helpers_.empty()) return settle(Reachability::kUnknown, "no other member to ask");
  for (int h : helpers_) ask(h, deadline);
  auto timer = io_.new_timer(deadline);
  timer->async_wait([this, timer](std::error_code ec) {
    if (!ec && !io_.stopping()) deadline_passed();
  });
}

void ReachabilityCheck::deadline_passed() {
  if (report().settled) return;
  if (!helpers_ok_.empty())
    return settle(Reachability::kReachable,
                  cat("peers ", ranks_text(helpers_ok_), " dialled ",
                      addresses_.address_of(config_.rank), " back (the others did not answer in "
                      "time)"));
  settle(Reachability::kUnknown, cat("no member answered a dial-back request within ",
                                     config_.timeouts.start.count() / 2, " ms"));
}

void ReachabilityCheck::ask_after(int helper, Clock::time_point deadline) {
  auto again = io_.new_timer(kAskAgain);
  again->async_wait([this, again, helper, deadline](std::error_code e) {
    if (!e) ask(helper, deadline);
  });
}

void ReachabilityCheck::ask(int helper, Clock::time_point deadline) {
  if (io_.stopping() || report().settled) return;
  auto socket = io_.new_socket();
  auto timer =
      io_.close_after(socket, std::min(config_.timeouts.handshake, kDialBackWithin)).timer;
  asio::async_connect(
      *socket, io_.endpoints_of(addresses_.address_of(helper)),
      [this, socket, timer, helper, deadline](std::error_code ec, const asio::ip::tcp::endpoint&) {
        timer->cancel();
        if (io_.stopping()) return;
        // Not listening yet (it is starting too): ask again, until the deadline, or for a
        // while after another member has dialled us back (its address may be wrong).
        const bool waited = first_ok_ && Clock::now() > *first_ok_ + kProbeGrace;
        if (ec == asio::error::connection_refused && Clock::now() + kAskAgain < deadline &&
            !waited)
          return ask_after(helper, deadline);
        if (ec) return answered(helper, false, "");  // we cannot reach it: no answer
        wire::Rendezvous m = io_.message(wire::RendezvousKind::kDialBackAsk,
                                         static_cast<std::uint32_t>(helper));
        m.nonce = nonce_;
        io_.send(socket, m, [this, socket, helper, deadline](std::error_code wec) {
          if (wec) return answered(helper, false, "");
          read_answer(socket, helper, deadline);
        });
      });
}

void ReachabilityCheck::read_answer(Socket socket, int helper, Clock::time_point deadline) {
  io_.read(socket, 2 * config_.timeouts.handshake,
           [this, socket, helper, deadline](std::optional<wire::Rendezvous> m, std::string) {
             std::error_code ignored;
             socket->close(ignored);
             if (!m || m->kind != wire::RendezvousKind::kDialBackAnswer)
               return answered(helper, false, "");
             if (m->status == wire::RendezvousStatus::kNotYet) {
               // Our signed record has not reached it yet: ask again.
               if (Clock::now() + kAskAgain >= deadline) return answered(helper, false, "");
               return ask_after(helper, deadline);
             }
             answered(helper, m->status == wire::RendezvousStatus::kOk,
                      m->text.empty() ? "?" : m->text);
           });
}

void ReachabilityCheck::answered(int helper, bool ok, const std::string& text) {
  if (report().settled) return;
  if (ok && std::find(probes_from_.begin(), probes_from_.end(), helper) == probes_from_.end()) {
    // Its probe may still be on the way to our acceptor: look again, for a while.
    wait_for_probe(helper, text, Clock::now() + kProbeGrace);
    return;
  }
  if (!ok && !text.empty())
    return settle(Reachability::kUnreachable, cat("peer ", helper, " could not dial ", text));
  ++helpers_done_;
  if (ok) helpers_ok_.push_back(helper);
  if (ok && !first_ok_) first_ok_ = Clock::now();
  if (helpers_done_ < helpers_.size()) return;
  if (helpers_ok_.empty())
    return settle(Reachability::kUnknown, "no member could be asked to dial back");
  std::sort(helpers_ok_.begin(), helpers_ok_.end());
  settle(Reachability::kReachable, cat("peers ", ranks_text(helpers_ok_), " dialled ",
                                       addresses_.address_of(config_.rank), " back"));
}

void ReachabilityCheck::wait_for_probe(int helper, const std::string& text,
                                       Clock::time_point until) {
  auto timer = io_.new_timer(kProbePoll);
  timer->async_wait([this, timer, helper, text, until](std::error_code ec) {
    if (ec || io_.stopping()) return;
    if (std::find(probes_from_.begin(), probes_from_.end(), helper) != probes_from_.end())
      return answered(helper, true, text);
    if (Clock::now() < until) return wait_for_probe(helper, text, until);
    answered(helper, false, cat(text, ": peer ", helper, " said it dialled back, but no probe "
                                "came"));
  });
}

void ReachabilityCheck::settle(Reachability state, std::string how) {
  {
    std::lock_guard lk(mu_);
    if (report_.settled) return;
    report_ = {state, true, how};
  }
  log_(cat("reachability: ", reachability_name(state), " (", how, ")",
           state == Reachability::kUnreachable
               ? "; this peer dials every neighbour itself, and relays a link neither end can dial"
               : ""));
  if (state == Reachability::kUnreachable) on_unreachable_();
}

void ReachabilityCheck::probe_came(const wire::Rendezvous& probe) {
  if (probe.nonce == nonce_ && nonce_ != 0) probes_from_.push_back(static_cast<int>(probe.from));
}

void ReachabilityCheck::serve_dial_back(Socket asker, const wire::Rendezvous& ask) {
  // The address the run gives the asker, not one it names: a stranger cannot send us anywhere.
  const int rank = static_cast<int>(ask.from);
  const std::string address = addresses_.address_of(rank);
  const auto to = static_cast<std::uint32_t>(rank);
  if (address.empty()) {
    // Not listed, and its signed record has not reached us yet: ask again later.
    wire::Rendezvous a = io_.message(wire::RendezvousKind::kDialBackAnswer, to);
    a.status = wire::RendezvousStatus::kNotYet;
    a.text = cat("peer ", config_.rank, " has no address for peer ", rank, " yet");
    return io_.answer(asker, a);
  }
  auto probe = io_.new_socket();
  const auto within = std::min(config_.timeouts.handshake, kDialBackWithin);
  auto [timer, late] = io_.close_after(probe, within);
  auto answer = [this, asker, address, to](bool ok, const std::string& why) {
    // Stamped now: the asker reads our clock from it (gossip doctor's clock offset).
    wire::Rendezvous a = io_.message(wire::RendezvousKind::kDialBackAnswer, to);
    a.status = ok ? wire::RendezvousStatus::kOk : wire::RendezvousStatus::kFailed;
    a.text = ok ? address : cat(address, ": ", why);
    io_.answer(asker, a);
  };
  asio::async_connect(
      *probe, io_.endpoints_of(address),
      [this, probe, timer, late, nonce = ask.nonce, answer, within](
          std::error_code ec, const asio::ip::tcp::endpoint&) {
        timer->cancel();
        if (io_.stopping()) return;
        if (ec) return answer(false, connect_failure(ec, *late, within).why);
        wire::Rendezvous p = io_.message(wire::RendezvousKind::kDialBackProbe, 0);
        p.nonce = nonce;
        io_.send(probe, p, [probe, answer](std::error_code wec) {
          std::error_code ignored;
          probe->close(ignored);
          answer(!wec, wec ? cat("the probe could not be sent (", wec.message(), ")") : "");
        });
      });
}

}  // namespace gossip::net
