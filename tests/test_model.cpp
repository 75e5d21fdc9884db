// Tests for model: every layer type's gradients against central finite differences (each layer
// type sits after a layer with parameters, so its input gradient is checked too), parameter
// counts and fingerprints in closed form, He initialisation statistics, and determinism.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "gossip/backend.hpp"
#include "gossip/hash.hpp"
#include "gossip/layer_spec.hpp"
#include "gossip/model.hpp"
#include "gossip/rng.hpp"

using namespace gossip;

namespace {

LayerConfig layer(const std::string& type, int out = 0, int kernel = 0, int stride = 0,
                  int padding = 0) {
  LayerConfig l;
  l.type = gossip::parse_choice(gossip::layer_table(), type, "layer");
  l.out = out;
  l.kernel = kernel;
  const bool conv = l.type == gossip::LayerKind::kConv2d || l.type == gossip::LayerKind::kResidual;
  l.stride = stride ? stride : (conv ? 1 : kernel);
  l.padding = padding;
  return l;
}

LayerConfig group_norm(int groups) {
  LayerConfig l;
  l.type = gossip::LayerKind::kGroupNorm;
  l.groups = groups;
  return l;
}

LayerConfig dropout(double p) {
  LayerConfig l;
  l.type = gossip::LayerKind::kDropout;
  l.p = p;
  return l;
}

/// Gradient check of a whole model: the loss is the training loss of one step from a fresh
/// init (so dropout draws the same mask every time), evaluated at params +- eps for up to
/// `per_layer` parameters of each layer, against forward_backward's gradient.
void check_gradients(const ModelConfig& config, int per_layer = 80) {
  auto cpu = make_cpu_backend(1);
  const int rows = 3;
  Model m(*cpu, config, rows);
  m.init(3, 0);
  std::vector<float> params(m.params(), m.params() + m.num_params());
  // Non-zero biases and shifts so ReLUs and pooling see both signs.
  for (const LayerInfo& l : m.layers())
    for (std::int64_t i = l.weights; i < l.params; ++i)
      params[l.offset + i] += 0.1f * static_cast<float>((i % 3) - 1);
  auto rng = make_rng(5, 0, Stream::kSynthetic);
  std::vector<float> x(static_cast<std::size_t>(rows) * m.input_size());
  for (auto& v : x) v = static_cast<float>(normal01(rng));
  std::vector<std::int32_t> y(rows);
  for (int r = 0; r < rows; ++r) y[r] = r % m.classes();

  auto loss_at = [&](const std::vector<float>& p) {
    m.init(3, 0);
    std::copy(p.begin(), p.end(), m.params());
    return m.forward_backward(x.data(), y.data(), rows).loss;
  };
  loss_at(params);
  const std::vector<float> grad(m.grads(), m.grads() + m.num_params());
  bool any_nonzero = false;
  for (float g : grad) {
    REQUIRE(std::isfinite(g));
    any_nonzero |= g != 0.0f;
  }
  REQUIRE(any_nonzero);

  int layers_checked = 0;
  for (const LayerInfo& l : m.layers()) {
    if (l.params == 0) continue;
    ++layers_checked;
    const std::int64_t step = std::max<std::int64_t>(1, l.params / per_layer);
    for (std::int64_t j = 0; j < l.params; j += step) {
      const std::int64_t i = l.offset + j;
      std::vector<float> p = params;
      const float eps = 3e-4f;
      p[i] = params[i] + eps;
      const double up = loss_at(p);
      p[i] = params[i] - eps;
      const double down = loss_at(p);
      const double numeric = (up - down) / (2.0 * eps);
      INFO(l.type << " parameter " << j << " of " << l.params << ": analytic " << grad[i]
                  << " numeric " << numeric);
      REQUIRE(grad[i] == Approx(numeric).margin(2e-3).epsilon(3e-2));
    }
  }
  REQUIRE(layers_checked > 0);
}

ModelConfig image_model(const Shape& input, std::vector<LayerConfig> layers) {
  ModelConfig m;
  m.input = input;
  m.layers = std::move(layers);
  return m;
}

}  // namespace

TEST_CASE("every layer type's gradient matches finite differences", "[model]") {
  SECTION("linear and relu (the MLP shorthand)") { check_gradients(ModelConfig::mlp({6, 5, 4, 3})); }
  SECTION("conv2d with stride and padding, and its input gradient") {
    check_gradients(image_model({2, 7, 7}, {layer("conv2d", 3, 3, 2, 1), layer("relu"),
                                            layer("conv2d", 4, 3), layer("flatten"),
                                            layer("linear", 3)}));
  }
  SECTION("maxpool2d, windows apart and overlapping") {
    check_gradients(image_model({2, 6, 6}, {layer("conv2d", 3, 3, 1, 1), layer("maxpool2d", 0, 2),
                                            layer("flatten"), layer("linear", 3)}));
    check_gradients(image_model({2, 7, 7}, {layer("conv2d", 3, 3, 1, 1),
                                            layer("maxpool2d", 0, 3, 2), layer("flatten"),
                                            layer("linear", 3)}));
  }
  SECTION("avgpool2d, windows apart and overlapping") {
    check_gradients(image_model({2, 6, 6}, {layer("conv2d", 3, 3, 1, 1), layer("avgpool2d", 0, 2),
                                            layer("flatten"), layer("linear", 3)}));
    check_gradients(image_model({2, 7, 7}, {layer("conv2d", 3, 3, 1, 1),
                                            layer("avgpool2d", 0, 3, 2), layer("flatten"),
                                            layer("linear", 3)}));
  }
  SECTION("groupnorm on images and on flat features") {
    check_gradients(image_model({2, 5, 5}, {layer("conv2d", 4, 3, 1, 1), group_norm(2),
                                            layer("relu"), layer("flatten"), layer("linear", 3)}));
    check_gradients(image_model({6}, {layer("linear", 8), group_norm(4), layer("relu"),
                                      layer("linear", 3)}));
  }
  SECTION("dropout (the same mask in forward and backward)") {
    check_gradients(image_model({6}, {layer("linear", 8), layer("relu"), dropout(0.4),
                                      layer("linear", 3)}));
  }
  SECTION("batchnorm on images and on flat features (training mode: the batch's statistics)") {
    check_gradients(image_model({2, 5, 5}, {layer("conv2d", 4, 3, 1, 1), layer("batchnorm"),
                                            layer("relu"), layer("flatten"), layer("linear", 3)}));
    check_gradients(image_model({6}, {layer("linear", 8), layer("batchnorm"), layer("relu"),
                                      layer("linear", 3)}));
  }
  SECTION("residual blocks: identity and projection shortcuts, and global average pooling") {
    check_gradients(image_model({2, 6, 6}, {layer("conv2d", 3, 3, 1, 1), layer("residual", 3),
                                            layer("residual", 4, 0, 2), layer("globalavgpool"),
                                            layer("linear", 3)}),
                    120);
  }
  SECTION("a standalone relu after pooling") {
    check_gradients(image_model({1, 6, 6}, {layer("conv2d", 2, 3), layer("maxpool2d", 0, 2),
                                            layer("relu"), layer("flatten"), layer("linear", 3)}));
  }
}

TEST_CASE("dropout drops about p of the activations in training and none in evaluation",
          "[model]") {
  auto cpu = make_cpu_backend(1);
  const ModelConfig config = image_model({1000}, {dropout(0.25), layer("linear", 2)});
  Model m(*cpu, config, 1);
  m.init(1, 0);
  // Identity-like linear: logit 0 = sum of the inputs that survived (scaled by 1/(1-p)).
  std::fill(m.params(), m.params() + m.num_params(), 0.0f);
  for (int i = 0; i < 1000; ++i) m.params()[i] = 1.0f;
  std::vector<float> x(1000, 1.0f);
  CHECK(m.forward(x.data(), 1)[0] == Approx(1000.0));
  std::int32_t label = 1;  // logit 0 is large: its gradient is 1
  m.forward_backward(x.data(), &label, 1);
  // d loss / d w_i is x_i * scale_i * dlogit_0 (about 1): count the zero gradients.
  int dropped = 0;
  for (int i = 0; i < 1000; ++i) dropped += m.grads()[i] == 0.0f;
  CHECK(dropped > 200);
  CHECK(dropped < 300);
}

TEST_CASE("parameter counts, layer offsets and fingerprints in closed form", "[model]") {
  auto cpu = make_cpu_backend(1);
  CHECK(mlp_param_count({784, 256, 128, 10}) == 235146);
  CHECK(flat_size(ModelConfig::mlp({784, 256, 128, 10})) == 235146);
  CHECK(model_fingerprint(ModelConfig::mlp({784, 256, 128, 10})) == "784-256-128-10");

  // The small CNN: conv 5x5x32, pool, conv 5x5x64, pool, linear 128, linear 10.
  const ModelConfig cnn = image_model(
      {1, 28, 28}, {layer("conv2d", 32, 5), layer("relu"), layer("maxpool2d", 0, 2),
                    layer("conv2d", 64, 5), layer("relu"), layer("maxpool2d", 0, 2),
                    layer("flatten"), layer("linear", 128), layer("relu"), layer("linear", 10)});
  const std::int64_t expect = (25 + 1) * 32 + (32 * 25 + 1) * 64 + (1024 + 1) * 128 + (128 + 1) * 10;
  CHECK(flat_size(cnn) == expect);
  CHECK(model_fingerprint(cnn) ==
        "1x28x28-conv2d32k5s1p0-relu-maxpool2d2s2-conv2d64k5s1p0-relu-maxpool2d2s2-flatten-"
        "linear128-relu-linear10");
  Model m(*cpu, cnn, 4);
  CHECK(m.num_params() == expect);
  REQUIRE(m.layers().size() == cnn.layers.size());
  CHECK(m.layers()[3].in == Shape{32, 12, 12});
  CHECK(m.layers()[3].out == Shape{64, 8, 8});
  CHECK(m.layers()[3].offset == (25 + 1) * 32);
  CHECK(m.layers()[3].weights == 64 * 32 * 25);
  CHECK(m.layers()[6].out == Shape{1024});
  CHECK(m.layers()[9].offset + m.layers()[9].params == expect);

  // Any change to the layer list changes the fingerprint, not only the parameter count.
  ModelConfig other = cnn;
  other.layers[2].type = gossip::LayerKind::kAvgPool2d;
  CHECK(flat_size(other) == expect);
  CHECK(model_fingerprint(other) != model_fingerprint(cnn));
}

TEST_CASE("a model whose last layer is not flat is refused", "[model]") {
  auto cpu = make_cpu_backend(1);
  CHECK_THROWS_WITH(Model(*cpu, image_model({1, 6, 6}, {layer("conv2d", 2, 3)}), 1),
                    Catch::Contains("output [2,4,4] is not flat"));
}

TEST_CASE("He initialisation has variance 2/fan-in and zero biases", "[model]") {
  auto cpu = make_cpu_backend(1);
  SECTION("linear") {
    Model m(*cpu, {400, 300, 10}, 1);
    m.init(1, 0);
    const LayerInfo& l = m.layers()[0];
    double sq = 0.0;
    for (std::int64_t i = 0; i < l.weights; ++i) sq += m.params()[l.offset + i] * m.params()[l.offset + i];
    CHECK(sq / l.weights == Approx(2.0 / 400).epsilon(0.03));
    for (std::int64_t i = l.weights; i < l.params; ++i) REQUIRE(m.params()[l.offset + i] == 0.0f);
  }
  SECTION("conv2d: fan-in is channels x kernel x kernel; group norm starts as the identity") {
    Model m(*cpu, image_model({8, 10, 10}, {layer("conv2d", 64, 5), group_norm(4), layer("flatten"),
                                            layer("linear", 2)}), 1);
    m.init(1, 0);
    const LayerInfo& l = m.layers()[0];
    CHECK(l.fan_in == 200);
    double sq = 0.0;
    for (std::int64_t i = 0; i < l.weights; ++i) sq += m.params()[l.offset + i] * m.params()[l.offset + i];
    CHECK(sq / l.weights == Approx(2.0 / 200).epsilon(0.05));
    const LayerInfo& gn = m.layers()[1];
    REQUIRE(gn.params == 128);
    for (int i = 0; i < 64; ++i) REQUIRE(m.params()[gn.offset + i] == 1.0f);
    for (int i = 64; i < 128; ++i) REQUIRE(m.params()[gn.offset + i] == 0.0f);
  }
}

TEST_CASE("initialisation depends on seed and peer only", "[model]") {
  auto cpu = make_cpu_backend(1);
  auto hash_of = [&](std::uint64_t seed, int peer) {
    Model m(*cpu, {8, 6, 3}, 1);
    m.init(seed, peer);
    return sha256_hex(std::span<const float>(m.params(), m.num_params()));
  };
  CHECK(hash_of(1, 0) == hash_of(1, 0));
  CHECK(hash_of(1, 0) != hash_of(2, 0));
  CHECK(hash_of(1, 0) != hash_of(1, 1));
}

TEST_CASE("a batch larger than the convolution's workspace gives the same result in chunks",
          "[model]") {
  // 28x28 positions of 5x5x16 patches make one sample's im2col matrix 400 x 784 floats; the
  // workspace (4M floats) holds 13 of them, so 40 rows run in four chunks.
  auto cpu = make_cpu_backend(1);
  const ModelConfig config = image_model({16, 32, 32}, {layer("conv2d", 8, 5), layer("relu"),
                                                        layer("flatten"), layer("linear", 3)});
  Model big(*cpu, config, 40), one(*cpu, config, 1);
  big.init(2, 0);
  one.init(2, 0);
  auto rng = make_rng(9, 0, Stream::kSynthetic);
  std::vector<float> x(40 * 16 * 32 * 32);
  for (auto& v : x) v = static_cast<float>(normal01(rng));
  const float* all = big.forward(x.data(), 40);
  std::vector<float> logits(all, all + 40 * 3);
  for (int r = 0; r < 40; ++r) {
    const float* own = one.forward(x.data() + static_cast<std::size_t>(r) * 16 * 32 * 32, 1);
    for (int c = 0; c < 3; ++c) REQUIRE(logits[r * 3 + c] == Approx(own[c]).margin(1e-4));
  }
}

TEST_CASE("batch norm: the batch's statistics in training, the running ones in evaluation, and "
          "the running ones move by the momentum", "[model]") {
  auto cpu = make_cpu_backend(1);
  // Two channels of 2x2 over 3 samples; identity-like linear at the end to read the output.
  const ModelConfig config = image_model({2, 2, 2}, {layer("batchnorm"), layer("flatten"),
                                                     layer("linear", 8)});
  Model m(*cpu, config, 3);
  m.init(1, 0);
  REQUIRE(m.trainable_params() == 2 * 2 + 8 * 8 + 8);
  REQUIRE(m.num_params() == m.trainable_params() + 2 * 2);
  const LayerInfo& bn = m.layers()[0];
  CHECK(bn.params == 4);
  CHECK(bn.buffers == 4);
  CHECK(bn.buffer_offset == m.trainable_params());
  float* p = m.params();
  // Running mean 0, variance 1 at the start; gamma 1, beta 0.
  CHECK(p[bn.buffer_offset] == 0.0f);
  CHECK(p[bn.buffer_offset + 2] == 1.0f);
  CHECK(p[bn.offset] == 1.0f);
  CHECK(p[bn.offset + 2] == 0.0f);
  // The linear layer as the identity: logits are the normalised values.
  std::fill(p + 4, p + 4 + 72, 0.0f);
  for (int i = 0; i < 8; ++i) p[4 + i * 8 + i] = 1.0f;
  std::vector<float> x(24);
  for (int i = 0; i < 24; ++i) x[i] = static_cast<float>((i * 7) % 11) - 3.0f;
  // Training: each channel of the output has mean 0 and (biased) variance 1 - eps-ish.
  std::vector<std::int32_t> labels{0, 1, 2};
  m.forward_backward(x.data(), labels.data(), 3);
  double mean[2] = {0, 0}, var[2] = {0, 0}, bm[2] = {0, 0}, bv[2] = {0, 0};
  const float* y = nullptr;
  for (int c = 0; c < 2; ++c) {
    for (int n = 0; n < 3; ++n)
      for (int i = 0; i < 4; ++i) bm[c] += x[(n * 2 + c) * 4 + i] / 12.0;
    for (int n = 0; n < 3; ++n)
      for (int i = 0; i < 4; ++i) bv[c] += std::pow(x[(n * 2 + c) * 4 + i] - bm[c], 2) / 11.0;
  }
  // Running statistics after one step: 0.9 * start + 0.1 * the batch's (variance unbiased).
  CHECK(p[bn.buffer_offset + 0] == Approx(0.1 * bm[0]));
  CHECK(p[bn.buffer_offset + 1] == Approx(0.1 * bm[1]));
  CHECK(p[bn.buffer_offset + 2] == Approx(0.9 + 0.1 * bv[0]));
  CHECK(p[bn.buffer_offset + 3] == Approx(0.9 + 0.1 * bv[1]));
  // Evaluation uses the running statistics: y = (x - running mean) / sqrt(running var + eps).
  y = m.forward(x.data(), 3);
  for (int n = 0; n < 3; ++n)
    for (int c = 0; c < 2; ++c)
      for (int i = 0; i < 4; ++i) {
        const int at = (n * 2 + c) * 4 + i;
        const double expect = (x[at] - p[bn.buffer_offset + c]) /
                              std::sqrt(p[bn.buffer_offset + 2 + c] + 1e-5);
        CHECK(y[at] == Approx(expect).margin(1e-5));
        mean[c] += expect / 12.0;
      }
  (void)var;
  CHECK(mean[0] != Approx(0.0).margin(1e-3));  // not the batch's normalisation
}

TEST_CASE("a residual block whose convolutions are zero is relu of its shortcut; global "
          "average pooling is each channel's mean", "[model]") {
  auto cpu = make_cpu_backend(1);
  const ModelConfig config = image_model({2, 4, 4}, {layer("residual", 2), layer("globalavgpool"),
                                                     layer("linear", 2)});
  Model m(*cpu, config, 2);
  m.init(7, 0);
  // conv1, bn1, conv2, bn2: zero the convolutions' weights and biases (bn: gamma 1, beta 0).
  const LayerInfo& block = m.layers()[0];
  CHECK(block.params == 2 * (2 * 9 * 2 + 2) + 2 * 4);
  CHECK(block.buffers == 2 * 4);
  float* p = m.params();
  const std::int64_t conv = 2 * 9 * 2 + 2, bn = 4;
  std::fill(p + block.offset, p + block.offset + conv, 0.0f);
  std::fill(p + block.offset + conv + bn, p + block.offset + 2 * conv + bn, 0.0f);
  // The linear layer as the identity on the two channel means.
  const LayerInfo& lin = m.layers()[2];
  std::fill(p + lin.offset, p + lin.offset + lin.params, 0.0f);
  p[lin.offset] = p[lin.offset + 3] = 1.0f;
  std::vector<float> x(2 * 2 * 16);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 5) - 2.0f;
  std::vector<std::int32_t> labels{0, 1};
  m.forward_backward(x.data(), labels.data(), 2);  // training mode: the block's own statistics
  const float* y = m.forward(x.data(), 2);  // evaluation: running mean 0.1 * 0 = 0, var ~0.9
  for (int n = 0; n < 2; ++n)
    for (int c = 0; c < 2; ++c) {
      double expect = 0.0;
      for (int i = 0; i < 16; ++i) expect += std::max(0.0f, x[(n * 2 + c) * 16 + i]) / 16.0;
      CHECK(y[n * 2 + c] == Approx(expect).margin(1e-5));
    }
}

TEST_CASE("ResNet-20 as the config writes it: 0.27 M trained parameters, closed form",
          "[model]") {
  std::vector<LayerConfig> layers{layer("conv2d", 16, 3, 1, 1), layer("batchnorm"),
                                  layer("relu")};
  for (const int c : {16, 32, 64})
    for (int b = 0; b < 3; ++b) layers.push_back(layer("residual", c, 0, b == 0 && c > 16 ? 2 : 1));
  layers.push_back(layer("globalavgpool"));
  layers.push_back(layer("linear", 10));
  const ModelConfig resnet = image_model({1, 28, 28}, layers);
  const std::int64_t trained = 272970, channels = 16 + 6 * 16 + 7 * 32 + 7 * 64 - 32 - 64 + 32 + 64;
  auto cpu = make_cpu_backend(1);
  Model m(*cpu, resnet, 2);
  CHECK(m.trainable_params() == trained);
  CHECK(m.num_params() == trained + 2 * channels);
  CHECK(flat_size(resnet) == m.num_params());
  CHECK(m.layers()[6].out == Shape{32, 14, 14});
  CHECK(m.layers()[9].out == Shape{64, 7, 7});
  CHECK(m.layers()[12].out == Shape{64});
  CHECK(model_fingerprint(resnet).find("-residual32s2-") != std::string::npos);
}
