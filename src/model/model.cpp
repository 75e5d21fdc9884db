// model/model.cpp: the layer stack over the flat buffers. Building walks the config with the
// shapes infer_shapes found, makes each layer with its row's make_ function (folding each ReLU
// that follows a layer whose spec folds it, linear or conv2d, into it), gives each layer its
// offset in the flat buffer, and sizes one activation buffer per layer plus two ping-pong
// gradient buffers. Backward runs the layers in reverse and stops after the first layer with
// parameters: no input gradient is formed that nothing consumes.
#include <algorithm>
#include <array>
#include <functional>
#include <memory>
#include <sstream>
#include <unordered_map>

#include "gossip/core.hpp"
#include "gossip/layer_spec.hpp"
#include "gossip/model.hpp"
#include "gossip/rng.hpp"
#include "src/model/layers.hpp"

namespace gossip {

std::int64_t mlp_param_count(const std::vector<int>& layers) {
  std::int64_t n = 0;
  for (std::size_t l = 1; l < layers.size(); ++l)
    n += static_cast<std::int64_t>(layers[l]) * layers[l - 1] + layers[l];
  return n;
}

std::string layers_string(const std::vector<int>& layers) {
  std::ostringstream os;
  for (std::size_t i = 0; i < layers.size(); ++i) os << (i ? "-" : "") << layers[i];
  return os.str();
}

namespace {

/// The sizes of an MLP in the shorthand's form (linear, relu, linear, ..., linear), else empty.
std::vector<int> mlp_sizes(const ModelConfig& m) {
  if (m.input.size() != 1 || m.layers.size() % 2 == 0) return {};
  std::vector<int> sizes{m.input[0]};
  for (std::size_t i = 0; i < m.layers.size(); ++i) {
    const LayerKind expect = i % 2 == 0 ? LayerKind::kLinear : LayerKind::kRelu;
    if (m.layers[i].type != expect) return {};
    if (i % 2 == 0) sizes.push_back(m.layers[i].out);
  }
  return sizes;
}

/// Each layer type's make_ function, from its row of GOSSIP_LAYERS (declared in
/// src/model/layers.hpp, defined in the layer's own file), in enum order: indexed by the kind.
using LayerMake = std::unique_ptr<Layer> (*)(const LayerBuild& b);
#define GOSSIP_LAYER_MAKE(id, name, summary, make, ...) &make,
constexpr std::array<LayerMake, kLayerKinds> kMakes{GOSSIP_LAYERS(GOSSIP_LAYER_MAKE)};
#undef GOSSIP_LAYER_MAKE

bool folds_relu(const ModelConfig& m, std::size_t i) {
  return layer_spec(m.layers[i].type).folds_relu && i + 1 < m.layers.size() &&
         m.layers[i + 1].type == LayerKind::kRelu;
}

}  // namespace

std::string model_fingerprint(const ModelConfig& m) {
  if (auto sizes = mlp_sizes(m); !sizes.empty()) return layers_string(sizes);
  std::ostringstream os;
  for (std::size_t i = 0; i < m.input.size(); ++i) os << (i ? "x" : "") << m.input[i];
  for (const LayerConfig& l : m.layers) {
    os << "-" << layer_name(l.type);
    layer_spec(l.type).fingerprint(os, l);
  }
  return os.str();
}

Model::Model(Backend& backend, const std::vector<int>& mlp_sizes, int max_batch)
    : Model(backend, ModelConfig::mlp(mlp_sizes), max_batch) {}

Model::Model(Backend& backend, const ModelConfig& config, int max_batch, int max_train_batch,
             bool shared_scratch)
    : backend_(&backend),
      max_batch_(max_batch),
      max_train_batch_(max_train_batch > 0 ? max_train_batch : max_batch),
      fingerprint_(model_fingerprint(config)),
      shared_scratch_(shared_scratch && backend.host_memory()) {
  if (max_batch <= 0 || max_train_batch_ > max_batch)
    throw InputError(cat("batch sizes must be positive (and the training batch at most ",
                         max_batch, "), got ", max_train_batch_));
  const std::vector<Shape> shapes = infer_shapes(config);
  if (shapes.back().size() != 1)
    throw InputError(cat("model: the last layer's output ", shape_string(shapes.back()),
                         " is not flat (put a flatten and a linear layer at the end)"));
  input_size_ = config.input_size();
  classes_ = shapes.back()[0];
  std::int64_t off = 0, widest = 0;
  std::vector<std::size_t> info_of;  // each layer that runs: its entry in info_
  for (std::size_t i = 0; i < config.layers.size(); ++i) {
    const LayerConfig& l = config.layers[i];
    const Shape& out = shapes[i + 1];
    if (l.type == LayerKind::kRelu && i > 0 && folds_relu(config, i - 1)) {
      // Folded into the layer before: nothing runs.
      info_.push_back(LayerInfo{layer_name(l.type), shapes[i], out});
      continue;
    }
    info_of.push_back(info_.size());
    off += add_layer(l, shapes[i], out, folds_relu(config, i), max_batch, off);
    widest = std::max(widest, shape_size(out));
  }
  // The layers' buffers (running statistics) after every parameter: the optimizer steps the
  // first trainable_params_ values, gossip mixes them all.
  trainable_params_ = off;
  num_params_ = place_buffers(off, info_of);
  outs_.resize(layers_.size());
  act_ptrs_.resize(layers_.size());
  delta_size_ = std::int64_t{max_train_batch_} * widest;
  params_ = DeviceArray<float>(backend, num_params_);
  backend.fill(params_.data(), 0.0f, num_params_);
  if (shared_scratch_) {
    scratch_key_ = std::hash<std::string>{}(cat(fingerprint_, "/", max_batch_, "/",
                                                max_train_batch_));
    return;
  }
  allocate_scratch();
}

std::int64_t Model::add_layer(const LayerConfig& l, const Shape& in, const Shape& out, bool relu,
                              int max_batch, std::int64_t offset) {
  LayerInfo info{layer_name(l.type), in, out};
  std::unique_ptr<Layer> layer =
      kMakes[static_cast<std::size_t>(l.type)]({*backend_, l, in, out, relu, max_batch});
  // The row's counts are what a model's size is known by before it is built (flat_size, the
  // handshake): the layer must keep exactly those.
  const LayerSpec& spec = layer_spec(l.type);
  GOSSIP_CHECK_EQ(layer->param_count(), spec.params(l, in, out));
  GOSSIP_CHECK_EQ(layer->buffer_count(), spec.buffers(l, in, out));
  layer->set_offset(offset);
  info.offset = offset;
  info.params = layer->param_count();
  info.weights = layer->weight_count();
  info.fan_in = layer->fan_in();
  info_.push_back(info);
  act_sizes_.push_back(layer->aliases_input() ? 0 : std::int64_t{max_batch} * shape_size(out));
  layers_.push_back(std::move(layer));
  return info.params;
}

std::int64_t Model::place_buffers(std::int64_t off, const std::vector<std::size_t>& info_of) {
  for (std::size_t k = 0; k < layers_.size(); ++k) {
    layers_[k]->set_buffer_offset(off);
    LayerInfo& info = info_[info_of[k]];
    info.buffer_offset = off;
    info.buffers = layers_[k]->buffer_count();
    off += info.buffers;
  }
  return off;
}

void Model::allocate_scratch() {
  Backend& backend = *backend_;
  for (std::int64_t size : act_sizes_)
    acts_.push_back(size ? DeviceArray<float>(backend, static_cast<std::size_t>(size))
                         : DeviceArray<float>());
  grads_ = DeviceArray<float>(backend, num_params_);
  delta_a_ = DeviceArray<float>(backend, static_cast<std::size_t>(delta_size_));
  delta_b_ = DeviceArray<float>(backend, static_cast<std::size_t>(delta_size_));
  backend.fill(grads_.data(), 0.0f, num_params_);
  bind_scratch();
}

/// One thread's scratch for models of one shape (host memory: shared scratch is for host
/// backends only, so it outlives any backend without releasing through one).
struct Model::Scratch {
  std::vector<float> grads, delta_a, delta_b;
  std::vector<std::vector<float>> acts;
};

void Model::bind_scratch() {
  if (!shared_scratch_) {
    grads_ptr_ = grads_.data();
    for (std::size_t i = 0; i < acts_.size(); ++i) act_ptrs_[i] = acts_[i].data();
    delta_a_ptr_ = delta_a_.data();
    delta_b_ptr_ = delta_b_.data();
    return;
  }
  thread_local std::unordered_map<std::size_t, std::unique_ptr<Scratch>> mine;
  std::unique_ptr<Scratch>& s = mine[scratch_key_];
  if (!s) s = std::make_unique<Scratch>();
  // Sized to fit whatever shares the key (a hash): a collision costs a resize, never a wrong
  // size.
  auto fit = [](std::vector<float>& v, std::int64_t n) {
    if (std::ssize(v) < n) v.resize(static_cast<std::size_t>(n), 0.0f);
  };
  fit(s->grads, num_params_);
  fit(s->delta_a, delta_size_);
  fit(s->delta_b, delta_size_);
  if (s->acts.size() < act_sizes_.size()) s->acts.resize(act_sizes_.size());
  for (std::size_t i = 0; i < act_sizes_.size(); ++i) {
    fit(s->acts[i], act_sizes_[i]);
    act_ptrs_[i] = act_sizes_[i] ? s->acts[i].data() : nullptr;
  }
  grads_ptr_ = s->grads.data();
  delta_a_ptr_ = s->delta_a.data();
  delta_b_ptr_ = s->delta_b.data();
}

Model::~Model() = default;

void Model::init(std::uint64_t seed, int stream_peer, int dropout_peer) {
  std::vector<float> host(num_params_, 0.0f);
  auto rng = make_rng(seed, static_cast<std::uint64_t>(stream_peer), Stream::kInit);
  for (const auto& layer : layers_) layer->init(host.data(), rng);
  params_.upload(host.data(), host.size());
  dropout_seed_ = derive_seed(seed, static_cast<std::uint64_t>(dropout_peer < 0 ? stream_peer : dropout_peer),
                              Stream::kDropout);
  train_steps_ = 0;
}

void Model::init_from(std::span<const float> values, std::uint64_t seed, int dropout_peer) {
  GOSSIP_CHECK_EQ(static_cast<std::int64_t>(values.size()), num_params_);
  params_.upload(values.data(), values.size());
  dropout_seed_ = derive_seed(seed, static_cast<std::uint64_t>(dropout_peer), Stream::kDropout);
  train_steps_ = 0;
}

void Model::run_forward(const float* x, int rows, bool training) {
  GOSSIP_CHECK_MSG(rows > 0 && rows <= (training ? max_train_batch_ : max_batch_), "batch of ",
                   rows, " rows does not fit the model's maximum of ",
                   training ? max_train_batch_ : max_batch_);
  if (shared_scratch_) bind_scratch();
  const float* in = x;
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    LayerContext c{*backend_, params_.data(), grads_ptr_, params_.data(), training,
                   mix64(dropout_seed_ ^ mix64(train_steps_ * 1024 + i))};
    float* out = layers_[i]->aliases_input() ? const_cast<float*>(in) : act_ptrs_[i];
    layers_[i]->forward(c, in, out, rows);
    outs_[i] = out;
    in = out;
  }
}

const float* Model::forward(const float* x, int rows) {
  run_forward(x, rows, false);
  return outs_.back();
}

BatchResult Model::evaluate(const float* x, const std::int32_t* labels, int rows) {
  const float* logits = forward(x, rows);
  auto [loss, correct] = backend_->softmax_xent(logits, labels, rows, classes_, nullptr);
  return {loss, correct, rows};
}

std::vector<RowMajorGemm> Model::gemm_shapes(int rows) const {
  std::size_t first_with_params = layers_.size();
  for (std::size_t i = 0; i < layers_.size() && first_with_params == layers_.size(); ++i)
    if (layers_[i]->param_count() > 0) first_with_params = i;
  std::vector<RowMajorGemm> out;
  for (std::size_t i = 0; i < layers_.size(); ++i)
    layers_[i]->gemms(rows, i > first_with_params, out);
  return out;
}

BatchResult Model::forward_backward(const float* x, const std::int32_t* labels, int rows,
                                    const std::function<void()>& meanwhile) {
  run_forward(x, rows, true);
  float* dy = delta_a_ptr_;
  float* spare = delta_b_ptr_;
  // The loss is read once the backward pass is queued (Backend::queue_softmax_xent).
  backend_->queue_softmax_xent(outs_.back(), labels, rows, classes_, dy);
  std::size_t first_with_params = layers_.size();
  for (std::size_t i = 0; i < layers_.size() && first_with_params == layers_.size(); ++i)
    if (layers_[i]->param_count() > 0) first_with_params = i;
  for (std::size_t i = layers_.size(); i-- > first_with_params;) {
    LayerContext c{*backend_, params_.data(), grads_ptr_, params_.data(), true,
                   mix64(dropout_seed_ ^ mix64(train_steps_ * 1024 + i))};
    const float* in = i == 0 ? x : outs_[i - 1];
    const bool need_dx = i > first_with_params;
    float* dx = layers_[i]->backward(c, in, outs_[i], dy, spare, rows, need_dx);
    if (dx == spare) std::swap(dy, spare);
  }
  ++train_steps_;
  if (meanwhile) meanwhile();
  const auto [loss, correct] = backend_->queued_softmax_result();
  return {loss, correct, rows};
}

}  // namespace gossip
