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

}  // namespace

std::vector<Shape> infer_shapes(const ModelConfig& model,
                                const std::function<std::string(const std::string&)>& where) {
  auto at = [&](const std::string& field) { return where ? where(field) : field; };
  check_input(model, at);
  std::vector<Shape> shapes{model.input};
  for (std::size_t i = 0; i < model.layers.size(); ++i) {
    const LayerConfig& l = model.layers[i];
    const Shape& in = shapes.back();
    const std::string name = cat("model.layers[", i, "]");
    auto fail = [&](const std::string& field, const std::string& what) -> InputError {
      return InputError(cat(at(field.empty() ? name : cat(name, ".", field)), ": layer ", i, " (",
                            layer_name(l.type), ") ", what));
    };
    auto need_image = [&]() {
      if (in.size() != 3)
        throw fail("", cat("needs a [channels, height, width] input, got ", shape_string(in)));
    };
    auto positive = [&](const char* field, int v) {
      if (v <= 0) throw fail(field, cat("needs ", field, " > 0, got ", v));
    };
    Shape out;
    switch (l.type) {
      using enum LayerKind;
    case kLinear: {
      positive("out", l.out);
      if (in.size() != 1)
        throw fail("", cat("needs a flat input, got ", shape_string(in),
                           " (put a flatten layer before it)"));
      out = {l.out};
      break;
    }
    case kConv2d: {
      need_image();
      positive("out_channels", l.out);
      positive("kernel", l.kernel);
      positive("stride", l.stride);
      if (l.padding < 0) throw fail("padding", cat("needs padding >= 0, got ", l.padding));
      if (l.kernel > in[1] + 2 * l.padding || l.kernel > in[2] + 2 * l.padding)
        throw fail("kernel", cat("kernel [", l.kernel, ",", l.kernel, "] is larger than its input ",
                                 shape_string(in), " with padding ", l.padding));
      out = {l.out, out_size(in[1], l.kernel, l.stride, l.padding),
             out_size(in[2], l.kernel, l.stride, l.padding)};
      break;
    }
    case kMaxPool2d:
    case kAvgPool2d: {
      need_image();
      positive("kernel", l.kernel);
      positive("stride", l.stride);
      if (l.kernel > in[1] || l.kernel > in[2])
        throw fail("kernel", cat("kernel [", l.kernel, ",", l.kernel, "] is larger than its input ",
                                 shape_string(in)));
      out = {in[0], out_size(in[1], l.kernel, l.stride, 0), out_size(in[2], l.kernel, l.stride, 0)};
      break;
    }
    case kRelu: {
      out = in;
      break;
    }
    case kFlatten: {
      out = {static_cast<int>(shape_size(in))};
      break;
    }
    case kDropout: {
      if (!(l.p >= 0.0 && l.p < 1.0)) throw fail("p", cat("needs p in [0, 1), got ", l.p));
      out = in;
      break;
    }
    case kBatchNorm: {
      out = in;
      break;
    }
    case kResidual: {
      need_image();
      positive("out_channels", l.out);
      positive("stride", l.stride);
      out = {l.out, out_size(in[1], 3, l.stride, 1), out_size(in[2], 3, l.stride, 1)};
      break;
    }
    case kGlobalAvgPool: {
      need_image();
      if (in[1] != in[2])
        throw fail("", cat("needs a square image (the pooling window is its whole plane), got ",
                           shape_string(in)));
      out = {in[0]};
      break;
    }
    case kGroupNorm: {
      positive("groups", l.groups);
      if (in[0] % l.groups != 0)
        throw fail("groups", cat(l.groups, " groups do not divide the ", in[0],
                                 " channels of its input ", shape_string(in)));
      out = in;
      break;
    }
    }
    shapes.push_back(out);
  }
  return shapes;
}

}  // namespace gossip
