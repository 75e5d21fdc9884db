/// layer_spec: what the config room knows of each layer type, one row per LayerKind
/// (src/config/layer_specs.cpp): the keys its YAML map takes and the values they start from, its
/// output shape from its input's, and the parameters and buffers it keeps in the flat buffer.
/// The loader, infer_shapes, the fingerprint and flat_size read the row; the model room builds
/// the layer from its own row (src/model/model.cpp), which cannot live here because the config
/// room sees no backend. A new layer type is a row of GOSSIP_LAYERS, a row here, its file in
/// src/model and a row of the builders.
#pragma once
#if !defined(GOSSIP_ROOM_CONFIG)
#error "gossip/layer_spec.hpp belongs to room config, which this room does not use (see the room table in meson.build)"
#endif

#include <cstddef>
#include <cstdint>
#include <functional>
#include <ostream>
#include <span>
#include <string>

#include "gossip/config.hpp"
#include "gossip/core.hpp"

namespace gossip {

/// The number of layer types: the size of every table with a row per LayerKind, so a table that
/// misses a kind does not compile.
#define GOSSIP_COUNT_LAYER(...) +1
inline constexpr std::size_t kLayerKinds = 0 GOSSIP_LAYERS(GOSSIP_COUNT_LAYER);
#undef GOSSIP_COUNT_LAYER

/// One key of a layer's YAML map and the field it sets: a whole number (> 0, or >= 0 where
/// zero_allowed) or a fraction in [0, 1) (dropout's p).
struct LayerKey {
  const char* name;
  int LayerConfig::*whole = nullptr;
  double LayerConfig::*fraction = nullptr;
  bool zero_allowed = false;
  bool required = false;
};

/// A layer's input as its shape function sees it, with the checks that refuse it. Failures
/// name the layer's field through `where` ("model.layers[3].kernel: layer 3 (conv2d) ...").
class LayerInput {
 public:
  using Where = std::function<std::string(const std::string&)>;
  LayerInput(const LayerConfig& layer, std::size_t index, const Shape& in, const Where& where)
      : layer_(layer), index_(index), in_(in), where_(where) {}

  const LayerConfig& layer() const { return layer_; }
  const Shape& shape() const { return in_; }
  /// The error for `field` of this layer ("" for the layer itself).
  InputError fail(const std::string& field, const std::string& what) const;
  /// Throws unless the input is [channels, height, width].
  void need_image() const;
  /// Throws unless `value` of `field` is above 0.
  void positive(const char* field, int value) const;

 private:
  const LayerConfig& layer_;
  std::size_t index_;
  const Shape& in_;
  const Where& where_;
};

/// Values a layer keeps in the flat buffer, from its config and its input and output shapes.
using LayerCount = std::int64_t (*)(const LayerConfig& layer, const Shape& in, const Shape& out);

inline std::int64_t no_values(const LayerConfig&, const Shape&, const Shape&) { return 0; }
inline void no_fingerprint_fields(std::ostream&, const LayerConfig&) {}

/// One layer type's row. A field left out is the layer taking nothing of that kind.
struct LayerSpec {
  LayerKind kind;
  /// The keys of its YAML map, in the order their absence is reported.
  std::span<const LayerKey> keys = {};
  /// The fields before its keys are read (conv2d's stride 1; dropout's p -1, unset).
  LayerConfig starts = {};
  /// Pooling: a stride not given is the kernel.
  bool stride_defaults_to_kernel = false;
  /// Its output shape; throws (through the input's checks) when the input cannot feed it.
  Shape (*out)(const LayerInput& in) = nullptr;
  /// Trained values (the optimizer steps them) and buffers (mixed, never stepped).
  LayerCount params = no_values;
  LayerCount buffers = no_values;
  /// Writes its fields after its name in the model's fingerprint.
  void (*fingerprint)(std::ostream& os, const LayerConfig& layer) = no_fingerprint_fields;
};

/// The row of `kind`.
const LayerSpec& layer_spec(LayerKind kind);

/// The values `model` keeps in its flat buffer, every layer's parameters and buffers: a built
/// Model's num_params(), known without building one (the handshake compares it). Throws as
/// infer_shapes does.
std::int64_t flat_size(const ModelConfig& model);

}  // namespace gossip
