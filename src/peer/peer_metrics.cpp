// peer/peer_metrics.cpp: the metrics a peer serves at /metrics (docs/observe.md). Every name
// has its unit (_seconds, _bytes) and counters end in _total, as Prometheus's conventions ask;
// counters are set from the running totals the peer keeps anyway, so they agree with
// summary.json.
#include "src/peer/peer_metrics.hpp"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "gossip/core.hpp"

namespace gossip::peer_parts {
namespace {

const char* state_name(MemberState s) {
  switch (s) {
    case MemberState::kSuspect: return "suspect";
    case MemberState::kDead: return "dead";
    case MemberState::kAlive: break;
  }
  return "alive";
}

}  // namespace

double resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  double pages_total = 0, pages_resident = 0;
  if (!(statm >> pages_total >> pages_resident)) return 0.0;
  return pages_resident * static_cast<double>(sysconf(_SC_PAGESIZE));
}

PeerMetrics::PeerMetrics(int rank, const std::string& address) {
  using T = MetricType;
  auto& r = registry_;
  r.define("gossip_rounds_total", T::kCounter, "Gossip rounds this peer has completed.");
  r.define("gossip_planned_rounds", T::kGauge, "Rounds this peer plans to run (0: not known).");
  r.define("gossip_round_duration_seconds", T::kHistogram,
           "Wall time of one round: local steps, gossip and the monitor.",
           {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10});
  r.define("gossip_sent_bytes_total", T::kCounter, "Bytes sent to all neighbours.");
  r.define("gossip_neighbour_sent_bytes_total", T::kCounter,
           "Bytes sent to one neighbour since this process started.");
  r.define("gossip_neighbour_received_bytes_total", T::kCounter,
           "Bytes received from one neighbour since this process started.");
  r.define("gossip_refused_messages_total", T::kCounter,
           "Parameter messages left out for NaN or Inf values, by sender.");
  r.define("gossip_missing_messages_total", T::kCounter,
           "Neighbour messages that did not arrive in time for their round.");
  r.define("gossip_member_state", T::kGauge,
           "1 for the state this peer's membership view holds each member in.");
  r.define("gossip_member_incarnation", T::kGauge,
           "The incarnation this peer's membership view holds for each member.");
  r.define("gossip_membership_events_total", T::kCounter,
           "Membership events this peer saw: suspect, dead, alive, rejoin, partition, healed, "
           "byzantine_suspect, byzantine_cut and more.");
  r.define("gossip_byzantine_suspects", T::kGauge,
           "Neighbours this peer suspects of sending false parameters.");
  r.define("gossip_cut_neighbours", T::kGauge,
           "Neighbours this peer no longer mixes with (gossip.on_byzantine: cut).");
  r.define("gossip_live_graph_connected", T::kGauge,
           "1 when the live graph this peer sees connects every live peer, else 0.");
  r.define("gossip_loss", T::kGauge, "Training loss at the last evaluation.");
  r.define("gossip_test_accuracy", T::kGauge, "Test accuracy at the last evaluation.");
  r.define("gossip_evaluations_total", T::kCounter, "Evaluations this peer has recorded.");
  r.define("gossip_phase_seconds_total", T::kCounter,
           "Seconds spent in each phase of the rounds (trace.json's tracks, encrypt included).");
  r.define("process_resident_memory_bytes", T::kGauge, "Resident memory size in bytes.");
  r.define("gossip_peer_info", T::kGauge, "1, labelled with this peer's rank.");
  r.set("gossip_peer_info", {{"rank", cat(rank)}}, 1.0);
  r.set("process_resident_memory_bytes", {}, resident_bytes());
  server_ = std::make_unique<HttpServer>(
      address,
      [this](const std::string& path) -> HttpResponse {
        if (path != "/metrics")
          return {404, "text/plain; charset=utf-8", "this peer serves /metrics only\n"};
        registry_.set("process_resident_memory_bytes", {}, resident_bytes());
        return {200, "text/plain; version=0.0.4; charset=utf-8", registry_.text()};
      },
      cat("peer ", rank, ": net.metrics_port"));
}

void PeerMetrics::round_done(std::int64_t round) {
  const auto now = std::chrono::steady_clock::now();
  if (last_round_)
    registry_.observe("gossip_round_duration_seconds", {},
                      std::chrono::duration<double>(now - *last_round_).count());
  last_round_ = now;
  registry_.set("gossip_rounds_total", {}, static_cast<double>(round));
}

void PeerMetrics::refresh(const RoundFigures& f) {
  auto& r = registry_;
  last_refresh_ = std::chrono::steady_clock::now();
  r.set("gossip_rounds_total", {}, static_cast<double>(f.round));
  r.set("gossip_planned_rounds", {}, static_cast<double>(f.rounds));
  r.set("gossip_sent_bytes_total", {}, static_cast<double>(f.bytes_sent));
  for (const LinkTraffic& l : f.links) {
    r.set("gossip_neighbour_sent_bytes_total", {{"neighbour", cat(l.peer)}},
          static_cast<double>(l.sent));
    r.set("gossip_neighbour_received_bytes_total", {{"neighbour", cat(l.peer)}},
          static_cast<double>(l.received));
  }
  for (const auto& [from, count] : f.refused)
    r.set("gossip_refused_messages_total", {{"neighbour", cat(from)}},
          static_cast<double>(count));
  r.set("gossip_missing_messages_total", {}, static_cast<double>(f.missing));
  r.clear("gossip_member_state");
  for (std::size_t m = 0; m < f.view.size(); ++m) {
    r.set("gossip_member_state", {{"member", cat(m)}, {"state", state_name(f.view[m].state)}},
          1.0);
    r.set("gossip_member_incarnation", {{"member", cat(m)}},
          static_cast<double>(f.view[m].incarnation));
  }
  r.set("gossip_byzantine_suspects", {}, static_cast<double>(f.byzantine_suspects.size()));
  r.set("gossip_cut_neighbours", {}, static_cast<double>(f.cut.size()));
  r.set("gossip_live_graph_connected", {}, f.connected ? 1.0 : 0.0);
  if (f.phases)
    for (std::size_t i = 0; i < kPhaseCount; ++i)
      r.set("gossip_phase_seconds_total", {{"phase", phase_name(i)}}, (*f.phases)[i]);
}

void PeerMetrics::write(const std::string& path) const {
  {
    std::ofstream f(path + ".tmp", std::ios::trunc);
    f << registry_.text();
    if (!f) throw RuntimeError(cat(path, ".tmp: write failed"));
  }
  std::filesystem::rename(path + ".tmp", path);
}

void PeerMetrics::after_eval(double loss, double accuracy) {
  registry_.set("gossip_loss", {}, loss);
  registry_.set("gossip_test_accuracy", {}, accuracy);
  registry_.add("gossip_evaluations_total", {}, 1.0);
}

void PeerMetrics::on_event(const PeerEvent& e) {
  if (const auto* m = std::get_if<MemberEvent>(&e))
    registry_.add("gossip_membership_events_total", {{"event", event_name(m->event)}}, 1.0);
}

}  // namespace gossip::peer_parts
