/// math: the element-wise math of training, written once (DESIGN idea 3). Each function is inline
/// and usable from host and device code: the CPU backend calls them in loops, the CUDA backend in
/// grid-stride kernels, so the CPU tests cover the arithmetic both run. Keep this header free of
/// anything nvcc's C++17 mode cannot compile.
#pragma once
#if !defined(GOSSIP_ROOM_COMPUTE)
#error "gossip/math.hpp belongs to room compute, which this room does not use (see the room table in meson.build)"
#endif

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define GOSSIP_HD __host__ __device__ __forceinline__
#else
#define GOSSIP_HD inline
#endif

namespace gossip::math {

/// y = relu(z + b) when `relu`, else z + b.
GOSSIP_HD float bias_act(float z, float b, bool relu) {
  float y = z + b;
  return (relu && y < 0.0f) ? 0.0f : y;
}

/// Gradient through ReLU given its output y: dy where y > 0, else 0.
GOSSIP_HD float relu_backward(float dy, float y) { return y > 0.0f ? dy : 0.0f; }

/// One SGD step for one parameter with momentum, optional Nesterov and L2 weight decay
/// (PyTorch's convention: v = m*v + (g + wd*p); p -= lr * (nesterov ? g' + m*v : v)).
GOSSIP_HD void sgd_update(float& p, float& v, float g, float lr, float momentum, float wd,
                          bool nesterov) {
  float d = g + wd * p;
  if (momentum != 0.0f) {
    v = momentum * v + d;
    d = nesterov ? d + momentum * v : v;
  }
  p -= lr * d;
}

/// Softmax cross-entropy for one row of `cols` logits with true class `label`: writes
/// grad[c] = scale * (softmax(logits)[c] - [c == label]) and returns the row's loss
/// (-log softmax[label]). Also reports whether the arg-max equals the label.
GOSSIP_HD float softmax_xent_row(const float* logits, int cols, int label, float scale,
                                 float* grad, bool* correct) {
  float mx = logits[0];
  int arg = 0;
  for (int c = 1; c < cols; ++c) {
    if (logits[c] > mx) {
      mx = logits[c];
      arg = c;
    }
  }
  float sum = 0.0f;
  for (int c = 0; c < cols; ++c) sum += expf(logits[c] - mx);
  const float log_sum = logf(sum);
  if (grad != nullptr) {
    const float inv = 1.0f / sum;
    for (int c = 0; c < cols; ++c) {
      float p = expf(logits[c] - mx) * inv;
      grad[c] = scale * (p - (c == label ? 1.0f : 0.0f));
    }
  }
  if (correct != nullptr) *correct = (arg == label);
  return log_sum - (logits[label] - mx);
}

/// Mixing of k buffers at element i: sum_j w[j] * in[j][i], always in the order given (callers
/// pass neighbours in ascending peer id, so every transport sums in the same order).
GOSSIP_HD float mix_element(const float* const* in, const float* w, int k, std::int64_t i) {
  float acc = 0.0f;
  for (int j = 0; j < k; ++j) acc += w[j] * in[j][i];
  return acc;
}

/// One coordinate's share of ||m - r||^2, squared in float: what ClippedGossip's distances sum
/// (mixing.cpp's 16-lane pass on the host, the CUDA backend's squared_distances kernel). T is a
/// float or a vector of floats (GCC's vector extension), squared lane by lane.
template <class T>
GOSSIP_HD T squared_difference(T m, T r) {
  const T v = m - r;
  return v * v;
}

/// ClippedGossip's scale of a message at distance d from r with radius tau: min(1, tau / d), so
/// that W_ij clip(m_j - r, tau) = W_ij * scale * (m_j - r); 1 within the radius (mixed as mean
/// mixes it).
GOSSIP_HD double clip_scale(double tau, double d) { return d <= tau ? 1.0 : tau / d; }

}  // namespace gossip::math
