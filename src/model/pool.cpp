// model/pool.cpp: max and average pooling (square windows, no padding). Max pooling keeps each
// output's arg-max index so backward routes the gradient to it; average pooling spreads it
// evenly over the window (gossip/layer_math.hpp).
#include "gossip/core.hpp"
#include "src/model/layers.hpp"

namespace gossip {
namespace {

class Pool final : public Layer {
 public:
  Pool(Backend& b, const PoolGeom& g, bool max, int max_batch) : g_(g) {
    if (max) arg_ = DeviceArray<std::int32_t>(b, static_cast<std::size_t>(max_batch) * out_size());
  }

  void forward(LayerContext& c, const float* x, float* y, int rows) override {
    c.backend.pool_forward(x, g_, rows, y, arg_.data());
  }

  float* backward(LayerContext& c, const float*, const float*, float* dy, float* spare, int rows,
                  bool need_dx) override {
    if (!need_dx) return nullptr;
    c.backend.pool_backward(dy, arg_.data(), g_, rows, spare);
    return spare;
  }

 private:
  std::int64_t out_size() const { return static_cast<std::int64_t>(g_.c) * g_.oh * g_.ow; }

  PoolGeom g_;
  DeviceArray<std::int32_t> arg_;  // empty for average pooling
};

}  // namespace

std::unique_ptr<Layer> make_pool(const LayerBuild& b) {
  const LayerConfig& l = b.config;
  const Shape& in = b.in;
  const Shape& out = b.out;
  GOSSIP_CHECK(in.size() == 3 && out.size() == 3);
  PoolGeom g;
  g.c = in[0];
  g.h = in[1];
  g.w = in[2];
  g.k = l.kernel;
  g.stride = l.stride;
  g.oh = out[1];
  g.ow = out[2];
  GOSSIP_CHECK_EQ(g.oh, conv_out_size(g.h, g.k, g.stride, 0));
  return std::make_unique<Pool>(b.backend, g, l.type == LayerKind::kMaxPool2d, b.max_batch);
}

std::unique_ptr<Layer> make_global_avg_pool(const LayerBuild& b) {
  const Shape& in = b.in;
  GOSSIP_CHECK(in.size() == 3 && in[1] == in[2]);
  LayerConfig l;
  l.type = LayerKind::kAvgPool2d;
  l.kernel = l.stride = in[1];
  const Shape pooled{in[0], 1, 1};
  return make_pool({b.backend, l, in, pooled, false, b.max_batch});
}

}  // namespace gossip
