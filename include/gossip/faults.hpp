/// faults: the fault schedule (`faults:`, gossip/config.hpp) checked against the graph, its cuts
/// carried out by CutLinks and its attacks by Attack, Exchange decorators that sit between the
/// membership monitor (MonitoredExchange) and the transport (NetExchange, SimExchange); a
/// FaultedExchange stacks them alike for a real peer and a simulated one. Kills, restarts and
/// pauses act on processes, not links: `gossip run`'s launcher signals the peer processes and the
/// simulator stops and starts its virtual peers. So no production class knows about faults
/// (STYLE: fault injection only in test seams): a peer whose schedule has no cut has no CutLinks,
/// and one that the schedule never lets attack has no Attack.
#pragma once
#if !defined(GOSSIP_ROOM_FAULTS)
#error "gossip/faults.hpp belongs to room faults, which this room does not use (see the room table in meson.build)"
#endif

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "gossip/config.hpp"
#include "gossip/monitor.hpp"
#include "gossip/exchange.hpp"
#include "gossip/topology.hpp"

namespace gossip {

/// The peers whose link with `peer` the schedule cuts during `round` (a cut entry covers its
/// rounds from_round..to_round-1), ascending.
std::vector<int> cut_peers(std::span<const Fault> faults, int peer, std::int64_t round);
/// The links the schedule cuts in `round` among peers 0..n-1, each once as (a, b) with a < b.
std::vector<std::pair<int, int>> cut_links(std::span<const Fault> faults, int n, std::int64_t round);

/// Whether the schedule cuts any link (then each peer's exchange needs a CutLinks).
bool has_cuts(std::span<const Fault> faults);

/// The attack entry under which `peer` attacks in `round` (its rounds are round..to_round-1, or
/// on to the end when to_round is 0), or null when it does not attack then.
const Fault* attack_of(std::span<const Fault> faults, int peer, std::int64_t round);

/// Whether the schedule lets `peer` attack in any round (then its exchange needs an Attack).
bool attacks(std::span<const Fault> faults, int peer);

/// Checks the fault schedule against the topology before anything starts: its joins and leaves
/// (run_topology), every other peer in 0..n-1 of the run's topology, every cut link an edge of
/// the graph, no peer under two attacks in one round, and no
/// attack in a run whose algorithm sends packets (CHOCO's compressed differences, all-reduce's
/// chunks: an attack rewrites parameter messages). Throws InputError naming the config's line.
void check_faults(const RunConfig& config, const Topology& topology);

/// Whether the schedule changes the membership (join or leave entries).
bool changes_membership(std::span<const Fault> faults);

/// The topology a run of `config` follows: `loaded` itself, or, when the fault schedule joins or
/// leaves, or kills on an elastic topology, or the elastic topology has room for more members
/// (max_peers above n; with dpsgd or local_sgd), the elastic graphs over all max_peers ranks
/// with the membership epochs that plan_membership makes of the schedule (the data is then split
/// over the max_peers identities). Throws InputError naming the config when the schedule
/// joins or leaves on a topology that is not elastic, with an algorithm other than dpsgd and
/// local_sgd (the member graphs' weights are symmetric pulls), or when a change is impossible
/// (a join of a member, a leave of a non-member or of the last member).
Topology run_topology(const RunConfig& config, const Topology& loaded);

/// The schedule's joins and leaves, one change per entry (what run_topology plans).
std::vector<MembershipChange> scheduled_changes(std::span<const Fault> faults);

/// The schedule's cuts for the peer of `inner`, on both of its planes: the data plane (`inner`)
/// and its membership traffic (`channel`, the same transport's). While the link to a peer is
/// cut (the rounds of its cut entries), nothing crosses it either way. publish(),
/// publish_packet() and send_view() skip that peer; collect() and newest() neither wait for nor
/// take anything from it; take_views() drops the views it sent; heard_within() and
/// excused_peers() leave it out. The transport below still carries its heartbeats and views
/// (the cut is above it); they are dropped here, as a cut link would lose them. Announcements
/// pass unchanged (a cut is a fault of the parameters' and views' links, not of the elastic
/// run's member set).
///
/// The round is the tag of the last publish, send_view or collect divided by the tags per round
/// (an algorithm with relay phases tags them round * tags + step; see set_tags_per_round), so
/// take_views() and heard_within() go by the round of the exchange that came before them.
/// Calls come from one thread, as for every Exchange; `inner` and `channel` must outlive this
/// object.
class CutLinks final : public ForwardingExchange, public ForwardingMembership {
 public:
  CutLinks(Exchange& inner, MembershipChannel& channel, std::span<const Fault> faults);

  void set_tags_per_round(int tags) override {
    tags_per_round_ = tags < 1 ? 1 : tags;
    inner_->set_tags_per_round(tags);
  }
  /// The peers cut off from this one in the round of the last call, ascending.
  const std::vector<int>& cut() const { return cut_; }

  void publish(std::int64_t round, std::span<const float> params, double weight,
               std::span<const int> to) override;
  void publish_packet(std::int64_t round, std::span<const std::byte> packet,
                      std::span<const int> to) override;
  std::vector<Inbox> collect(std::int64_t round, std::span<const int> from,
                             const CollectOptions& options) override;
  void send_view(std::int64_t round, std::span<const Member> view, std::span<const int> to,
                 std::span<const Probe> probes = {}) override;
  std::vector<PeerView> take_views() override;
  std::vector<int> excused_peers() const override;
  std::optional<Inbox> newest(std::span<const int> from) override;
  std::optional<std::vector<int>> heard_within(double seconds) const override;

 private:
  /// Moves to the round of `tag`: cut_ becomes the peers cut off in it.
  void at(std::int64_t tag);
  /// `peers` without the ones cut off now (order kept).
  std::vector<int> linked(std::span<const int> peers) const;
  bool is_cut(int peer) const;

  std::vector<Fault> cuts_;  // the schedule's cut entries
  int tags_per_round_ = 1;
  std::int64_t round_ = -1;  // the round cut_ is for (-1: none yet)
  std::vector<int> cut_;
};

/// The schedule's attacks by the peer of `inner`: in a round where an attack entry names it, what
/// it publishes is not its parameters x but what the entry's kind makes of x and of the messages
/// it legitimately received, H = the parameter messages the last collect() took (the previous
/// round's, in a synchronous run), less those of peers the schedule lets attack in the round
/// they were sent for (attackers collude); when H is empty (round 0, or every neighbour left
/// out), H = {x}. With mean(H) and sd(H) coordinate-wise (sd with 1/|H|), the message is:
///   sign_flip  -s x                      scale  s x
///   noise      N(0, std^2) per value, from the stream (run seed, peer, round)
///   alie       mean(H) - z sd(H)         ipm    -epsilon mean(H)
///   dissensus  to each recipient v: h_v - epsilon (mean(H) - h_v), h_v v's message in H
///              (x when H has none from v): one message per recipient
///   nan, inf   every value NaN, or +inf
/// The push-sum weight goes out unchanged; packets (publish_packet) pass untouched (check_faults
/// refuses attacks with the algorithms that send them). Everything else passes through: the
/// peer mixes what it receives as an honest peer does. Sums run in double in ascending sender
/// order, so the simulator and a real peer send the same bits. Calls come from one thread;
/// `inner` must outlive this object.
class Attack final : public ForwardingExchange {
 public:
  Attack(Exchange& inner, std::span<const Fault> faults, std::uint64_t seed);

  void set_tags_per_round(int tags) override {
    tags_per_round_ = tags < 1 ? 1 : tags;
    inner_->set_tags_per_round(tags);
  }

  void publish(std::int64_t round, std::span<const float> params, double weight,
               std::span<const int> to) override;
  std::vector<Inbox> collect(std::int64_t round, std::span<const int> from,
                             const CollectOptions& options) override;

 private:
  struct Heard {
    int peer;
    std::vector<float> params;
  };
  /// The message of `fault` from x and heard_ into sent_ (one buffer, or one per recipient).
  void rewrite(const Fault& fault, std::int64_t round, std::span<const float> x,
               std::span<const int> to);

  std::vector<Fault> attacks_;  // the schedule's attack entries
  std::uint64_t seed_;
  int tags_per_round_ = 1;
  std::vector<Heard> heard_;    // H: the last collect's messages from peers not attacking
  std::vector<std::vector<float>> sent_;  // the last attack's messages (kept until the next)
};

/// The fault schedule's decorators over one peer's transport (`transport` its data plane,
/// `channel` its membership traffic), stacked as a real peer and the simulator both use them:
/// the monitor wraps top(), which is Attack (when the schedule lets this peer attack) over
/// CutLinks (when it cuts links) over the transport, and takes membership(), which is CutLinks
/// (when it cuts links) over `channel`; each is the transport's own when the schedule needs no
/// decorator there.
class FaultedExchange {
 public:
  FaultedExchange(Exchange& transport, MembershipChannel& channel, std::span<const Fault> faults,
                  std::uint64_t seed);
  Exchange& top() { return *top_; }
  MembershipChannel& membership() { return *membership_; }

 private:
  std::unique_ptr<CutLinks> cuts_;
  std::unique_ptr<Attack> attack_;
  Exchange* top_;
  MembershipChannel* membership_;
};

/// A seeded random fault schedule (`gossip chaos`, the chaos tests): `count` faults at distinct
/// rounds in 1..rounds*9/10, in round order, each a kill (one peer, or two), a restart of a dead
/// peer, a pause (0.1 s to max_pause_s) or a cut of one link of the graph for 5 to rounds/10
/// rounds (ending before the last round), as the state so far allows: at least min_alive peers
/// (default: a third, at least 2) stay alive. `attacks` more entries are attacks, at distinct
/// rounds of their own (a stream of their own: the other faults are the same without them),
/// each by one peer alive then and not attacking already, of a kind of kChaosAttacks at its
/// default parameter, for 3 to rounds/20 + 2 rounds ending before the last round. On an elastic
/// topology the `count` faults are joins and leaves instead, one rank each (a join of a rank that
/// that has never been a member, a leave of one that is; at least half the initial members, at
/// least 2, stay),
/// at rounds far enough apart that each takes effect before the next is announced. The same
/// topology, options and seed give the same schedule. Refuses (InputError) a run too short for
/// `count` faults.
struct ChaosOptions {
  int count = 30;
  std::uint64_t seed = 1;
  std::int64_t rounds = 0;  // the run's rounds
  double max_pause_s = 1.0;
  bool pauses = true;
  bool cuts = true;
  int attacks = 0;          // attack entries on top (gossip chaos --attacks N)
  int min_alive = 0;        // 0: a third of the peers, at least 2
};
/// The attack kinds chaos_schedule draws from.
inline constexpr AttackKind kChaosAttacks[] = {AttackKind::kSignFlip, AttackKind::kNoise,
                                               AttackKind::kDissensus};
std::vector<Fault> chaos_schedule(const Topology& topology, const ChaosOptions& options);

/// `faults` as a file `--faults FILE` reads: "faults:" and one flow map an entry.
std::string faults_yaml(std::span<const Fault> faults);

/// What a schedule makes of the peers, computed from it alone: the peers dead after it, and the
/// kills and restarts it carries out (the truth a run's record is checked against).
struct ScheduleOutcome {
  std::vector<int> dead_at_end;  // ascending
  int kills = 0;                 // peers killed (a peer killed twice counts twice)
  int restarts = 0;              // dead peers started again
};
ScheduleOutcome schedule_outcome(std::span<const Fault> faults);

/// The live graph a schedule gives, computed from it alone: each round before `rounds` at which
/// its kills and restarts (in schedule_outcome's order), its cuts' starts and ends and an elastic
/// topology's membership changes leave another live graph (strongly connected components,
/// one-way reaches, connectedness) than the round before, with the graph after all of that
/// round's changes; the graph before them is `live_graph(topology, {}, 0)`. The truth a run's
/// `live_graph` record is checked against.
std::vector<LiveGraphChange> schedule_live_graphs(const Topology& topology,
                                                  std::span<const Fault> faults,
                                                  std::int64_t rounds);

}  // namespace gossip
