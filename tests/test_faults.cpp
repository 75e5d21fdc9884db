// Tests for faults: the schedule's cut links (cut_peers), its check against the graph, and
// CutLinks, the Exchange decorator that carries the cuts out under the membership monitor; the
// schedule's attacks (Attack), each kind's message in closed form on tiny vectors.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gossip/faults.hpp"
#include "gossip/monitor.hpp"
#include "gossip/topology.hpp"

using gossip::CutLinks;
using gossip::Fault;
using gossip::Member;
using gossip::MemberState;
using gossip::PeerView;
using Catch::Matchers::Contains;

namespace {

gossip::Topology ring(int n) {
  gossip::GeneratorSpec s;
  s.kind = gossip::GeneratorKind::kRing;
  s.n = n;
  return gossip::make_topology(s);
}

Fault cut(std::int64_t from, std::int64_t to, std::vector<std::pair<int, int>> links) {
  return Fault{from, to, gossip::FaultAction::kCut, {}, std::move(links), 0.0};
}

/// An in-memory transport that records what reaches it, on both planes (data and membership):
/// the peers of each call and its tag.
class FakeExchange final : public gossip::Exchange, public gossip::MembershipChannel {
 public:
  FakeExchange(int rank, int size) : rank_(rank), size_(size) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void publish(std::int64_t tag, std::span<const float>, double,
               std::span<const int> to) override {
    last_tag = tag;
    published_to.assign(to.begin(), to.end());
  }
  void publish_packet(std::int64_t tag, std::span<const std::byte>,
                      std::span<const int> to) override {
    last_tag = tag;
    published_to.assign(to.begin(), to.end());
  }
  std::vector<gossip::Inbox> collect(std::int64_t tag, std::span<const int> from,
                                     const gossip::CollectOptions&) override {
    collected_from.assign(from.begin(), from.end());
    std::vector<gossip::Inbox> out;
    for (int p : from)
      if (std::find(answering.begin(), answering.end(), p) != answering.end())
        out.push_back(gossip::Inbox{p, tag, {}, 1.0, {}});
    return out;
  }
  std::vector<int> dead_peers() const override { return {}; }
  std::uint64_t bytes_sent() const override { return 0; }
  void send_view(std::int64_t tag, std::span<const Member>, std::span<const int> to,
                 std::span<const gossip::Probe>) override {
    view_tag = tag;
    view_to.assign(to.begin(), to.end());
  }
  std::vector<PeerView> take_views() override { return std::exchange(views, {}); }
  std::vector<int> excused_peers() const override { return ahead; }
  std::optional<gossip::Inbox> newest(std::span<const int> from) override {
    newest_from.assign(from.begin(), from.end());
    return std::nullopt;
  }
  std::optional<std::vector<int>> heard_within(double) const override { return heard; }
  void set_tags_per_round(int) override {}  // a transport goes by tags
  void announce(std::span<const gossip::Announcement> known, std::span<const int> to) override {
    announced.assign(known.begin(), known.end());
    announced_to.assign(to.begin(), to.end());
  }
  std::vector<gossip::Announcement> take_announcements() override { return announced; }

  std::optional<std::vector<int>> heard;  // what heartbeats say (nullopt: none, as in the sim)
  std::vector<gossip::Announcement> announced;
  std::vector<int> announced_to;
  std::vector<int> answering, ahead;
  std::vector<PeerView> views;
  std::int64_t last_tag = -1, view_tag = -1;
  std::vector<int> published_to, collected_from, view_to, newest_from;

 private:
  int rank_, size_;
};

Fault attack(std::int64_t from, std::int64_t to, std::vector<int> peers, gossip::AttackKind kind,
             double parameter) {
  Fault f{from, to, gossip::FaultAction::kAttack, std::move(peers), {}, 0.0};
  f.attack = kind;
  f.parameter = parameter;
  return f;
}

/// A transport that keeps every buffer published to it, and answers collect() with `inboxes`.
class RecordingExchange final : public gossip::Exchange {
 public:
  struct Sent {
    std::int64_t tag;
    std::vector<float> params;
    double weight;
    std::vector<int> to;
  };
  RecordingExchange(int rank, int size) : rank_(rank), size_(size) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void publish(std::int64_t tag, std::span<const float> params, double weight,
               std::span<const int> to) override {
    sent.push_back({tag, {params.begin(), params.end()}, weight, {to.begin(), to.end()}});
  }
  void publish_packet(std::int64_t, std::span<const std::byte>, std::span<const int>) override {
    ++packets;
  }
  std::vector<gossip::Inbox> collect(std::int64_t tag, std::span<const int>,
                                     const gossip::CollectOptions&) override {
    std::vector<gossip::Inbox> out;
    for (const auto& [peer, params] : inboxes)
      out.push_back(gossip::Inbox{peer, tag, params, 1.0, {}});
    return out;
  }
  std::vector<int> dead_peers() const override { return {}; }
  std::uint64_t bytes_sent() const override { return 0; }
  std::vector<int> excused_peers() const override { return {}; }
  std::optional<gossip::Inbox> newest(std::span<const int>) override { return std::nullopt; }
  void set_tags_per_round(int) override {}  // a transport goes by tags

  std::vector<std::pair<int, std::vector<float>>> inboxes;  // (sender, its message)
  std::vector<Sent> sent;
  int packets = 0;

 private:
  int rank_, size_;
};

PeerView view_from(int peer) {
  return PeerView{peer, std::vector<Member>(4, Member{0, MemberState::kAlive})};
}

}  // namespace

TEST_CASE("cut_peers: the other ends of a peer's cut links, from_round up to to_round, ascending",
          "[faults]") {
  const std::vector<Fault> faults{cut(2, 5, {{0, 3}, {1, 0}}), cut(4, 6, {{2, 0}, {0, 3}}),
                                  Fault{3, 0, gossip::FaultAction::kKill, {0}, {}, 0.0}};
  CHECK(gossip::cut_peers(faults, 0, 1).empty());
  CHECK(gossip::cut_peers(faults, 0, 2) == std::vector<int>{1, 3});
  CHECK(gossip::cut_peers(faults, 0, 4) == std::vector<int>{1, 2, 3});  // each peer once
  CHECK(gossip::cut_peers(faults, 0, 5) == std::vector<int>{2, 3});
  CHECK(gossip::cut_peers(faults, 0, 6).empty());  // to_round: the links are back
  CHECK(gossip::cut_peers(faults, 3, 2) == std::vector<int>{0});  // both ends of a link
  CHECK(gossip::cut_peers(faults, 2, 2).empty());
  CHECK(gossip::has_cuts(faults));
  CHECK(!gossip::has_cuts(std::vector<Fault>{Fault{3, 0, gossip::FaultAction::kKill, {0}, {}, 0.0}}));
  CHECK(!gossip::has_cuts({}));
}

TEST_CASE("check_faults: peers and cut links must be the topology's", "[faults]") {
  const gossip::Topology t = ring(4);
  gossip::RunConfig c;
  c.faults = {Fault{3, 0, gossip::FaultAction::kKill, {3}, {}, 0.0}, cut(2, 5, {{0, 1}, {3, 0}})};
  CHECK_NOTHROW(gossip::check_faults(c, t));
  c.faults = {Fault{3, 0, gossip::FaultAction::kKill, {4}, {}, 0.0}};
  CHECK_THROWS_WITH(gossip::check_faults(c, t),
                    Contains("faults[0].kill") && Contains("peer 4 is not in the topology's 0..3"));
  c.faults = {cut(2, 5, {{0, 1}, {0, 2}})};
  CHECK_THROWS_WITH(gossip::check_faults(c, t),
                    Contains("faults[0].cut") && Contains("link [0, 2] is not an edge"));
  c.faults = {cut(2, 5, {{0, 7}})};
  CHECK_THROWS_WITH(gossip::check_faults(c, t), Contains("names a peer outside the topology"));
}

TEST_CASE("CutLinks: a cut link carries nothing either way in its rounds, which go by the tag",
          "[faults]") {
  // Three exchanges a round (tags round * 3 + step); 0-1 is cut in round 2, tags 6 to 8.
  FakeExchange inner(0, 4);
  CutLinks links(inner, inner, std::vector<Fault>{cut(2, 3, {{0, 1}})});
  links.set_tags_per_round(3);
  const int both[] = {1, 3};
  const float params[1] = {0};
  const std::byte packet[1] = {};
  const std::vector<Member> view(4);
  for (std::int64_t tag = 4; tag < 11; ++tag) {
    INFO("tag " << tag);
    const bool down = tag >= 6 && tag < 9;
    const std::vector<int> open = down ? std::vector<int>{3} : std::vector<int>{1, 3};
    // The view goes first (as MonitoredExchange sends it, ahead of the publish): its tag, not
    // the last publish's, says whether the link is cut.
    links.send_view(tag, view, both);
    CHECK(inner.view_tag == tag);
    CHECK(inner.view_to == open);
    links.publish(tag, params, 1.0, both);
    CHECK(inner.published_to == open);
    links.publish_packet(tag, packet, both);
    CHECK(inner.last_tag == tag);
    CHECK(inner.published_to == open);
    // Nothing is waited for or taken from the cut peer, not even its views or a newer round.
    inner.answering = {1, 3};
    const auto got = links.collect(tag, both, {});
    CHECK(inner.collected_from == open);
    CHECK(got.size() == open.size());
    inner.views = {view_from(1), view_from(3)};
    std::vector<int> viewed;
    for (const PeerView& v : links.take_views()) viewed.push_back(v.peer);
    CHECK(viewed == open);
    links.newest(both);
    CHECK(inner.newest_from == open);
    // The transport still hears its heartbeats (the cut is above it); the monitor must not.
    inner.heard = std::vector<int>{1, 3};
    CHECK(links.heard_within(1.0) == std::optional<std::vector<int>>(open));
    inner.heard.reset();
    CHECK(!links.heard_within(1.0));  // no heartbeats below (the simulator): nothing to say
    inner.ahead = {1, 3};
    CHECK(links.excused_peers() == open);
    CHECK(links.cut() == (down ? std::vector<int>{1} : std::vector<int>{}));
    // Announcements pass unchanged: a cut is of the parameters' and views' links.
    const gossip::Announcement known[] = {{2, gossip::ChangeKind::kLeave, tag}};
    links.announce(known, both);
    CHECK(inner.announced_to == std::vector<int>{1, 3});
    CHECK(links.take_announcements().size() == 1u);
  }
  // The other end of the link sees the same cut.
  FakeExchange one(1, 4);
  CutLinks other(one, one, std::vector<Fault>{cut(2, 3, {{0, 1}})});
  const int two[] = {0, 2};
  other.publish(2, params, 1.0, two);
  CHECK(one.published_to == std::vector<int>{2});
  other.publish(3, params, 1.0, two);
  CHECK(one.published_to == std::vector<int>{0, 2});
}

TEST_CASE("MonitoredExchange over CutLinks: the view and the messages skip a cut link from its "
          "first tag, the monitor finds the peer silent, and hears it again after the cut",
          "[faults][membership]") {
  FakeExchange inner(0, 4);
  CutLinks links(inner, inner, std::vector<Fault>{cut(2, 5, {{0, 1}})});
  gossip::MonitoredExchange ex(links, links, {.round_timeout_floor_s = 0, .suspect_after_s = 0,
                                               .dead_after_rounds = 2, .dead_after_s = 0.0});  // dead 2 rounds after the suspicion
  ex.set_tags_per_round(3);
  const int from[] = {1, 3};
  const std::byte packet[1] = {};
  inner.answering = {1, 3};
  for (std::int64_t tag = 0; tag < 5; ++tag) {
    ex.publish_packet(tag, packet, from);
    CHECK(inner.published_to == std::vector<int>{1, 3});
    ex.collect(tag, from, {});
  }
  // Peer 3 falls silent at the last exchange of round 1: suspected, so the view changes and goes
  // out with the first exchange of round 2, the cut's first, which must not reach peer 1.
  inner.answering = {1};
  ex.publish_packet(5, packet, from);
  ex.collect(5, from, {});
  CHECK(ex.membership().suspected() == std::vector<int>{3});
  inner.view_tag = -1;
  ex.publish_packet(6, packet, from);
  CHECK(inner.view_tag == 6);
  CHECK(inner.view_to == std::vector<int>{3});
  CHECK(inner.published_to == std::vector<int>{3});
  // Through the cut (rounds 2 to 4) the monitor waits for nobody from 1 and hears nothing of it,
  // though the transport below still hears 1's heartbeats and takes its views.
  for (std::int64_t tag = 6; tag < 15; ++tag) {
    INFO("tag " << tag);
    if (tag > 6) ex.publish_packet(tag, packet, from);
    CHECK(inner.published_to == std::vector<int>{3});
    inner.views = {view_from(1)};
    ex.collect(tag, from, {});
    CHECK(inner.collected_from == std::vector<int>{3});
  }
  CHECK(ex.dead_peers() == std::vector<int>{1, 3});
  // Round 5: the link is back; 1 is not waited for (dead), but what it sends is taken again.
  ex.publish_packet(15, packet, from);
  CHECK(inner.published_to == std::vector<int>{1, 3});
  inner.views = {PeerView{1, {{0, MemberState::kAlive}, {1, MemberState::kAlive},
                              {0, MemberState::kAlive}, {0, MemberState::kDead}}}};
  ex.collect(15, from, {});
  CHECK(inner.collected_from == std::vector<int>{1, 3});
  CHECK(ex.dead_peers() == std::vector<int>{3});  // 1 refuted its death (incarnation 1)
  std::vector<std::string> ev;
  for (const auto& c : ex.membership().take_changes())
    ev.push_back(std::string(gossip::event_name(c.event)) + " " + std::to_string(c.peer) + " round " + std::to_string(c.round));
  CHECK(ev == std::vector<std::string>{"suspect 3 round 1", "suspect 1 round 2", "dead 3 round 3",
                                       "dead 1 round 4", "rejoin 1 round 5"});
}

namespace {

using gossip::AttackKind;
using Floats = std::vector<float>;

/// What peer 0 of a ring of 4 sends for round 5 under `fault`, having heard h1 from peer 1 and
/// h3 from peer 3 in round 4, with x = (1, -2, 0.5) its own parameters.
std::vector<RecordingExchange::Sent> attacked(const Fault& fault, bool heard = true) {
  RecordingExchange inner(0, 4);
  if (heard) inner.inboxes = {{1, {1, 2, 3}}, {3, {3, 6, -1}}};
  gossip::Attack ex(inner, std::vector<Fault>{fault}, 7);
  const std::vector<int> peers{1, 3};
  ex.collect(4, peers, {});
  const Floats x{1, -2, 0.5};
  ex.publish(5, x, 0.25, peers);
  return inner.sent;
}

}  // namespace

TEST_CASE("Attack: each kind's message in closed form, from x and the messages heard",
          "[faults][attack]") {
  // H = {(1, 2, 3), (3, 6, -1)}: mean (2, 4, 1), standard deviation (1/|H|) (1, 2, 2).
  const auto one = [](const Fault& f, bool heard = true) {
    const auto sent = attacked(f, heard);
    REQUIRE(sent.size() == 1);
    CHECK(sent[0].to == std::vector<int>{1, 3});
    CHECK(sent[0].weight == 0.25);  // the push-sum weight goes out unchanged
    CHECK(sent[0].tag == 5);
    return sent[0].params;
  };
  SECTION("sign_flip: -s x") {
    CHECK(one(attack(1, 0, {0}, AttackKind::kSignFlip, 1.0)) == Floats{-1, 2, -0.5});
    CHECK(one(attack(1, 0, {0}, AttackKind::kSignFlip, 4.0)) == Floats{-4, 8, -2});
  }
  SECTION("scale: s x") {
    CHECK(one(attack(1, 0, {0}, AttackKind::kScale, -4.0)) == Floats{-4, 8, -2});
    CHECK(one(attack(1, 0, {0}, AttackKind::kScale, 3.0)) == Floats{3, -6, 1.5});
  }
  SECTION("alie: mean(H) - z sd(H), coordinate-wise") {
    CHECK(one(attack(1, 0, {0}, AttackKind::kAlie, 1.0)) == Floats{1, 2, -1});
    CHECK(one(attack(1, 0, {0}, AttackKind::kAlie, 0.5)) == Floats{1.5, 3, 0});
    // Nothing heard: H = {x}, whose deviation is 0.
    CHECK(one(attack(1, 0, {0}, AttackKind::kAlie, 1.0), false) == Floats{1, -2, 0.5});
  }
  SECTION("ipm: -epsilon mean(H)") {
    CHECK(one(attack(1, 0, {0}, AttackKind::kIpm, 0.5)) == Floats{-1, -2, -0.5});
    CHECK(one(attack(1, 0, {0}, AttackKind::kIpm, 2.0), false) == Floats{-2, 4, -1});
  }
  SECTION("nan and inf: every value") {
    for (float v : one(attack(1, 0, {0}, AttackKind::kNan, 0.0))) CHECK(std::isnan(v));
    for (float v : one(attack(1, 0, {0}, AttackKind::kInf, 0.0))) CHECK((std::isinf(v) && v > 0));
  }
  SECTION("dissensus: to each recipient v, h_v - epsilon (mean(H) - h_v), one message each") {
    const auto sent = attacked(attack(1, 0, {0}, AttackKind::kDissensus, 1.0));
    REQUIRE(sent.size() == 2);
    CHECK(sent[0].to == std::vector<int>{1});
    CHECK(sent[0].params == Floats{0, 0, 5});  // 2 h1 - mean
    CHECK(sent[1].to == std::vector<int>{3});
    CHECK(sent[1].params == Floats{4, 8, -3});  // 2 h3 - mean
    const auto half = attacked(attack(1, 0, {0}, AttackKind::kDissensus, 0.5));
    REQUIRE(half.size() == 2);
    CHECK(half[1].params == Floats{3.5, 7, -2});  // 1.5 h3 - 0.5 mean
    // Nothing heard from a recipient: its message is taken to be x (and H = {x}).
    const auto blind = attacked(attack(1, 0, {0}, AttackKind::kDissensus, 1.0), false);
    REQUIRE(blind.size() == 2);
    CHECK(blind[0].params == Floats{1, -2, 0.5});
  }
}

TEST_CASE("Attack: only in its rounds; colluders' messages are left out of H; packets pass",
          "[faults][attack]") {
  RecordingExchange inner(0, 4);
  inner.inboxes = {{1, {1, 2, 3}}, {3, {3, 6, -1}}};
  // Peer 0 sends -mean(H) in rounds 3 and 4; peer 3 colludes, attacking in round 4 only.
  const std::vector<Fault> faults{attack(3, 5, {0}, AttackKind::kIpm, 1.0),
                                  attack(4, 5, {3}, AttackKind::kNan, 0.0),
                                  Fault{2, 0, gossip::FaultAction::kKill, {2}, {}, 0.0}};
  gossip::Attack ex(inner, faults, 7);
  const std::vector<int> peers{1, 3};
  const Floats x{1, -2, 0.5};
  for (std::int64_t r = 1; r < 7; ++r) {
    INFO("round " << r);
    ex.publish(r, x, 1.0, peers);
    ex.collect(r, peers, {});
  }
  REQUIRE(inner.sent.size() == 6);
  CHECK(inner.sent[1].params == x);                       // round 2: before the attack
  CHECK(inner.sent[2].params == Floats{-2, -4, -1});      // round 3: -(mean of h1, h3)
  CHECK(inner.sent[3].params == Floats{-2, -4, -1});      // round 4: h3 of round 3 was honest
  CHECK(inner.sent[4].params == x);                       // round 5: to_round, over
  // Had round 5 been an attack, H would be h1 alone: 3 attacked in round 4.
  gossip::Attack late(inner, std::vector<Fault>{faults[1], attack(5, 0, {0}, AttackKind::kIpm, 1.0)},
                      7);
  late.collect(4, peers, {});
  late.publish(5, x, 1.0, peers);
  CHECK(inner.sent.back().params == Floats{-1, -2, -3});
  // Packets are not attacked (check_faults refuses attacks with the algorithms that send them).
  const std::byte packet[4]{};
  late.publish_packet(6, packet, peers);
  CHECK(inner.packets == 1);
  // A relay algorithm's tags: round = tag / tags per round.
  late.set_tags_per_round(3);
  late.publish(14, x, 1.0, peers);  // round 4
  CHECK(inner.sent.back().params == x);
  late.publish(15, x, 1.0, peers);  // round 5
  CHECK(inner.sent.back().params == Floats{-1, -2, -3});
}

TEST_CASE("Attack: noise is N(0, std^2) from the stream (run seed, peer, round)",
          "[faults][attack]") {
  const std::size_t n = 20000;
  const Floats x(n, 3.0f);
  const std::vector<int> to{1};
  auto noise = [&](std::uint64_t seed, int peer, std::int64_t round, bool earlier_round) {
    RecordingExchange inner(peer, 4);
    gossip::Attack ex(inner, std::vector<Fault>{attack(1, 0, {peer}, AttackKind::kNoise, 2.0)},
                      seed);
    if (earlier_round) ex.publish(round - 1, x, 1.0, to);
    ex.publish(round, x, 1.0, to);
    return inner.sent.back().params;
  };
  const Floats a = noise(5, 0, 9, false);
  double sum = 0, sq = 0;
  for (float v : a) sum += v;
  const double mean = sum / n;
  for (float v : a) sq += (v - mean) * (v - mean);
  const double sd = std::sqrt(sq / n);
  CHECK(std::abs(mean) < 0.05);  // 4 standard errors (2 / sqrt(20000) = 0.014)
  CHECK(sd == Approx(2.0).epsilon(0.03));
  CHECK(noise(5, 0, 9, true) == a);  // the same whatever was sent before
  CHECK(noise(5, 0, 10, false) != a);
  CHECK(noise(5, 1, 9, false) != a);
  CHECK(noise(6, 0, 9, false) != a);
}

TEST_CASE("FaultedExchange: an Attack only for a peer the schedule lets attack, over CutLinks",
          "[faults][attack]") {
  RecordingExchange zero(0, 4), one(1, 4);
  const std::vector<Fault> faults{attack(1, 0, {0}, AttackKind::kSignFlip, 1.0),
                                  cut(1, 9, {{0, 3}})};
  FakeExchange zero_views(0, 4), one_views(1, 4);  // their membership channels
  gossip::FaultedExchange honest(one, one_views, std::vector<Fault>{faults[0]}, 7);
  CHECK(&honest.top() == &one);  // no decorator at all
  CHECK(&honest.membership() == &one_views);
  gossip::FaultedExchange liar(zero, zero_views, faults, 7);
  const std::vector<int> peers{1, 3};
  const Floats x{1, -2, 0.5};
  liar.top().publish(2, x, 1.0, peers);
  REQUIRE(zero.sent.size() == 1);
  CHECK(zero.sent[0].params == Floats{-1, 2, -0.5});
  CHECK(zero.sent[0].to == std::vector<int>{1});  // 0-3 is cut
  // The views go through the same cuts (CutLinks, on both planes).
  const std::vector<Member> view(4);
  liar.membership().send_view(2, view, peers);
  CHECK(zero_views.view_to == std::vector<int>{1});
  CHECK(gossip::attacks(faults, 0));
  CHECK(!gossip::attacks(faults, 3));
  CHECK(gossip::attack_of(faults, 0, 0) == nullptr);
  CHECK(gossip::attack_of(faults, 0, 1) == &faults[0]);
}

TEST_CASE("check_faults: attackers are the topology's, one attack a peer a round, and only on "
          "parameter messages", "[faults][attack]") {
  const gossip::Topology t = ring(4);
  gossip::RunConfig c;
  c.faults = {attack(3, 6, {1, 2}, AttackKind::kAlie, 1.0),
              attack(6, 0, {1}, AttackKind::kNan, 0.0)};
  CHECK_NOTHROW(gossip::check_faults(c, t));
  c.faults.push_back(attack(5, 7, {3, 2}, AttackKind::kIpm, 0.5));
  CHECK_THROWS_WITH(gossip::check_faults(c, t),
                    Contains("faults[2].attack") && Contains("already attacks") &&
                        Contains("faults[0]"));
  c.faults = {attack(3, 0, {4}, AttackKind::kAlie, 1.0)};
  CHECK_THROWS_WITH(gossip::check_faults(c, t),
                    Contains("faults[0].attack") && Contains("peer 4 is not in the topology's 0..3"));
  c.faults = {attack(3, 0, {1}, AttackKind::kAlie, 1.0)};
  c.gossip.algorithm = gossip::AlgorithmKind::kChoco;
  CHECK_THROWS_WITH(gossip::check_faults(c, t),
                    Contains("choco sends packets") && Contains("dpsgd, local_sgd"));
  c.gossip.algorithm = gossip::AlgorithmKind::kAllreduce;
  CHECK_THROWS_WITH(gossip::check_faults(c, t), Contains("allreduce sends packets"));
  c.gossip.algorithm = gossip::AlgorithmKind::kPushSum;
  CHECK_NOTHROW(gossip::check_faults(c, t));
}
