// compute/cuda/gossip_kernels.cu: the gossip kernels of the CUDA backend (but ClippedGossip's
// distances, robust_kernels.cu): the SGD update, mixing, fill and the compressed-gossip kernels.
//
// What they compute: exactly what cpu_gossip.cpp computes — each kernel calls the same
// gossip/math.hpp or gossip/compress_math.hpp function per element, so the CPU backend is the
// reference and the CPU tests cover the arithmetic. Quantization runs one thread block per
// quantization block: its threads fold math::max_magnitude over their strided elements, a
// shared-memory tree reduces the partial maxima (a maximum: the same value in any order), and
// then every thread writes the codes of its elements from (key, i) alone, so no code depends on
// which thread drew it. scatter_add writes distinct indices, so one thread per entry needs no
// atomics.
//
// Layout: kernels, then launchers (stream, ceil-div grid, launch check).
#include <cuda_runtime.h>

#include "gossip/compress_math.hpp"
#include "gossip/core.hpp"
#include "gossip/math.hpp"
#include "src/compute/cuda/gossip_kernels.cuh"
#include "src/compute/cuda/launch.cuh"

namespace gossip::cuda {
namespace {

using I64 = long long;

// ---- kernels ------------------------------------------------------------------------------

__global__ void sgd_kernel(float* p, float* v, const float* g, long long n, float lr, float mom,
                           float wd, bool nesterov) {
  GOSSIP_GRID_STRIDE(i, n)
    math::sgd_update(p[i], v[i], g[i], lr, mom, wd, nesterov);
}

struct MixArgs {
  const float* in[kMaxMix];
  float w[kMaxMix];
};

__global__ void mix_kernel(float* out, MixArgs args, int k, long long n) {
  GOSSIP_GRID_STRIDE(i, n)
    out[i] = math::mix_element(args.in, args.w, k, i);
}

__global__ void fill_kernel(float* p, float value, long long n) {
  GOSSIP_GRID_STRIDE(i, n)
    p[i] = value;
}

__global__ void choco_difference_kernel(const float* x, const float* xhat, float* d, I64 n) {
  GOSSIP_GRID_STRIDE(i, n) d[i] = math::choco_difference(x[i], xhat[i]);
}

__global__ void choco_step_kernel(float* x, const float* s, const float* xhat, float gamma,
                                  I64 n) {
  GOSSIP_GRID_STRIDE(i, n) x[i] = math::choco_step(x[i], s[i], xhat[i], gamma);
}

// One thread block per quantization block b (blockIdx.x, then strided by gridDim.x).
__global__ void quantize_kernel(const float* v, I64 n, int levels, I64 block, std::uint64_t key,
                                float* scales, std::int8_t* codes) {
  __shared__ float partial[kThreads];
  __shared__ float block_scale;
  const I64 blocks = (n + block - 1) / block;
  for (I64 b = blockIdx.x; b < blocks; b += gridDim.x) {
    const I64 lo = b * block, hi = lo + block < n ? lo + block : n;
    float m = 0.0f;
    for (I64 i = lo + threadIdx.x; i < hi; i += blockDim.x) m = math::max_magnitude(m, v[i]);
    partial[threadIdx.x] = m;
    __syncthreads();
    for (int half = blockDim.x / 2; half > 0; half /= 2) {
      if (threadIdx.x < half)  // partial maxima are >= 0: max_magnitude is their maximum
        partial[threadIdx.x] = math::max_magnitude(partial[threadIdx.x],
                                                   partial[threadIdx.x + half]);
      __syncthreads();
    }
    if (threadIdx.x == 0) {
      block_scale = partial[0];
      scales[b] = partial[0];
    }
    __syncthreads();
    const float scale = block_scale;
    for (I64 i = lo + threadIdx.x; i < hi; i += blockDim.x)
      codes[i] = static_cast<std::int8_t>(
          math::quantize_code(v[i], scale, levels, math::uniform_at(key, i)));
    __syncthreads();  // block_scale and partial are reused by the next block
  }
}

__global__ void dequantize_add_kernel(float* target, float weight, const float* scales,
                                      const std::int8_t* codes, I64 n, I64 block, int levels) {
  GOSSIP_GRID_STRIDE(i, n) {
    const float scale = scales[i / block];
    if (scale == 0.0f) continue;  // every code of the block is 0
    target[i] = math::add_weighted(target[i], weight, math::dequantize(codes[i], scale, levels));
  }
}

__global__ void scatter_add_kernel(float* target, float weight, const std::uint32_t* index,
                                   const float* values, I64 k) {
  GOSSIP_GRID_STRIDE(j, k) {
    const std::uint32_t i = index[j];
    target[i] = math::add_weighted(target[i], weight, values[j]);
  }
}

__global__ void add_weighted_kernel(float* target, float weight, const float* values, I64 n) {
  GOSSIP_GRID_STRIDE(i, n) target[i] = math::add_weighted(target[i], weight, values[i]);
}

}  // namespace

// ---- launchers ----------------------------------------------------------------------------

void launch_sgd_update(cudaStream_t s, float* params, float* velocity, const float* grads,
                       std::int64_t n, float lr, float momentum, float weight_decay,
                       bool nesterov) {
  sgd_kernel<<<grid_for(n), kThreads, 0, s>>>(params, velocity, grads, n, lr, momentum,
                                              weight_decay, nesterov);
  check_launch("sgd_update");
}

void launch_mix(cudaStream_t s, float* out, const float* const* in, const float* w, int k,
                std::int64_t n) {
  GOSSIP_CHECK_MSG(k <= kMaxMix, "CUDA mixing takes at most ", kMaxMix, " buffers, got ", k);
  MixArgs args{};
  for (int j = 0; j < k; ++j) {
    args.in[j] = in[j];
    args.w[j] = w[j];
  }
  mix_kernel<<<grid_for(n), kThreads, 0, s>>>(out, args, k, n);
  check_launch("mix");
}

void launch_fill(cudaStream_t s, float* p, float value, std::int64_t n) {
  fill_kernel<<<grid_for(n), kThreads, 0, s>>>(p, value, n);
  check_launch("fill");
}

void launch_choco_difference(cudaStream_t s, const float* x, const float* xhat, float* d,
                             std::int64_t n) {
  choco_difference_kernel<<<grid_for(n), kThreads, 0, s>>>(x, xhat, d, n);
  check_launch("choco_difference");
}

void launch_choco_step(cudaStream_t s, float* x, const float* sum, const float* xhat,
                       float gamma, std::int64_t n) {
  choco_step_kernel<<<grid_for(n), kThreads, 0, s>>>(x, sum, xhat, gamma, n);
  check_launch("choco_step");
}

void launch_quantize(cudaStream_t s, const float* v, std::int64_t n, int bits, std::int64_t block,
                     std::uint64_t key, float* scales, std::int8_t* codes) {
  if (n <= 0) return;
  const I64 blocks = (n + block - 1) / block;
  quantize_kernel<<<static_cast<int>(blocks > 65535 ? 65535 : blocks), kThreads, 0, s>>>(
      v, n, math::quantize_levels(bits), block, key, scales, codes);
  check_launch("quantize");
}

void launch_dequantize_add(cudaStream_t s, float* target, float weight, const float* scales,
                           const std::int8_t* codes, std::int64_t n, std::int64_t block,
                           int bits) {
  dequantize_add_kernel<<<grid_for(n), kThreads, 0, s>>>(target, weight, scales, codes, n, block,
                                                         math::quantize_levels(bits));
  check_launch("dequantize_add");
}

void launch_scatter_add(cudaStream_t s, float* target, float weight, const std::uint32_t* index,
                        const float* values, std::int64_t k) {
  if (k <= 0) return;
  scatter_add_kernel<<<grid_for(k), kThreads, 0, s>>>(target, weight, index, values, k);
  check_launch("scatter_add");
}

void launch_add_weighted(cudaStream_t s, float* target, float weight, const float* values,
                         std::int64_t n) {
  add_weighted_kernel<<<grid_for(n), kThreads, 0, s>>>(target, weight, values, n);
  check_launch("add_weighted");
}

}  // namespace gossip::cuda
