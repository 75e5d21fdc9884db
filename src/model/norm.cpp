// model/norm.cpp: group norm (Wu & He, 2018). Unlike batch norm it keeps no running statistics,
// so averaging two peers' models averages nothing but parameters. gamma [c] at offset (init 1),
// beta [c] after it (init 0); each (sample, group)'s mean and rstd are kept for backward.
#include "gossip/core.hpp"
#include "src/model/layers.hpp"

namespace gossip {
namespace {

class GroupNorm final : public Layer {
 public:
  GroupNorm(Backend& b, const GroupNormGeom& g, int max_batch)
      : g_(g),
        mean_(b, static_cast<std::size_t>(max_batch) * g.groups),
        rstd_(b, static_cast<std::size_t>(max_batch) * g.groups) {}

  std::int64_t param_count() const override { return 2 * g_.c; }
  std::int64_t weight_count() const override { return g_.c; }
  int fan_in() const override { return 0; }
  void init(float* host, std::mt19937_64&) const override {
    for (int i = 0; i < g_.c; ++i) host[offset_ + i] = 1.0f;
  }

  void forward(LayerContext& c, const float* x, float* y, int rows) override {
    c.backend.group_norm_forward(x, c.params + offset_, c.params + offset_ + g_.c, g_, rows, y,
                                 mean_.data(), rstd_.data());
  }

  float* backward(LayerContext& c, const float* x, const float*, float* dy, float* spare,
                  int rows, bool need_dx) override {
    c.backend.group_norm_backward(x, dy, c.params + offset_, mean_.data(), rstd_.data(), g_, rows,
                                  need_dx ? spare : nullptr, c.grads + offset_,
                                  c.grads + offset_ + g_.c);
    return need_dx ? spare : nullptr;
  }

 private:
  GroupNormGeom g_;
  DeviceArray<float> mean_;
  DeviceArray<float> rstd_;
};

}  // namespace

std::unique_ptr<Layer> make_group_norm(const LayerBuild& b) {
  const Shape& in = b.in;
  GroupNormGeom g;
  g.c = in[0];
  g.spatial = in.size() == 3 ? in[1] * in[2] : 1;
  g.groups = b.config.groups;
  GOSSIP_CHECK(g.groups > 0 && g.c % g.groups == 0);
  return std::make_unique<GroupNorm>(b.backend, g, b.max_batch);
}

}  // namespace gossip
