// peer/records.hpp: what a peer writes as it goes: its event lines (DIR/events.txt, the launcher's
// descriptor), parameter snapshots, and the membership watch's log lines and events.
#pragma once
#if !defined(GOSSIP_ROOM_PEER)
#error "src/peer/records.hpp belongs to room peer, which this room does not use (see the room table in meson.build)"
#endif

#include <limits>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <functional>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "gossip/checkpoint.hpp"
#include "gossip/config.hpp"
#include "gossip/events.hpp"
#include "gossip/gossip.hpp"
#include "gossip/monitor.hpp"
#include "gossip/net.hpp"
#include "gossip/peer.hpp"
#include "gossip/timeline.hpp"
#include "gossip/topology.hpp"
#include "src/peer/trace.hpp"

namespace gossip::peer_parts {

/// Writes each event line to DIR/events.txt, and to a descriptor for the launcher when asked to
/// (`gossip peer --events`: stdout; `--events-fd N`: N).
class Events {
 public:
  /// `append`: a resumed peer adds to the events it saved before it stopped.
  /// `fd`: where the launcher reads event lines (-1: nowhere).
  Events(const std::string& dir, int fd, bool append);
  /// Progress only for the launcher's line (round events): not saved, since nothing is merged
  /// from it.
  void progress(const PeerEvent& event);
  void emit(const PeerEvent& event);
  /// Also hands every emitted event to `listener` (the peer's metrics).
  void set_listener(std::function<void(const PeerEvent&)> listener) {
    listener_ = std::move(listener);
  }

 private:
  std::function<void(const PeerEvent&)> listener_;
  std::string path_;
  std::ofstream file_;
  int fd_;
  std::mutex mutex_;  // one whole line at a time on fd_
  void write_line(const std::string& line);
};

/// Writes the parameter buffer (float32, this machine's byte order) to PATH through a rename, so
/// a reader never sees half a file.
void write_params(const std::string& path, std::span<const float> params);

/// After each round: the membership changes and the convergence monitor's alerts, as log lines
/// and events. Not thread-safe.
class Watch {
 public:
  /// All references must outlive the watch; `links` are the transport's reports of its links
  /// (and its alerts); `on_byzantine` is gossip.on_byzantine.
  Watch(const Topology& topology, int rank, MonitoredExchange& exchange, LinkReports& links,
        Events& events, Clock::time_point t0, ByzantinePolicy on_byzantine);
  void operator()(std::int64_t round);
  /// The run is over: links lost and not back are reported (MembershipWatch::end_links).
  void end_links(std::int64_t round);
  /// What the round's mix flagged (Algorithm::last_mix), for the next operator()'s events.
  void observe_mix(const Algorithm::MixReport& mix) {
    watch_.observe_mix(flagged(mix), mix.heard, mix.nonfinite);
  }
  /// Messages left out for NaN or Inf so far, per sender (MembershipWatch::refused).
  std::vector<std::pair<int, std::int64_t>> refused() const { return watch_.refused(); }
  bool partitioned() const { return watch_.partitioned(); }
  const ConvergenceMonitor& monitor() const { return watch_.monitor(); }
  std::vector<int> byzantine_suspects() const { return watch_.byzantine_suspects(); }

 private:
  int rank_;
  MonitoredExchange* exchange_;
  Events* events_;
  Clock::time_point t0_;
  MembershipWatch watch_;
};

/// A peer under `gossip run` tells the launcher its rounds (the progress line) at most this
/// often, and at once at a fault's round.
inline constexpr auto kRoundEventEvery = std::chrono::milliseconds(250);

}  // namespace gossip::peer_parts
