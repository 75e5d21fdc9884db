// compute/cpu_compress.cpp: the CPU backend's compressed-gossip operations, each a loop over one
// gossip/compress_math.hpp function (the CUDA backend runs the same functions in
// cuda/compress_kernels.cu). tests/test_compute.cpp checks them against plain loops bit for bit.
#include "src/compute/cpu_compress.hpp"

#include <algorithm>

#include "gossip/compress_math.hpp"

namespace gossip::cpu {

using I64 = std::int64_t;

void choco_difference(const float* x, const float* xhat, float* d, I64 n) {
  for (I64 i = 0; i < n; ++i) d[i] = math::choco_difference(x[i], xhat[i]);
}

void choco_step(float* x, const float* s, const float* xhat, float gamma, I64 n) {
  for (I64 i = 0; i < n; ++i) x[i] = math::choco_step(x[i], s[i], xhat[i], gamma);
}

void quantize(const float* v, I64 n, int bits, I64 block, std::uint64_t key, float* scales,
              std::int8_t* codes) {
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

void dequantize_add(float* target, float weight, const float* scales, const std::int8_t* codes,
                    I64 n, I64 block, int bits) {
  const int levels = math::quantize_levels(bits);
  for (I64 lo = 0, b = 0; lo < n; lo += block, ++b) {
    const float scale = scales[b];
    if (scale == 0.0f) continue;  // every code of the block is 0
    const I64 hi = std::min(n, lo + block);
    for (I64 i = lo; i < hi; ++i)
      target[i] = math::add_weighted(target[i], weight, math::dequantize(codes[i], scale, levels));
  }
}

void scatter_add(float* target, float weight, const std::uint32_t* index, const float* values,
                 I64 k) {
  for (I64 j = 0; j < k; ++j)
    target[index[j]] = math::add_weighted(target[index[j]], weight, values[j]);
}

void add_weighted(float* target, float weight, const float* values, I64 n) {
  for (I64 i = 0; i < n; ++i) target[i] = math::add_weighted(target[i], weight, values[i]);
}

}  // namespace gossip::cpu
