// launcher/observe.cpp: the dashboard's server and the whole run's /metrics (observe.hpp).
#include "src/launcher/observe.hpp"

#include <charconv>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "gossip/core.hpp"
#include "gossip/gossip.hpp"
#include "gossip/launcher.hpp"
#include "gossip/web.hpp"

namespace gossip::launcher {
namespace {

constexpr auto kScrapeTimeout = std::chrono::milliseconds(1000);

std::string read_file(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

}  // namespace
}  // namespace gossip::launcher

namespace gossip {

std::string dashboard_address(const std::string& text, const std::string& what) {
  const auto colon = text.rfind(':');
  const std::string host = colon == std::string::npos ? "127.0.0.1" : text.substr(0, colon);
  const std::string port = colon == std::string::npos ? text : text.substr(colon + 1);
  int p = -1;
  const auto r = std::from_chars(port.data(), port.data() + port.size(), p);
  if (port.empty() || r.ec != std::errc() || r.ptr != port.data() + port.size() || p < 0 ||
      p > 65535 || host.empty())
    throw InputError(cat(what, " '", text, "': expected [ADDRESS:]PORT with a port in 0..65535, "
                         "such as 8080 or 127.0.0.1:8080"));
  return cat(host, ":", p);
}

}  // namespace gossip

namespace gossip::launcher {

DashboardSetup dashboard_setup(const std::string& source, const std::string& out,
                               const RunConfig& config, const Topology& topology) {
  DashboardSetup s;
  s.source = source;
  s.out = out;
  s.topology = config.gossip.topology;
  s.algorithm = algorithm_name(config.gossip.algorithm);
  s.n = topology.n();
  for (const Arc& a : topology.at(0).edges()) {
    const int lo = std::min(a.from, a.to), hi = std::max(a.from, a.to);
    bool seen = false;
    for (const auto& e : s.edges) seen = seen || (e.a == lo && e.b == hi);
    if (!seen) s.edges.push_back({lo, hi, a.weight});
  }
  return s;
}

DashboardServer::DashboardServer(const std::string& address, const DashboardState& state)
    : server_(
          address,
          [this, &state](const std::string& path) -> HttpResponse {
            if (path == "/state.json") {
              const double now =
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
              return {200, "application/json", state.json(now)};
            }
            if (const auto asset = web_asset(path))
              return {200, std::string(asset->content_type), std::string(asset->body)};
            return {404, "text/plain; charset=utf-8", cat("no page at ", path, "\n")};
          },
          "--dashboard") {}

RunMetrics::RunMetrics(const RunConfig& config, int n, std::string out_dir)
    : n_(n), host_(config.net.metrics_host), base_port_(config.net.metrics_port),
      out_(std::move(out_dir)) {
  using T = MetricType;
  registry_.define("gossip_run_round", T::kGauge,
                   "The round every live peer has completed (the slowest live peer's).");
  registry_.define("gossip_run_peers_alive", T::kGauge,
                   "Peers whose process runs (or that finished), by the launcher's count.");
  registry_.define("gossip_run_deaths_total", T::kCounter,
                   "Peer deaths the peers reported, each peer and incarnation once "
                   "(summary.json's deaths).");
  registry_.define("gossip_run_rejoins_total", T::kCounter,
                   "Rejoins the peers reported, each peer and incarnation once.");
  registry_.define("gossip_run_consensus_distance", T::kGauge,
                   "Mean squared distance of the peers' parameters from their average at the "
                   "last merged evaluation.");
  registry_.define("gossip_run_test_accuracy", T::kGauge,
                   "Test accuracy of the average model at the last merged evaluation.");
  registry_.define("gossip_run_peer_accuracy_min", T::kGauge,
                   "Lowest peer's test accuracy at the last merged evaluation.");
  registry_.define("gossip_run_peer_scraped", T::kGauge,
                   "1 when this page holds the peer's figures, else 0 (not reachable).");
  server_ = std::make_unique<HttpServer>(
      cat(host_, ":", base_port_ + n_),
      [this](const std::string& path) -> HttpResponse {
        if (path != "/metrics")
          return {404, "text/plain; charset=utf-8", "this server has /metrics only\n"};
        return {200, "text/plain; version=0.0.4; charset=utf-8", page()};
      },
      "net.metrics_port (the run's merged page)");
}

void RunMetrics::update(std::int64_t round, int peers_alive, std::int64_t deaths,
                        std::int64_t rejoins) {
  registry_.set("gossip_run_round", {}, static_cast<double>(round));
  registry_.set("gossip_run_peers_alive", {}, peers_alive);
  registry_.set("gossip_run_deaths_total", {}, static_cast<double>(deaths));
  registry_.set("gossip_run_rejoins_total", {}, static_cast<double>(rejoins));
}

void RunMetrics::evaluation(const EvaluationFigures& f) {
  registry_.set("gossip_run_consensus_distance", {}, f.consensus_distance);
  if (f.has_average) registry_.set("gossip_run_test_accuracy", {}, f.test_accuracy);
  registry_.set("gossip_run_peer_accuracy_min", {}, f.peer_accuracy_min);
}

std::string RunMetrics::page() const {
  std::vector<Exposition> pages;
  for (int r = 0; r < n_; ++r) {
    const std::string file = cat(out_, "/peers/", r, "/metrics.prom");
    std::optional<std::string> text;
    if (std::filesystem::exists(file)) text = read_file(file);
    else text = http_get(cat(host_, ":", base_port_ + r), "/metrics", kScrapeTimeout);
    registry_.set("gossip_run_peer_scraped", {{"peer", cat(r)}}, text ? 1.0 : 0.0);
    if (text) pages.push_back({cat(r), std::move(*text)});
  }
  return merge_expositions(pages, "peer") + registry_.text();
}

void RunMetrics::write() const {
  const std::string path = cat(out_, "/metrics.prom");
  std::ofstream(path, std::ios::trunc) << page();
}

}  // namespace gossip::launcher
