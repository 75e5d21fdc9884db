/// launcher/observe: what `gossip run` shows of a run while it goes: the dashboard
/// (--dashboard: the page and /state.json) and the whole run's Prometheus page (net.metrics_port
/// + n: every peer's /metrics merged under a `peer` label, and the launcher's own figures).
/// Each server runs on its own thread; one that cannot listen is said on stderr and the run goes
/// on without it (docs/observe.md).
#pragma once
#if !defined(GOSSIP_ROOM_LAUNCHER)
#error "src/launcher/observe.hpp belongs to room launcher, which this room does not use (see the room table in meson.build)"
#endif

#include <chrono>
#include <memory>
#include <string>

#include "gossip/config.hpp"
#include "gossip/dashboard.hpp"
#include "gossip/events.hpp"
#include "gossip/net.hpp"
#include "gossip/prometheus.hpp"
#include "gossip/report.hpp"
#include "gossip/topology.hpp"

namespace gossip::launcher {

/// The dashboard's state for a run of `topology` (undirected edges, weights of its first graph).
DashboardSetup dashboard_setup(const std::string& source, const std::string& out,
                               const RunConfig& config, const Topology& topology);

/// Serves a DashboardState (the page's files and /state.json) on `address`. Throws
/// RuntimeError when it cannot listen there.
class DashboardServer {
 public:
  DashboardServer(const std::string& address, const DashboardState& state);
  std::string address() const { return server_.address(); }

 private:
  std::chrono::steady_clock::time_point t0_ = std::chrono::steady_clock::now();
  HttpServer server_;
};

/// The run's own figures and the merge of its peers' pages.
class RunMetrics {
 public:
  /// Serves on config.net.metrics_host:metrics_port + n; the peers are at metrics_port + r.
  /// Throws RuntimeError when it cannot listen there.
  RunMetrics(const RunConfig& config, int n, std::string out_dir);
  std::string address() const { return server_->address(); }
  /// The launcher's own figures, after each pass of its loop.
  void update(std::int64_t round, int peers_alive, std::int64_t deaths, std::int64_t rejoins);
  void evaluation(const EvaluationFigures& f);
  /// Every peer's page (its live /metrics, or the metrics.prom it left when it finished) merged
  /// with the launcher's.
  std::string page() const;
  /// Writes page() to OUT/metrics.prom (at the end of the run).
  void write() const;

 private:
  int n_;
  std::string host_;
  int base_port_;
  std::string out_;
  mutable MetricsRegistry registry_;  // thread-safe; page() notes which peers it reached
  std::unique_ptr<HttpServer> server_;
};

}  // namespace gossip::launcher
