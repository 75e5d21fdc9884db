/// compress_math: the element-wise math of compressed gossip (CHOCO-SGD) and of all-reduce,
/// written once for host and device (DESIGN idea 3) like gossip/math.hpp: a counter-based
/// uniform draw, a block's scale, stochastic rounding to a signed code and back, adding a packet's
/// value to a running sum, and CHOCO's difference and consensus step. The backends run them: the
/// CPU backend in loops (compute/cpu_gossip.cpp), the CUDA backend per element in kernels
/// (compute/cuda/gossip_kernels.cu), through the backend's gossip kernels; the
/// gossip room's host reference encoder and add_packet (gossip/compress.hpp) call them too. Keep
/// this header free of anything nvcc's C++17 mode cannot compile.
#pragma once
#if !defined(GOSSIP_ROOM_COMPUTE)
#error "gossip/compress_math.hpp belongs to room compute, which this room does not use (see the room table in meson.build)"
#endif

#include <cmath>
#include <cstdint>

#include "gossip/layer_math.hpp"
#include "gossip/math.hpp"

namespace gossip::math {

/// A uniform float in [0, 1) from (key, i), 24 random bits: counter-based, so element i's draw
/// does not depend on which thread or block computed it.
GOSSIP_HD float uniform_at(std::uint64_t key, std::int64_t i) {
  const std::uint64_t h = hash64(key ^ hash64(static_cast<std::uint64_t>(i)));
  return static_cast<float>(h >> 40) * (1.0f / 16777216.0f);
}

/// A block's scale so far, m, widened by v: max(m, |v|), as std::max(m, |v|) orders them (the
/// scale of a block is this folded over its elements from 0; a maximum, so any order gives it).
GOSSIP_HD float max_magnitude(float m, float v) {
  const float a = fabsf(v);
  return m < a ? a : m;
}

/// Largest code of a `bits`-bit signed quantizer: 127 for 8 bits, 7 for 4 (codes -L..L).
GOSSIP_HD int quantize_levels(int bits) { return (1 << (bits - 1)) - 1; }

/// QSGD-style stochastic rounding of v to a code in -levels..levels on the grid
/// {c * scale / levels}: with t = |v| / scale * levels, the code is floor(t) + 1 with probability
/// t - floor(t) (when u, uniform in [0, 1), falls below it), else floor(t); sign of v. So
/// E[dequantize(code)] = v for |v| <= scale, and |dequantize(code) - v| < scale / levels.
/// scale <= 0 (an all-zero block) gives 0.
GOSSIP_HD int quantize_code(float v, float scale, int levels, float u) {
  if (!(scale > 0.0f)) return 0;
  float t = fabsf(v) / scale * static_cast<float>(levels);
  if (t > static_cast<float>(levels)) t = static_cast<float>(levels);
  const float lo = floorf(t);
  int c = static_cast<int>(lo) + (u < t - lo ? 1 : 0);
  if (c > levels) c = levels;
  return v < 0.0f ? -c : c;
}

/// The value a code stands for: code * scale / levels.
GOSSIP_HD float dequantize(int code, float scale, int levels) {
  return static_cast<float>(code) * (scale / static_cast<float>(levels));
}

/// One coordinate of a packet added to a running sum: target + weight * q (CHOCO's
/// s_i += W_ij q_j and xhat_i += q_i, all-reduce's reduce-scatter).
GOSSIP_HD float add_weighted(float target, float weight, float q) { return target + weight * q; }

/// What CHOCO-SGD compresses and sends for one parameter: x - xhat, its distance from the public
/// copy its neighbours hold.
GOSSIP_HD float choco_difference(float x, float xhat) { return x - xhat; }

/// CHOCO-SGD's consensus step for one parameter: x + gamma * (s - xhat), where s is the
/// W-weighted sum of the public copies (sum_j w_ij xhat_j) and xhat this peer's own copy.
GOSSIP_HD float choco_step(float x, float s, float xhat, float gamma) {
  return x + gamma * (s - xhat);
}

}  // namespace gossip::math
