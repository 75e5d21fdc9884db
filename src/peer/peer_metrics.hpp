/// peer/peer_metrics: a peer's live figures for Prometheus (net.metrics_port): a registry
/// updated after each round and each evaluation, served at /metrics by the peer's own HTTP
/// server, and written to DIR/peers/R/metrics.prom when the peer finishes (docs/observe.md).
#pragma once
#if !defined(GOSSIP_ROOM_PEER)
#error "src/peer/peer_metrics.hpp belongs to room peer, which this room does not use (see the room table in meson.build)"
#endif

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gossip/events.hpp"
#include "gossip/exchange.hpp"
#include "gossip/net.hpp"
#include "gossip/prometheus.hpp"
#include "gossip/timeline.hpp"

namespace gossip::peer_parts {

/// What a round leaves to report; the session fills it from its parts.
struct RoundFigures {
  std::int64_t round = 0;
  std::int64_t rounds = 0;
  std::uint64_t bytes_sent = 0;  // since the run began (a resumed peer's earlier bytes too)
  std::vector<LinkTraffic> links;
  std::vector<Member> view;      // the membership view, by rank
  std::vector<int> cut;
  std::vector<int> byzantine_suspects;
  std::vector<std::pair<int, std::int64_t>> refused;  // messages left out for NaN/Inf, by sender
  std::int64_t missing = 0;      // messages that did not come in time
  bool connected = true;
  const PhaseSeconds* phases = nullptr;
};

class PeerMetrics {
 public:
  /// Serves /metrics on `address` (host:port). Throws RuntimeError when it cannot listen there.
  PeerMetrics(int rank, const std::string& address);
  /// After each round: its duration (since the previous call) and the round count.
  void round_done(std::int64_t round);
  /// Whether the other figures are due again (every kRefresh, so a round pays almost nothing).
  bool refresh_due() const {
    return std::chrono::steady_clock::now() - last_refresh_ >= kRefresh;
  }
  /// Every figure of the round just done.
  void refresh(const RoundFigures& f);
  /// After an evaluation.
  void after_eval(double loss, double accuracy);
  /// Counts a membership event (suspect, dead, partition, healed, ...).
  void on_event(const PeerEvent& e);
  /// The page as it is now.
  std::string text() const { return registry_.text(); }
  /// Writes the page to `path` through a rename (a reader never sees half of it).
  void write(const std::string& path) const;
  std::string address() const { return server_->address(); }

 private:
  static constexpr auto kRefresh = std::chrono::milliseconds(200);
  MetricsRegistry registry_;
  std::optional<std::chrono::steady_clock::time_point> last_round_;
  std::chrono::steady_clock::time_point last_refresh_{};
  std::unique_ptr<HttpServer> server_;
};

/// Resident memory of this process in bytes (/proc/self/statm), 0 when it cannot be read.
double resident_bytes();

}  // namespace gossip::peer_parts
