// compute/cuda/robust_kernels.cuh: the launcher of ClippedGossip's distances kernel
// (robust_kernels.cu) for the CUDA backend. Included only by .cu files.
#pragma once
#if !defined(GOSSIP_ROOM_COMPUTE)
#error "src/compute/cuda/robust_kernels.cuh belongs to room compute, which this room does not use (see the room table in meson.build)"
#endif

#include <cuda_runtime.h>

#include <cstdint>

namespace gossip::cuda {

/// Messages one launch of the distances kernel takes (more: several launches).
constexpr int kMaxDistances = 8;
/// Blocks of the distances kernel: fixed, so a sum's order does not depend on the device.
constexpr int kDistanceBlocks = 256;

/// partial[b * k + j] = block b's share of sum_i math::squared_difference(m[j][i], r[i]) (m[j]
/// null: of r[i] alone), for k <= kMaxDistances messages; partial holds kDistanceBlocks * k
/// doubles in device memory. The caller sums the blocks' shares in block order.
void launch_squared_distances(cudaStream_t s, const float* r, const float* const* m, int k,
                              std::int64_t n, double* partial);

}  // namespace gossip::cuda
