// Tests for the gossip algorithms, driven as a real peer drives them (local_phase, mix_phase)
// over the in-memory SimExchange, every peer in turn on one thread.
#include <catch2/catch.hpp>

#include <algorithm>
#include <random>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <numeric>
#include <vector>

#include "gossip/compress.hpp"
#include "gossip/compress_math.hpp"
#include "gossip/core.hpp"
#include "gossip/gossip.hpp"
#include "gossip/half.hpp"
#include "gossip/layer_spec.hpp"
#include "gossip/packet.hpp"
#include "gossip/rng.hpp"
#include "gossip/sim.hpp"
#include "sim/sim_network.hpp"
#include "gossip/topology.hpp"
#include "gossip/train.hpp"
#include "tests/helpers.hpp"

using namespace gossip;

namespace {

/// One compressor of the tests' sweeps over compressors, as a config names it.
struct CompressCase {
  CompressKind kind;
  double fraction;
  int bits;
  WireFormat wire = WireFormat::kFp32;  // top_k's and random_k's values (gossip.wire)
  CompressConfig config() const {
    CompressConfig c;
    c.kind = kind;
    c.fraction = fraction;
    c.bits = bits;
    return c;
  }
  std::string name() const {
    return cat(compress_kind_name(kind), " ", fraction, " ", bits, " ", wire_format_name(wire));
  }
};

RunConfig small_config() {
  RunConfig c = test::small_synthetic_config(512, 128, 7);
  c.sim.step_ms = 1.0;
  return c;
}

Topology generate(const std::string& kind, int n, std::optional<WeightKind> w = std::nullopt) {
  GeneratorSpec s;
  s.kind = gossip::parse_generator(kind);
  s.n = n;
  s.weights = w;
  return make_topology(s);
}

/// n peers of random vectors (no local steps), their exchanges and algorithms.
struct ConsensusPeers {
  ConsensusPeers(const Topology& t, const GossipConfig& g, std::int64_t dim)
      : backend(make_cpu_backend(1)), network(t.n(), dim, 2, SimConfig{}, 3, g.wire) {
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
      for (int s = 0; s < algs.front()->relay_steps(); ++s)
        for (auto& a : algs) a->relay_phase(r, s);
      for (auto& a : algs) a->mix_phase(r);
    }
  }
  std::vector<double> mean() const {
    std::vector<double> m(x[0].size(), 0.0);
    for (const auto& v : x)
      for (std::size_t i = 0; i < v.size(); ++i) m[i] += v[i] / x.size();
    return m;
  }
  /// Sum over peers and coordinates of the squared distance to the mean.
  double spread() const {
    const auto m = mean();
    double d = 0.0;
    for (const auto& v : x)
      for (std::size_t i = 0; i < v.size(); ++i) d += (v[i] - m[i]) * (v[i] - m[i]);
    return d;
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
  SimNetwork network(n, flat_size(c.model), 1, c.sim, c.train.seed);
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
        s.kind = gossip::GeneratorKind::kTorus;
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
  g.algorithm = AlgorithmKind::kPushSum;
  ConsensusPeers peers(t, g, 64);
  const auto target = peers.mean();
  peers.rounds(0, 200);
  for (const auto& v : peers.x)
    for (std::size_t i = 0; i < v.size(); ++i) REQUIRE(v[i] == Approx(target[i]).margin(1e-4));
  double w = 0.0;
  for (const auto& a : peers.algs) w += a->weight();
  REQUIRE(w == Approx(4.0));  // push-sum conserves the total weight

  GossipConfig pull;
  pull.algorithm = AlgorithmKind::kDpsgd;
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
  std::vector<int> excused_peers() const override { return {}; }
  std::optional<Inbox> newest(std::span<const int>) override { return std::nullopt; }
  void set_tags_per_round(int) override {}  // a transport goes by tags
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
    g.algorithm = parse_algorithm(name, "test");
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
  REQUIRE_THROWS_WITH(parse_algorithm("gossip-magic", "gossip.algorithm"),
                      "gossip.algorithm: unknown algorithm 'gossip-magic' (expected dpsgd, "
                      "local_sgd, push_sum, async, choco, allreduce or "
                      "gradient_tracking)");
  REQUIRE(algorithm_table().size() == 7);
  for (const AlgorithmTraits& row : algorithm_table()) {  // the rows are in the enum's order
    REQUIRE(&traits(row.kind) == &row);
    REQUIRE(parse_algorithm(row.name, "x") == row.kind);
  }
  g.algorithm = AlgorithmKind::kDpsgd;
  g.choco.compress.kind = CompressKind::kTopK;  // compression with an algorithm not taking it
  REQUIRE_THROWS_AS(make_algorithm(Learner{backend.get(), x.data(), 4, {}}, net3.exchange(0), t, g),
                    InputError);
  g.choco.compress.kind = CompressKind::kNone;
  g.algorithm = AlgorithmKind::kPushSum;
  g.overlap = true;
  REQUIRE_THROWS_AS(make_algorithm(Learner{backend.get(), x.data(), 4, {}}, net3.exchange(0), t, g),
                    InputError);
}

// ---- compressors ----------------------------------------------------------------------------

namespace {

std::vector<float> spread_vector(std::size_t n, unsigned seed) {
  // Magnitudes over four decades, so selection and block scales have something to tell apart.
  auto v = test::random_vector(n, seed);
  for (std::size_t i = 0; i < n; ++i) v[i] *= std::pow(10.0f, static_cast<float>(i % 4) - 2.0f);
  return v;
}

}  // namespace

TEST_CASE("top_k keeps the k largest coordinates and nothing else", "[gossip][compress]") {
  const std::size_t n = 1000;
  const auto v = spread_vector(n, 11);
  CompressConfig c;
  c.kind = CompressKind::kTopK;
  c.fraction = 0.05;
  Compressor q(c, n, 1, 0);
  REQUIRE(q.kept() == 50);
  std::vector<std::byte> packet;
  q.encode(v, 0, Scaling::kContractive, packet);
  REQUIRE(packet.size() == q.packet_bytes());
  REQUIRE(packet.size() == kPacketHeaderBytes + 50 * 8);  // indices and values
  REQUIRE(check_packet(packet, n).empty());
  const auto got = decode_packet(packet, n);
  std::vector<float> mags;
  for (float x : v) mags.push_back(std::fabs(x));
  std::sort(mags.begin(), mags.end(), std::greater<>());
  const float kth = mags[49];
  REQUIRE(kth > mags[50]);  // no tie at the cut in this vector
  std::size_t kept = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (std::fabs(v[i]) >= kth) {
      REQUIRE(got[i] == v[i]);  // a kept coordinate is sent exactly
      ++kept;
    } else {
      REQUIRE(got[i] == 0.0f);
    }
  }
  REQUIRE(kept == 50);
  // Ties at the cut go to the lower index, whatever the sign.
  const std::vector<float> ties{0.5f, -1.0f, 2.0f, 1.0f, -1.0f, 1.0f, 0.25f, 1.0f, -3.0f, 1.0f};
  c.fraction = 0.4;
  Compressor(c, ties.size(), 1, 0).encode(ties, 0, Scaling::kContractive, packet);
  REQUIRE(decode_packet(packet, ties.size()) ==
          std::vector<float>{0, -1.0f, 2.0f, 1.0f, 0, 0, 0, 0, -3.0f, 0});
}

TEST_CASE("top_k's radix select keeps the same set as sorting the magnitudes, ties and all",
          "[gossip][compress]") {
  // The reference: sort the indices by (|v| descending, index ascending), keep the first k.
  const auto reference = [](const std::vector<float>& v, std::size_t k) {
    std::vector<std::size_t> idx(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) idx[i] = i;
    std::stable_sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) {
      return std::fabs(v[a]) > std::fabs(v[b]);
    });
    std::vector<float> out(v.size(), 0.0f);
    for (std::size_t j = 0; j < k; ++j) out[idx[j]] = v[idx[j]];
    return out;
  };
  const std::size_t n = 5000;
  std::vector<std::pair<std::string, std::vector<float>>> cases;
  cases.emplace_back("four decades", spread_vector(n, 21));
  auto few = test::random_vector(n, 22);  // few distinct magnitudes: ties at every cut
  for (auto& x : few) x = std::round(x * 2.0f) / 2.0f;
  cases.emplace_back("few distinct values", few);
  cases.emplace_back("all equal", std::vector<float>(n, -0.75f));
  auto zeros = test::random_vector(n, 23);  // mostly zeros (and negative zeros)
  for (std::size_t i = 0; i < n; ++i) zeros[i] = i % 7 ? (i % 2 ? -0.0f : 0.0f) : zeros[i];
  cases.emplace_back("mostly zeros", zeros);
  auto extremes = test::random_vector(n, 24);  // subnormals, huge values and infinities
  for (std::size_t i = 0; i < n; i += 5) extremes[i] = 1e-42f * static_cast<float>(i % 3 + 1);
  for (std::size_t i = 1; i < n; i += 97) extremes[i] = -3e38f;
  extremes[2] = std::numeric_limits<float>::infinity();
  extremes[3] = -std::numeric_limits<float>::infinity();
  cases.emplace_back("subnormals and infinities", extremes);
  auto close = test::random_vector(n, 25);  // magnitudes a few ulps apart: the low bits decide
  for (std::size_t i = 0; i < n; ++i) close[i] = std::nextafter(1.0f, 2.0f) + (i % 13) * 1.2e-7f;
  cases.emplace_back("a few ulps apart", close);
  for (const auto& [name, v] : cases)
    for (const double fraction : {0.0002, 0.01, 0.1, 0.5, 0.9999}) {
      CAPTURE(name, fraction);
      CompressConfig c;
      c.kind = CompressKind::kTopK;
      c.fraction = fraction;
      Compressor q(c, static_cast<std::int64_t>(n), 1, 0);
      std::vector<std::byte> packet;
      q.encode(v, 1, Scaling::kContractive, packet);
      const auto got = decode_packet(packet, static_cast<std::int64_t>(n));
      // Equal as floats (a kept -0 decodes as 0, which is what it adds to a copy).
      REQUIRE(got == reference(v, static_cast<std::size_t>(q.kept())));
    }
}

TEST_CASE("random_k is unbiased in expectation and drawn from (seed, peer, round)",
          "[gossip][compress]") {
  const std::size_t n = 64;
  const auto v = spread_vector(n, 12);
  CompressConfig c;
  c.kind = CompressKind::kRandomK;
  c.fraction = 0.25;
  Compressor q(c, n, 7, 3);
  REQUIRE(q.kept() == 16);
  const int draws = 20000;
  std::vector<double> mean(n, 0.0);
  std::vector<int> picked(n, 0);
  std::vector<std::byte> packet;
  for (int r = 0; r < draws; ++r) {
    q.encode(v, r, Scaling::kUnbiased, packet);
    REQUIRE(check_packet(packet, n).empty());
    const auto got = decode_packet(packet, n);
    int nonzero = 0;
    for (std::size_t i = 0; i < n; ++i) {
      mean[i] += got[i] / draws;
      if (got[i] != 0.0f) {
        ++nonzero;
        ++picked[i];
        REQUIRE(got[i] == Approx(4.0 * v[i]));  // scaled by n / k
      }
    }
    REQUIRE(nonzero == 16);  // k distinct coordinates every round
  }
  for (std::size_t i = 0; i < n; ++i) {
    // E = v; the mean of `draws` samples of 4 v Bernoulli(1/4) has deviation |v| sqrt(3 / draws).
    REQUIRE(std::fabs(mean[i] - v[i]) < 5.0 * std::fabs(v[i]) * std::sqrt(3.0 / draws) + 1e-12);
    REQUIRE(picked[i] == Approx(draws / 4.0).epsilon(0.1));
  }
  // The same (seed, peer, round) draws the same; another peer or round draws otherwise.
  std::vector<std::byte> a, b, other_peer, other_round;
  q.encode(v, 5, Scaling::kContractive, a);
  Compressor(c, n, 7, 3).encode(v, 5, Scaling::kContractive, b);
  Compressor(c, n, 7, 4).encode(v, 5, Scaling::kContractive, other_peer);
  q.encode(v, 6, Scaling::kContractive, other_round);
  REQUIRE(a == b);
  REQUIRE(a != other_peer);
  REQUIRE(a != other_round);
  const auto kept = decode_packet(a, n);  // contractive: the kept values as they are
  for (std::size_t i = 0; i < n; ++i) REQUIRE((kept[i] == 0.0f || kept[i] == v[i]));
}

TEST_CASE("quantization stays within its error bound and is unbiased", "[gossip][compress]") {
  const std::size_t n = 1300;  // two whole blocks of 512 and a partial one
  const auto v = spread_vector(n, 13);
  for (int bits : {8, 4}) {
    SECTION(cat(bits, " bits")) {
      CompressConfig c;
      c.kind = CompressKind::kQuantize;
      c.bits = bits;
      Compressor q(c, n, 1, 0);
      const int levels = bits == 8 ? 127 : 7;
      const std::size_t code_bytes = bits == 8 ? n : (n + 1) / 2;
      REQUIRE(q.packet_bytes() == kPacketHeaderBytes + 3 * 4 + code_bytes);
      std::vector<float> scale(3, 0.0f);
      for (std::size_t i = 0; i < n; ++i) scale[i / 512] = std::max(scale[i / 512], std::fabs(v[i]));
      const int draws = 4000;
      std::vector<double> mean(n, 0.0);
      std::vector<std::byte> packet;
      for (int r = 0; r < draws; ++r) {
        q.encode(v, r, Scaling::kContractive, packet);
        REQUIRE(packet.size() == q.packet_bytes());
        REQUIRE(check_packet(packet, n).empty());
        const auto got = decode_packet(packet, n);
        for (std::size_t i = 0; i < n; ++i) {
          const float step = scale[i / 512] / levels;
          REQUIRE(std::fabs(got[i] - v[i]) <= step * (1.0f + 1e-5f));
          mean[i] += got[i] / draws;
        }
      }
      for (std::size_t i = 0; i < n; ++i) {
        // Stochastic rounding: each draw is off by at most one step, so the mean of `draws` is
        // within 5 step / (2 sqrt(draws)) of v with overwhelming probability.
        const double step = scale[i / 512] / levels;
        REQUIRE(std::fabs(mean[i] - v[i]) < 5.0 * step / (2.0 * std::sqrt(draws)) + 1e-9);
      }
    }
  }
}

TEST_CASE("a packet that does not fit the model is refused before it is used",
          "[gossip][compress]") {
  const std::size_t n = 100;
  const auto v = spread_vector(n, 14);
  CompressConfig c;
  c.kind = CompressKind::kTopK;
  c.fraction = 0.1;
  std::vector<std::byte> sparse;
  Compressor(c, n, 1, 0).encode(v, 0, Scaling::kContractive, sparse);
  REQUIRE(check_packet(sparse, n).empty());
  REQUIRE_FALSE(check_packet(sparse, n + 1).empty());  // for another model
  auto truncated = sparse;
  truncated.pop_back();
  REQUIRE(check_packet(truncated, n).find("expected") != std::string::npos);
  REQUIRE_FALSE(check_packet(std::span(sparse).first(8), n).empty());
  auto out_of_range = sparse;
  const std::uint32_t big = 100;
  std::memcpy(out_of_range.data() + kPacketHeaderBytes + 9 * 4, &big, 4);  // the last index
  REQUIRE(check_packet(out_of_range, n).find("out of range") != std::string::npos);
  auto unsorted = sparse;
  std::swap_ranges(unsorted.begin() + kPacketHeaderBytes, unsorted.begin() + kPacketHeaderBytes + 4,
                   unsorted.begin() + kPacketHeaderBytes + 4);
  REQUIRE_FALSE(check_packet(unsorted, n).empty());
  auto nan = sparse;
  const float bad = std::numeric_limits<float>::quiet_NaN();
  std::memcpy(nan.data() + kPacketHeaderBytes + 10 * 4, &bad, 4);
  REQUIRE(check_packet(nan, n).find("NaN") != std::string::npos);
  auto unknown = sparse;
  unknown[0] = std::byte{9};
  REQUIRE(check_packet(unknown, n).find("unknown packet kind") != std::string::npos);

  c.kind = CompressKind::kQuantize;
  c.bits = 4;
  std::vector<std::byte> q4;
  Compressor(c, n, 1, 0).encode(v, 0, Scaling::kContractive, q4);
  REQUIRE(check_packet(q4, n).empty());
  q4.back() = std::byte{0};  // nibble 0 stands for code -8, outside -7..7
  REQUIRE(check_packet(q4, n).find("4-bit code") != std::string::npos);
  q4[1] = std::byte{5};
  REQUIRE(check_packet(q4, n).find("5 bits") != std::string::npos);

  c.bits = 8;
  std::vector<std::byte> q8;
  Compressor(c, n, 1, 0).encode(v, 0, Scaling::kContractive, q8);
  REQUIRE(check_packet(q8, n).empty());
  q8.back() = std::byte{0x80};  // -128: the encoder's codes are -127..127
  REQUIRE(check_packet(q8, n).find("8-bit code out of range at 99") != std::string::npos);
  auto reserved = q8;
  reserved[3] = std::byte{1};
  REQUIRE(check_packet(reserved, n).find("reserved bytes") != std::string::npos);

  std::vector<std::byte> dense;
  encode_dense(std::span(v).subspan(90), 90, dense);
  REQUIRE(check_packet(dense, n).empty());
  REQUIRE_FALSE(check_packet(dense, 95).empty());  // coordinates 90..99 of a model of 95
  // All-reduce takes a dense packet only when it is exactly the chunk it waits for.
  REQUIRE(check_chunk(dense, n, 90, 10).empty());
  REQUIRE(check_chunk(dense, n, 80, 10) ==
          "coordinates 90..100, expected the chunk of 10 floats from 80");
  REQUIRE(check_chunk(dense, n, 90, 9).find("expected the chunk of 9 floats") != std::string::npos);
  REQUIRE(check_chunk(sparse, n, 0, 10) ==
          "a packet that is not dense, expected the chunk of 10 floats from 0");
  REQUIRE(check_chunk(truncated, n, 0, 10).find("sparse packet of 10 coordinates is") == 0);
}

TEST_CASE("top_k and random_k at half width: varint gaps and 16-bit values, checked before use",
          "[gossip][compress]") {
  // Gaps of every varint length: 1 byte (< 128), 2 (< 16384), 3 (< 2^21), from index 0 on.
  const std::int64_t n = 3'000'000;
  std::vector<float> v(static_cast<std::size_t>(n), 0.0f);
  const std::vector<std::uint32_t> at = {0, 1, 100, 228, 5000, 2'100'000, 2'999'999};
  for (std::size_t j = 0; j < at.size(); ++j) v[at[j]] = 1.0f + 0.001f * static_cast<float>(j);
  CompressConfig c;
  c.kind = CompressKind::kTopK;
  c.fraction = static_cast<double>(at.size()) / static_cast<double>(n);
  Compressor bf16(c, n, 1, 0, WireFormat::kBf16);
  REQUIRE(bf16.kept() == std::ssize(at));
  std::vector<std::byte> packet;
  bf16.encode(v, 3, Scaling::kContractive, packet);
  REQUIRE(packet_header(packet).kind == PacketKind::kSparseBf16);
  // Gaps 0, 0, 98, 127, 4771, 2094999, 899998: 1+1+1+1+2+3+3 bytes, then 7 values of 2.
  REQUIRE(packet.size() == kPacketHeaderBytes + 12 + 7 * 2);
  REQUIRE(packet.size() <= bf16.packet_bytes());
  REQUIRE(check_packet(packet, n).empty());
  const auto got = decode_packet(packet, n);
  for (std::int64_t i = 0; i < n; ++i)
    REQUIRE(got[i] == math::round_to_wire(v[i], WireFormat::kBf16));
  REQUIRE(got[at[1]] != v[at[1]]);  // 1.001 is not a bfloat16: the value went rounded

  // The same selection as at fp32, in 3 bytes a coordinate at a 5 % density instead of 8.
  const auto w = spread_vector(2000, 21);
  c.fraction = 0.05;
  std::vector<std::byte> full, half;
  Compressor(c, 2000, 1, 0).encode(w, 1, Scaling::kContractive, full);
  Compressor(c, 2000, 1, 0, WireFormat::kFp16).encode(w, 1, Scaling::kContractive, half);
  REQUIRE(packet_header(half).kind == PacketKind::kSparseFp16);
  const auto a = decode_packet(full, 2000), b = decode_packet(half, 2000);
  std::size_t gap_bytes = 0;
  for (std::int64_t i = 0, before = -1; i < 2000; ++i)
    if (a[i] != 0.0f) {
      gap_bytes += i - before - 1 < 128 ? 1 : 2;
      before = i;
    }
  REQUIRE(gap_bytes < 110);  // about 1 byte a gap at 1 in 20
  REQUIRE(half.size() == kPacketHeaderBytes + gap_bytes + 100 * 2);
  for (std::size_t i = 0; i < a.size(); ++i) REQUIRE(b[i] == math::round_to_wire(a[i], WireFormat::kFp16));

  // Hostile packets: each is refused, naming what is wrong.
  const std::size_t values = packet.size() - 7 * 2;  // where the 16-bit values start
  auto truncated = packet;
  truncated.pop_back();
  REQUIRE(check_packet(truncated, n).find("index area") != std::string::npos);
  auto past = packet;  // the last gap, 3 bytes, made larger: the index leaves the model
  past[values - 1] = std::byte{0x7f};
  REQUIRE(check_packet(past, n).find("is past the model's 3000000") != std::string::npos);
  auto endless = packet;  // a varint that never ends within the area
  endless[values - 1] = std::byte{0x80};
  REQUIRE(check_packet(endless, n).find("is not a varint") != std::string::npos);
  std::vector<std::byte> wide(kPacketHeaderBytes);  // two gaps, the first of 6 bytes
  put_packet_header({PacketKind::kSparseBf16, 0, 2, 100}, wide.data());
  for (int j = 0; j < 5; ++j) wide.push_back(std::byte{0x80});
  for (int j = 0; j < 2; ++j) wide.push_back(std::byte{0x00});
  for (int j = 0; j < 2; ++j) {  // bf16 1.0
    wide.push_back(std::byte{0x80});
    wide.push_back(std::byte{0x3f});
  }
  REQUIRE(check_packet(wide, 100).find("gap 0 is not a varint of at most 32 bits") !=
          std::string::npos);
  wide.erase(wide.begin() + kPacketHeaderBytes, wide.begin() + kPacketHeaderBytes + 5);
  REQUIRE(check_packet(wide, 100).empty());  // gaps 0 and 0: indices 0 and 1
  wide.insert(wide.begin() + kPacketHeaderBytes + 2, std::byte{0x00});  // a stray byte
  REQUIRE(check_packet(wide, 100).find("1 bytes past its 2 gaps") != std::string::npos);
  auto nan = packet;
  nan[values] = std::byte{0xc0};
  nan[values + 1] = std::byte{0x7f};
  REQUIRE(check_packet(nan, n).find("holds NaN or Inf") != std::string::npos);
  REQUIRE(check_packet(packet, n - 1).find("for a model of 3000000") != std::string::npos);

  // fp16 cannot hold a kept value past 65504: the encoder says so instead of sending Inf.
  std::vector<float> big(100, 0.0f);
  big[7] = 70000.0f;
  c.fraction = 0.01;
  std::vector<std::byte> overflow;
  REQUIRE_THROWS_WITH(
      Compressor(c, 100, 1, 0, WireFormat::kFp16).encode(big, 4, Scaling::kContractive, overflow),
      Catch::Contains("fp16"));
  // quantize sends codes: a half-width wire is refused for it.
  c.kind = CompressKind::kQuantize;
  c.bits = 8;
  REQUIRE_THROWS_WITH(Compressor(c, 100, 1, 0, WireFormat::kBf16),
                      Catch::Contains("quantize sends every coordinate as a 4- or 8-bit code"));
}

TEST_CASE("packets made and added on a backend equal the host encoder's and add_packet's, bit "
          "for bit", "[gossip][compress]") {
  // The host encoder (Compressor::encode of a span) and add_packet are the reference; CHOCO uses
  // the backend path (Backend::quantize, scatter_add, dequantize_add, add_weighted).
  auto cpu = make_cpu_backend(1);
  const std::size_t n = 1300;
  auto v = spread_vector(n, 15);
  for (std::size_t i = 512; i < 1024; ++i) v[i] = 0.0f;  // a quantization block of zeros
  for (const CompressCase k : {CompressCase{CompressKind::kTopK, 0.05, 8}, CompressCase{CompressKind::kRandomK, 0.2, 8},
                               CompressCase{CompressKind::kQuantize, 1, 8}, CompressCase{CompressKind::kQuantize, 1, 4},
                               CompressCase{CompressKind::kNone, 1, 8},
                               CompressCase{CompressKind::kTopK, 0.05, 8, WireFormat::kBf16},
                               CompressCase{CompressKind::kRandomK, 0.2, 8, WireFormat::kFp16}}) {
    SECTION(k.name()) {
      const CompressConfig c = k.config();
      Compressor host(c, n, 5, 2, k.wire), on_backend(c, n, 5, 2, k.wire);
      PacketAdder adder(*cpu, n);
      for (std::int64_t round = 1; round < 4; ++round) {
        std::vector<std::byte> want, got;
        host.encode(v, round, Scaling::kContractive, want);
        on_backend.encode(*cpu, v.data(), round, Scaling::kContractive, got);
        REQUIRE(got == want);
        REQUIRE(check_packet(got, n).empty());
        // Added in place, and from an address no float may start at (as a frame may leave it).
        for (std::size_t offset : {0, 1}) {
          std::vector<std::byte> buffer(want.size() + offset);
          std::memcpy(buffer.data() + offset, want.data(), want.size());
          const std::span<const std::byte> packet(buffer.data() + offset, want.size());
          auto sum_host = test::random_vector(n, 16 + static_cast<unsigned>(round));
          auto sum_backend = sum_host;
          add_packet(packet, 0.3f, sum_host);
          adder.add(packet, 0.3f, sum_backend.data());
          REQUIRE(std::memcmp(sum_host.data(), sum_backend.data(), n * sizeof(float)) == 0);
        }
      }
    }
  }
  SECTION("dense") {
    std::vector<std::byte> want, got;
    encode_dense(v, 0, want);
    encode_dense(*cpu, v.data(), static_cast<std::int64_t>(n), got);
    REQUIRE(got == want);
  }
}

// ---- CHOCO-SGD, all-reduce, overlap ---------------------------------------------------------

TEST_CASE("CHOCO preserves the average of the models and reaches it through compressed copies",
          "[gossip][choco]") {
  struct Case {
    CompressKind kind;
    double fraction;
    int bits;
    double gamma;
    WireFormat wire = WireFormat::kFp32;
  };
  for (const Case k : {Case{CompressKind::kTopK, 0.1, 8, 0.3}, Case{CompressKind::kRandomK, 0.2, 8, 0.2},
                       Case{CompressKind::kQuantize, 0.01, 8, 0.9}, Case{CompressKind::kQuantize, 0.01, 4, 0.6},
                       Case{CompressKind::kTopK, 0.1, 8, 0.3, WireFormat::kBf16}}) {
    SECTION(cat(compress_kind_name(k.kind), " ",
                k.kind == CompressKind::kQuantize ? k.bits : k.fraction, " ",
                wire_format_name(k.wire))) {
      const Topology t = generate("ring", 8);
      GossipConfig g;
      g.algorithm = AlgorithmKind::kChoco;
      g.wire = k.wire;
      g.choco.compress.kind = k.kind;
      g.choco.compress.fraction = k.fraction;
      g.choco.compress.bits = k.bits;
      g.choco.consensus_step = k.gamma;
      ConsensusPeers peers(t, g, 300);
      const auto before = peers.mean();
      const double d0 = peers.spread();
      peers.rounds(0, 400);
      const auto after = peers.mean();
      // The consensus step moves x_i by gamma sum_j W_ij (xhat_j - xhat_i); with a doubly
      // stochastic W these cancel over the peers, whatever the compressor sent (up to the
      // float rounding of 400 rounds of running sums; the peers start 0.35 apart on average).
      for (std::size_t i = 0; i < before.size(); ++i)
        REQUIRE(after[i] == Approx(before[i]).margin(1e-3));
      REQUIRE(peers.spread() < 1e-4 * d0);  // and the peers reached it
    }
  }
}

TEST_CASE("CHOCO through the backend ends bit-identical to the host loops it replaced",
          "[gossip][choco]") {
  // The reference is CHOCO as it ran before its element work moved to Backend operations: host
  // vectors, Compressor::encode of a span, add_packet, and the consensus step in a loop.
  for (const CompressCase k : {CompressCase{CompressKind::kTopK, 0.1, 8}, CompressCase{CompressKind::kRandomK, 0.2, 8},
                               CompressCase{CompressKind::kQuantize, 1, 8}, CompressCase{CompressKind::kQuantize, 1, 4},
                               CompressCase{CompressKind::kNone, 1, 8},
                               CompressCase{CompressKind::kTopK, 0.1, 8, WireFormat::kBf16}}) {
    SECTION(k.name()) {
      const Topology t = generate("ring", 5);
      GossipConfig g;
      g.algorithm = AlgorithmKind::kChoco;
      g.choco.compress = k.config();
      g.wire = k.wire;
      const std::int64_t dim = 1100;
      ConsensusPeers peers(t, g, dim);
      const int np = t.n();
      auto x = peers.x;
      std::vector<std::vector<float>> xhat(np, std::vector<float>(dim, 0.0f)), s = xhat;
      std::vector<Compressor> compressors;
      for (int p = 0; p < np; ++p)
        compressors.emplace_back(g.choco.compress, dim, 1, p, g.wire);
      const auto gamma = static_cast<float>(consensus_step(g.choco));
      const std::int64_t rounds = 12;
      for (std::int64_t r = 0; r < rounds; ++r) {
        std::vector<std::vector<std::byte>> packets(np);
        for (int p = 0; p < np; ++p) {
          std::vector<float> diff(dim);
          for (std::int64_t i = 0; i < dim; ++i) diff[i] = x[p][i] - xhat[p][i];
          if (r == 0)
            encode_dense(diff, 0, packets[p]);
          else
            compressors[p].encode(diff, r, Scaling::kContractive, packets[p]);
        }
        for (int p = 0; p < np; ++p) {
          bool self_done = false;
          auto add_self = [&] {
            add_packet(packets[p], static_cast<float>(t.self_weight(p, r)), s[p]);
            self_done = true;
          };
          for (const auto& nb : t.in_neighbours(p, r)) {
            if (!self_done && nb.peer > p) add_self();
            add_packet(packets[nb.peer], static_cast<float>(nb.weight), s[p]);
          }
          if (!self_done) add_self();
          add_packet(packets[p], 1.0f, xhat[p]);
          for (std::int64_t i = 0; i < dim; ++i)
            x[p][i] = math::choco_step(x[p][i], s[p][i], xhat[p][i], gamma);
        }
      }
      peers.rounds(0, rounds);
      for (int p = 0; p < np; ++p)
        REQUIRE(std::memcmp(x[p].data(), peers.x[p].data(), dim * sizeof(float)) == 0);
      REQUIRE(x[0] != std::vector<float>(peers.x[0].size(), 0.0f));
    }
  }
}

TEST_CASE("CHOCO sends a fraction of the bytes and refuses graphs that change every round",
          "[gossip][choco]") {
  const Topology t = generate("ring", 4);
  GossipConfig g;
  g.algorithm = AlgorithmKind::kChoco;
  g.choco.compress.kind = CompressKind::kTopK;
  g.choco.compress.fraction = 0.01;
  const std::int64_t dim = 10000;
  ConsensusPeers peers(t, g, dim);
  peers.rounds(0, 1);  // round 0 sends the whole difference: the copies start exact
  const auto first = peers.network.exchange(0).bytes_sent();
  REQUIRE(first == 2 * (kPacketHeaderBytes + dim * 4 + kPacketOverheadBytes));
  peers.rounds(1, 11);
  const auto later = peers.network.exchange(0).bytes_sent() - first;
  REQUIRE(later == 10 * 2 * (kPacketHeaderBytes + 100 * 8 + kPacketOverheadBytes));

  GeneratorSpec s;
  s.kind = gossip::GeneratorKind::kOnePeerExponential;
  s.n = 8;
  const Topology changing = make_topology(s);
  REQUIRE(changing.period() > 1);
  REQUIRE_THROWS_WITH(ConsensusPeers(changing, g, 4), Catch::Contains("the same every round"));
}

TEST_CASE("CHOCO with gossip_steps S takes S consensus steps a round: uncompressed, x <- "
          "((1 - gamma) I + gamma W)^S x; top_k sends S packets a round and keeps the average",
          "[gossip][choco]") {
  const Topology t = generate("ring", 6);
  const int n = t.n();
  GossipConfig g;
  g.algorithm = AlgorithmKind::kChoco;
  g.choco.compress.kind = CompressKind::kNone;
  g.choco.consensus_step = 0.4;
  g.choco.gossip_steps = 3;
  const std::int64_t dim = 50;
  ConsensusPeers peers(t, g, dim);
  REQUIRE(peers.algs[0]->relay_steps() == 2);
  // Without compression every send makes the public copy the model (xhat += x - xhat), so each
  // step is x_i <- (1 - gamma) x_i + gamma sum_j W_ij x_j: S of them a round, in double here.
  std::vector<std::vector<double>> want(n);
  for (int p = 0; p < n; ++p) want[p].assign(peers.x[p].begin(), peers.x[p].end());
  const int rounds = 2;
  const double gamma = g.choco.consensus_step;
  for (int step = 0; step < rounds * g.choco.gossip_steps; ++step) {
    std::vector<std::vector<double>> next(n, std::vector<double>(dim, 0.0));
    for (int p = 0; p < n; ++p) {
      const double self = t.self_weight(p, 0);
      for (std::int64_t i = 0; i < dim; ++i)
        next[p][i] = (1 - gamma) * want[p][i] + gamma * self * want[p][i];
      for (const auto& nb : t.in_neighbours(p, 0))
        for (std::int64_t i = 0; i < dim; ++i)
          next[p][i] += gamma * nb.weight * want[nb.peer][i];
    }
    want = std::move(next);
  }
  peers.rounds(0, rounds);
  for (int p = 0; p < n; ++p)
    for (std::int64_t i = 0; i < dim; ++i) REQUIRE(peers.x[p][i] == Approx(want[p][i]).margin(1e-5));

  // top_k at bf16: S packets of k coordinates a round per link (round 0's first one whole).
  g.choco.compress.kind = CompressKind::kTopK;
  g.choco.compress.fraction = 0.05;
  g.wire = WireFormat::kBf16;
  g.choco.consensus_step = 0.1;
  ConsensusPeers sparse(t, g, 400);
  const auto before = sparse.mean();
  std::vector<std::uint64_t> sent;
  for (std::int64_t r = 0; r < 300; ++r) {
    sparse.rounds(r, r + 1);
    sent.push_back(sparse.network.exchange(0).bytes_sent());
  }
  // A packet of 20 of 400 coordinates: a 16-byte header, then 1 or 2 bytes of gap and 2 of
  // value each, and the transport's overhead.
  const std::uint64_t lo = kPacketHeaderBytes + 20 * 3 + kPacketOverheadBytes;
  const std::uint64_t hi = kPacketHeaderBytes + 20 * 4 + kPacketOverheadBytes;
  // Round 0: the whole difference at fp32 to both neighbours, then two packets each.
  const std::uint64_t dense = 2 * (kPacketHeaderBytes + 400 * 4 + kPacketOverheadBytes);
  REQUIRE(sent[0] >= dense + 2 * 2 * lo);
  REQUIRE(sent[0] <= dense + 2 * 2 * hi);
  for (std::size_t r = 1; r < sent.size(); ++r) {  // then 2 links x 3 packets a round
    REQUIRE(sent[r] - sent[r - 1] >= 2 * 3 * lo);
    REQUIRE(sent[r] - sent[r - 1] <= 2 * 3 * hi);
  }
  const auto after = sparse.mean();
  for (std::size_t i = 0; i < before.size(); ++i) REQUIRE(after[i] == Approx(before[i]).margin(1e-3));
  REQUIRE(sparse.spread() < 1e-3);
}

TEST_CASE("all-reduce equals exact averaging", "[gossip][allreduce]") {
  for (int n : {2, 3, 8, 16}) {
    for (std::int64_t dim : {1001, 5}) {  // uneven chunks; fewer floats than peers
      SECTION(cat(n, " peers, ", dim, " floats")) {
        const Topology t = generate(n == 2 ? "complete" : "ring", n);  // only n matters
        GossipConfig g;
        g.algorithm = AlgorithmKind::kAllreduce;
        ConsensusPeers peers(t, g, dim);
        REQUIRE(peers.algs[0]->relay_steps() == 2 * (n - 1) - 1);
        const auto mean = peers.mean();  // in double
        double scale = 0.0;
        for (const auto& v : peers.x)
          for (float f : v) scale = std::max(scale, static_cast<double>(std::fabs(f)));
        peers.rounds(0, 1);
        for (const auto& v : peers.x) {
          REQUIRE(v == peers.x.front());  // every peer holds the same bits
          for (std::int64_t i = 0; i < dim; ++i)
            REQUIRE(std::fabs(v[i] - mean[i]) <= n * scale * 6e-8);  // float rounding of n sums
        }
        // Each peer sent 2 (n - 1) chunks of about dim / n floats: the bytes of ring all-reduce.
        std::uint64_t bytes = 0;
        for (int p = 0; p < n; ++p) bytes += peers.network.exchange(p).bytes_sent();
        REQUIRE(bytes == static_cast<std::uint64_t>(2 * (n - 1)) *
                             (static_cast<std::uint64_t>(dim) * 4 +
                              n * (kPacketHeaderBytes + kPacketOverheadBytes)));
      }
    }
  }
}

TEST_CASE("mixing bf16 messages keeps each peer's own parameters as its base and the average "
          "within the rounding bound; bytes_sent halves",
          "[gossip][wire]") {
  // Ring of 8, weights 1/3, one round of pure averaging. Peer i gets its neighbours' messages
  // rounded, m_j = bf16(x_j), and mixes them against its own as they got it, r_i = bf16(x_i):
  // x_i' = x_i + sum_j W_ij (m_j - r_i). Rounding moves a value by at most 2^-8 of itself, so no
  // coordinate of the average moves by more than (1/n) sum_j (1 - W_jj) 2^-8 |x_j|; with
  // symmetric weights the differences cancel pairwise and it moves by float32's rounding alone.
  const int n = 8;
  const Topology t = generate("ring", n);
  const std::int64_t dim = 4000;
  GossipConfig g;
  ConsensusPeers exact(t, g, dim);
  g.wire = WireFormat::kBf16;
  ConsensusPeers half(t, g, dim);
  REQUIRE(half.x == exact.x);  // the same start
  const auto start = half.x;
  const auto mean = half.mean();
  exact.rounds(0, 1);
  half.rounds(0, 1);
  const auto mean_after = half.mean();
  for (std::int64_t k = 0; k < dim; ++k) {
    double bound = 0.0, scale = 0.0;
    for (int j = 0; j < n; ++j) {
      bound += (2.0 / 3.0) * 0x1p-8 * std::fabs(start[j][k]) / n;
      scale = std::max(scale, static_cast<double>(std::fabs(start[j][k])));
    }
    const double float_sums = 8 * 0x1p-24 * scale;
    REQUIRE(std::fabs(mean_after[k] - mean[k]) <= std::min(bound, float_sums) + 1e-12);
  }
  // Each peer's result, against the same sum in double, and against the pull the other form
  // (W_ii x_i + sum_j W_ij m_j) would give: the check tells the two apart.
  std::size_t differs_from_naive = 0, rounded_moved = 0;
  for (int i = 0; i < n; ++i) {
    const int l = (i + n - 1) % n, r = (i + 1) % n;
    for (std::int64_t k = 0; k < dim; ++k) {
      auto b = [&](int j) {
        return static_cast<double>(math::round_to_wire(start[j][k], WireFormat::kBf16));
      };
      const double want = start[i][k] + (b(l) - b(i)) / 3.0 + (b(r) - b(i)) / 3.0;
      const double naive = (start[i][k] + b(l) + b(r)) / 3.0;
      REQUIRE(half.x[i][k] == Approx(want).margin(1e-6 * (1 + std::fabs(want))));
      differs_from_naive += std::fabs(naive - want) > 1e-5 * (1 + std::fabs(want));
      rounded_moved += half.x[i][k] != exact.x[i][k];
    }
  }
  CHECK(differs_from_naive > static_cast<std::size_t>(dim));
  CHECK(rounded_moved > static_cast<std::size_t>(dim));  // the messages were rounded
  // 2 bytes a parameter, and the same 40 bytes of frame header and weight per message.
  CHECK(exact.network.exchange(0).bytes_sent() == 2 * (4 * dim + kMessageOverheadBytes));
  CHECK(half.network.exchange(0).bytes_sent() == 2 * (2 * dim + kMessageOverheadBytes));
}

TEST_CASE("peers that agree stay where they are at half width, off the 16-bit grid",
          "[gossip][wire]") {
  // Every peer holds the same values, none of them a bf16 value: a round of averaging must not
  // move them towards bf16's grid (every message rounds alike), as mixing x_i itself with the
  // rounded neighbours would, by 2/3 of the way each round.
  for (const char* algorithm : {"dpsgd", "push_sum"}) {
    INFO(algorithm);
    const int n = 6;
    const Topology t = generate("ring", n, std::string(algorithm) == "push_sum"
                                               ? std::optional(WeightKind::kPushSum)
                                               : std::nullopt);
    GossipConfig g;
    g.algorithm = parse_algorithm(algorithm, "test");
    g.wire = WireFormat::kBf16;
    const std::int64_t dim = 64;
    ConsensusPeers peers(t, g, dim);
    for (auto& v : peers.x)
      for (std::int64_t k = 0; k < dim; ++k)
        v[k] = 1.0f + 0x1p-9f + static_cast<float>(k) * 0x1p-12f;
    const auto start = peers.x.front();
    float off_grid = 0.0f;
    for (float v : start)
      off_grid = std::max(off_grid, std::fabs(v - math::round_to_wire(v, WireFormat::kBf16)));
    REQUIRE(off_grid > 1e-3);
    peers.rounds(0, 50);
    for (const auto& v : peers.x)
      for (std::int64_t k = 0; k < dim; ++k)
        REQUIRE(std::fabs(v[k] - start[k]) <= 50 * 4 * 0x1p-23);  // float32's rounding, no pull
  }
}

TEST_CASE("all-reduce at half width: every peer ends with the same rounded average, in half the "
          "bytes",
          "[gossip][wire][allreduce]") {
  const int n = 5;
  const std::int64_t dim = 1003;
  const Topology t = generate("ring", n);
  for (const WireFormat w : {WireFormat::kBf16, WireFormat::kFp16}) {
    INFO(wire_format_name(w));
    GossipConfig g;
    g.algorithm = AlgorithmKind::kAllreduce;
    g.wire = w;
    ConsensusPeers peers(t, g, dim);
    const auto mean = peers.mean();
    const auto start = peers.x;
    peers.rounds(0, 1);
    // Every hop rounds what it sends: partial sums of up to n - 1 values (each off by at most a
    // step of itself), then the average. Summed and divided by n, that is below n steps of the
    // largest |x_j| at that coordinate.
    const double step = w == WireFormat::kBf16 ? 0x1p-8 : 0x1p-11;
    double off = 0.0;
    for (const auto& v : peers.x) {
      REQUIRE(v == peers.x.front());  // the chunk's owner keeps the rounded chunk too
      for (std::int64_t i = 0; i < dim; ++i) {
        double largest = 0.0;
        for (const auto& s : start) largest = std::max(largest, std::fabs(double{s[i]}));
        REQUIRE(v[i] == math::round_to_wire(v[i], w));  // exactly what travelled
        REQUIRE(std::fabs(v[i] - mean[i]) <= n * step * largest);
        off = std::max(off, std::fabs(v[i] - mean[i]));
      }
    }
    CHECK(off > 1e-4);  // not float32's exact average: the chunks did travel rounded
    std::uint64_t bytes = 0;
    for (int p = 0; p < n; ++p) bytes += peers.network.exchange(p).bytes_sent();
    CHECK(bytes == static_cast<std::uint64_t>(2 * (n - 1)) *
                       (static_cast<std::uint64_t>(dim) * 2 +
                        n * (kPacketHeaderBytes + kPacketOverheadBytes)));
  }
}

TEST_CASE("all-reduce at half width keeps updates smaller than a 16-bit step", "[gossip][wire]"
          "[allreduce]") {
  // Every peer starts at 1 (a bf16 value; its step there is 2^-7) and each round's local step
  // adds 1e-4, far below half a step. Reducing the parameters themselves at bf16 would round
  // every round's result back to 1; reducing the change since the last round keeps it.
  const int n = 4;
  const std::int64_t dim = 10;
  const Topology t = generate("ring", n);
  auto backend = make_cpu_backend(1);
  SimNetwork network(n, dim, 2, SimConfig{}, 1, WireFormat::kBf16);
  GossipConfig g;
  g.algorithm = AlgorithmKind::kAllreduce;
  g.wire = WireFormat::kBf16;
  std::vector<std::vector<float>> x(n, std::vector<float>(dim, 1.0f));
  std::vector<std::unique_ptr<Algorithm>> algs;
  for (int p = 0; p < n; ++p) {
    float* xp = x[p].data();
    auto step = [xp] {
      for (std::int64_t i = 0; i < dim; ++i) xp[i] += 1e-4f;
      return 0.0;
    };
    algs.push_back(
        make_algorithm(Learner{backend.get(), xp, dim, step}, network.exchange(p), t, g));
  }
  const int rounds = 20;
  for (int r = 0; r < rounds; ++r) {
    for (auto& a : algs) a->local_phase(r);
    for (int s = 0; s < algs.front()->relay_steps(); ++s)
      for (auto& a : algs) a->relay_phase(r, s);
    for (auto& a : algs) a->mix_phase(r);
  }
  // Round 0 averages the models themselves (1.0001 rounds to 1); each later round adds its
  // change, itself rounded to bf16 (within 2^-8 of 1e-4).
  for (const auto& v : x) {
    REQUIRE(v == x.front());
    for (float f : v) REQUIRE(f == Approx(1.0 + (rounds - 1) * 1e-4).margin(2e-6));
  }
  // The common model is the algorithm's state: a checkpoint keeps it, and refuses another size.
  const auto state = algs[0]->state();
  CHECK(state.buffers == x.front());
  CHECK_NOTHROW(algs[1]->restore(state));
  auto wrong = state;
  wrong.buffers.pop_back();
  CHECK_THROWS_WITH(
      algs[1]->restore(wrong),
      Catch::Contains("the checkpoint holds 9 floats of allreduce state, expected 10"));
}

TEST_CASE("dense packets at half width: 2 bytes a value, checked as float32 ones",
          "[gossip][wire]") {
  const std::int64_t n = 100;
  std::vector<float> v(n);
  for (std::int64_t i = 0; i < n; ++i) v[i] = 0.37f * static_cast<float>(i) - 11.0f;
  for (const WireFormat w : {WireFormat::kBf16, WireFormat::kFp16}) {
    INFO(wire_format_name(w));
    std::vector<std::byte> p;
    REQUIRE(encode_dense(std::span(v).subspan(90), 90, p, w));
    CHECK(p.size() == kPacketHeaderBytes + 10 * 2);
    CHECK(packet_header(p).kind == dense_kind(w));
    REQUIRE(check_packet(p, n).empty());
    CHECK(check_chunk(p, n, 90, 10, w).empty());
    CHECK(check_chunk(p, n, 90, 10) == cat("a dense packet of ", wire_format_name(w),
                                           " values, expected fp32 ones (gossip.wire)"));
    std::vector<float> target(n, 1.0f), copied(n, 0.0f);
    add_packet(p, 2.0f, target);
    copy_packet(p, copied);
    for (std::int64_t i = 90; i < n; ++i) {
      CHECK(copied[i] == math::round_to_wire(v[i], w));
      CHECK(target[i] == 1.0f + 2.0f * math::round_to_wire(v[i], w));
    }
    CHECK(target[0] == 1.0f);
    auto nan = p;
    const std::uint16_t q = w == WireFormat::kBf16 ? 0x7fc0 : 0x7e00;
    std::memcpy(nan.data() + kPacketHeaderBytes + 6, &q, 2);
    CHECK(check_packet(nan, n) == cat("dense ", wire_format_name(w), " packet holds NaN or Inf"));
    auto cut = p;
    cut.pop_back();
    CHECK(check_packet(cut, n) == cat("dense ", wire_format_name(w), " packet of 10 values is 35 "
                                      "bytes, expected 36"));
  }
  std::vector<std::byte> p;
  v[3] = 1.0e5f;
  CHECK_FALSE(encode_dense(v, 0, p, WireFormat::kFp16));  // 1e5 has no fp16
  CHECK(encode_dense(v, 0, p, WireFormat::kBf16));
}

TEST_CASE("a value fp16 cannot hold stops the simulated peer that would send it, naming it",
          "[gossip][wire]") {
  const Topology t = generate("ring", 3);
  SimNetwork net(3, 4, 1, SimConfig{}, 1, WireFormat::kFp16);
  const std::vector<float> x{1.0f, 2.0f, 1.0e5f, 3.0f};
  const std::vector<int> to{1, 2};
  CHECK_THROWS_WITH(net.exchange(0).publish(2, x, 1.0, to),
                    Catch::Contains("gossip.wire fp16: parameter 2 of round 2 is 100000, beyond "
                                    "fp16's largest finite value 65504"));
  SimNetwork bf16(3, 4, 1, SimConfig{}, 1, WireFormat::kBf16);
  bf16.exchange(0).publish(2, x, 1.0, to);
  const auto got = bf16.exchange(1).collect(2, std::vector<int>{0}, CollectOptions{});
  REQUIRE(got.size() == 1);
  CHECK(got[0].params[2] == 99840.0f);  // bf16: 8 significant bits, 1e5 to the nearest
}

namespace {
/// Four peers on the 1/3-weighted ring (made lazy by `laziness`), each of 3 parameters starting
/// at (p, -2p, 0.5), whose local step pulls x towards its own target: x <- x - 0.25 (x - (10 p +
/// i)). Runs `rounds` rounds of the algorithm `g` describes and returns every peer's parameters.
std::vector<std::vector<float>> run_pulled_ring(const GossipConfig& g, int rounds,
                                                std::vector<std::unique_ptr<Algorithm>>* kept =
                                                    nullptr,
                                                double laziness = 0.0) {
  const int n = 4;
  constexpr int dim = 3;
  const Topology t = make_lazy(generate("ring", n), laziness);
  static auto backend = make_cpu_backend(1);
  SimNetwork network(n, dim, 1, SimConfig{}, 1);
  std::vector<std::vector<float>> x(n);
  std::vector<std::unique_ptr<Algorithm>> algs;
  for (int p = 0; p < n; ++p) x[p] = {1.0f * p, -2.0f * p, 0.5f};
  for (int p = 0; p < n; ++p) {
    float* xp = x[p].data();
    auto step = [xp, p] {
      for (int i = 0; i < 3; ++i) xp[i] -= 0.25f * (xp[i] - static_cast<float>(10 * p + i));
      return 0.0;
    };
    algs.push_back(make_algorithm(Learner{backend.get(), xp, dim, step}, network.exchange(p), t,
                                  g));
  }
  for (int r = 0; r < rounds; ++r) {
    for (auto& a : algs) a->local_phase(r);
    for (auto& a : algs) a->mix_phase(r);
  }
  if (kept) *kept = std::move(algs);
  return x;
}
}  // namespace

TEST_CASE("overlap mixes the parameters that were sent and adds the local steps' change",
          "[gossip][overlap]") {
  // Peer p's "step" pulls x towards its own target: x <- x - 0.25 (x - target_p). With overlap
  // the round is x_i <- sum_j W_ij x_j + (x_i' - x_i), x_i' the parameters after `period` steps
  // from x_i; without it, the steps come first and the mix is of the stepped parameters.
  const int n = 4;  // on the 1/3-weighted ring (run_pulled_ring)
  constexpr int dim = 3;
  auto run = [&](bool overlap, int rounds) {
    GossipConfig g;
    g.algorithm = AlgorithmKind::kLocalSgd;
    g.period = 2;
    g.overlap = overlap;
    std::vector<std::unique_ptr<Algorithm>> algs;
    auto x = run_pulled_ring(g, rounds, &algs);
    REQUIRE(algs[0]->overlaps() == overlap);
    return x;
  };
  // The documented update in double.
  std::vector<std::vector<double>> want(n), plain(n);
  for (int p = 0; p < n; ++p) want[p] = plain[p] = {1.0 * p, -2.0 * p, 0.5};
  auto steps = [](std::vector<double> v, int p) {
    for (int s = 0; s < 2; ++s)
      for (int i = 0; i < dim; ++i) v[i] -= 0.25 * (v[i] - (10 * p + i));
    return v;
  };
  const int rounds = 3;
  for (int r = 0; r < rounds; ++r) {
    auto next = want, next_plain = plain;
    std::vector<std::vector<double>> stepped(n);
    for (int p = 0; p < n; ++p) stepped[p] = steps(plain[p], p);
    for (int p = 0; p < n; ++p) {
      const auto local = steps(want[p], p);
      for (int i = 0; i < dim; ++i) {
        double mix = 0.0, mix_plain = 0.0;
        for (int j : {(p + n - 1) % n, p, (p + 1) % n}) {
          mix += want[j][i] / 3.0;
          mix_plain += stepped[j][i] / 3.0;
        }
        next[p][i] = mix + (local[i] - want[p][i]);
        next_plain[p][i] = mix_plain;
      }
    }
    want = next;
    plain = next_plain;
  }
  const auto got = run(true, rounds);
  const auto got_plain = run(false, rounds);
  double apart = 0.0;
  for (int p = 0; p < n; ++p)
    for (int i = 0; i < dim; ++i) {
      REQUIRE(got[p][i] == Approx(want[p][i]).margin(1e-5));
      REQUIRE(got_plain[p][i] == Approx(plain[p][i]).margin(1e-5));
      apart = std::max(apart, std::fabs(want[p][i] - plain[p][i]));
    }
  REQUIRE(apart > 0.1);  // the two forms differ, so the test tells them apart
}

TEST_CASE("local SGD's outer Nesterov step follows DiLoCo's update, and lr 1 momentum 0 is "
          "plain local SGD", "[gossip][outer]") {
  // The overlap test's problem: peer p's step pulls x towards its target 10 p + i. Each round,
  // with a the parameters the local phase began from and m the ring mix of the stepped ones:
  // g = a - m, v <- mu v + g, x <- a - lr (g + mu v).
  const int n = 4;
  const Topology t = generate("ring", n);
  constexpr int dim = 3;
  auto backend = make_cpu_backend(1);
  auto run = [&](bool outer, double lr, double mu, int rounds) {
    GossipConfig g;
    g.algorithm = AlgorithmKind::kLocalSgd;
    g.period = 2;
    g.outer = OuterConfig{.enabled = outer, .lr = lr, .momentum = mu, .compress = {}};
    return run_pulled_ring(g, rounds);
  };
  const double lr = 0.7, mu = 0.9;
  const int rounds = 4;
  std::vector<std::vector<double>> a(n), v(n, std::vector<double>(dim, 0.0));
  for (int p = 0; p < n; ++p) a[p] = {1.0 * p, -2.0 * p, 0.5};
  for (int r = 0; r < rounds; ++r) {
    std::vector<std::vector<double>> stepped = a;
    for (int p = 0; p < n; ++p)
      for (int s = 0; s < 2; ++s)
        for (int i = 0; i < dim; ++i) stepped[p][i] -= 0.25 * (stepped[p][i] - (10 * p + i));
    auto next = a;
    for (int p = 0; p < n; ++p)
      for (int i = 0; i < dim; ++i) {
        double m = 0.0;
        for (int j : {(p + n - 1) % n, p, (p + 1) % n}) m += stepped[j][i] / 3.0;
        const double g = a[p][i] - m;
        v[p][i] = mu * v[p][i] + g;
        next[p][i] = a[p][i] - lr * (g + mu * v[p][i]);
      }
    a = next;
  }
  const auto got = run(true, lr, mu, rounds);
  for (int p = 0; p < n; ++p)
    for (int i = 0; i < dim; ++i) REQUIRE(got[p][i] == Approx(a[p][i]).margin(1e-4));
  // lr 1, momentum 0: the averaging itself, bit for bit.
  const auto plain = run(false, 1.0, 0.0, rounds);
  const auto unit = run(true, 1.0, 0.0, rounds);
  for (int p = 0; p < n; ++p)
    for (int i = 0; i < dim; ++i) REQUIRE(unit[p][i] == plain[p][i]);
  double apart = 0.0;
  for (int p = 0; p < n; ++p)
    for (int i = 0; i < dim; ++i) apart = std::max(apart, double{std::fabs(got[p][i] - plain[p][i])});
  REQUIRE(apart > 0.1);  // the outer step changes the run, so the test tells them apart
  // Only local_sgd takes it, and not beside overlap: refused with what to change.
  SimNetwork network(n, dim, 1, SimConfig{}, 1);
  std::vector<float> x(dim, 0.0f);
  GossipConfig g;
  g.outer.enabled = true;
  g.algorithm = AlgorithmKind::kDpsgd;
  CHECK_THROWS_WITH(make_algorithm(Learner{backend.get(), x.data(), dim, {}},
                                   network.exchange(0), t, g),
                    "gossip.outer: the outer step is for local_sgd, not dpsgd");
  g.algorithm = AlgorithmKind::kLocalSgd;
  g.overlap = true;
  CHECK_THROWS_WITH(make_algorithm(Learner{backend.get(), x.data(), dim, {}},
                                   network.exchange(0), t, g),
                    Catch::StartsWith("gossip.outer: the outer step needs"));
}

TEST_CASE("gradient tracking (D²) follows its update and settles every peer at the minimiser of "
          "the average loss, where D-PSGD stays biased towards each peer's own",
          "[gossip][tracking]") {
  // run_pulled_ring's problem: peer p's loss is |x - t_p|^2 / 2 with t_p = 10 p + i, so the
  // average loss is least at 15 + i. On the ring of 4 made lazy by 0.25 (self 1/2, neighbours
  // 1/4; its eigenvalues 1, 1/2, 1/2, 0), with h the parameters after the local phase:
  // round 0 sends h (D-PSGD's), later rounds h + c, c = x - h of the round before; x = W sent.
  const int n = 4;
  constexpr int dim = 3;
  auto run = [](AlgorithmKind kind, int rounds) {
    GossipConfig g;
    g.algorithm = kind;
    g.period = 2;
    return run_pulled_ring(g, rounds, nullptr, 0.25);
  };
  auto stepped = [](std::vector<double> v, int p) {
    for (int s = 0; s < 2; ++s)
      for (int i = 0; i < dim; ++i) v[i] -= 0.25 * (v[i] - (10 * p + i));
    return v;
  };
  std::vector<std::vector<double>> x(n), c(n, std::vector<double>(dim, 0.0));
  for (int p = 0; p < n; ++p) x[p] = {1.0 * p, -2.0 * p, 0.5};
  const int rounds = 5;
  for (int r = 0; r < rounds; ++r) {
    std::vector<std::vector<double>> h(n), sent(n);
    for (int p = 0; p < n; ++p) {
      h[p] = stepped(x[p], p);
      sent[p] = h[p];
      for (int i = 0; i < dim; ++i) sent[p][i] += c[p][i];
    }
    for (int p = 0; p < n; ++p)
      for (int i = 0; i < dim; ++i) {
        x[p][i] = 0.5 * sent[p][i] + 0.25 * (sent[(p + 1) % n][i] + sent[(p + n - 1) % n][i]);
        c[p][i] = x[p][i] - h[p][i];
      }
    // The corrections sum to zero over the peers: the average moves as SGD on the average loss.
    for (int i = 0; i < dim; ++i) {
      double sum = 0.0;
      for (int p = 0; p < n; ++p) sum += c[p][i];
      REQUIRE(std::fabs(sum) < 1e-9);
    }
  }
  const auto got = run(AlgorithmKind::kGradientTracking, rounds);
  for (int p = 0; p < n; ++p)
    for (int i = 0; i < dim; ++i) REQUIRE(got[p][i] == Approx(x[p][i]).margin(1e-4));
  // With the same constant step every peer reaches 15 + i; D-PSGD settles where each peer's pull
  // towards its own target balances its disagreement with the neighbours, points apart.
  const auto tracked = run(AlgorithmKind::kGradientTracking, 300);
  const auto plain = run(AlgorithmKind::kDpsgd, 300);
  double tracked_error = 0.0, plain_error = 0.0;
  for (int p = 0; p < n; ++p)
    for (int i = 0; i < dim; ++i) {
      tracked_error = std::max(tracked_error, std::fabs(tracked[p][i] - (15.0 + i)));
      plain_error = std::max(plain_error, std::fabs(plain[p][i] - (15.0 + i)));
    }
  CHECK(tracked_error < 1e-3);
  CHECK(plain_error > 3.0);
}

TEST_CASE("gradient tracking refuses graphs on which D² is not defined, and robust aggregates",
          "[gossip][tracking]") {
  auto backend = make_cpu_backend(1);
  std::vector<float> x(3, 0.0f);
  auto make = [&](const Topology& t, GossipConfig g) {
    SimNetwork network(t.n(), 3, 1, SimConfig{}, 1);
    g.algorithm = AlgorithmKind::kGradientTracking;
    return make_algorithm(Learner{backend.get(), x.data(), 3, {}}, network.exchange(0), t, g);
  };
  // The ring of even n with weights 1/3 has eigenvalue -1/3 exactly: refused, naming the fix.
  CHECK_THROWS_WITH(make(generate("ring", 4), {}),
                    Catch::StartsWith("gossip.algorithm: gradient_tracking (D²) needs every "
                                      "eigenvalue of W above -1/3") &&
                        Catch::Contains("-0.333333") && Catch::Contains("laziness: 0.1"));
  // An odd ring's smallest is 1/3 + 2/3 cos(4 pi / 5) ~ -0.206: accepted as it is.
  CHECK(make(generate("ring", 5), {})->name() == "gradient_tracking");
  CHECK(make(make_lazy(generate("ring", 4), 0.1), {})->name() == "gradient_tracking");
  CHECK_THROWS_WITH(make(generate("one-peer-exponential", 4), {}),
                    Catch::Contains("needs a graph that is the same every round"));
  CHECK_THROWS_WITH(make(generate("exponential", 4), {}),
                    Catch::Contains("needs symmetric, doubly stochastic weights"));
  CHECK_THROWS_WITH(make(generate("star", 4, WeightKind::kUniform), {}),
                    Catch::Contains("needs symmetric, doubly stochastic weights"));
  GossipConfig clipped;
  clipped.aggregate.kind = Aggregate::kClipped;
  CHECK_THROWS_WITH(make(generate("ring", 5), clipped),
                    Catch::Contains("not gradient_tracking: its messages are models plus a "
                                    "correction"));
}

TEST_CASE("PacketReader reads every kind as the packet says, float32 parts where they lie",
          "[gossip][compress]") {
  const std::int64_t n = 1300;
  const auto v = spread_vector(static_cast<std::size_t>(n), 21);
  // Every packet kind, from the encoders that fill them.
  struct Made {
    CompressKind kind;
    WireFormat wire;
    PacketKind packet;
  };
  const Made made[] = {{CompressKind::kTopK, WireFormat::kFp32, PacketKind::kSparse},
                       {CompressKind::kTopK, WireFormat::kBf16, PacketKind::kSparseBf16},
                       {CompressKind::kRandomK, WireFormat::kFp16, PacketKind::kSparseFp16},
                       {CompressKind::kQuantize, WireFormat::kFp32, PacketKind::kQuantized},
                       {CompressKind::kNone, WireFormat::kFp32, PacketKind::kDense}};
  for (const Made& m : made) {
    CompressConfig c;
    c.kind = m.kind;
    c.fraction = 0.05;
    c.bits = 4;
    std::vector<std::byte> packet;
    Compressor(c, n, 3, 1, m.wire).encode(v, 2, Scaling::kContractive, packet);
    INFO(compress_kind_name(m.kind) << " at " << wire_format_name(m.wire));
    REQUIRE(check_packet(packet, n).empty());
    const PacketReader r(packet, n);
    REQUIRE(r.kind() == m.packet);
    const std::vector<float> decoded = decode_packet(packet, n);
    if (r.quantized()) {
      CHECK((r.bits() == 4 && r.count() == n && r.blocks() == 3));
      CHECK(r.scales() == packet.data() + kPacketHeaderBytes);
      for (std::int64_t i = 0; i < n; ++i) {
        const float scale = r.scale(i / kQuantizeBlock);
        const float want = scale == 0 ? 0.0f : math::dequantize(r.code(i), scale, 7);
        CHECK(decoded[static_cast<std::size_t>(i)] == want);
      }
      continue;
    }
    // Dense and sparse: for_each names each coordinate once, ascending, with its value; the
    // vector they make is decode_packet's (add_packet reads through the same reader, so this
    // holds it to the coordinates and values the packet spells out below).
    std::vector<float> seen(static_cast<std::size_t>(n), 0.0f);
    std::int64_t count = 0, last = -1;
    r.for_each([&](std::int64_t i, float q) {
      CHECK(i > last);
      last = i;
      seen[static_cast<std::size_t>(i)] = q;
      ++count;
    });
    CHECK(count == r.count());
    CHECK(seen == decoded);
    CHECK(r.format() == m.wire);
    const std::byte* body = packet.data() + kPacketHeaderBytes;
    if (r.dense()) {
      CHECK((r.first() == 0 && r.count() == n && r.values() == body));
      CHECK(r.value(7) == v[7]);
    } else if (m.wire == WireFormat::kFp32) {  // kind 2: u32 indices, then f32 values, in place
      CHECK(r.indices() == body);
      CHECK(r.values() == body + r.count() * 4);
      CHECK(r.value(0) == v[packet_u32(body)]);
    } else {  // kinds 6 and 7: the values are the packet's last 2 x count bytes
      CHECK(r.indices() == nullptr);
      CHECK(r.values() == packet.data() + packet.size() - r.count() * 2);
      r.for_each_index([&](std::int64_t j, std::int64_t i) {
        const float kept = v[static_cast<std::size_t>(i)];
        CHECK(r.value(j) == math::widen(math::narrow(kept, m.wire), m.wire));
      });
    }
  }
}

TEST_CASE("the compressor table names every compressor once, and messages list its rows",
          "[gossip][compress]") {
  const auto& rows = compress_table();
  REQUIRE(rows.size() == 5);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    CHECK(static_cast<std::size_t>(rows[i].kind) == i);  // traits(kind) indexes the table
    CompressKind k{};
    REQUIRE(find_compress_kind(rows[i].name, k));
    CHECK(k == rows[i].kind);
    CHECK(std::string(compress_kind_name(k)) == rows[i].name);
    // --compress reads what compress_argument writes, for every row.
    CompressConfig c;
    c.kind = k;
    CHECK(parse_compress(compress_argument(c), "x") == c);
  }
  CompressKind k{};
  CHECK_FALSE(find_compress_kind("top-k", k));
  CHECK_THROWS_WITH(parse_compress("zip:1", "--compress"),
                    Catch::Contains("(expected none, top_k:FRACTION, random_k:FRACTION, "
                                    "quantize:BITS or dct_top_k:FRACTION)"));
  // Which rows take a fraction and 16-bit values: the sparse ones but dct_top_k (the outer
  // step's, whose packets are fp32).
  for (const auto& row : rows)
    CHECK(row.halves ==
          (row.parameter == CompressParameter::kFraction && row.kind != CompressKind::kDctTopK));
  CHECK(list_compressors([](const CompressTraits& row) { return row.halves; }, "and") ==
        "top_k and random_k");
  CompressConfig q;
  q.kind = CompressKind::kQuantize;
  CHECK(default_consensus_step(q) == 0.9);
  q.bits = 4;
  CHECK(default_consensus_step(q) == 0.5);
  CHECK(default_consensus_step(CompressConfig{}) == 1.0);
}

namespace {

/// One round of mixing (no local steps) over the in-memory network from the given parameters;
/// returns the algorithms, the parameters mixed in place in `x`.
std::vector<std::unique_ptr<Algorithm>> mix_round(const Topology& t, const GossipConfig& g,
                                                  std::vector<std::vector<float>>& x,
                                                  Backend& backend) {
  const auto dim = static_cast<std::int64_t>(x[0].size());
  SimNetwork network(t.n(), dim, 1, SimConfig{}, 1, g.wire);
  std::vector<std::unique_ptr<Algorithm>> algs;
  for (int p = 0; p < t.n(); ++p)
    algs.push_back(
        make_algorithm(Learner{&backend, x[p].data(), dim, {}}, network.exchange(p), t, g));
  for (auto& a : algs) a->local_phase(0);
  for (auto& a : algs) a->mix_phase(0);
  return algs;
}

GossipConfig aggregate(Aggregate kind, double tau = 0.0, int byzantine = 1) {
  GossipConfig g;
  g.aggregate.kind = kind;
  g.aggregate.tau = tau;
  g.aggregate.byzantine = byzantine;
  return g;
}

}  // namespace

TEST_CASE("clipped gossip: a neighbour within tau mixes as mean does, bit for bit, one beyond "
          "moves the peer by W tau towards it", "[gossip][byzantine]") {
  auto backend = make_cpu_backend(1);
  const Topology t = generate("ring", 6);  // weights 1/3
  std::vector<std::vector<float>> start(6);
  for (int p = 0; p < 6; ++p) start[p] = {0.1f * p, -0.3f * p, 1.0f + p * p * 0.01f};
  SECTION("everyone within tau: mean's sums exactly") {
    auto mean = start, clipped = start;
    mix_round(t, GossipConfig{}, mean, *backend);
    const auto algs = mix_round(t, aggregate(Aggregate::kClipped, 1e6), clipped, *backend);
    CHECK(clipped == mean);
    CHECK(algs[0]->last_mix().clipped.empty());
    CHECK(algs[0]->last_mix().tau == 1e6);
  }
  SECTION("a fixed tau: x_i + sum_j W_ij clip(x_j - x_i, tau)") {
    auto x = start;
    x[0] = {0.0f, 0.0f, 0.0f};
    x[1] = {10.0f, 0.0f, 0.0f};    // 10 away: clipped to 0.5
    x[5] = {0.0f, 0.5f, 0.0f};     // 0.5 away: kept whole
    const auto algs = mix_round(t, aggregate(Aggregate::kClipped, 0.5), x, *backend);
    CHECK(x[0][0] == Approx(0.5 / 3).epsilon(1e-6));
    CHECK(x[0][1] == Approx(0.5 / 3).epsilon(1e-6));
    CHECK(x[0][2] == Approx(0.0).margin(1e-7));
    CHECK(algs[0]->last_mix().clipped == std::vector<int>{1});
  }
  SECTION("adaptive tau: the farthest neighbour is clipped to the next one's distance") {
    auto x = start;
    x[0] = {0.0f, 0.0f, 0.0f};
    x[1] = {0.0f, 0.0f, 2.0f};     // distance 2: the (b + 1)-th farthest, b = 1
    x[5] = {0.0f, -100.0f, 0.0f};  // distance 100: clipped to 2
    const auto algs = mix_round(t, aggregate(Aggregate::kClipped), x, *backend);
    CHECK(algs[0]->last_mix().tau == Approx(2.0));
    CHECK(algs[0]->last_mix().clipped == std::vector<int>{5});
    CHECK(x[0][0] == Approx(0.0).margin(1e-7));
    CHECK(x[0][1] == Approx(-2.0 / 3).epsilon(1e-6));
    CHECK(x[0][2] == Approx(2.0 / 3).epsilon(1e-6));
    // With b = 2 both neighbours may lie: tau 0 and nobody moves peer 0.
    auto y = start;
    y[0] = {0.5f, 0.5f, 0.5f};
    mix_round(t, aggregate(Aggregate::kClipped, 0.0, 2), y, *backend);
    CHECK(y[0] == std::vector<float>{0.5f, 0.5f, 0.5f});
  }
  SECTION("adaptive tau: a neighbour within ratio times the reference is mixed whole") {
    auto x = start, mean = start;
    x[0] = mean[0] = {0.0f, 0.0f, 0.0f};
    x[1] = mean[1] = {0.0f, 0.0f, 2.0f};   // the reference, 2
    x[5] = mean[5] = {0.0f, -3.5f, 0.0f};  // 3.5: within 2 x 2, an outlier it is not
    mix_round(t, GossipConfig{}, mean, *backend);
    const auto algs = mix_round(t, aggregate(Aggregate::kClipped), x, *backend);
    CHECK(x[0] == mean[0]);
    CHECK(algs[0]->last_mix().clipped.empty());
    // ratio 1 clips everyone beyond the reference: peer 5 to 2.
    auto y = start;
    y[0] = {0.0f, 0.0f, 0.0f};
    y[1] = {0.0f, 0.0f, 2.0f};
    y[5] = {0.0f, -3.5f, 0.0f};
    GossipConfig g = aggregate(Aggregate::kClipped);
    g.aggregate.ratio = 1.0;
    mix_round(t, g, y, *backend);
    CHECK(y[0][1] == Approx(-2.0 / 3).epsilon(1e-6));
    CHECK(y[0][2] == Approx(2.0 / 3).epsilon(1e-6));
  }
}

TEST_CASE("clipped gossip: a neighbour farther than the peer's own norm pulls by tau times norm "
          "over distance", "[gossip][byzantine]") {
  auto backend = make_cpu_backend(1);
  const Topology t = generate("ring", 6);  // weights 1/3
  std::vector<std::vector<float>> x(6, std::vector<float>{1.0f, 1.0f, 1.0f});
  x[0] = {3.0f, 4.0f, 0.0f};    // norm 5
  x[1] = {3.0f, 4.0f, 2.0f};    // 2 away: the reference
  x[5] = {-17.0f, 4.0f, 0.0f};  // 20 away, 4 norms: scale (2 / 20) (5 / 20) = 0.025
  auto y = x;
  const auto algs = mix_round(t, aggregate(Aggregate::kClipped), x, *backend);
  CHECK(algs[0]->last_mix().tau == Approx(2.0));
  CHECK(x[0][0] == Approx(3.0 - 0.025 * 20.0 / 3).epsilon(1e-6));
  CHECK(x[0][1] == Approx(4.0).epsilon(1e-6));
  CHECK(x[0][2] == Approx(2.0 / 3).epsilon(1e-6));
  // A fixed tau clips to tau alone: (2 / 20) of the way.
  mix_round(t, aggregate(Aggregate::kClipped, 2.0), y, *backend);
  CHECK(y[0][0] == Approx(3.0 - 0.1 * 20.0 / 3).epsilon(1e-6));
}

TEST_CASE("clipped gossip's reference is the lower median of the distances: two far neighbours "
          "(a liar and a bridge) are both clipped to the near ones'", "[gossip][byzantine]") {
  auto backend = make_cpu_backend(1);
  const Topology t = generate("complete", 6);  // peer 0 hears five, each weight 1/6
  std::vector<std::vector<float>> x(6, std::vector<float>(5, 0.0f));
  x[1][0] = 1.0f;    // distances 1, 1.2 and 1.4: near
  x[2][1] = 1.2f;
  x[3][2] = 1.4f;    // the lower median (3rd smallest of 5): the reference
  x[4][3] = 40.0f;   // far: the (b + 1)-th largest, the radius of the authors' rule
  x[5][4] = -50.0f;  // farthest
  const auto algs = mix_round(t, aggregate(Aggregate::kClipped), x, *backend);
  const auto& mix = algs[0]->last_mix();
  CHECK(mix.tau == Approx(1.4));
  CHECK(mix.clipped == std::vector<int>{4, 5});
  // x_0 = sum_j 1/6 clip(x_j, 1.4): the near three whole, the far two at 1.4.
  const std::vector<double> expect = {1.0 / 6, 1.2 / 6, 1.4 / 6, 1.4 / 6, -1.4 / 6};
  for (std::size_t i = 0; i < expect.size(); ++i)
    CHECK(x[0][i] == Approx(expect[i]).epsilon(1e-5));
}

TEST_CASE("clipped gossip clips an outlier shaped like a liar (a quarter of the norm away, or "
          "below the peer in nearly every coordinate) to the reference and names it, and one "
          "that is not further out", "[gossip][byzantine]") {
  auto backend = make_cpu_backend(1);
  const Topology t = generate("ring", 6);  // peer 0 hears 1 and 5
  // Peer 0 at 100 everywhere (norm 283, a quarter 71); peer 1 the reference, 0.5 away with
  // mixed signs (distance 1.41); peer 5 3 away in every coordinate (8.49: clipped to 0.17).
  enum Shape { kBelow, kMixed, kMostlyEqual };
  const auto run = [&](Shape shape) {
    std::vector<std::vector<float>> x(6, std::vector<float>(8, 100.0f));
    for (int i = 0; i < 8; ++i) {
      x[1][i] = 100.0f + (i % 2 ? 0.5f : -0.5f);
      if (shape == kBelow) x[5][i] = 97.0f;
      if (shape == kMixed) x[5][i] = i % 2 ? 97.0f : 103.0f;
    }
    if (shape == kMostlyEqual) {  // equal in six coordinates, 9 above in one and below in one
      x[5][0] = 109.0f;
      x[5][1] = 91.0f;
    }
    const auto before = x;
    const auto algs = mix_round(t, aggregate(Aggregate::kClipped), x, *backend);
    CHECK(algs[0]->last_mix().tau == Approx(std::sqrt(2.0)));
    // Clipped to the reference (1.41) when shaped like a liar, to the gate (2.83) when not
    // (mixed: straight against peer 1's pull), to twice the gate when it heads elsewhere (mostly
    // equal: cosine -0.5 with peer 1's pull, 0 with peer 0's parameters):
    // x_0 = x_0 + 1/3 (x_1 - x_0) + 1/3 c (x_5 - x_0).
    const double c = (shape == kBelow ? 1.0 : shape == kMixed ? 2.0 : 4.0) * std::sqrt(2.0) /
                     std::sqrt(static_cast<double>(
                         std::inner_product(before[5].begin(), before[5].end(), before[0].begin(),
                                            0.0, std::plus<>(), [](float u, float v) {
                                              return (static_cast<double>(u) - v) * (u - v);
                                            })));
    for (std::size_t i = 0; i < 8; ++i)
      CHECK(x[0][i] == Approx(before[0][i] + (before[1][i] - before[0][i]) / 3.0 +
                              c * (before[5][i] - before[0][i]) / 3.0)
                           .epsilon(1e-6));
    return algs[0]->last_mix().clipped;
  };
  CHECK(run(kBelow) == std::vector<int>{5});  // ALIE's shape: below in every coordinate
  CHECK(run(kMixed).empty());                 // as far, but as often above as below
  // Coordinates where the two agree do not count: above in one of the two that differ is even
  // (as a share of all eight, one above would look one-signed).
  CHECK(run(kMostlyEqual).empty());
}

TEST_CASE("clipped gossip clips an outlier that heads like the far side of a bridge to twice the "
          "gate, one that pushes against the other neighbours' pull or along the peer's own "
          "parameters to the gate", "[gossip][byzantine]") {
  auto backend = make_cpu_backend(1);
  const Topology t = generate("complete", 6);  // peer 0 hears five, each weight 1/6
  // Peer 0 at +-100 (alternating: norm 283, a quarter 71). Peers 1-4 a unit step away each, in
  // coordinates 0-3 with alternating signs: the reference is 1, the gate 2, and their pull
  // g = (e0 - e1 + e2 - e3) / 6. Peer 5 is the outlier, as often above peer 0 as below and
  // within a quarter of its norm (not shaped like a liar), heading three ways; in the fourth
  // case peer 4 flips its sign (-x_0: two norms away, a liar), and is left out of the pull.
  enum Heads { kAcross, kAgainst, kAlong, kAgainstBesideLiar };
  const auto run = [&](Heads heads) {
    std::vector<std::vector<float>> x(6, std::vector<float>(8));
    for (auto& v : x)
      for (int i = 0; i < 8; ++i) v[i] = i % 2 ? -100.0f : 100.0f;
    for (int k = 1; k <= 4; ++k) x[k][k - 1] += (k % 2 ? 1.0f : -1.0f);
    for (int i = 0; i < 8; ++i) {
      if (heads == kAcross && i >= 4) x[5][i] += i < 6 ? 5.0f : -5.0f;  // orthogonal to g, r
      if (heads != kAcross && heads != kAlong && i < 4)
        x[5][i] -= i % 2 ? -5.0f : 5.0f;  // -5 (6 g): dissensus
      if (heads == kAlong) x[5][i] *= 1.05f;  // 1.05 x: scaling
      if (heads == kAgainstBesideLiar) x[4][i] = -x[0][i];
    }
    const auto before = x;
    const auto algs = mix_round(t, aggregate(Aggregate::kClipped), x, *backend);
    CHECK(algs[0]->last_mix().tau == Approx(1.0));
    // Clipped, not named: peer 5 is not liar-shaped (peer 4, when it lies, is).
    CHECK(algs[0]->last_mix().clipped ==
          (heads == kAgainstBesideLiar ? std::vector<int>{4} : std::vector<int>{}));
    const auto dist = [&](int k) {
      double d = 0.0;
      for (int i = 0; i < 8; ++i)
        d += (static_cast<double>(before[k][i]) - before[0][i]) * (before[k][i] - before[0][i]);
      return std::sqrt(d);
    };
    // Across: to 2 x the gate, 4; against (with or without the liar beside it) and along to
    // the gate, 2. The liar: to the reference, and by norm / distance (1/2) more.
    std::vector<double> c(6, 1.0);
    c[5] = (heads == kAcross ? 4.0 : 2.0) / dist(5);
    if (heads == kAgainstBesideLiar) c[4] = (1.0 / dist(4)) * 0.5;
    for (std::size_t i = 0; i < 8; ++i) {
      double want = before[0][i];
      for (int k = 1; k <= 5; ++k) want += c[k] * (before[k][i] - before[0][i]) / 6.0;
      CHECK(x[0][i] == Approx(want).epsilon(1e-6));
    }
    return dist(5);
  };
  CHECK(run(kAcross) == Approx(10.0));
  CHECK(run(kAgainst) == Approx(10.0));
  CHECK(run(kAlong) == Approx(5.0 * std::sqrt(8.0)).epsilon(1e-5));
  // With the liar in the pull its -x_0 would outweigh the rest, and peer 5's cosine with it
  // would be +0.71: across, not against.
  CHECK(run(kAgainstBesideLiar) == Approx(10.0));
}

TEST_CASE("trimmed_mean and median are coordinate-wise over the peer and its neighbours",
          "[gossip][byzantine]") {
  auto backend = make_cpu_backend(1);
  const Topology t = generate("complete", 5);  // every peer hears the four others
  std::vector<std::vector<float>> start = {
      {0.0f, 5.0f}, {1.0f, 100.0f}, {2.0f, -100.0f}, {3.0f, 6.0f}, {40.0f, 7.0f}};
  auto trimmed = start, median = start, trimmed2 = start;
  mix_round(t, aggregate(Aggregate::kTrimmedMean, 0.0, 1), trimmed, *backend);
  mix_round(t, aggregate(Aggregate::kMedian), median, *backend);
  mix_round(t, aggregate(Aggregate::kTrimmedMean, 0.0, 2), trimmed2, *backend);
  for (int p = 0; p < 5; ++p) {
    // Every peer sees the same five values: first coordinate {0, 1, 2, 3, 40}, second
    // {5, 100, -100, 6, 7}. Drop one at each end: means of {1, 2, 3} and {5, 6, 7}.
    CHECK(trimmed[p] == std::vector<float>{2.0f, 6.0f});
    CHECK(median[p] == std::vector<float>{2.0f, 6.0f});
    CHECK(trimmed2[p] == std::vector<float>{2.0f, 6.0f});  // two at each end: the median
  }
  // Four values (a peer of the ring of 3 with one neighbour more): the median is the mean of the
  // two middle ones.
  std::vector<std::vector<float>> four = {{0.0f}, {1.0f}, {10.0f}, {3.0f}};
  const auto algs = mix_round(generate("complete", 4), aggregate(Aggregate::kMedian), four,
                              *backend);
  for (const auto& v : four) CHECK(v[0] == 2.0f);
  // Peer 0 drops its own 0 and peer 2's 10 at the ends: peer 2, dropped in every coordinate, is
  // the one it reports (its own value is never reported).
  CHECK(algs[0]->last_mix().clipped == std::vector<int>{2});
}

TEST_CASE("a neighbour's message with NaN or Inf is left out of every aggregate, its weight "
          "kept", "[gossip][byzantine]") {
  auto backend = make_cpu_backend(1);
  const Topology t = generate("ring", 4);  // weights 1/3
  for (Aggregate kind : {Aggregate::kMean, Aggregate::kClipped, Aggregate::kMedian}) {
    INFO(aggregate_name(kind));
    std::vector<std::vector<float>> x = {{3.0f, 0.0f}, {std::nanf(""), 1.0f}, {0.0f, 0.0f},
                                         {6.0f, 3.0f}};
    x[2][1] = std::numeric_limits<float>::infinity();
    const auto algs = mix_round(t, aggregate(kind, kind == Aggregate::kClipped ? 100.0 : 0.0), x,
                                *backend);
    CHECK(algs[0]->last_mix().nonfinite == std::vector<int>{1});
    CHECK(algs[3]->last_mix().nonfinite == std::vector<int>{2});
    // Peer 0 mixes only itself and peer 3: mean (2/3) x0 + (1/3) x3; the median of two values
    // their mean.
    const std::vector<float> want = kind == Aggregate::kMedian
                                        ? std::vector<float>{4.5f, 1.5f}
                                        : std::vector<float>{4.0f, 1.0f};
    CHECK(x[0][0] == Approx(want[0]));
    CHECK(x[0][1] == Approx(want[1]));
  }
}

TEST_CASE("a peer whose own parameters are NaN does not blame its neighbours for it",
          "[gossip][byzantine]") {
  // Ring of 4: peer 1 holds NaN (diverged, or lies with NaN itself). Its distances to its
  // finite neighbours are NaN through its own message: they are mixed, not refused, and
  // nobody is flagged; its neighbours refuse peer 1's message as before.
  auto backend = make_cpu_backend(1);
  const Topology t = generate("ring", 4);
  std::vector<std::vector<float>> x = {{3.0f, 0.0f}, {std::nanf(""), 1.0f}, {0.0f, 0.0f},
                                       {6.0f, 3.0f}};
  const auto algs = mix_round(t, aggregate(Aggregate::kClipped), x, *backend);
  CHECK(algs[1]->last_mix().nonfinite.empty());
  CHECK(flagged(algs[1]->last_mix()).empty());
  CHECK(algs[1]->last_mix().heard == std::vector<int>{0, 2});
  CHECK(algs[0]->last_mix().nonfinite == std::vector<int>{1});
  CHECK(algs[2]->last_mix().nonfinite == std::vector<int>{1});
}

TEST_CASE("on a ring trimmed_mean and median are the median of three, ties and all",
          "[gossip][byzantine]") {
  // Each peer of a ring holds three values a coordinate (its own and its two neighbours'): the
  // fast path for three must give the median the sort gives, with values drawn from a small
  // set so that ties are common, and flag a neighbour whose value is never the middle one.
  auto backend = make_cpu_backend(1);
  const Topology t = generate("ring", 6);
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> pick(-3, 3);
  std::vector<std::vector<float>> start(6, std::vector<float>(257));
  for (auto& x : start)
    for (auto& v : x) v = 0.5f * static_cast<float>(pick(rng));
  for (auto& v : start[3]) v = 100.0f;  // peer 3: always the largest, never kept
  for (Aggregate kind : {Aggregate::kTrimmedMean, Aggregate::kMedian}) {
    INFO(aggregate_name(kind));
    auto x = start;
    const auto algs = mix_round(t, aggregate(kind), x, *backend);
    for (int p = 0; p < 6; ++p)
      for (std::size_t i = 0; i < 257; ++i) {
        float v[3] = {start[(p + 5) % 6][i], start[p][i], start[(p + 1) % 6][i]};
        std::sort(v, v + 3);
        REQUIRE(x[p][i] == v[1]);
      }
    CHECK(algs[2]->last_mix().clipped == std::vector<int>{3});
    CHECK(algs[4]->last_mix().clipped == std::vector<int>{3});
    CHECK(algs[0]->last_mix().clipped.empty());
  }
}

TEST_CASE("on a settled ring the median flags no honest neighbour, and still flags a liar",
          "[gossip][byzantine]") {
  // Medians on a ring settle where each peer lies between its two neighbours. Coordinate i of
  // peer p holds (p + i) mod 8: every peer is the middle of its three values in 6 of 8
  // coordinates, so each neighbour is dropped from 7 of 8 (past the 5/6 of the first test,
  // which alone named every neighbour of the quickstart's ring at the end of its run), but no
  // more than its fellow is: nobody is flagged. Then peer 3 sends 100 everywhere, dropped from
  // every coordinate. Peer 4's other neighbour (5) lies above it almost everywhere, so is
  // dropped from 1 of 8: peer 4 flags 3. Peer 2's other neighbour (1) lies below it almost
  // everywhere, opposite the liar, so is dropped from 7 of 8, and order alone cannot tell the
  // two apart: peer 2 flags nobody (with honest values in no order, the test above, both flag
  // the liar). No honest peer is flagged by anyone.
  auto backend = make_cpu_backend(1);
  const Topology t = generate("ring", 8);
  std::vector<std::vector<float>> start(8, std::vector<float>(800));
  for (std::size_t p = 0; p < 8; ++p)
    for (std::size_t i = 0; i < 800; ++i) start[p][i] = static_cast<float>((p + i) % 8);
  for (Aggregate kind : {Aggregate::kTrimmedMean, Aggregate::kMedian}) {
    INFO(aggregate_name(kind));
    auto x = start;
    auto algs = mix_round(t, aggregate(kind), x, *backend);
    for (const auto& alg : algs) CHECK(alg->last_mix().clipped.empty());
    auto lied = start;
    for (auto& v : lied[3]) v = 100.0f;
    algs = mix_round(t, aggregate(kind), lied, *backend);
    for (int p = 0; p < 8; ++p) {
      INFO("peer " << p);
      CHECK(algs[static_cast<std::size_t>(p)]->last_mix().clipped ==
            (p == 4 ? std::vector<int>{3} : std::vector<int>{}));
    }
  }
}

TEST_CASE("trimmed_mean names a neighbour dropped everywhere only when it is shaped like a liar, "
          "not an honest one across a bridge", "[gossip][byzantine]") {
  // Peer 0 of the complete graph of 5 hears 1, 2, 3 near it and 4 five away in every
  // coordinate: trimmed_mean drops 4 everywhere and the others a quarter of the time each.
  // Across a bridge (as often above as below, 5 against a norm of 100 a coordinate) 4 is not
  // named; below in every coordinate (ALIE's shape) or 50 away (a quarter of the norm) it is.
  auto backend = make_cpu_backend(1);
  const Topology t = generate("complete", 5);
  const auto flagged = [&](float (*far)(std::size_t)) {
    std::vector<std::vector<float>> x(5, std::vector<float>(64));
    for (std::size_t i = 0; i < 64; ++i) {
      for (std::size_t p = 0; p < 4; ++p) x[p][i] = 100.0f + 0.25f * static_cast<float>((i + p) % 4);
      x[4][i] = far(i);
    }
    return mix_round(t, aggregate(Aggregate::kTrimmedMean), x, *backend)[0]->last_mix().clipped;
  };
  CHECK(flagged([](std::size_t i) { return i % 2 ? 105.0f : 95.0f; }).empty());
  CHECK(flagged([](std::size_t) { return 95.0f; }) == std::vector<int>{4});
  CHECK(flagged([](std::size_t i) { return i % 2 ? 150.0f : 50.0f; }) == std::vector<int>{4});
}

TEST_CASE("with more values a coordinate trimmed_mean and median equal a sort, ties and all",
          "[gossip][byzantine]") {
  // Five values a coordinate (a 4x4 torus) and eight (the complete graph of 8): the sorting
  // network (and trimmed_mean's sort-free path for one dropped at each end) must keep exactly
  // the values a sort keeps, with ties common, count as dropped the inputs strictly outside the
  // kept values, and so flag the same neighbours as the rule computed here from a sort: peers 5
  // and 6 always hold the largest value, tied, so with one value dropped at each end neither is
  // outside (a tie is kept), and with the median both are.
  auto backend = make_cpu_backend(1);
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> pick(-3, 3);
  GeneratorSpec torus;
  torus.kind = gossip::GeneratorKind::kTorus;
  torus.rows = torus.cols = 4;
  for (const Topology& t : {make_topology(torus), generate("complete", 8)}) {
    const int n = t.n();
    std::vector<std::vector<float>> start(n, std::vector<float>(203));
    for (auto& x : start)
      for (auto& v : x) v = 0.25f * static_cast<float>(pick(rng)) + 0.125f;
    for (auto& v : start[5]) v = 100.0f;  // peers 5 and 6: always the largest, tied
    for (auto& v : start[6]) v = 100.0f;
    for (Aggregate kind : {Aggregate::kTrimmedMean, Aggregate::kMedian}) {
      INFO(aggregate_name(kind) << " on " << n << " peers");
      auto x = start;
      const auto algs = mix_round(t, aggregate(kind), x, *backend);
      for (int p = 0; p < n; ++p) {
        std::vector<int> from{p};
        for (const Neighbour& e : t.in_neighbours(p, 0))
          if (e.peer != p) from.push_back(e.peer);
        const std::size_t k = from.size();
        const std::size_t trim = kind == Aggregate::kTrimmedMean ? 1 : (k - 1) / 2;
        std::vector<double> dropped(k, 0.0);
        for (std::size_t i = 0; i < 203; ++i) {
          std::vector<float> v;
          for (int q : from) v.push_back(start[static_cast<std::size_t>(q)][i]);
          const auto in = v;
          std::sort(v.begin(), v.end());
          double sum = 0.0;
          for (std::size_t j = trim; j < k - trim; ++j) sum += v[j];
          REQUIRE(x[static_cast<std::size_t>(p)][i] ==
                  static_cast<float>(sum / static_cast<double>(k - 2 * trim)));
          for (std::size_t j = 0; j < k; ++j)
            dropped[j] += in[j] < v[trim] || in[j] > v[k - 1 - trim] ? 1.0 : 0.0;
        }
        // Flagged: dropped from more than halfway between an honest share (2 trim / k) and all
        // of the coordinates, and from that much more than the median of the other neighbours.
        std::vector<int> flagged;
        const double share = (1.0 + 2.0 * static_cast<double>(trim) / static_cast<double>(k)) / 2.0;
        for (std::size_t j = 1; j < k; ++j) {
          std::vector<double> others;
          for (std::size_t l = 1; l < k; ++l)
            if (l != j) others.push_back(dropped[l]);
          std::sort(others.begin(), others.end());
          const double fellows = (others[(others.size() - 1) / 2] + others[others.size() / 2]) / 2;
          // and shaped like a liar: farther than a quarter of the peer's norm, or above (or
          // below) it in over 85 % of the coordinates where the two differ. (Peers 5 and 6
          // hearing each other: the same values, not a liar's.)
          const auto& own = start[static_cast<std::size_t>(p)];
          const auto& m = start[static_cast<std::size_t>(from[j])];
          double norm = 0.0, distance = 0.0, above = 0.0, below = 0.0;
          for (std::size_t i = 0; i < 203; ++i) {
            norm += static_cast<double>(own[i]) * own[i];
            distance += (static_cast<double>(m[i]) - own[i]) * (static_cast<double>(m[i]) - own[i]);
            above += m[i] > own[i] ? 1.0 : 0.0;
            below += m[i] < own[i] ? 1.0 : 0.0;
          }
          const double skew = above + below > 0 ? std::abs(above / (above + below) - 0.5) : 0.0;
          const bool shaped = std::sqrt(distance) > 0.25 * std::sqrt(norm) || skew > 0.35;
          if (dropped[j] > share * 203.0 && dropped[j] - fellows > (1.0 - share) * 203.0 && shaped)
            flagged.push_back(from[j]);
        }
        CHECK(algs[static_cast<std::size_t>(p)]->last_mix().clipped == flagged);
        // The tie at the top: hearing both 5 and 6, trimmed_mean flags neither, the median both.
        const bool both = std::find(from.begin(), from.end(), 5) != from.end() &&
                          std::find(from.begin(), from.end(), 6) != from.end();
        if (both && p != 5 && p != 6)
          CHECK(flagged == (kind == Aggregate::kTrimmedMean ? std::vector<int>{}
                                                            : std::vector<int>{5, 6}));
      }
    }
  }
}

TEST_CASE("DeMo's chunked DCT is orthonormal: it keeps norms, its inverse undoes it, and a "
          "constant chunk is its first coefficient alone", "[gossip][compress][demo]") {
  // 150 coordinates: two chunks of 64 and a tail of 22 with its own matrix.
  const std::int64_t n = 2 * gossip::kDctChunk + 22;
  std::vector<float> x(n), y(n), back(n);
  auto rng = make_rng(5, 0, Stream::kSim);
  for (auto& v : x) v = static_cast<float>(normal01(rng));
  gossip::dct_chunks(x, y);
  gossip::idct_chunks(y, back);
  for (std::int64_t first : {std::int64_t{0}, gossip::kDctChunk, 2 * gossip::kDctChunk}) {
    const std::int64_t len = std::min(gossip::kDctChunk, n - first);
    double in = 0.0, out = 0.0;
    for (std::int64_t i = first; i < first + len; ++i) {
      in += double{x[i]} * x[i];
      out += double{y[i]} * y[i];
    }
    CHECK(out == Approx(in).epsilon(1e-5));  // per chunk: C is orthogonal
  }
  for (std::int64_t i = 0; i < n; ++i) REQUIRE(back[i] == Approx(x[i]).margin(1e-5));
  // A constant c over a chunk of L is c sqrt(L) at frequency 0 and nothing else.
  std::vector<float> c(n, 2.0f), cy(n);
  gossip::dct_chunks(c, cy);
  CHECK(cy[0] == Approx(2.0 * std::sqrt(64.0)).epsilon(1e-6));
  CHECK(cy[2 * gossip::kDctChunk] == Approx(2.0 * std::sqrt(22.0)).epsilon(1e-6));
  for (std::int64_t i = 0; i < n; ++i)
    if (i % gossip::kDctChunk != 0) REQUIRE(std::fabs(cy[i]) < 1e-5f);
}

TEST_CASE("dct_top_k with error feedback: the packets plus the residual add up to every "
          "pseudo-gradient sent, and each packet holds a fraction of the coefficients",
          "[gossip][compress][demo]") {
  const std::int64_t n = 300;
  CompressConfig c;
  c.kind = CompressKind::kDctTopK;
  c.fraction = 0.1;
  Compressor q(c, n, 1, 0);
  REQUIRE(q.kept() == 30);
  std::vector<float> e(n, 0.0f), idct(n);
  std::vector<double> sent(n, 0.0), given(n, 0.0);
  std::vector<std::byte> packet;
  auto rng = make_rng(7, 0, Stream::kSim);
  for (int step = 0; step < 40; ++step) {
    for (std::int64_t i = 0; i < n; ++i) {  // smooth plus noise, as pseudo-gradients are
      const float g = static_cast<float>(std::sin(0.05 * i + step) + 0.1 * normal01(rng));
      e[i] += g;
      given[i] += g;
    }
    q.encode(e, step, Scaling::kContractive, packet);
    REQUIRE(check_packet(packet, n).empty());
    REQUIRE(packet_header(packet).count == 30u);
    REQUIRE(packet.size() == q.packet_bytes());
    gossip::idct_chunks(decode_packet(packet, n), idct);
    for (std::int64_t i = 0; i < n; ++i) {
      e[i] -= idct[i];
      sent[i] += idct[i];
    }
  }
  double worst = 0.0, residual = 0.0;
  for (std::int64_t i = 0; i < n; ++i) {
    worst = std::max(worst, std::fabs(sent[i] + e[i] - given[i]));
    residual += double{e[i]} * e[i];
  }
  CHECK(worst < 1e-3);
  // The residual stays bounded (error feedback sends what was left out): far below the 40
  // steps' pseudo-gradients, whose squared norm is about 40^2 * n / 2 where they agree.
  CHECK(residual < 0.05 * 40.0 * 40.0 * n / 2.0);
}

namespace {

/// Four peers on the complete graph, 150 coordinates each (two DCT chunks and a tail), whose
/// steps pull x towards their own targets, after `rounds` rounds of local_sgd with DiLoCo's
/// outer step and `compress` on its pseudo-gradients.
std::vector<std::vector<float>> run_pulled_complete(const CompressConfig& compress, int rounds) {
  const int n = 4;
  const std::int64_t dim = 150;
  const Topology t = generate("complete", n);
  static auto backend = make_cpu_backend(1);
  SimNetwork network(n, dim, 1, SimConfig{}, 1);
  GossipConfig g;
  g.algorithm = AlgorithmKind::kLocalSgd;
  g.period = 2;
  g.outer = OuterConfig{.enabled = true, .lr = 0.7, .momentum = 0.9, .compress = compress};
  std::vector<std::vector<float>> x(n, std::vector<float>(dim, 0.5f));
  std::vector<std::unique_ptr<Algorithm>> algs;
  for (int p = 0; p < n; ++p) {
    float* xp = x[p].data();
    auto step = [xp, p, dim] {
      for (std::int64_t i = 0; i < dim; ++i)
        xp[i] -= 0.25f * (xp[i] - static_cast<float>(std::sin(0.1 * i) * (p + 1)));
      return 0.0;
    };
    algs.push_back(make_algorithm(Learner{backend.get(), xp, dim, step}, network.exchange(p), t, g));
  }
  for (int r = 0; r < rounds; ++r) {
    for (auto& a : algs) a->local_phase(r);
    for (auto& a : algs) a->mix_phase(r);
  }
  return x;
}

}  // namespace

TEST_CASE("gossip.outer.compress: every peer takes the same outer step; all the coefficients "
          "give DiLoCo's; a tenth of them a step that differs; other graphs refused",
          "[gossip][outer][demo]") {
  CompressConfig none, all, tenth, int8;
  all.kind = tenth.kind = CompressKind::kDctTopK;
  all.fraction = 1.0;
  tenth.fraction = 0.1;
  int8.kind = CompressKind::kQuantize;
  int8.bits = 8;
  const auto diloco = run_pulled_complete(none, 6);
  const auto full = run_pulled_complete(all, 6);
  const auto demo = run_pulled_complete(tenth, 6);
  const auto quantized = run_pulled_complete(int8, 6);
  double apart = 0.0, off = 0.0;
  for (int p = 0; p < 4; ++p) {
    INFO("peer " << p);
    // The anchors agree bit for bit: the same packets, in the same order, with the same weights.
    REQUIRE(demo[p] == demo[0]);
    REQUIRE(quantized[p] == quantized[0]);
    REQUIRE(full[p] == full[0]);
    for (std::size_t i = 0; i < diloco[p].size(); ++i) {
      // Every coefficient sent: the mean of a - x_j is a - mean x_j, DiLoCo's pseudo-gradient.
      REQUIRE(full[p][i] == Approx(diloco[p][i]).margin(1e-4));
      REQUIRE(quantized[p][i] == Approx(diloco[p][i]).margin(0.05));
      apart = std::max(apart, double{std::fabs(demo[p][i] - diloco[p][i])});
      off = std::max(off, double{std::fabs(full[p][i] - diloco[p][i])});
    }
  }
  CHECK(apart > 10 * off);  // a tenth of the coefficients is another run, told apart
  // A graph on which the peers would not all average the same packets: refused with why.
  auto backend = make_cpu_backend(1);
  SimNetwork network(4, 3, 1, SimConfig{}, 1);
  std::vector<float> x(3, 0.0f);
  GossipConfig g;
  g.algorithm = AlgorithmKind::kLocalSgd;
  g.outer = OuterConfig{.enabled = true, .lr = 0.7, .momentum = 0.9, .compress = tenth};
  CHECK_THROWS_WITH(make_algorithm(Learner{backend.get(), x.data(), 3, {}}, network.exchange(0),
                                   generate("ring", 4), g),
                    Catch::Contains("every peer must average all of them with equal weights") &&
                        Catch::Contains("peer 0 averages 2 of the other 3"));
  // choco's public copies cannot take DCT coefficients.
  GossipConfig choco;
  choco.algorithm = AlgorithmKind::kChoco;
  choco.choco.compress = tenth;
  CHECK_THROWS_WITH(make_algorithm(Learner{backend.get(), x.data(), 3, {}}, network.exchange(0),
                                   generate("ring", 4), choco),
                    Catch::StartsWith("gossip.choco.compress: dct_top_k is for gossip.outer.compress"));
}

TEST_CASE("Streaming DiLoCo's fragments are contiguous, in order, add up to the whole buffer and "
          "differ in size by at most one", "[gossip][outer][streaming]") {
  for (const auto& [n, f] : {std::pair<std::int64_t, int>{10, 3}, {150, 7}, {5, 5}, {235146, 16}}) {
    INFO(n << " in " << f);
    std::int64_t next = 0, smallest = n, largest = 0;
    for (int i = 0; i < f; ++i) {
      const gossip::Fragment part = gossip::outer_fragment(n, f, i);
      CHECK(part.index == i);
      CHECK(part.first == next);
      next += part.size;
      smallest = std::min(smallest, part.size);
      largest = std::max(largest, part.size);
    }
    CHECK(next == n);
    CHECK(largest - smallest <= 1);
  }
  CHECK(gossip::outer_fragment(10, 3, 2).size == 4);  // 0..2, 3..5, 6..9
}

TEST_CASE("Streaming DiLoCo: round r mixes fragment r mod F alone and takes its outer step; with "
          "overlap the fragment leaves before the steps and the step keeps their change",
          "[gossip][outer][streaming]") {
  // run_pulled_ring's problem (4 peers on the 1/3 ring, 3 coordinates, steps pulling towards
  // 10 p + i) with 3 fragments of one coordinate each: round r synchronises coordinate r mod 3.
  const int n = 4;
  constexpr int dim = 3;
  const double lr = 0.7, mu = 0.9;
  const int rounds = 7;
  auto want = [&](bool overlap) {
    std::vector<std::vector<double>> x(n), a(n), v(n, std::vector<double>(dim, 0.0));
    for (int p = 0; p < n; ++p) x[p] = a[p] = {1.0 * p, -2.0 * p, 0.5};
    for (int r = 0; r < rounds; ++r) {
      const int i = r % dim;
      std::vector<double> sent(n);
      for (int p = 0; p < n; ++p) sent[p] = x[p][i];
      for (int p = 0; p < n; ++p)
        for (int s = 0; s < 2; ++s)
          for (int k = 0; k < dim; ++k) x[p][k] -= 0.25 * (x[p][k] - (10 * p + k));
      if (!overlap)
        for (int p = 0; p < n; ++p) sent[p] = x[p][i];
      for (int p = 0; p < n; ++p) {
        double m = 0.0;
        for (int j : {(p + n - 1) % n, p, (p + 1) % n}) m += sent[j] / 3.0;
        const double g = a[p][i] - m;
        v[p][i] = mu * v[p][i] + g;
        a[p][i] -= lr * (g + mu * v[p][i]);
      }
      for (int p = 0; p < n; ++p) x[p][i] = a[p][i] + (overlap ? x[p][i] - sent[p] : 0.0);
    }
    return x;
  };
  for (bool overlap : {false, true}) {
    INFO("overlap " << overlap);
    GossipConfig g;
    g.algorithm = AlgorithmKind::kLocalSgd;
    g.period = 2;
    g.overlap = overlap;
    g.outer = OuterConfig{.enabled = true, .lr = lr, .momentum = mu, .compress = {}, .fragments = 3};
    const auto got = run_pulled_ring(g, rounds);
    const auto expected = want(overlap);
    for (int p = 0; p < n; ++p)
      for (int i = 0; i < dim; ++i) REQUIRE(got[p][i] == Approx(expected[p][i]).margin(1e-4));
  }
  // The overlapped run is another run, told apart.
  CHECK(std::fabs(want(true)[1][0] - want(false)[1][0]) > 0.1);
}
