// compute/cpu_gossip.hpp: the CPU backend's gossip kernels (gossip/gossip_kernels.hpp): the SGD
// update, mixing and CHOCO's compressed gossip as loops over gossip/math.hpp and
// gossip/compress_math.hpp in cpu_gossip.cpp, ClippedGossip's distances in cpu_robust.cpp, as a
// part the CPU backend (cpu_backend.cpp) is made of. Same contracts as gossip/gossip_kernels.hpp.
#pragma once
#if !defined(GOSSIP_ROOM_COMPUTE)
#error "src/compute/cpu_gossip.hpp belongs to room compute, which this room does not use (see the room table in meson.build)"
#endif

#include <cstdint>

#include "gossip/gossip_kernels.hpp"

namespace gossip::cpu {

/// Gossip kernels as loops on host memory.
class GossipLoops : public virtual GossipKernels {
 public:
  void sgd_update(float* params, float* velocity, const float* grads, std::int64_t n, float lr,
                  float momentum, float weight_decay, bool nesterov) override;
  void mix(float* out, const float* const* in, const float* w, int k, std::int64_t n) override;
  void fill(float* p, float value, std::int64_t n) override;

  void choco_difference(const float* x, const float* xhat, float* d, std::int64_t n) override;
  void choco_step(float* x, const float* s, const float* xhat, float gamma,
                  std::int64_t n) override;
  void quantize(const float* v, std::int64_t n, int bits, std::int64_t block, std::uint64_t key,
                float* scales, std::int8_t* codes) override;
  void dequantize_add(float* target, float weight, const float* scales, const std::int8_t* codes,
                      std::int64_t n, std::int64_t block, int bits) override;
  void scatter_add(float* target, float weight, const std::uint32_t* index, const float* values,
                   std::int64_t k) override;
  void add_weighted(float* target, float weight, const float* values, std::int64_t n) override;

  /// In cpu_robust.cpp.
  void squared_distances(const float* r, const float* const* m, int k, std::int64_t n,
                         double* out) override;
};

}  // namespace gossip::cpu
