// compute/cpu_gossip.cpp: the CPU backend's gossip kernels: the SGD update and weighted mixing
// as loops over gossip/math.hpp, and the compressed-gossip operations, each a loop over one
// gossip/compress_math.hpp function (the CUDA backend runs the same functions in
// cuda/gossip_kernels.cu). tests/test_compute.cpp checks them against plain loops bit for bit.
// ClippedGossip's distances are in cpu_robust.cpp.
#include "src/compute/cpu_gossip.hpp"

#include <algorithm>

#include "gossip/compress_math.hpp"
#include "gossip/math.hpp"

namespace gossip::cpu {

using I64 = std::int64_t;

namespace {

/// o[i] = (first ? 0 : o[i]) + w[0] x0[i] + ... + w[M-1] x{M-1}[i], summed left to right.
template <int M>
void mix_pass(float* __restrict o, const float* const* in, const float* w, std::int64_t start,
              std::int64_t len, bool first) {
  const float* __restrict x0 = in[0] + start;
  const float* __restrict x1 = M > 1 ? in[1] + start : x0;
  const float* __restrict x2 = M > 2 ? in[2] + start : x0;
  const float w0 = w[0], w1 = M > 1 ? w[1] : 0.0f, w2 = M > 2 ? w[2] : 0.0f;
  if (first) {
    for (std::int64_t i = 0; i < len; ++i) {
      float acc = 0.0f;
      acc += w0 * x0[i];
      if constexpr (M > 1) acc += w1 * x1[i];
      if constexpr (M > 2) acc += w2 * x2[i];
      o[i] = acc;
    }
  } else {
    for (std::int64_t i = 0; i < len; ++i) {
      float acc = o[i];
      acc += w0 * x0[i];
      if constexpr (M > 1) acc += w1 * x1[i];
      if constexpr (M > 2) acc += w2 * x2[i];
      o[i] = acc;
    }
  }
}

}  // namespace

void GossipLoops::sgd_update(float* params, float* velocity, const float* grads, I64 n, float lr,
                             float momentum, float weight_decay, bool nesterov) {
  for (I64 i = 0; i < n; ++i)
    math::sgd_update(params[i], velocity[i], grads[i], lr, momentum, weight_decay, nesterov);
}

void GossipLoops::mix(float* out, const float* const* in, const float* w, int k, I64 n) {
  // Per element this is acc = 0; acc += w[j] * in[j][i] for j ascending: bit-identical to
  // math::mix_element (no FMA contraction: the build uses -std=c++20, which turns it off).
  // Passes of up to three inputs each read their inputs once, so a ring's mix (k = 3) is one
  // streaming pass over memory; with more inputs, blocks keep `out` in L1 between passes.
  const I64 block = k <= 3 ? std::max<I64>(n, 1) : 4096;
  for (I64 start = 0; start < n; start += block) {
    const I64 len = std::min(block, n - start);
    float* o = out + start;
    int j = 0;
    if (k == 0) std::fill(o, o + len, 0.0f);
    while (j < k) {
      const int m = std::min(3, k - j);
      const bool first = j == 0;
      if (m == 3) mix_pass<3>(o, in + j, w + j, start, len, first);
      else if (m == 2) mix_pass<2>(o, in + j, w + j, start, len, first);
      else mix_pass<1>(o, in + j, w + j, start, len, first);
      j += m;
    }
  }
}

void GossipLoops::fill(float* p, float value, I64 n) { std::fill(p, p + n, value); }

// ---- compressed gossip -------------------------------------------------------------------------

void GossipLoops::choco_difference(const float* x, const float* xhat, float* d, I64 n) {
  for (I64 i = 0; i < n; ++i) d[i] = math::choco_difference(x[i], xhat[i]);
}

void GossipLoops::choco_step(float* x, const float* s, const float* xhat, float gamma, I64 n) {
  for (I64 i = 0; i < n; ++i) x[i] = math::choco_step(x[i], s[i], xhat[i], gamma);
}

void GossipLoops::quantize(const float* v, I64 n, int bits, I64 block, std::uint64_t key,
                           float* scales, std::int8_t* codes) {
  const int levels = math::quantize_levels(bits);
  for (I64 lo = 0, b = 0; lo < n; lo += block, ++b) {
    const I64 hi = std::min(n, lo + block);
    float scale = 0.0f;
    for (I64 i = lo; i < hi; ++i) scale = math::max_magnitude(scale, v[i]);
    scales[b] = scale;
    for (I64 i = lo; i < hi; ++i)
      codes[i] = static_cast<std::int8_t>(
          math::quantize_code(v[i], scale, levels, math::uniform_at(key, i)));
  }
}

void GossipLoops::dequantize_add(float* target, float weight, const float* scales,
                                 const std::int8_t* codes, I64 n, I64 block, int bits) {
  const int levels = math::quantize_levels(bits);
  for (I64 lo = 0, b = 0; lo < n; lo += block, ++b) {
    const float scale = scales[b];
    if (scale == 0.0f) continue;  // every code of the block is 0
    const I64 hi = std::min(n, lo + block);
    for (I64 i = lo; i < hi; ++i)
      target[i] = math::add_weighted(target[i], weight, math::dequantize(codes[i], scale, levels));
  }
}

void GossipLoops::scatter_add(float* target, float weight, const std::uint32_t* index,
                              const float* values, I64 k) {
  for (I64 j = 0; j < k; ++j)
    target[index[j]] = math::add_weighted(target[index[j]], weight, values[j]);
}

void GossipLoops::add_weighted(float* target, float weight, const float* values, I64 n) {
  for (I64 i = 0; i < n; ++i) target[i] = math::add_weighted(target[i], weight, values[i]);
}

}  // namespace gossip::cpu
