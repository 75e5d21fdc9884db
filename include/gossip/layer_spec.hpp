/// layer_spec: what the config room knows of each layer type, its row's spec (GOSSIP_LAYERS in
/// gossip/layer_table.hpp, expanded in src/config/layer_specs.cpp): the keys its YAML map takes
/// and the values they start from, its output shape from its input's, the parameters and buffers
/// it keeps in the flat buffer, its fields in the fingerprint, and whether a ReLU after it runs
/// inside it. The loader, infer_shapes, the fingerprint and flat_size read the spec; the model
/// room builds the layer with the make_ function the same row names (the config room sees no
/// backend, so that column is expanded in src/model only) and checks its counts against the spec.
/// A new layer type without a kernel is three files: its own in src/model (its Layer and make_
/// function), its name in src/model/meson.build, and its row, which names the shared shape rules
/// (same_shape, flat_shape, ...) and counts of layer_specs.cpp or gives its own as captureless
/// lambdas; a layer with a kernel adds the backend's calls.
#pragma once
#if !defined(GOSSIP_ROOM_CONFIG)
#error "gossip/layer_spec.hpp belongs to room config, which this room does not use (see the room table in meson.build)"
#endif

#include <array>
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
  const char* name = nullptr;
  int LayerConfig::*whole = nullptr;
  double LayerConfig::*fraction = nullptr;
  bool zero_allowed = false;
  bool required = false;
};

/// The most keys a layer takes (conv2d's four; raise it for a layer with more).
inline constexpr std::size_t kMaxLayerKeys = 4;
/// A layer's keys in its row, in the order their absence is reported; unused entries are null.
using LayerKeys = std::array<LayerKey, kMaxLayerKeys>;

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

/// One layer type's spec, from its row of GOSSIP_LAYERS. A field left out is the layer taking
/// nothing of that kind.
struct LayerSpec {
  LayerKind kind{};  // the row's id
  /// The keys of its YAML map, in the order their absence is reported.
  LayerKeys keys = {};
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
  /// A ReLU right after it runs inside it (linear, conv2d): the model room folds it in.
  bool folds_relu = false;

  /// Its keys without the unused entries.
  std::span<const LayerKey> key_list() const {
    std::size_t n = 0;
    while (n < keys.size() && keys[n].name != nullptr) ++n;
    return std::span<const LayerKey>(keys.data(), n);
  }
};

/// The row of `kind`.
const LayerSpec& layer_spec(LayerKind kind);

/// The values `model` keeps in its flat buffer, every layer's parameters and buffers: a built
/// Model's num_params(), known without building one (the handshake compares it). Throws as
/// infer_shapes does.
std::int64_t flat_size(const ModelConfig& model);

}  // namespace gossip
