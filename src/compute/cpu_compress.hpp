// compute/cpu_compress.hpp: the CPU backend's compressed-gossip operations (CHOCO's difference
// and consensus step, quantization, adding a packet's values): loops over
// gossip/compress_math.hpp, declared here so cpu_backend.cpp stays the Backend class and its GEMM.
// Same contracts as gossip/backend.hpp.
#pragma once
#if !defined(GOSSIP_ROOM_COMPUTE)
#error "src/compute/cpu_compress.hpp belongs to room compute, which this room does not use (see the room table in meson.build)"
#endif

#include <cstdint>

namespace gossip::cpu {

void choco_difference(const float* x, const float* xhat, float* d, std::int64_t n);
void choco_step(float* x, const float* s, const float* xhat, float gamma, std::int64_t n);
void quantize(const float* v, std::int64_t n, int bits, std::int64_t block, std::uint64_t key,
              float* scales, std::int8_t* codes);
void dequantize_add(float* target, float weight, const float* scales, const std::int8_t* codes,
                    std::int64_t n, std::int64_t block, int bits);
void scatter_add(float* target, float weight, const std::uint32_t* index, const float* values,
                 std::int64_t k);
void add_weighted(float* target, float weight, const float* values, std::int64_t n);

}  // namespace gossip::cpu
