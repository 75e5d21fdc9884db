// compute/cuda/gossip_kernels.cuh: launchers of the gossip kernels (gossip_kernels.cu) for the
// CUDA backend: the SGD update, mixing, fill and compressed gossip. Each runs the gossip/math.hpp
// or gossip/compress_math.hpp functions the CPU backend runs (cpu_gossip.cpp) on the given stream
// and checks the launch. Included only by .cu files.
#pragma once
#if !defined(GOSSIP_ROOM_COMPUTE)
#error "src/compute/cuda/gossip_kernels.cuh belongs to room compute, which this room does not use (see the room table in meson.build)"
#endif

#include <cuda_runtime.h>

#include <cstdint>

namespace gossip::cuda {

/// Buffers one mix takes at most (they travel in the kernel's arguments).
constexpr int kMaxMix = 64;

void launch_sgd_update(cudaStream_t s, float* params, float* velocity, const float* grads,
                       std::int64_t n, float lr, float momentum, float weight_decay,
                       bool nesterov);
/// out = sum_j w[j] in[j] (math::mix_element); `in` and `w` are host arrays of k <= kMaxMix
/// entries (more: a check failure).
void launch_mix(cudaStream_t s, float* out, const float* const* in, const float* w, int k,
                std::int64_t n);
void launch_fill(cudaStream_t s, float* p, float value, std::int64_t n);
void launch_choco_difference(cudaStream_t s, const float* x, const float* xhat, float* d,
                             std::int64_t n);
void launch_choco_step(cudaStream_t s, float* x, const float* sum, const float* xhat,
                       float gamma, std::int64_t n);
void launch_quantize(cudaStream_t s, const float* v, std::int64_t n, int bits, std::int64_t block,
                     std::uint64_t key, float* scales, std::int8_t* codes);
void launch_dequantize_add(cudaStream_t s, float* target, float weight, const float* scales,
                           const std::int8_t* codes, std::int64_t n, std::int64_t block,
                           int bits);
void launch_scatter_add(cudaStream_t s, float* target, float weight, const std::uint32_t* index,
                        const float* values, std::int64_t k);
void launch_add_weighted(cudaStream_t s, float* target, float weight, const float* values,
                         std::int64_t n);

}  // namespace gossip::cuda
