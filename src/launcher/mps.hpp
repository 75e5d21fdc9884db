// launcher/mps.hpp: CUDA's Multi-Process Service for peers that share a GPU (train.mps). Without
// it the kernels of several processes on one device take turns (time slices); under MPS they
// run side by side from one shared context.
#pragma once
#if !defined(GOSSIP_ROOM_LAUNCHER)
#error "src/launcher/mps.hpp belongs to room launcher, which this room does not use (see the room table in meson.build)"
#endif

#include <memory>
#include <string>

#include "gossip/config.hpp"

namespace gossip::launcher {

/// An MPS control daemon started for one run: its pipe and log folders are in the environment
/// the peers inherit; it is told to quit when this goes.
class MpsDaemon {
 public:
  MpsDaemon(std::string control, std::string pipe_dir);
  ~MpsDaemon();
  MpsDaemon(const MpsDaemon&) = delete;
  MpsDaemon& operator=(const MpsDaemon&) = delete;

 private:
  std::string control_;
  std::string pipe_dir_;
};

/// What train.mps decides for `processes` peer processes of `config` (one a peer, or
/// train.peers_per_process each; `line` says it, for gossip run's output): a daemon when such
/// processes on CUDA outnumber the devices and nvidia-cuda-mps-control is
/// found (auto), or always where it can (on: InputError where it cannot); none otherwise,
/// and none when CUDA_MPS_PIPE_DIRECTORY already names one (the user's daemon is used).
std::unique_ptr<MpsDaemon> start_mps(const RunConfig& config, int processes,
                                     const std::string& log_dir, std::string& line);

}  // namespace gossip::launcher
