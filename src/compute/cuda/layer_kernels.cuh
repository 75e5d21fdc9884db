// compute/cuda/layer_kernels.cuh: launchers of the layer kernels (layer_kernels.cu) for the CUDA
// backend. Each runs the gossip/math.hpp or gossip/layer_math.hpp function the CPU backend runs
// (cpu_layers.cpp) in a grid-stride kernel on the given stream and checks the launch. Included
// only by .cu files.
#pragma once
#if !defined(GOSSIP_ROOM_COMPUTE)
#error "src/compute/cuda/layer_kernels.cuh belongs to room compute, which this room does not use (see the room table in meson.build)"
#endif

#include <cuda_runtime.h>

#include <cstdint>

#include "gossip/layer_math.hpp"

namespace gossip::cuda {

void launch_bias_act(cudaStream_t s, float* y, const float* bias, int rows, int cols, bool relu);
void launch_relu_backward(cudaStream_t s, float* dy, const float* y, std::int64_t n);
void launch_column_sums(cudaStream_t s, const float* dy, int rows, int cols, float* db);
/// Each row's loss into row_loss[r] and whether its arg-max is right into row_correct[r] (device
/// memory, `rows` each); the caller sums them.
void launch_softmax_xent(cudaStream_t s, const float* logits, const std::int32_t* labels,
                         int rows, int cols, float* grad, float* row_loss, int* row_correct);
void launch_relu(cudaStream_t s, const float* x, float* y, std::int64_t n);
void launch_row_sums(cudaStream_t s, const float* a, int rows, int cols, bool accumulate,
                     float* out);
void launch_im2col(cudaStream_t s, const float* x, const ConvGeom& g, int count, float* col);
void launch_col2im(cudaStream_t s, const float* col, const ConvGeom& g, int count, float* dx);
void launch_conv_output(cudaStream_t s, const float* t, const float* bias, const ConvGeom& g,
                        int count, bool relu, float* y);
void launch_conv_grad_layout(cudaStream_t s, const float* dy, const ConvGeom& g, int count,
                             float* t);
void launch_pool_forward(cudaStream_t s, const float* x, const PoolGeom& g, int rows, float* y,
                         std::int32_t* arg);
void launch_pool_backward(cudaStream_t s, const float* dy, const std::int32_t* arg,
                          const PoolGeom& g, int rows, float* dx);
void launch_group_norm_forward(cudaStream_t s, const float* x, const float* gamma,
                               const float* beta, const GroupNormGeom& g, int rows, float* y,
                               float* mean, float* rstd);
void launch_group_norm_backward(cudaStream_t s, const float* x, const float* dy,
                                const float* gamma, const float* mean, const float* rstd,
                                const GroupNormGeom& g, int rows, float* dx, float* dgamma,
                                float* dbeta);
void launch_batch_norm_forward(cudaStream_t s, const float* x, const float* gamma,
                               const float* beta, const BatchNormGeom& g, int rows, bool training,
                               float* y, float* mean, float* rstd, float* running_mean,
                               float* running_var);
void launch_batch_norm_backward(cudaStream_t s, const float* x, const float* dy,
                                const float* gamma, const float* mean, const float* rstd,
                                const BatchNormGeom& g, int rows, float* dx, float* dgamma,
                                float* dbeta);
/// out[c] (+)= sum over rows and spatial of channel c of an NCHW [rows, channels, spatial] tensor.
void launch_channel_sums(cudaStream_t s, const float* dy, int rows, int channels, int spatial,
                         bool accumulate, float* out);
void launch_dropout(cudaStream_t s, const float* x, float* y, std::int64_t n, float p,
                    std::uint64_t key);

}  // namespace gossip::cuda
