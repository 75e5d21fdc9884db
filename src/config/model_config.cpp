// config/model_config.cpp: what a model config means — the MLP shorthand and shape inference.
// Shapes are checked here, at load time, so a model that cannot be built is refused with the
// file, line and field before anything trains; each layer's shape is its row's
// (layer_specs.cpp), and src/model builds layers from the shapes found here.
#include <sstream>

#include "gossip/config.hpp"
#include "gossip/core.hpp"
#include "gossip/layer_spec.hpp"

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
    const LayerConfig& layer = model.layers[i];
    shapes.push_back(layer_spec(layer.type).out(LayerInput(layer, i, shapes.back(), where)));
  }
  return shapes;
}

}  // namespace gossip
