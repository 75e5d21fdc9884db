// Tests for the gossip algorithms, driven as a real peer drives them (local_phase, mix_phase)
// over the in-memory SimExchange, every peer in turn on one thread.
#include <catch2/catch.hpp>

#include <cmath>
#include <memory>
#include <numeric>
#include <vector>

#include "gossip/core.hpp"
#include "gossip/gossip.hpp"
#include "gossip/rng.hpp"
#include "gossip/sim.hpp"
#include "sim/sim_network.hpp"
#include "gossip/topology.hpp"
#include "gossip/train.hpp"
#include "tests/helpers.hpp"

using namespace gossip;

namespace {

RunConfig small_config() {
  RunConfig c = test::small_synthetic_config(512, 128, 7);
  c.sim.step_ms = 1.0;
  return c;
}

Topology generate(const std::string& kind, int n, std::optional<WeightKind> w = std::nullopt) {
  GeneratorSpec s;
  s.kind = kind;
  s.n = n;
  s.weights = w;
  return make_topology(s);
}

/// n peers of random vectors (no local steps), their exchanges and algorithms.
struct ConsensusPeers {
  ConsensusPeers(const Topology& t, const GossipConfig& g, std::int64_t dim)
      : backend(make_cpu_backend(1)), network(t.n(), dim, 1, SimConfig{}, 3) {
    for (int p = 0; p < t.n(); ++p) {
      auto rng = make_rng(3, p, Stream::kSim);
      x.emplace_back(dim);
      for (auto& v : x.back()) v = static_cast<float>(normal01(rng));
    }
    for (int p = 0; p < t.n(); ++p)
      algs.push_back(make_algorithm(Learner{backend.get(), x[p].data(), dim, {}},
                                    network.exchange(p), t, g));
  }
  void rounds(std::int64_t from, std::int64_t to) {
    for (std::int64_t r = from; r < to; ++r) {
      for (auto& a : algs) a->local_phase(r);
      for (auto& a : algs) a->mix_phase(r);
    }
  }
  std::vector<double> mean() const {
    std::vector<double> m(x[0].size(), 0.0);
    for (const auto& v : x)
      for (std::size_t i = 0; i < v.size(); ++i) m[i] += v[i] / x.size();
    return m;
  }
  std::unique_ptr<Backend> backend;
  SimNetwork network;
  std::vector<std::vector<float>> x;
  std::vector<std::unique_ptr<Algorithm>> algs;
};

}  // namespace

TEST_CASE("complete graph with uniform weights equals large-batch SGD", "[gossip]") {
  // Every peer starts from the same model, takes one step on its batch and averages exactly, so
  // the common model follows SGD with batch n*b over the union of the peers' batches.
  RunConfig c = small_config();
  const int n = 4;
  const Topology t = generate("complete", n, WeightKind::kUniform);
  const DataSets data = load_datasets(c);
  const auto shards = shard_for(c, data.train, n);
  auto backend = make_cpu_backend(1);
  SimNetwork network(n, model_param_count(c.model), 1, c.sim, c.train.seed);
  std::vector<std::unique_ptr<Trainer>> trainers;
  std::vector<std::unique_ptr<Algorithm>> algs;
  for (int p = 0; p < n; ++p) {
    trainers.push_back(std::make_unique<Trainer>(*backend, c, data.train, shards[p], p));
    algs.push_back(make_algorithm(*trainers.back(), network.exchange(p), t, c.gossip));
  }

  // The reference: one model, batches of n*b rows made of each peer's batch in peer order.
  Model ref(*backend, c.model, n * c.train.batch);
  ref.init(c.train.seed, 0);
  Sgd sgd(*backend, ref.num_params(), c.optimizer);
  std::vector<BatchSampler> samplers;
  for (int p = 0; p < n; ++p) samplers.emplace_back(shards[p], c.train.batch, c.train.seed, p);
  std::vector<float> x(static_cast<std::size_t>(n) * c.train.batch * data.train.dim);
  std::vector<std::int32_t> y(static_cast<std::size_t>(n) * c.train.batch);

  const int rounds = 60;
  for (int r = 0; r < rounds; ++r) {
    for (auto& a : algs) a->local_phase(r);
    for (auto& a : algs) a->mix_phase(r);
    std::vector<std::int64_t> idx;
    for (auto& s : samplers) {
      const auto& b = s.next();
      idx.insert(idx.end(), b.begin(), b.end());
    }
    gather_batch(data.train, idx, x.data(), y.data());
    ref.forward_backward(x.data(), y.data(), static_cast<int>(idx.size()));
    sgd.step(ref.params(), ref.grads(), static_cast<float>(c.optimizer.lr));
  }
  std::vector<float> got(ref.num_params());
  double max_diff = 0.0, max_abs = 0.0;
  for (int p = 0; p < n; ++p) {
    algs[p]->model_params(got);
    for (std::int64_t i = 0; i < ref.num_params(); ++i) {
      max_diff = std::max(max_diff, std::abs(static_cast<double>(got[i]) - ref.params()[i]));
      max_abs = std::max(max_abs, std::abs(static_cast<double>(ref.params()[i])));
    }
  }
  REQUIRE(max_abs > 0.1);  // the models did move
  REQUIRE(max_diff < 1e-4);
  REQUIRE(std::isfinite(algs[0]->take_train_loss()));
  REQUIRE(std::isnan(algs[0]->take_train_loss()));  // reset after taking
}

TEST_CASE("doubly stochastic mixing preserves the average and shrinks disagreement",
          "[gossip]") {
  for (const char* kind : {"ring", "torus"}) {
    SECTION(kind) {
      const Topology t = std::string(kind) == "torus" ? [] {
        GeneratorSpec s;
        s.kind = "torus";
        s.rows = 3;
        s.cols = 4;
        return make_topology(s);
      }() : generate("ring", 12);
      ConsensusPeers peers(t, GossipConfig{}, 257);
      const auto before = peers.mean();
      peers.rounds(0, 30);
      const auto after = peers.mean();
      for (std::size_t i = 0; i < before.size(); ++i)
        REQUIRE(after[i] == Approx(before[i]).margin(1e-5));
      for (const auto& v : peers.x) REQUIRE(std::abs(v[0] - after[0]) < 0.5);
    }
  }
}

TEST_CASE("push-sum reaches the average on a directed graph whose rows do not sum to one",
          "[gossip]") {
  const Topology t = load_topology_from_string(
      "n: 4\ndirected: true\nedges:\n"
        "  - [0, 1]\n  - [0, 2]\n  - [0, 3]\n  - [1, 2]\n  - [2, 3]\n  - [3, 0]\n",
      "dir.yaml");
  GossipConfig g;
  g.algorithm = "push_sum";
  ConsensusPeers peers(t, g, 64);
  const auto target = peers.mean();
  peers.rounds(0, 200);
  for (const auto& v : peers.x)
    for (std::size_t i = 0; i < v.size(); ++i) REQUIRE(v[i] == Approx(target[i]).margin(1e-4));
  double w = 0.0;
  for (const auto& a : peers.algs) w += a->weight();
  REQUIRE(w == Approx(4.0));  // push-sum conserves the total weight

  GossipConfig pull;
  pull.algorithm = "dpsgd";
  REQUIRE_THROWS_AS(ConsensusPeers(t, pull, 4), InputError);
}

namespace {

/// An exchange whose neighbours never answer.
class SilentExchange final : public Exchange {
 public:
  int rank() const override { return 1; }
  int size() const override { return 3; }
  void publish(std::int64_t, std::span<const float>, double, std::span<const int> to) override {
    sent_ += to.size();
  }
  void publish_packet(std::int64_t, std::span<const std::byte>, std::span<const int> to) override {
    sent_ += to.size();
  }
  std::vector<Inbox> collect(std::int64_t, std::span<const int>, const CollectOptions&) override {
    return {};
  }
  std::vector<int> dead_peers() const override { return {0, 2}; }
  std::uint64_t bytes_sent() const override { return 0; }
  std::size_t sent_ = 0;
};

}  // namespace

TEST_CASE("a missing neighbour's weight stays with the peer", "[gossip]") {
  const Topology t = generate("ring", 3);
  auto backend = make_cpu_backend(1);
  std::vector<float> x{1.5f, -2.0f, 3.25f};
  const auto before = x;
  SilentExchange ex;
  for (const char* name : {"dpsgd", "async", "push_sum"}) {
    GossipConfig g;
    g.algorithm = name;
    auto a = make_algorithm(Learner{backend.get(), x.data(), 3, {}}, ex, t, g);
    a->local_phase(0);
    a->mix_phase(0);
    REQUIRE(x == before);  // self weight 1: exactly itself
    REQUIRE(a->missing_messages() == 2);
  }
  REQUIRE(ex.sent_ == 6);
}

TEST_CASE("make_algorithm rejects unknown names and mismatched sizes", "[gossip]") {
  const Topology t = generate("ring", 3);
  auto backend = make_cpu_backend(1);
  std::vector<float> x(4);
  SimNetwork net(4, 4, 1, SimConfig{}, 1);
  GossipConfig g;
  REQUIRE_THROWS_AS(make_algorithm(Learner{backend.get(), x.data(), 4, {}}, net.exchange(0), t, g),
                    InputError);  // 3-peer topology, 4-peer network
  SimNetwork net3(3, 4, 1, SimConfig{}, 1);
  g.algorithm = "gossip-magic";
  REQUIRE_THROWS_AS(make_algorithm(Learner{backend.get(), x.data(), 4, {}}, net3.exchange(0), t, g),
                    InputError);
  REQUIRE(algorithm_names().size() == 4);
}
