// peer/elastic.hpp: a peer's part in an elastic run (docs/membership.md): the rounds it is a
// member for, joining (--join: asked and announced), the hand-over of parameters from donors to
// joiners, and the member timeline every peer derives from the schedule and the announcements
// (deaths its monitor confirmed, leaves). PeerSession drives it around each round through the
// few calls below; everything else of the session is none of its business.
#pragma once
#if !defined(GOSSIP_ROOM_PEER)
#error "src/peer/elastic.hpp belongs to room peer, which this room does not use (see the room table in meson.build)"
#endif

#include <chrono>
#include <cstdint>
#include <deque>
#include <limits>
#include <set>
#include <vector>

#include "gossip/config.hpp"
#include "gossip/faults.hpp"
#include "gossip/gossip.hpp"
#include "gossip/monitor.hpp"
#include "gossip/net.hpp"
#include "gossip/peer.hpp"
#include "gossip/topology.hpp"
#include "gossip/train.hpp"
#include "src/peer/members.hpp"
#include "src/peer/records.hpp"
#include "src/peer/trace.hpp"

namespace gossip::peer_parts {

class Elastic {
 public:
  /// The references must outlive this object; `topology`'s epochs follow the announcements.
  Elastic(const RunConfig& config, Topology& topology, const PeerOptions& opt, Events& events,
          Clock::time_point t0);

  /// gossip peer --join: asks its contacts to announce its join, and waits (net.connect_timeout_s)
  /// until the announcements it receives make it a member; then dials its future neighbours.
  void await_join(Transport& transport);
  /// A joiner: its first parameters from its donors (into the trainer and `host`); returns the
  /// round it starts at.
  std::int64_t receive_handover(Transport& transport, Trainer* trainer,
                                std::vector<float>& host);
  /// Before round `round`: the announcements that came over `channel` (the membership channel
  /// the monitor uses) and this peer's own; the graph derived again when they changed it.
  void update(std::int64_t round, Transport& transport, MonitoredExchange& exchange,
              MembershipChannel& channel);
  /// After round `done` - 1: what this peer hands over to the joiners it is a donor of
  /// (`steps`: its optimizer's, `num_params` its buffer's length), then the sends of every
  /// hand-over whose joiners' links are up.
  void after_round(std::int64_t done, const Algorithm& algorithm, std::size_t num_params,
                   double steps, Transport& transport, Exchange& exchange) {
    hand_over(done, algorithm, num_params, steps);
    send_handovers(done, transport, exchange);
    remember(done, algorithm, num_params, steps);
  }
  /// The members that left at `round` (an epoch starting there) are no longer watched.
  void forget_left(std::int64_t round, MonitoredExchange& exchange) const;

  /// The rounds this peer is a member for.
  const MemberWindow& window() const { return window_; }
  /// Every peer it talks to in any round of its window (kept as the timeline changes).
  const std::vector<int>& neighbours() const { return neighbours_; }
  /// SIGTERM, or the caller: leave at the next round (announced to the members).
  void request_leave() { leave_requested_ = true; }
  /// Marks when the joiner's data and model were ready.
  void ready(double seconds) { ready_s_ = seconds; }
  /// A joiner's record: the donors it started from, when it was ready and when it mixed.
  const std::vector<int>& donors() const { return donors_; }
  double ready_s() const { return ready_s_; }
  double mixing_s() const { return mixing_s_; }

 private:
  void hand_over(std::int64_t done, const Algorithm& algorithm, std::size_t num_params,
                 double steps);
  void hand_over(std::size_t e, std::int64_t tag, std::int64_t round, const Algorithm& algorithm,
                 std::size_t num_params, double steps);
  void send_handovers(std::int64_t round, Transport& transport, Exchange& exchange);
  /// Keeps the parameters and steps after round `done` - 1 while a join is still to come: a
  /// donor that hears of a join a round late hands over these, the round its tag names.
  void remember(std::int64_t done, const Algorithm& algorithm, std::size_t num_params,
                double steps);
  // update's phases.
  bool take_heard(std::int64_t round, const std::vector<int>& members,
                  MembershipChannel& channel, std::vector<Announcement>& own);
  void add_own(std::int64_t round, const std::vector<int>& members, MonitoredExchange& exchange,
               std::vector<Announcement>& own);
  bool merge_own(const std::vector<Announcement>& own);
  void follow_change(std::int64_t round, Transport& transport, MembershipChannel& channel);

  const RunConfig& config_;
  Topology& topology_;
  const PeerOptions& opt_;
  Events& events_;
  Clock::time_point t0_;
  MemberWindow window_;
  double ready_s_ = -1.0;     // a joiner: when its data and model were ready
  double mixing_s_ = -1.0;    // when its handover was in and it began to mix
  std::vector<int> donors_;   // whose parameters it started from
  // A donor's parameters for joiners, taken after round `tag`: sent to each joiner once its
  // link is up (checked after every round, never waited for), and kept until the sends are
  // surely done (two rounds after the last: a later round's collect waits for them).
  struct Handover {
    std::int64_t tag = 0, join = 0;  // the round they are of; the joiners' first round
    std::vector<float> params;
    double steps = 0.0;
    std::vector<int> waiting;      // joiners whose link was not up yet
    std::int64_t last_sent = 0;    // the round of the last send
    Clock::time_point made;
  };
  std::deque<Handover> handovers_;
  std::set<std::int64_t> handed_;  // the changes (their first rounds) it handed over for
  std::vector<float> previous_;       // remember's parameters after round previous_done_ - 1
  double previous_steps_ = 0.0;
  std::int64_t previous_done_ = -1;
  std::vector<int> neighbours_;    // all_neighbours, kept as the member timeline changes
  // What the peers announced while the run goes (a death their monitor confirmed, a leave on
  // SIGTERM): the earliest round each (rank, kind) was announced at. With the schedule's
  // changes it gives every peer the same graph (elastic_timeline).
  std::vector<MembershipChange> scheduled_;
  std::vector<Announcement> known_;
  std::vector<int> announced_dead_;
  bool leave_requested_ = false;
  bool leave_announced_ = false;
};

}  // namespace gossip::peer_parts
