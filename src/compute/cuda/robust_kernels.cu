// compute/cuda/robust_kernels.cu: ClippedGossip's distances on the GPU.
//
// What it computes: what cpu_robust.cpp computes, ||m_j - r||^2 for a few messages at once, each
// element's square math::squared_difference (gossip/math.hpp), so the CPU tests cover the
// arithmetic. The order of the sum differs (the two agree to rounding, which a clipping radius
// does not notice): each thread folds its grid-stride elements in float, as each of the CPU's 16
// lanes does; a shared-memory tree adds a block's threads in double; the launcher's caller adds
// the blocks' shares in block order. The grid is fixed (kDistanceBlocks), so every run on every
// device sums in the same order. The clipped mix itself is the backend's mix kernel with each
// message's weight scaled by math::clip_scale.
#include <cuda_runtime.h>

#include "gossip/core.hpp"
#include "gossip/math.hpp"
#include "src/compute/cuda/launch.cuh"
#include "src/compute/cuda/robust_kernels.cuh"

namespace gossip::cuda {
namespace {

struct DistanceArgs {
  const float* m[kMaxDistances];
};

__global__ void squared_distances_kernel(const float* r, DistanceArgs args, int k, long long n,
                                         double* partial) {
  __shared__ double part[kThreads];
  float acc[kMaxDistances];
  for (int j = 0; j < kMaxDistances; ++j) acc[j] = 0.0f;
  GOSSIP_GRID_STRIDE(i, n) {
    const float x = r[i];
    for (int j = 0; j < k; ++j)
      acc[j] += args.m[j] != nullptr ? math::squared_difference(args.m[j][i], x)
                                     : math::squared_difference(x, 0.0f);
  }
  for (int j = 0; j < k; ++j) {
    part[threadIdx.x] = static_cast<double>(acc[j]);
    __syncthreads();
    for (int half = kThreads / 2; half > 0; half /= 2) {
      if (threadIdx.x < half) part[threadIdx.x] += part[threadIdx.x + half];
      __syncthreads();
    }
    if (threadIdx.x == 0) partial[blockIdx.x * k + j] = part[0];
    __syncthreads();
  }
}

}  // namespace

void launch_squared_distances(cudaStream_t s, const float* r, const float* const* m, int k,
                              std::int64_t n, double* partial) {
  GOSSIP_CHECK_MSG(k >= 1 && k <= kMaxDistances, "squared_distances: ", k, " messages a launch");
  DistanceArgs args{};
  for (int j = 0; j < k; ++j) args.m[j] = m[j];
  squared_distances_kernel<<<kDistanceBlocks, kThreads, 0, s>>>(r, args, k, n, partial);
  check_launch("squared_distances");
}

}  // namespace gossip::cuda
