/// gossip_kernels: a Backend's operations on whole flat buffers (gossip/backend.hpp): the
/// optimizer's update, weighted mixing, CHOCO-SGD's compressed gossip and ClippedGossip's
/// distances, on the CPU as loops and on CUDA as kernels over the same gossip::math functions
/// (DESIGN idea 3). What mixes, compresses or updates parameters takes this part: it runs on the
/// backend's device, so it moves memory too (gossip/backend_device.hpp).
/// Keep this header free of anything nvcc's C++17 mode cannot compile.
#pragma once
#if !defined(GOSSIP_ROOM_COMPUTE)
#error "gossip/gossip_kernels.hpp belongs to room compute, which this room does not use (see the room table in meson.build)"
#endif

#include <cstdint>

#include "gossip/backend_device.hpp"

namespace gossip {

/// The flat-buffer operations of a backend, on its device.
class GossipKernels : public virtual Device {
 public:
  /// One SGD-with-momentum step over n parameters (math::sgd_update).
  virtual void sgd_update(float* params, float* velocity, const float* grads, std::int64_t n,
                          float lr, float momentum, float weight_decay, bool nesterov) = 0;
  /// out[i] = sum_j w[j] * in[j][i] over n elements, j ascending (math::mix_element). `in` and
  /// `w` are host arrays of k entries; the buffers they point to are device pointers. `out` may
  /// alias none of the inputs.
  virtual void mix(float* out, const float* const* in, const float* w, int k,
                   std::int64_t n) = 0;
  /// p[i] = value.
  virtual void fill(float* p, float value, std::int64_t n) = 0;

  // ---- compressed gossip (gossip/compress_math.hpp says what each element is) -----------------
  // CHOCO-SGD's element work on vectors in backend memory; which coordinates top_k and random_k
  // keep is chosen on the host (gossip/compress.hpp), and packets are packed there and checked
  // on the host too (gossip/packet.hpp).
  /// d[i] = math::choco_difference(x[i], xhat[i]) for n elements.
  virtual void choco_difference(const float* x, const float* xhat, float* d, std::int64_t n) = 0;
  /// x[i] = math::choco_step(x[i], s[i], xhat[i], gamma) for n elements, in place.
  virtual void choco_step(float* x, const float* s, const float* xhat, float gamma,
                          std::int64_t n) = 0;
  /// Stochastic quantization of n floats in blocks of `block`: scales[b] = the maximum |v| of
  /// block b (math::max_magnitude from 0), and codes[i] = math::quantize_code(v[i], scales[b],
  /// math::quantize_levels(bits), math::uniform_at(key, i)).
  virtual void quantize(const float* v, std::int64_t n, int bits, std::int64_t block,
                        std::uint64_t key, float* scales, std::int8_t* codes) = 0;
  /// target[i] = math::add_weighted(target[i], weight, math::dequantize(codes[i], scales[b],
  /// levels)) for n elements, b = i / block; blocks whose scale is 0 are left alone.
  virtual void dequantize_add(float* target, float weight, const float* scales,
                              const std::int8_t* codes, std::int64_t n, std::int64_t block,
                              int bits) = 0;
  /// target[index[j]] = math::add_weighted(target[index[j]], weight, values[j]) for j < k; the
  /// indices are distinct.
  virtual void scatter_add(float* target, float weight, const std::uint32_t* index,
                           const float* values, std::int64_t k) = 0;
  /// target[i] = math::add_weighted(target[i], weight, values[i]) for n elements.
  virtual void add_weighted(float* target, float weight, const float* values, std::int64_t n) = 0;

  // ---- robust mixing: ClippedGossip's distances (gossip/math.hpp) ------------------------------
  /// out[j] = the sum over i < n of math::squared_difference(m[j][i], r[i]), for j < k (m[j]
  /// null: of r[i] alone, ||r||^2), into host memory; r and m in backend memory. Each backend
  /// sums in its own fixed order (the same bits on every run of it), so two backends agree to
  /// rounding. The clipped mix is then mix() with each message's weight scaled by
  /// math::clip_scale.
  virtual void squared_distances(const float* r, const float* const* m, int k, std::int64_t n,
                                 double* out) = 0;
};

}  // namespace gossip
