// model/linear.cpp: the fully connected layer, with an optional folded ReLU.
//   forward:  y = act(x W^T + b)          W [out x in], row-major, at offset; b [out] after it
//   backward: dy *= [y > 0] (folded ReLU), dW = dy^T x, db = colsum(dy), dx = dy W
#include <cmath>

#include "gossip/core.hpp"
#include "gossip/rng.hpp"
#include "src/model/layers.hpp"

namespace gossip {

void Layer::init(float* host, std::mt19937_64& rng) const {
  if (weight_count() == 0) return;
  const double stddev = std::sqrt(2.0 / fan_in());
  for (std::int64_t i = 0; i < weight_count(); ++i)
    host[offset_ + i] = static_cast<float>(stddev * normal01(rng));
}

namespace {

class Linear final : public Layer {
 public:
  Linear(int in, int out, bool relu) : in_(in), out_(out), relu_(relu) {}

  std::int64_t param_count() const override { return weight_count() + out_; }
  std::int64_t weight_count() const override { return static_cast<std::int64_t>(in_) * out_; }
  int fan_in() const override { return in_; }

  void forward(LayerContext& c, const float* x, float* y, int rows) override {
    c.backend.gemm(row_major_gemm(false, true, rows, out_, in_), x, c.params + offset_, y);
    c.backend.bias_act(y, c.params + offset_ + weight_count(), rows, out_, relu_);
  }

  float* backward(LayerContext& c, const float* x, const float* y, float* dy, float* spare,
                  int rows, bool need_dx) override {
    if (relu_) c.backend.relu_backward(dy, y, static_cast<std::int64_t>(rows) * out_);
    c.backend.gemm(row_major_gemm(true, false, out_, in_, rows), dy, x, c.grads + offset_);
    c.backend.column_sums(dy, rows, out_, c.grads + offset_ + weight_count());
    if (!need_dx) return nullptr;
    c.backend.gemm(row_major_gemm(false, false, rows, in_, out_), dy, c.params + offset_, spare);
    return spare;
  }

  void gemms(int rows, bool need_dx, std::vector<RowMajorGemm>& out) const override {
    out.push_back(row_major_gemm(false, true, rows, out_, in_));
    out.push_back(row_major_gemm(true, false, out_, in_, rows));
    if (need_dx) out.push_back(row_major_gemm(false, false, rows, in_, out_));
  }

 private:
  int in_, out_;
  bool relu_;
};

}  // namespace

std::unique_ptr<Layer> make_linear(const LayerBuild& b) {
  GOSSIP_CHECK(b.in.size() == 1 && b.out.size() == 1);
  return std::make_unique<Linear>(b.in[0], b.out[0], b.relu);
}

}  // namespace gossip
