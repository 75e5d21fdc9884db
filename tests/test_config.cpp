// Tests for the run-config loader: values land in the structs, paths resolve against the config's
// folder, and every problem names the file, the line and the field, including the ones found
// only with the topology (check_algorithm).
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "gossip/config.hpp"
#include "gossip/core.hpp"
#include "gossip/gossip.hpp"
#include "gossip/topology.hpp"
#include "tests/helpers.hpp"

using namespace gossip;
namespace fs = std::filesystem;

TEST_CASE("a config sets the fields it names and keeps defaults elsewhere", "[config]") {
  const auto c = load_config_from_string(
      "model:\n  layers: [784, 64, 10]\noptimizer:\n  lr: 0.05\n  momentum: 0.9\n"
      "  schedule: cosine\ntrain:\n  epochs: 2\n  batch: 64\ngossip:\n"
      "  topology: ../topologies/ring-8.yaml\n  period: 4\n",
      "c.yaml", "/x/configs");
  CHECK(c.model.input == Shape{784});
  REQUIRE(c.model.layers.size() == 3);  // the MLP shorthand: linear 64, relu, linear 10
  CHECK(c.model.layers[0].type == gossip::LayerKind::kLinear);
  CHECK(c.model.layers[0].out == 64);
  CHECK(c.model.layers[1].type == gossip::LayerKind::kRelu);
  CHECK(c.model.layers[2].out == 10);
  CHECK(c.optimizer.lr == 0.05);
  CHECK(c.optimizer.schedule == gossip::LrSchedule::kCosine);
  CHECK(c.train.batch == 64);
  CHECK(c.train.seed == 1);
  CHECK(c.gossip.topology == "/x/topologies/ring-8.yaml");
  CHECK(c.gossip.period == 4);
  CHECK(c.net.shared_memory);  // on unless a config turns it off
  CHECK_FALSE(load_config_from_string("net:\n  shared_memory: false\n", "c.yaml").net.shared_memory);
  CHECK(c.net.congestion.empty());  // the system's unless a config names one
  CHECK(load_config_from_string("net:\n  congestion: cubic\n", "c.yaml").net.congestion == "cubic");
  CHECK(load_config_from_string("net:\n  congestion: system\n", "c.yaml").net.congestion.empty());
}

TEST_CASE("config errors name file, line and field", "[config]") {
  SECTION("unknown key") {
    CHECK_THROWS_WITH(load_config_from_string("train:\n  epochs: 2\n  bach: 3\n", "c.yaml"),
                      Catch::Contains("c.yaml:3: train.bach: unknown key"));
  }
  SECTION("negative learning rate") {
    CHECK_THROWS_WITH(load_config_from_string("optimizer:\n  lr: -1\n", "c.yaml"),
                      Catch::Contains("c.yaml:2: optimizer.lr: must be > 0"));
  }
  SECTION("wrong type") {
    CHECK_THROWS_WITH(load_config_from_string("train:\n  batch: many\n", "c.yaml"),
                      Catch::Contains("c.yaml:2: train.batch: cannot read 'many'"));
  }
  SECTION("not a boolean") {
    CHECK_THROWS_WITH(load_config_from_string("net:\n  shared_memory: maybe\n", "c.yaml"),
                      Catch::Contains("c.yaml:2: net.shared_memory: cannot read 'maybe'"));
  }
  SECTION("not a congestion control's name") {
    for (const char* name : {"'TCP Cubic'", "''", "averyveryverylongname"})
      CHECK_THROWS_WITH(
          load_config_from_string(gossip::cat("net:\n  congestion: ", name, "\n"), "c.yaml"),
          Catch::Contains("c.yaml:2: net.congestion: '") &&
              Catch::Contains("' is not the name of a TCP congestion control"));
  }
  SECTION("unknown choice") {
    CHECK_THROWS_WITH(load_config_from_string("train:\n  backend: tpu\n", "c.yaml"),
                      Catch::Contains("expected one of: auto, cpu, cuda"));
  }
  SECTION("unknown data balance") {
    CHECK_THROWS_WITH(load_config_from_string("data:\n  balance: fair\n", "c.yaml"),
                      Catch::Contains("c.yaml:2: data.balance"));
    CHECK(load_config_from_string("data:\n  balance: weighted\n", "c.yaml").data.balance ==
          gossip::Balance::kWeighted);
  }
  SECTION("broken YAML") {
    CHECK_THROWS_AS(load_config_from_string("train: [1, 2\n", "c.yaml"), InputError);
  }
  SECTION("output layer disagrees with the classes") {
    CHECK_THROWS_WITH(load_config_from_string("model:\n  layers: [784, 7]\n", "c.yaml"),
                      Catch::Contains("c.yaml:2: model.layers[0]: layer 0 (linear) output [7] "
                                      "(output size 7) does not match the data's classes [10]"));
  }
  SECTION("missing file") {
    CHECK_THROWS_WITH(load_config("/nonexistent/c.yaml"), Catch::Contains("no such config file"));
  }
}

TEST_CASE("NaN and infinity are refused wherever a finite number is meant", "[config]") {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"monitor: {round_timeout_s: .nan}\n", "c.yaml:1: monitor.round_timeout_s:"},
      {"net:\n  connect_timeout_s: .inf\n", "c.yaml:2: net.connect_timeout_s:"},
      {"train: {epochs: .inf}\n", "c.yaml:1: train.epochs:"},
      {"optimizer:\n  momentum: 0.5\n  lr: .nan\n", "c.yaml:3: optimizer.lr:"},
      {"optimizer: {weight_decay: -.inf}\n", "c.yaml:1: optimizer.weight_decay:"},
      {"sim: {latency_ms: .NaN}\n", "c.yaml:1: sim.latency_ms:"},
  };
  for (const auto& [text, where] : cases) {
    INFO(text);
    CHECK_THROWS_WITH(load_config_from_string(text, "c.yaml"),
                      Catch::StartsWith(where) && Catch::Contains("expected a finite number"));
  }
}

TEST_CASE("a key given twice is refused at any level, naming both lines", "[config]") {
  SECTION("top level") {
    CHECK_THROWS_WITH(
        load_config_from_string("train:\n  epochs: 2\noptimizer: {lr: 0.1}\ntrain:\n  batch: 8\n",
                                "c.yaml"),
        Catch::StartsWith("c.yaml:4: train: duplicate key 'train' (first at line 1)"));
  }
  SECTION("in a section") {
    CHECK_THROWS_WITH(load_config_from_string("train:\n  epochs: 2\n  epochs: 3\n", "c.yaml"),
                      Catch::StartsWith("c.yaml:3: train.epochs: duplicate key 'epochs' "
                                        "(first at line 2)"));
  }
  SECTION("two levels down, in flow style") {
    CHECK_THROWS_WITH(
        load_config_from_string("data:\n  synthetic: {dim: 4, train: 64, dim: 8}\n", "c.yaml"),
        Catch::StartsWith("c.yaml:2: data.synthetic.dim: duplicate key 'dim'"));
  }
}

TEST_CASE("net.run_id is refused at load when longer than the handshake carries", "[config]") {
  const std::string fits(NetworkConfig::kMaxRunIdBytes, 'r');
  CHECK(load_config_from_string("net:\n  run_id: " + fits + "\n", "c.yaml").net.run_id == fits);
  CHECK_THROWS_WITH(load_config_from_string("net:\n  run_id: " + fits + "x\n", "c.yaml"),
                    Catch::StartsWith("c.yaml:2: net.run_id: at most 256 bytes"));
}

TEST_CASE("emulated links are read in tc's units, from --netem and net.emulate alike", "[config]") {
  const LinkEmulation e = parse_link_emulation("rate=1gbit,delay=5ms,jitter=500us,loss=0.1%", "--netem");
  CHECK(e.rate_bits_per_s == 1e9);
  CHECK(e.delay_ms == 5.0);
  CHECK(e.jitter_ms == 0.5);
  CHECK(e.loss_percent == 0.1);
  CHECK(e.needs_netem());
  const LinkEmulation rate = parse_link_emulation("rate=100mbit", "--netem");
  CHECK(rate.rate_bits_per_s == 1e8);
  CHECK(rate.enabled());
  CHECK_FALSE(rate.needs_netem());
  CHECK(parse_link_emulation("rate=12.5kbit,delay=1s", "x").rate_bits_per_s == 12500.0);
  CHECK(parse_link_emulation("rate=12.5kbit,delay=1s", "x").delay_ms == 1000.0);
  CHECK_FALSE(RunConfig{}.net.emulate.enabled());

  const auto refused = [](const std::string& text, const std::string& why) {
    CHECK_THROWS_WITH(parse_link_emulation(text, "--netem"),
                      Catch::StartsWith("--netem: '" + text + "': " + why));
  };
  refused("rate=fast", "rate: 'fast' is not a non-negative number with a unit");
  refused("rate=100mbps", "rate: unit 'mbps' (use bit, kbit, mbit or gbit)");
  refused("rate=100", "rate: unit '' (use bit, kbit, mbit or gbit)");
  refused("rate=1bit", "rate: must be between 8kbit and 100gbit");
  refused("delay=5ms", "no rate=");
  refused("rate=1gbit,rate=2gbit", "rate is given twice");
  refused("rate=1gbit,delay=5", "delay: unit '' (use us, ms or s)");
  refused("rate=1gbit,loss=0.1", "loss: '0.1' needs a % sign");
  refused("rate=1gbit,loss=101%", "loss: at most 100%");
  refused("rate=1gbit,jitter=1ms", "jitter without delay");
  refused("rate=1gbit,", "ends with ','");
  refused("rate=1gbit,burst=3", "unknown key 'burst'");
  refused("1gbit", "'1gbit' is not KEY=VALUE");
  refused("", "'' is not KEY=VALUE");
  // Pairs of ranks that cannot reach each other, in any order, each pair once as (low, high).
  const LinkEmulation walls = parse_link_emulation("rate=1gbit,unreachable=1-0+7-0+4-5", "x");
  CHECK(walls.unreachable == std::vector<std::pair<int, int>>{{0, 1}, {0, 7}, {4, 5}});
  CHECK(parse_link_emulation("unreachable=5-6,rate=1gbit", "x").unreachable.size() == 1u);
  refused("rate=1gbit,unreachable=0", "unreachable: '0' is not a pair of two ranks A-B");
  refused("rate=1gbit,unreachable=3-3", "unreachable: '3-3' is not a pair of two ranks A-B");
  refused("rate=1gbit,unreachable=0-1+", "unreachable: '' is not a pair of two ranks A-B");
  refused("rate=1gbit,unreachable=-1-2", "unreachable: '-1-2' is not a pair of two ranks A-B");
  refused("rate=1gbit,unreachable=0-1,unreachable=2-3", "unreachable is given twice");
  refused("unreachable=0-1", "no rate=");

  CHECK(load_config_from_string("net:\n  emulate: rate=100mbit\n", "c.yaml").net.emulate
            .rate_bits_per_s == 1e8);
  CHECK_THROWS_WITH(load_config_from_string("net:\n  emulate: rate=100mb\n", "c.yaml"),
                    Catch::StartsWith("c.yaml:2: net.emulate: 'rate=100mb': rate: unit 'mb'"));
}

TEST_CASE("the simulator models emulated links, and net.emulate wins over sim's figures",
          "[config]") {
  SimConfig s;
  simulate_links(s, parse_link_emulation("rate=250mbit,delay=5ms", "--netem"));
  CHECK(s.bandwidth_mbps == 250.0);
  CHECK(s.latency_ms == 10.0);  // delayed on the sender's end and on the receiver's
  simulate_links(s, parse_link_emulation("rate=1gbit", "--netem"));
  CHECK(s.bandwidth_mbps == 1000.0);
  CHECK(s.latency_ms == 0.0);
  simulate_links(s, LinkEmulation{});  // no emulation: sim's own figures stay
  CHECK(s.bandwidth_mbps == 1000.0);

  const std::string sim = "sim:\n  bandwidth_mbps: 10\n  latency_ms: 3\n";
  const std::string net = "net:\n  emulate: rate=100mbit,delay=2ms\n";
  for (const std::string& text : {sim + net, net + sim}) {
    const RunConfig c = load_config_from_string(text, "c.yaml");
    CHECK(c.sim.bandwidth_mbps == 100.0);
    CHECK(c.sim.latency_ms == 4.0);
  }
  const RunConfig alone = load_config_from_string(sim, "c.yaml");
  CHECK(alone.sim.bandwidth_mbps == 10.0);
  CHECK(alone.sim.latency_ms == 3.0);
}

TEST_CASE("the simulator's CPU model is read from sim and checked", "[config][cpu]") {
  const SimConfig off = load_config_from_string("sim:\n  workers: 1\n", "c.yaml").sim;
  CHECK(off.cores == 0);
  CHECK(off.byte_cpu_ns == 0.0);
  CHECK_FALSE(off.exchange_cpu);
  const SimConfig on = load_config_from_string(
      "sim:\n  cores: 2\n  byte_cpu_ns: 1.25\n  message_cpu_us: 60\n  exchange_cpu: true\n",
      "c.yaml").sim;
  CHECK(on.cores == 2);
  CHECK(on.message_cpu_us == 60.0);
  CHECK(off.message_cpu_us == 0.0);
  CHECK(on.byte_cpu_ns == 1.25);
  CHECK(on.exchange_cpu);
  CHECK_THROWS_WITH(load_config_from_string("sim:\n  cores: -1\n", "c.yaml"),
                    Catch::Contains("c.yaml:2: sim.cores"));
  CHECK_THROWS_WITH(load_config_from_string("sim:\n  byte_cpu_ns: -0.5\n", "c.yaml"),
                    Catch::Contains("c.yaml:2: sim.byte_cpu_ns"));
  CHECK_THROWS_WITH(load_config_from_string("sim:\n  message_cpu_us: -1\n", "c.yaml"),
                    Catch::Contains("c.yaml:2: sim.message_cpu_us"));
  CHECK_THROWS_WITH(load_config_from_string("sim:\n  exchange_cpu: sometimes\n", "c.yaml"),
                    Catch::Contains("c.yaml:2: sim.exchange_cpu: cannot read 'sometimes'"));
}

TEST_CASE("a directory given as the config says it is one", "[config]") {
  const std::string dir = fs::temp_directory_path().string();
  CHECK_THROWS_WITH(load_config(dir), Catch::Equals(dir + ": is a directory, not a YAML file"));
}

TEST_CASE("a config remembers the line of each field it set", "[config]") {
  const auto c = load_config_from_string(
      "train:\n  epochs: 2\ngossip:\n  period: 2\n  algorithm: push_sum\n", "c.yaml");
  CHECK(c.lines.at("gossip.algorithm") == 5);
  CHECK(c.where("gossip.algorithm") == "c.yaml:5: gossip.algorithm");
  CHECK(c.where("gossip.topology") == "c.yaml: gossip.topology");
  CHECK(RunConfig{}.where("gossip.period") == "gossip.period");
}

TEST_CASE("weights that do not suit gossip.algorithm are refused with its line", "[config]") {
  SECTION("push_sum on an undirected star with uniform weights (not column-stochastic)") {
    const auto c = load_config_from_string("gossip:\n  algorithm: push_sum\n", "c.yaml");
    const Topology star =
        load_topology_from_string("generator: star\nn: 8\nweights: uniform\n", "star.yaml");
    CHECK_THROWS_WITH(check_algorithm(c, star),
                      Catch::StartsWith("c.yaml:2: gossip.algorithm: push_sum needs "
                                        "column-stochastic weights"));
    CHECK_NOTHROW(check_algorithm(
        c, load_topology_from_string("generator: star\nn: 8\nweights: push-sum\n", "s.yaml")));
  }
  SECTION("D-PSGD on a directed graph whose rows do not sum to 1") {
    const auto c = load_config_from_string("train: {epochs: 1}\ngossip: {algorithm: dpsgd}\n",
                                           "c.yaml");
    const Topology directed = load_topology_from_string(
        "n: 4\ndirected: true\nedges: [[0, 1], [0, 2], [0, 3], [1, 2], [2, 3], [3, 0]]\n",
        "dir.yaml");
    CHECK_THROWS_WITH(check_algorithm(c, directed),
                      Catch::StartsWith("c.yaml:2: gossip.algorithm: dpsgd needs row-stochastic"));
  }
}

TEST_CASE("gossip.choco.compress.kind is read once into its enum, and each kind's name reads back",
          "[config][compress]") {
  const std::pair<CompressKind, const char*> kinds[] = {{CompressKind::kNone, "none"},
                                                        {CompressKind::kTopK, "top_k"},
                                                        {CompressKind::kRandomK, "random_k"},
                                                        {CompressKind::kQuantize, "quantize"}};
  for (const auto& [kind, name] : kinds) {
    INFO(name);
    CHECK(std::string(compress_kind_name(kind)) == name);
    const auto c = load_config_from_string(
        cat("gossip:\n  algorithm: choco\n  choco: {compress: {kind: ", name, "}}\n"), "c.yaml");
    CHECK(c.gossip.choco.compress.kind == kind);
    CHECK(c.gossip.choco.compress.sparse() ==
          (kind == CompressKind::kTopK || kind == CompressKind::kRandomK));
    // "top_k 0.01", "quantize 8 bits"
    CHECK(describe(c.gossip.choco.compress).rfind(name, 0) == 0);
  }
}

TEST_CASE("gossip.choco's compress, consensus_step, gossip_steps and gossip.overlap are read and "
          "checked with file and line",
          "[config][compress]") {
  const auto c = load_config_from_string(
      "gossip:\n  algorithm: choco\n  choco:\n    compress: {kind: top_k, fraction: 0.01}\n"
      "    consensus_step: 0.2\n",
      "c.yaml");
  CHECK(c.gossip.choco.compress.kind == CompressKind::kTopK);
  CHECK(c.gossip.choco.compress.fraction == 0.01);
  CHECK(consensus_step(c.gossip.choco) == 0.2);
  CHECK(c.gossip.choco.gossip_steps == 1);
  CHECK(load_config_from_string("gossip: {algorithm: choco, choco: {gossip_steps: 5}}\n", "c.yaml")
            .gossip.choco.gossip_steps == 5);
  // The default gamma halves when several compressed exchanges make a round (top_k 1% diverged
  // at 0.1 with 3 or 5 of them); without compression it stays 1 (CHOCO is then D-PSGD).
  GossipConfig steps = c.gossip;
  steps.choco.consensus_step = 0.0;
  CHECK(consensus_step(steps.choco) == Approx(0.1));
  steps.choco.gossip_steps = 5;
  CHECK(consensus_step(steps.choco) == Approx(0.05));
  steps.choco.consensus_step = 0.07;  // a step given is taken as given
  CHECK(consensus_step(steps.choco) == 0.07);
  steps.choco.consensus_step = 0.0;
  steps.choco.compress.kind = CompressKind::kNone;
  CHECK(consensus_step(steps.choco) == 1.0);
  const auto q = load_config_from_string(
      "gossip:\n  choco:\n    compress:\n      kind: quantize\n      bits: 4\n  algorithm: choco\n",
      "c.yaml");
  CHECK(q.gossip.choco.compress.bits == 4);
  CHECK(consensus_step(q.gossip.choco) == default_consensus_step(q.gossip.choco.compress));
  // Quantization keeps its step with several exchanges a round; random_k halves it as top_k.
  ChocoConfig quantized = q.gossip.choco;
  quantized.gossip_steps = 3;
  CHECK(consensus_step(quantized) == Approx(0.5));
  ChocoConfig random = quantized;
  random.compress.kind = CompressKind::kRandomK;
  random.compress.fraction = 0.1;
  CHECK(consensus_step(random) == Approx(0.1));  // half of min(1, 2 * 0.1)
  CHECK(load_config_from_string("gossip: {algorithm: dpsgd, overlap: true}\n", "c.yaml")
            .gossip.overlap);
  auto fails = [](const std::string& text, const std::string& want) {
    INFO(text);
    CHECK_THROWS_WITH(load_config_from_string(text, "c.yaml"), Catch::Contains(want));
  };
  SECTION("a fraction outside (0, 1]") {
    fails("gossip:\n  algorithm: choco\n  choco: {compress: {kind: top_k, fraction: 1.5}}\n",
          "c.yaml:3: gossip.choco.compress.fraction: must be in (0, 1], got 1.5");
    fails("gossip:\n  algorithm: choco\n  choco:\n    compress:\n      kind: random_k\n"
          "      fraction: 0\n",
          "c.yaml:6: gossip.choco.compress.fraction: must be > 0");
  }
  SECTION("gossip_steps outside 1..64") {
    fails("gossip:\n  algorithm: choco\n  choco: {gossip_steps: 0}\n",
          "c.yaml:3: gossip.choco.gossip_steps: must be");
    fails("gossip:\n  algorithm: choco\n  choco: {gossip_steps: 65}\n",
          "c.yaml:3: gossip.choco.gossip_steps: must be at most 64, got 65");
    fails("gossip:\n  algorithm: choco\n  choco: {gossip_steps: 2.5}\n",
          "c.yaml:3: gossip.choco.gossip_steps");
  }
  SECTION("bits other than 4 or 8") {
    fails("gossip:\n  algorithm: choco\n  choco:\n    compress:\n      kind: quantize\n"
          "      bits: 2\n",
          "c.yaml:6: gossip.choco.compress.bits: must be 4 or 8, got 2");
  }
  SECTION("an unknown kind, or a field the kind does not take") {
    fails("gossip:\n  algorithm: choco\n  choco: {compress: {kind: sketch}}\n",
          "c.yaml:3: gossip.choco.compress.kind: unknown value 'sketch'");
    fails("gossip:\n  algorithm: choco\n  choco:\n    compress:\n      kind: top_k\n"
          "      bits: 8\n",
          "c.yaml:6: gossip.choco.compress.bits: is for quantize, not top_k");
    fails("gossip:\n  algorithm: choco\n  choco: {compress: {fraction: 0.1}}\n",
          "c.yaml:3: gossip.choco.compress: a compressor needs its kind");
    fails("gossip:\n  algorithm: choco\n  choco: {compress: top_k}\n",
          "c.yaml:3: gossip.choco.compress: expected {kind: none}, {kind: top_k, fraction: F}, "
          "{kind: random_k, fraction: F}, {kind: quantize, bits: 8} or {kind: dct_top_k, fraction: F}, got");
    fails("gossip:\n  algorithm: choco\n  choco: {gamma: 0.1}\n",
          "c.yaml:3: gossip.choco.gamma: unknown key 'gamma' (expected one of: compress, "
          "consensus_step, gossip_steps)");
  }
  SECTION("compression with an algorithm that does not take it") {
    fails("gossip:\n  algorithm: dpsgd\n  choco: {compress: {kind: top_k, fraction: 0.01}}\n",
          "c.yaml:3: gossip.choco.compress: compression is for gossip.algorithm: choco; dpsgd");
    fails("gossip:\n  choco: {compress: {kind: quantize, bits: 8}}\n  algorithm: allreduce\n",
          "c.yaml:2: gossip.choco.compress: compression is for gossip.algorithm: choco; "
          "allreduce");
    fails("gossip:\n  choco: {consensus_step: 0.5}\n",
          "c.yaml:2: gossip.choco.consensus_step: the consensus step is choco's; dpsgd");
    fails("gossip:\n  algorithm: dpsgd\n  choco: {gossip_steps: 2}\n",
          "c.yaml:3: gossip.choco.gossip_steps: several compressed exchanges a round are "
          "choco's; dpsgd");
    fails("gossip:\n  algorithm: push_sum\n  overlap: true\n",
          "c.yaml:3: gossip.overlap: overlap is for dpsgd and local_sgd, not push_sum");
    fails("gossip: {algorithm: choco}\nsim:\n  message_loss: 0.1\n",
          "c.yaml:3: sim.message_loss: choco needs every message");
  }
}

TEST_CASE("a key in its old place is refused with its new place named", "[config][sections]") {
  // gossip: held choco's keys and the monitor's timing before they moved to the sections of
  // their rooms; an old config fails at its first such key, with exit 2 (InputError).
  const std::pair<const char*, const char*> moved[] = {
      {"compress: {kind: top_k, fraction: 0.01}", "gossip.choco.compress"},
      {"consensus_step: 0.5", "gossip.choco.consensus_step"},
      {"gossip_steps: 3", "gossip.choco.gossip_steps"},
      {"round_timeout_s: 5", "monitor.round_timeout_s"},
      {"round_timeout_floor_s: 1", "monitor.round_timeout_floor_s"},
      {"suspect_after_s: 2", "monitor.suspect_after_s"},
      {"dead_after_rounds: 2", "monitor.dead_after_rounds"},
      {"dead_after_s: 0", "monitor.dead_after_s"},
      {"on_partition: stop", "monitor.on_partition"},
  };
  const std::vector<std::string> keys = config_keys();
  for (const auto& [entry, to] : moved) {
    INFO(entry);
    const std::string key = std::string(entry).substr(0, std::string(entry).find(':'));
    CHECK_THROWS_AS(
        load_config_from_string(cat("gossip:\n  algorithm: choco\n  ", entry, "\n"), "c.yaml"),
        InputError);
    CHECK_THROWS_WITH(
        load_config_from_string(cat("gossip:\n  algorithm: choco\n  ", entry, "\n"), "c.yaml"),
        Catch::StartsWith(cat("c.yaml:3: gossip.", key, ": moved to ", to)));
    CHECK(std::find(keys.begin(), keys.end(), to) != keys.end());  // the new place is read
  }
  // sim.peer_eval_limit governs real peers too now, from train:.
  CHECK_THROWS_WITH(load_config_from_string("sim:\n  peer_eval_limit: 10\n", "c.yaml"),
                    Catch::StartsWith("c.yaml:2: sim.peer_eval_limit: moved to "
                                      "train.peer_eval_limit"));
  CHECK(std::find(keys.begin(), keys.end(), "train.peer_eval_limit") != keys.end());
  // Through the command line as from a file: exit 2, the file, the line and the new place.
  const fs::path dir = fs::temp_directory_path() / cat("gossip-moved-", ::getpid());
  fs::create_directories(dir);
  std::ofstream(dir / "old.yaml") << "train: {epochs: 1}\ngossip: {suspect_after_s: 2}\n";
  const test::Run r = test::run_gossip("sim " + (dir / "old.yaml").string() + " --out " +
                                       (dir / "out").string());
  fs::remove_all(dir);
  INFO(r.output);
  CHECK(r.code == 2);
  CHECK(r.output.find("old.yaml:2: gossip.suspect_after_s: moved to monitor.suspect_after_s") !=
        std::string::npos);
}

TEST_CASE("monitor.preset sets the membership timing, and each key beside it overrides it",
          "[config][sections]") {
  // lan is the defaults: a config that names no preset keeps the timing it always had.
  const MonitorConfig defaults;
  const MonitorConfig lan = monitor_preset(MonitorPreset::kLan);
  CHECK(lan.round_timeout_s == defaults.round_timeout_s);
  CHECK(lan.round_timeout_floor_s == defaults.round_timeout_floor_s);
  CHECK(lan.suspect_after_s == defaults.suspect_after_s);
  CHECK(lan.dead_after_rounds == defaults.dead_after_rounds);
  CHECK(lan.dead_after_s == defaults.dead_after_s);
  CHECK(defaults.round_timeout_s == 30.0);
  CHECK(defaults.round_timeout_floor_s == 2.0);
  CHECK(defaults.suspect_after_s == 1.0);
  CHECK(defaults.dead_after_rounds == 3);
  CHECK(defaults.dead_after_s == 1.0);
  CHECK(defaults.on_partition == PartitionPolicy::kContinue);
  CHECK(round_timeout(defaults) == std::chrono::milliseconds(30000));
  // local waits less than lan, and wan more, key by key (none looser, none tighter).
  const MonitorConfig local = monitor_preset(MonitorPreset::kLocal);
  const MonitorConfig wan = monitor_preset(MonitorPreset::kWan);
  CHECK(local.round_timeout_s < lan.round_timeout_s);
  CHECK(lan.round_timeout_s < wan.round_timeout_s);
  CHECK(local.round_timeout_floor_s < lan.round_timeout_floor_s);
  CHECK(lan.round_timeout_floor_s < wan.round_timeout_floor_s);
  CHECK(local.suspect_after_s <= lan.suspect_after_s);
  CHECK(lan.suspect_after_s < wan.suspect_after_s);
  CHECK(local.dead_after_rounds < lan.dead_after_rounds);
  CHECK(lan.dead_after_rounds < wan.dead_after_rounds);
  CHECK(local.dead_after_s < lan.dead_after_s);
  CHECK(lan.dead_after_s < wan.dead_after_s);
  for (const MonitorPreset p : {MonitorPreset::kLocal, MonitorPreset::kLan, MonitorPreset::kWan}) {
    const std::string name = monitor_preset_name(p);
    INFO(name);
    const MonitorConfig m =
        load_config_from_string(cat("monitor: {preset: ", name, "}\n"), "c.yaml").monitor;
    CHECK(m.preset == p);
    CHECK(m.round_timeout_s == monitor_preset(p).round_timeout_s);
    CHECK(m.round_timeout_floor_s == monitor_preset(p).round_timeout_floor_s);
    CHECK(m.suspect_after_s == monitor_preset(p).suspect_after_s);
    CHECK(m.dead_after_rounds == monitor_preset(p).dead_after_rounds);
    CHECK(m.dead_after_s == monitor_preset(p).dead_after_s);
    CHECK(m.on_partition == PartitionPolicy::kContinue);
  }
  // A key beside the preset wins, before or after it in the map.
  for (const char* text :
       {"monitor:\n  preset: wan\n  suspect_after_s: 2\n  on_partition: stop\n",
        "monitor:\n  suspect_after_s: 2\n  on_partition: stop\n  preset: wan\n"}) {
    INFO(text);
    const MonitorConfig m = load_config_from_string(text, "c.yaml").monitor;
    CHECK(m.preset == MonitorPreset::kWan);
    CHECK(m.suspect_after_s == 2.0);
    CHECK(m.on_partition == PartitionPolicy::kStop);
    CHECK(m.round_timeout_s == wan.round_timeout_s);
    CHECK(m.dead_after_rounds == wan.dead_after_rounds);
  }
  const MonitorConfig set =
      load_config_from_string("monitor: {dead_after_rounds: 1, dead_after_s: 0}\n", "c.yaml")
          .monitor;
  CHECK(set.preset == MonitorPreset::kLan);
  CHECK(set.dead_after_rounds == 1);
  CHECK(set.dead_after_s == 0.0);
  CHECK(set.round_timeout_s == lan.round_timeout_s);
  CHECK(set.remove_dead_after_rounds == 0);  // the default: a lead after the confirmation
  CHECK(load_config_from_string("monitor: {preset: wan, remove_dead_after_rounds: 150}\n", "c.yaml")
            .monitor.remove_dead_after_rounds == 150);
  CHECK_THROWS_WITH(load_config_from_string("monitor:\n  remove_dead_after_rounds: -1\n", "c.yaml"),
                    Catch::StartsWith("c.yaml:2: monitor.remove_dead_after_rounds: must be >= 0"));
  CHECK_THROWS_WITH(load_config_from_string("monitor:\n  preset: dsl\n", "c.yaml"),
                    Catch::StartsWith("c.yaml:2: monitor.preset: unknown value 'dsl' (expected "
                                      "one of: local, lan, wan)"));
  CHECK_THROWS_WITH(load_config_from_string("monitor:\n  on_partition: halt\n", "c.yaml"),
                    Catch::StartsWith("c.yaml:2: monitor.on_partition: unknown value 'halt'"));
  CHECK_THROWS_WITH(load_config_from_string("monitor:\n  suspect_after_s: 0\n", "c.yaml"),
                    Catch::StartsWith("c.yaml:2: monitor.suspect_after_s: must be > 0"));
}

namespace {

/// docs/config.md of the source tree ($GOSSIP_SOURCE_DIR, which meson test sets).
std::string docs_config_md() {
  const char* root = std::getenv("GOSSIP_SOURCE_DIR");
  REQUIRE(root != nullptr);
  std::ifstream in(fs::path(root) / "docs" / "config.md");
  REQUIRE(in);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

/// The `code spans` of a stretch of Markdown.
std::vector<std::string> code_spans(const std::string& text) {
  std::vector<std::string> out;
  for (std::size_t at = text.find('`'); at != std::string::npos;) {
    const std::size_t end = text.find('`', at + 1);
    if (end == std::string::npos) break;
    out.push_back(text.substr(at + 1, end - at - 1));
    at = text.find('`', end + 1);
  }
  return out;
}

/// Whether `word` stands alone in `text` (not inside a longer name: `on` is not in `cron_job`).
bool has_word(const std::string& text, const std::string& word) {
  auto name_char = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  for (std::size_t at = text.find(word); at != std::string::npos; at = text.find(word, at + 1)) {
    const std::size_t end = at + word.size();
    if ((at == 0 || !name_char(text[at - 1])) && (end == text.size() || !name_char(text[end])))
      return true;
  }
  return false;
}

/// The keys of `keys` that `doc` leaves undocumented. A top-level key needs its heading
/// ("## `exec`"); a key under it, its last part in a code span of that heading's section: as the
/// first cell of a table row (`lr`) for a key of a section or of a map with its own heading
/// ("### `gossip.choco`"), anywhere in the section for the fields of a map written inline
/// (`{kind: top_k, fraction: F}`).
std::vector<std::string> undocumented_keys(const std::vector<std::string>& keys,
                                           const std::string& doc) {
  // A heading's section: from its line to the next heading of its level or above.
  auto section = [&](const std::string& heading) -> std::string {
    const std::size_t level = heading.find(' ');
    const std::size_t at = doc.find("\n" + heading);
    if (at == std::string::npos) return "";
    std::size_t end = doc.find('\n', at + 1);
    for (; end != std::string::npos; end = doc.find('\n', end + 1)) {
      const std::size_t hashes = doc.find_first_not_of('#', end + 1) - (end + 1);
      if (hashes > 0 && hashes <= level && doc[end + 1 + hashes] == ' ') break;
    }
    return doc.substr(at, end == std::string::npos ? std::string::npos : end - at);
  };
  std::vector<std::string> missing;
  for (const std::string& key : keys) {
    const std::size_t dot = key.find('.');
    const std::string top = key.substr(0, std::min(dot, key.find('[')));
    const std::string top_section = section(cat("## `", top, "`"));
    if (top_section.empty() || top == key) {
      if (top_section.empty()) missing.push_back(key);
      continue;
    }
    const std::size_t last = key.find_last_of('.');
    const std::string leaf = key.substr(last + 1);
    const std::string parent = key.substr(0, last);
    const std::string parent_section =
        parent == top ? top_section : section(cat("### `", parent, "`"));
    bool found = false;
    if (!parent_section.empty()) {  // a table row of its own
      std::size_t row = parent_section.find("\n| `");
      for (; row != std::string::npos && !found; row = parent_section.find("\n| `", row + 1)) {
        const std::size_t cell_end = parent_section.find(" |", row + 3);
        for (const std::string& span : code_spans(parent_section.substr(row, cell_end - row)))
          found = found || span == leaf;
      }
    } else {  // a field of an inline map
      for (const std::string& span : code_spans(top_section)) found = found || has_word(span, leaf);
    }
    if (!found) missing.push_back(key);
  }
  return missing;
}

std::string join(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& w : words) out += (out.empty() ? "" : ", ") + w;
  return out;
}

}  // namespace

TEST_CASE("every key the loader reads is documented in docs/config.md", "[config][docs]") {
  const std::vector<std::string> keys = config_keys();
  // The list is the loader's own tables: sections, keys, and the keys of the maps under them.
  for (const char* k : {"exec", "faults", "faults[].round", "gossip.choco.compress.kind",
                        "gossip.choco.gossip_steps", "monitor.preset", "monitor.on_partition",
                        "net.tls.ca", "data.synthetic.separation", "compare.compress[].bits"})
    CHECK(std::find(keys.begin(), keys.end(), k) != keys.end());
  CHECK(std::find(keys.begin(), keys.end(), "gossip.compress") == keys.end());
  CHECK(std::find(keys.begin(), keys.end(), "gossip.suspect_after_s") == keys.end());
  const std::vector<std::string> missing = undocumented_keys(keys, docs_config_md());
  INFO("keys the loader reads that docs/config.md does not document: " << join(missing));
  CHECK(missing.empty());
  // The check itself: a key nobody wrote up is found.
  CHECK(undocumented_keys({"monitor.no_such_key", "nosuch"}, docs_config_md()) ==
        std::vector<std::string>{"monitor.no_such_key", "nosuch"});
}

TEST_CASE("gossip.wire is read once into its enum, with file and line for a bad value",
          "[config][wire]") {
  CHECK(load_config_from_string("gossip: {algorithm: dpsgd}\n", "c.yaml").gossip.wire ==
        WireFormat::kFp32);
  const std::pair<WireFormat, const char*> formats[] = {
      {WireFormat::kFp32, "fp32"}, {WireFormat::kBf16, "bf16"}, {WireFormat::kFp16, "fp16"}};
  for (const auto& [format, name] : formats) {
    INFO(name);
    CHECK(std::string(wire_format_name(format)) == name);
    CHECK(load_config_from_string(cat("gossip:\n  algorithm: allreduce\n  wire: ", name, "\n"),
                                  "c.yaml")
              .gossip.wire == format);
    CHECK(parse_wire_format(name, "--wire") == format);  // --wire reads the same names
  }
  CHECK(wire_value_bytes(WireFormat::kFp32) == 4);
  CHECK(wire_value_bytes(WireFormat::kBf16) == 2);
  CHECK(wire_value_bytes(WireFormat::kFp16) == 2);
  CHECK_THROWS_WITH(
      load_config_from_string("gossip:\n  algorithm: dpsgd\n  wire: bf8\n", "c.yaml"),
      Catch::Contains("c.yaml:3: gossip.wire: unknown value 'bf8' (expected one of: "
                      "fp32, bf16, fp16)"));
  // choco rounds top_k's and random_k's values; quantize's codes and uncompressed choco are not.
  CHECK_THROWS_WITH(
      load_config_from_string("gossip:\n  wire: fp16\n  algorithm: choco\n", "c.yaml"),
      Catch::Contains("c.yaml:2: gossip.wire: fp16 with choco rounds the values that top_k or "
                      "random_k keep; none sends every coordinate, as float32, so set "
                      "gossip.wire: fp32"));
  CHECK_THROWS_WITH(load_config_from_string("gossip:\n  algorithm: choco\n  wire: bf16\n"
                                            "  choco: {compress: {kind: quantize, bits: 8}}\n",
                                            "c.yaml"),
                    Catch::Contains("c.yaml:3: gossip.wire: bf16 with choco rounds the values "
                                    "that top_k or random_k keep; quantize sends every "
                                    "coordinate as a 4- or 8-bit code"));
  CHECK(load_config_from_string("gossip:\n  algorithm: choco\n  wire: bf16\n"
                                "  choco: {compress: {kind: top_k, fraction: 0.05}}\n",
                                "c.yaml")
            .gossip.wire == WireFormat::kBf16);
  CHECK_THROWS_WITH(parse_wire_format("half", "--wire"),
                    Catch::Contains("--wire: unknown value 'half' (expected one of: fp32, bf16, "
                                    "fp16)"));
  // choco in a sweep beside an algorithm that sends whole buffers: taken (choco ignores it).
  CHECK(load_config_from_string("gossip: {algorithm: choco, wire: bf16}\n"
                                "compare: {algorithms: [choco, dpsgd]}\n",
                                "c.yaml")
            .gossip.wire == WireFormat::kBf16);
}

TEST_CASE("net.tls is off, on, or names ca, cert and key together", "[config][tls]") {
  const auto on = load_config_from_string("net:\n  run_id: r\n", "c.yaml", "/x/configs");
  CHECK(on.net.tls);  // on unless a config turns it off
  CHECK(on.net.tls_ca.empty());
  CHECK_FALSE(load_config_from_string("net:\n  tls: off\n", "c.yaml").net.tls);
  const auto files = load_config_from_string(
      "net:\n  tls:\n    ca: keys/ca.pem\n    cert: keys/peer-{rank}.pem\n"
      "    key: /abs/peer-{rank}.key\n",
      "c.yaml", "/x/configs");
  CHECK(files.net.tls);
  CHECK(files.net.tls_ca == "/x/configs/keys/ca.pem");
  CHECK(files.net.tls_cert == "/x/configs/keys/peer-{rank}.pem");
  CHECK(files.net.tls_key == "/abs/peer-{rank}.key");
  CHECK_THROWS_WITH(load_config_from_string("net:\n  tls:\n    ca: a.pem\n    cert: b.pem\n",
                                            "c.yaml"),
                    Catch::Contains("c.yaml:3: net.tls: names no key (give ca, cert and key"));
  CHECK_THROWS_WITH(load_config_from_string("net:\n  tls: maybe\n", "c.yaml"),
                    Catch::Contains("c.yaml:2: net.tls: unknown value 'maybe'"));
  CHECK_THROWS_WITH(load_config_from_string("net:\n  tls: {ca: a, crt: b}\n", "c.yaml"),
                    Catch::Contains("net.tls.crt: unknown key"));
}

namespace {

const char* kCnn =
    "model:\n"                                             // 1
    "  input: [1, 28, 28]\n"                               // 2
    "  layers:\n"                                          // 3
    "    - conv2d: {out_channels: 32, kernel: 5}\n"        // 4
    "    - relu\n"                                         // 5
    "    - maxpool2d: {kernel: 2}\n"                       // 6
    "    - conv2d: {out_channels: 64, kernel: 5, padding: 2, stride: 2}\n"  // 7
    "    - groupnorm: {groups: 8}\n"                       // 8
    "    - avgpool2d: {kernel: 3, stride: 1}\n"            // 9
    "    - flatten\n"                                      // 10
    "    - dropout: {p: 0.25}\n"                           // 11
    "    - linear: {out: 10}\n";                           // 12

/// kCnn with line `line` (1-based) replaced.
std::string cnn_with(int line, const std::string& text) {
  std::string out;
  std::string s = kCnn;
  int n = 1;
  for (std::size_t start = 0; start < s.size(); ++n) {
    const std::size_t end = s.find('\n', start);
    out += (n == line ? text : s.substr(start, end - start)) + "\n";
    start = end + 1;
  }
  return out;
}

}  // namespace

TEST_CASE("a layer list reads every layer type with its fields and defaults", "[config]") {
  const auto c = load_config_from_string(kCnn, "c.yaml");
  CHECK(c.model.input == Shape{1, 28, 28});
  REQUIRE(c.model.layers.size() == 9);
  CHECK(c.model.layers[0].type == gossip::LayerKind::kConv2d);
  CHECK(c.model.layers[0].out == 32);
  CHECK(c.model.layers[0].kernel == 5);
  CHECK(c.model.layers[0].stride == 1);   // conv2d's default
  CHECK(c.model.layers[0].padding == 0);
  CHECK(c.model.layers[2].stride == 2);   // pooling's default: the kernel
  CHECK(c.model.layers[3].padding == 2);
  CHECK(c.model.layers[3].stride == 2);
  CHECK(c.model.layers[4].groups == 8);
  CHECK(c.model.layers[5].stride == 1);
  CHECK(c.model.layers[7].p == 0.25);
  const auto shapes = infer_shapes(c.model);
  CHECK(shapes[1] == Shape{32, 24, 24});
  CHECK(shapes[3] == Shape{32, 12, 12});
  CHECK(shapes[4] == Shape{64, 6, 6});  // (12 + 4 - 5) / 2 + 1
  CHECK(shapes[6] == Shape{64, 4, 4});
  CHECK(shapes[7] == Shape{1024});
  CHECK(shapes[9] == Shape{10});
}

TEST_CASE("a model that cannot be built fails at load with file, line, field and both shapes",
          "[config]") {
  using Catch::Contains;
  SECTION("unknown layer type") {
    CHECK_THROWS_WITH(load_config_from_string(cnn_with(5, "    - tanh"), "c.yaml"),
                      Contains("c.yaml:5: model.layers[1]: unknown layer type 'tanh'"));
  }
  SECTION("missing field") {
    CHECK_THROWS_WITH(load_config_from_string(cnn_with(4, "    - conv2d: {out_channels: 32}"), "c.yaml"),
                      Contains("c.yaml:4: model.layers[0]: conv2d needs the field 'kernel'"));
    CHECK_THROWS_WITH(load_config_from_string(cnn_with(11, "    - dropout"), "c.yaml"),
                      Contains("c.yaml:11: model.layers[7]: dropout needs the field 'p'"));
  }
  SECTION("unknown field") {
    CHECK_THROWS_WITH(
        load_config_from_string(cnn_with(6, "    - maxpool2d: {kernel: 2, size: 3}"), "c.yaml"),
        Contains("c.yaml:6: model.layers[2].size"));
  }
  SECTION("kernel larger than its input") {
    CHECK_THROWS_WITH(
        load_config_from_string(cnn_with(9, "    - avgpool2d: {kernel: 7}"), "c.yaml"),
        Contains("c.yaml:9: model.layers[5].kernel: layer 5 (avgpool2d) kernel [7,7] is larger "
                 "than its input [64,6,6]"));
  }
  SECTION("groups that do not divide the channels") {
    CHECK_THROWS_WITH(load_config_from_string(cnn_with(8, "    - groupnorm: {groups: 5}"), "c.yaml"),
                      Contains("c.yaml:8: model.layers[4].groups: layer 4 (groupnorm) 5 groups do "
                               "not divide the 64 channels of its input [64,6,6]"));
  }
  SECTION("linear on an image") {
    CHECK_THROWS_WITH(load_config_from_string(cnn_with(10, "    - relu"), "c.yaml"),
                      Contains("c.yaml:12: model.layers[8]: layer 8 (linear) needs a flat input, "
                               "got [64,4,4]"));
  }
  SECTION("output size differs from data.classes") {
    CHECK_THROWS_WITH(load_config_from_string(cnn_with(12, "    - linear: {out: 12}"), "c.yaml"),
                      Contains("c.yaml:12: model.layers[8]: layer 8 (linear) output [12] (output "
                               "size 12) does not match the data's classes [10]"));
  }
  SECTION("no input shape, or a bad one") {
    CHECK_THROWS_WITH(load_config_from_string(cnn_with(2, ""), "c.yaml"),
                      Contains("c.yaml:3: model: needs `input`"));
    CHECK_THROWS_WITH(load_config_from_string(cnn_with(2, "  input: [28, 28]"), "c.yaml"),
                      Contains("c.yaml:2: model.input: give [features] or [channels, height, width]"));
  }
  SECTION("a layer that is neither a name nor a one-key map") {
    CHECK_THROWS_WITH(load_config_from_string(cnn_with(5, "    - [relu]"), "c.yaml"),
                      Contains("c.yaml:5: model.layers[1]: expected a layer"));
  }
  SECTION("synthetic data whose features differ from the input") {
    CHECK_THROWS_WITH(
        load_config_from_string(std::string(kCnn) + "data:\n  synthetic: {dim: 100}\n", "c.yaml"),
        Contains("c.yaml:2: model.input: input [1,28,28] (784 features) does not match "
                 "data.synthetic.dim 100"));
  }
}

TEST_CASE("every shipped config loads, its model shapes fit and its output is the classes",
          "[config]") {
  const char* root = std::getenv("GOSSIP_SOURCE_DIR");
  REQUIRE(root != nullptr);
  int loaded = 0;
  for (const auto& entry : fs::directory_iterator(fs::path(root) / "configs")) {
    if (entry.path().extension() != ".yaml") continue;
    INFO(entry.path().string());
    const RunConfig c = load_config(entry.path().string());
    CHECK(infer_shapes(c.model).back() == Shape{c.data.classes});
    ++loaded;
  }
  CHECK(loaded >= 8);
  const RunConfig cnn = load_config((fs::path(root) / "configs" / "cnn.yaml").string());
  CHECK(cnn.model.input == Shape{1, 28, 28});
  CHECK(infer_shapes(cnn.model)[7] == Shape{1024});  // 64 channels of 4x4 after two pools
  // ResNet-20 alone, on 8 peers and on 16 virtual peers: one model, 28x28 to 14x14 to 7x7.
  const RunConfig resnet = load_config((fs::path(root) / "configs" / "resnet20.yaml").string());
  CHECK(infer_shapes(resnet.model)[6] == Shape{16, 28, 28});
  CHECK(infer_shapes(resnet.model)[7] == Shape{32, 14, 14});
  CHECK(infer_shapes(resnet.model)[10] == Shape{64, 7, 7});
  CHECK(infer_shapes(resnet.model)[13] == Shape{64});
  for (const char* variant : {"quickstart-resnet20.yaml", "sim-ring-16-resnet20.yaml"}) {
    INFO(variant);
    const RunConfig v = load_config((fs::path(root) / "configs" / variant).string());
    CHECK(v.model.input == resnet.model.input);
    CHECK(infer_shapes(v.model) == infer_shapes(resnet.model));
    CHECK(v.model.layers.size() == resnet.model.layers.size());
  }
}

TEST_CASE("batchnorm, residual and globalavgpool layers: fields, shapes and refusals",
          "[config]") {
  const auto cfg = [](const std::string& input, const std::string& layers) {
    return load_config_from_string(
        "model:\n  input: " + input + "\n  layers:\n" + layers + "    - linear: {out: 10}\n",
        "c.yaml");
  };
  const RunConfig ok = cfg("[3, 8, 8]",
                           "    - batchnorm\n    - residual: {out_channels: 6, stride: 2}\n"
                           "    - residual: {out_channels: 6}\n    - globalavgpool\n");
  REQUIRE(ok.model.layers.size() == 5u);
  CHECK(ok.model.layers[1].type == LayerKind::kResidual);
  CHECK(ok.model.layers[1].out == 6);
  CHECK(ok.model.layers[1].stride == 2);
  CHECK(ok.model.layers[2].stride == 1);  // not given: 1
  const auto shapes = infer_shapes(ok.model);
  CHECK(shapes[1] == Shape{3, 8, 8});
  CHECK(shapes[2] == Shape{6, 4, 4});
  CHECK(shapes[4] == Shape{6});
  using Catch::Contains;
  CHECK_THROWS_WITH(cfg("[3, 8, 8]", "    - residual: {stride: 2}\n    - flatten\n"),
                    Contains("c.yaml:4: model.layers[0]: residual needs the field 'out_channels'"));
  CHECK_THROWS_WITH(cfg("[3, 8, 8]", "    - residual: {out_channels: 4, kernel: 5}\n    - flatten\n"),
                    Contains("kernel"));
  CHECK_THROWS_WITH(cfg("[12]", "    - globalavgpool\n"),
                    Contains("layer 0 (globalavgpool) needs a [channels, height, width] input"));
  CHECK_THROWS_WITH(cfg("[3, 8, 6]", "    - globalavgpool\n"),
                    Contains("layer 0 (globalavgpool) needs a square image"));
}

TEST_CASE("a fault schedule reads kill, pause, restart and cut, and refuses what it cannot do", "[config]") {
  const auto c = load_config_from_string(
      "faults:\n  - {round: 30, kill: [2, 6]}\n  - {round: 40, pause: [3], seconds: 10}\n",
      "c.yaml");
  REQUIRE(c.faults.size() == 2);
  CHECK(c.faults[0].action == FaultAction::kKill);
  CHECK(c.faults[0].peers == std::vector<int>{2, 6});
  CHECK(c.faults[1].round == 40);
  CHECK(c.faults[1].seconds == 10.0);
  using Catch::Contains;
  CHECK_THROWS_WITH(load_config_from_string("faults:\n  - {round: 3, pause: [1]}\n", "c.yaml"),
                    Contains("c.yaml:2: faults[0]: a pause needs its length in seconds"));
  CHECK_THROWS_WITH(load_config_from_string("faults:\n  - {kill: [1]}\n", "c.yaml"),
                    Contains("faults[0]: a fault needs its round"));
  const auto rc = load_config_from_string(
      "faults:\n  - {round: 3, restart: [1]}\n  - {from_round: 20, to_round: 50, cut: [[0, 1], [3, 2]]}\n",
      "c.yaml");
  REQUIRE(rc.faults.size() == 2);
  CHECK(rc.faults[0].action == FaultAction::kRestart);
  CHECK(rc.faults[1].action == FaultAction::kCut);
  CHECK(rc.faults[1].round == 20);
  CHECK(rc.faults[1].to_round == 50);
  CHECK(rc.faults[1].links == std::vector<std::pair<int, int>>{{0, 1}, {3, 2}});
  CHECK_THROWS_WITH(load_config_from_string("faults:\n  - {from_round: 9, to_round: 5, cut: [[0, 1]]}\n", "c.yaml"),
                    Contains("c.yaml:2: faults[0]: a cut needs to_round after from_round"));
  CHECK_THROWS_WITH(load_config_from_string("faults:\n  - {from_round: 1, to_round: 5, cut: [[0, 0]]}\n", "c.yaml"),
                    Contains("a link is two different peers"));
  CHECK_THROWS_WITH(load_config_from_string("faults:\n  - {round: 1, to_round: 5, kill: [2]}\n", "c.yaml"),
                    Contains("to_round is for cut and attack, not kill"));
  CHECK_THROWS_WITH(
      load_config_from_string("faults:\n  - {round: 3, kill: [1], pause: [2]}\n", "c.yaml"),
      Contains("one action a fault"));
}

TEST_CASE("a fault schedule reads attacks, their kinds' parameters and defaults, and refuses the "
          "rest naming the line and the key", "[config]") {
  using Catch::Contains;
  using gossip::AttackKind;
  const auto c = load_config_from_string(
      "faults:\n"
      "  - {round: 5, attack: [3], kind: sign_flip}\n"
      "  - {round: 5, to_round: 9, attack: [1, 2], kind: scale, s: -4}\n"
      "  - {round: 9, attack: 0, kind: alie, z: 1.5}\n"
      "  - {round: 9, attack: [4], kind: ipm}\n"
      "  - {round: 9, attack: [5], kind: dissensus, epsilon: 2}\n"
      "  - {round: 9, attack: [6], kind: noise, std: 0.1}\n"
      "  - {round: 9, attack: [7], kind: nan}\n",
      "c.yaml");
  REQUIRE(c.faults.size() == 7);
  CHECK(c.faults[0].action == FaultAction::kAttack);
  CHECK(c.faults[0].peers == std::vector<int>{3});
  CHECK(c.faults[0].attack == AttackKind::kSignFlip);
  CHECK(c.faults[0].parameter == 1.0);  // s defaults to 1
  CHECK(c.faults[0].to_round == 0);     // to the end of the run
  CHECK(c.faults[1].attack == AttackKind::kScale);
  CHECK(c.faults[1].parameter == -4.0);
  CHECK(c.faults[1].to_round == 9);
  CHECK(c.faults[2].peers == std::vector<int>{0});
  CHECK(c.faults[2].parameter == 1.5);
  CHECK(c.faults[3].parameter == 0.5);  // ipm's epsilon defaults to 0.5
  CHECK(c.faults[4].parameter == 2.0);
  CHECK(c.faults[5].attack == AttackKind::kNoise);
  CHECK(c.faults[5].parameter == 0.1);
  CHECK(c.faults[6].attack == AttackKind::kNan);
  CHECK(gossip::describe_attack(c.faults[1]) == "scale (s = -4)");
  CHECK(gossip::describe_attack(c.faults[6]) == "nan");
  const auto refused = [](const char* entry) {
    return load_config_from_string(std::string("faults:\n  - ") + entry + "\n", "c.yaml");
  };
  CHECK_THROWS_WITH(refused("{round: 5, attack: [3], kind: lie}"),
                    Contains("c.yaml:2: faults[0].kind: unknown attack 'lie' (expected one of: "
                             "sign_flip, scale, noise, alie, ipm, dissensus, nan, inf)"));
  CHECK_THROWS_WITH(refused("{round: 5, attack: [3]}"),
                    Contains("c.yaml:2: faults[0]: an attack needs its kind"));
  CHECK_THROWS_WITH(refused("{round: 5, attack: [], kind: nan}"),
                    Contains("faults[0]: an attack names at least one attacking peer"));
  CHECK_THROWS_WITH(refused("{round: 5, attack: [-1], kind: nan}"),
                    Contains("faults[0].attack: peer -1 is not a rank"));
  CHECK_THROWS_WITH(refused("{round: 5, attack: [3], kind: scale}"),
                    Contains("faults[0]: scale needs its parameter s"));
  CHECK_THROWS_WITH(refused("{round: 5, attack: [3], kind: alie, epsilon: 1}"),
                    Contains("c.yaml:2: faults[0].epsilon: is not a parameter of alie (its "
                             "parameter is z)"));
  CHECK_THROWS_WITH(refused("{round: 5, attack: [3], kind: nan, s: 1}"),
                    Contains("faults[0].s: is not a parameter of nan (it has none)"));
  CHECK_THROWS_WITH(refused("{round: 5, attack: [3], kind: noise, std: -1}"),
                    Contains("faults[0].std: must be > 0, got -1"));
  CHECK_THROWS_WITH(refused("{round: 5, attack: [3], kind: sign_flip, s: 0}"),
                    Contains("faults[0].s: must be > 0, got 0"));
  CHECK_THROWS_WITH(refused("{round: 5, attack: [3], kind: ipm, epsilon: .nan}"),
                    Contains("faults[0].epsilon"));
  CHECK_THROWS_WITH(refused("{round: 5, to_round: 5, attack: [3], kind: nan}"),
                    Contains("faults[0]: an attack's to_round comes after its round"));
  CHECK_THROWS_WITH(refused("{round: 5, kill: [3], kind: nan}"),
                    Contains("faults[0].kind: kind is for attack, not kill"));
  CHECK_THROWS_WITH(refused("{round: 5, pause: [3], seconds: 1, z: 2}"),
                    Contains("faults[0].z: is for attack, not pause"));
  CHECK_THROWS_WITH(refused("{round: 5, attack: [3], kind: nan, kill: [2]}"),
                    Contains("one action a fault"));
}

TEST_CASE("--compress reads the compressors gossip.choco.compress takes and refuses the rest alike",
          "[config]") {
  using gossip::parse_compress;
  const gossip::CompressConfig top = parse_compress("top_k:0.01", "--compress");
  CHECK(top.kind == gossip::CompressKind::kTopK);
  CHECK(top.fraction == 0.01);
  CHECK(parse_compress("random_k:1", "--compress").fraction == 1.0);
  CHECK(parse_compress("quantize:4", "--compress").bits == 4);
  CHECK(parse_compress("none", "--compress") == gossip::CompressConfig{});
  // What it writes reads back as the same compressor, to the last bit of the fraction.
  for (const char* text : {"top_k:0.1", "random_k:0.3333333333333333", "quantize:8", "none"})
    CHECK(parse_compress(gossip::compress_argument(parse_compress(text, "x")), "x") ==
          parse_compress(text, "x"));
  CHECK_THROWS_WITH(parse_compress("top_k:0", "--compress"),
                    Catch::Contains("--compress: top_k fraction must be in (0, 1], got 0"));
  CHECK_THROWS_WITH(parse_compress("random_k:1.5", "--compress"),
                    Catch::Contains("must be in (0, 1], got 1.5"));
  CHECK_THROWS_WITH(parse_compress("quantize:6", "--compress"),
                    Catch::Contains("quantize bits must be 4 or 8, got 6"));
  CHECK_THROWS_WITH(parse_compress("top_k", "--compress"),
                    Catch::Contains("top_k needs a fraction after the colon"));
  CHECK_THROWS_WITH(parse_compress("zip:0.1", "--compress"),
                    Catch::Contains("unknown compressor 'zip'"));
  CHECK_THROWS_WITH(parse_compress("none:1", "--compress"), Catch::Contains("takes no value"));
}

TEST_CASE("epochs, threads and workers past their bounds are refused with file, line and field",
          "[config][bounds]") {
  auto load = [](const std::string& text) { return load_config_from_string(text, "c.yaml"); };
  SECTION("train.epochs in (0, 10000]") {
    CHECK(load("train:\n  epochs: 10000\n").train.epochs == 10000);
    CHECK_THROWS_WITH(load("train:\n  epochs: 10000.5\n"),
                      Catch::StartsWith("c.yaml:2: train.epochs: must be at most 10000, got 10000.5"));
    CHECK_THROWS_WITH(load("train:\n  epochs: 1e308\n"),
                      Catch::StartsWith("c.yaml:2: train.epochs: must be at most 10000"));
    CHECK_THROWS_WITH(load("train:\n  epochs: 0\n"),
                      Catch::StartsWith("c.yaml:2: train.epochs: must be > 0"));
  }
  SECTION("train.threads in [1, 1024]") {
    CHECK(load("train:\n  threads: 1024\n").train.threads == 1024);
    CHECK(load("train:\n  threads: 1\n").train.threads == 1);
    CHECK_THROWS_WITH(load("train:\n  threads: 1025\n"),
                      Catch::StartsWith("c.yaml:2: train.threads: 1025 is outside 1..1024"));
    CHECK_THROWS_WITH(load("train:\n  threads: 1000000\n"),
                      Catch::StartsWith("c.yaml:2: train.threads: 1000000 is outside 1..1024"));
    CHECK_THROWS_WITH(load("train:\n  threads: 0\n"),
                      Catch::StartsWith("c.yaml:2: train.threads: 0 is outside 1..1024"));
  }
  SECTION("train.peers_per_process in [1, 256]") {
    CHECK(load("train:\n  epochs: 1\n").train.peers_per_process == 1);
    CHECK(load("train:\n  peers_per_process: 256\n").train.peers_per_process == 256);
    CHECK_THROWS_WITH(load("train:\n  peers_per_process: 0\n"),
                      Catch::StartsWith("c.yaml:2: train.peers_per_process: 0 is outside 1..256"));
    CHECK_THROWS_WITH(
        load("train:\n  peers_per_process: 257\n"),
        Catch::StartsWith("c.yaml:2: train.peers_per_process: 257 is outside 1..256"));
  }
  SECTION("sim.workers in [0, 1024]") {
    CHECK(load("sim:\n  workers: 1024\n").sim.workers == 1024);
    CHECK(load("sim:\n  workers: 0\n").sim.workers == 0);
    CHECK_THROWS_WITH(load("sim:\n  workers: 1025\n"),
                      Catch::StartsWith("c.yaml:2: sim.workers: 1025 is outside 0..1024"));
    CHECK_THROWS_WITH(load("sim:\n  workers: -1\n"),
                      Catch::StartsWith("c.yaml:2: sim.workers: -1 is outside 0..1024"));
  }
}

TEST_CASE("a run plans at most 100000000 local steps per peer", "[config][bounds]") {
  RunConfig c = load_config_from_string("train:\n  epochs: 10000\n  batch: 1\n", "c.yaml");
  // One peer, period 1: 10000 epochs of 10000 samples in batches of 1 is the limit exactly.
  CHECK(plan_rounds(c, 10000, 1).rounds == kMaxLocalSteps);
  CHECK_THROWS_WITH(plan_rounds(c, 10001, 1),
                    Catch::StartsWith("c.yaml:2: train.epochs: 10000 epochs plan 100010000 local "
                                      "steps per peer, more than the 100000000 a run may take"));
  // A round is `period` local steps: 2 peers of period 5 take 20000 * 10000 / 2 steps each.
  c.gossip.period = 5;
  CHECK(plan_rounds(c, 20000, 2).rounds * 5 == kMaxLocalSteps);
  CHECK_THROWS_WITH(plan_rounds(c, 20002, 2), Catch::Contains("100010000 local steps per peer"));
  // A config built in code has no bound on its epochs; the plan still is.
  c.train.epochs = 1e308;
  CHECK_THROWS_WITH(plan_rounds(c, 60000, 1), Catch::StartsWith("c.yaml:2: train.epochs: 1e+308"));
}

namespace {

using gossip::test::Run;
using gossip::test::run_gossip;

}  // namespace

TEST_CASE("--epochs, --threads and --workers are bounded as their fields are, naming the option",
          "[config][bounds]") {
  // 20000 synthetic samples in batches of 1: 10000 epochs would be 2e8 local steps.
  const fs::path dir = fs::temp_directory_path() / cat("gossip-bounds-", ::getpid());
  fs::create_directories(dir);
  const std::string config = (dir / "c.yaml").string();
  std::ofstream(config) << "data:\n  synthetic: {train: 20000, test: 8, dim: 4, classes: 2}\n"
                           "model:\n  layers: [4, 2]\ntrain:\n  epochs: 1\n  batch: 1\n";
  const std::string out = " --out " + (dir / "out").string();
  auto refused = [&](const std::string& args, const std::string& why) {
    INFO(args);
    const Run r = run_gossip(args);
    INFO(r.output);
    CHECK(r.code == 2);
    CHECK(r.output.find(why) != std::string::npos);
  };
  refused("train " + config + out + " --epochs 10001", "--epochs must be in (0, 10000], got 10001");
  refused("train " + config + out + " --epochs 1e308", "--epochs must be in (0, 10000], got 1e308");
  refused("train " + config + out + " --epochs nan", "--epochs must be in (0, 10000], got nan");
  refused("train " + config + out + " --threads 1025", "--threads must be in 1..1024, got 1025");
  refused("train " + config + out + " --threads 1000000",
          "--threads must be in 1..1024, got 1000000");
  refused("train " + config + out + " --threads 0", "--threads must be in 1..1024, got 0");
  // Just inside both bounds: the options pass, and gossip train refuses the plan they make.
  refused("train " + config + out + " --epochs 10000 --threads 1024",
          ": train.epochs: 10000 epochs plan 200000000 local steps per peer");
  refused("sim " + config + out + " --workers 1025", "--workers must be in 0..1024, got 1025");
  refused("sim " + config + out + " --workers -1", "--workers must be in 0..1024, got -1");
  refused("sim " + config + out + " --epochs 0", "--epochs must be in (0, 10000], got 0");
  // --workers 1024 passes; this config then lacks the topology gossip sim needs.
  refused("sim " + config + out + " --workers 1024", "gossip.topology: a topology file is required");
  refused("compare " + config + out + " --workers 1025", "--workers must be in 0..1024");
  refused("compare " + config + out + " --epochs 20000", "--epochs must be in (0, 10000]");
  fs::remove_all(dir);
}

TEST_CASE("gossip.aggregate: a name or a map, refused where the algorithm cannot take it",
          "[config][byzantine]") {
  using gossip::Aggregate;
  using gossip::load_config_from_string;
  CHECK(load_config_from_string("gossip: {algorithm: dpsgd}\n", "c.yaml").gossip.aggregate ==
        gossip::AggregateConfig{});
  const auto clipped =
      load_config_from_string("gossip:\n  aggregate: clipped\n", "c.yaml").gossip.aggregate;
  CHECK((clipped.kind == Aggregate::kClipped && clipped.tau == 0.0 && clipped.byzantine == 1));
  const auto map = load_config_from_string(
      "gossip:\n  algorithm: local_sgd\n  aggregate: {kind: trimmed_mean, byzantine: 2}\n",
      "c.yaml").gossip.aggregate;
  CHECK((map.kind == Aggregate::kTrimmedMean && map.byzantine == 2));
  CHECK(load_config_from_string("gossip:\n  aggregate: {kind: clipped, tau: 0.5}\n", "c.yaml")
            .gossip.aggregate.tau == 0.5);
  CHECK(clipped.ratio == 2.0);
  CHECK(load_config_from_string("gossip:\n  aggregate: {kind: clipped, ratio: 1}\n", "c.yaml")
            .gossip.aggregate.ratio == 1.0);
  const auto fails = [](const std::string& text, const std::string& want) {
    INFO(text);
    CHECK_THROWS_WITH(load_config_from_string(text, "c.yaml"), Catch::Contains(want));
  };
  fails("gossip:\n  aggregate: krum\n",
        "c.yaml:2: gossip.aggregate: unknown value 'krum' (expected one of: mean, clipped, "
        "trimmed_mean, median)");
  fails("gossip:\n  aggregate: {kind: median, tau: 1}\n",
        "gossip.aggregate.tau: is for clipped, not median");
  fails("gossip:\n  aggregate: {kind: median, byzantine: 1}\n",
        "gossip.aggregate.byzantine: is for clipped and trimmed_mean, not median");
  fails("gossip:\n  aggregate: {kind: clipped, tau: -1}\n", "gossip.aggregate.tau");
  fails("gossip:\n  aggregate: {kind: clipped, ratio: 0.5}\n",
        "c.yaml:2: gossip.aggregate.ratio: must be a number >= 1, got 0.5");
  fails("gossip:\n  aggregate: {kind: trimmed_mean, ratio: 2}\n",
        "gossip.aggregate.ratio: is for clipped, not trimmed_mean");
  fails("gossip:\n  aggregate: {kind: clipped, tau: 1, ratio: 2}\n",
        "gossip.aggregate.ratio: is the adaptive radius's; with a fixed tau it has no use");
  fails("gossip:\n  algorithm: push_sum\n  aggregate: clipped\n",
        "c.yaml:3: gossip.aggregate: clipped is for dpsgd, local_sgd and async, not push_sum: "
        "its messages carry push-sum weights");
  fails("gossip:\n  algorithm: choco\n  aggregate: median\n", "not choco: it mixes public copies");
  fails("gossip:\n  algorithm: allreduce\n  aggregate: trimmed_mean\n",
        "not allreduce: it sums chunks");
  // A sweep that lists an algorithm which cannot take it is refused too.
  fails("gossip:\n  aggregate: clipped\ncompare:\n  algorithms: [dpsgd, push_sum]\n",
        "not push_sum");
}

TEST_CASE("compare.aggregates and compare.attacks: read as gossip.aggregate and as the fault "
          "schedule's attack entries, refused naming the key", "[config][byzantine]") {
  using gossip::Aggregate;
  using gossip::AttackKind;
  using gossip::load_config_from_string;
  const auto c = load_config_from_string(
      "compare:\n"
      "  topologies: [ring.yaml]\n"
      "  aggregates: [mean, clipped, {kind: trimmed_mean, byzantine: 2}]\n"
      "  attacks:\n"
      "    - none\n"
      "    - {round: 1, attack: [3], kind: alie, z: 2.5}\n"
      "    - {round: 4, to_round: 9, attack: [3, 5], kind: sign_flip}\n",
      "c.yaml");
  REQUIRE(c.compare.aggregates.size() == 3);
  CHECK(c.compare.aggregates[1].kind == Aggregate::kClipped);
  CHECK((c.compare.aggregates[2].kind == Aggregate::kTrimmedMean &&
         c.compare.aggregates[2].byzantine == 2));
  REQUIRE(c.compare.attacks.size() == 3);
  CHECK(c.compare.attacks[0].action == FaultAction::kNone);  // none: nothing added
  CHECK(c.compare.attacks[0].attack == AttackKind::kNone);
  CHECK(c.compare.attacks[1].action == FaultAction::kAttack);
  CHECK(c.compare.attacks[1].attack == AttackKind::kAlie);
  CHECK(c.compare.attacks[1].parameter == 2.5);
  CHECK(c.compare.attacks[2].peers == std::vector<int>{3, 5});
  CHECK(c.compare.attacks[2].parameter == 1.0);  // sign_flip's s defaults, as in faults:
  CHECK(c.compare.attacks[2].to_round == 9);
  CHECK(c.faults.empty());  // the cells go to the settings, not the config's own schedule
  const auto fails = [](const std::string& entry, const std::string& want) {
    INFO(entry);
    CHECK_THROWS_WITH(load_config_from_string("compare:\n  topologies: [r.yaml]\n" + entry,
                                              "c.yaml"),
                      Catch::Contains(want));
  };
  fails("  aggregates: [mean, average]\n",
        "c.yaml:3: compare.aggregates[1]: unknown value 'average' (expected one of: mean, "
        "clipped, trimmed_mean, median)");
  fails("  aggregates: [{kind: median, tau: 1}]\n",
        "compare.aggregates[0].tau: is for clipped, not median");
  fails("  algorithms: [dpsgd, push_sum]\n  aggregates: [mean, clipped]\n",
        "c.yaml:4: compare.aggregates[1]: clipped is for dpsgd, local_sgd and async, not "
        "push_sum");
  fails("  attacks: [none, {round: 1, attack: [3], kind: lie}]\n",
        "c.yaml:3: compare.attacks[1].kind: unknown attack 'lie' (expected one of: sign_flip");
  fails("  attacks: [{round: 1, attack: [3], kind: sign_flip, z: 1}]\n",
        "compare.attacks[0].z: is not a parameter of sign_flip (its parameter is s)");
  fails("  attacks: [{attack: [3], kind: nan}]\n",
        "compare.attacks[0]: a fault needs its round");
  fails("  attacks:\n    - {round: 2, kill: [3]}\n",
        "c.yaml:4: compare.attacks[0]: a sweep's cell is none or an attack entry");
  fails("  attacks: [nothing]\n",
        "c.yaml:3: compare.attacks[0]: expected none or an attack entry");
  fails("  attacks: none\n", "compare.attacks");  // a list, even of one
  // From the command line: exit 2, the file, the line and the key, before anything runs.
  const fs::path dir = fs::temp_directory_path() / cat("gossip-compare-keys-", ::getpid());
  fs::create_directories(dir);
  std::ofstream(dir / "sweep.yaml") << "compare:\n  topologies: [r.yaml]\n"
                                    << "  aggregates: [mean, krum]\n";
  const test::Run r = test::run_gossip("compare " + (dir / "sweep.yaml").string() + " --out " +
                                       (dir / "out").string());
  fs::remove_all(dir);
  INFO(r.output);
  CHECK(r.code == 2);
  CHECK(r.output.find("sweep.yaml:3: compare.aggregates[1]: unknown value 'krum'") !=
        std::string::npos);
}

TEST_CASE("train.gemm takes auto or a CPU GEMM's name, with file and line for a bad value",
          "[config]") {
  CHECK(load_config_from_string("train: {epochs: 1}\n", "c.yaml").train.gemm == "auto");
  for (const char* name : {"auto", "openblas", "onednn"})
    CHECK(load_config_from_string(cat("train:\n  gemm: ", name, "\n"), "c.yaml").train.gemm ==
          name);
  CHECK_THROWS_WITH(load_config_from_string("train:\n  gemm: mkl\n", "c.yaml"),
                    Catch::Contains("c.yaml:2: train.gemm: unknown value 'mkl' (expected one "
                                    "of: auto, openblas, onednn)"));
}

TEST_CASE("net.advertise takes HOST:PORT and refuses anything else with file, line and why",
          "[config][net]") {
  CHECK(load_config_from_string("net:\n  advertise: 203.0.113.7:40000\n", "c.yaml").net.advertise ==
        "203.0.113.7:40000");
  CHECK(load_config_from_string("net:\n  advertise: \"[2001:db8::7]:29500\"\n", "c.yaml")
            .net.advertise == "[2001:db8::7]:29500");
  CHECK(load_config_from_string("{}\n", "c.yaml").net.advertise.empty());
  CHECK_THROWS_WITH(load_config_from_string("net:\n  advertise: peer-7\n", "c.yaml"),
                    Catch::Contains("c.yaml:2") && Catch::Contains("net.advertise") &&
                        Catch::Contains("'peer-7': expected host:port"));
  CHECK_THROWS_WITH(load_config_from_string("net:\n  advertise: host:70000\n", "c.yaml"),
                    Catch::Contains("port 70000 is outside 1..65535"));
  CHECK_THROWS_WITH(load_config_from_string("net:\n  advertise: \"::1:29500\"\n", "c.yaml"),
                    Catch::Contains("write an IPv6 host in brackets"));
}

TEST_CASE("gossip.outer.compress is read as a compressor, and refused where its packets cannot "
          "go, with file and line", "[config][compress][demo]") {
  const auto c = load_config_from_string(
      "gossip:\n  algorithm: local_sgd\n  outer:\n    lr: 0.7\n"
      "    compress: {kind: dct_top_k, fraction: 0.05}\n",
      "c.yaml");
  CHECK(c.gossip.outer.enabled);
  CHECK(c.gossip.outer.compress.kind == CompressKind::kDctTopK);
  CHECK(c.gossip.outer.compress.fraction == 0.05);
  REQUIRE(packet_compressor(c.gossip) == &c.gossip.outer.compress);
  CHECK(packet_compressor(load_config_from_string("gossip: {algorithm: local_sgd}\n", "c.yaml")
                              .gossip) == nullptr);
  auto fails = [](const std::string& text, const std::string& want) {
    INFO(text);
    CHECK_THROWS_WITH(load_config_from_string(text, "c.yaml"), Catch::Contains(want));
  };
  fails("gossip:\n  algorithm: choco\n  choco: {compress: {kind: dct_top_k, fraction: 0.1}}\n",
        "c.yaml:3: gossip.choco.compress: dct_top_k sends DCT coefficients");
  fails("gossip:\n  algorithm: local_sgd\n  wire: bf16\n"
        "  outer: {compress: {kind: dct_top_k, fraction: 0.1}}\n",
        "c.yaml:3: gossip.wire: gossip.outer.compress sends its own packets");
  fails("gossip:\n  algorithm: local_sgd\n  aggregate: median\n"
        "  outer: {compress: {kind: quantize, bits: 8}}\n",
        "c.yaml:3: gossip.aggregate: median weighs whole parameter messages");
  fails("gossip:\n  algorithm: local_sgd\n  outer: {compress: {kind: dct_top_k, bits: 8}}\n",
        "gossip.outer.compress.bits: is for quantize, not dct_top_k");
}
