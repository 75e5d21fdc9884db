// compute/cuda/launch.cuh: what the kernels and launchers of the CUDA backend share: the block
// size, the grid-stride loop, a grid for n elements and the launch check. Included only by .cu
// files.
#pragma once
#if !defined(GOSSIP_ROOM_COMPUTE)
#error "src/compute/cuda/launch.cuh belongs to room compute, which this room does not use (see the room table in meson.build)"
#endif

#include <cuda_runtime.h>

#include "gossip/core.hpp"

/// A grid-stride loop over i in [0, n): every thread of the grid takes every (blocks x threads)th
/// element, so any grid covers any n.
#define GOSSIP_GRID_STRIDE(i, n)                                                    \
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < (n); \
       i += (long long)blockDim.x * gridDim.x)

namespace gossip::cuda {

/// Threads per block; a power of two (the quantizer's max-reduction relies on it).
constexpr int kThreads = 256;

/// Blocks for n elements at kThreads each, at least 1 and at most 4096 (grid-stride loops).
inline int grid_for(long long n) {
  long long blocks = (n + kThreads - 1) / kThreads;
  if (blocks < 1) blocks = 1;
  return static_cast<int>(blocks > 4096 ? 4096 : blocks);
}

/// Throws RuntimeError naming the kernel when its launch failed.
inline void check_launch(const char* what) {
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess)
    throw RuntimeError(cat("CUDA kernel ", what, " failed to launch: ", cudaGetErrorString(err)));
}

}  // namespace gossip::cuda
