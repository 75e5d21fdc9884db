/// model: an MLP (ReLU hidden layers, softmax cross-entropy) over one flat parameter buffer and
/// one flat gradient buffer (DESIGN idea 1). Layer l's weight is a view W_l [out x in] row-major
/// at w_offset, its bias b_l [out] at b_offset. Not thread-safe: one model per peer.
#pragma once
#if !defined(GOSSIP_ROOM_MODEL)
#error "gossip/model.hpp belongs to room model, which this room does not use (see the room table in meson.build)"
#endif

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "gossip/backend.hpp"

namespace gossip {

struct LayerView {
  int in = 0;
  int out = 0;
  std::int64_t w_offset = 0;  // into the flat buffer
  std::int64_t b_offset = 0;
};

/// Loss and correct predictions over a batch.
struct BatchResult {
  double loss = 0.0;          // mean over the batch
  std::int64_t correct = 0;
  int rows = 0;
};

class Mlp {
 public:
  /// `layers` are sizes from input to output (at least two, all positive); activations are sized
  /// for batches of up to `max_batch` rows.
  Mlp(Backend& backend, std::vector<int> layers, int max_batch);

  /// He initialisation (normal, variance 2/in; biases 0), deterministic from (seed, stream_peer).
  void init(std::uint64_t seed, int stream_peer);

  /// Logits for `rows` inputs x (device pointer, rows x input size). Valid until the next call.
  const float* forward(const float* x, int rows);
  /// Forward, loss and backward: fills grads() with d(mean loss)/d(params).
  BatchResult forward_backward(const float* x, const std::int32_t* labels, int rows);
  /// Forward and loss only.
  BatchResult evaluate(const float* x, const std::int32_t* labels, int rows);

  std::int64_t num_params() const { return num_params_; }
  float* params() { return params_.data(); }
  const float* params() const { return params_.data(); }
  float* grads() { return grads_.data(); }
  const std::vector<LayerView>& layers() const { return views_; }
  const std::vector<int>& sizes() const { return sizes_; }
  int max_batch() const { return max_batch_; }
  Backend& backend() { return *backend_; }

  /// "784-256-128-10": what the network handshake compares.
  std::string fingerprint() const;

 private:
  Backend* backend_;
  std::vector<int> sizes_;
  std::vector<LayerView> views_;
  std::int64_t num_params_ = 0;
  int max_batch_;
  DeviceArray<float> params_;
  DeviceArray<float> grads_;
  std::vector<DeviceArray<float>> acts_;  // acts_[l] = output of layer l (post-activation)
  DeviceArray<float> delta_a_;            // ping-pong buffers for backward deltas
  DeviceArray<float> delta_b_;
};

/// Parameter count of an MLP with these layer sizes.
std::int64_t mlp_param_count(const std::vector<int>& layers);

/// "784-256-128-10".
std::string layers_string(const std::vector<int>& layers);

}  // namespace gossip
