// peer/peer.cpp: `gossip peer`, one real peer process: a loop over the one peer lifecycle
// (PeerSession, peer_session.cpp) with gossip's own model, evaluating, checkpointing and stopping
// where the run's plan says; and the peer's output folder and TLS credentials.
#include <csignal>
#include <filesystem>

#include "gossip/core.hpp"
#include "gossip/net.hpp"
#include "gossip/peer.hpp"
#include "gossip/report.hpp"
#include "src/peer/net_setup.hpp"
#include "src/peer/records.hpp"

namespace gossip {

// The config refuses what the handshake could not carry, before any peer starts.
static_assert(NetworkConfig::kMaxRunIdBytes == wire::kMaxRunIdBytes);

namespace {

using namespace peer_parts;

// SIGTERM in an elastic run: leave gracefully (a second one ends the process at once).
volatile std::sig_atomic_t g_leave = 0;
extern "C" void on_sigterm(int) {
  g_leave = 1;
  std::signal(SIGTERM, SIG_DFL);
}

std::string with_rank(std::string path, int rank) {
  const std::string token = "{rank}";
  for (auto at = path.find(token); at != std::string::npos; at = path.find(token, at))
    path.replace(at, token.size(), std::to_string(rank));
  return path;
}


}  // namespace

std::string peer_dir(const std::string& out_dir, int rank) {
  return cat(out_dir, "/peers/", rank);
}

TlsConfig peer_tls(const RunConfig& config, const std::string& tls_dir, int rank) {
  TlsConfig tls;
  tls.enabled = config.net.tls;
  if (!tls.enabled) return tls;
  if (!tls_dir.empty()) return tls_files_in(tls_dir, rank);
  if (config.net.tls_ca.empty())
    throw InputError(cat(
        config.where("net.tls"), ": this peer has no TLS credentials. Make the run's with "
        "`gossip keys init DIR --config ", config.path.empty() ? "CONFIG" : config.path,
        "` and name them: net.tls: {ca: DIR/ca.pem, cert: \"DIR/peer-{rank}.pem\", key: "
        "\"DIR/peer-{rank}.key\"} (or pass --tls-dir DIR; from Python GOSSIP_TLS_DIR=DIR); "
        "`gossip run` makes them by itself; "
        "net.tls: off runs without TLS"));
  tls.ca = with_rank(config.net.tls_ca, rank);
  tls.cert = with_rank(config.net.tls_cert, rank);
  tls.key = with_rank(config.net.tls_key, rank);
  return tls;
}

int run_peer(const RunConfig& config, const Topology& topology, const PeerOptions& opt) {
  PeerSession peer(config, topology, opt);
  peer.join_model();  // evaluates round 0 unless it resumes or rejoins
  const std::int64_t rounds = peer.planned_rounds();
  if (!topology.epochs().empty()) std::signal(SIGTERM, on_sigterm);
  while (peer.rounds_done() < rounds) {
    if (g_leave == 1) {
      g_leave = 2;
      log_line(cat("peer ", opt.rank, ": SIGTERM: announcing its leave at round ",
                   peer.rounds_done()));
      peer.request_leave();
    }
    const std::int64_t done = peer.average();
    if (peer.partition_stop_due()) {
      log_line(cat("peer ", opt.rank, ": the live graph split at round ", done,
                   " and monitor.on_partition is stop: stopping with a checkpoint"));
      peer.report(0.0, 0.0, -1.0);
      peer.save_checkpoint({});
      break;
    }
    if (peer.eval_due()) peer.report(0.0, 0.0, -1.0);
    if (peer.checkpoint_due()) peer.save_checkpoint({});
    if (peer.stop_due()) {
      peer.stop();
      return kExitOk;
    }
    if (peer.leave_due()) {  // an elastic run's schedule takes this peer out here
      log_line(cat("peer ", opt.rank, ": leaves the network after round ", done - 1,
                   " as the schedule says"));
      break;
    }
  }
  peer.finish();
  return kExitOk;
}

}  // namespace gossip
