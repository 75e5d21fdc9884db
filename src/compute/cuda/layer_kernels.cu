// compute/cuda/layer_kernels.cu: the layer kernels of the CUDA backend.
//
// What they compute: exactly what cpu_layers.cpp computes — each kernel calls the same
// gossip/math.hpp or gossip/layer_math.hpp function per element (or per row, per group, or per
// channel for group norm's parameter gradients, summing in the same order), so the CPU backend is
// the reference and the CPU tests cover the arithmetic. One thread per output element: col2im and
// pooling's backward gather what they need instead of scattering with atomics, so results do not
// depend on scheduling.
//
// Layout: kernels, then launchers (stream, ceil-div grid, launch check).
#include <cuda_runtime.h>

#include "gossip/core.hpp"
#include "src/compute/cuda/launch.cuh"
#include "src/compute/cuda/layer_kernels.cuh"

namespace gossip::cuda {
namespace {

using I64 = long long;

// ---- kernels ------------------------------------------------------------------------------

__global__ void bias_act_kernel(float* y, const float* bias, int rows, int cols, bool relu) {
  const long long n = static_cast<long long>(rows) * cols;
  GOSSIP_GRID_STRIDE(i, n)
    y[i] = math::bias_act(y[i], bias[i % cols], relu);
}

__global__ void relu_backward_kernel(float* dy, const float* y, long long n) {
  GOSSIP_GRID_STRIDE(i, n)
    dy[i] = math::relu_backward(dy[i], y[i]);
}

__global__ void column_sums_kernel(const float* dy, int rows, int cols, float* db) {
  for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < cols; c += blockDim.x * gridDim.x) {
    float acc = 0.0f;
    for (int r = 0; r < rows; ++r) acc += dy[static_cast<long long>(r) * cols + c];
    db[c] = acc;
  }
}

__global__ void softmax_xent_kernel(const float* logits, const int* labels, int rows, int cols,
                                    float* grad, float* row_loss, int* row_correct) {
  const float scale = 1.0f / static_cast<float>(rows);
  for (int r = blockIdx.x * blockDim.x + threadIdx.x; r < rows; r += blockDim.x * gridDim.x) {
    bool ok = false;
    const long long off = static_cast<long long>(r) * cols;
    row_loss[r] = math::softmax_xent_row(logits + off, cols, labels[r], scale,
                                         grad ? grad + off : nullptr, &ok);
    row_correct[r] = ok ? 1 : 0;
  }
}

__global__ void relu_kernel(const float* x, float* y, I64 n) {
  GOSSIP_GRID_STRIDE(i, n) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

__global__ void row_sums_kernel(const float* a, int rows, int cols, bool accumulate, float* out) {
  GOSSIP_GRID_STRIDE(r, rows) {
    const float* row = a + r * cols;
    float acc = 0.0f;
    for (int c = 0; c < cols; ++c) acc += row[c];
    out[r] = accumulate ? out[r] + acc : acc;
  }
}

__global__ void im2col_kernel(const float* x, ConvGeom g, int count, float* col) {
  const I64 p = g.positions(), ld = count * p, n_all = g.patch() * ld;
  const I64 in_size = static_cast<I64>(g.c) * g.h * g.w;
  GOSSIP_GRID_STRIDE(i, n_all) {
    const int row = static_cast<int>(i / ld);
    const I64 rem = i % ld;
    const int n = static_cast<int>(rem / p), pos = static_cast<int>(rem % p);
    col[i] = math::im2col_value(x + n * in_size, g, row, pos / g.ow, pos % g.ow);
  }
}

__global__ void col2im_kernel(const float* col, ConvGeom g, int count, float* dx) {
  const I64 ld = static_cast<I64>(count) * g.positions();
  const I64 n_all = static_cast<I64>(count) * g.c * g.h * g.w;
  GOSSIP_GRID_STRIDE(i, n_all) {
    const int iw = static_cast<int>(i % g.w);
    const int ih = static_cast<int>((i / g.w) % g.h);
    const int ci = static_cast<int>((i / (static_cast<I64>(g.w) * g.h)) % g.c);
    const int n = static_cast<int>(i / (static_cast<I64>(g.w) * g.h * g.c));
    dx[i] = math::col2im_value(col, ld, g, n, ci, ih, iw);
  }
}

__global__ void conv_output_kernel(const float* t, const float* bias, ConvGeom g, int count,
                                   bool relu, float* y) {
  const I64 p = g.positions(), ld = count * p, n_all = count * g.oc * p;
  GOSSIP_GRID_STRIDE(i, n_all) {
    const I64 pos = i % p;
    const int o = static_cast<int>((i / p) % g.oc);
    const I64 n = i / (p * g.oc);
    y[i] = math::bias_act(t[o * ld + n * p + pos], bias[o], relu);
  }
}

__global__ void conv_grad_layout_kernel(const float* dy, ConvGeom g, int count, float* t) {
  const I64 p = g.positions(), ld = count * p, n_all = count * g.oc * p;
  GOSSIP_GRID_STRIDE(i, n_all) {
    const I64 pos = i % p;
    const int o = static_cast<int>((i / p) % g.oc);
    const I64 n = i / (p * g.oc);
    t[o * ld + n * p + pos] = dy[i];
  }
}

__global__ void pool_forward_kernel(const float* x, PoolGeom g, int rows, float* y,
                                    std::int32_t* arg) {
  const I64 plane_out = static_cast<I64>(g.oh) * g.ow, n_all = rows * g.c * plane_out;
  GOSSIP_GRID_STRIDE(i, n_all) {
    const I64 pl = i / plane_out;
    const int o = static_cast<int>(i % plane_out);
    const float* xp = x + pl * g.h * g.w;
    y[i] = arg ? math::max_pool_value(xp, g, o / g.ow, o % g.ow, arg + i)
               : math::avg_pool_value(xp, g, o / g.ow, o % g.ow);
  }
}

__global__ void pool_backward_kernel(const float* dy, const std::int32_t* arg, PoolGeom g,
                                     int rows, float* dx) {
  const I64 plane_in = static_cast<I64>(g.h) * g.w, plane_out = static_cast<I64>(g.oh) * g.ow;
  const I64 n_all = rows * g.c * plane_in;
  GOSSIP_GRID_STRIDE(i, n_all) {
    const I64 pl = i / plane_in;
    const int at = static_cast<int>(i % plane_in);
    dx[i] = math::pool_backward_value(dy + pl * plane_out, arg ? arg + pl * plane_out : nullptr,
                                      g, at / g.w, at % g.w);
  }
}

__global__ void group_norm_forward_kernel(const float* x, const float* gamma, const float* beta,
                                          GroupNormGeom g, int rows, float* y, float* mean,
                                          float* rstd) {
  const int per = g.c / g.groups;
  GOSSIP_GRID_STRIDE(ng, static_cast<I64>(rows) * g.groups) {
    const I64 off = ng * g.group_size();
    math::group_norm_forward_group(x + off, gamma, beta, static_cast<int>(ng % g.groups) * per,
                                   per, g.spatial, g.eps, y + off, mean + ng, rstd + ng);
  }
}

__global__ void group_norm_param_grads_kernel(const float* x, const float* dy, const float* mean,
                                              const float* rstd, GroupNormGeom g, int rows,
                                              float* dgamma, float* dbeta) {
  GOSSIP_GRID_STRIDE(c, g.c)
    math::group_norm_param_grads(x, dy, mean, rstd, g, rows, static_cast<int>(c), dgamma + c,
                                 dbeta + c);
}

__global__ void group_norm_backward_kernel(const float* x, const float* dy, const float* gamma,
                                           const float* mean, const float* rstd,
                                           GroupNormGeom g, int rows, float* dx) {
  const int per = g.c / g.groups;
  GOSSIP_GRID_STRIDE(ng, static_cast<I64>(rows) * g.groups) {
    const I64 off = ng * g.group_size();
    math::group_norm_backward_group(x + off, dy + off, gamma, static_cast<int>(ng % g.groups) * per,
                                    per, g.spatial, mean[ng], rstd[ng], dx + off);
  }
}

// Batch norm: one thread per channel, as the CPU's loop takes one channel at a time (the same
// functions of gossip/layer_math.hpp, so the same sums in the same order).
// Batch norm: one block per channel. Each thread sums a strided share of the channel's
// rows * spatial values in double; the block adds the shares in a fixed tree (the result does
// not depend on scheduling), thread 0 closes the statistics with the CPU's functions.
constexpr int kChannelThreads = 512;

/// The block's sum of v (every thread passes its share; all threads get the total).
__device__ double block_sum(double v, double* shared) {
  shared[threadIdx.x] = v;
  __syncthreads();
  for (int half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) shared[threadIdx.x] += shared[threadIdx.x + half];
    __syncthreads();
  }
  const double total = shared[0];
  __syncthreads();
  return total;
}

/// Offset of the j-th value of channel c (j in [0, rows * spatial)) in an NCHW tensor.
__device__ I64 channel_at(const BatchNormGeom& g, int c, I64 j) {
  return (j / g.spatial * g.c + c) * g.spatial + j % g.spatial;
}

__global__ void batch_norm_forward_kernel(const float* x, const float* gamma, const float* beta,
                                          BatchNormGeom g, int rows, bool training, float* y,
                                          float* mean, float* rstd, float* running_mean,
                                          float* running_var) {
  __shared__ double shared[kChannelThreads];
  const int c = blockIdx.x;
  const I64 n = static_cast<I64>(rows) * g.spatial;
  float m, r;
  if (training) {
    double s = 0.0;
    for (I64 j = threadIdx.x; j < n; j += blockDim.x) s += x[channel_at(g, c, j)];
    s = block_sum(s, shared);
    const double mu = s / static_cast<double>(n);
    double v = 0.0;
    for (I64 j = threadIdx.x; j < n; j += blockDim.x) {
      const double d = x[channel_at(g, c, j)] - mu;
      v += d * d;
    }
    v = block_sum(v, shared);
    if (threadIdx.x == 0)
      math::batch_norm_finish_stats(s, v, n, g, c, mean, rstd, running_mean, running_var);
    __syncthreads();
    m = mean[c];
    r = rstd[c];
  } else {
    m = running_mean[c];
    r = math::batch_norm_running_rstd(running_var[c], g.eps);
  }
  const float scale = gamma[c] * r, shift = beta[c] - m * scale;
  for (I64 j = threadIdx.x; j < n; j += blockDim.x) {
    const I64 at = channel_at(g, c, j);
    y[at] = x[at] * scale + shift;
  }
}

__global__ void batch_norm_backward_kernel(const float* x, const float* dy, const float* gamma,
                                           const float* mean, const float* rstd, BatchNormGeom g,
                                           int rows, float* dx, float* dgamma, float* dbeta) {
  __shared__ double shared[kChannelThreads];
  const int c = blockIdx.x;
  const I64 n = static_cast<I64>(rows) * g.spatial;
  const float m = mean[c], r = rstd[c];
  double sb = 0.0, sg = 0.0;
  for (I64 j = threadIdx.x; j < n; j += blockDim.x) {
    const I64 at = channel_at(g, c, j);
    sb += dy[at];
    sg += dy[at] * ((x[at] - m) * r);
  }
  sb = block_sum(sb, shared);
  sg = block_sum(sg, shared);
  if (threadIdx.x == 0) {
    dgamma[c] = static_cast<float>(sg);
    dbeta[c] = static_cast<float>(sb);
  }
  if (dx == nullptr) return;
  const float mb = static_cast<float>(sb / static_cast<double>(n));
  const float mg = static_cast<float>(sg / static_cast<double>(n));
  const float k = gamma[c] * r;
  for (I64 j = threadIdx.x; j < n; j += blockDim.x) {
    const I64 at = channel_at(g, c, j);
    dx[at] = math::batch_norm_dx(x[at], dy[at], m, r, k, mb, mg);
  }
}

/// out[c] (+)= the sum of channel c of an NCHW tensor [rows, channels, spatial]: a convolution's
/// bias gradient. One block per channel, summed in a fixed tree.
__global__ void channel_sums_kernel(const float* dy, int rows, int channels, int spatial,
                                    bool accumulate, float* out) {
  __shared__ double shared[kChannelThreads];
  BatchNormGeom g;
  g.c = channels;
  g.spatial = spatial;
  const int c = blockIdx.x;
  const I64 n = static_cast<I64>(rows) * spatial;
  double s = 0.0;
  for (I64 j = threadIdx.x; j < n; j += blockDim.x) s += dy[channel_at(g, c, j)];
  s = block_sum(s, shared);
  if (threadIdx.x == 0) out[c] = static_cast<float>(accumulate ? out[c] + s : s);
}

__global__ void dropout_kernel(const float* x, float* y, I64 n, float p, std::uint64_t key) {
  GOSSIP_GRID_STRIDE(i, n) y[i] = x[i] * math::dropout_scale(key, i, p);
}

}  // namespace

// ---- launchers ----------------------------------------------------------------------------

void launch_bias_act(cudaStream_t s, float* y, const float* bias, int rows, int cols, bool relu) {
  bias_act_kernel<<<grid_for((long long)rows * cols), kThreads, 0, s>>>(y, bias, rows, cols,
                                                                         relu);
  check_launch("bias_act");
}

void launch_relu_backward(cudaStream_t s, float* dy, const float* y, std::int64_t n) {
  relu_backward_kernel<<<grid_for(n), kThreads, 0, s>>>(dy, y, n);
  check_launch("relu_backward");
}

void launch_column_sums(cudaStream_t s, const float* dy, int rows, int cols, float* db) {
  column_sums_kernel<<<grid_for(cols), kThreads, 0, s>>>(dy, rows, cols, db);
  check_launch("column_sums");
}

void launch_softmax_xent(cudaStream_t s, const float* logits, const std::int32_t* labels,
                         int rows, int cols, float* grad, float* row_loss, int* row_correct) {
  softmax_xent_kernel<<<grid_for(rows), kThreads, 0, s>>>(logits, labels, rows, cols, grad,
                                                          row_loss, row_correct);
  check_launch("softmax_xent");
}

void launch_relu(cudaStream_t s, const float* x, float* y, std::int64_t n) {
  relu_kernel<<<grid_for(n), kThreads, 0, s>>>(x, y, n);
  check_launch("relu");
}

void launch_row_sums(cudaStream_t s, const float* a, int rows, int cols, bool accumulate,
                     float* out) {
  row_sums_kernel<<<grid_for(rows), kThreads, 0, s>>>(a, rows, cols, accumulate, out);
  check_launch("row_sums");
}

void launch_im2col(cudaStream_t s, const float* x, const ConvGeom& g, int count, float* col) {
  im2col_kernel<<<grid_for(static_cast<I64>(g.patch()) * count * g.positions()), kThreads, 0, s>>>(
      x, g, count, col);
  check_launch("im2col");
}

void launch_col2im(cudaStream_t s, const float* col, const ConvGeom& g, int count, float* dx) {
  col2im_kernel<<<grid_for(static_cast<I64>(count) * g.c * g.h * g.w), kThreads, 0, s>>>(
      col, g, count, dx);
  check_launch("col2im");
}

void launch_conv_output(cudaStream_t s, const float* t, const float* bias, const ConvGeom& g,
                        int count, bool relu, float* y) {
  conv_output_kernel<<<grid_for(static_cast<I64>(count) * g.oc * g.positions()), kThreads, 0, s>>>(
      t, bias, g, count, relu, y);
  check_launch("conv_output");
}

void launch_conv_grad_layout(cudaStream_t s, const float* dy, const ConvGeom& g, int count,
                             float* t) {
  conv_grad_layout_kernel<<<grid_for(static_cast<I64>(count) * g.oc * g.positions()), kThreads,
                            0, s>>>(dy, g, count, t);
  check_launch("conv_grad_layout");
}

void launch_pool_forward(cudaStream_t s, const float* x, const PoolGeom& g, int rows, float* y,
                         std::int32_t* arg) {
  pool_forward_kernel<<<grid_for(static_cast<I64>(rows) * g.c * g.oh * g.ow), kThreads, 0, s>>>(
      x, g, rows, y, arg);
  check_launch("pool_forward");
}

void launch_pool_backward(cudaStream_t s, const float* dy, const std::int32_t* arg,
                          const PoolGeom& g, int rows, float* dx) {
  pool_backward_kernel<<<grid_for(static_cast<I64>(rows) * g.c * g.h * g.w), kThreads, 0, s>>>(
      dy, arg, g, rows, dx);
  check_launch("pool_backward");
}

void launch_group_norm_forward(cudaStream_t s, const float* x, const float* gamma,
                               const float* beta, const GroupNormGeom& g, int rows, float* y,
                               float* mean, float* rstd) {
  group_norm_forward_kernel<<<grid_for(static_cast<I64>(rows) * g.groups), kThreads, 0, s>>>(
      x, gamma, beta, g, rows, y, mean, rstd);
  check_launch("group_norm_forward");
}

void launch_group_norm_backward(cudaStream_t s, const float* x, const float* dy,
                                const float* gamma, const float* mean, const float* rstd,
                                const GroupNormGeom& g, int rows, float* dx, float* dgamma,
                                float* dbeta) {
  group_norm_param_grads_kernel<<<grid_for(g.c), kThreads, 0, s>>>(x, dy, mean, rstd, g, rows,
                                                                   dgamma, dbeta);
  check_launch("group_norm_param_grads");
  if (dx == nullptr) return;
  group_norm_backward_kernel<<<grid_for(static_cast<I64>(rows) * g.groups), kThreads, 0, s>>>(
      x, dy, gamma, mean, rstd, g, rows, dx);
  check_launch("group_norm_backward");
}

void launch_batch_norm_forward(cudaStream_t s, const float* x, const float* gamma,
                               const float* beta, const BatchNormGeom& g, int rows, bool training,
                               float* y, float* mean, float* rstd, float* running_mean,
                               float* running_var) {
  batch_norm_forward_kernel<<<g.c, kChannelThreads, 0, s>>>(
      x, gamma, beta, g, rows, training, y, mean, rstd, running_mean, running_var);
  check_launch("batch_norm_forward");
}

void launch_batch_norm_backward(cudaStream_t s, const float* x, const float* dy,
                                const float* gamma, const float* mean, const float* rstd,
                                const BatchNormGeom& g, int rows, float* dx, float* dgamma,
                                float* dbeta) {
  batch_norm_backward_kernel<<<g.c, kChannelThreads, 0, s>>>(x, dy, gamma, mean, rstd, g, rows,
                                                             dx, dgamma, dbeta);
  check_launch("batch_norm_backward");
}

void launch_channel_sums(cudaStream_t s, const float* dy, int rows, int channels, int spatial,
                         bool accumulate, float* out) {
  channel_sums_kernel<<<channels, kChannelThreads, 0, s>>>(dy, rows, channels, spatial, accumulate,
                                                           out);
  check_launch("channel_sums");
}

void launch_dropout(cudaStream_t s, const float* x, float* y, std::int64_t n, float p,
                    std::uint64_t key) {
  dropout_kernel<<<grid_for(n), kThreads, 0, s>>>(x, y, n, p, key);
  check_launch("dropout");
}

}  // namespace gossip::cuda
