/// launcher: `gossip run` on one machine. Validates the topology, starts one `gossip peer` child
/// process per rank, shows one progress bar for the whole network, merges the peers' metrics
/// (adding the consensus distance and the average model's accuracy, which no single peer can
/// know) into DIR with the same contracts as `gossip sim`, and stops every child cleanly on
/// Ctrl-C or when one fails.
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
  bool progress = true;
};

/// Runs the whole network; returns the exit code (0 done; 1 a peer failed; 3 the topology is
/// disconnected; 130 interrupted). Throws InputError on bad input.
int launch(const RunConfig& config, const LaunchOptions& options);

}  // namespace gossip
