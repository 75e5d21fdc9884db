// model/residual.cpp: the basic residual block of He et al. (2016), as one layer of the stack:
//   y = relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x))
// conv1 is 3x3 with the block's stride, conv2 3x3 with stride 1 (both padding 1); the shortcut
// is x itself when the shape stays, else bn_s(conv_s(x)) with a 1x1 convolution of the block's
// stride (the projection shortcut, option B). Its sublayers are the stack's own conv2d and
// batchnorm layers, laid out in the flat buffer one after another (conv1, bn1, conv2, bn2, then
// conv_s, bn_s), their running statistics among the buffers. It keeps its inner activations and
// two gradient buffers of its own; the stack's buffers carry only its input and output.
#include <algorithm>

#include "gossip/core.hpp"
#include "src/model/layers.hpp"

namespace gossip {
namespace {

class Residual final : public Layer {
 public:
  Residual(Backend& b, const Shape& in, const Shape& out, int stride, int max_batch)
      : in_size_(shape_size(in)), out_size_(shape_size(out)),
        projection_(in[0] != out[0] || in[1] != out[1] || in[2] != out[2]) {
    LayerConfig c3{.type = LayerKind::kConv2d, .out = out[0], .kernel = 3, .stride = stride,
                   .padding = 1, .groups = 0, .p = 0.0};
    const LayerConfig bn{.type = LayerKind::kBatchNorm};
    conv1_ = make_conv2d({b, c3, in, out, false, max_batch});
    bn1_ = make_batch_norm({b, bn, out, out, false, max_batch});
    c3.stride = 1;
    conv2_ = make_conv2d({b, c3, out, out, false, max_batch});
    bn2_ = make_batch_norm({b, bn, out, out, false, max_batch});
    if (projection_) {
      LayerConfig c1{.type = LayerKind::kConv2d, .out = out[0], .kernel = 1, .stride = stride,
                     .padding = 0, .groups = 0, .p = 0.0};
      conv_s_ = make_conv2d({b, c1, in, out, false, max_batch});
      bn_s_ = make_batch_norm({b, bn, out, out, false, max_batch});
    }
    const auto n = static_cast<std::size_t>(max_batch) * static_cast<std::size_t>(out_size_);
    for (auto* a : {&a1_, &b1_, &r1_, &a2_, &b2_, &g1_, &g2_}) *a = DeviceArray<float>(b, n);
    if (projection_) {
      as_ = DeviceArray<float>(b, n);
      bs_ = DeviceArray<float>(b, n);
      gin_ = DeviceArray<float>(b, static_cast<std::size_t>(max_batch) *
                                       static_cast<std::size_t>(in_size_));
    }
  }

  std::int64_t param_count() const override {
    std::int64_t n = 0;
    for (const Layer* l : parts()) n += l->param_count();
    return n;
  }
  std::int64_t buffer_count() const override {
    std::int64_t n = 0;
    for (const Layer* l : parts()) n += l->buffer_count();
    return n;
  }
  void set_offset(std::int64_t offset) override {
    offset_ = offset;
    for (Layer* l : parts()) {
      l->set_offset(offset);
      offset += l->param_count();
    }
  }
  void set_buffer_offset(std::int64_t offset) override {
    buffer_offset_ = offset;
    for (Layer* l : parts()) {
      l->set_buffer_offset(offset);
      offset += l->buffer_count();
    }
  }
  void init(float* host, std::mt19937_64& rng) const override {
    for (const Layer* l : parts()) l->init(host, rng);
  }

  void forward(LayerContext& c, const float* x, float* y, int rows) override {
    const std::int64_t n = rows * out_size_;
    conv1_->forward(c, x, a1_.data(), rows);
    bn1_->forward(c, a1_.data(), b1_.data(), rows);
    c.backend.relu(b1_.data(), r1_.data(), n);
    conv2_->forward(c, r1_.data(), a2_.data(), rows);
    bn2_->forward(c, a2_.data(), b2_.data(), rows);
    const float* shortcut = x;
    if (projection_) {
      conv_s_->forward(c, x, as_.data(), rows);
      bn_s_->forward(c, as_.data(), bs_.data(), rows);
      shortcut = bs_.data();
    }
    c.backend.add_weighted(b2_.data(), 1.0f, shortcut, n);  // b2 is not needed again
    c.backend.relu(b2_.data(), y, n);
  }

  float* backward(LayerContext& c, const float* x, const float* y, float* dy, float* spare,
                  int rows, bool need_dx) override {
    const std::int64_t n = rows * out_size_;
    c.backend.relu_backward(dy, y, n);  // dy: the gradient of the sum, both branches'
    const float* dx_shortcut = dy;
    if (projection_) {
      float* g = bn_s_->backward(c, as_.data(), bs_.data(), dy, g1_.data(), rows, true);
      conv_s_->backward(c, x, as_.data(), g, gin_.data(), rows, need_dx);
      dx_shortcut = gin_.data();
    }
    float* g = bn2_->backward(c, a2_.data(), b2_.data(), dy, g1_.data(), rows, true);
    g = conv2_->backward(c, r1_.data(), a2_.data(), g, g2_.data(), rows, true);
    c.backend.relu_backward(g, r1_.data(), n);
    g = bn1_->backward(c, a1_.data(), b1_.data(), g, g1_.data(), rows, true);
    conv1_->backward(c, x, a1_.data(), g, spare, rows, need_dx);
    if (!need_dx) return nullptr;
    c.backend.add_weighted(spare, 1.0f, dx_shortcut, rows * in_size_);
    return spare;
  }

  void gemms(int rows, bool need_dx, std::vector<RowMajorGemm>& out) const override {
    conv2_->gemms(rows, true, out);
    conv1_->gemms(rows, need_dx, out);
    if (projection_) conv_s_->gemms(rows, need_dx, out);
  }

 private:
  std::vector<Layer*> parts() const {
    std::vector<Layer*> p{conv1_.get(), bn1_.get(), conv2_.get(), bn2_.get()};
    if (projection_) p.insert(p.end(), {conv_s_.get(), bn_s_.get()});
    return p;
  }

  std::int64_t in_size_, out_size_;
  bool projection_;
  std::unique_ptr<Layer> conv1_, bn1_, conv2_, bn2_, conv_s_, bn_s_;
  DeviceArray<float> a1_, b1_, r1_, a2_, b2_;  // conv1, bn1, relu, conv2, bn2 outputs
  DeviceArray<float> as_, bs_;                 // the projection's conv and bn outputs
  DeviceArray<float> g1_, g2_, gin_;           // backward scratch (gin_: the projection's dx)
};

}  // namespace

std::unique_ptr<Layer> make_residual(const LayerBuild& b) {
  GOSSIP_CHECK(b.in.size() == 3 && b.out.size() == 3);
  return std::make_unique<Residual>(b.backend, b.in, b.out, b.config.stride, b.max_batch);
}

}  // namespace gossip
