// model/layers.hpp: the layer interface the Model runs, and one make_ function per layer type
// (named by its row of GOSSIP_LAYERS, declared here from the rows). A layer owns no parameters:
// it is told its offset into the flat parameter and gradient buffers, and keeps only its scratch
// (arg-max indices, group statistics, im2col workspace).
#pragma once
#if !defined(GOSSIP_ROOM_MODEL)
#error "src/model/layers.hpp belongs to room model, which this room does not use (see the room table in meson.build)"
#endif

#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "gossip/backend.hpp"
#include "gossip/config.hpp"

namespace gossip {

/// What one forward or backward call sees besides its tensors.
struct LayerContext {
  Backend& backend;
  const float* params;  // the flat buffers (device pointers)
  float* grads;
  float* state;         // the flat parameter buffer again, writable: running statistics
  bool training;        // forward: dropout active
  std::uint64_t key;    // this step's dropout key for this layer
};

class Layer {
 public:
  virtual ~Layer() = default;

  /// Parameters in the flat buffer, starting at offset(); weights() of them come first.
  virtual std::int64_t param_count() const { return 0; }
  virtual std::int64_t weight_count() const { return 0; }
  virtual int fan_in() const { return 0; }
  /// Values it keeps in the flat buffer that are not trained (batch norm's running statistics):
  /// placed after every layer's parameters, at buffer_offset(); mixed like parameters, never
  /// touched by the optimizer.
  virtual std::int64_t buffer_count() const { return 0; }
  virtual void set_offset(std::int64_t offset) { offset_ = offset; }
  virtual void set_buffer_offset(std::int64_t offset) { buffer_offset_ = offset; }
  std::int64_t offset() const { return offset_; }
  std::int64_t buffer_offset() const { return buffer_offset_; }
  /// Writes this layer's initial parameters into host[offset() ...] (weights from rng).
  virtual void init(float* host, std::mt19937_64& rng) const;

  /// True when the output is the input itself (flatten): no buffer, no work either way.
  virtual bool aliases_input() const { return false; }
  /// y = f(x) for `rows` samples.
  virtual void forward(LayerContext& c, const float* x, float* y, int rows) = 0;
  /// Given dy = dL/dy (which the layer may overwrite), writes the gradients of its parameters
  /// and, when `need_dx`, dL/dx into `spare` or in place into dy. Returns where dL/dx is (null
  /// when not needed).
  virtual float* backward(LayerContext& c, const float* x, const float* y, float* dy,
                          float* spare, int rows, bool need_dx) = 0;
  /// Appends the matrix products that forward and backward of `rows` samples run (with dL/dx when
  /// `need_dx`), as they call them: what the backend times to choose its GEMM.
  virtual void gemms(int rows, bool need_dx, std::vector<RowMajorGemm>& out) const {
    (void)rows, (void)need_dx, (void)out;
  }

 protected:
  std::int64_t offset_ = 0;
  std::int64_t buffer_offset_ = 0;
};

/// What building one layer takes: its config, its input and output shapes, whether the ReLU
/// after it is folded in (its spec's folds_relu, where a ReLU follows), and the largest batch it
/// will see.
struct LayerBuild {
  Backend& backend;
  const LayerConfig& config;
  const Shape& in;
  const Shape& out;
  bool relu;
  int max_batch;
};

/// The make_ functions GOSSIP_LAYERS names (gossip/layer_table.hpp), one per layer's source file
/// (maxpool2d and avgpool2d share make_pool), all of one signature so the model builds every
/// layer through its row.
#define GOSSIP_LAYER_DECLARE_MAKE(id, name, summary, make, ...) \
  std::unique_ptr<Layer> make(const LayerBuild& b);
GOSSIP_LAYERS(GOSSIP_LAYER_DECLARE_MAKE)
#undef GOSSIP_LAYER_DECLARE_MAKE

}  // namespace gossip
