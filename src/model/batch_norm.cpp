// model/batch_norm.cpp: batch norm (Ioffe & Szegedy, 2015) over [c] or [c, h, w]. gamma [c] at
// offset (init 1), beta [c] after it (init 0); the running mean [c] (init 0) and variance [c]
// (init 1) are buffers: in the flat buffer after every layer's parameters, so gossip mixes them
// with the parameters (as PyTorch's buffers are averaged) and the optimizer never touches them.
// Training normalises with the batch's statistics and moves the running ones; evaluation uses
// the running ones.
#include "gossip/core.hpp"
#include "src/model/layers.hpp"

namespace gossip {
namespace {

class BatchNorm final : public Layer {
 public:
  BatchNorm(Backend& b, const BatchNormGeom& g) : g_(g), mean_(b, g.c), rstd_(b, g.c) {}

  std::int64_t param_count() const override { return 2 * g_.c; }
  std::int64_t weight_count() const override { return g_.c; }
  std::int64_t buffer_count() const override { return 2 * g_.c; }
  int fan_in() const override { return 0; }
  void init(float* host, std::mt19937_64&) const override {
    for (int i = 0; i < g_.c; ++i) {
      host[offset_ + i] = 1.0f;                   // gamma
      host[offset_ + g_.c + i] = 0.0f;            // beta
      host[buffer_offset_ + i] = 0.0f;            // running mean
      host[buffer_offset_ + g_.c + i] = 1.0f;     // running variance
    }
  }

  void forward(LayerContext& c, const float* x, float* y, int rows) override {
    c.backend.batch_norm_forward(x, c.params + offset_, c.params + offset_ + g_.c, g_, rows,
                                 c.training, y, mean_.data(), rstd_.data(),
                                 c.state + buffer_offset_, c.state + buffer_offset_ + g_.c);
  }

  float* backward(LayerContext& c, const float* x, const float*, float* dy, float* spare,
                  int rows, bool need_dx) override {
    c.backend.batch_norm_backward(x, dy, c.params + offset_, mean_.data(), rstd_.data(), g_, rows,
                                  need_dx ? spare : nullptr, c.grads + offset_,
                                  c.grads + offset_ + g_.c);
    return need_dx ? spare : nullptr;
  }

 private:
  BatchNormGeom g_;
  DeviceArray<float> mean_;  // the last training batch's, per channel, for backward
  DeviceArray<float> rstd_;
};

}  // namespace

std::unique_ptr<Layer> make_batch_norm(const LayerBuild& b) {
  const Shape& in = b.in;
  BatchNormGeom g;
  g.c = in[0];
  g.spatial = in.size() == 3 ? in[1] * in[2] : 1;
  return std::make_unique<BatchNorm>(b.backend, g);
}

}  // namespace gossip
