// Tests for monitor: consensus distance, the average model, live-graph connectivity.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <optional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "gossip/monitor.hpp"
#include "gossip/topology.hpp"

using gossip::consensus_distance;
using gossip::live_graph;

namespace {

gossip::Topology ring(int n) {
  gossip::GeneratorSpec s;
  s.kind = gossip::GeneratorKind::kRing;
  s.n = n;
  return gossip::make_topology(s);
}

}  // namespace

TEST_CASE("consensus distance is the mean squared distance to the average", "[monitor]") {
  std::vector<float> a{0, 0, 1}, b{2, 2, 1}, c{1, 1, 1};
  std::vector<std::span<const float>> same{c, c, c};
  REQUIRE(consensus_distance(same) == 0.0);
  std::vector<std::span<const float>> two{a, b};
  REQUIRE(consensus_distance(two) == Approx(2.0));  // (1/2)(2 + 2)
  std::vector<std::span<const float>> one{a};
  REQUIRE(consensus_distance(one) == 0.0);

  std::vector<float> avg(3);
  std::vector<std::span<const float>> three{a, b, c};
  gossip::average_params(three, avg);
  REQUIRE(avg == std::vector<float>{1, 1, 1});
  REQUIRE(consensus_distance(three) == Approx(4.0 / 3.0));
}

TEST_CASE("consensus distance covers buffers longer than one block", "[monitor]") {
  const std::size_t n = 10000;
  std::vector<float> a(n, 1.0f), b(n, -1.0f);
  std::vector<std::span<const float>> two{a, b};
  REQUIRE(consensus_distance(two) == Approx(static_cast<double>(n)));
}

TEST_CASE("live graph connectivity with dead peers", "[monitor]") {
  SECTION("a ring stays connected with one peer gone, not with two apart") {
    const auto t = ring(6);
    REQUIRE(live_graph(t).connected);
    const int one[] = {2};
    const auto g1 = live_graph(t, one);
    REQUIRE(g1.connected);
    REQUIRE(g1.alive == std::vector<int>{0, 1, 3, 4, 5});
    const int two[] = {1, 4};
    const auto g2 = live_graph(t, two);
    REQUIRE_FALSE(g2.connected);
    REQUIRE(g2.components == std::vector<std::vector<int>>{{0, 5}, {2, 3}});
  }
  SECTION("two separate rings are two components") {
    const auto t = gossip::load_topology_from_string(
        "n: 6\nedges:\n"
        "  - [0, 1]\n  - [1, 2]\n  - [2, 0]\n  - [3, 4]\n  - [4, 5]\n  - [5, 3]\n", "two.yaml");
    const auto g = live_graph(t);
    REQUIRE_FALSE(g.connected);
    REQUIRE(g.components.size() == 2);
  }
  SECTION("directed: a cycle is strongly connected, a path is not") {
    const auto cycle = gossip::load_topology_from_string(
        "n: 3\ndirected: true\nedges:\n"
        "  - [0, 1]\n  - [1, 2]\n  - [2, 0]\n", "cycle.yaml");
    REQUIRE(live_graph(cycle).connected);
    const auto path = gossip::load_topology_from_string(
        "n: 3\ndirected: true\nedges:\n  - [0, 1]\n  - [1, 2]\n", "path.yaml");
    const auto g = live_graph(path);
    REQUIRE_FALSE(g.connected);
    // Weakly connected, but no peer is reached back: three strongly connected components, each
    // reaching the ones after it one way only.
    CHECK(g.components == std::vector<std::vector<int>>{{0}, {1}, {2}});
    CHECK(g.one_way == std::vector<std::pair<int, int>>{{0, 1}, {0, 2}, {1, 2}});
    // A cycle 0 -> 1 -> 2 -> 0 with a tail 2 -> 3: the cycle is one component, 3 another,
    // reached from it and not reaching it.
    const auto tail = gossip::load_topology_from_string(
        "n: 4\ndirected: true\nedges: [[0, 1], [1, 2], [2, 0], [2, 3]]\n", "tail.yaml");
    const auto t = live_graph(tail);
    CHECK_FALSE(t.connected);
    CHECK(t.components == std::vector<std::vector<int>>{{0, 1, 2}, {3}});
    CHECK(t.one_way == std::vector<std::pair<int, int>>{{0, 1}});
    // Peer 1 dead: 2 -> 0 and 2 -> 3 remain, so {2} reaches {0} and {3}.
    const std::vector<int> dead{1};
    const auto cut = live_graph(tail, dead);
    CHECK(cut.components == std::vector<std::vector<int>>{{0}, {2}, {3}});
    CHECK(cut.one_way == std::vector<std::pair<int, int>>{{1, 0}, {1, 2}});
  }
  SECTION("absent links: both ends stay in, the link does not count") {
    const auto t = ring(8);
    // The ring: links 0-1, 0-7, 4-5 and 5-6 never formed.
    const std::pair<int, int> absent[] = {{0, 1}, {7, 0}, {4, 5}, {6, 5}};
    const auto g = live_graph(t, {}, 0, absent);
    CHECK_FALSE(g.connected);
    CHECK(g.alive.size() == 8u);
    CHECK(g.components == std::vector<std::vector<int>>{{0}, {1, 2, 3, 4}, {5}, {6, 7}});
    // One absent link of a ring leaves a line: still connected.
    const std::pair<int, int> one[] = {{3, 4}};
    CHECK(live_graph(t, {}, 0, one).connected);
  }
  SECTION("time-varying: the union over the period counts") {
    gossip::GeneratorSpec s;
    s.kind = gossip::GeneratorKind::kOnePeerExponential;
    s.n = 8;
    const auto t = gossip::make_topology(s);
    REQUIRE(t.period() > 1);
    REQUIRE(live_graph(t).connected);
  }
}

TEST_CASE("the convergence monitor reports changes in the dead set", "[monitor]") {
  const auto t = ring(8);
  gossip::ConvergenceMonitor monitor(t, 0);
  CHECK_FALSE(monitor.check({}).has_value());  // nobody dead: nothing changed
  CHECK(monitor.connected());

  const auto one = monitor.check({2});
  REQUIRE(one.has_value());
  CHECK(one->connected);
  CHECK(one->dead == std::vector<int>{2});
  CHECK(one->message == "peers dead: 2; live graph still connected");
  CHECK_FALSE(one->event.has_value());  // a death that leaves the graph whole is no partition
  CHECK_FALSE(monitor.check({2}).has_value());  // the same set again: no report

  const auto two = monitor.check({2, 6});
  REQUIRE(two.has_value());
  CHECK_FALSE(two->connected);
  CHECK_FALSE(monitor.connected());
  const int dead[] = {2, 6};
  CHECK(two->components == live_graph(t, dead).components);
  CHECK(two->components == std::vector<std::vector<int>>{{0, 1, 7}, {3, 4, 5}});
  CHECK(two->event == gossip::MemberEventKind::kPartition);
  CHECK(two->my_component == std::vector<int>{0, 1, 7});
  CHECK(two->message ==
        "peers dead: 2,6; live graph DISCONNECTED, components {0,1,7} {3,4,5} (this peer in "
        "{0,1,7}): the components train separate models");

  const auto back = monitor.check({});
  REQUIRE(back.has_value());
  CHECK(back->connected);
  CHECK(back->event == gossip::MemberEventKind::kHealed);
  CHECK(back->message == "no peer dead; live graph connected");
  CHECK(monitor.connected());
}

TEST_CASE("the convergence monitor takes a link that never formed out of the live graph at once",
          "[monitor]") {
  const auto t = ring(8);
  gossip::ConvergenceMonitor zero(t, 0);
  // Peer 0 never linked to 1 nor 7: nobody is dead, and it is cut off from round 0.
  const auto alone = zero.check({}, {}, 0, {1, 7});
  REQUIRE(alone.has_value());
  CHECK_FALSE(alone->connected);
  CHECK(alone->dead.empty());
  CHECK(alone->event == gossip::MemberEventKind::kPartition);
  CHECK(alone->components == std::vector<std::vector<int>>{{0}, {1, 2, 3, 4, 5, 6, 7}});
  CHECK(alone->my_component == std::vector<int>{0});
  CHECK(alone->message.find("links never formed: to 1,7") != std::string::npos);
  // Peer 1 lacks only its link to 0: a line, still connected, but the change is reported.
  gossip::ConvergenceMonitor one(t, 1);
  const auto line = one.check({}, {}, 0, {0});
  REQUIRE(line.has_value());
  CHECK(line->connected);
  CHECK_FALSE(line->event.has_value());
  // The link formed after all: whole again.
  const auto back = zero.check({}, {}, 5, {});
  REQUIRE(back.has_value());
  CHECK(back->event == gossip::MemberEventKind::kHealed);
}

namespace {

using gossip::Member;
using gossip::MemberState;
using gossip::Membership;
using gossip::PeerView;

std::vector<std::string> events_of(Membership& m) {
  std::vector<std::string> out;
  for (const auto& c : m.take_changes()) out.push_back(std::string(gossip::event_name(c.event)) + " " + std::to_string(c.peer));
  return out;
}

}  // namespace

TEST_CASE("membership: a missed neighbour is suspected, then dead after the grace rounds",
          "[monitor][membership]") {
  Membership m(4, 0, 2);
  m.missed(1, 10);
  m.tick(10);
  CHECK(m.suspected() == std::vector<int>{1});
  CHECK(events_of(m) == std::vector<std::string>{"suspect 1"});
  m.missed(1, 11);  // still suspected: no second event, the clock is not restarted
  m.tick(11);
  CHECK(m.dead().empty());
  m.tick(12);  // held for 2 rounds
  CHECK(m.dead() == std::vector<int>{1});
  CHECK(m.suspected().empty());
  CHECK(events_of(m) == std::vector<std::string>{"dead 1"});
  m.missed(1, 13);  // a dead peer stays dead
  CHECK(events_of(m).empty());
  m.missed(0, 13);  // never suspects itself
  CHECK(m.view()[0].state == MemberState::kAlive);
}

TEST_CASE("membership: a death also waits out dead_after_s of the peer's clock",
          "[monitor][membership]") {
  Membership m(3, 0, 1, 5.0);
  m.missed(2, 4, 100.0);
  m.tick(9, 104.9);  // enough rounds, not enough time
  CHECK(m.suspected() == std::vector<int>{2});
  m.tick(10, 105.0);
  CHECK(m.dead() == std::vector<int>{2});
}

TEST_CASE("membership: merge rules (higher incarnation wins, then the graver state)",
          "[monitor][membership]") {
  Membership m(3, 0, 3);
  PeerView v{1, {{0, MemberState::kAlive}, {0, MemberState::kAlive}, {0, MemberState::kSuspect}}};
  m.merge(v, 5);
  CHECK(m.view()[2] == Member{0, MemberState::kSuspect});
  // An older or equal-but-milder entry does not undo it.
  m.merge(PeerView{1, {{0, MemberState::kAlive}, {0, MemberState::kAlive}, {0, MemberState::kAlive}}}, 6);
  CHECK(m.view()[2] == Member{0, MemberState::kSuspect});
  // Peer 2 refuted with incarnation 1: alive again.
  m.merge(PeerView{1, {{0, MemberState::kAlive}, {0, MemberState::kAlive}, {1, MemberState::kAlive}}}, 7);
  CHECK(m.view()[2] == Member{1, MemberState::kAlive});
  CHECK(events_of(m) == std::vector<std::string>{"suspect 2", "alive 2"});
  // What a neighbour says of 2's death is hearsay: a suspicion here, until this peer's own
  // timer confirms it; peer 2's refutation (incarnation 2) clears it first.
  m.merge(PeerView{1, {{0, MemberState::kAlive}, {0, MemberState::kAlive}, {1, MemberState::kDead}}}, 8);
  CHECK(m.view()[2] == Member{1, MemberState::kSuspect});
  m.merge(PeerView{1, {{0, MemberState::kAlive}, {0, MemberState::kAlive}, {2, MemberState::kAlive}}}, 9);
  CHECK(events_of(m) == std::vector<std::string>{"suspect 2", "alive 2"});
  // The suspicion picked up from a view turns into a death after the grace rounds too.
  m.merge(PeerView{1, {{0, MemberState::kAlive}, {0, MemberState::kAlive}, {2, MemberState::kSuspect}}}, 10);
  m.tick(12);
  CHECK(m.view()[2].state == MemberState::kSuspect);
  m.tick(13);
  CHECK(m.view()[2] == Member{2, MemberState::kDead});
  // Malformed views are ignored, not trusted.
  m.merge(PeerView{1, {{9, MemberState::kAlive}}}, 14);
  m.merge(PeerView{1, {{0, MemberState::kAlive}, {0, MemberState::kAlive}, {9, static_cast<MemberState>(7)}}}, 14);
  CHECK(m.ignored_views() == 2);
  CHECK(m.view()[2] == Member{2, MemberState::kDead});
}

TEST_CASE("membership: a peer refutes its own suspicion or death by raising its incarnation",
          "[monitor][membership]") {
  Membership m(3, 1, 2);
  m.merge(PeerView{0, {{0, MemberState::kAlive}, {0, MemberState::kSuspect}, {0, MemberState::kAlive}}}, 3);
  CHECK(m.view()[1] == Member{1, MemberState::kAlive});
  CHECK(events_of(m) == std::vector<std::string>{"alive 1"});
  m.merge(PeerView{0, {{0, MemberState::kAlive}, {0, MemberState::kDead}, {0, MemberState::kAlive}}}, 4);
  CHECK(m.view()[1] == Member{1, MemberState::kAlive});  // an old death: already refuted
  m.merge(PeerView{0, {{0, MemberState::kAlive}, {4, MemberState::kDead}, {0, MemberState::kAlive}}}, 5);
  CHECK(m.view()[1] == Member{5, MemberState::kAlive});  // a restarted peer rejoins past it
  CHECK(events_of(m) == std::vector<std::string>{"rejoin 1"});
}

namespace {

/// A view of `n` peers sent by `sender` to peer 0: every entry `m`, except the sender's own and
/// peer 0's (alive at 0).
PeerView everyone(int n, int sender, Member m) {
  PeerView v{sender, std::vector<Member>(static_cast<std::size_t>(n), m)};
  v.members[static_cast<std::size_t>(sender)] = Member{0, MemberState::kAlive};
  v.members[0] = Member{0, MemberState::kAlive};
  return v;
}

}  // namespace

TEST_CASE("membership: a claimed death is a suspicion here; only this peer's timer confirms it",
          "[monitor][membership]") {
  Membership m(4, 0, 2, 1.0);
  m.merge(everyone(4, 1, {0, MemberState::kDead}), 5, 10.0);
  CHECK(m.dead().empty());
  CHECK(m.suspected() == std::vector<int>{2, 3});
  m.tick(7, 10.9);  // rounds enough, time not: still suspects
  CHECK(m.dead().empty());
  m.tick(8, 11.0);
  CHECK(m.dead() == std::vector<int>{2, 3});
  CHECK(events_of(m) == std::vector<std::string>{"suspect 2", "suspect 3", "dead 2", "dead 3"});
}

TEST_CASE("membership: an insider's inflated claims cannot outrank a peer's own incarnation",
          "[monitor][membership]") {
  // Peer 0's view; the holder of peer 1's certificate says everyone else died at the highest
  // incarnation there is (the forged frame of the issue that could never be refuted).
  constexpr std::uint32_t kMax = std::numeric_limits<std::uint32_t>::max();
  Membership m(5, 0, 1, 1.0);
  PeerView forged = everyone(5, 1, {kMax, MemberState::kDead});
  forged.members[0] = Member{kMax, MemberState::kDead};
  m.merge(forged, 3, 0.0);
  // Believed only at the incarnation each peer is known to have (0), and only as a suspicion.
  for (int q : {2, 3, 4}) CHECK(m.view()[q] == Member{0, MemberState::kSuspect});
  CHECK(m.inflated_claims() == 3 + 1);  // three others and peer 0 itself
  // About itself: refuted, but raised by a bounded step, never to where it could not go on.
  CHECK(m.view()[0].state == MemberState::kAlive);
  CHECK(m.view()[0].incarnation == Membership::kMaxIncarnationStep + 1);
  // The victims refute (each raises its own incarnation to 1); the refutations reach peer 0
  // through another neighbour before its timer runs out: nobody is declared dead.
  PeerView refuted = everyone(5, 2, {1, MemberState::kAlive});
  refuted.members[2] = Member{1, MemberState::kAlive};
  refuted.members[0] = m.view()[0];
  m.merge(refuted, 4, 0.5);
  m.tick(10, 5.0);
  CHECK(m.dead().empty());
  for (int q : {2, 3, 4}) CHECK(m.view()[q] == Member{1, MemberState::kAlive});
  // An alive claim too far ahead is lowered to one past what the peer announced.
  m.merge(everyone(5, 1, {kMax, MemberState::kAlive}), 11, 6.0);
  for (int q : {2, 3, 4}) CHECK(m.view()[q] == Member{2, MemberState::kAlive});
  // Peer 0 can still refute a claim about itself afterwards (its incarnation did not wrap).
  const std::uint32_t mine = m.view()[0].incarnation;
  PeerView again = everyone(5, 1, {0, MemberState::kAlive});
  again.members[0] = Member{mine, MemberState::kSuspect};
  m.merge(again, 12, 7.0);
  CHECK(m.view()[0] == Member{mine + 1, MemberState::kAlive});
}

TEST_CASE("membership: a restarted peer adopts its first neighbour's view, then caps again",
          "[monitor][membership]") {
  // Peer 0 restarted into a network where peer 2 refuted its way to incarnation 5 and peer 3
  // died at 4: its fresh view knows them at 0.
  Membership m(4, 0, 3, 0.0);
  m.adopt_next_view();
  PeerView first = everyone(4, 1, {0, MemberState::kAlive});
  first.members[2] = Member{5, MemberState::kAlive};
  first.members[3] = Member{4, MemberState::kDead};
  m.merge(first, 10, 0.0);
  CHECK(m.adopted_views() == 1);
  CHECK(m.view()[2] == Member{5, MemberState::kAlive});    // where the network has it
  CHECK(m.view()[3] == Member{4, MemberState::kSuspect});  // a death it did not see: suspected
  CHECK(m.inflated_claims() == 0);
  // The next view is capped as any: an alive claim one past what peer 0 knows at most.
  PeerView next = everyone(4, 1, {0, MemberState::kAlive});
  next.members[2] = Member{9, MemberState::kAlive};
  next.members[3] = Member{4, MemberState::kDead};
  m.merge(next, 11, 0.0);
  CHECK(m.view()[2] == Member{6, MemberState::kAlive});
  CHECK(m.inflated_claims() == 1);
}

TEST_CASE("membership: a suspicion one past the incarnation a peer knows is believed there",
          "[monitor][membership]") {
  // Peer 0 holds peer 2 dead (at 0: the claim of 4 was more than one past what it knew) and
  // never heard 2's refutation (1); a neighbour that did suspects 2 again at 1. Believed at 1,
  // so that peer 0 passes it on to 2, which refutes past it; capped to 0 it would change
  // nothing, and 2 would never hear of it.
  Membership m(4, 0, 1, 0.0);
  PeerView dead = everyone(4, 1, {0, MemberState::kAlive});
  dead.members[2] = Member{4, MemberState::kDead};
  m.merge(dead, 1, 0.0);
  CHECK(m.view()[2] == Member{0, MemberState::kSuspect});
  m.tick(3, 1.0);
  CHECK(m.view()[2] == Member{0, MemberState::kDead});
  PeerView again = everyone(4, 1, {0, MemberState::kAlive});
  again.members[2] = Member{1, MemberState::kSuspect};
  m.merge(again, 4, 2.0);
  CHECK(m.view()[2] == Member{1, MemberState::kSuspect});  // one past: believed
  PeerView far = everyone(4, 1, {0, MemberState::kAlive});
  far.members[2] = Member{3, MemberState::kDead};
  m.merge(far, 5, 3.0);
  CHECK(m.view()[2] == Member{1, MemberState::kSuspect});  // further ahead: at what is known
  CHECK(m.inflated_claims() == 2);
}

TEST_CASE("membership: a peer dead at incarnation 0 was never heard from; the monitor says the "
          "network is not connected while one is missing", "[monitor][membership]") {
  // A 4-ring of which peers 2 and 3 never started: peer 0 hears 1, whose view holds 2 suspect
  // at 0 (its link to 2 never formed); 0's own link to 3 never formed.
  Membership m(4, 0, 1, 0.0);
  m.appeared();
  CHECK(m.view()[0] == Member{1, MemberState::kAlive});  // up: incarnation 1
  CHECK(m.unheard().empty());                             // no view heard yet: nothing known
  PeerView from1 = everyone(4, 0, {0, MemberState::kAlive});
  from1.members[0] = Member{1, MemberState::kAlive};
  from1.members[1] = Member{1, MemberState::kAlive};
  from1.members[2] = Member{0, MemberState::kSuspect};
  m.merge(from1, 1, 0.0);
  m.missed(3, 1, 0.0);
  m.tick(3, 1.0);
  CHECK(m.dead() == std::vector<int>{2, 3});
  CHECK(m.unheard() == std::vector<int>{2, 3});
  // One that had been heard (incarnation 1) and died is dead, not unheard.
  PeerView later = from1;
  later.members[2] = Member{1, MemberState::kDead};
  m.merge(later, 4, 2.0);
  m.tick(6, 3.0);
  CHECK(m.unheard() == std::vector<int>{3});
  // A view begun afresh mid-run knows only what it is told: it calls nobody unheard.
  Membership fresh(4, 0, 1, 0.0);
  fresh.adopt_next_view();
  fresh.appeared();
  fresh.merge(from1, 1, 0.0);
  fresh.missed(3, 1, 0.0);
  fresh.tick(3, 1.0);
  CHECK_FALSE(fresh.dead().empty());
  CHECK(fresh.unheard().empty());

  const auto t = ring(4);
  gossip::ConvergenceMonitor zero(t, 0);
  const auto change = zero.check({2, 3}, {}, 3, {3}, {2, 3});
  REQUIRE(change.has_value());
  CHECK_FALSE(change->connected);  // the survivors {0, 1} are linked, but 2 and 3 never came
  CHECK(change->event == gossip::MemberEventKind::kPartition);
  CHECK(change->components == std::vector<std::vector<int>>{{0, 1}, {2}, {3}});
  CHECK(change->message.find("never heard from by anyone (not started?): 2,3") !=
        std::string::npos);
  // The same dead peers, heard from once: a death, and the survivors are connected.
  gossip::ConvergenceMonitor other(t, 0);
  const auto died = other.check({2, 3}, {}, 3, {});
  REQUIRE(died.has_value());
  CHECK(died->connected);
}

TEST_CASE("membership: a neighbour heard directly is not suspected on another peer's word",
          "[monitor][membership]") {
  Membership m(4, 0, 1, 0.0);
  const std::vector<int> direct{1, 3};  // peer 0 hears 1 and 3 itself right now
  m.merge(everyone(4, 1, {0, MemberState::kDead}), 2, 0.0, &direct);
  CHECK(m.suspected() == std::vector<int>{2});  // 3 is vetoed by what peer 0 hears
  CHECK(m.vetoed_claims() == 1);
  m.tick(3, 1.0);
  CHECK(m.dead() == std::vector<int>{2});
}

TEST_CASE("membership: suspect and alive events about one peer are rate-limited, deaths are not",
          "[monitor][membership]") {
  Membership m(3, 0, 1, 0.0);
  // A flood of suspicions and refutations of peer 2 within one second of the clock.
  for (std::uint32_t i = 0; i < 100; ++i) {
    m.merge(PeerView{1, {{0, MemberState::kAlive}, {0, MemberState::kAlive}, {2 * i, MemberState::kSuspect}}}, 1, 0.0);
    m.merge(PeerView{1, {{0, MemberState::kAlive}, {0, MemberState::kAlive}, {2 * i + 1, MemberState::kAlive}}}, 1, 0.0);
  }
  const auto events = events_of(m);
  CHECK(events.size() == static_cast<std::size_t>(Membership::kMemberEventBurst));
  CHECK(m.suppressed_events() == 200 - events.size());
  // The bucket refills with the clock; and a death is always recorded.
  m.merge(PeerView{1, {{0, MemberState::kAlive}, {0, MemberState::kAlive}, {199, MemberState::kSuspect}}}, 2, 10.0);
  m.tick(3, 10.0);
  CHECK(events_of(m) == std::vector<std::string>{"suspect 2", "dead 2"});
}

namespace {

/// An in-memory transport for membership tests, on all three of its faces (data plane,
/// membership channel, link reports): a fixed set of peers that answer.
class FakeExchange final : public gossip::Exchange,
                           public gossip::MembershipChannel,
                           public gossip::LinkReports {
 public:
  FakeExchange(int rank, int size) : rank_(rank), size_(size) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void publish(std::int64_t, std::span<const float>, double, std::span<const int>) override {}
  void publish_packet(std::int64_t tag, std::span<const std::byte>,
                      std::span<const int> to) override {
    last_tag = tag;
    last_to.assign(to.begin(), to.end());
  }
  std::vector<gossip::Inbox> collect(std::int64_t round, std::span<const int> from,
                                     const gossip::CollectOptions& o) override {
    last_no_wait = o.no_wait;
    last_deadline = o.deadline;
    std::vector<gossip::Inbox> out;
    for (int p : from)
      if (std::find(answering.begin(), answering.end(), p) != answering.end())
        out.push_back(gossip::Inbox{p, round, {}, 1.0, {}});
    return out;
  }
  std::vector<int> dead_peers() const override { return {}; }
  std::uint64_t bytes_sent() const override { return 0; }
  void send_view(std::int64_t, std::span<const Member> view, std::span<const int>,
                 std::span<const gossip::Probe> probes) override {
    sent.assign(view.begin(), view.end());
    sent_probes.assign(probes.begin(), probes.end());
  }
  std::vector<PeerView> take_views() override { return std::exchange(views, {}); }
  std::vector<int> excused_peers() const override { return ahead; }
  std::optional<gossip::Inbox> newest(std::span<const int>) override { return std::nullopt; }
  void set_tags_per_round(int) override {}  // a transport goes by tags
  std::optional<std::vector<int>> heard_within(double) const override { return heard; }
  void announce(std::span<const gossip::Announcement>, std::span<const int>) override {}
  std::vector<gossip::Announcement> take_announcements() override { return {}; }
  std::vector<gossip::TransportAlert> take_alerts() override { return std::exchange(alerts, {}); }
  std::vector<gossip::LinkStatus> links() const override { return link_status; }
  gossip::ReachabilityReport reachability() const override { return {}; }
  std::uint64_t bytes_relayed() const override { return 0; }
  std::vector<gossip::PeerAddress> addresses() const override { return {}; }

  std::optional<std::vector<int>> heard;  // what heartbeats say (nullopt: none, as in the sim)
  std::vector<gossip::LinkStatus> link_status;  // what links() says
  std::vector<gossip::TransportAlert> alerts;   // what take_alerts() hands over next
  std::vector<int> answering, ahead, last_no_wait, last_to;
  std::int64_t last_tag = -1;
  std::chrono::milliseconds last_deadline{0};
  std::vector<PeerView> views;
  std::vector<Member> sent;
  std::vector<gossip::Probe> sent_probes;

 private:
  int rank_, size_;
};

}  // namespace

TEST_CASE("MonitoredExchange: suspects silent in-neighbours, stops waiting for them, sends its view",
          "[monitor][membership]") {
  FakeExchange inner(0, 4);
  gossip::MonitoredExchange ex(inner, inner, {.round_timeout_floor_s = 0, .suspect_after_s = 0,
                                        .dead_after_rounds = 2, .dead_after_s = 0.0});
  const int from[] = {1, 3};
  inner.answering = {1, 3};
  ex.collect(0, from, {});
  CHECK(ex.membership().suspected().empty());
  inner.answering = {1};
  ex.collect(1, from, {});
  CHECK(ex.membership().suspected() == std::vector<int>{3});
  ex.collect(2, from, {});
  CHECK(inner.last_no_wait == std::vector<int>{3});  // not waited for while suspected
  ex.collect(3, from, {});
  CHECK(ex.dead_peers() == std::vector<int>{3});
  // A peer that is ahead of us is alive, not silent.
  inner.answering = {};
  inner.ahead = {1};
  ex.collect(4, from, {});
  CHECK(ex.membership().suspected().empty());
  const float x[1] = {0};
  const int to[] = {1};
  ex.publish(5, x, 1.0, to);
  REQUIRE(inner.sent.size() == 4);
  CHECK(inner.sent[3] == Member{0, MemberState::kDead});
  // Peer 3 rejoins: a view from 1 carries its new incarnation.
  inner.answering = {1, 3};
  inner.views = {PeerView{1, {{0, MemberState::kAlive}, {0, MemberState::kAlive},
                              {0, MemberState::kAlive}, {1, MemberState::kAlive}}}};
  ex.collect(5, from, {});
  CHECK(ex.dead_peers().empty());
  std::vector<std::string> ev;
  for (const auto& c : ex.membership().take_changes()) ev.push_back(std::string(gossip::event_name(c.event)) + " " + std::to_string(c.peer));
  CHECK(ev == std::vector<std::string>{"suspect 3", "dead 3", "rejoin 3"});
}

TEST_CASE("MonitoredExchange: with several exchanges a round (tags round * T + step) suspicions "
          "and deaths go by the round",
          "[monitor][membership]") {
  FakeExchange inner(0, 4);
  gossip::MonitoredExchange ex(inner, inner, {.round_timeout_floor_s = 0, .suspect_after_s = 0,
                                        .dead_after_rounds = 2, .dead_after_s = 0.0});  // dead 2 rounds after the suspicion
  ex.set_tags_per_round(3);
  const int from[] = {1, 3};
  inner.answering = {1, 3};
  for (std::int64_t tag = 0; tag < 3; ++tag) ex.collect(tag, from, {});  // round 0
  inner.answering = {1};  // peer 3 falls silent in round 1
  for (std::int64_t tag = 3; tag < 9; ++tag) ex.collect(tag, from, {});  // rounds 1 and 2
  CHECK(ex.membership().suspected() == std::vector<int>{3});
  CHECK(ex.dead_peers().empty());  // six silent exchanges, but two rounds
  ex.collect(9, from, {});         // round 3
  CHECK(ex.dead_peers() == std::vector<int>{3});
  std::vector<std::string> ev;
  for (const auto& c : ex.membership().take_changes())
    ev.push_back(std::string(gossip::event_name(c.event)) + " " + std::to_string(c.peer) + " round " + std::to_string(c.round));
  CHECK(ev == std::vector<std::string>{"suspect 3 round 1", "dead 3 round 3"});
  // The tag goes through to the transport (cut links by the round: tests/test_faults.cpp).
  const std::byte packet[1] = {};
  ex.publish_packet(10, packet, from);
  CHECK(inner.last_tag == 10);
  CHECK(inner.last_to == std::vector<int>{1, 3});
}

TEST_CASE("probes: a request floods a few hops, one who hears the target acks, only the asker "
          "believes the ack", "[monitor][probes]") {
  using gossip::Probe;
  using gossip::ProbeKind;
  using gossip::Prober;
  // The line 0 - 3 - 2 - 1: 0 lost its link to 1 and asks around; 2 hears 1.
  Prober zero(4, 0), three(4, 3), two(4, 2);
  auto hears = [](std::vector<int> heard) {
    return [heard](int q) { return std::find(heard.begin(), heard.end(), q) != heard.end(); };
  };
  zero.ask(1, 0.0, 0.5);
  zero.ask(1, 0.2, 0.5);  // asked again too soon: nothing new
  const auto req = zero.take_outgoing();
  REQUIRE(req.size() == 1);
  CHECK(req[0] == Probe{ProbeKind::kRequest, Prober::kProbeTtl, 0, 1, 1});
  three.receive(req, 0.0, hears({0, 2}));
  const auto fwd = three.take_outgoing();
  REQUIRE(fwd.size() == 1);
  CHECK(fwd[0].ttl == Prober::kProbeTtl - 1);
  three.receive(req, 0.0, hears({0, 2}));  // the same request again: passed on once only
  CHECK(!three.has_outgoing());
  two.receive(fwd, 0.0, hears({1, 3}));
  const auto ack = two.take_outgoing();
  REQUIRE(ack.size() == 1);
  CHECK(ack[0] == Probe{ProbeKind::kAck, Prober::kProbeTtl, 0, 1, 1});
  three.receive(ack, 0.1, hears({0, 2}));
  const auto back = three.take_outgoing();
  REQUIRE(back.size() == 1);
  CHECK(three.vouched_at(1) < 0);  // an ack for someone else is passed on, not believed
  zero.receive(back, 0.3, hears({3}));
  CHECK(zero.vouched_at(1) == 0.3);
  CHECK(!zero.has_outgoing());  // its own request and ack end with it

  // An ack that answers nothing we asked (a forged nonce, or about another peer) is ignored;
  // a request with no hops left is not passed on; a request about us is answered by us.
  Prober asker(4, 0);
  asker.ask(2, 0.0, 0.5);
  asker.receive(std::vector<Probe>{{ProbeKind::kAck, 1, 0, 1, 1}, {ProbeKind::kAck, 1, 0, 2, 77}},
                1.0, hears({}));
  CHECK(asker.vouched_at(1) < 0);
  CHECK(asker.vouched_at(2) < 0);
  asker.receive(std::vector<Probe>{{ProbeKind::kAck, 1, 0, 2, 1}}, 1.5, hears({}));
  CHECK(asker.vouched_at(2) == 1.5);
  Prober last(4, 3);
  (void)last.take_outgoing();
  last.receive(std::vector<Probe>{{ProbeKind::kRequest, 1, 0, 1, 5}}, 0.0, hears({}));
  CHECK(!last.has_outgoing());
  last.receive(std::vector<Probe>{{ProbeKind::kRequest, 1, 0, 3, 6}}, 0.0, hears({}));
  CHECK(last.take_outgoing() == std::vector<Probe>{{ProbeKind::kAck, Prober::kProbeTtl, 0, 3, 6}});

  // A flood of requests is bounded: at most kMaxProbesPerView pass on, the rest are counted.
  Prober busy(8, 0);
  std::vector<Probe> flood;
  for (std::uint32_t i = 0; i < 100; ++i) flood.push_back({ProbeKind::kRequest, 2, 1, 5, i});
  busy.receive(flood, 0.0, hears({}));
  CHECK(busy.take_outgoing().size() == gossip::kMaxProbesPerView);
  CHECK(busy.dropped() == 100 - gossip::kMaxProbesPerView);
}

TEST_CASE("MonitoredExchange: the round deadline follows the measured round time; a slow neighbour "
          "that heartbeats is left out but not declared dead, a silent one is",
          "[monitor][membership]") {
  FakeExchange inner(0, 4);
  double clock = 0.0;
  gossip::MonitoredExchange ex(inner, inner, {.round_timeout_floor_s = 0.2, .suspect_after_s = 1.0,
                                        .dead_after_rounds = 2, .dead_after_s = 0.5},
                               [&clock] { return clock; });
  const int from[] = {1, 3};
  inner.answering = {1, 3};
  inner.heard = std::vector<int>{1, 3};
  gossip::CollectOptions o;
  o.deadline = std::chrono::milliseconds(30'000);
  std::int64_t round = 0;
  for (; round < 20; ++round) {
    ex.collect(round, from, o);
    // The round deadline (monitor.round_timeout_s) until enough rounds were measured.
    if (round <= static_cast<std::int64_t>(gossip::MonitoredExchange::kDeadlineWarmup))
      CHECK(inner.last_deadline == std::chrono::milliseconds(30'000));
    clock += round % 10 == 9 ? 0.05 : 0.01;  // one round in ten takes 50 ms
  }
  // 8 x the 95th percentile (50 ms) = 400 ms, above the 200 ms floor.
  ex.collect(round++, from, o);
  CHECK(inner.last_deadline == std::chrono::milliseconds(400));
  // Peer 1 heartbeats but sends no rounds; peer 3 is silent altogether.
  inner.answering = {};
  inner.heard = std::vector<int>{1};
  for (int i = 0; i < 10; ++i, ++round) {
    clock += 0.4;
    ex.collect(round, from, o);
  }
  CHECK(ex.membership().suspected() == std::vector<int>{1});
  CHECK(ex.dead_peers() == std::vector<int>{3});
  CHECK(ex.membership().held_deaths() > 0);
  // It asked the others about both (indirect probes ride on its next view).
  const float x[1] = {0};
  const int to[] = {1, 3};
  ex.publish(round, x, 1.0, to);
  bool asked_about_3 = false;
  for (const auto& p : inner.sent_probes) asked_about_3 |= p.target == 3 && p.origin == 0;
  CHECK(asked_about_3);
}

TEST_CASE("MembershipWatch: a link's facts become link events, once each; a never-formed one "
          "leaves the live graph", "[monitor][membership]") {
  FakeExchange inner(0, 4);
  gossip::MonitoredExchange ex(inner, inner, {.round_timeout_floor_s = 0, .suspect_after_s = 0,
                                        .dead_after_rounds = 100, .dead_after_s = 0.0});
  const auto t = ring(4);
  gossip::MembershipWatch watch(t, 0);
  watch.set_link_reports(&inner);  // the transport's own reports, beside the decorator stack
  const auto links_of = [](const std::vector<gossip::PeerEvent>& events) {
    std::vector<gossip::LinkEvent> out;
    for (const auto& e : events)
      if (const auto* l = std::get_if<gossip::LinkEvent>(&e)) out.push_back(*l);
    return out;
  };
  gossip::LinkStatus one{.peer = 1, .formed = true, .formed_s = 0.5, .up = true};
  gossip::LinkStatus three{.peer = 3, .given_up = true, .why = "refused dialling 127.0.0.1:9"};
  inner.link_status = {one, three};
  std::vector<std::string> lines;
  const auto first = watch(ex, 1, 2.0, &lines);
  const auto l1 = links_of(first);
  REQUIRE(l1.size() == 1u);
  CHECK(l1[0].change == gossip::LinkChange::kNeverFormed);
  CHECK(l1[0].neighbour == 3);
  CHECK(l1[0].round == 0);  // absent from the start
  CHECK(l1[0].reason == "refused dialling 127.0.0.1:9");
  CHECK(watch.unlinked() == std::vector<int>{3});
  // A ring of 4 without 0-3 is a line: connected, and the monitor said why it changed.
  CHECK(watch.monitor().connected());
  CHECK(std::find(lines.begin(), lines.end(),
                  "link to peer 3 never_formed: refused dialling 127.0.0.1:9") != lines.end());
  CHECK(links_of(watch(ex, 2, 3.0)).empty());  // said once
  // It formed after all (a late start): reported, and back in the live graph.
  inner.link_status[1] = {.peer = 3, .formed = true, .formed_s = 9.0, .up = true};
  const auto l3 = links_of(watch(ex, 3, 9.5));
  REQUIRE(l3.size() == 1u);
  CHECK(l3[0].change == gossip::LinkChange::kFormed);
  CHECK(l3[0].formed_s == 9.0);
  CHECK(watch.unlinked().empty());
  // Link 0-1 goes down. Within the reconnect window nothing is said; at the end a link down for
  // less than kLostAtEndS may be a neighbour finishing, one down longer is lost.
  inner.link_status[0] = {.peer = 1, .formed = true, .formed_s = 0.5, .down_s = 0.5,
                          .why = "link lost: end of file"};
  CHECK(links_of(watch(ex, 4, 10.0)).empty());
  CHECK(links_of(watch.end_links(4, 10.0)).empty());
  inner.link_status[0].down_s = gossip::MembershipWatch::kLostAtEndS + 1.0;
  const auto lost = links_of(watch.end_links(4, 11.0));
  REQUIRE(lost.size() == 1u);
  CHECK(lost[0].change == gossip::LinkChange::kLost);
  CHECK(lost[0].neighbour == 1);
  CHECK(lost[0].round == 4);
  CHECK(lost[0].reason == "link lost: end of file");
  CHECK(links_of(watch.end_links(4, 11.0)).empty());
  // A neighbour that said bye finished: its closed link is not a loss.
  inner.link_status[1] = {.peer = 3, .formed = true, .formed_s = 9.0, .left = true,
                          .down_s = 5.0};
  CHECK(links_of(watch.end_links(4, 11.0)).empty());
}

TEST_CASE("MembershipWatch: the transport's alerts come from its reports, read from the "
          "transport itself, in order", "[monitor][membership]") {
  FakeExchange inner(0, 4);
  gossip::MonitoredExchange ex(inner, inner, {.round_timeout_floor_s = 0, .suspect_after_s = 0,
                                               .dead_after_rounds = 100, .dead_after_s = 0.0});
  const auto t = ring(4);
  const auto alerts_of = [](const std::vector<gossip::PeerEvent>& events) {
    std::vector<std::pair<gossip::MemberEventKind, int>> out;
    for (const auto& e : events)
      if (const auto* m = std::get_if<gossip::MemberEvent>(&e))
        out.emplace_back(m->event, m->subject);
    return out;
  };
  inner.alerts = {{gossip::MemberEventKind::kIdentityConflict, 2, "a second connection as 2"},
                  {gossip::MemberEventKind::kRefusedParams, 1, "refused peer 1's parameters"}};
  // Without reports (the simulator's watch) nothing is read: the alerts stay with the transport.
  gossip::MembershipWatch bare(t, 0);
  CHECK(alerts_of(bare(ex, 1, 1.0)).empty());
  CHECK(inner.alerts.size() == 2u);
  gossip::MembershipWatch watch(t, 0);
  watch.set_link_reports(&inner);
  std::vector<std::string> lines;
  const auto got = alerts_of(watch(ex, 1, 1.0, &lines));
  CHECK(got == std::vector<std::pair<gossip::MemberEventKind, int>>{
                   {gossip::MemberEventKind::kIdentityConflict, 2},
                   {gossip::MemberEventKind::kRefusedParams, 1}});
  const auto first = std::find(lines.begin(), lines.end(), "a second connection as 2");
  CHECK(first != lines.end());
  CHECK(std::find(first, lines.end(), "refused peer 1's parameters") != lines.end());
  CHECK(inner.alerts.empty());
  CHECK(alerts_of(watch(ex, 2, 2.0)).empty());  // taken once
}
