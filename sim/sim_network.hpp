// sim/sim_network.hpp: the simulator's network model and each virtual peer's Exchange. Private
// to sim/ (tests and the sim benchmark include it by this path); users go through simulate().
#pragma once
#if !defined(GOSSIP_ROOM_SIM)
#error "sim/sim_network.hpp belongs to room sim, which this room does not use (see the room table in meson.build)"
#endif

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <span>
#include <vector>

#include "gossip/config.hpp"
#include "gossip/topology.hpp"
#include "gossip/exchange.hpp"
#include "gossip/gossip.hpp"

namespace gossip {

/// Bytes a parameter message costs on the wire besides the values: the frame header (32) and
/// the f64 push-sum weight (8), as NetExchange sends it.
inline constexpr std::uint64_t kMessageOverheadBytes = 40;
/// A packet (Exchange::publish_packet) costs its own bytes and the frame header.
inline constexpr std::uint64_t kPacketOverheadBytes = 32;
/// Bytes a membership view of `peers` entries costs as its own frame: header, count, entries.
inline std::uint64_t view_message_bytes(int peers) {
  return 32 + 4 + 5 * static_cast<std::uint64_t>(peers);
}

class SimNetwork;

/// One virtual peer's view of the simulated network. publish() copies the buffer (rounded as
/// gossip.wire says, as a real peer's message arrives) and queues its messages on this peer's
/// sending link; collect() returns spans into the network's store,
/// ascending by peer, and advances this peer's clock to when its receiving link has taken the
/// last accepted message (or the deadline, for a message that never arrives). Its membership
/// traffic is the monitor's views and probes, which ride with the messages; an elastic run's
/// announcements it does not carry (the simulator derives the member timeline itself).
class SimExchange final : public Exchange, public MembershipChannel {
 public:
  SimExchange(SimNetwork& network, int rank) : network_(&network), rank_(rank) {}

  int rank() const override { return rank_; }
  int size() const override;
  void publish(std::int64_t round, std::span<const float> params, double weight,
               std::span<const int> to) override;
  void publish_packet(std::int64_t round, std::span<const std::byte> packet,
                      std::span<const int> to) override;
  std::vector<Inbox> collect(std::int64_t round, std::span<const int> from,
                             const CollectOptions& options) override;
  std::vector<int> dead_peers() const override { return {}; }
  std::uint64_t bytes_sent() const override { return bytes_sent_; }
  /// Nobody: the simulated peers go round by round together, say no goodbyes and never stall
  /// (their clocks are simulated), so a collect leaves a peer out only for want of a message
  /// that came in time (killed, paused or slow: silence).
  std::vector<int> excused_peers() const override { return {}; }
  /// Not carried: the simulator catches a peer that comes back up itself (Swarm::catch_up);
  /// throws RuntimeError.
  std::optional<Inbox> newest(std::span<const int> from) override;
  /// Ignored, on purpose: the network's store keeps each message by its tag as it comes and
  /// divides none.
  void set_tags_per_round(int) override {}

  /// The view rides with the next publish (to the same peers); a lost message loses it too.
  void send_view(std::int64_t round, std::span<const Member> view, std::span<const int> to,
                 std::span<const Probe> probes = {}) override;
  /// The views that came with the messages the last collect() took.
  std::vector<PeerView> take_views() override;
  /// nullopt: the simulated links carry no heartbeats, and the monitor goes by rounds.
  std::optional<std::vector<int>> heard_within(double) const override { return std::nullopt; }
  /// Not carried (the simulator plans the member timeline from the schedule and the monitors'
  /// deaths, Swarm): both throw RuntimeError.
  void announce(std::span<const Announcement> known, std::span<const int> to) override;
  std::vector<Announcement> take_announcements() override;

  /// With `on`, each collect's [start, end] on this peer's clock is kept until take_collects()
  /// (the timeline's wait spans).
  void keep_collects(bool on) { keep_collects_ = on; }
  std::vector<std::pair<double, double>> take_collects() { return std::exchange(collects_, {}); }

  /// This peer's simulated clock, seconds since the start.
  double now() const { return now_; }
  /// Advances the clock by `seconds` of waiting (a restarted peer joining the others).
  void compute(double seconds) { now_ += seconds; }
  /// Advances the clock by `cpu_seconds` of this peer's own computation, which takes
  /// SimNetwork::cpu_share() times as long when the peers share fewer cores than they are, and
  /// counts against the CPU bound (the class comment of SimNetwork).
  void work(double cpu_seconds);

 private:
  /// Counts `copies` messages of `bytes` each, and the pending view and probes riding with each,
  /// as sent (their bytes and CPU), and hands that view and those probes to the message.
  void count_sent(std::size_t copies, std::uint64_t bytes,
                  std::optional<std::vector<Member>>& view, std::vector<Probe>& probes);
  /// Charges `copies` messages of `bytes` each, with `view` and `probes` riding with each.
  void charge(std::size_t copies, std::uint64_t bytes,
              const std::optional<std::vector<Member>>& view, const std::vector<Probe>& probes);
  /// A relay's CPU for the round's messages of `bytes` it forwards (sim.relayed): each is taken
  /// in and sent on, as the other messages' bytes are (sim.byte_cpu_ns).
  void charge_forwards(std::uint64_t bytes);
  /// A second publish of `round`'s parameters, to peers the first did not address: they get
  /// `params`, queued on the link after the round's earlier copies.
  void publish_again(std::int64_t round, std::span<const float> params, std::span<const int> to);
  /// What collect() takes of one peer's messages (sim_network.cpp).
  struct Pick;
  /// Which of peer p's messages up to `round` a collect that started at `start`, and waits
  /// until `deadline`, takes: the newest already there, else the earliest to arrive in time;
  /// notes the round's view for take_views().
  Pick pick_message(int p, std::int64_t round, double start, double deadline,
                    const CollectOptions& options);
  /// A collect's end, now_ the time its waits and its receiving link are done: the CPU bound
  /// on its `received` bytes and the work since the last one, which may move now_ later.
  void apply_cpu_bound(std::uint64_t received, bool got_any);

  SimNetwork* network_;
  int rank_;
  double now_ = 0.0;
  // When this peer's sending link has sent all it published, and its receiving link has taken
  // the last message it accepted.
  double sent_until_ = 0.0;
  double received_until_ = -std::numeric_limits<double>::infinity();
  std::uint64_t bytes_sent_ = 0;
  // The CPU bound: when the last collect() ended, and the CPU seconds charged since.
  double cpu_mark_ = 0.0;
  double cpu_since_ = 0.0;
  std::optional<std::vector<Member>> pending_view_;  // sent with the next publish
  bool keep_collects_ = false;
  std::vector<std::pair<double, double>> collects_;  // since take_collects()
  std::vector<Probe> pending_probes_;                // and the probes passed on with it
  std::vector<std::pair<int, std::int64_t>> taken_;  // (sender, round) sent to the last collect
};

/// The shared state of a simulated network: each sender's last few published buffers, the link
/// model and the peers' exchanges. Publishing writes only the sender's own slots and collecting
/// only reads, so one phase's calls may run on many threads; phases must not overlap.
///
/// The CPU model (sim.cores, sim.byte_cpu_ns, sim.message_cpu_us, sim.exchange_cpu; off by
/// default): a peer's CPU work is its local steps, the phases' own work when sim.exchange_cpu
/// (measured as they run, on the thread that runs them, less the steps inside), and
/// byte_cpu_ns for every byte it sends and takes (TLS, TCP/IP; this CPU runs while the bytes are
/// on the link; a relay's for each message it forwards, taken in and sent on) and 2
/// message_cpu_us for every collect that waits: its last message arrives after
/// the peer's CPU work is done, so the peer sleeps and is woken (the scheduler's switching,
/// which is most of what a message costs; a relayed hop whose chunk is already there pays its
/// bytes alone). When
/// n peers share c < n cores, every CPU second takes n / c seconds (the cores are shared evenly
/// while all peers are busy). A collect() never ends before the last one ended plus the CPU
/// charged since, times n / c: a peer's round is at least its CPU work, however fast its links.
/// `sim` with `sim.relayed` set as real peers on `emulation`'s links would relay (net.relays:
/// auto): a link of `topology` between two peers that cannot be dialled (behind a NAT or a
/// firewall, or an unreachable pair), unless both are behind the same NAT, goes through the
/// lowest-ranked peer that can be dialled (none: the link stays direct in the model).
SimConfig simulated_relays(SimConfig sim, const LinkEmulation& emulation, const Topology& topology);

class SimNetwork {
 public:
  /// `history` = how many past rounds each sender keeps (max_staleness + 1 for async runs; 2 for
  /// relayed exchanges, where a peer publishes its next hop in the phase its successor collects
  /// the last one). `wire`: how parameter messages travel (gossip.wire): a message is stored as
  /// its receivers get it (rounded to bf16 or fp16 and widened back) and costs its 2 or 4 bytes
  /// a parameter on the links.
  SimNetwork(int peers, std::int64_t num_params, int history, const SimConfig& config,
             std::uint64_t seed, WireFormat wire = WireFormat::kFp32);

  int size() const { return static_cast<int>(exchanges_.size()); }
  SimExchange& exchange(int peer) { return *exchanges_.at(peer); }
  /// Simulated seconds of one local step of `peer` (stragglers are straggler_factor slower).
  double step_seconds(int peer) const;
  void set_step_seconds(double seconds) { step_seconds_ = seconds; }
  /// Wall seconds a CPU second of one peer takes: peers / sim.cores when that is above 1.
  double cpu_share() const { return cpu_share_; }
  /// CPU seconds moving `messages` messages of `bytes` in all costs one end (sim.byte_cpu_ns,
  /// sim.message_cpu_us).
  double transfer_cpu_seconds(std::uint64_t messages, std::uint64_t bytes) const {
    return static_cast<double>(bytes) * config_.byte_cpu_ns * 1e-9 +
           static_cast<double>(messages) * config_.message_cpu_us * 1e-6;
  }
  /// `learner` with its step timed (CPU on the calling thread), so run_phase can leave the steps
  /// out of what it charges; unchanged without sim.exchange_cpu.
  Learner timed(int peer, Learner learner);
  /// Runs `phase` (one of `peer`'s algorithm phases); with sim.exchange_cpu, charges the peer
  /// the CPU the phase used on this thread, less its local steps (the step time charges those).
  template <typename Phase>
  void run_phase(int peer, Phase&& phase) {
    if (!config_.exchange_cpu) return phase();
    const double steps0 = step_cpu_[peer], t0 = thread_cpu_seconds();
    phase();
    const double used = thread_cpu_seconds() - t0 - (step_cpu_[peer] - steps0);
    exchanges_[peer]->work(std::max(0.0, used));
  }
  /// CPU seconds the calling thread has used.
  static double thread_cpu_seconds();
  /// Bytes of one parameter message: the values at the wire format's width, and the overhead.
  std::uint64_t message_bytes() const;
  /// Seconds one parameter message occupies a link: 8 * message bytes / bandwidth.
  double wire_seconds() const;
  /// Seconds a message of `bytes` (frame included) occupies a link.
  double wire_seconds(std::uint64_t bytes) const;
  /// Whether the message from `from` to `to` of `round` is lost (deterministic per link, round).
  bool lost(int from, int to, std::int64_t round) const;
  /// A peer whose process is down (killed): its links are down too, so nobody waits for it, as
  /// a real peer does not wait on a lost connection.
  void set_down(int peer, bool down) { down_.at(peer) = down ? 1 : 0; }
  bool down(int peer) const { return down_[peer] != 0; }
  /// A stopped peer (paused): from simulated time `from` on it sends nothing, not even the
  /// heartbeats a real peer's links carry, so its neighbours find it silent suspect_after_s
  /// later (< 0: running again).
  void set_silent_from(int peer, double from) { silent_from_.at(peer) = from; }
  /// Frees every stored message (the run is over).
  void release() {
    for (auto& ring : store_)
      for (auto& m : ring) m = Message{};
  }
  /// When `peer` fell silent, or < 0 when it is not.
  double silent_from(int peer) const { return silent_from_[peer]; }

 private:
  friend class SimExchange;
  struct Message {
    std::int64_t round = -1;
    double weight = 1.0;
    double sent_at = 0.0;  // when the first of its messages started leaving the sender
    std::vector<int> to;   // recipients in the order the sender's link sends to them
    double wire = 0.0;     // seconds one copy occupies a link
    std::vector<float> params;
    // Recipients published to again in the same round with a buffer of their own (an
    // attacker's message for each victim, faults/Attack): they get theirs, not params.
    std::vector<std::pair<std::vector<int>, std::vector<float>>> others;
    std::vector<std::byte> packet;  // instead of params (publish_packet)
    /// The parameters `receiver` gets.
    std::span<const float> params_for(int receiver) const {
      for (const auto& [to, p] : others)
        if (std::find(to.begin(), to.end(), receiver) != to.end()) return p;
      return params;
    }
    std::optional<std::vector<Member>> view;  // the sender's membership view, if it sent one
    std::vector<Probe> probes;                // the probes it passed on with that view
  };
  /// When `message` has fully reached `receiver` if the receiver's link is idle:
  /// sent_at + (its place in the sender's queue) * wire_seconds() + latency.
  double arrival(const Message& message, int sender, int receiver) const;
  /// The relay of the link sender-receiver (sim.relayed), -1 for a direct link.
  int relay_of(int sender, int receiver) const;
  std::map<std::pair<int, int>, int> relay_of_;        // (a < b) -> relay
  std::vector<std::vector<std::pair<int, int>>> forwards_;  // per relay: (from, to) it carries
  /// The slot for (sender, round): the ring entry, or null when that round is gone or unsent.
  const Message* find(int sender, std::int64_t round) const;
  Message& slot(int sender, std::int64_t round);

  SimConfig config_;
  std::uint64_t seed_;
  std::int64_t num_params_;
  int history_;
  WireFormat wire_;
  double step_seconds_ = 0.0;
  double cpu_share_ = 1.0;
  std::vector<double> step_cpu_;  // CPU seconds each peer's timed steps have used
  std::vector<char> straggler_;
  std::vector<char> down_;
  std::vector<double> silent_from_;
  std::vector<std::vector<Message>> store_;  // [sender][round % history]
  std::vector<std::unique_ptr<SimExchange>> exchanges_;
};

}  // namespace gossip
