// Tests for model: every layer's gradient against central finite differences (in double-checked
// float), He initialisation statistics, and determinism of initialisation.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "gossip/backend.hpp"
#include "gossip/hash.hpp"
#include "gossip/model.hpp"
#include "gossip/rng.hpp"

using namespace gossip;

namespace {

double loss_at(Mlp& m, const std::vector<float>& x, const std::vector<std::int32_t>& y, int rows) {
  return m.evaluate(x.data(), y.data(), rows).loss;
}

}  // namespace

TEST_CASE("every layer's gradient matches finite differences", "[model]") {
  auto cpu = make_cpu_backend(1);
  const std::vector<int> layers = {6, 5, 4, 3};
  const int rows = 4;
  Mlp m(*cpu, layers, rows);
  m.init(3, 0);
  // Non-zero biases so ReLUs are exercised on both sides.
  for (const auto& v : m.layers())
    for (int i = 0; i < v.out; ++i) m.params()[v.b_offset + i] = 0.1f * ((i % 3) - 1);
  auto rng = make_rng(5, 0, Stream::kSynthetic);
  std::vector<float> x(rows * layers.front());
  for (auto& v : x) v = static_cast<float>(normal01(rng));
  std::vector<std::int32_t> y = {0, 2, 1, 2};

  m.forward_backward(x.data(), y.data(), rows);
  std::vector<float> grad(m.grads(), m.grads() + m.num_params());
  bool any_nonzero = false;
  for (float g : grad) {
    REQUIRE(std::isfinite(g));
    any_nonzero |= g != 0.0f;
  }
  REQUIRE(any_nonzero);

  for (std::size_t l = 0; l < m.layers().size(); ++l) {
    SECTION("layer " + std::to_string(l)) {
      const auto& v = m.layers()[l];
      // Check every weight and bias of this layer.
      std::vector<std::int64_t> idx;
      for (std::int64_t i = v.w_offset; i < v.b_offset + v.out; ++i) idx.push_back(i);
      int checked = 0;
      for (std::int64_t i : idx) {
        const float saved = m.params()[i];
        const float eps = 1e-3f;
        m.params()[i] = saved + eps;
        const double up = loss_at(m, x, y, rows);
        m.params()[i] = saved - eps;
        const double down = loss_at(m, x, y, rows);
        m.params()[i] = saved;
        const double numeric = (up - down) / (2.0 * eps);
        INFO("param " << i << " analytic " << grad[i] << " numeric " << numeric);
        REQUIRE(grad[i] == Approx(numeric).margin(2e-3).epsilon(2e-2));
        ++checked;
      }
      CHECK(checked == v.in * v.out + v.out);
    }
  }
}

TEST_CASE("He initialisation has variance 2/fan-in and zero biases", "[model]") {
  auto cpu = make_cpu_backend(1);
  Mlp m(*cpu, {400, 300, 10}, 1);
  m.init(1, 0);
  const auto& v = m.layers()[0];
  double sq = 0.0;
  for (std::int64_t i = 0; i < v.in * v.out; ++i) sq += m.params()[v.w_offset + i] * m.params()[v.w_offset + i];
  CHECK(sq / (v.in * v.out) == Approx(2.0 / 400).epsilon(0.03));
  for (int i = 0; i < v.out; ++i) REQUIRE(m.params()[v.b_offset + i] == 0.0f);
}

TEST_CASE("initialisation depends on seed and peer only", "[model]") {
  auto cpu = make_cpu_backend(1);
  auto hash_of = [&](std::uint64_t seed, int peer) {
    Mlp m(*cpu, {8, 6, 3}, 1);
    m.init(seed, peer);
    return sha256_hex(std::span<const float>(m.params(), m.num_params()));
  };
  CHECK(hash_of(1, 0) == hash_of(1, 0));
  CHECK(hash_of(1, 0) != hash_of(2, 0));
  CHECK(hash_of(1, 0) != hash_of(1, 1));
  CHECK(mlp_param_count({784, 256, 128, 10}) == 235146);
}
