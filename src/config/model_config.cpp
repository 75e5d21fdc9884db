// config/model_config.cpp: what a model config means — the MLP shorthand and shape inference.
// Shapes are checked here, at load time, so a model that cannot be built is refused with the
// file, line and field before anything trains; src/model builds layers from the shapes found here.
#include <sstream>

#include "gossip/config.hpp"
#include "gossip/core.hpp"

namespace gossip {

ModelConfig ModelConfig::mlp(const std::vector<int>& sizes) {
  ModelConfig m;
  if (sizes.empty()) return m;
  m.input = {sizes.front()};
  for (std::size_t i = 1; i < sizes.size(); ++i) {
    if (i > 1) m.layers.push_back(LayerConfig{.type = LayerKind::kRelu});
    m.layers.push_back(LayerConfig{.type = LayerKind::kLinear, .out = sizes[i]});
  }
  return m;
}

int ModelConfig::input_size() const { return static_cast<int>(shape_size(input)); }

std::string shape_string(const Shape& s) {
  std::ostringstream os;
  os << "[";
  for (std::size_t i = 0; i < s.size(); ++i) os << (i ? "," : "") << s[i];
  os << "]";
  return os.str();
}

std::int64_t shape_size(const Shape& s) {
  std::int64_t n = s.empty() ? 0 : 1;
  for (int d : s) n *= d;
  return n;
}

namespace {

int out_size(int in, int k, int stride, int pad) {
  return in + 2 * pad < k ? 0 : (in + 2 * pad - k) / stride + 1;
}

/// Throws InputError (naming the field with `at`) when the input shape or the layer list is
/// unusable.
template <typename At>
void check_input(const ModelConfig& model, const At& at) {
  if (model.input.size() != 1 && model.input.size() != 3)
    throw InputError(cat(at("model.input"), ": give [features] or [channels, height, width], got ",
                         shape_string(model.input)));
  for (int d : model.input)
    if (d <= 0)
      throw InputError(cat(at("model.input"), ": sizes must be positive, got ",
                           shape_string(model.input)));
  if (model.layers.empty()) throw InputError(cat(at("model.layers"), ": the model has no layers"));
}

using Where = std::function<std::string(const std::string&)>;

/// One layer's output shape from its input's, and the checks that refuse a layer its input cannot
/// feed; errors name the layer's field through `where`.
class LayerShape {
 public:
  LayerShape(const LayerConfig& layer, std::size_t index, const Shape& in, const Where& where)
      : l_(layer), i_(index), in_(in), where_(where), name_(cat("model.layers[", index, "]")) {}

  Shape out() const {
    switch (l_.type) {
      using enum LayerKind;
    case kLinear:
      return linear();
    case kConv2d:
      return conv2d();
    case kMaxPool2d:
    case kAvgPool2d:
      return pool2d();
    case kRelu:
      return in_;
    case kFlatten:
      return {static_cast<int>(shape_size(in_))};
    case kDropout:
      if (!(l_.p >= 0.0 && l_.p < 1.0)) throw fail("p", cat("needs p in [0, 1), got ", l_.p));
      return in_;
    case kBatchNorm:
      return in_;
    case kResidual:
      return residual();
    case kGlobalAvgPool:
      return global_avg_pool();
    case kGroupNorm:
      return group_norm();
    }
    return {};
  }

 private:
  Shape linear() const {
    positive("out", l_.out);
    if (in_.size() != 1)
      throw fail("", cat("needs a flat input, got ", shape_string(in_),
                         " (put a flatten layer before it)"));
    return {l_.out};
  }

  Shape conv2d() const {
    need_image();
    positive("out_channels", l_.out);
    positive("kernel", l_.kernel);
    positive("stride", l_.stride);
    if (l_.padding < 0) throw fail("padding", cat("needs padding >= 0, got ", l_.padding));
    if (l_.kernel > in_[1] + 2 * l_.padding || l_.kernel > in_[2] + 2 * l_.padding)
      throw fail("kernel", cat("kernel [", l_.kernel, ",", l_.kernel, "] is larger than its input ",
                               shape_string(in_), " with padding ", l_.padding));
    return {l_.out, out_size(in_[1], l_.kernel, l_.stride, l_.padding),
            out_size(in_[2], l_.kernel, l_.stride, l_.padding)};
  }

  Shape pool2d() const {
    need_image();
    positive("kernel", l_.kernel);
    positive("stride", l_.stride);
    if (l_.kernel > in_[1] || l_.kernel > in_[2])
      throw fail("kernel", cat("kernel [", l_.kernel, ",", l_.kernel, "] is larger than its input ",
                               shape_string(in_)));
    return {in_[0], out_size(in_[1], l_.kernel, l_.stride, 0),
            out_size(in_[2], l_.kernel, l_.stride, 0)};
  }

  Shape residual() const {
    need_image();
    positive("out_channels", l_.out);
    positive("stride", l_.stride);
    return {l_.out, out_size(in_[1], 3, l_.stride, 1), out_size(in_[2], 3, l_.stride, 1)};
  }

  Shape global_avg_pool() const {
    need_image();
    if (in_[1] != in_[2])
      throw fail("", cat("needs a square image (the pooling window is its whole plane), got ",
                         shape_string(in_)));
    return {in_[0]};
  }

  Shape group_norm() const {
    positive("groups", l_.groups);
    if (in_[0] % l_.groups != 0)
      throw fail("groups", cat(l_.groups, " groups do not divide the ", in_[0],
                               " channels of its input ", shape_string(in_)));
    return in_;
  }

  std::string at(const std::string& field) const { return where_ ? where_(field) : field; }

  InputError fail(const std::string& field, const std::string& what) const {
    return InputError(cat(at(field.empty() ? name_ : cat(name_, ".", field)), ": layer ", i_, " (",
                          layer_name(l_.type), ") ", what));
  }

  void need_image() const {
    if (in_.size() != 3)
      throw fail("", cat("needs a [channels, height, width] input, got ", shape_string(in_)));
  }

  void positive(const char* field, int v) const {
    if (v <= 0) throw fail(field, cat("needs ", field, " > 0, got ", v));
  }

  const LayerConfig& l_;
  std::size_t i_;
  const Shape& in_;
  const Where& where_;
  std::string name_;
};

}  // namespace

std::vector<Shape> infer_shapes(const ModelConfig& model, const Where& where) {
  auto at = [&](const std::string& field) { return where ? where(field) : field; };
  check_input(model, at);
  std::vector<Shape> shapes{model.input};
  for (std::size_t i = 0; i < model.layers.size(); ++i)
    shapes.push_back(LayerShape(model.layers[i], i, shapes.back(), where).out());
  return shapes;
}

}  // namespace gossip
