// Tests for the run-config loader: values land in the structs, paths resolve against the config's
// folder, and every problem names the file, the line and the field.
#include <catch2/catch.hpp>

#include "gossip/config.hpp"
#include "gossip/core.hpp"

using namespace gossip;

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
