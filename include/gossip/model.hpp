/// model: a stack of layers (linear, conv2d, max/avg and global average pooling, relu, flatten,
/// dropout, group and batch norm, residual blocks)
/// built from a ModelConfig, with softmax cross-entropy on the output, over one flat parameter
/// buffer and one flat gradient buffer (DESIGN idea 1): each layer's weights are a view
/// (offset, size) into them. A ReLU after linear or conv2d is folded into that layer. Not
/// thread-safe: one model per peer.
#pragma once
#if !defined(GOSSIP_ROOM_MODEL)
#error "gossip/model.hpp belongs to room model, which this room does not use (see the room table in meson.build)"
#endif

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "gossip/backend.hpp"
#include "gossip/config.hpp"

namespace gossip {

class Layer;  // src/model/layers.hpp

/// Where one layer of the config lives in the flat buffer, and its shapes.
struct LayerInfo {
  std::string type;
  Shape in, out;
  std::int64_t offset = 0;   // first parameter in the flat buffer
  std::int64_t params = 0;   // parameters of this layer (0 for relu, pooling, ...)
  std::int64_t weights = 0;  // of which weights (the rest: biases, or group norm's beta)
  int fan_in = 0;            // inputs per output (He initialisation's variance is 2 / fan_in)
  // Values it keeps in the flat buffer that are not trained (batch norm's running mean and
  // variance), after every layer's parameters: mixed like them, never stepped by the optimizer.
  std::int64_t buffer_offset = 0;
  std::int64_t buffers = 0;
};

/// Loss and correct predictions over a batch.
struct BatchResult {
  double loss = 0.0;          // mean over the batch
  std::int64_t correct = 0;
  int rows = 0;
};

class Model {
 public:
  /// Builds `config`'s layers (throws InputError when its shapes do not fit, see infer_shapes).
  /// Forward buffers are sized for `max_batch` rows, backward ones for `max_train_batch` rows
  /// (0: max_batch), so a large evaluation batch costs no gradient memory.
  /// `shared_scratch` (host backends only; ignored on a device): the gradient buffer and the
  /// activations are not this model's but the calling thread's, one set per model shape and
  /// thread, so that a thousand virtual peers stepped by a few worker threads hold a few sets
  /// rather than a thousand. grads() then holds the gradients of this thread's last
  /// forward_backward, which is all an optimizer step reads.
  Model(Backend& backend, const ModelConfig& config, int max_batch, int max_train_batch = 0,
        bool shared_scratch = false);
  /// The MLP shorthand (ModelConfig::mlp).
  Model(Backend& backend, const std::vector<int>& mlp_sizes, int max_batch);
  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  /// He initialisation (normal, variance 2/fan-in; biases 0, group norm scale 1, shift 0),
  /// deterministic from (seed, stream_peer). Also resets dropout's mask stream to
  /// (seed, dropout_peer) (-1: stream_peer).
  void init(std::uint64_t seed, int stream_peer, int dropout_peer = -1);
  /// The same with `values` (init's draws for some stream, made once by another model) in place
  /// of drawing them again: bit for bit what init(seed, that stream, dropout_peer) gives.
  void init_from(std::span<const float> values, std::uint64_t seed, int dropout_peer);

  /// Logits for `rows` inputs x (device pointer, rows x input size), in evaluation mode (no
  /// dropout). Valid until the next call.
  const float* forward(const float* x, int rows);
  /// Forward in training mode, loss and backward: fills grads() with d(mean loss)/d(params).
  /// `meanwhile`, when set, runs once the backward pass is queued, before the loss is read.
  BatchResult forward_backward(const float* x, const std::int32_t* labels, int rows,
                               const std::function<void()>& meanwhile = {});
  /// Forward and loss only (evaluation mode).
  BatchResult evaluate(const float* x, const std::int32_t* labels, int rows);
  /// The matrix products of one training step (forward_backward) of `rows` samples, in the
  /// order it runs them: the shapes choose_gemm times.
  std::vector<RowMajorGemm> gemm_shapes(int rows) const;

  /// The flat buffer's length: the trained parameters, then the buffers (LayerInfo::buffers).
  std::int64_t num_params() const { return num_params_; }
  /// The trained parameters: the first trainable_params() values (the optimizer steps these).
  std::int64_t trainable_params() const { return trainable_params_; }
  float* params() { return params_.data(); }
  const float* params() const { return params_.data(); }
  float* grads() { return grads_ptr_; }
  /// One entry per layer of the config (folded ReLUs included, with no parameters).
  const std::vector<LayerInfo>& layers() const { return info_; }
  int input_size() const { return input_size_; }
  int classes() const { return classes_; }
  int max_batch() const { return max_batch_; }
  Backend& backend() { return *backend_; }

  /// The layer list as the network handshake compares it (model_fingerprint).
  std::string fingerprint() const { return fingerprint_; }

 private:
  void run_forward(const float* x, int rows, bool training);
  /// Points the scratch pointers at this model's own buffers, or at the calling thread's.
  void bind_scratch();
  struct Scratch;
  /// Config `l`'s layer from `in` to `out` at `offset` in the flat buffer (`relu`: the ReLU
  /// after it folded in), with its LayerInfo and output buffer's size; returns its parameters.
  std::int64_t add_layer(const LayerConfig& l, const Shape& in, const Shape& out, bool relu,
                         int max_batch, std::int64_t offset);
  /// Each running layer's buffers (running statistics) from `off` on, `info_of` its entry in
  /// info_; returns the end of the flat buffer.
  std::int64_t place_buffers(std::int64_t off, const std::vector<std::size_t>& info_of);
  /// This model's own scratch (not shared_scratch), bound.
  void allocate_scratch();

  Backend* backend_;
  std::vector<LayerInfo> info_;
  std::vector<std::unique_ptr<Layer>> layers_;  // what runs (ReLUs folded away)
  std::int64_t num_params_ = 0;
  std::int64_t trainable_params_ = 0;
  int input_size_ = 0;
  int classes_ = 0;
  int max_batch_;
  int max_train_batch_;
  std::string fingerprint_;
  DeviceArray<float> params_;
  // Scratch: the gradients, each layer's output and the ping-pong buffers for backward
  // gradients, owned here or (shared_scratch) the calling thread's; the pointers say where.
  bool shared_scratch_ = false;
  std::vector<std::int64_t> act_sizes_;  // floats of each layer's output buffer (0: aliases)
  std::int64_t delta_size_ = 0;          // floats of each ping-pong buffer
  std::size_t scratch_key_ = 0;          // which thread-local set fits this model
  DeviceArray<float> grads_;
  std::vector<DeviceArray<float>> acts_;
  DeviceArray<float> delta_a_;
  DeviceArray<float> delta_b_;
  float* grads_ptr_ = nullptr;
  std::vector<float*> act_ptrs_;
  float* delta_a_ptr_ = nullptr;
  float* delta_b_ptr_ = nullptr;
  std::vector<const float*> outs_;  // where each layer's output is after a forward
  std::uint64_t dropout_seed_ = 0;
  std::uint64_t train_steps_ = 0;  // forward_backward calls: each draws new dropout masks
};

/// The whole layer list in one line: "784-256-128-10" for the MLP shorthand, otherwise the
/// input and each layer with its fields, e.g.
/// "1x28x28-conv2d32k5s1p0-relu-maxpool2d2s2-flatten-linear10".
std::string model_fingerprint(const ModelConfig& config);

/// Parameter count of an MLP with these layer sizes.
std::int64_t mlp_param_count(const std::vector<int>& layers);

/// "784-256-128-10".
std::string layers_string(const std::vector<int>& layers);

}  // namespace gossip
