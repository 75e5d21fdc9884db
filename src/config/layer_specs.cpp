// config/layer_specs.cpp: each layer type's spec from its row of GOSSIP_LAYERS
// (gossip/layer_table.hpp, gossip/layer_spec.hpp), and the shape rules and counts the rows name.
// The counts here are what the built layers report (src/model checks them against each other
// when it builds a model), so a handshake can compare a model's size without building it.
#include <array>

#include "gossip/layer_spec.hpp"

namespace gossip {

InputError LayerInput::fail(const std::string& field, const std::string& what) const {
  const std::string name = cat("model.layers[", index_, "]");
  const std::string at = field.empty() ? name : cat(name, ".", field);
  return InputError(cat(where_ ? where_(at) : at, ": layer ", index_, " (",
                        layer_name(layer_.type), ") ", what));
}

void LayerInput::need_image() const {
  if (in_.size() != 3)
    throw fail("", cat("needs a [channels, height, width] input, got ", shape_string(in_)));
}

void LayerInput::positive(const char* field, int value) const {
  if (value <= 0) throw fail(field, cat("needs ", field, " > 0, got ", value));
}

namespace {

int out_size(int in, int k, int stride, int pad) {
  return in + 2 * pad < k ? 0 : (in + 2 * pad - k) / stride + 1;
}

Shape same_shape(const LayerInput& in) { return in.shape(); }

Shape flat_shape(const LayerInput& in) { return {static_cast<int>(shape_size(in.shape()))}; }

Shape linear_shape(const LayerInput& in) {
  in.positive("out", in.layer().out);
  if (in.shape().size() != 1)
    throw in.fail("", cat("needs a flat input, got ", shape_string(in.shape()),
                          " (put a flatten layer before it)"));
  return {in.layer().out};
}

Shape conv2d_shape(const LayerInput& in) {
  const LayerConfig& l = in.layer();
  const Shape& s = in.shape();
  in.need_image();
  in.positive("out_channels", l.out);
  in.positive("kernel", l.kernel);
  in.positive("stride", l.stride);
  if (l.padding < 0) throw in.fail("padding", cat("needs padding >= 0, got ", l.padding));
  if (l.kernel > s[1] + 2 * l.padding || l.kernel > s[2] + 2 * l.padding)
    throw in.fail("kernel", cat("kernel [", l.kernel, ",", l.kernel, "] is larger than its input ",
                                shape_string(s), " with padding ", l.padding));
  return {l.out, out_size(s[1], l.kernel, l.stride, l.padding),
          out_size(s[2], l.kernel, l.stride, l.padding)};
}

Shape pool2d_shape(const LayerInput& in) {
  const LayerConfig& l = in.layer();
  const Shape& s = in.shape();
  in.need_image();
  in.positive("kernel", l.kernel);
  in.positive("stride", l.stride);
  if (l.kernel > s[1] || l.kernel > s[2])
    throw in.fail("kernel", cat("kernel [", l.kernel, ",", l.kernel, "] is larger than its input ",
                                shape_string(s)));
  return {s[0], out_size(s[1], l.kernel, l.stride, 0), out_size(s[2], l.kernel, l.stride, 0)};
}

Shape dropout_shape(const LayerInput& in) {
  const double p = in.layer().p;
  if (!(p >= 0.0 && p < 1.0)) throw in.fail("p", cat("needs p in [0, 1), got ", p));
  return in.shape();
}

Shape residual_shape(const LayerInput& in) {
  const LayerConfig& l = in.layer();
  const Shape& s = in.shape();
  in.need_image();
  in.positive("out_channels", l.out);
  in.positive("stride", l.stride);
  return {l.out, out_size(s[1], 3, l.stride, 1), out_size(s[2], 3, l.stride, 1)};
}

Shape global_avg_pool_shape(const LayerInput& in) {
  const Shape& s = in.shape();
  in.need_image();
  if (s[1] != s[2])
    throw in.fail("", cat("needs a square image (the pooling window is its whole plane), got ",
                          shape_string(s)));
  return {s[0]};
}

Shape group_norm_shape(const LayerInput& in) {
  const LayerConfig& l = in.layer();
  const Shape& s = in.shape();
  in.positive("groups", l.groups);
  if (s[0] % l.groups != 0)
    throw in.fail("groups", cat(l.groups, " groups do not divide the ", s[0],
                                " channels of its input ", shape_string(s)));
  return s;
}

std::int64_t linear_params(const LayerConfig& l, const Shape& in, const Shape&) {
  return (shape_size(in) + 1) * l.out;  // weights and a bias per output
}

std::int64_t conv2d_params(const LayerConfig& l, const Shape& in, const Shape&) {
  return (static_cast<std::int64_t>(in[0]) * l.kernel * l.kernel + 1) * l.out;
}

/// Group and batch norm: a scale and a shift per channel.
std::int64_t norm_params(const LayerConfig&, const Shape& in, const Shape&) { return 2 * in[0]; }

/// Batch norm: a running mean and variance per channel.
std::int64_t batch_norm_buffers(const LayerConfig&, const Shape& in, const Shape&) {
  return 2 * in[0];
}

/// The residual block's shortcut is conv1x1-batchnorm only where the block changes the shape.
bool residual_projects(const LayerConfig& l, const Shape& in, const Shape& out) {
  return in[0] != l.out || in[1] != out[1] || in[2] != out[2];
}

std::int64_t residual_params(const LayerConfig& l, const Shape& in, const Shape& out) {
  const std::int64_t cin = in[0], cout = l.out;
  // Two conv3x3 with biases, each followed by a batch norm's scale and shift.
  std::int64_t n = (cin * 9 + 1) * cout + (cout * 9 + 1) * cout + 2 * 2 * cout;
  if (residual_projects(l, in, out)) n += (cin + 1) * cout + 2 * cout;
  return n;
}

std::int64_t residual_buffers(const LayerConfig& l, const Shape& in, const Shape& out) {
  const std::int64_t cout = l.out;
  return 2 * 2 * cout + (residual_projects(l, in, out) ? 2 * cout : 0);
}

void linear_fingerprint(std::ostream& os, const LayerConfig& l) { os << l.out; }

void conv2d_fingerprint(std::ostream& os, const LayerConfig& l) {
  os << l.out << "k" << l.kernel << "s" << l.stride << "p" << l.padding;
}

void pool2d_fingerprint(std::ostream& os, const LayerConfig& l) {
  os << l.kernel << "s" << l.stride;
}

void dropout_fingerprint(std::ostream& os, const LayerConfig& l) { os << l.p; }

void group_norm_fingerprint(std::ostream& os, const LayerConfig& l) { os << l.groups; }

void residual_fingerprint(std::ostream& os, const LayerConfig& l) {
  os << l.out << "s" << l.stride;
}

/// Both pooling rows' keys.
constexpr LayerKeys kPoolKeys{
    LayerKey{.name = "kernel", .whole = &LayerConfig::kernel, .required = true},
    LayerKey{.name = "stride", .whole = &LayerConfig::stride}};

// Each row's spec: its columns after the make_ function (src/model's) are LayerSpec's fields
// after its kind.
#define GOSSIP_LAYER_SPEC(id, name, summary, make, ...) \
  LayerSpec{.kind = LayerKind::id, __VA_ARGS__},
constexpr std::array<LayerSpec, kLayerKinds> kSpecs{{GOSSIP_LAYERS(GOSSIP_LAYER_SPEC)}};
#undef GOSSIP_LAYER_SPEC

/// Every row in enum order (the table is made from the enum's own rows) and with a shape:
/// layer_spec() indexes the table by the kind.
constexpr bool rows_complete() {
  for (std::size_t i = 0; i < kSpecs.size(); ++i)
    if (static_cast<std::size_t>(kSpecs[i].kind) != i || kSpecs[i].out == nullptr) return false;
  return true;
}
static_assert(rows_complete(), "every row of GOSSIP_LAYERS needs its shape (.out)");

}  // namespace

const LayerSpec& layer_spec(LayerKind kind) { return kSpecs[static_cast<std::size_t>(kind)]; }

std::int64_t flat_size(const ModelConfig& model) {
  const std::vector<Shape> shapes = infer_shapes(model);
  std::int64_t n = 0;
  for (std::size_t i = 0; i < model.layers.size(); ++i) {
    const LayerConfig& l = model.layers[i];
    const LayerSpec& spec = layer_spec(l.type);
    n += spec.params(l, shapes[i], shapes[i + 1]) + spec.buffers(l, shapes[i], shapes[i + 1]);
  }
  return n;
}

}  // namespace gossip
