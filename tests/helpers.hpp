// tests/helpers.hpp: small fixtures shared by several test files.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "gossip/config.hpp"

namespace gossip::test {

/// A run config on a small synthetic problem (4 Gaussian classes in 8 dimensions, MLP 8-16-4,
/// SGD lr 0.05 with momentum 0.9, batch 8) that trains in milliseconds.
inline RunConfig small_synthetic_config(std::int64_t train, std::int64_t test,
                                        std::uint64_t seed) {
  RunConfig c;
  c.data.synthetic = true;
  c.data.synthetic_train = train;
  c.data.synthetic_test = test;
  c.data.synthetic_dim = 8;
  c.data.classes = 4;
  c.model = ModelConfig::mlp({8, 16, 4});
  c.optimizer.lr = 0.05;
  c.optimizer.momentum = 0.9;
  c.train.batch = 8;
  c.train.seed = seed;
  c.train.eval_batch = static_cast<int>(test);
  return c;
}

/// n floats uniform in [-1, 1) from std::mt19937(seed).
inline std::vector<float> random_vector(std::size_t n, unsigned seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);
  return v;
}

}  // namespace gossip::test
