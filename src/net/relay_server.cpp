// net/relay_server.cpp: relay asks held until their other end comes, then spliced.
#include "src/net/relay_server.hpp"

#include <algorithm>
#include <vector>

#include "gossip/core.hpp"
#include "src/net/socket.hpp"

namespace gossip::net {
namespace {
constexpr std::size_t kMaxRelayed = 64;  // links one peer relays at once
constexpr std::size_t kMaxWaiting = 64;  // relay asks waiting for their other end
constexpr std::size_t kRelayBuffer = 64 * 1024;
}  // namespace

RelayServer::RelayServer(const NetConfig& config, RendezvousIo& io,
                         const ReachabilityCheck& reachability,
                         std::function<void(const std::string&)> log)
    : config_(config), io_(io), reachability_(reachability), log_(std::move(log)) {}

std::pair<wire::RendezvousStatus, std::string> RelayServer::refusal(
    const wire::Rendezvous& ask) const {
  using wire::RendezvousStatus;
  if (ask.to >= static_cast<std::uint32_t>(config_.size) || ask.to == ask.from ||
      ask.to == static_cast<std::uint32_t>(config_.rank))
    return {RendezvousStatus::kFailed, cat("rank ", ask.to, " cannot be relayed to")};
  const ReachabilityReport reach = reachability_.report();
  if (!(ask.nonce & kNamedRelay) && reach.state != Reachability::kReachable)
    return reach.settled
               ? std::pair{RendezvousStatus::kFailed,
                           cat("peer ", config_.rank, " relays only while reachable (it is ",
                               reachability_name(reach.state), ")")}
               : std::pair{RendezvousStatus::kNotYet,
                           cat("peer ", config_.rank, " does not know yet whether it is "
                               "reachable")};
  if (relayed_links_ >= kMaxRelayed)
    return {RendezvousStatus::kFailed,
            cat("peer ", config_.rank, " relays ", kMaxRelayed, " links already")};
  return {RendezvousStatus::kOk, ""};
}

void RelayServer::refuse(Socket asker, std::uint32_t to, wire::RendezvousStatus status,
                         const std::string& why) {
  wire::Rendezvous a = io_.message(wire::RendezvousKind::kRelayAnswer, to);
  a.status = status;
  a.text = why;
  io_.answer(asker, a);
}

void RelayServer::serve(Socket asker, const wire::Rendezvous& ask) {
  if (auto [status, why] = refusal(ask); !why.empty()) return refuse(asker, ask.from, status, why);
  const Key key = std::minmax(ask.from, ask.to);
  auto it = waiting_.find(key);
  if (it != waiting_.end() && it->second.from == ask.to) {
    Waiting other = std::move(it->second);
    waiting_.erase(it);
    return join(asker, ask.from, std::move(other), key);
  }
  if (it != waiting_.end()) {  // the same end asks again: the newer ask waits instead
    std::error_code ignored;
    it->second.timer->cancel();
    it->second.socket->close(ignored);
    waiting_.erase(it);
  }
  if (waiting_.size() >= kMaxWaiting)
    return refuse(asker, ask.from, wire::RendezvousStatus::kFailed,
                  cat("peer ", config_.rank, " holds ", kMaxWaiting, " relay asks already"));
  hold(asker, ask, key);
}

void RelayServer::join(Socket asker, std::uint32_t asker_rank, Waiting other, Key key) {
  other.timer->cancel();
  ++relayed_links_;
  const std::string what = cat("the link ", key.first, "-", key.second, " (",
                               remote_name(*other.socket), " and ", remote_name(*asker), ")");
  log_(cat("relaying ", what));
  auto ok_to = [this](std::uint32_t rank) {
    return io_.message(wire::RendezvousKind::kRelayAnswer, rank);
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
  io_.send(other.socket, ok_to(other.from), go);
  io_.send(asker, ok_to(asker_rank), go);
}

void RelayServer::hold(Socket asker, const wire::Rendezvous& ask, Key key) {
  auto timer = io_.new_timer(kRelayWait);
  waiting_[key] = Waiting{asker, ask.from, timer};
  timer->async_wait([this, key, asker, to = ask.to, from = ask.from](std::error_code ec) {
    if (ec || io_.stopping()) return;
    auto w = waiting_.find(key);
    if (w == waiting_.end() || w->second.socket != asker) return;
    waiting_.erase(w);
    refuse(asker, from, wire::RendezvousStatus::kAbsent,
           cat("peer ", to, " did not ask for this link within ", kRelayWait.count(), " ms"));
  });
}

void RelayServer::splice(Socket a, Socket b, std::string what) {
  struct Pipe {
    Socket from, to;
    std::vector<std::byte> buffer = std::vector<std::byte>(kRelayBuffer);
  };
  io_.keep_open(a, b);
  auto closed = std::make_shared<bool>(false);
  auto end = [this, a, b, closed, what] {
    if (*closed) return;
    *closed = true;
    --relayed_links_;
    std::error_code ignored;
    a->close(ignored);
    b->close(ignored);
    log_(cat("stopped relaying ", what));
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

}  // namespace gossip::net
