// Tests for train: learning-rate schedules in closed form, training a synthetic problem with a
// known answer, and reproducibility of whole runs (same seed, same parameter hash).
#include <catch2/catch.hpp>

#include <cmath>
#include <memory>
#include <numeric>
#include <thread>

#include "gossip/backend.hpp"
#include "gossip/config.hpp"
#include "gossip/hash.hpp"
#include "gossip/train.hpp"
#include "tests/device_like_backend.hpp"
#include "tests/helpers.hpp"

using namespace gossip;

namespace {

RunConfig synthetic_config() {
  RunConfig c;
  c.data.synthetic = true;
  c.data.synthetic_train = 2000;
  c.data.synthetic_test = 500;
  c.data.synthetic_dim = 10;
  c.data.classes = 4;
  c.model = ModelConfig::mlp({10, 16, 4});
  c.optimizer.lr = 0.05;
  c.optimizer.momentum = 0.9;
  c.train.batch = 20;
  c.train.epochs = 3;
  c.train.seed = 11;
  return c;
}

std::string train_and_hash(const RunConfig& c, double* accuracy = nullptr) {
  auto cpu = make_cpu_backend(1);
  DataSets data = load_datasets(c);
  std::vector<std::int64_t> all(data.train.n);
  std::iota(all.begin(), all.end(), 0);
  Trainer t(*cpu, c, data.train, all, 0);
  const auto steps = static_cast<std::int64_t>(c.train.epochs * t.steps_per_epoch());
  for (std::int64_t s = 0; s < steps; ++s) REQUIRE(std::isfinite(t.step()));
  if (accuracy) *accuracy = t.evaluate(data.test).accuracy;
  std::vector<float> p(t.num_params());
  t.download_params(p);
  return sha256_hex(p);
}

}  // namespace

TEST_CASE("learning-rate schedules follow their closed forms", "[train]") {
  OptimizerConfig o;
  o.lr = 0.1;
  SECTION("constant") { CHECK(learning_rate(o, 7.3, 10) == 0.1); }
  SECTION("step") {
    o.schedule = gossip::LrSchedule::kStep;
    o.step_epochs = 3;
    o.gamma = 0.5;
    CHECK(learning_rate(o, 2.9, 10) == Approx(0.1));
    CHECK(learning_rate(o, 3.0, 10) == Approx(0.05));
    CHECK(learning_rate(o, 6.5, 10) == Approx(0.025));
  }
  SECTION("cosine with warm-up") {
    o.schedule = gossip::LrSchedule::kCosine;
    o.warmup_epochs = 2;
    CHECK(learning_rate(o, 1.0, 10) == Approx(0.05));
    CHECK(learning_rate(o, 2.0, 10) == Approx(0.1));
    CHECK(learning_rate(o, 6.0, 10) == Approx(0.05));  // half way through the cosine
    CHECK(learning_rate(o, 10.0, 10) == Approx(0.0).margin(1e-12));
  }
}

TEST_CASE("training solves a separable synthetic problem", "[train]") {
  double acc = 0.0;
  train_and_hash(synthetic_config(), &acc);
  CHECK(acc > 0.95);
}

TEST_CASE("the same seed gives the same parameter hash; another seed does not", "[train]") {
  RunConfig c = synthetic_config();
  c.train.epochs = 1;
  const std::string a = train_and_hash(c);
  CHECK(a == train_and_hash(c));
  c.train.seed = 12;
  CHECK(a != train_and_hash(c));
}

TEST_CASE("a mismatched model input size is a clear error", "[train]") {
  RunConfig c = synthetic_config();
  c.model = ModelConfig::mlp({11, 4});
  auto cpu = make_cpu_backend(1);
  DataSets data = load_datasets(c);
  CHECK_THROWS_WITH(Trainer(*cpu, c, data.train, {0, 1}, 0), Catch::Contains("input [11] (11 features) does not match the data's 10 features"));
}

TEST_CASE("unequal shards follow the run's schedule, and weighted balance scales each step by "
          "the shard's share", "[train]") {
  RunConfig c = synthetic_config();
  c.train.batch = 5;
  const std::vector<std::vector<std::int64_t>> equal = {std::vector<std::int64_t>(20),
                                                        std::vector<std::int64_t>(20)};
  // Equal shards: the shard's own epochs, no scale, whatever the balance.
  for (const gossip::Balance balance : {gossip::Balance::kEqualSteps, gossip::Balance::kWeighted}) {
    c.data.balance = balance;
    CHECK(balance_for(c, equal, 0).schedule_steps_per_epoch == 0.0);
    CHECK(balance_for(c, equal, 1).lr_scale == 1.0);
  }
  // Shards of 10 and 30 samples: 2 and 6 steps an epoch, 4 on average; 40 samples in all.
  std::vector<std::vector<std::int64_t>> shards(2);
  for (std::int64_t i = 0; i < 10; ++i) shards[0].push_back(i);
  for (std::int64_t i = 10; i < 40; ++i) shards[1].push_back(i);
  c.data.balance = gossip::Balance::kEqualSteps;
  CHECK(balance_for(c, shards, 0).schedule_steps_per_epoch == Approx(4.0));
  CHECK(balance_for(c, shards, 1).schedule_steps_per_epoch == Approx(4.0));
  CHECK(balance_for(c, shards, 0).lr_scale == 1.0);
  c.data.balance = gossip::Balance::kWeighted;
  CHECK(balance_for(c, shards, 0).lr_scale == Approx(0.5));  // 10 * 2 / 40
  CHECK(balance_for(c, shards, 1).lr_scale == Approx(1.5));  // 30 * 2 / 40

  // The small shard's cosine schedule runs over the run's epochs (4 steps each), not its own
  // (2 steps each): after 6 steps it is at epoch 1.5 of 3, not 3 of 3.
  c.optimizer.schedule = gossip::LrSchedule::kCosine;
  c.optimizer.min_lr = 0.0;
  c.train.epochs = 3;
  auto cpu = make_cpu_backend(1);
  DataSets data = load_datasets(c);
  Trainer t(*cpu, c, data.train, shards[0], 0, balance_for(c, shards, 0));
  for (int s = 0; s < 7; ++s) t.step();
  CHECK(t.last_lr() == Approx(0.5 * learning_rate(c.optimizer, 6.0 / 4.0, 3.0)));
  CHECK(t.last_lr() == Approx(0.5 * 0.5 * c.optimizer.lr));  // cos(pi/2) = 0: half the rate
}

TEST_CASE("trainers sharing their thread's scratch step bit-identically to trainers with their "
          "own, whichever thread steps them", "[train]") {
  RunConfig c = synthetic_config();
  auto cpu = make_cpu_backend(1);
  DataSets data = load_datasets(c);
  const auto shards = shard_for(c, data.train, 4);
  std::vector<std::unique_ptr<Trainer>> own, shared;
  for (int p = 0; p < 4; ++p) {
    own.push_back(std::make_unique<Trainer>(*cpu, c, data.train, shards[p], p));
    shared.push_back(std::make_unique<Trainer>(*cpu, c, data.train, shards[p], p,
                                               ShardBalance{}, /*shared_scratch=*/true));
  }
  // Own scratch: each peer's steps in a row. Shared: interleaved across the peers, half of
  // them on another thread (whose scratch is another set), so every step finds the scratch
  // left dirty by a different peer.
  std::vector<double> own_loss, shared_loss(4 * 6);
  for (int p = 0; p < 4; ++p)
    for (int s = 0; s < 6; ++s) own_loss.push_back(own[p]->step());
  for (int s = 0; s < 6; ++s) {
    std::thread other([&] {
      for (int p = 2; p < 4; ++p) shared_loss[p * 6 + s] = shared[p]->step();
    });
    for (int p = 0; p < 2; ++p) shared_loss[p * 6 + s] = shared[p]->step();
    other.join();
  }
  CHECK(own_loss == shared_loss);
  for (int p = 0; p < 4; ++p) {
    std::vector<float> a(own[p]->num_params()), b(a.size());
    own[p]->download_params(a);
    shared[p]->download_params(b);
    CHECK(a == b);
    CHECK(own[p]->evaluate(data.test).accuracy == shared[p]->evaluate(data.test).accuracy);
  }
  // Training moved the models (the comparison above is not of untouched initialisations).
  std::vector<float> fresh(own[0]->num_params()), trained(fresh.size());
  Trainer(*cpu, c, data.train, shards[0], 0).download_params(fresh);
  own[0]->download_params(trained);
  CHECK(fresh != trained);
}

TEST_CASE("the optimizer steps the trained parameters and leaves the buffers after them",
          "[model]") {
  auto cpu = gossip::make_cpu_backend(1);
  gossip::OptimizerConfig o;
  o.momentum = 0.9;
  o.weight_decay = 0.1;
  gossip::Sgd sgd(*cpu, 10, o, 6);
  std::vector<float> params(10, 2.0f), grads(10, 1.0f);
  sgd.step(params.data(), grads.data(), 0.5f);
  for (int i = 0; i < 6; ++i) CHECK(params[i] == Approx(2.0 - 0.5 * (1.0 + 0.1 * 2.0)));
  for (int i = 6; i < 10; ++i) CHECK(params[i] == 2.0f);
}

namespace {

/// The synthetic problem on a small residual network: convolution, batch norm (whose running
/// statistics a replayed step must move as the eager one does), a residual block, pooling.
RunConfig residual_config() {
  RunConfig c = synthetic_config();
  c.data.synthetic_dim = 16;
  c.model = test::tiny_residual_model();
  return c;
}

/// `steps` steps of peer 1's trainer on `backend`, its parameters halved after step `poke` (as
/// a round of mixing writes them in place) and evaluated after step `poke` + 1; the losses and
/// the final parameters.
struct Trace {
  std::vector<double> losses;
  std::vector<float> params;
  double accuracy = 0.0;
  std::string graphs;
};
Trace train_trace(Backend& backend, const RunConfig& c, const DataSets& data, int steps,
                  int poke) {
  const auto shards = shard_for(c, data.train, 2);
  Trainer t(backend, c, data.train, shards[1], 1);
  Trace r;
  r.params.resize(static_cast<std::size_t>(t.num_params()));
  for (int s = 0; s < steps; ++s) {
    r.losses.push_back(t.step());
    if (s == poke) {
      t.download_params(r.params);
      for (float& v : r.params) v *= 0.5f;
      t.upload_params(r.params);
    }
    if (s == poke + 1) r.accuracy = t.evaluate(data.test).accuracy;
  }
  t.download_params(r.params);
  r.graphs = t.graphs();
  return r;
}

}  // namespace

TEST_CASE("train.graphs: step replays the step as a graph: every loss and the parameters "
          "bit-identical to the step launched call by call; it falls back, saying why", "[train]") {
  using test::DeviceLikeBackend;
  const int steps = 25, poke = 9;
  for (const bool residual : {false, true}) {
    INFO("residual network: " << residual);
    RunConfig c = residual ? residual_config() : synthetic_config();
    const DataSets data = load_datasets(c);
    DeviceLikeBackend eager_backend, graph_backend;
    const Trace eager = train_trace(eager_backend, c, data, steps, poke);
    CHECK(eager.graphs == "off");
    c.train.graphs = GraphMode::kStep;
    DeviceLikeBackend::captures = DeviceLikeBackend::replays = 0;
    const Trace graph = train_trace(graph_backend, c, data, steps, poke);
    CHECK(graph.graphs == "step");
    // The first step ran call by call; the second was captured, and it and every later one
    // replayed the graph.
    CHECK(DeviceLikeBackend::captures == 1);
    CHECK(DeviceLikeBackend::replays == steps - 1);
    CHECK(graph.losses == eager.losses);
    CHECK(graph.params == eager.params);
    CHECK(graph.accuracy == eager.accuracy);
    CHECK(eager.losses.back() < eager.losses.front());  // it trained
  }
  RunConfig c = synthetic_config();
  const DataSets data = load_datasets(c);
  DeviceLikeBackend reference_backend;
  const Trace reference = train_trace(reference_backend, c, data, steps, poke);
  c.train.graphs = GraphMode::kStep;
  SECTION("a device whose graphs do not start, or that invalidates the capture: the step runs "
          "eagerly, as it would have, saying why") {
    for (std::string* knob : {&DeviceLikeBackend::refuse_capture,
                              &DeviceLikeBackend::break_capture}) {
      *knob = "capturing the step: operation not permitted";
      DeviceLikeBackend::captures = DeviceLikeBackend::replays = 0;
      DeviceLikeBackend b;
      const Trace t = train_trace(b, c, data, steps, poke);
      knob->clear();
      CHECK(t.graphs == "off (capturing the step: operation not permitted)");
      CHECK(DeviceLikeBackend::replays == 0);
      CHECK(t.losses == reference.losses);
      CHECK(t.params == reference.params);
    }
  }
  SECTION("dropout draws new masks every step: no graph") {
    RunConfig d = c;
    LayerConfig drop;
    drop.type = LayerKind::kDropout;
    drop.p = 0.2;
    d.model.layers.insert(d.model.layers.begin() + 2, drop);
    DeviceLikeBackend::captures = DeviceLikeBackend::replays = 0;
    DeviceLikeBackend b;
    const Trace t = train_trace(b, d, data, steps, poke);
    CHECK(t.graphs ==
          "off (dropout draws new masks every step, which a graph would repeat)");
    CHECK(DeviceLikeBackend::captures == 0);
  }
  SECTION("the CPU backend has no graphs: refused, naming the key") {
    auto cpu = make_cpu_backend(1);
    const auto shards = shard_for(c, data.train, 2);
    CHECK_THROWS_WITH(Trainer(*cpu, c, data.train, shards[0], 0),
                      Catch::Contains("train.graphs: step replays the training step as a CUDA "
                                      "graph; the cpu backend has none"));
  }
}
