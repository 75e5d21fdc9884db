// Tests for monitor: consensus distance, the average model, live-graph connectivity.
#include <catch2/catch.hpp>

#include <vector>

#include "gossip/monitor.hpp"
#include "gossip/topology.hpp"

using gossip::consensus_distance;
using gossip::live_graph;

namespace {

gossip::Topology ring(int n) {
  gossip::GeneratorSpec s;
  s.kind = "ring";
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
    REQUIRE(g.components.size() == 1);  // weakly connected
  }
  SECTION("time-varying: the union over the period counts") {
    gossip::GeneratorSpec s;
    s.kind = "one-peer-exponential";
    s.n = 8;
    const auto t = gossip::make_topology(s);
    REQUIRE(t.period() > 1);
    REQUIRE(live_graph(t).connected);
  }
}

TEST_CASE("the convergence monitor reports changes in the dead set", "[monitor]") {
  const auto t = ring(8);
  gossip::ConvergenceMonitor monitor(t);
  CHECK_FALSE(monitor.check({}).has_value());  // nobody dead: nothing changed
  CHECK(monitor.connected());

  const auto one = monitor.check({2});
  REQUIRE(one.has_value());
  CHECK(one->connected);
  CHECK(one->dead == std::vector<int>{2});
  CHECK(one->message == "neighbours lost: 2; live graph still connected");
  CHECK_FALSE(monitor.check({2}).has_value());  // the same set again: no report

  const auto two = monitor.check({2, 6});
  REQUIRE(two.has_value());
  CHECK_FALSE(two->connected);
  CHECK_FALSE(monitor.connected());
  const int dead[] = {2, 6};
  CHECK(two->components == live_graph(t, dead).components);
  CHECK(two->components == std::vector<std::vector<int>>{{0, 1, 7}, {3, 4, 5}});
  CHECK(two->message ==
        "neighbours lost: 2,6; live graph DISCONNECTED, components {0,1,7} {3,4,5}");

  const auto back = monitor.check({});
  REQUIRE(back.has_value());
  CHECK(back->connected);
  CHECK(back->message == "all neighbours are back");
  CHECK(monitor.connected());
}
