// Tests for the simulator: mixing rates against the topology analysis, disconnected graphs,
// thread-count independence, the simulated clock and the sweep helpers.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <tuple>

#include "gossip/core.hpp"
#include "gossip/faults.hpp"
#include "gossip/monitor.hpp"
#include "gossip/sim.hpp"
#include "sim/sim_network.hpp"
#include "gossip/topology.hpp"
#include "gossip/train.hpp"
#include "tests/device_like_backend.hpp"
#include "tests/helpers.hpp"

using namespace gossip;

namespace {

RunConfig small_config() {
  RunConfig c = test::small_synthetic_config(1024, 256, 5);
  c.train.epochs = 2;
  c.train.evals_per_epoch = 2;
  c.sim.step_ms = 2.0;
  c.sim.consensus_dim = 200;
  return c;
}

Topology generate(const std::string& kind, int n, int rows = 0, int cols = 0) {
  GeneratorSpec s;
  s.kind = gossip::parse_generator(kind);
  s.n = n;
  s.rows = rows;
  s.cols = cols;
  return make_topology(s);
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string temp_dir(const std::string& name) {
  const auto d = std::filesystem::temp_directory_path() / ("gossip_test_sim_" + name);
  std::filesystem::remove_all(d);
  return d.string();
}

}  // namespace

TEST_CASE("pure consensus contracts at the rate the topology analysis predicts", "[sim]") {
  struct Case {
    const char* name;
    Topology t;
  };
  Case cases[] = {{"ring-16", generate("ring", 16)}, {"torus-4x4", generate("torus", 0, 4, 4)}};
  for (auto& c : cases) {
    SECTION(c.name) {
      RunConfig config = small_config();
      config.sim.consensus_rounds = 50;
      const TopologyReport report = analyze(c.t);
      const SimResult r = simulate_consensus(config, c.t);
      REQUIRE(r.evals.size() == 51);
      // Disagreement ||x - xbar|| shrinks by rho per round once the slowest mode dominates; the
      // distance is its square. Measure from round 5 until 50 or the float floor.
      const double d0 = r.evals[5].consensus_distance;
      std::size_t end = 50;
      while (end > 10 && r.evals[end].consensus_distance < 1e-9 * r.evals[0].consensus_distance)
        --end;
      const double rate =
          std::pow(r.evals[end].consensus_distance / d0, 1.0 / (2.0 * (end - 5)));
      INFO("measured " << rate << " predicted " << report.rho_per_round << " over rounds 5.."
                       << end);
      REQUIRE(rate == Approx(report.rho_per_round).epsilon(0.10));
    }
  }
}

TEST_CASE("a disconnected topology never reaches consensus and says so", "[sim]") {
  const Topology t = load_topology_from_string(
      "n: 8\nedges:\n"
        "  - [0, 1]\n  - [1, 2]\n  - [2, 3]\n  - [3, 0]\n"
        "  - [4, 5]\n  - [5, 6]\n  - [6, 7]\n  - [7, 4]\n",
      "two-rings.yaml");
  RunConfig config = small_config();
  config.sim.consensus_rounds = 200;
  const SimResult r = simulate_consensus(config, t);
  // Each ring agrees within itself, but the two rings keep their own averages.
  REQUIRE(r.evals.back().consensus_distance > 1e-3 * r.evals.front().consensus_distance);
  REQUIRE(r.evals.back().consensus_distance ==
          Approx(r.evals[150].consensus_distance).epsilon(1e-3));

  const TopologyReport report = analyze(t);
  SimRunInfo info;
  info.connected = report.connected;
  info.consensus_only = true;
  const std::string dir = temp_dir("disconnected");
  write_sim_outputs(dir, r, info);
  REQUIRE(read_text(dir + "/summary.json").find("\"connected\": false") != std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST_CASE("one and two worker threads give identical parameters", "[sim]") {
  RunConfig config = small_config();
  const DataSets data = load_datasets(config);
  for (const char* algorithm : {"dpsgd", "async", "push_sum"}) {
    SECTION(algorithm) {
      config.gossip.algorithm = parse_algorithm(algorithm, "test");
      config.sim.stragglers = {1};
      config.sim.message_loss = 0.1;
      config.monitor.round_timeout_s = 0.05;
      const Topology t = generate(std::string(algorithm) == "push_sum" ? "exponential" : "ring", 6);
      config.sim.workers = 1;
      const SimResult one = simulate(config, t, data);
      config.sim.workers = 2;
      const SimResult two = simulate(config, t, data);
      REQUIRE(one.workers == 1);
      REQUIRE(two.workers == 2);
      REQUIRE(one.params_sha256 == two.params_sha256);
      REQUIRE(one.sim_seconds == two.sim_seconds);
      REQUIRE(one.evals.back().average_accuracy > 0.9);  // well-separated blobs
      REQUIRE(one.evals.back().consensus_distance < one.evals[1].consensus_distance + 1.0);
    }
  }
}

TEST_CASE("the metrics and summary follow the contract", "[sim]") {
  RunConfig config = small_config();
  const DataSets data = load_datasets(config);
  const Topology t = generate("ring", 4);
  const SimResult r = simulate(config, t, data);
  // 1024 samples / (4 peers * 8) = 32 rounds per epoch, 2 epochs, evaluations every 16 rounds.
  REQUIRE(r.rounds == 64);
  REQUIRE(r.evals.size() == 5);
  REQUIRE(r.evals.back().epoch == Approx(2.0));
  REQUIRE(r.params_sha256.size() == 4);
  SimRunInfo info;
  info.algorithm = "dpsgd";
  const std::string dir = temp_dir("contract");
  write_sim_outputs(dir, r, info);
  const std::string csv = read_text(dir + "/metrics.csv");
  REQUIRE(csv.rfind("round,epoch,peer,loss,test_accuracy,consensus_distance,bytes_sent,seconds",
                    0) == 0);
  REQUIRE(std::count(csv.begin(), csv.end(), '\n') == 1 + 5 * 5);  // 4 peers + average, 5 evals
  REQUIRE(csv.find("\n64,2.0000,-1,") != std::string::npos);
  const std::string summary = read_text(dir + "/summary.json");
  for (const char* key : {"test_accuracy", "peer_accuracy_min", "peer_accuracy_max",
                          "consensus_distance", "rounds", "epochs", "bytes_sent", "wall_seconds",
                          "connected", "params_sha256", "sim_seconds"})
    REQUIRE(summary.find(std::string("\"") + key + "\":") != std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST_CASE("peers are evaluated on train.peer_eval_limit samples, and on the average model's at the "
          "end", "[sim]") {
  RunConfig config = small_config();
  config.train.peer_eval_limit = 1;  // one sample: an accuracy of exactly 0 or 1
  config.data.synthetic_separation = 1.0;  // overlapping classes: no model gets them all right
  const DataSets data = load_datasets(config);
  const SimResult r = simulate(config, generate("ring", 4), data);
  REQUIRE(r.evals.size() == 5);
  for (std::size_t e = 0; e + 1 < r.evals.size(); ++e)
    for (const auto& p : r.evals[e].peers)
      CHECK((p.test_accuracy == 0.0 || p.test_accuracy == 1.0));
  // The last: all 256 test samples, like the average model (the peers nearly agree by then).
  const EvalPoint& last = r.evals.back();
  for (const auto& p : last.peers) {
    CHECK(p.test_accuracy * 256 == Approx(std::round(p.test_accuracy * 256)).margin(1e-9));
    CHECK(p.test_accuracy == Approx(last.average_accuracy).margin(0.03));
    CHECK(p.test_accuracy > 0.3);
    CHECK(p.test_accuracy < 0.99);
  }
}

TEST_CASE("the simulated clock follows compute, latency, bandwidth and stragglers", "[sim]") {
  SimConfig s;
  s.latency_ms = 10.0;
  s.bandwidth_mbps = 8.0;  // 1 MB/s
  s.step_ms = 100.0;
  s.stragglers = {2};
  s.straggler_factor = 3.0;
  const std::int64_t floats = 1000;  // 4000 + 40 bytes: 4.04 ms on the wire
  SimNetwork net(3, floats, 1, s, 1);
  REQUIRE(net.step_seconds(0) == Approx(0.1));
  REQUIRE(net.step_seconds(2) == Approx(0.3));
  std::vector<float> buf(floats, 1.0f);
  const int to0[] = {1, 2}, to1[] = {0, 2}, to2[] = {0, 1};
  const std::span<const int> tos[] = {to0, to1, to2};
  for (int p = 0; p < 3; ++p) {
    net.exchange(p).compute(net.step_seconds(p));
    net.exchange(p).publish(0, buf, 1.0, tos[p]);
  }
  const int from[] = {2, 1};  // any order in, ascending out
  const auto got = net.exchange(0).collect(0, from, CollectOptions{});
  REQUIRE(got.size() == 2);
  REQUIRE(got[0].peer == 1);
  REQUIRE(got[1].peer == 2);
  // Peer 0 waits for the straggler: 0.3 s of compute + 10 ms + 4.04 ms.
  REQUIRE(net.exchange(0).now() == Approx(0.3 + 0.010 + 0.00404));
  REQUIRE(net.exchange(0).bytes_sent() == 2 * (4000 + kMessageOverheadBytes));

  CollectOptions async;
  async.mode = CollectMode::kAsync;
  async.max_staleness = 1;
  const int from2[] = {2};
  net.exchange(1).compute(0.0);
  // Round 1 for peer 1 accepts peer 2's round-0 message; it must still wait for it to arrive.
  net.exchange(1).publish(1, buf, 1.0, to1);
  const auto stale = net.exchange(1).collect(1, from2, async);
  REQUIRE(stale.size() == 1);
  REQUIRE(stale[0].round == 0);
}

TEST_CASE("a sender's messages leave one after another and a receiver takes them in turn",
          "[sim]") {
  SimConfig s;
  s.latency_ms = 10.0;
  s.bandwidth_mbps = 8.0;  // 1 MB/s
  const std::int64_t floats = 1000;
  SimNetwork net(5, floats, 2, s, 1);
  const double w = (4000 + kMessageOverheadBytes) * 8.0 / 8e6, lat = 0.010, t = 0.1;
  REQUIRE(net.wire_seconds() == Approx(w).epsilon(1e-12));
  std::vector<float> buf(floats, 1.0f);
  const int hub[] = {4, 1, 3, 2}, to_hub[] = {0}, from_spokes[] = {1, 2, 3, 4};
  for (int p = 0; p < 5; ++p) net.exchange(p).compute(t);
  for (int p = 0; p < 5; ++p)
    net.exchange(p).publish(0, buf, 1.0, p == 0 ? std::span<const int>(hub) : to_hub);
  // Round 1 from peer 0 at the same clock: its link is busy with round 0 until t + 4w.
  net.exchange(0).publish(1, buf, 1.0, hub);
  // Peer 0 sends to 1, 2, 3, 4 in that order (ids after its own): peer k has it at t + k w + L.
  for (int k = 1; k < 5; ++k) {
    REQUIRE(net.exchange(k).collect(0, to_hub, CollectOptions{}).size() == 1);
    REQUIRE(net.exchange(k).now() == Approx(t + k * w + lat).epsilon(1e-9));
  }
  // Four messages reach peer 0 at t + w + L together; its link takes them one after another.
  REQUIRE(net.exchange(0).collect(0, from_spokes, CollectOptions{}).size() == 4);
  REQUIRE(net.exchange(0).now() == Approx(t + lat + 4 * w).epsilon(1e-9));
  // The spokes send round 1 at their clocks t + k w + L, so peer k's arrives at
  // t + 2L + (k + 1) w; peer 0's link is busy with round 0 until t + L + 4w, then takes them
  // back to back: done at t + L + 8w.
  for (int k = 1; k < 5; ++k) net.exchange(k).publish(1, buf, 1.0, to_hub);
  REQUIRE(net.exchange(0).collect(1, from_spokes, CollectOptions{}).size() == 4);
  REQUIRE(net.exchange(0).now() == Approx(t + lat + 8 * w).epsilon(1e-9));
  // Peer 0's round-1 message to peer 2 is the second to leave after t + 4w.
  REQUIRE(net.exchange(2).collect(1, to_hub, CollectOptions{}).size() == 1);
  REQUIRE(net.exchange(2).now() == Approx(t + 4 * w + 2 * w + lat).epsilon(1e-9));
}

TEST_CASE("emulated links set the simulated wire time and latency", "[sim]") {
  RunConfig c = load_config_from_string("net:\n  emulate: rate=100mbit,delay=3ms\n", "c.yaml");
  const std::int64_t floats = 1000;
  SimNetwork net(2, floats, 1, c.sim, 1);
  const double w = (4000 + kMessageOverheadBytes) * 8.0 / 1e8, lat = 0.006, t = 0.5;
  REQUIRE(net.wire_seconds() == Approx(w).epsilon(1e-12));
  std::vector<float> buf(floats, 1.0f);
  const int to1[] = {1}, from0[] = {0};
  net.exchange(0).compute(t);
  net.exchange(0).publish(0, buf, 1.0, to1);
  REQUIRE(net.exchange(1).collect(0, from0, CollectOptions{}).size() == 1);
  REQUIRE(net.exchange(1).now() == Approx(t + w + lat).epsilon(1e-9));
}

namespace {

/// Spins until this thread has used `seconds` more CPU.
void spin_cpu(double seconds) {
  const double t0 = SimNetwork::thread_cpu_seconds();
  volatile double x = 0.0;
  while (SimNetwork::thread_cpu_seconds() - t0 < seconds) x = x + 1.0;
}

}  // namespace

TEST_CASE("the CPU model: peers sharing cores pay their steps and bytes at n / c the time, and "
          "a round is never shorter than that", "[sim][cpu]") {
  SimConfig s;
  s.latency_ms = 0.0;
  s.bandwidth_mbps = 8.0;  // 1 MB/s: a 4040-byte message occupies a link 4.04 ms
  s.byte_cpu_ns = 1e4;     // 10 us a byte: a message costs each end 40.4 ms of CPU
  const std::int64_t floats = 1000;
  const double bytes = 4000 + kMessageOverheadBytes, w = bytes * 8.0 / 8e6, step = 0.01;
  std::vector<float> buf(floats, 1.0f);
  const auto ring_round = [&](SimNetwork& net, std::int64_t r) {
    for (int p = 0; p < 4; ++p) {
      net.exchange(p).work(step);
      const int to[] = {(p + 1) % 4, (p + 3) % 4};
      net.exchange(p).publish(r, buf, 1.0, to);
    }
    for (int p = 0; p < 4; ++p) {
      const int from[] = {(p + 1) % 4, (p + 3) % 4};
      REQUIRE(net.exchange(p).collect(r, from, CollectOptions{}).size() == 2);
    }
  };
  // Each peer of the 4-ring sends and takes two messages a round: 4 * bytes of byte CPU.
  const double cpu = step + 4.0 * bytes * 1e-5;
  SECTION("a core each (sim.cores 0): the round is the peer's CPU, the links being faster") {
    SimNetwork net(4, floats, 1, s, 1);
    REQUIRE(net.cpu_share() == 1.0);
    ring_round(net, 0);
    for (int p = 0; p < 4; ++p) REQUIRE(net.exchange(p).now() == Approx(cpu).epsilon(1e-9));
    ring_round(net, 1);
    for (int p = 0; p < 4; ++p) REQUIRE(net.exchange(p).now() == Approx(2 * cpu).epsilon(1e-9));
  }
  SECTION("4 peers on 2 cores: every CPU second takes 2") {
    s.cores = 2;
    SimNetwork net(4, floats, 1, s, 1);
    REQUIRE(net.cpu_share() == 2.0);
    net.exchange(0).work(step);  // a step alone moves the clock at once, at the shared speed
    REQUIRE(net.exchange(0).now() == Approx(2 * step).epsilon(1e-12));
    SimNetwork fresh(4, floats, 1, s, 1);
    ring_round(fresh, 0);
    for (int p = 0; p < 4; ++p) REQUIRE(fresh.exchange(p).now() == Approx(2 * cpu).epsilon(1e-9));
  }
  SECTION("a round that waits for its messages pays sim.message_cpu_us twice, whatever their "
          "size: the peer sleeps and is woken") {
    s.byte_cpu_ns = 0.0;
    s.message_cpu_us = 2e4;  // 20 ms
    SimNetwork net(4, floats, 1, s, 1);
    ring_round(net, 0);
    // The messages arrive at step + 2w, after the step (its only CPU): the collect waits.
    for (int p = 0; p < 4; ++p)
      REQUIRE(net.exchange(p).now() == Approx(step + 2 * 0.02).epsilon(1e-9));
  }
  SECTION("a round whose messages are there when its CPU work is done pays no wake-up") {
    s.message_cpu_us = 2e4;  // would be 40 ms more if the collect had waited
    SimNetwork net(4, floats, 1, s, 1);
    ring_round(net, 0);
    // The byte CPU (161.6 ms) outlasts the links (step + 2w = 18 ms): nothing to wait for.
    for (int p = 0; p < 4; ++p) REQUIRE(net.exchange(p).now() == Approx(cpu).epsilon(1e-9));
  }
  SECTION("without byte CPU the links decide, as before the CPU model") {
    s.cores = 2;
    s.byte_cpu_ns = 0.0;
    SimNetwork net(4, floats, 1, s, 1);
    ring_round(net, 0);
    // Published at 2 * step; peer p is the first message of p - 1 and the second of p + 1.
    for (int p = 0; p < 4; ++p)
      REQUIRE(net.exchange(p).now() == Approx(2 * step + 2 * w).epsilon(1e-9));
  }
}

TEST_CASE("sim.exchange_cpu charges a phase's own CPU, not the steps inside it", "[sim][cpu]") {
  SimConfig s;
  s.cores = 1;  // 2 peers on 1 core: a CPU second takes 2
  std::vector<float> params(10, 0.0f);
  Learner spinning{nullptr, params.data(), 10, [] {
                     spin_cpu(0.02);
                     return 0.0;
                   }};
  const auto phase_with_a_step = [](const Learner& l) {
    return [&l] {
      l.step();        // 20 ms of step CPU, charged by the step time instead
      spin_cpu(0.03);  // 30 ms of the phase's own
    };
  };
  SECTION("on") {
    s.exchange_cpu = true;
    SimNetwork net(2, 10, 1, s, 1);
    const Learner l = net.timed(0, spinning);
    net.run_phase(0, phase_with_a_step(l));
    // 30 ms of CPU, and what the clock reads cost around it, at 2 s per CPU second.
    CHECK(net.exchange(0).now() >= 0.06);
    CHECK(net.exchange(0).now() < 0.07);
    REQUIRE(net.exchange(1).now() == 0.0);
  }
  SECTION("off (the default): nothing is charged") {
    SimNetwork net(2, 10, 1, s, 1);
    const Learner l = net.timed(0, spinning);
    net.run_phase(0, phase_with_a_step(l));
    REQUIRE(net.exchange(0).now() == 0.0);
  }
}

TEST_CASE("a round costs step + latency + out-degree wire times: complete against ring",
          "[sim]") {
  RunConfig config = small_config();
  config.train.epochs = 1;
  config.sim.step_ms = 2.0;
  config.sim.latency_ms = 1.0;
  config.sim.bandwidth_mbps = 1.0;
  const DataSets data = load_datasets(config);
  const int n = 16;
  const SimResult complete = simulate(config, generate("complete", n), data);
  const SimResult ring = simulate(config, generate("ring", n), data);
  REQUIRE(complete.rounds == ring.rounds);
  const double bytes = 4.0 * static_cast<double>(complete.params.front().size()) +
                       kMessageOverheadBytes;
  const double w = bytes * 8.0 / 1e6, step = 0.002, lat = 0.001;
  // Every peer publishes at the same clock; peer i is the m-th message of peer i - m (mod n),
  // so its receiving link is done at t + L + (n - 1) w on the complete graph, t + L + 2w on the
  // ring (one message at t + L + w, the other at t + L + 2w).
  const double complete_round = step + lat + (n - 1) * w, ring_round = step + lat + 2 * w;
  for (const auto& e : complete.evals)
    REQUIRE(e.sim_seconds == Approx(e.round * complete_round).epsilon(1e-9).margin(1e-12));
  for (const auto& e : ring.evals)
    REQUIRE(e.sim_seconds == Approx(e.round * ring_round).epsilon(1e-9).margin(1e-12));
  REQUIRE(complete.sim_seconds - ring.sim_seconds ==
          Approx(complete.rounds * (n - 3) * w).epsilon(1e-9));
}

TEST_CASE("with overlap a round costs max(step, communication), not their sum", "[sim]") {
  RunConfig config = small_config();
  config.train.epochs = 1;
  config.sim.step_ms = 2.0;
  config.sim.latency_ms = 1.0;
  config.sim.bandwidth_mbps = 10000.0;
  const DataSets data = load_datasets(config);
  const Topology ring = generate("ring", 8);
  const SimResult plain = simulate(config, ring, data);
  config.gossip.overlap = true;
  const SimResult overlapped = simulate(config, ring, data);
  const double bytes = 4.0 * static_cast<double>(plain.params.front().size()) +
                       kMessageOverheadBytes;
  const double w = bytes * 8.0 / 1e10, step = 0.002, lat = 0.001;
  REQUIRE(lat + 2 * w < step);  // the communication fits behind the compute
  for (const auto& e : plain.evals)
    REQUIRE(e.sim_seconds == Approx(e.round * (step + lat + 2 * w)).epsilon(1e-9).margin(1e-12));
  for (const auto& e : overlapped.evals)
    REQUIRE(e.sim_seconds == Approx(e.round * step).epsilon(1e-9).margin(1e-12));
  REQUIRE(overlapped.params_sha256 != plain.params_sha256);  // another update, as documented
  REQUIRE(overlapped.evals.back().average_accuracy > 0.8);
}

TEST_CASE("a packet occupies the link for its own bytes and the frame header", "[sim]") {
  SimConfig s;
  s.latency_ms = 10.0;
  s.bandwidth_mbps = 8.0;  // 1 MB/s
  SimNetwork net(3, 1000, 2, s, 1);
  const std::vector<std::byte> packet(968);
  const double w = (968 + kPacketOverheadBytes) * 8.0 / 8e6, lat = 0.010;
  const int to[] = {1, 2}, from0[] = {0};
  net.exchange(0).publish_packet(0, packet, to);
  REQUIRE(net.exchange(0).bytes_sent() == 2 * (968 + kPacketOverheadBytes));
  for (int k = 1; k < 3; ++k) {
    const auto got = net.exchange(k).collect(0, from0, CollectOptions{});
    REQUIRE(got.size() == 1);
    REQUIRE(got[0].packet.size() == 968);
    REQUIRE(got[0].params.empty());
    REQUIRE(net.exchange(k).now() == Approx(k * w + lat).epsilon(1e-9));
  }
}

TEST_CASE("latency and bandwidth change simulated seconds, never the parameters", "[sim]") {
  RunConfig config = small_config();
  config.train.epochs = 1;
  const DataSets data = load_datasets(config);
  const Topology t = generate("exponential", 8);
  const SimResult fast = simulate(config, t, data);
  config.sim.latency_ms = 50.0;
  config.sim.bandwidth_mbps = 0.5;
  const SimResult slow = simulate(config, t, data);
  REQUIRE(slow.params_sha256 == fast.params_sha256);
  REQUIRE(slow.sim_seconds > fast.sim_seconds);
}

TEST_CASE("compare settings cover the sweep and label what varies", "[sim]") {
  RunConfig base = small_config();
  REQUIRE_THROWS_AS(compare_settings(base), InputError);
  base.compare.topologies = {"topologies/ring-16.yaml", "topologies/torus-4x4.yaml"};
  base.compare.seeds = {1, 2};
  const auto s = compare_settings(base);
  REQUIRE(s.size() == 4);
  REQUIRE(s[0].label == "ring-16 seed=1");
  REQUIRE(s[3].label == "torus-4x4 seed=2");
  REQUIRE(s[3].config.train.seed == 2);
}

TEST_CASE("compare sweeps compressors for choco only and labels them", "[sim][compare]") {
  RunConfig base = small_config();
  base.compare.topologies = {"topologies/ring-16.yaml"};
  base.compare.algorithms = {AlgorithmKind::kDpsgd, AlgorithmKind::kChoco,
                            AlgorithmKind::kAllreduce};
  CompressConfig top, q8;
  top.kind = CompressKind::kTopK;
  top.fraction = 0.01;
  q8.kind = CompressKind::kQuantize;
  q8.bits = 8;
  base.compare.compress = {top, q8};
  base.gossip.choco.consensus_step = 0.3;
  const auto s = compare_settings(base);
  REQUIRE(s.size() == 4);
  REQUIRE(s[0].label == "ring-16 dpsgd");
  REQUIRE(s[0].config.gossip.choco.compress.kind == CompressKind::kNone);
  REQUIRE(s[0].config.gossip.choco.consensus_step == 0.0);
  REQUIRE(s[1].label == "ring-16 choco top_k 0.01");
  REQUIRE(s[1].config.gossip.choco.compress == top);
  REQUIRE(s[1].config.gossip.choco.consensus_step == 0.3);
  REQUIRE(s[2].label == "ring-16 choco quantize 8 bits");
  REQUIRE(s[3].label == "ring-16 allreduce");
}

TEST_CASE("compare.outer crosses local_sgd with each outer step, its period and overlap; other "
          "algorithms once", "[sim][compare][streaming]") {
  const RunConfig base = gossip::load_config_from_string(
      "gossip: {algorithm: local_sgd, period: 50, outer: {lr: 1.0}}\n"
      "compare:\n  topologies: [complete-16.yaml]\n  algorithms: [local_sgd, dpsgd]\n"
      "  outer:\n    - {name: diloco, lr: 0.7}\n"
      "    - {name: streaming, period: 10, overlap: true, fragments: 5,\n"
      "       compress: {kind: quantize, bits: 4}}\n",
      "c.yaml");
  const auto s = compare_settings(base);
  REQUIRE(s.size() == 3);
  CHECK(s[0].label == "complete-16 local_sgd diloco");
  CHECK(s[0].config.gossip.outer.lr == 0.7);
  CHECK(s[0].config.gossip.period == 50);
  CHECK_FALSE(s[0].config.gossip.overlap);
  CHECK(s[1].label == "complete-16 local_sgd streaming");
  CHECK(s[1].config.gossip.period == 10);
  CHECK(s[1].config.gossip.overlap);
  CHECK(s[1].config.gossip.outer.fragments == 5);
  CHECK(s[1].config.gossip.outer.compress.kind == CompressKind::kQuantize);
  CHECK(s[1].config.gossip.outer.compress.bits == 4);
  CHECK(s[2].label == "complete-16 dpsgd");
  // Real peers read the config's own gossip.outer: --run refuses the axis before anything runs.
  CHECK_THROWS_WITH(gossip::check_real_sweep(base),
                    Catch::StartsWith("c.yaml:5: compare.outer: the peers of gossip compare --run"));
  CHECK_THROWS_WITH(gossip::load_config_from_string(
                        "compare:\n  outer:\n    - {lr: 0.7}\n", "c.yaml"),
                    Catch::Contains("c.yaml:3: compare.outer[0]: each outer step needs its name"));
}

TEST_CASE("pure averaging contracts by rho^2 per round, and exactly on the one-peer "
          "exponential graph", "[sim][compare]") {
  RunConfig config = small_config();
  struct Case {
    const char* name;
    Topology t;
  };
  Case cases[] = {{"ring-16", generate("ring", 16)},
                  {"torus-4x4", generate("torus", 0, 4, 4)},
                  {"exp-16", generate("exponential", 16)},
                  {"one-peer-exp-16", generate("one-peer-exponential", 16)}};
  std::vector<AveragingCheck> checks;
  for (auto& c : cases) {
    const TopologyReport report = analyze(c.t);
    checks.push_back(averaging_check(config, cat(c.name, ".yaml"), c.t, report, 100));
    const AveragingCheck& a = checks.back();
    INFO(c.name << ": measured " << a.measured << " predicted " << a.predicted << " over rounds "
                << a.first << ".." << a.last);
    REQUIRE(a.label == c.name);
    REQUIRE(a.distance.size() == 101);
    if (std::string(c.name) == "one-peer-exp-16") {
      REQUIRE(a.exact_predicted);
      REQUIRE(a.exact_after == 4);  // log2(16) rounds
      REQUIRE(a.distance[3] > 1e-6 * a.distance[0]);  // and not before
    } else {
      REQUIRE_FALSE(a.exact_predicted);
      REQUIRE(a.last - a.first >= 8);
      REQUIRE(a.measured == Approx(a.predicted).epsilon(0.10));
    }
    REQUIRE(a.agrees());
  }
  REQUIRE(checks[0].first == 20);  // the ring stays above float's floor for all 100 rounds
  REQUIRE(checks[0].last == 100);
  const std::string dir = temp_dir("averaging");
  std::string why;
  write_averaging(dir, checks, &why);  // the plot needs gnuplot; the tables do not
  const std::string csv = read_text(dir + "/averaging.csv");
  REQUIRE(csv.find("one-peer-exp-16,one-peer-exp-16.yaml,0,0,") != std::string::npos);
  REQUIRE(read_text(dir + "/report.md").find("| ring-16 | 0.9493 | 0.9011 |") != std::string::npos);
  // One panel a graph, each with its own round axis (on one axis every graph but the slowest
  // was a vertical line at round 0): a multiplot with a titled panel for each.
  const std::string gp = read_text(dir + "/plots.gp");
  CHECK(gp.find("set multiplot") != std::string::npos);
  for (const auto& c : checks)
    CHECK(gp.find(cat("set title \"", c.label, "\"")) != std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST_CASE("a long averaging pass measures rounds to 1000x lower disagreement against the "
          "gap's prediction", "[sim][compare]") {
  RunConfig config = small_config();
  const Topology ring = generate("ring", 16);
  const TopologyReport report = analyze(ring);
  // ln(1000) / -ln(rho), rho = 1/3 + 2/3 cos(2 pi / 16): about 133 rounds.
  const double rho = 1.0 / 3.0 + 2.0 / 3.0 * std::cos(2 * M_PI / 16);
  REQUIRE(report.rounds_to_1000x == Approx(std::log(1000.0) / -std::log(rho)));
  const AveragingCheck a = averaging_check(config, "ring-16.yaml", ring, report, 400);
  INFO("measured " << a.measured_rounds_1000x << " predicted " << a.predicted_rounds_1000x
                   << "; rate " << a.measured << " over " << a.first << ".." << a.last);
  REQUIRE(a.predicted_rounds_1000x == report.rounds_to_1000x);
  // The bound holds (a random start is not all along the slowest mode) and is not loose by
  // more than the energy the start puts outside that mode can explain.
  REQUIRE(a.measured_rounds_1000x > 0);
  REQUIRE(a.measured_rounds_1000x <= a.predicted_rounds_1000x);
  REQUIRE(a.measured_rounds_1000x >= 0.5 * a.predicted_rounds_1000x);
  REQUIRE(a.distance[a.measured_rounds_1000x] <= 1e-6 * a.distance[0]);
  REQUIRE(a.distance[a.measured_rounds_1000x - 1] > 1e-6 * a.distance[0]);
  // A pass past 100 rounds measures the rate over its second half, where rho^2 rules, and ends
  // 50 rounds after float32's floor (1e-9 of the start), well before its 400 rounds.
  REQUIRE(a.first >= a.last / 2 - 1);
  REQUIRE(a.distance.size() < 401);
  REQUIRE(a.distance.back() <= 1e-9 * a.distance[0]);
  REQUIRE(a.measured == Approx(rho * rho).epsilon(0.01));
  const std::string dir = temp_dir("averaging_1000x");
  std::string why;
  write_averaging(dir, {a}, &why);
  const std::string md = read_text(dir + "/report.md");
  REQUIRE(md.find(cat("| ring-16 | ", 1.0 - rho)) != std::string::npos);
  REQUIRE(md.find(cat(" | ", a.measured_rounds_1000x, " | ")) != std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST_CASE("a sweep refuses an algorithm its graphs cannot run before simulating anything",
          "[sim]") {
  const std::string dir = temp_dir("sweep_refusal");
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/ring.yaml") << "generator: ring\nn: 4\n";
  std::ofstream(dir + "/star.yaml") << "generator: star\nn: 4\nweights: uniform\n";
  const RunConfig base = load_config_from_string(
      "data: {synthetic: {train: 64, test: 16, dim: 8, classes: 4}}\n"
      "model: {layers: [8, 4]}\n"
      "compare:\n"
      "  topologies: [ring.yaml, star.yaml]\n"
      "  algorithms: [dpsgd, push_sum]\n",
      "sweep.yaml", dir);
  // push_sum needs column-stochastic weights; a uniform star's are not. The refusal names the
  // line that asks for push_sum, and nothing ran.
  REQUIRE_THROWS_WITH(run_sweep(base, dir + "/out", false),
                      Catch::Contains("sweep.yaml:5: gossip.algorithm: push_sum needs "
                                      "column-stochastic weights"));
  CHECK_FALSE(std::filesystem::exists(dir + "/out"));
  std::filesystem::remove_all(dir);
}

namespace {

EvalPoint eval_at(std::int64_t round, double average, double lowest, double consensus) {
  EvalPoint e;
  e.round = round;
  e.epoch = round / 8.0;
  e.sim_seconds = round * 0.5;
  e.average_accuracy = average;
  e.peer_accuracy_min = lowest;
  e.consensus_distance = consensus;
  e.bytes_sent = static_cast<std::uint64_t>(round) * 1000;
  return e;
}

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

TEST_CASE("rounds to target are interpolated between the evaluations around the crossing",
          "[sim][compare]") {
  const std::vector<EvalPoint> evals = {eval_at(0, 0.1, 0.1, 0), eval_at(4, 0.5, 0.3, 1),
                                        eval_at(8, 0.9, 0.7, 0.5)};
  // 0.7 lies 1/2 of the way from 0.5 (round 4) to 0.9 (round 8).
  const TargetCrossing avg = first_crossing(evals, 0.7, &EvalPoint::average_accuracy);
  CHECK(avg.round == Approx(6.0));
  CHECK(avg.epoch == Approx(0.75));
  CHECK(avg.seconds == Approx(3.0));
  // An evaluation exactly at the target is the crossing itself.
  CHECK(first_crossing(evals, 0.5, &EvalPoint::average_accuracy).round == Approx(4.0));
  // From round 0: 0.2 is a quarter of the way from 0.1 to 0.5.
  CHECK(first_crossing(evals, 0.2, &EvalPoint::average_accuracy).round == Approx(1.0));
  const TargetCrossing low = first_crossing(evals, 0.8, &EvalPoint::peer_accuracy_min);
  CHECK(low.round < 0);
  CHECK(low.seconds < 0);
}

TEST_CASE("a sweep's settings are summarised over seeds as mean and sample deviation",
          "[sim][compare]") {
  const Spread s = spread_of({1.0, 2.0, 3.0, -1.0}, true);
  CHECK(s.n == 3);
  CHECK(s.of == 4);
  CHECK(s.mean == Approx(2.0));
  CHECK(s.std == Approx(1.0));  // sqrt(((1-2)^2 + 0 + (3-2)^2) / (3 - 1))
  CHECK(spread_of({-1.0}, false).mean == Approx(-1.0));
  CHECK(spread_of({-1.0, -2.0}, true).n == 0);

  const std::string dir = temp_dir("compare_report");
  std::filesystem::remove_all(dir);
  std::vector<CompareRow> rows;
  std::vector<SimResult> results;
  // Two settings, two seeds each; the second setting's seed 2 never reaches the target.
  const double finals[2][2] = {{0.80, 0.84}, {0.70, 0.72}};
  for (int g = 0; g < 2; ++g)
    for (int seed = 1; seed <= 2; ++seed) {
      SimResult r;
      const double f = finals[g][seed - 1];
      r.evals = {eval_at(0, 0.1, 0.1, 0.0), eval_at(4, f - 0.1, f - 0.2, 0.01 * seed),
                 eval_at(8, f, f - 0.05, 0.0)};
      r.bytes_sent = 16000;
      r.samples_per_peer = {100, 300};
      CompareSetting setting;
      setting.group = g == 0 ? "ring" : "complete";
      setting.label = cat(setting.group, " seed=", seed);
      setting.config.train.seed = static_cast<std::uint64_t>(seed);
      TopologyReport analysis;
      analysis.n = 2;
      analysis.rho = 0.25;
      analysis.spectral_gap = 0.75;
      analysis.rho_per_round = 0.5;
      analysis.period = 2;
      rows.push_back(compare_row(setting, analysis, r, 0.7));
      results.push_back(r);
    }
  CHECK(rows[0].spectral_gap == Approx(0.5));         // per round
  CHECK(rows[0].period_spectral_gap == Approx(0.75));  // per period, its own column
  CHECK(rows[0].samples_min == 100);
  CHECK(rows[0].samples_max == 300);
  const auto groups = group_compare_rows(rows);
  REQUIRE(groups.size() == 2);
  CHECK(groups[0].label == "ring");
  CHECK(groups[0].final_accuracy.mean == Approx(0.82));
  CHECK(groups[0].final_accuracy.std == Approx(std::sqrt(0.0008)));
  CHECK(groups[1].rounds_to_target.n == 0);  // lowest peer tops out at 0.65 and 0.67
  CHECK(groups[1].average_rounds_to_target.n == 2);

  write_compare(dir, rows, results, 0.7);
  const std::string md = read_all(dir + "/report.md");
  CHECK_THAT(md, Catch::Contains("| ring | 2 | 2 | 0.5000 | 0.7500 (2) |"));
  CHECK_THAT(md, Catch::Contains("0.8200 ± 0.0283"));
  CHECK_THAT(md, Catch::Contains("Training samples per peer: 100 to 300 (unequal shards)"));
  const std::string summary = read_all(dir + "/compare_summary.csv");
  CHECK_THAT(summary, Catch::Contains("\ncomplete,2,"));
  // curves.dat: one block per setting with the mean and deviation of the consensus distance
  // at round 4: seeds 0.01 and 0.02 give 0.015 +- 0.00707.
  const std::string curves = read_all(dir + "/curves.dat");
  CHECK_THAT(curves, Catch::Contains("# ring (2 runs: mean and standard deviation)"));
  CHECK_THAT(curves, Catch::Contains(" 0.015 0.00707107\n"));

  std::string why;
  draw_compare_plots(dir, rows, &why);  // plots.gp is written even without gnuplot
  const std::string gp = read_all(dir + "/plots.gp");
  CHECK_THAT(gp, Catch::Contains("set multiplot layout 1,2"));
  CHECK_THAT(gp, Catch::Contains("set logscale x"));  // bytes
  CHECK_THAT(gp, Catch::Contains("filledcurves"));     // bands over seeds
  // Zeros of the log plot are drawn at its floor (a decade under 0.015), not left out.
  CHECK_THAT(gp, Catch::Contains("set yrange [0.0015:*]"));
  CHECK_THAT(gp, Catch::Contains("($9) > 0.0015 ? ($9) : 0.0015"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("the compare report ranks the settings by each predictor", "[sim][compare]") {
  // Four settings whose final accuracy rises with the effective number of neighbours and falls
  // with the spectral gap: Spearman's correlation is +1 for the one and -1 for the other. With
  // ties the ranks are shared: (1, 2, 2, 3) against (1, 2, 3, 4) gives 4.5 / sqrt(22.5).
  const std::string dir = temp_dir("compare_predictors");
  std::filesystem::remove_all(dir);
  const double neighbours[] = {2.0, 5.0, 9.0, 30.0};
  const double gaps[] = {0.4, 0.3, 0.2, 0.1};
  const auto write = [&](const double* accuracy) {
    std::vector<CompareRow> rows;
    std::vector<SimResult> results;
    for (int g = 0; g < 4; ++g) {
      SimResult r;
      r.evals = {eval_at(0, 0.1, 0.1, 0.0), eval_at(4, accuracy[g], accuracy[g], 0.0)};
      CompareSetting setting;
      setting.label = setting.group = cat("graph-", g);
      TopologyReport analysis;
      analysis.n = 8;
      analysis.rho_per_round = 1.0 - gaps[g];
      analysis.effective_neighbours = neighbours[g];
      rows.push_back(compare_row(setting, analysis, r, 0.9));
      results.push_back(r);
    }
    CHECK(rows[3].effective_neighbours == 30.0);
    write_compare(dir, rows, results, 0.9);
    return read_all(dir + "/report.md");
  };
  const double rising[] = {0.5, 0.6, 0.7, 0.8};
  std::string md = write(rising);
  CHECK_THAT(md, Catch::Contains("| graph-3 | 1 | 8 | 0.1000 | 30.00 |"));
  CHECK_THAT(md, Catch::Contains("| spectral gap per round | -1.00 | -1.00 |"));
  CHECK_THAT(md, Catch::Contains("| effective neighbours | 1.00 | 1.00 |"));
  const std::string csv = read_all(dir + "/compare.csv");
  CHECK(csv.substr(0, csv.find('\n')).find(",effective_neighbours") != std::string::npos);
  const double tied[] = {0.5, 0.6, 0.6, 0.7};
  md = write(tied);
  CHECK_THAT(md, Catch::Contains("| effective neighbours | 0.95 | 0.95 |"));  // 0.9487
  std::filesystem::remove_all(dir);
}

TEST_CASE("sweeps of more than eight settings are split into rows of panels",
          "[sim][compare]") {
  const std::string dir = temp_dir("compare_panels");
  std::filesystem::remove_all(dir);
  std::vector<CompareRow> rows;
  std::vector<SimResult> results;
  for (int g = 0; g < 11; ++g) {
    SimResult r;
    r.evals = {eval_at(0, 0.1, 0.1, 0.0), eval_at(4, 0.5, 0.4, 0.1 + g)};
    CompareSetting setting;
    setting.label = setting.group = cat("graph-", g);
    TopologyReport analysis;
    analysis.n = 4;
    rows.push_back(compare_row(setting, analysis, r, 0.9));
    results.push_back(r);
  }
  write_compare(dir, rows, results, 0.9);
  std::string why;
  draw_compare_plots(dir, rows, &why);
  const std::string gp = read_all(dir + "/plots.gp");
  // Accuracy: two rows (8 + 3 settings) of average-model and lowest-peer panels; consensus: two
  // rows of one panel. A panel never holds more than eight lines, so colours never repeat in it.
  CHECK_THAT(gp, Catch::Contains("set multiplot layout 2,2"));
  CHECK_THAT(gp, Catch::Contains("set multiplot layout 2,1"));
  CHECK_THAT(gp, Catch::Contains("lowest peer (2/2)"));
  CHECK(gp.find("dt 2") == std::string::npos);
  CHECK(gp.find("filledcurves") == std::string::npos);  // one seed: no bands
  std::filesystem::remove_all(dir);
}

TEST_CASE("compare crosses aggregates with attack cells, each cell's entry added to its "
          "setting's faults", "[sim][compare][byzantine]") {
  RunConfig base = small_config();
  base.compare.topologies = {"topologies/ring-16.yaml"};
  AggregateConfig clipped;
  clipped.kind = Aggregate::kClipped;
  base.compare.aggregates = {AggregateConfig{}, clipped};
  Fault flip;
  flip.action = gossip::FaultAction::kAttack;
  flip.peers = {3};
  flip.attack = AttackKind::kSignFlip;
  flip.parameter = 1.0;
  Fault alie = flip;
  alie.attack = AttackKind::kAlie;
  alie.parameter = 4.0;
  base.compare.attacks = {Fault{}, flip, alie};
  Fault kill;
  kill.action = gossip::FaultAction::kKill;
  kill.round = 50;
  kill.peers = {7};
  base.faults = {kill};
  base.compare.seeds = {1, 2};
  auto s = compare_settings(base);
  REQUIRE(s.size() == 12);  // 2 aggregates x 3 attacks x 2 seeds, seeds innermost
  CHECK(s[0].label == "ring-16 mean none seed=1");
  CHECK(s[0].config.faults.size() == 1);  // `none`: the config's own schedule alone
  CHECK(s[2].label == "ring-16 mean sign_flip s=1 seed=1");
  CHECK(s[2].group == "ring-16 mean sign_flip s=1");
  CHECK(s[2].scenario == "ring-16");
  CHECK(s[2].aggregate == "mean");
  CHECK(s[2].attack == "sign_flip s=1");
  REQUIRE(s[2].config.faults.size() == 2);
  CHECK(s[2].config.faults[0].action == gossip::FaultAction::kKill);
  CHECK(s[2].config.faults[1].attack == AttackKind::kSignFlip);
  CHECK(s[11].label == "ring-16 clipped alie z=4 seed=2");
  CHECK(s[11].config.gossip.aggregate.kind == Aggregate::kClipped);
  CHECK(s[11].config.train.seed == 2);
  // A ratio other than the default is named; a fixed tau names tau alone.
  AggregateConfig strict = clipped, fixed = clipped;
  strict.ratio = 1.0;
  fixed.tau = 0.5;
  base.compare.aggregates = {strict, fixed};
  const auto named = compare_settings(base);
  CHECK(named[0].aggregate == "clipped ratio=1");
  CHECK(named.back().aggregate == "clipped tau=0.5");
  base.compare.aggregates = {AggregateConfig{}, clipped};
  // Cells that differ only in their attackers are named by them; a cell twice is refused.
  Fault other = flip;
  other.peers = {5};
  base.compare.attacks = {flip, other};
  CHECK(compare_settings(base)[0].attack == "sign_flip s=1 peers 3");
  base.compare.attacks = {flip, flip};
  REQUIRE_THROWS_WITH(compare_settings(base),
                      Catch::Contains("compare.attacks[1]: the same as compare.attacks[0]"));
  // Without an attack axis the row names the config's own attack entries.
  base.compare.attacks.clear();
  base.compare.aggregates.clear();
  base.faults = {flip};
  s = compare_settings(base);
  REQUIRE(s.size() == 2);
  CHECK(s[0].label == "ring-16 seed=1");
  CHECK(s[0].attack == "sign_flip s=1 peers 3");
  CHECK(s[0].aggregate == "mean");
}

TEST_CASE("a sweep's honest accuracy leaves out the attackers and the dead, and compare.csv, "
          "report.md and the plot give it per aggregate and attack", "[sim][compare][byzantine]") {
  const std::string dir = temp_dir("compare_attacks");
  std::vector<CompareRow> rows;
  std::vector<SimResult> results;
  struct Cell {
    const char* aggregate;
    bool attacked;
    std::vector<double> peers;  // final accuracies; peer 2 attacks in attacked cells
  };
  const Cell cells[] = {{"mean", false, {0.90, 0.80, 0.85, 0.88}},
                        {"mean", true, {0.70, 0.60, 0.05, 0.65}},
                        {"clipped", false, {0.89, 0.87, 0.86, 0.88}},
                        {"clipped", true, {0.88, 0.86, 0.02, 0.87}}};
  for (const Cell& c : cells) {
    SimResult r;
    r.evals = {eval_at(0, 0.1, 0.1, 0.0), eval_at(8, 0.8, 0.05, 0.1)};
    for (double a : c.peers) r.evals.back().peers.push_back(PeerEval{0.3, a, 0});
    // A fifth peer, killed: its frozen model is no honest peer's at the end.
    r.evals.back().peers.push_back(PeerEval{0.3, 0.01, 0});
    r.alive_at_end = {1, 1, 1, 1, 0};
    CompareSetting setting;
    setting.scenario = "ring";
    setting.aggregate = c.aggregate;
    setting.attack = c.attacked ? "sign_flip s=1" : "none";
    setting.group = cat("ring ", setting.aggregate, " ", setting.attack);
    setting.label = setting.group;
    if (c.attacked) {
      Fault f;
      f.action = gossip::FaultAction::kAttack;
      f.peers = {2};
      f.attack = AttackKind::kSignFlip;
      setting.config.faults = {f};
    }
    TopologyReport analysis;
    analysis.n = 5;
    rows.push_back(compare_row(setting, analysis, r, 0.7));
    results.push_back(r);
  }
  CHECK(rows[0].attackers.empty());
  CHECK(rows[0].honest_accuracy_min == Approx(0.80));
  CHECK(rows[1].attackers == std::vector<int>{2});
  CHECK(rows[1].honest_accuracy_min == Approx(0.60));  // not the attacker's 0.05
  CHECK(rows[1].honest_accuracy_mean == Approx(0.65));
  CHECK(rows[1].final_min_peer_accuracy == Approx(0.05));  // every peer's, as before

  write_compare(dir, rows, results, 0.7);
  const std::string csv = read_all(dir + "/compare.csv");
  CHECK_THAT(csv, Catch::Contains(",links,scenario,aggregate,attack,attackers,honest_accuracy_min,"
                                  "honest_accuracy_mean,honest_diverged,effective_neighbours\n"));
  CHECK_THAT(csv, Catch::Contains(",ring,mean,sign_flip s=1,2,0.6,0.65,0,\n"));
  CHECK_THAT(csv, Catch::Contains(",ring,clipped,none,,0.86,0.875,0,\n"));
  const std::string md = read_all(dir + "/report.md");
  CHECK_THAT(md, Catch::Contains("## Honest peers under attack"));
  CHECK_THAT(md, Catch::Contains("### ring (attacker: peer 2)"));
  CHECK_THAT(md, Catch::Contains("| attack | `mean` | `clipped` |"));
  CHECK_THAT(md, Catch::Contains("| none | 0.8000 / 0.8575 | 0.8600 / 0.8750 |"));
  CHECK_THAT(md, Catch::Contains("| sign_flip s=1 | 0.6000 / 0.6500 | 0.8600 / 0.8700 |"));
  CHECK_THAT(md, Catch::Contains("| sign_flip s=1 | -20.0 | +0.0 |"));  // against no attack
  CHECK_THAT(read_all(dir + "/attacks.dat"), Catch::Contains("1 \"sign_flip s=1\" 0.6 0 0.65 0"));
  std::string why;
  draw_compare_plots(dir, rows, &why);  // plots.gp is written even without gnuplot
  const std::string gp = read_all(dir + "/plots.gp");
  CHECK_THAT(gp, Catch::Contains("set output 'honest_accuracy.png'"));
  CHECK_THAT(gp, Catch::Contains("'attacks.dat' index 1 using ($1):($3):xtic(2) with linespoints"));
  // gossip plot DIR draws it again from compare.csv's columns.
  std::filesystem::remove(dir + "/plots.gp");
  try {
    redraw_compare(dir);
  } catch (const RuntimeError&) {
    // no gnuplot here: plots.gp is written all the same
  }
  CHECK_THAT(read_all(dir + "/plots.gp"), Catch::Contains("set output 'honest_accuracy.png'"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("a sweep under attack runs every cell, and refuses an attacker outside a graph before "
          "simulating anything", "[sim][compare][byzantine]") {
  const std::string dir = temp_dir("sweep_attacks");
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/ring.yaml") << "generator: ring\nn: 6\n";
  const std::string head =
      "data: {synthetic: {train: 384, test: 64, dim: 8, classes: 4}}\n"
      "model: {layers: [8, 16, 4]}\n"
      "optimizer: {lr: 0.05, momentum: 0.9}\n"
      "train: {epochs: 1, batch: 8, evals_per_epoch: 1}\n"
      "compare:\n"
      "  topologies: [ring.yaml]\n"
      "  aggregates: [mean, clipped]\n";
  const RunConfig base = load_config_from_string(
      head + "  attacks: [none, {round: 1, attack: [2], kind: sign_flip, s: 4}]\n", "sweep.yaml",
      dir);
  REQUIRE(run_sweep(base, dir + "/out", false) == kExitOk);
  std::ifstream csv(dir + "/out/compare.csv");
  std::string line;
  std::getline(csv, line);
  const auto header = split_csv_line(line);
  auto column = [&](const char* name) {
    return static_cast<std::size_t>(std::find(header.begin(), header.end(), name) -
                                    header.begin());
  };
  REQUIRE(column("honest_accuracy_min") < header.size());
  std::vector<std::vector<std::string>> runs;
  while (std::getline(csv, line)) runs.push_back(split_csv_line(line));
  REQUIRE(runs.size() == 4);
  const char* want[][2] = {{"mean", "none"}, {"mean", "sign_flip s=4"},
                           {"clipped", "none"}, {"clipped", "sign_flip s=4"}};
  for (std::size_t i = 0; i < runs.size(); ++i) {
    INFO("run " << i);
    CHECK(runs[i][column("aggregate")] == want[i][0]);
    CHECK(runs[i][column("attack")] == want[i][1]);
    CHECK(runs[i][column("attackers")] == (i % 2 ? "2" : ""));
    // The lowest of fewer peers: never under every peer's lowest, equal without an attacker.
    const double honest = std::stod(runs[i][column("honest_accuracy_min")]);
    const double every = std::stod(runs[i][column("final_min_peer_accuracy")]);
    if (i % 2) CHECK(honest >= every);
    else CHECK(honest == every);
  }
  CHECK_THAT(read_text(dir + "/out/report.md"), Catch::Contains("### ring (attacker: peer 2)"));

  const RunConfig outside = load_config_from_string(
      head + "  attacks: [none, {round: 1, attack: [9], kind: nan}]\n", "sweep.yaml", dir);
  REQUIRE_THROWS_WITH(run_sweep(outside, dir + "/out2", false),
                      Catch::Contains("sweep.yaml:8: faults[0].attack: peer 9 is not in the "
                                      "topology's 0..5") &&
                          Catch::Contains("compare.attacks"));
  CHECK_FALSE(std::filesystem::exists(dir + "/out2"));
  std::filesystem::remove_all(dir);
}

namespace {

std::vector<const MemberEvent*> events_of(const SimResult& r, int peer, const std::string& event) {
  std::vector<const MemberEvent*> out;
  for (const auto& e : r.member_events)
    if (e.peer == peer && gossip::event_name(e.event) == event) out.push_back(&e);
  return out;
}

/// The small config for 64 rounds of `peers` peers, a death one round after a suspicion.
RunConfig fault_config(int peers, std::vector<Fault> faults) {
  RunConfig config = small_config();
  config.train.epochs = peers / 2.0;  // 8 samples a peer a round, 1024 samples: 64 rounds
  config.monitor.dead_after_rounds = 1;
  config.monitor.dead_after_s = 0;
  config.faults = std::move(faults);
  return config;
}

}  // namespace

TEST_CASE("simulated faults: a split ring is seen by every survivor, and healed by a restart",
          "[sim][faults]") {
  RunConfig config = fault_config(
      8, {Fault{10, 0, gossip::FaultAction::kKill, {2, 6}, {}, 0.0}, Fault{30, 0, gossip::FaultAction::kRestart, {2}, {}, 0.0}});
  const DataSets data = load_datasets(config);
  const Topology t = generate("ring", 8);
  config.sim.workers = 1;
  const SimResult r = simulate(config, t, data);
  for (int p : {0, 1, 3, 4, 5, 7}) {
    INFO("peer " << p);
    const auto split = events_of(r, p, "partition");
    REQUIRE(split.size() == 1);
    // Neighbours miss the dead in round 10 (done = 11) and bury them a round later; the news
    // takes one more round to the far side of each half.
    CHECK(split[0]->round <= 10 + 4);
    CHECK(split[0]->components == Components{{0, 1, 7}, {3, 4, 5}});
    const auto healed = events_of(r, p, "healed");
    REQUIRE(healed.size() == 1);
    CHECK(healed[0]->round > 30);
    CHECK(healed[0]->components == Components{{0, 1, 2, 3, 4, 5, 7}});
  }
  CHECK(events_of(r, 2, "rejoin").size() == 1);  // its own refutation
  CHECK(r.alive_at_end == std::vector<char>{1, 1, 1, 1, 1, 1, 0, 1});
  CHECK(r.final_components == std::vector<std::vector<int>>{{0, 1, 2, 3, 4, 5, 7}});
  REQUIRE(r.faults.size() == 2);
  CHECK(r.faults[0].action == "kill");
  // The same schedule on two worker threads: the same events and parameters.
  config.sim.workers = 2;
  const SimResult two = simulate(config, t, data);
  CHECK(two.params_sha256 == r.params_sha256);
  REQUIRE(two.member_events.size() == r.member_events.size());
  for (std::size_t i = 0; i < r.member_events.size(); ++i) {
    CHECK(two.member_events[i].peer == r.member_events[i].peer);
    CHECK(two.member_events[i].event == r.member_events[i].event);
    CHECK(two.member_events[i].round == r.member_events[i].round);
  }
  // monitor.on_partition: stop ends the run at the split, with the components' accuracies.
  config.monitor.on_partition = gossip::PartitionPolicy::kStop;
  const SimResult stopped = simulate(config, t, data);
  CHECK(stopped.stopped_by_partition);
  CHECK(stopped.rounds <= 10 + 4);
  CHECK(stopped.final_components == std::vector<std::vector<int>>{{0, 1, 7}, {3, 4, 5}});
  CHECK(stopped.component_accuracy.size() == 2);
}

TEST_CASE("simulated faults on a directed graph: partitions are its strongly connected "
          "components, and the end is not connected where the graph is not strongly so",
          "[sim][faults]") {
  // Push-sum on the directed cycle 0 -> 1 -> 2 -> 3 -> 0; peer 2 dies at round 10. What is left,
  // 3 -> 0 -> 1, is weakly connected but no peer is reached back: {0}, {1}, {3}, each reaching
  // the ones downstream one way only.
  RunConfig config = fault_config(4, {Fault{10, 0, gossip::FaultAction::kKill, {2}, {}, 0.0}});
  config.gossip.algorithm = gossip::AlgorithmKind::kPushSum;
  const DataSets data = load_datasets(config);
  const Topology t = gossip::load_topology_from_string(
      "n: 4\ndirected: true\nweights: push-sum\nedges: [[0, 1], [1, 2], [2, 3], [3, 0]]\n",
      "cycle.yaml");
  config.sim.workers = 1;
  const SimResult r = simulate(config, t, data);
  const Components parts{{0}, {1}, {3}};
  for (int p : {0, 1, 3}) {
    INFO("peer " << p);
    const auto split = events_of(r, p, "partition");
    REQUIRE_FALSE(split.empty());
    CHECK(split.back()->components == parts);
  }
  CHECK_FALSE(r.final_connected);
  CHECK(r.final_components == std::vector<std::vector<int>>{{0}, {1}, {3}});
  CHECK(r.final_one_way == std::vector<std::pair<int, int>>{{0, 1}, {2, 0}, {2, 1}});
  // A cut of 1 -> 2 to the end instead: 2 -> 3 -> 0 -> 1 is left, every peer its own
  // component, each reaching the ones downstream one way only.
  config.faults = {Fault{5, 64, gossip::FaultAction::kCut, {}, {{1, 2}}, 0.0}};
  const SimResult cut = simulate(config, t, data);
  CHECK_FALSE(cut.final_connected);
  CHECK(cut.final_components == std::vector<std::vector<int>>{{0}, {1}, {2}, {3}});
  CHECK(cut.final_one_way ==
        std::vector<std::pair<int, int>>{{0, 1}, {2, 0}, {2, 1}, {2, 3}, {3, 0}, {3, 1}});
  for (int p : {0, 2, 3}) {  // (1, whose messages are the ones lost, hears all it should)
    INFO("peer " << p);
    const auto split = events_of(cut, p, "partition");
    REQUIRE_FALSE(split.empty());
    CHECK(split.front()->components.size() >= 2);
  }
  // Without a fault the cycle is strongly connected to the end.
  config.faults.clear();
  const SimResult whole = simulate(config, t, data);
  CHECK(whole.final_connected);
  CHECK(whole.final_components == std::vector<std::vector<int>>{{0, 1, 2, 3}});
}

TEST_CASE("chaos: 300 seeded random faults on 64 peers, and the record is the schedule's truth",
          "[sim][faults][chaos]") {
  // 64 peers on the exponential graph (directed), 384 rounds, 300 kills, restarts, pauses and
  // cuts from gossip chaos's generator. What the schedule alone says must be what the run
  // records: every fault in order at its round, who is alive at the end, the final live graph's
  // strongly connected components and whether it is connected.
  RunConfig config = test::small_synthetic_config(32768, 64, 5);
  config.train.epochs = 12;
  config.train.batch = 16;
  config.train.evals_per_epoch = 1;
  config.sim.step_ms = 1.0;
  config.monitor.dead_after_rounds = 3;
  config.monitor.dead_after_s = 0;
  const Topology t = generate("exponential", 64);
  const DataSets data = load_datasets(config);
  const std::int64_t rounds = gossip::plan_rounds(config, data.train.n, 64).rounds;
  REQUIRE(rounds == 384);
  gossip::ChaosOptions chaos;
  chaos.count = 300;
  chaos.seed = 3;
  chaos.rounds = rounds;
  chaos.attacks = 20;
  config.faults = gossip::chaos_schedule(t, chaos);
  REQUIRE(std::count_if(config.faults.begin(), config.faults.end(), [](const Fault& f) {
            return f.action == gossip::FaultAction::kAttack;
          }) == 20);
  REQUIRE(config.faults.size() == 320u);
  {  // the attacks are layered on: the other faults are the schedule without attacks
    gossip::ChaosOptions plain = chaos;
    plain.attacks = 0;
    std::vector<Fault> rest;
    std::copy_if(config.faults.begin(), config.faults.end(), std::back_inserter(rest),
                 [](const Fault& f) { return f.action != gossip::FaultAction::kAttack; });
    CHECK(gossip::faults_yaml(rest) == gossip::faults_yaml(gossip::chaos_schedule(t, plain)));
  }
  // The same seed, the same schedule; another seed, another.
  CHECK(gossip::faults_yaml(gossip::chaos_schedule(t, chaos)) == gossip::faults_yaml(config.faults));
  chaos.seed = 4;
  CHECK(gossip::faults_yaml(gossip::chaos_schedule(t, chaos)) != gossip::faults_yaml(config.faults));
  const SimResult r = simulate(config, t, data);

  // The truth, from the schedule alone.
  const gossip::ScheduleOutcome truth = gossip::schedule_outcome(config.faults);
  REQUIRE(truth.kills > 50);
  REQUIRE(truth.restarts > 50);
  std::vector<char> alive(64, 1);
  for (int p : truth.dead_at_end) alive[p] = 0;
  CHECK(r.alive_at_end == alive);
  for (const Fault& f : config.faults)
    REQUIRE((f.action != gossip::FaultAction::kCut || f.to_round < rounds));  // none at the end
  const LiveGraph end = live_graph(t, truth.dead_at_end, rounds);
  CHECK(r.final_components == end.components);
  CHECK(r.final_connected == end.connected);
  CHECK(r.final_one_way == end.one_way);
  // Every fault in the schedule's order (a cut: its start, then its end where it falls).
  struct Entry {
    std::int64_t round;
    std::string action;
    std::vector<int> peers;
    bool operator==(const Entry&) const = default;
  };
  std::vector<Entry> expected, recorded;
  for (const Fault& f : config.faults) {
    if (f.action == gossip::FaultAction::kAttack) {  // its start, then its end
      expected.push_back({f.round, gossip::cat("attack ", gossip::describe_attack(f)), f.peers});
      expected.push_back({f.to_round, "attack over", f.peers});
      continue;
    }
    if (f.action != gossip::FaultAction::kCut) {
      expected.push_back({f.round, gossip::fault_action_name(f.action), f.peers});
      continue;
    }
    const std::vector<int> ends{f.links[0].first, f.links[0].second};
    expected.push_back({f.round, "cut", ends});
    expected.push_back({f.to_round, "uncut", ends});
  }
  // In round order (within a round, in any order).
  const auto by_round = [](const Entry& a, const Entry& b) {
    return std::tie(a.round, a.action, a.peers) < std::tie(b.round, b.action, b.peers);
  };
  for (const auto& f : r.faults) recorded.push_back({f.round, f.action, f.peers});
  CHECK(std::is_sorted(recorded.begin(), recorded.end(),
                       [](const Entry& a, const Entry& b) { return a.round < b.round; }));
  std::sort(expected.begin(), expected.end(), by_round);
  std::sort(recorded.begin(), recorded.end(), by_round);
  const auto text = [](const Entry& e) {
    std::string peers;
    for (int p : e.peers) peers += gossip::cat(" ", p);
    return gossip::cat(e.round, " ", e.action, peers);
  };
  CHECK(recorded.size() == expected.size());
  for (std::size_t i = 0; i < std::min(recorded.size(), expected.size()); ++i)
    if (!(recorded[i] == expected[i])) {  // the first that differs, readably
      CHECK(text(recorded[i]) == text(expected[i]));
      break;
    }
  // Each partition a peer recorded: two components or more, disjoint, none with a peer its
  // view holds dead; the healed ones whole.
  int partitions = 0;
  for (const auto& e : r.member_events) {
    if (e.event != gossip::MemberEventKind::kPartition) continue;
    ++partitions;
    INFO("peer " << e.peer << " round " << e.round);
    CHECK(e.components.size() >= 2);
    std::vector<int> seen;
    for (const auto& c : e.components) seen.insert(seen.end(), c.begin(), c.end());
    std::sort(seen.begin(), seen.end());
    CHECK(std::adjacent_find(seen.begin(), seen.end()) == seen.end());
    for (int d : e.dead) CHECK_FALSE(std::binary_search(seen.begin(), seen.end(), d));
  }
  CHECK(partitions > 0);
  // The live graph as the run carried the schedule out: each change at its round, the same
  // strongly connected components, one-way reaches and connectedness as the schedule alone
  // gives.
  const std::vector<gossip::LiveGraphChange> graphs =
      gossip::schedule_live_graphs(t, config.faults, rounds);
  REQUIRE(graphs.size() > 100);
  CHECK(std::count_if(graphs.begin(), graphs.end(),
                      [](const auto& c) { return c.graph.components.size() >= 2; }) > 10);
  CHECK(r.live_graphs.size() == graphs.size());
  for (std::size_t i = 0; i < std::min(r.live_graphs.size(), graphs.size()); ++i) {
    const auto& got = r.live_graphs[i];
    if (got.round == graphs[i].round && gossip::same_live_graph(got.graph, graphs[i].graph))
      continue;
    CHECK(gossip::cat(got.round, " ", gossip::format_components(got.graph.components)) ==
          gossip::cat(graphs[i].round, " ", gossip::format_components(graphs[i].graph.components)));
    break;  // the first that differs
  }
  CHECK(gossip::same_live_graph(r.live_graphs.back().graph, end));
  // Every live peer that still hears a live neighbour holds exactly the truth's dead: each
  // death reached it, and each restart's refutation too (a restarted peer adopts its first
  // neighbour's view; a suspicion one past what a peer knows is believed, so the suspected
  // peer hears of it and refutes again). A peer whose in-neighbours are all dead hears nobody,
  // and its view stays as it was when the last of them died.
  std::vector<std::vector<int>> held(64);
  for (const auto& e : r.member_events) held[e.peer] = e.dead;
  std::vector<int> truth_dead = truth.dead_at_end;
  std::sort(truth_dead.begin(), truth_dead.end());
  int hearing = 0;
  for (int p = 0; p < 64; ++p) {
    bool hears = false;
    for (const auto& nb : t.in_neighbours(p, rounds - 1)) hears = hears || (nb.peer != p && alive[nb.peer]);
    if (!alive[p] || !hears) continue;
    ++hearing;
    std::sort(held[p].begin(), held[p].end());
    INFO("peer " << p);
    CHECK(held[p] == truth_dead);
    // and its last word on the live graph is the truth's at the end
    const gossip::MemberEvent* last = nullptr;
    for (const auto& e : r.member_events)
      if (e.peer == p && (e.event == gossip::MemberEventKind::kPartition ||
                          e.event == gossip::MemberEventKind::kHealed))
        last = &e;
    if (end.connected) {
      CHECK((last == nullptr || last->event == gossip::MemberEventKind::kHealed));
    } else {
      REQUIRE(last != nullptr);
      CHECK(last->event == gossip::MemberEventKind::kPartition);
      CHECK(last->components == end.components);
    }
  }
  CHECK(hearing > 20);
}

TEST_CASE("simulated faults: a cut link that leaves a path is probed around, and nobody dies",
          "[sim][faults][probes]") {
  // Ring 0-1-2-3-0 without 0-1: 0 and 1 find each other silent and suspect each other, but the
  // indirect probe (0 -> 3 -> 2, who hears 1; the ack back 2 -> 3 -> 0) says 1 is alive, so no
  // peer is declared dead and the live graph is never called split. (Without the probes, 0
  // would bury 1 after dead_after_rounds, as the partitioned ring of the next test does.)
  RunConfig config = fault_config(4, {Fault{10, 40, gossip::FaultAction::kCut, {}, {{0, 1}}, 0.0}});
  config.monitor.dead_after_rounds = 12;
  const DataSets data = load_datasets(config);
  const SimResult r = simulate(config, generate("ring", 4), data);
  for (int p = 0; p < 4; ++p) {
    INFO("peer " << p);
    CHECK(events_of(r, p, "dead").empty());
    CHECK(events_of(r, p, "partition").empty());
  }
  const auto suspected = events_of(r, 0, "suspect");
  REQUIRE(!suspected.empty());
  CHECK(suspected.front()->subject == 1);
  CHECK(r.final_components.size() == 1);
  CHECK(r.alive_at_end == std::vector<char>{1, 1, 1, 1});

  // On a ring of 8 the way around (6 hops) is longer than a probe travels: nobody vouches, and
  // each side of the cut link buries the other, as before there were probes.
  RunConfig far = fault_config(8, {Fault{10, 40, gossip::FaultAction::kCut, {}, {{0, 1}}, 0.0}});
  far.monitor.dead_after_rounds = 12;
  const SimResult f = simulate(far, generate("ring", 8), data);
  REQUIRE(!events_of(f, 0, "dead").empty());
  CHECK(events_of(f, 0, "dead").front()->subject == 1);

  // A kill on the same ring is heard by nobody: its neighbours bury it all the same.
  RunConfig kill = fault_config(4, {Fault{10, 0, gossip::FaultAction::kKill, {1}, {}, 0.0}});
  kill.monitor.dead_after_rounds = 12;
  const SimResult k = simulate(kill, generate("ring", 4), data);
  for (int p : {0, 2}) {
    INFO("peer " << p);
    const auto dead = events_of(k, p, "dead");
    REQUIRE(dead.size() == 1);
    CHECK(dead[0]->subject == 1);
    CHECK(dead[0]->round <= 10 + 12 + 2);
  }
}

TEST_CASE("simulated faults: a cut link is down both ways until to_round, then both sides rejoin",
          "[sim][faults]") {
  // Ring 0-1-2-3-0 without 0-1 and 2-3: {1, 2} and {3, 0} cannot hear each other.
  RunConfig config = fault_config(4, {Fault{10, 30, gossip::FaultAction::kCut, {}, {{0, 1}, {2, 3}}, 0.0}});
  const DataSets data = load_datasets(config);
  const SimResult r = simulate(config, generate("ring", 4), data);
  // Each side buries the other (the dead of a view: the peers it cannot hear from)...
  for (int p = 0; p < 4; ++p) {
    INFO("peer " << p);
    std::vector<int> buried;
    for (const auto* d : events_of(r, p, "dead"))
      if (d->round < 30) buried.push_back(d->subject);
    std::sort(buried.begin(), buried.end());
    CHECK(buried == (p == 0 || p == 3 ? std::vector<int>{1, 2} : std::vector<int>{0, 3}));
    // ...and takes them back once the links are up, each having refuted its own death (a
    // death rumour that reaches a side after the cut, from a neighbour that had not heard the
    // refutation yet, is refuted the same way).
    const auto back = events_of(r, p, "rejoin");
    int others = 0;
    for (const auto* b : back) {
      CHECK(b->round >= 30);
      others += b->subject != p;
    }
    CHECK(others >= 2);
  }
  CHECK(r.final_components.size() == 1);
  CHECK(r.alive_at_end == std::vector<char>{1, 1, 1, 1});
  REQUIRE(r.faults.size() == 2);
  CHECK(r.faults[1].action == "uncut");
}

TEST_CASE("simulated attacks: a sign-flipping peer drags its honest neighbours away, and a "
          "dissensus attacker's own message for each neighbour reaches it", "[sim][faults]") {
  // Ring of 8, 64 rounds; peer 3 sends -x from round 2 on and mixes what it receives honestly.
  RunConfig config = fault_config(8, {});
  const DataSets data = load_datasets(config);
  const Topology t = generate("ring", 8);
  const SimResult clean = simulate(config, t, data);
  auto honest_min = [](const SimResult& r) {
    double lowest = 1.0;
    for (std::size_t p = 0; p < r.evals.back().peers.size(); ++p)
      if (p != 3) lowest = std::min(lowest, r.evals.back().peers[p].test_accuracy);
    return lowest;
  };
  Fault flip{2, 0, gossip::FaultAction::kAttack, {3}, {}, 0.0};
  flip.attack = AttackKind::kSignFlip;
  flip.parameter = 1.0;
  config.faults = {flip};
  const SimResult flipped = simulate(config, t, data);
  INFO("honest min accuracy " << honest_min(clean) << " -> " << honest_min(flipped)
                              << ", consensus distance " << clean.evals.back().consensus_distance
                              << " -> " << flipped.evals.back().consensus_distance);
  CHECK(honest_min(clean) > 0.8);
  CHECK(honest_min(flipped) < honest_min(clean) - 0.01);
  CHECK(flipped.evals.back().consensus_distance >
        100 * clean.evals.back().consensus_distance);
  REQUIRE(flipped.faults.size() == 1);
  CHECK(flipped.faults[0].action == "attack sign_flip (s = 1)");
  CHECK(flipped.faults[0].peers == std::vector<int>{3});
  // Until it attacks the run is the clean one; the attack changes the parameters from then on.
  CHECK(flipped.params_sha256 != clean.params_sha256);
  config.faults[0].round = 1000;  // after the run
  CHECK(simulate(config, t, data).params_sha256 == clean.params_sha256);
  // Dissensus: each victim v gets its own message, h_v + 4 (h_v - mean(H)) (two publishes of one
  // round in the simulated network), which pushes the two neighbours of 3 apart.
  Fault dis{2, 0, gossip::FaultAction::kAttack, {3}, {}, 0.0};
  dis.attack = AttackKind::kDissensus;
  dis.parameter = 4.0;
  config.faults = {dis};
  const SimResult split = simulate(config, t, data);
  INFO("dissensus: honest min accuracy " << honest_min(split) << ", consensus distance "
                                         << split.evals.back().consensus_distance);
  CHECK(honest_min(split) < honest_min(clean) - 0.01);
  CHECK(split.evals.back().consensus_distance > 100 * clean.evals.back().consensus_distance);
  config.sim.workers = 2;  // the same on two threads
  CHECK(simulate(config, t, data).params_sha256 == split.params_sha256);
}

TEST_CASE("sim.eval_peers: a sample of the peers is evaluated, training is unchanged, and the "
          "lowest peer at the end is the one every peer's evaluation finds", "[sim]") {
  RunConfig config = small_config();
  const DataSets data = load_datasets(config);
  const Topology t = generate("ring", 16);
  config.sim.eval_peers = 0;  // every peer, every evaluation
  const SimResult all = simulate(config, t, data);
  config.sim.eval_peers = 4;
  const SimResult some = simulate(config, t, data);
  // Evaluating fewer models changes no parameter and no average.
  CHECK(some.params_sha256 == all.params_sha256);
  REQUIRE(some.evals.size() == all.evals.size());
  for (std::size_t i = 0; i < all.evals.size(); ++i) {
    INFO("evaluation " << i);
    CHECK(some.evals[i].average_accuracy == all.evals[i].average_accuracy);
    int evaluated = 0;
    for (std::size_t p = 0; p < 16; ++p)
      if (!std::isnan(some.evals[i].peers[p].test_accuracy)) {
        ++evaluated;
        CHECK(some.evals[i].peers[p].test_accuracy == all.evals[i].peers[p].test_accuracy);
      }
    // Ranks 0, 4, 8, 12; the last evaluation adds the 8 lowest of a screening.
    if (i + 1 < all.evals.size()) CHECK(evaluated == 4);
    else CHECK(evaluated <= 12);
  }
  CHECK(some.evals.back().peer_accuracy_min == all.evals.back().peer_accuracy_min);
}

namespace {

/// A ring of 8 under clipped gossip with gossip.on_byzantine `on_byzantine`: without an attack,
/// and with peer 3 sending -x from round 2 on.
std::pair<SimResult, SimResult> clipped_ring_runs(gossip::ByzantinePolicy on_byzantine) {
  RunConfig config = fault_config(8, {});
  config.gossip.aggregate.kind = Aggregate::kClipped;
  config.gossip.on_byzantine = on_byzantine;
  const DataSets data = load_datasets(config);
  const Topology t = generate("ring", 8);
  SimResult clean = simulate(config, t, data);
  Fault flip{2, 0, gossip::FaultAction::kAttack, {3}, {}, 0.0};
  flip.attack = AttackKind::kSignFlip;
  flip.parameter = 1.0;
  config.faults = {flip};
  return {std::move(clean), simulate(config, t, data)};
}

}  // namespace

TEST_CASE("clipped gossip contains a sign-flipping peer, and its neighbours name it",
          "[sim][faults][byzantine]") {
  // Ring of 8, peer 3 sends -x from round 2 on. Under clipped gossip its two neighbours clip
  // its message to a sliver round after round: within kSuspectWindow rounds each raises
  // byzantine_suspect for it, before anyone else is suspected (its victims, pulled a little
  // every round, may be later: docs/byzantine.md), and without the attack nobody is. The
  // honest peers end near the clean run, where mean's fall (the test above).
  const auto [clean, attacked] = clipped_ring_runs(gossip::ByzantinePolicy::kReport);
  std::vector<std::pair<int, int>> named;  // (peer, subject) of the suspicions in the window
  for (const MemberEvent& e : attacked.member_events)
    if (e.event == gossip::MemberEventKind::kByzantineSuspect && e.round <= 2 + MembershipWatch::kSuspectWindow)
      named.emplace_back(e.peer, e.subject);
  std::sort(named.begin(), named.end());
  CHECK(named == std::vector<std::pair<int, int>>{{2, 3}, {4, 3}});
  for (const MemberEvent& e : clean.member_events) {
    INFO(e.peer << " " << e.event << " " << e.subject << " at " << e.round);
    CHECK(std::string(gossip::event_name(e.event)).rfind("byzantine", 0) != 0);
  }
  double clean_min = 1.0, attacked_min = 1.0;
  for (int p = 0; p < 8; ++p)
    if (p != 3) {
      clean_min = std::min(clean_min, clean.evals.back().peers[p].test_accuracy);
      attacked_min = std::min(attacked_min, attacked.evals.back().peers[p].test_accuracy);
    }
  INFO("honest min accuracy, clipped: " << clean_min << " clean, " << attacked_min
                                        << " attacked");
  CHECK(attacked_min > clean_min - 0.01);
}

TEST_CASE("on_byzantine: cut stops mixing with the liar for good, its neighbours alone cut it, "
          "and the live graph is taken without it", "[sim][faults][byzantine]") {
  // Ring of 8, peer 3 sends -x from round 2 on, clipped gossip. With cut, peers 2 and 4 stop
  // mixing with 3 the round they suspect it. Each then hears one neighbour, and the cut liar
  // was the one liar clipped's radius allowed for (aggregate.byzantine 1), so that neighbour is
  // mixed in whole: nobody else is suspected or cut in the whole run.
  const auto [clean, attacked] = clipped_ring_runs(gossip::ByzantinePolicy::kCut);
  std::vector<std::pair<int, int>> cut, suspected;
  for (const MemberEvent& e : attacked.member_events) {
    INFO(e.peer << " " << e.event << " " << e.subject << " at " << e.round);
    if (e.event == gossip::MemberEventKind::kByzantineCut) {
      cut.emplace_back(e.peer, e.subject);
      CHECK(e.round <= 2 + MembershipWatch::kSuspectWindow);
    }
    if (e.event == gossip::MemberEventKind::kByzantineSuspect) suspected.emplace_back(e.peer, e.subject);
    CHECK(e.event != gossip::MemberEventKind::kByzantineCleared);  // a cut neighbour is no longer heard, so stays named
  }
  std::sort(cut.begin(), cut.end());
  std::sort(suspected.begin(), suspected.end());
  CHECK(cut == std::vector<std::pair<int, int>>{{2, 3}, {4, 3}});
  CHECK(suspected == cut);
  double clean_min = 1.0, attacked_min = 1.0;
  for (int p = 0; p < 8; ++p)
    if (p != 3) {
      clean_min = std::min(clean_min, clean.evals.back().peers[p].test_accuracy);
      attacked_min = std::min(attacked_min, attacked.evals.back().peers[p].test_accuracy);
    }
  INFO("honest min accuracy with cut: " << clean_min << " clean, " << attacked_min << " attacked");
  CHECK(attacked_min > clean_min - 0.01);
  // The summary's record: both cuts, nobody refused (sign_flip sends finite values).
  SimRunInfo info;
  const NetworkSummary net = network_summary(attacked, info);
  const std::string byz = net.byzantine.str();
  CHECK(byz.find(R"({"event": "byzantine_cut", "peer": 2, "subject": 3)") != std::string::npos);
  CHECK(byz.find(R"({"event": "byzantine_cut", "peer": 4, "subject": 3)") != std::string::npos);
  CHECK(net.refused_params.str() == "[]");
}

TEST_CASE("a peer that sends NaN is left out by its neighbours every round, counted per sender, "
          "and named in the sim's events", "[sim][faults][byzantine]") {
  RunConfig config = fault_config(8, {});
  const DataSets data = load_datasets(config);
  const Topology t = generate("ring", 8);
  Fault nan{2, 0, gossip::FaultAction::kAttack, {3}, {}, 0.0};
  nan.attack = AttackKind::kNan;
  config.faults = {nan};
  const SimResult r = simulate(config, t, data);
  const std::int64_t rounds = r.evals.back().round;
  // Every message of rounds 2 .. rounds - 1 from peer 3, at each of its two neighbours.
  using Count = std::tuple<int, int, std::int64_t>;
  CHECK(r.refused == std::vector<Count>{{2, 3, rounds - 2}, {4, 3, rounds - 2}});
  // Events at the 1st, 2nd, 4th, ... refusal of each neighbour.
  std::int64_t events = 0;
  for (const MemberEvent& e : r.member_events)
    if (e.event == gossip::MemberEventKind::kRefusedParams) {
      CHECK(e.subject == 3);
      CHECK((e.peer == 2 || e.peer == 4));
      ++events;
    }
  std::int64_t powers = 0;
  for (std::int64_t k = 1; k <= rounds - 2; k *= 2) ++powers;
  CHECK(events == 2 * powers);
  for (int p = 0; p < 8; ++p) CHECK(std::isfinite(r.evals.back().peers[p].test_accuracy));
}

TEST_CASE("an elastic run in the simulator: peers join and leave at the rounds the membership "
          "rule gives, joiners start from their donors' average, and the live graph stays whole",
          "[sim][faults][elastic]") {
  // Ring of 4 that may grow to 8 ranks; 1024 samples over 8 shards of 128, batch 8: 16 steps an
  // epoch, 4 epochs = 64 rounds. Ranks 4 and 5 join at round 10; rank 1 leaves at round 30.
  RunConfig config = fault_config(8, {Fault{10, 0, gossip::FaultAction::kJoin, {4, 5}, {}, 0.0},
                                      Fault{30, 0, gossip::FaultAction::kLeave, {1}, {}, 0.0}});
  config.train.epochs = 4;
  const DataSets data = load_datasets(config);
  const Topology t = load_topology_from_string(
      "generator: ring\nn: 4\nelastic: true\nmax_peers: 8\n", "elastic-ring.yaml");
  config.sim.workers = 1;
  const SimResult r = simulate(config, t, data);
  REQUIRE(r.rounds == 64);
  REQUIRE(r.initial_members == std::vector<int>{0, 1, 2, 3});
  REQUIRE(r.membership.size() == 2);
  // The ring of 4 has diameter 2: a change announced at 10 takes effect at 10 + 2 + 2.
  CHECK(r.membership[0].announced == 10);
  CHECK(r.membership[0].from == 14);
  CHECK(r.membership[0].members == std::vector<int>{0, 1, 2, 3, 4, 5});
  CHECK(r.membership[0].joined == std::vector<int>{4, 5});
  // In the ring of the six members, 4 sits between 3 and 5 and 5 between 4 and 0: each joiner's
  // donors are its new neighbours that were members already.
  CHECK(r.membership[0].donors == std::vector<std::vector<int>>{{3}, {0}});
  // The ring of 6 has diameter 3: announced at 30, in effect at 35.
  CHECK(r.membership[1].from == 35);
  CHECK(r.membership[1].left == std::vector<int>{1});
  CHECK(r.membership[1].members == std::vector<int>{0, 2, 3, 4, 5});
  CHECK(r.alive_at_end == std::vector<char>{1, 0, 1, 1, 1, 1, 0, 0});
  // Nobody was suspected, buried or cut off: joins and leaves are not deaths or partitions.
  for (const MemberEvent& e : r.member_events) {
    INFO("peer " << e.peer << " " << e.event << " round " << e.round);
    CHECK(e.event != gossip::MemberEventKind::kDead);
    CHECK(e.event != gossip::MemberEventKind::kPartition);
  }
  CHECK(r.final_components == std::vector<std::vector<int>>{{0, 2, 3, 4, 5}});
  // The members at the end agree and learned; the rank that never joined was not evaluated.
  const EvalPoint& last = r.evals.back();
  CHECK(last.consensus_distance < 1e-3);
  for (int p : {0, 2, 3, 4, 5}) CHECK(last.peers[p].test_accuracy > 0.8);
  CHECK(std::isnan(last.peers[7].test_accuracy));
  // Its recorded effective rounds are in the events, and two worker threads give the same run.
  int joined = 0;
  for (const SimFault& f : r.faults) joined += f.action == "joined" && f.round == 14;
  CHECK(joined == 1);
  config.sim.workers = 2;
  CHECK(simulate(config, t, data).params_sha256 == r.params_sha256);
}

TEST_CASE("chaos on an elastic graph: seeded random joins and leaves take effect where the "
          "member timeline says, and nobody is buried", "[sim][faults][chaos][elastic]") {
  // 8 members of an exponential graph that may grow to 16; 12 joins and leaves from gossip
  // chaos's generator. The truth is the member timeline the schedule alone gives
  // (run_topology): each change's round, its members, who joined and who left.
  RunConfig config = test::small_synthetic_config(4096, 256, 5);
  config.train.epochs = 4;
  config.train.evals_per_epoch = 1;
  const Topology t = load_topology_from_string(
      "generator: exponential\nn: 8\nelastic: true\nmax_peers: 16\n", "elastic-exp.yaml");
  const DataSets data = load_datasets(config);
  gossip::ChaosOptions chaos;
  chaos.count = 12;
  chaos.seed = 3;
  chaos.rounds = gossip::plan_rounds(config, data.train.n, 16).rounds;
  REQUIRE(chaos.rounds == 128);
  config.faults = gossip::chaos_schedule(t, chaos);
  REQUIRE(config.faults.size() == 12u);
  int joins = 0;
  for (const Fault& f : config.faults) {
    REQUIRE((f.action == gossip::FaultAction::kJoin || f.action == gossip::FaultAction::kLeave));
    joins += f.action == gossip::FaultAction::kJoin;
  }
  CHECK(joins > 2);
  CHECK(joins < 12);
  const Topology planned = gossip::run_topology(config, t);
  const auto& epochs = planned.epochs();
  REQUIRE(epochs.size() == 13u);
  const SimResult r = simulate(config, t, data);
  REQUIRE(r.membership.size() == epochs.size() - 1);
  for (std::size_t k = 1; k < epochs.size(); ++k) {
    INFO("change " << k << " announced at " << epochs[k].announced);
    const gossip::MembershipRecord& got = r.membership[k - 1];
    CHECK(got.from == epochs[k].from);
    CHECK(got.announced == epochs[k].announced);
    CHECK(got.members == epochs[k].members);
    std::vector<int> joined, left;
    std::set_difference(epochs[k].members.begin(), epochs[k].members.end(),
                        epochs[k - 1].members.begin(), epochs[k - 1].members.end(),
                        std::back_inserter(joined));
    std::set_difference(epochs[k - 1].members.begin(), epochs[k - 1].members.end(),
                        epochs[k].members.begin(), epochs[k].members.end(),
                        std::back_inserter(left));
    CHECK(got.joined == joined);
    CHECK(got.left == left);
    CHECK(got.dead.empty());
  }
  std::vector<char> alive(16, 0);
  for (int p : epochs.back().members) alive[p] = 1;
  CHECK(r.alive_at_end == alive);
  CHECK(r.final_components == std::vector<std::vector<int>>{epochs.back().members});
  CHECK(r.final_connected);
  for (const MemberEvent& e : r.member_events) {  // joins and leaves are not deaths
    INFO("peer " << e.peer << " " << e.event << " round " << e.round);
    CHECK(e.event != gossip::MemberEventKind::kDead);
    CHECK(e.event != gossip::MemberEventKind::kPartition);
  }
}

TEST_CASE("joins and leaves are refused where they cannot happen, naming why",
          "[sim][faults][elastic]") {
  const Topology elastic = load_topology_from_string(
      "generator: exponential\nn: 4\nelastic: true\nmax_peers: 6\n", "elastic-exp.yaml");
  auto refused = [&](const Topology& t, std::vector<Fault> faults, AlgorithmKind a =
                                                                        AlgorithmKind::kDpsgd) {
    RunConfig c = fault_config(8, std::move(faults));
    c.gossip.algorithm = a;
    try {
      (void)run_topology(c, t);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  CHECK_THAT(refused(generate("ring", 4), {Fault{5, 0, gossip::FaultAction::kJoin, {4}, {}, 0.0}}),
             Catch::Contains("faults[0].join: peers join and leave only an elastic topology"));
  CHECK_THAT(refused(elastic, {Fault{5, 0, gossip::FaultAction::kLeave, {0, 1, 2, 3}, {}, 0.0}}),
             Catch::Contains("round 5: the last member cannot leave"));
  CHECK_THAT(refused(elastic, {Fault{5, 0, gossip::FaultAction::kJoin, {2}, {}, 0.0}}),
             Catch::Contains("rank 2 cannot join: it is a member then"));
  CHECK_THAT(refused(elastic, {Fault{5, 0, gossip::FaultAction::kJoin, {6}, {}, 0.0}}),
             Catch::Contains("rank 6 cannot join: the topology's elastic ranks are 0..5"));
  CHECK_THAT(refused(elastic, {Fault{5, 0, gossip::FaultAction::kLeave, {5}, {}, 0.0}}),
             Catch::Contains("rank 5 cannot leave: it is not a member then"));
  CHECK_THAT(refused(elastic, {Fault{5, 0, gossip::FaultAction::kJoin, {4}, {}, 0.0}}, AlgorithmKind::kPushSum),
             Catch::Contains("runs of dpsgd or local_sgd") && Catch::Contains("not push_sum"));
  // A dead member leaves the member set: it comes back by joining, not by a restart.
  {
    RunConfig c = fault_config(8, {Fault{5, 0, gossip::FaultAction::kKill, {1}, {}, 0.0},
                                   Fault{9, 0, gossip::FaultAction::kRestart, {1}, {}, 0.0}});
    const DataSets data = load_datasets(c);
    CHECK_THROWS_WITH(simulate(c, elastic, data),
                      Catch::Contains("faults[1].restart: an elastic run takes a dead member out"));
  }
  // A join then a leave of the joiner is fine. Without changes, room to grow (max_peers 6 > 4)
  // still makes a member timeline: the 4 over 6 ranks, so identities may join at run time; with
  // push-sum, or without room, the topology is as loaded.
  CHECK(refused(elastic, {Fault{5, 0, gossip::FaultAction::kJoin, {4}, {}, 0.0}, Fault{20, 0, gossip::FaultAction::kLeave, {4}, {}, 0.0}})
        == "accepted");
  RunConfig none = fault_config(8, {});
  const Topology room = run_topology(none, elastic);
  REQUIRE(room.epochs().size() == 1u);
  CHECK(room.n() == 6);
  CHECK(room.members(0) == std::vector<int>{0, 1, 2, 3});
  none.gossip.algorithm = AlgorithmKind::kPushSum;
  CHECK(run_topology(none, elastic).epochs().empty());
  none.gossip.algorithm = AlgorithmKind::kDpsgd;
  const Topology full = load_topology_from_string(
      "generator: exponential\nn: 4\nelastic: true\n", "elastic-full.yaml");
  CHECK(run_topology(none, full).fingerprint() == full.fingerprint());
  CHECK(run_topology(none, full).epochs().empty());
}

TEST_CASE("an elastic run takes a dead member out of the member set once its death is confirmed, "
          "and derives the graph again without it", "[sim][faults][elastic]") {
  // Ring of 5 (no room to grow): rank 2 is killed at round 10. Its neighbours bury it a round
  // or two later; the ring of 5 has diameter 2, so it leaves the member set 4 rounds after.
  RunConfig config = fault_config(8, {Fault{10, 0, gossip::FaultAction::kKill, {2}, {}, 0.0}});
  config.train.epochs = 4;
  const DataSets data = load_datasets(config);
  const Topology t = load_topology_from_string("generator: ring\nn: 5\nelastic: true\n", "r.yaml");
  const SimResult r = simulate(config, t, data);
  REQUIRE(r.membership.size() == 1);
  const MembershipRecord& m = r.membership[0];
  CHECK(m.dead == std::vector<int>{2});
  CHECK(m.left.empty());
  CHECK(m.members == std::vector<int>{0, 1, 3, 4});
  CHECK(m.announced > 10);
  CHECK(m.announced <= 10 + 3);
  CHECK(m.from == m.announced + 4);
  // The survivors end as one component, in agreement, and nobody saw a partition.
  CHECK(r.final_components == std::vector<std::vector<int>>{{0, 1, 3, 4}});
  CHECK(r.evals.back().consensus_distance < 1e-3);
  for (const MemberEvent& e : r.member_events) CHECK(e.event != gossip::MemberEventKind::kPartition);
}

TEST_CASE("compare sweeps membership schedules: each cell's joins and leaves go into its setting, "
          "and the report lists the members and the spectral gap at each size",
          "[sim][compare][elastic]") {
  const std::string dir = temp_dir("sweep_memberships");
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/ring.yaml") << "generator: ring\nn: 4\nelastic: true\nmax_peers: 6\n";
  const std::string head =
      "data: {synthetic: {train: 384, test: 64, dim: 8, classes: 4}}\n"
      "model: {layers: [8, 16, 4]}\n"
      "optimizer: {lr: 0.05, momentum: 0.9}\n"
      "train: {epochs: 4, batch: 8, evals_per_epoch: 1}\n"
      "compare:\n"
      "  topologies: [ring.yaml]\n";
  const RunConfig base = load_config_from_string(
      head + "  memberships:\n    - none\n    - name: grow\n      changes:\n"
             "        - {round: 2, join: [4, 5]}\n",
      "sweep.yaml", dir);
  const auto settings = compare_settings(base);
  REQUIRE(settings.size() == 2);
  CHECK(settings[0].label == "ring static");
  CHECK(settings[0].config.faults.empty());
  CHECK(settings[1].label == "ring grow");
  REQUIRE(settings[1].config.faults.size() == 1);
  CHECK(settings[1].config.faults[0].action == gossip::FaultAction::kJoin);
  REQUIRE(run_sweep(base, dir + "/out", false) == kExitOk);
  std::ifstream in(dir + "/out/report.md");
  const std::string report((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  INFO(report);
  // A ring of m members (weights 1/3) has gap 1 - (1/3 + 2/3 cos(2 pi / m)): 2/3 at 4, 1/3 at
  // 6; the change announced at 2 is in effect at 2 + 2 (the diameter of 4) + 2.
  CHECK(report.find("| ring static | fixed |") != std::string::npos);
  CHECK(report.find("| ring grow | 4 members (gap 0.667); from round 6 (announced 2) 6 members "
                    "(gap 0.333) |") != std::string::npos);
  // A cell with anything but joins and leaves is refused, naming it.
  CHECK_THROWS_WITH(load_config_from_string(
                        head + "  memberships:\n    - name: x\n      changes:\n"
                               "        - {round: 2, kill: [1]}\n",
                        "sweep.yaml", dir),
                    Catch::Contains("a membership cell holds join and leave entries, not a kill"));
  // And one that cannot happen on the graph, before anything runs.
  const RunConfig bad = load_config_from_string(
      head + "  memberships:\n    - name: x\n      changes:\n        - {round: 2, join: [9]}\n",
      "sweep.yaml", dir);
  CHECK_THROWS_WITH(run_sweep(bad, dir + "/bad", false),
                    Catch::Contains("rank 9 cannot join: the topology's elastic ranks are 0..5"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("a relayed link costs the relay's hop: after the relay's own messages, on its link",
          "[sim][reach]") {
  // Peers 1 and 2 talk through relay 0 (sim.relayed), which sends its own message to 1 first.
  SimConfig s;
  s.latency_ms = 1.0;
  s.bandwidth_mbps = 8.0;  // 1 MB/s
  s.relayed = {{1, 2, 0}};
  const std::int64_t floats = 1000;  // 4040 bytes: w = 4.04 ms on a link
  const double w = 0.00404, L = 0.001;
  SimNetwork net(3, floats, 1, s, 1);
  std::vector<float> buf(floats, 1.0f);
  const int to0[] = {1}, to1[] = {2}, to2[] = {1};
  const std::span<const int> tos[] = {to0, to1, to2};
  for (int p = 0; p < 3; ++p) {
    net.exchange(p).compute(0.0);
    net.exchange(p).publish(0, buf, 1.0, tos[p]);
  }
  // 1 -> 2: at the relay at w + L; the relay's link is free at w (its own message to 1), and the
  // first it forwards leaves then: it arrives w + L after it reached the relay.
  const int from1[] = {1};
  net.exchange(2).collect(0, from1, CollectOptions{});
  CHECK(net.exchange(2).now() == Approx(2 * w + 2 * L));
  // 2 -> 1: second on the relay's link (after 1 -> 2): it leaves at 2w, arrives 3w + L; peer 1
  // also takes the relay's own message (arrived at w + L) first.
  const int from2[] = {0, 2};
  net.exchange(1).collect(0, from2, CollectOptions{});
  CHECK(net.exchange(1).now() == Approx(3 * w + L));
  // The relay's own next round leaves after its link carried both forwarded messages.
  net.exchange(0).compute(0.0);
  net.exchange(0).publish(1, buf, 1.0, to0);
  const int from0[] = {0};
  net.exchange(1).collect(1, from0, CollectOptions{});
  CHECK(net.exchange(1).now() == Approx(3 * w + w + L));
  // Which links the NATs of net.emulate make relayed: 3-4 across two NATs through peer 0, the
  // rest of the ring direct (the same NAT's 1-2, 2-3 included).
  GeneratorSpec ring;
  ring.kind = GeneratorKind::kRing;
  ring.n = 8;
  const auto relayed = simulated_relays(SimConfig{}, parse_link_emulation(
      "rate=100mbit,nat=1+2+3/4+5", ""), make_topology(ring)).relayed;
  REQUIRE(relayed.size() == 1);
  CHECK(relayed.front() == std::array<int, 3>{3, 4, 0});
  const auto walled = simulated_relays(SimConfig{}, parse_link_emulation(
      "rate=100mbit,firewall=6", ""), make_topology(ring)).relayed;
  CHECK(walled.empty());  // one end can always be dialled
}

TEST_CASE("a relay pays the CPU of the bytes it forwards: each message in and out "
          "(sim.byte_cpu_ns)", "[sim][reach]") {
  // Peers 0 and 2 both talk to 1 directly; 0 and 2 talk through relay 1. Every byte costs B of
  // CPU, far more than the links take, so each peer's round ends when its CPU does.
  SimConfig s;
  s.latency_ms = 0.0;
  s.bandwidth_mbps = 8000.0;
  s.byte_cpu_ns = 2000.0;
  s.relayed = {{0, 2, 1}};
  const std::int64_t floats = 1000;
  const double bytes = 4040.0, B = 2e-6;  // a message's bytes on the wire; seconds a byte
  SimNetwork net(3, floats, 1, s, 1);
  std::vector<float> buf(floats, 1.0f);
  const int to0[] = {1, 2}, to1[] = {0, 2}, to2[] = {0, 1};
  const std::span<const int> tos[] = {to0, to1, to2};
  for (int p = 0; p < 3; ++p) {
    net.exchange(p).compute(0.0);
    net.exchange(p).publish(0, buf, 1.0, tos[p]);
  }
  const int from_for0[] = {1, 2}, from_for1[] = {0, 2};
  net.exchange(0).collect(0, from_for0, CollectOptions{});
  net.exchange(1).collect(0, from_for1, CollectOptions{});
  // An end of the relayed link: 2 messages sent, 2 taken.
  CHECK(net.exchange(0).now() == Approx(4 * bytes * B));
  // The relay: its own 2 and 2 taken, and the 2 it forwards (0 -> 2, 2 -> 0) in and out.
  CHECK(net.exchange(1).now() == Approx((4 + 2 * 2) * bytes * B));
}

TEST_CASE("virtual peers on a backend whose tensors are not the host's (as a GPU's) end "
          "bit-identical to the CPU's, on one worker or several (a backend each), with their "
          "steps replayed as graphs or not", "[sim]") {
  RunConfig config = small_config();
  config.sim.workers = 2;
  const DataSets data = load_datasets(config);
  const Topology t = generate("ring", 5);
  for (const std::string variant : {"dpsgd", "choco", "dpsgd overlap"}) {
    SECTION(variant) {
      const std::string algorithm = variant.substr(0, variant.find(' '));
      config.gossip.algorithm = parse_algorithm(algorithm, "test");
      if (algorithm == "choco") {
        config.gossip.choco.compress = parse_compress("quantize:8", "test");
      }
      config.gossip.overlap = variant.ends_with("overlap");
      const SimResult cpu = simulate(config, t, data);
      test::DeviceLikeBackend::uploads = test::DeviceLikeBackend::downloads = 0;
      test::DeviceLikeBackend::overlapping_uses = 0;
      test::DeviceLikeBackend::pinned_allocations = test::DeviceLikeBackend::pinned_live = 0;
      test::DeviceLikeBackend::pinned_uploads = test::DeviceLikeBackend::pinned_downloads = 0;
      test::DeviceLikeBackend::async_uploads = 0;
      int made = 0;
      SimHooks hooks;
      hooks.backend = [&made] {
        ++made;
        return std::make_unique<test::DeviceLikeBackend>();
      };
      config.sim.workers = 0;  // on a device: one worker, one backend
      const SimResult one = simulate(config, t, data, hooks);
      CHECK(one.workers == 1);
      CHECK(made == 1);
      CHECK(one.params_sha256 == cpu.params_sha256);
      // Each step's batch went up, and each D-PSGD round's message came down (CHOCO's goes
      // down compressed, into its packet), through the device's page-locked memory (as a
      // GPU's DMA), and every such buffer went back.
      CHECK(test::DeviceLikeBackend::pinned_allocations >= 2 * 5);
      CHECK(test::DeviceLikeBackend::pinned_live == 0);
      CHECK(test::DeviceLikeBackend::pinned_uploads >= 2 * 5 * one.rounds);  // x and y
      // ... queued without waiting (the device-like backend copies them at its next call, so
      // a batch changed on the host before its step ran would end off the CPU's hashes).
      CHECK(test::DeviceLikeBackend::async_uploads >= 2 * 5 * one.rounds);
      if (algorithm == "dpsgd")  // with overlap: its snapshot before the steps
        CHECK(test::DeviceLikeBackend::pinned_downloads >= 5 * one.rounds);
      // Three workers, each with its backend (its stream, handles and scratch on a GPU): peers
      // 0 and 3 on the first, 1 and 4 on the second, 2 on the third; no backend ever has two
      // threads in it at once, and the run ends as on one worker.
      config.sim.workers = 3;
      made = 0;
      const SimResult device = simulate(config, t, data, hooks);
      CHECK(cpu.workers == 2);
      CHECK(device.workers == 3);
      CHECK(made == 3);
      CHECK(test::DeviceLikeBackend::overlapping_uses == 0);
      CHECK(device.backend == "device-like (the CPU's math)");
      // No more workers (each a backend: a stream, handles, a workspace) than peers.
      config.sim.workers = 8;
      made = 0;
      const SimResult eight = simulate(config, t, data, hooks);
      CHECK(eight.workers == 5);
      CHECK(made == 5);
      CHECK(eight.params_sha256 == cpu.params_sha256);
      config.sim.workers = 3;
      // Batches went up and models came down, as they do to and from a GPU.
      CHECK(test::DeviceLikeBackend::uploads > cpu.rounds);
      CHECK(test::DeviceLikeBackend::downloads > cpu.rounds);
      REQUIRE(device.params_sha256.size() == 5);
      CHECK(device.params_sha256 == cpu.params_sha256);
      CHECK(device.evals.back().average_accuracy == cpu.evals.back().average_accuracy);
      CHECK(cpu.evals.back().average_accuracy > 0.9);
      // train.graphs: step: each virtual peer captures its step once and replays it after.
      config.train.graphs = GraphMode::kStep;
      test::DeviceLikeBackend::captures = test::DeviceLikeBackend::replays = 0;
      const SimResult graphs = simulate(config, t, data, hooks);
      CHECK(test::DeviceLikeBackend::captures == 5);
      CHECK(graphs.graphs == "step");
      CHECK(cpu.graphs == "off");
      CHECK(test::DeviceLikeBackend::replays > 5 * (cpu.rounds - 2));
      CHECK(graphs.params_sha256 == cpu.params_sha256);
    }
  }
}

TEST_CASE("D-PSGD with gossip.overlap on a device copies its message on a side stream while the "
          "first step's kernels run, from a snapshot that step's BatchNorm cannot touch",
          "[sim]") {
  // The device-like backend's side stream runs late: download_async reads its source only at
  // wait_downloads(). A message read from the parameters themselves would carry the running
  // statistics the first step's forward pass wrote; one published before the wait would carry
  // the last round's bytes. Either ends off the CPU's hashes.
  RunConfig config = small_config();
  config.data.synthetic_dim = 16;
  config.model = test::tiny_residual_model();
  config.gossip.overlap = true;
  config.sim.workers = 0;
  const DataSets data = load_datasets(config);
  const Topology t = generate("ring", 4);
  const SimResult cpu = simulate(config, t, data);
  REQUIRE(cpu.rounds > 10);
  SimHooks hooks;
  hooks.backend = [] { return std::make_unique<test::DeviceLikeBackend>(); };
  for (const GraphMode graphs : {GraphMode::kOff, GraphMode::kStep}) {
    config.train.graphs = graphs;
    test::DeviceLikeBackend::async_downloads = test::DeviceLikeBackend::overlapped_downloads = 0;
    test::DeviceLikeBackend::pinned_downloads = 0;
    const SimResult device = simulate(config, t, data, hooks);
    CHECK(device.graphs == (graphs == GraphMode::kStep ? "step" : "off"));
    CHECK(device.params_sha256 == cpu.params_sha256);
    CHECK(device.evals.back().average_accuracy == cpu.evals.back().average_accuracy);
    // One copy a peer a round, each into page-locked memory, each with the first step's
    // forward and backward queued (or its graph replayed) before it was waited for.
    CHECK(test::DeviceLikeBackend::async_downloads == 4 * device.rounds);
    CHECK(test::DeviceLikeBackend::overlapped_downloads == 4 * device.rounds);
    CHECK(test::DeviceLikeBackend::pinned_downloads >= 4 * device.rounds);
  }
}

TEST_CASE("train.backend: cuda runs the virtual peers on the GPU, refused where there is none "
          "and in the pure-averaging mode", "[sim]") {
  RunConfig config = small_config();
  config.train.backend = BackendChoice::kCuda;
  const DataSets data = load_datasets(config);
  const Topology t = generate("ring", 3);
  if (cuda_device_count() == 0)  // this machine: no device, so nothing starts
    CHECK_THROWS_WITH(simulate(config, t, data), Catch::Contains("cuda was asked for"));
  config.sim.consensus_rounds = 5;
  CHECK_THROWS_WITH(simulate_consensus(config, t),
                    Catch::Contains("train.backend: cuda, but the pure-averaging mode "
                                    "(sim.consensus_rounds) runs on the CPU"));
}

