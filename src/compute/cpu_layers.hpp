// compute/cpu_layers.hpp: the CPU backend's layer operations (convolution layout changes,
// pooling, group norm, dropout, ReLU): loops over gossip/layer_math.hpp, declared here so
// cpu_backend.cpp stays the Backend class and its GEMM. Same contracts as gossip/backend.hpp.
#pragma once
#if !defined(GOSSIP_ROOM_COMPUTE)
#error "src/compute/cpu_layers.hpp belongs to room compute, which this room does not use (see the room table in meson.build)"
#endif

#include <cstdint>

#include "gossip/layer_math.hpp"

namespace gossip::cpu {

void relu(const float* x, float* y, std::int64_t n);
void row_sums(const float* a, int rows, int cols, bool accumulate, float* out);
void im2col(const float* x, const ConvGeom& g, int count, float* col);
void col2im(const float* col, const ConvGeom& g, int count, float* dx);
void conv_output(const float* t, const float* bias, const ConvGeom& g, int count, bool relu,
                 float* y);
void conv_grad_layout(const float* dy, const ConvGeom& g, int count, float* t);
void pool_forward(const float* x, const PoolGeom& g, int rows, float* y, std::int32_t* arg);
void pool_backward(const float* dy, const std::int32_t* arg, const PoolGeom& g, int rows,
                   float* dx);
void group_norm_forward(const float* x, const float* gamma, const float* beta,
                        const GroupNormGeom& g, int rows, float* y, float* mean, float* rstd);
void group_norm_backward(const float* x, const float* dy, const float* gamma, const float* mean,
                         const float* rstd, const GroupNormGeom& g, int rows, float* dx,
                         float* dgamma, float* dbeta);
void batch_norm_forward(const float* x, const float* gamma, const float* beta,
                        const BatchNormGeom& g, int rows, bool training, float* y, float* mean,
                        float* rstd, float* running_mean, float* running_var);
void batch_norm_backward(const float* x, const float* dy, const float* gamma, const float* mean,
                         const float* rstd, const BatchNormGeom& g, int rows, float* dx,
                         float* dgamma, float* dbeta);
void dropout(const float* x, float* y, std::int64_t n, float p, std::uint64_t key);

}  // namespace gossip::cpu
