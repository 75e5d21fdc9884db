// compute/cpu_robust.hpp: the CPU backend's robust-mixing operation (ClippedGossip's distances),
// declared here so cpu_backend.cpp stays the Backend class and its GEMM. Same contract as
// gossip/backend.hpp.
#pragma once
#if !defined(GOSSIP_ROOM_COMPUTE)
#error "src/compute/cpu_robust.hpp belongs to room compute, which this room does not use (see the room table in meson.build)"
#endif

#include <cstdint>

namespace gossip::cpu {

void squared_distances(const float* r, const float* const* m, int k, std::int64_t n, double* out);

}  // namespace gossip::cpu
