// tests/helpers.hpp: small fixtures shared by several test files.
#pragma once

#include <sys/wait.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
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

/// A small residual network over 1x4x4 inputs (synthetic_dim 16) with 4 classes: convolution,
/// batch norm, a residual block, global average pooling, linear.
inline ModelConfig tiny_residual_model() {
  auto layer = [](LayerKind kind, int out = 0) {
    LayerConfig l;
    l.type = kind;
    l.out = out;
    return l;
  };
  LayerConfig conv = layer(LayerKind::kConv2d, 4);
  conv.kernel = 3;
  conv.stride = 1;
  conv.padding = 1;
  LayerConfig block = layer(LayerKind::kResidual, 4);
  block.stride = 1;
  ModelConfig m;
  m.input = {1, 4, 4};
  m.layers = {conv, layer(LayerKind::kBatchNorm), layer(LayerKind::kRelu), block,
              layer(LayerKind::kGlobalAvgPool), layer(LayerKind::kLinear, 4)};
  return m;
}

/// n floats uniform in [-1, 1) from std::mt19937(seed).
inline std::vector<float> random_vector(std::size_t n, unsigned seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);
  return v;
}

/// The built `gossip` binary: $GOSSIP_BIN (meson test sets it), or build/src/cli/gossip next to
/// the test executable's build/tests/.
inline std::string gossip_bin() {
  if (const char* v = std::getenv("GOSSIP_BIN")) return v;
  namespace fs = std::filesystem;
  return (fs::canonical("/proc/self/exe").parent_path().parent_path() / "src/cli/gossip").string();
}

/// What `gossip ARGS` printed (stdout and stderr) and its exit code (-1: killed by a signal).
struct Run {
  int code = -1;
  std::string output;
};

/// Runs `gossip ARGS` through the shell (code -1 when it could not start).
inline Run run_gossip(const std::string& args) {
  Run r;
  FILE* p = ::popen((gossip_bin() + " " + args + " 2>&1").c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  while (std::size_t got = std::fread(buf, 1, sizeof buf, p)) r.output.append(buf, got);
  const int status = ::pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

}  // namespace gossip::test
