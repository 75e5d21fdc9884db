// compute/cpu_layers.hpp: the CPU backend's layer kernels (gossip/layer_kernels.hpp): loops over
// gossip/layer_math.hpp and gossip/math.hpp in cpu_layers.cpp, as a part the CPU backend
// (cpu_backend.cpp) is made of. Same contracts as gossip/layer_kernels.hpp.
#pragma once
#if !defined(GOSSIP_ROOM_COMPUTE)
#error "src/compute/cpu_layers.hpp belongs to room compute, which this room does not use (see the room table in meson.build)"
#endif

#include <cstdint>
#include <string>
#include <utility>

#include "gossip/layer_kernels.hpp"

namespace gossip::cpu {

/// Layer kernels as loops on host memory; convolutions as im2col + GEMM (no library).
class LayerLoops : public virtual LayerKernels {
 public:
  void bias_act(float* y, const float* bias, int rows, int cols, bool relu) override;
  void relu_backward(float* dy, const float* y, std::int64_t n) override;
  void column_sums(const float* dy, int rows, int cols, float* db) override;
  std::pair<double, std::int64_t> softmax_xent(const float* logits, const std::int32_t* labels,
                                               int rows, int cols, float* grad) override;

  void relu(const float* x, float* y, std::int64_t n) override;
  void row_sums(const float* a, int rows, int cols, bool accumulate, float* out) override;
  void im2col(const float* x, const ConvGeom& g, int count, float* col) override;
  void col2im(const float* col, const ConvGeom& g, int count, float* dx) override;
  void conv_output(const float* t, const float* bias, const ConvGeom& g, int count, bool relu,
                   float* y) override;
  void conv_grad_layout(const float* dy, const ConvGeom& g, int count, float* t) override;
  /// Empty: conv2d layers run im2col + GEMM here.
  std::string conv_library() const override { return {}; }
  std::string conv_line() const override { return "convolutions: im2col + GEMM"; }
  /// Takes auto and im2col; refuses cudnn, which runs on the CUDA backend only.
  std::string use_conv(ConvEngine engine) override;
  void pool_forward(const float* x, const PoolGeom& g, int rows, float* y,
                    std::int32_t* arg) override;
  void pool_backward(const float* dy, const std::int32_t* arg, const PoolGeom& g, int rows,
                     float* dx) override;
  void group_norm_forward(const float* x, const float* gamma, const float* beta,
                          const GroupNormGeom& g, int rows, float* y, float* mean,
                          float* rstd) override;
  void group_norm_backward(const float* x, const float* dy, const float* gamma,
                           const float* mean, const float* rstd, const GroupNormGeom& g, int rows,
                           float* dx, float* dgamma, float* dbeta) override;
  void batch_norm_forward(const float* x, const float* gamma, const float* beta,
                          const BatchNormGeom& g, int rows, bool training, float* y, float* mean,
                          float* rstd, float* running_mean, float* running_var) override;
  void batch_norm_backward(const float* x, const float* dy, const float* gamma,
                           const float* mean, const float* rstd, const BatchNormGeom& g, int rows,
                           float* dx, float* dgamma, float* dbeta) override;
  void dropout(const float* x, float* y, std::int64_t n, float p, std::uint64_t key) override;
};

}  // namespace gossip::cpu
