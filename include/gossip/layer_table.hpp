/// layer_table: every layer type of model.layers as one row, the only place a layer type is
/// named, and the config of one layer (LayerConfig). A row is X(id, name, summary, make_
/// function (src/model), spec): the enum LayerKind, the names configs, fingerprints and messages
/// use, the config room's spec table (src/config/layer_specs.cpp: keys, starts, shape, counts,
/// fingerprint fields; gossip/layer_spec.hpp) and the model room's builders (src/model/model.cpp,
/// declared in src/model/layers.hpp) all come from GOSSIP_LAYERS. The spec columns are
/// LayerSpec's designated initializers after its kind, in its field order; they name the shape
/// rules and counts defined in layer_specs.cpp (or give their own as captureless lambdas), and are
/// expanded there only, as the make_ column is only in src/model. A layer without a kernel is
/// its file in src/model (its Layer and its make_ function), its name in src/model/meson.build
/// and its row here.
#pragma once
#if !defined(GOSSIP_ROOM_CONFIG)
#error "gossip/layer_table.hpp belongs to room config, which this room does not use (see the room table in meson.build)"
#endif

#include <ostream>

#include "gossip/choice.hpp"

namespace gossip {

// The spec's commas make it several macro arguments: an X takes them as `...`. A key is
// LayerKey{name, the LayerConfig field it sets, ...}; left-out spec fields take nothing of that
// kind (no keys, no parameters, no buffers, no fingerprint fields, no ReLU folded in).
#define GOSSIP_LAYERS(X)                                                                         \
  X(kLinear, "linear", "fully connected: out features, with a bias", make_linear,               \
    .keys = {LayerKey{.name = "out", .whole = &LayerConfig::out, .required = true}},             \
    .out = linear_shape, .params = linear_params, .fingerprint = linear_fingerprint,             \
    .folds_relu = true)                                                                          \
  X(kConv2d, "conv2d", "2-D convolution: out_channels, kernel, stride (1), padding (0), a bias", \
    make_conv2d,                                                                                 \
    .keys = {LayerKey{.name = "out_channels", .whole = &LayerConfig::out, .required = true},    \
             LayerKey{.name = "kernel", .whole = &LayerConfig::kernel, .required = true},       \
             LayerKey{.name = "stride", .whole = &LayerConfig::stride},                         \
             LayerKey{.name = "padding", .whole = &LayerConfig::padding,                        \
                      .zero_allowed = true}},                                                   \
    .starts = {.stride = 1}, .out = conv2d_shape, .params = conv2d_params,                       \
    .fingerprint = conv2d_fingerprint, .folds_relu = true)                                       \
  X(kMaxPool2d, "maxpool2d", "the maximum of each kernel x kernel window, stride (the kernel)",  \
    make_pool, .keys = kPoolKeys, .stride_defaults_to_kernel = true, .out = pool2d_shape,        \
    .fingerprint = pool2d_fingerprint)                                                           \
  X(kAvgPool2d, "avgpool2d", "the mean of each kernel x kernel window, stride (the kernel)",     \
    make_pool, .keys = kPoolKeys, .stride_defaults_to_kernel = true, .out = pool2d_shape,        \
    .fingerprint = pool2d_fingerprint)                                                           \
  X(kRelu, "relu", "max(x, 0)", make_relu, .out = same_shape)                                    \
  X(kFlatten, "flatten", "[channels, height, width] to one flat vector", make_flatten,           \
    .out = flat_shape)                                                                           \
  X(kDropout, "dropout", "zeroes each value with probability p while training", make_dropout,   \
    .keys = {LayerKey{.name = "p", .fraction = &LayerConfig::p, .required = true}},              \
    .starts = {.p = -1.0}, .out = dropout_shape, .fingerprint = dropout_fingerprint)             \
  X(kGroupNorm, "groupnorm",                                                                     \
    "normalises each group of channels, then a learned scale and shift", make_group_norm,       \
    .keys = {LayerKey{.name = "groups", .whole = &LayerConfig::groups, .required = true}},       \
    .out = group_norm_shape, .params = norm_params, .fingerprint = group_norm_fingerprint)       \
  X(kBatchNorm, "batchnorm",                                                                     \
    "normalises each channel over the batch, then a learned scale and shift; its running mean "  \
    "and variance (evaluation mode) are in the flat buffer, mixed with the parameters",         \
    make_batch_norm, .out = same_shape, .params = norm_params, .buffers = batch_norm_buffers)    \
  X(kResidual, "residual",                                                                       \
    "a basic residual block: conv3x3(stride)-batchnorm-relu-conv3x3-batchnorm plus the input "  \
    "(through conv1x1(stride)-batchnorm where the shape changes), then relu",                    \
    make_residual,                                                                               \
    .keys = {LayerKey{.name = "out_channels", .whole = &LayerConfig::out, .required = true},    \
             LayerKey{.name = "stride", .whole = &LayerConfig::stride}},                        \
    .starts = {.stride = 1}, .out = residual_shape, .params = residual_params,                   \
    .buffers = residual_buffers, .fingerprint = residual_fingerprint)                            \
  X(kGlobalAvgPool, "globalavgpool", "the mean of each channel over the image: [c, h, w] to [c]", \
    make_global_avg_pool, .out = global_avg_pool_shape)

/// layer_table(): every layer type, in the order docs and messages list them; layer_name().
GOSSIP_NAMED_CHOICE(LayerKind, GOSSIP_LAYERS, layer_table, layer_name)
/// Writes the layer type's name (messages, test output).
inline std::ostream& operator<<(std::ostream& os, LayerKind kind) { return os << layer_name(kind); }

/// One layer of model.layers. Fields a type does not use stay 0.
struct LayerConfig {
  LayerKind type = LayerKind::kRelu;
  int out = 0;       // linear: output features; conv2d, residual: out_channels
  int kernel = 0;    // conv2d, maxpool2d, avgpool2d: square kernel size
  int stride = 0;    // conv2d, residual (1 when not given); pooling (the kernel when not given)
  int padding = 0;   // conv2d: zeros on each side
  int groups = 0;    // groupnorm: channel groups (must divide the channels)
  double p = 0.0;    // dropout: probability of dropping an element, in [0, 1)
};

}  // namespace gossip
