// Tests for the run-config loader: values land in the structs, paths resolve against the config's
// folder, and every problem names the file, the line and the field, including the ones found
// only with the topology (check_algorithm).
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "gossip/config.hpp"
#include "gossip/core.hpp"
#include "gossip/gossip.hpp"
#include "gossip/topology.hpp"

using namespace gossip;
namespace fs = std::filesystem;

TEST_CASE("a config sets the fields it names and keeps defaults elsewhere", "[config]") {
  const auto c = load_config_from_string(
      "model:\n  layers: [784, 64, 10]\noptimizer:\n  lr: 0.05\n  momentum: 0.9\n"
      "  schedule: cosine\ntrain:\n  epochs: 2\n  batch: 64\ngossip:\n"
      "  topology: ../topologies/ring-8.yaml\n  period: 4\n",
      "c.yaml", "/x/configs");
  CHECK(c.model.layers == std::vector<int>{784, 64, 10});
  CHECK(c.optimizer.lr == 0.05);
  CHECK(c.optimizer.schedule == "cosine");
  CHECK(c.train.batch == 64);
  CHECK(c.train.seed == 1);
  CHECK(c.gossip.topology == "/x/topologies/ring-8.yaml");
  CHECK(c.gossip.period == 4);
  CHECK(c.net.shared_memory);  // on unless a config turns it off
  CHECK_FALSE(load_config_from_string("net:\n  shared_memory: false\n", "c.yaml").net.shared_memory);
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
  SECTION("unknown choice") {
    CHECK_THROWS_WITH(load_config_from_string("train:\n  backend: tpu\n", "c.yaml"),
                      Catch::Contains("expected one of: auto, cpu, cuda"));
  }
  SECTION("unknown data balance") {
    CHECK_THROWS_WITH(load_config_from_string("data:\n  balance: fair\n", "c.yaml"),
                      Catch::Contains("c.yaml:2: data.balance"));
    CHECK(load_config_from_string("data:\n  balance: weighted\n", "c.yaml").data.balance ==
          "weighted");
  }
  SECTION("broken YAML") {
    CHECK_THROWS_AS(load_config_from_string("train: [1, 2\n", "c.yaml"), InputError);
  }
  SECTION("output layer disagrees with the classes") {
    CHECK_THROWS_WITH(load_config_from_string("model:\n  layers: [784, 7]\n", "c.yaml"),
                      Catch::Contains("output size 7"));
  }
  SECTION("missing file") {
    CHECK_THROWS_WITH(load_config("/nonexistent/c.yaml"), Catch::Contains("no such config file"));
  }
}

TEST_CASE("NaN and infinity are refused wherever a finite number is meant", "[config]") {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"gossip: {round_timeout_s: .nan}\n", "c.yaml:1: gossip.round_timeout_s:"},
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
