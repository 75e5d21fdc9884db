// model/elementwise.cpp: the layers without parameters that act element by element: relu (when
// not folded into the layer before it), flatten (a view: NCHW is already flat per sample) and
// inverted dropout (mask recomputed from the step's key in backward, never stored).
#include "gossip/core.hpp"
#include "src/model/layers.hpp"

namespace gossip {
namespace {

class Relu final : public Layer {
 public:
  explicit Relu(std::int64_t size) : size_(size) {}
  void forward(LayerContext& c, const float* x, float* y, int rows) override {
    c.backend.relu(x, y, rows * size_);
  }
  float* backward(LayerContext& c, const float*, const float* y, float* dy, float*, int rows,
                  bool need_dx) override {
    if (!need_dx) return nullptr;
    c.backend.relu_backward(dy, y, rows * size_);
    return dy;
  }

 private:
  std::int64_t size_;
};

class Flatten final : public Layer {
 public:
  bool aliases_input() const override { return true; }
  void forward(LayerContext&, const float*, float*, int) override {}
  float* backward(LayerContext&, const float*, const float*, float* dy, float*, int,
                  bool need_dx) override {
    return need_dx ? dy : nullptr;
  }
};

class Dropout final : public Layer {
 public:
  Dropout(float p, std::int64_t size) : p_(p), size_(size) {}
  void forward(LayerContext& c, const float* x, float* y, int rows) override {
    // Evaluation: p = 0 keeps every element with scale 1, an exact copy.
    c.backend.dropout(x, y, rows * size_, c.training ? p_ : 0.0f, c.key);
  }
  float* backward(LayerContext& c, const float*, const float*, float* dy, float*, int rows,
                  bool need_dx) override {
    if (!need_dx) return nullptr;
    c.backend.dropout(dy, dy, rows * size_, p_, c.key);
    return dy;
  }

 private:
  float p_;
  std::int64_t size_;
};

}  // namespace

std::unique_ptr<Layer> make_relu(const LayerBuild& b) {
  return std::make_unique<Relu>(shape_size(b.in));
}
std::unique_ptr<Layer> make_flatten(const LayerBuild&) { return std::make_unique<Flatten>(); }
std::unique_ptr<Layer> make_dropout(const LayerBuild& b) {
  return std::make_unique<Dropout>(static_cast<float>(b.config.p), shape_size(b.in));
}

}  // namespace gossip
