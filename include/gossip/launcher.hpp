/// launcher: `gossip run` on one machine — validates the topology, starts one `gossip peer` child
/// process per rank, shows one progress bar for the whole network, merges the peers' metrics
/// (adding the consensus distance and the average model's accuracy, which no single peer can
/// know) into DIR with the same contracts as `gossip sim`, and stops every child cleanly on
/// Ctrl-C or when one fails — and `gossip collect`, the same merge for peers that another
/// launcher (mpirun, srun, Kubernetes) started.
#pragma once
#if !defined(GOSSIP_ROOM_LAUNCHER)
#error "gossip/launcher.hpp belongs to room launcher, which this room does not use (see the room table in meson.build)"
#endif

#include <string>
#include <vector>

#include "gossip/config.hpp"

namespace gossip {

struct LaunchOptions {
  std::string config_path;  // passed to the children
  std::vector<std::string> peer_arguments;  // passed to every child after CONFIG (overrides)
  std::string out_dir;
  bool keep_going = false;  // a dead peer is reported, and the others train on without it
  bool restart_on_failure = false;  // a peer that dies is started again (it rejoins), 3 times at most
  bool progress = true;
  bool resume = false;           // continue DIR's stopped run from its newest complete
                                 // checkpoint set (every peer's checkpoint of one round)
  std::int64_t until_round = 0;  // > 0: every peer stops after this round, with a checkpoint
  std::string dashboard;         // --dashboard: "host:port" of the live page; "" = none
  bool force = false;            // --force: start the peers even where the machine is too small
};

/// Runs the whole network; returns the exit code (0 done, or stopped at until_round; 1 a peer
/// failed; 3 the topology is disconnected; 130 interrupted). Throws InputError on bad input
/// (with `resume`: also when DIR holds no complete checkpoint set).
int launch(const RunConfig& config, const LaunchOptions& options);

/// "[ADDR:]PORT" (--dashboard) as "host:port": 127.0.0.1 when no address is given. Throws
/// InputError naming `what` when it is malformed.
std::string dashboard_address(const std::string& text, const std::string& what);

struct WatchOptions {
  std::string dir;      // a run folder (gossip run's --out, or where `gossip peer`s write)
  std::string address;  // where to serve the dashboard, "host:port"
  std::string config_path;  // the run's config when the folder does not name it; "" = its own
};

/// `gossip watch DIR`: serves the dashboard of the run in DIR from its files as they grow (the
/// peers' events.txt, metrics.csv), until interrupted. Returns the exit code; throws InputError
/// when DIR is not a run folder or its config cannot be found, RuntimeError when it cannot
/// listen.
int watch(const WatchOptions& options);

struct CollectRunOptions {
  /// Run folders holding DIR/peers/R/ of every rank between them (one per machine when they had
  /// no shared filesystem); the merged outputs go into the first.
  std::vector<std::string> dirs;
  std::string config_path;  // overrides the config the peers recorded (when it moved)
};

/// `gossip collect`: merges what the peers of one run saved in DIR/peers/R/ (their event lines and
/// parameter snapshots) into DIR/metrics.csv, DIR/events.jsonl and DIR/summary.json, evaluating the
/// average model and the consensus distance as `gossip run` does, and prints its final table.
/// Returns 0 when every peer finished, 1 when some did not; throws InputError when a rank is
/// missing or found twice or an events file is malformed.
int collect(const CollectRunOptions& options);

}  // namespace gossip
