// model/conv2d.cpp: 2-D convolution as im2col + GEMM, its backward as GEMM + col2im, with an
// optional folded ReLU. W [oc x c*k*k] row-major at offset, b [oc] after it (PyTorch's layout).
// A batch runs in chunks of samples whose im2col matrix fits a fixed workspace:
//   forward:  col = im2col(x), t = W col, y = act(t + b) back in NCHW
//   backward: dy *= [y > 0], t = dy in GEMM layout, dW (+)= t col^T, db (+)= rowsum(t),
//             dcol = W^T t, dx = col2im(dcol)
// When a training batch fits one chunk, backward reuses the forward's im2col matrix.
// Where the backend has a convolution library (cuDNN: Backend::conv_library), the whole batch
// goes to it instead, and the layer keeps no workspace of its own.
#include <algorithm>

#include "gossip/core.hpp"
#include "src/model/layers.hpp"

namespace gossip {
namespace {

// The im2col workspace holds at most this many floats (16 MiB), or one sample's if larger.
constexpr std::int64_t kColBudget = 4 << 20;

class Conv2d final : public Layer {
 public:
  Conv2d(Backend& b, const ConvGeom& g, bool relu, int max_batch)
      : g_(g), relu_(relu), native_(!b.conv_library().empty()) {
    if (native_) {
      chunk_ = std::max(1, max_batch);  // one call per batch (gemms() lists its products so)
      return;
    }
    const std::int64_t per_sample = static_cast<std::int64_t>(g.patch()) * g.positions();
    chunk_ = static_cast<int>(std::clamp<std::int64_t>(kColBudget / per_sample, 1, max_batch));
    col_ = DeviceArray<float>(b, static_cast<std::size_t>(per_sample) * chunk_);
    t_ = DeviceArray<float>(b, static_cast<std::size_t>(g.oc) * g.positions() * chunk_);
  }

  std::int64_t param_count() const override { return weight_count() + g_.oc; }
  std::int64_t weight_count() const override {
    return static_cast<std::int64_t>(g_.oc) * g_.patch();
  }
  int fan_in() const override { return g_.patch(); }

  void forward(LayerContext& c, const float* x, float* y, int rows) override {
    const float* w = c.params + offset_;
    if (native_) {
      c.backend.conv_forward(x, w, w + weight_count(), g_, rows, relu_, y);
      return;
    }
    for (int n0 = 0; n0 < rows; n0 += chunk_) {
      const int count = std::min(chunk_, rows - n0);
      c.backend.im2col(x + n0 * in_size(), g_, count, col_.data());
      c.backend.gemm(conv_forward_gemm(g_, count), w, col_.data(), t_.data());
      c.backend.conv_output(t_.data(), w + weight_count(), g_, count, relu_,
                            y + n0 * out_size());
    }
    col_holds_ = rows <= chunk_ ? x : nullptr;
  }

  float* backward(LayerContext& c, const float* x, const float* y, float* dy, float* spare,
                  int rows, bool need_dx) override {
    if (relu_) c.backend.relu_backward(dy, y, rows * out_size());
    const float* w = c.params + offset_;
    float* dw = c.grads + offset_;
    if (native_) {
      c.backend.conv_backward(x, w, dy, g_, rows, dw, dw + weight_count(),
                              need_dx ? spare : nullptr);
      return need_dx ? spare : nullptr;
    }
    for (int n0 = 0; n0 < rows; n0 += chunk_) {
      const int count = std::min(chunk_, rows - n0);
      c.backend.conv_grad_layout(dy + n0 * out_size(), g_, count, t_.data());
      if (col_holds_ != x || rows > chunk_)
        c.backend.im2col(x + n0 * in_size(), g_, count, col_.data());
      c.backend.gemm(conv_weight_grad_gemm(g_, count, n0 > 0), t_.data(), col_.data(), dw);
      c.backend.row_sums(t_.data(), g_.oc, count * g_.positions(), n0 > 0, dw + weight_count());
      if (need_dx) {
        c.backend.gemm(conv_input_grad_gemm(g_, count), w, t_.data(), col_.data());
        c.backend.col2im(col_.data(), g_, count, spare + n0 * in_size());
      }
    }
    col_holds_ = nullptr;
    return need_dx ? spare : nullptr;
  }

  void gemms(int rows, bool need_dx, std::vector<RowMajorGemm>& out) const override {
    for (int n0 = 0; n0 < rows; n0 += chunk_) {
      const int count = std::min(chunk_, rows - n0);
      out.push_back(conv_forward_gemm(g_, count));
      out.push_back(conv_weight_grad_gemm(g_, count, n0 > 0));
      if (need_dx) out.push_back(conv_input_grad_gemm(g_, count));
    }
  }

 private:
  std::int64_t in_size() const { return static_cast<std::int64_t>(g_.c) * g_.h * g_.w; }
  std::int64_t out_size() const { return static_cast<std::int64_t>(g_.oc) * g_.positions(); }

  ConvGeom g_;
  bool relu_;
  bool native_;  // the backend's convolution library runs the layer
  int chunk_ = 1;
  DeviceArray<float> col_;
  DeviceArray<float> t_;
  const float* col_holds_ = nullptr;  // the input whose im2col matrix col_ holds (one chunk)
};

}  // namespace

std::unique_ptr<Layer> make_conv2d(const LayerBuild& b) {
  const LayerConfig& l = b.config;
  const Shape& in = b.in;
  const Shape& out = b.out;
  GOSSIP_CHECK(in.size() == 3 && out.size() == 3);
  ConvGeom g;
  g.c = in[0];
  g.h = in[1];
  g.w = in[2];
  g.oc = out[0];
  g.k = l.kernel;
  g.stride = l.stride;
  g.pad = l.padding;
  g.oh = out[1];
  g.ow = out[2];
  GOSSIP_CHECK_EQ(g.oh, conv_out_size(g.h, g.k, g.stride, g.pad));
  GOSSIP_CHECK_EQ(g.ow, conv_out_size(g.w, g.k, g.stride, g.pad));
  return std::make_unique<Conv2d>(b.backend, g, b.relu, b.max_batch);
}

}  // namespace gossip
