// peer/peer_parts.hpp: the pieces of one peer's lifecycle (PeerSession, session.hpp) that are
// not the session itself: the timeline's exchange decorator, the network settings and member
// windows, the event lines, parameter snapshots, the membership watch, checkpoints and catching
// up with neighbours that are rounds ahead.
#pragma once
#if !defined(GOSSIP_ROOM_PEER)
#error "src/peer/peer_parts.hpp belongs to room peer, which this room does not use (see the room table in meson.build)"
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

namespace gossip::peer_parts {

using Clock = std::chrono::steady_clock;

/// The exchange the algorithm sees: every call goes to `inner`, and the timeline records each
/// publish as send and each collect (or catch-up's newest) as wait (the monitor's bookkeeping in
/// it included).
class TracedExchange final : public ForwardingExchange {
 public:
  TracedExchange(Exchange& inner, Timeline& timeline)
      : ForwardingExchange(inner), timeline_(&timeline) {}
  void publish(std::int64_t round, std::span<const float> params, double weight,
               std::span<const int> to) override {
    timeline_->time(Phase::kSend, [&] { inner_->publish(round, params, weight, to); });
  }
  void publish_packet(std::int64_t round, std::span<const std::byte> packet,
                      std::span<const int> to) override {
    timeline_->time(Phase::kSend, [&] { inner_->publish_packet(round, packet, to); });
  }
  std::vector<Inbox> collect(std::int64_t round, std::span<const int> from,
                             const CollectOptions& options) override {
    return timeline_->time(Phase::kWait, [&] { return inner_->collect(round, from, options); });
  }
  std::optional<Inbox> newest(std::span<const int> from) override {
    return timeline_->time(Phase::kWait, [&] { return inner_->newest(from); });
  }

 private:
  Timeline* timeline_;
};

/// A learner whose steps the timeline records as compute.
inline Learner traced_learner(Learner learner, Timeline& timeline) {
  if (learner.step)
    learner.step = [step = std::move(learner.step), t = &timeline] {
      return t->time(Phase::kCompute, step);
    };
  return learner;
}

/// A round as the timeline sees it: the local phase, the relay steps and the mix phase.
inline void traced_round(Algorithm& algorithm, Timeline& timeline, std::int64_t round) {
  timeline.begin_round(round);
  algorithm.local_phase(round);
  timeline.mixing();
  for (int s = 0; s < algorithm.relay_steps(); ++s) algorithm.relay_phase(round, s);
  algorithm.mix_phase(round);
  timeline.end_round();
}

/// Seconds since `t0`.
double since(Clock::time_point t0);

/// Puts the transport's sealing and opening of TLS records since the last call on the
/// timeline's encrypt track (its clock: seconds since `t0`).
void trace_crypto(NetExchange& transport, Timeline& timeline, Clock::time_point t0);

/// The rounds `rank` is a member for: [from, until). Everyone's is [0, max) without epochs; in
/// an elastic run it starts where its first epoch starts and ends where the next epoch without
/// it starts (max when none does). `first_epoch` is the epoch of `from`.
struct MemberWindow {
  std::int64_t from = 0;
  std::int64_t until = std::numeric_limits<std::int64_t>::max();
  std::size_t first_epoch = 0;
  bool joins() const { return from > 0; }
};
/// Throws InputError when `rank` is never a member.
MemberWindow member_window(const Topology& topology, int rank);

/// Every peer this one talks to in any round of the period (in- and out-neighbours), and in an
/// elastic run in any epoch of its member window.
std::vector<int> all_neighbours(const Topology& topology, int rank);
/// Those of all_neighbours that are not neighbours in the first epoch of its window: they join
/// later, and the start does not wait for them (NetConfig::later).
std::vector<int> later_neighbours(const Topology& topology, int rank);

/// The gossip settings the handshake compares between peers (gossip.algorithm, and for an
/// algorithm that compresses its compressor, consensus step and gossip steps; fields that do not
/// apply stay 0 or "").
GossipSettings gossip_settings(const GossipConfig& g);

/// This peer's network settings: addresses, neighbours, handshake (with `model` as the model
/// fingerprint and `num_params` floats), TLS, timeouts, log lines.
NetConfig net_config(const RunConfig& config, const Topology& topology, const PeerOptions& opt,
                     const std::string& model, std::int64_t num_params);

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
  /// All references must outlive the watch; `on_byzantine` is gossip.on_byzantine.
  Watch(const Topology& topology, int rank, MonitoredExchange& exchange, Events& events,
        Clock::time_point t0, ByzantinePolicy on_byzantine);
  void operator()(std::int64_t round);
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

/// What a checkpoint must agree with to be resumed: the graph, the buffer's size, the seed, the
/// algorithm and its period, and the rounds planned (as run_peer's checkpoints say).
std::uint64_t checkpoint_fingerprint(const RunConfig& config, const Topology& topology,
                                     std::int64_t num_params, std::int64_t rounds);

/// Checkpoints each peer keeps (the newest): a peer may be a checkpoint ahead of another.
inline constexpr std::size_t kCheckpointsKept = 3;
/// A peer under `gossip run` tells the launcher its rounds (the progress line) at most this
/// often, and at once at a fault's round.
inline constexpr auto kRoundEventEvery = std::chrono::milliseconds(250);

/// The checkpoint of `round` in `dir` for --resume-round: rank `rank`'s, of this run (its
/// fingerprint and length `rounds`). Throws InputError naming the file and what disagrees.
Checkpoint read_resume_checkpoint(const std::string& dir, std::int64_t round, int rank,
                                  std::uint64_t fingerprint, std::int64_t rounds);

/// Restores the gossip algorithm's state (push-sum weight, losses, CHOCO's copies) from `c`,
/// read from `path`; a state that does not fit the algorithm is an InputError naming the file.
void restore_algorithm(Algorithm& algorithm, const Checkpoint& c, const std::string& path);

/// A peer rounds behind its neighbours (restarted, or paused) catches up: it takes the newest
/// parameters a neighbour sent (into `params` via `upload`) and carries on from that round.
/// Returns the round to run next (`r` when there is nothing to catch up with). `neighbours`:
/// all_neighbours of its rank (kept by the caller, which knows when the graph changes).
std::int64_t catch_up(std::int64_t r, const Topology& topology, int rank,
                      std::span<const int> neighbours, MonitoredExchange& exchange,
                      Algorithm& algorithm,
                      const std::function<void(std::span<const float>)>& upload);

}  // namespace gossip::peer_parts
