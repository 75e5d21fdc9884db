// model/mlp.cpp: MLP forward and backward as GEMMs plus the backend's element-wise ops.
//   forward:  z_l = a_{l-1} W_l^T + b_l,  a_l = relu(z_l) (no ReLU on the last layer)
//   backward: dW_l = dz_l^T a_{l-1},  db_l = colsum(dz_l),  dz_{l-1} = (dz_l W_l) * [a_{l-1} > 0]
// The input gradient of the first layer is never formed (nothing consumes it).
#include <algorithm>
#include <cmath>
#include <sstream>

#include "gossip/core.hpp"
#include "gossip/model.hpp"
#include "gossip/rng.hpp"

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

Mlp::Mlp(Backend& backend, std::vector<int> layers, int max_batch)
    : backend_(&backend), sizes_(std::move(layers)), max_batch_(max_batch) {
  if (sizes_.size() < 2) throw InputError("model.layers: need at least input and output sizes");
  for (int s : sizes_)
    if (s <= 0) throw InputError(cat("model.layers: sizes must be positive, got ", s));
  if (max_batch <= 0) throw InputError("batch size must be positive");
  std::int64_t off = 0;
  int widest = 0;
  for (std::size_t l = 1; l < sizes_.size(); ++l) {
    LayerView v;
    v.in = sizes_[l - 1];
    v.out = sizes_[l];
    v.w_offset = off;
    off += static_cast<std::int64_t>(v.in) * v.out;
    v.b_offset = off;
    off += v.out;
    views_.push_back(v);
    widest = std::max(widest, v.out);
  }
  num_params_ = off;
  params_ = DeviceArray<float>(backend, num_params_);
  grads_ = DeviceArray<float>(backend, num_params_);
  for (const auto& v : views_)
    acts_.emplace_back(backend, static_cast<std::size_t>(max_batch) * v.out);
  delta_a_ = DeviceArray<float>(backend, static_cast<std::size_t>(max_batch) * widest);
  delta_b_ = DeviceArray<float>(backend, static_cast<std::size_t>(max_batch) * widest);
  backend.fill(params_.data(), 0.0f, num_params_);
  backend.fill(grads_.data(), 0.0f, num_params_);
}

void Mlp::init(std::uint64_t seed, int stream_peer) {
  std::vector<float> host(num_params_, 0.0f);
  auto rng = make_rng(seed, static_cast<std::uint64_t>(stream_peer), Stream::kInit);
  for (const auto& v : views_) {
    const double stddev = std::sqrt(2.0 / v.in);
    for (std::int64_t i = 0; i < static_cast<std::int64_t>(v.in) * v.out; ++i)
      host[v.w_offset + i] = static_cast<float>(stddev * normal01(rng));
  }
  params_.upload(host.data(), host.size());
}

const float* Mlp::forward(const float* x, int rows) {
  GOSSIP_CHECK_MSG(rows > 0 && rows <= max_batch_, "batch of ", rows,
                   " rows does not fit the model's maximum of ", max_batch_);
  const float* in = x;
  for (std::size_t l = 0; l < views_.size(); ++l) {
    const LayerView& v = views_[l];
    float* out = acts_[l].data();
    backend_->gemm(row_major_gemm(false, true, rows, v.out, v.in), in,
                   params_.data() + v.w_offset, out);
    backend_->bias_act(out, params_.data() + v.b_offset, rows, v.out,
                       l + 1 < views_.size());
    in = out;
  }
  return in;
}

BatchResult Mlp::evaluate(const float* x, const std::int32_t* labels, int rows) {
  const float* logits = forward(x, rows);
  auto [loss, correct] = backend_->softmax_xent(logits, labels, rows, sizes_.back(), nullptr);
  return {loss, correct, rows};
}

BatchResult Mlp::forward_backward(const float* x, const std::int32_t* labels, int rows) {
  const float* logits = forward(x, rows);
  float* dz = delta_a_.data();
  float* spare = delta_b_.data();
  auto [loss, correct] = backend_->softmax_xent(logits, labels, rows, sizes_.back(), dz);
  for (std::size_t l = views_.size(); l-- > 0;) {
    const LayerView& v = views_[l];
    const float* a_prev = l == 0 ? x : acts_[l - 1].data();
    backend_->gemm(row_major_gemm(true, false, v.out, v.in, rows), dz, a_prev,
                   grads_.data() + v.w_offset);
    backend_->column_sums(dz, rows, v.out, grads_.data() + v.b_offset);
    if (l == 0) break;
    backend_->gemm(row_major_gemm(false, false, rows, v.in, v.out), dz,
                   params_.data() + v.w_offset, spare);
    backend_->relu_backward(spare, a_prev, static_cast<std::int64_t>(rows) * v.in);
    std::swap(dz, spare);
  }
  return {loss, correct, rows};
}

std::string Mlp::fingerprint() const { return layers_string(sizes_); }

}  // namespace gossip
