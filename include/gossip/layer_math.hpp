/// layer_math: the element-wise math of the layers beyond linear (convolution's im2col/col2im and
/// layout changes, pooling, group norm, dropout), written once for host and device (DESIGN idea
/// 3) like gossip/math.hpp. Each function computes one element (or one group) from plain
/// pointers and a geometry struct; the CPU backend calls them in loops, the CUDA backend in
/// grid-stride kernels. Tensors are per-sample row-major [C, H, W] (NCHW for a batch).
/// Keep this header free of anything nvcc's C++17 mode cannot compile.
#pragma once
#if !defined(GOSSIP_ROOM_COMPUTE)
#error "gossip/layer_math.hpp belongs to room compute, which this room does not use (see the room table in meson.build)"
#endif

#include <cstdint>

#include "gossip/gemm.hpp"
#include "gossip/math.hpp"

namespace gossip {

/// A 2-D convolution's sizes: input [c, h, w], output [oc, oh, ow], square kernel k.
struct ConvGeom {
  int c = 0, h = 0, w = 0;
  int oc = 0, k = 0, stride = 1, pad = 0;
  int oh = 0, ow = 0;
  /// Rows of the im2col matrix (c * k * k) and output positions per sample (oh * ow).
  GOSSIP_HD int patch() const { return c * k * k; }
  GOSSIP_HD int positions() const { return oh * ow; }
};

/// Output size of a convolution or pooling along one axis (0 or less: the kernel does not fit).
GOSSIP_HD int conv_out_size(int in, int k, int stride, int pad) {
  return in + 2 * pad < k ? 0 : (in + 2 * pad - k) / stride + 1;
}

/// A 2-D pooling's sizes: input [c, h, w] to [c, oh, ow], square window k, no padding.
struct PoolGeom {
  int c = 0, h = 0, w = 0;
  int k = 0, stride = 0;
  int oh = 0, ow = 0;
};

/// Group norm over [c, h, w] with `groups` groups of c / groups channels each.
struct GroupNormGeom {
  int c = 0, spatial = 0;  // spatial = h * w (1 for a flat input)
  int groups = 1;
  float eps = 1e-5f;
  GOSSIP_HD int group_size() const { return c / groups * spatial; }
};

/// Batch norm over [c, spatial] (spatial = h * w, 1 for a flat input): statistics per channel
/// over the batch's samples and positions; `momentum` moves the running statistics toward the
/// batch's (running = (1 - momentum) * running + momentum * batch, the variance unbiased), as
/// PyTorch's BatchNorm does.
struct BatchNormGeom {
  int c = 0, spatial = 0;
  float eps = 1e-5f;
  float momentum = 0.1f;
};

namespace math {

// ---- convolution: im2col + GEMM, its backward GEMM + col2im ------------------------------------
// col is the [patch x count * positions] matrix: row (ci * k + kh) * k + kw, column
// n * positions + oh * ow_ + ow holds x[n, ci, oh * stride - pad + kh, ow * stride - pad + kw]
// (0 outside the image). Then W [oc x patch] * col = the output in "GEMM layout"
// [oc x count * positions].

/// col[row, col_index] for one sample's x (x points at sample n's [c, h, w]).
GOSSIP_HD float im2col_value(const float* x, const ConvGeom& g, int row, int oh, int ow) {
  const int kw = row % g.k;
  const int kh = (row / g.k) % g.k;
  const int ci = row / (g.k * g.k);
  const int ih = oh * g.stride - g.pad + kh;
  const int iw = ow * g.stride - g.pad + kw;
  if (ih < 0 || ih >= g.h || iw < 0 || iw >= g.w) return 0.0f;
  return x[(static_cast<std::int64_t>(ci) * g.h + ih) * g.w + iw];
}

/// dx[n, ci, ih, iw]: the sum of the col entries (for sample n, a block of count * positions
/// columns of width `ld`) that im2col took from that pixel, in ascending (kh, kw) order.
GOSSIP_HD float col2im_value(const float* col, std::int64_t ld, const ConvGeom& g, int n, int ci,
                             int ih, int iw) {
  float acc = 0.0f;
  const std::int64_t base = static_cast<std::int64_t>(n) * g.positions();
  const bool unit = g.stride == 1;  // no division on the common path
  for (int kh = 0; kh < g.k; ++kh) {
    const int th = ih + g.pad - kh;
    if (th < 0 || (!unit && th % g.stride != 0)) continue;
    const int oh = unit ? th : th / g.stride;
    if (oh >= g.oh) continue;
    for (int kw = 0; kw < g.k; ++kw) {
      const int tw = iw + g.pad - kw;
      if (tw < 0 || (!unit && tw % g.stride != 0)) continue;
      const int ow = unit ? tw : tw / g.stride;
      if (ow >= g.ow) continue;
      const int row = (ci * g.k + kh) * g.k + kw;
      acc += col[row * ld + base + oh * g.ow + ow];
    }
  }
  return acc;
}

}  // namespace math

/// The convolution's three GEMMs for a chunk of `count` samples, as pure descriptors (a CPU test
/// checks what cuBLAS receives for them, as for linear layers). Row-major operands:
/// W [oc x patch], col [patch x count * positions], t [oc x count * positions].
/// Forward: t = W col.
constexpr RowMajorGemm conv_forward_gemm(const ConvGeom& g, int count) {
  return row_major_gemm(false, false, g.oc, count * g.oh * g.ow, g.c * g.k * g.k);
}
/// Weight gradient: dW (+)= t col^T (beta 1 adds a later chunk to the earlier ones).
constexpr RowMajorGemm conv_weight_grad_gemm(const ConvGeom& g, int count, bool accumulate) {
  return row_major_gemm(false, true, g.oc, g.c * g.k * g.k, count * g.oh * g.ow, 1.0f,
                        accumulate ? 1.0f : 0.0f);
}
/// Gradient of the im2col matrix: dcol = W^T t.
constexpr RowMajorGemm conv_input_grad_gemm(const ConvGeom& g, int count) {
  return row_major_gemm(true, false, g.c * g.k * g.k, count * g.oh * g.ow, g.oc);
}

namespace math {

// ---- pooling (no padding; windows of k with stride) ---------------------------------------------

/// Max over one window of one channel plane `x` [h, w]; writes the arg-max's index in the plane
/// (the first of equal values, row-major).
GOSSIP_HD float max_pool_value(const float* x, const PoolGeom& g, int oh, int ow,
                               std::int32_t* arg) {
  const int h0 = oh * g.stride, w0 = ow * g.stride;
  float best = x[h0 * g.w + w0];
  int at = h0 * g.w + w0;
  for (int i = 0; i < g.k; ++i)
    for (int j = 0; j < g.k; ++j) {
      const int idx = (h0 + i) * g.w + (w0 + j);
      if (x[idx] > best) {
        best = x[idx];
        at = idx;
      }
    }
  *arg = at;
  return best;
}

/// Mean over one window of one channel plane.
GOSSIP_HD float avg_pool_value(const float* x, const PoolGeom& g, int oh, int ow) {
  const int h0 = oh * g.stride, w0 = ow * g.stride;
  float acc = 0.0f;
  for (int i = 0; i < g.k; ++i)
    for (int j = 0; j < g.k; ++j) acc += x[(h0 + i) * g.w + (w0 + j)];
  return acc / static_cast<float>(g.k * g.k);
}

/// Gradient at input pixel (ih, iw) of one channel plane from that plane's dy [oh, ow]: the sum
/// over the windows that contain it (for max pooling only those whose arg-max it is), in
/// ascending window order. `arg` is null for average pooling.
GOSSIP_HD float pool_backward_value(const float* dy, const std::int32_t* arg, const PoolGeom& g,
                                    int ih, int iw) {
  const int oh_lo = ih < g.k ? 0 : (ih - g.k) / g.stride + 1;
  const int ow_lo = iw < g.k ? 0 : (iw - g.k) / g.stride + 1;
  const int oh_hi = ih / g.stride < g.oh - 1 ? ih / g.stride : g.oh - 1;
  const int ow_hi = iw / g.stride < g.ow - 1 ? iw / g.stride : g.ow - 1;
  const int self = ih * g.w + iw;
  const float inv = 1.0f / static_cast<float>(g.k * g.k);
  float acc = 0.0f;
  for (int oh = oh_lo; oh <= oh_hi; ++oh)
    for (int ow = ow_lo; ow <= ow_hi; ++ow) {
      if (ih >= oh * g.stride + g.k || iw >= ow * g.stride + g.k) continue;
      const int o = oh * g.ow + ow;
      if (arg == nullptr) acc += dy[o] * inv;
      else if (arg[o] == self) acc += dy[o];
    }
  return acc;
}

// ---- group norm ------------------------------------------------------------------------------
// A group is `group_size` contiguous floats of one sample (channels g*c/G .. (g+1)*c/G - 1, all
// positions). y = (x - mean) * rstd * gamma[c] + beta[c] with the group's mean and
// rstd = 1 / sqrt(var + eps) (biased variance, as PyTorch).

/// Mean and rstd of one group of n values (two passes, accumulated in double).
GOSSIP_HD void group_stats(const float* x, int n, float eps, float* mean, float* rstd) {
  double s = 0.0;
  for (int i = 0; i < n; ++i) s += x[i];
  const double m = s / n;
  double v = 0.0;
  for (int i = 0; i < n; ++i) v += (x[i] - m) * (x[i] - m);
  *mean = static_cast<float>(m);
  *rstd = static_cast<float>(1.0 / sqrt(v / n + static_cast<double>(eps)));
}

/// Normalises one group of `channels * spatial` values starting at channel `first_channel`.
GOSSIP_HD void group_norm_forward_group(const float* x, const float* gamma, const float* beta,
                                        int first_channel, int channels, int spatial, float eps,
                                        float* y, float* mean, float* rstd) {
  const int n = channels * spatial;
  group_stats(x, n, eps, mean, rstd);
  for (int i = 0; i < n; ++i) {
    const int c = first_channel + i / spatial;
    y[i] = (x[i] - *mean) * *rstd * gamma[c] + beta[c];
  }
}

/// dgamma[c] = sum over samples and positions of dy * xhat, dbeta[c] = sum of dy, for channel c
/// of `rows` samples (mean and rstd are per (sample, group)).
GOSSIP_HD void group_norm_param_grads(const float* x, const float* dy, const float* mean,
                                      const float* rstd, const GroupNormGeom& g, int rows, int c,
                                      float* dgamma, float* dbeta) {
  const int per = g.c / g.groups;
  float sg = 0.0f, sb = 0.0f;
  for (int n = 0; n < rows; ++n) {
    const std::int64_t ng = static_cast<std::int64_t>(n) * g.groups + c / per;
    const std::int64_t off = (static_cast<std::int64_t>(n) * g.c + c) * g.spatial;
    for (int i = 0; i < g.spatial; ++i) {
      sg += dy[off + i] * ((x[off + i] - mean[ng]) * rstd[ng]);
      sb += dy[off + i];
    }
  }
  *dgamma = sg;
  *dbeta = sb;
}

/// Input gradient of one group: with xhat = (x - mean) * rstd and d = dy * gamma[c],
/// dx = rstd * (d - mean(d) - xhat * mean(d * xhat)). `first_channel` is the group's first
/// channel; `spatial` positions per channel.
GOSSIP_HD void group_norm_backward_group(const float* x, const float* dy, const float* gamma,
                                         int first_channel, int channels, int spatial,
                                         float mean, float rstd, float* dx) {
  const int n = channels * spatial;
  double sd = 0.0, sdx = 0.0;
  for (int i = 0; i < n; ++i) {
    const float d = dy[i] * gamma[first_channel + i / spatial];
    sd += d;
    sdx += d * ((x[i] - mean) * rstd);
  }
  const float md = static_cast<float>(sd / n), mdx = static_cast<float>(sdx / n);
  for (int i = 0; i < n; ++i) {
    const float d = dy[i] * gamma[first_channel + i / spatial];
    const float xhat = (x[i] - mean) * rstd;
    dx[i] = rstd * (d - md - xhat * mdx);
  }
}

// ---- batch norm (one channel at a time: the CPU loops over channels; a GPU block takes one,
// sums its passes in parallel and closes them with the same functions) -------------------------------------------------------------------------------------------

/// Closes channel c's statistics from its two passes over its n values (`sum`, then `dev2`, the
/// sum of squared deviations from sum / n): mean, rstd = 1 / sqrt(var + eps), and the running
/// mean and unbiased variance moved toward them. The CPU's loop and the GPU's block reduction
/// both end here.
GOSSIP_HD void batch_norm_finish_stats(double sum, double dev2, std::int64_t n,
                                       const BatchNormGeom& g, int c, float* mean, float* rstd,
                                       float* running_mean, float* running_var) {
  const double m = sum / static_cast<double>(n);
  mean[c] = static_cast<float>(m);
  rstd[c] = static_cast<float>(1.0 / sqrt(dev2 / static_cast<double>(n) +
                                          static_cast<double>(g.eps)));
  const double unbiased = n > 1 ? dev2 / static_cast<double>(n - 1) : 0.0;
  running_mean[c] = static_cast<float>((1.0 - g.momentum) * running_mean[c] + g.momentum * m);
  running_var[c] = static_cast<float>((1.0 - g.momentum) * running_var[c] + g.momentum * unbiased);
}

/// Channel c's batch mean and rstd = 1 / sqrt(var + eps) over `rows` samples (two passes, in
/// double), and its running mean and unbiased variance moved toward them.
GOSSIP_HD void batch_norm_stats_channel(const float* x, const BatchNormGeom& g, int rows, int c,
                                        float* mean, float* rstd, float* running_mean,
                                        float* running_var) {
  const std::int64_t n = static_cast<std::int64_t>(rows) * g.spatial;
  double s = 0.0;
  for (int r = 0; r < rows; ++r) {
    const float* p = x + (static_cast<std::int64_t>(r) * g.c + c) * g.spatial;
    for (int i = 0; i < g.spatial; ++i) s += p[i];
  }
  const double m = s / static_cast<double>(n);
  double v = 0.0;
  for (int r = 0; r < rows; ++r) {
    const float* p = x + (static_cast<std::int64_t>(r) * g.c + c) * g.spatial;
    for (int i = 0; i < g.spatial; ++i) v += (p[i] - m) * (p[i] - m);
  }
  batch_norm_finish_stats(s, v, n, g, c, mean, rstd, running_mean, running_var);
}

/// y = gamma[c] * (x - mean) * rstd + beta[c] for channel c of `rows` samples.
GOSSIP_HD void batch_norm_apply_channel(const float* x, const float* gamma, const float* beta,
                                        const BatchNormGeom& g, int rows, int c, float mean,
                                        float rstd, float* y) {
  const float scale = gamma[c] * rstd, shift = beta[c] - mean * scale;
  for (int r = 0; r < rows; ++r) {
    const std::int64_t off = (static_cast<std::int64_t>(r) * g.c + c) * g.spatial;
    for (int i = 0; i < g.spatial; ++i) y[off + i] = x[off + i] * scale + shift;
  }
}

/// rstd of the running variance (evaluation mode).
GOSSIP_HD float batch_norm_running_rstd(float running_var, float eps) {
  return static_cast<float>(1.0 / sqrt(static_cast<double>(running_var) + eps));
}

/// One element of batch norm's input gradient: k = gamma * rstd, mb and mg the channel's mean
/// dy and mean dy * xhat.
GOSSIP_HD float batch_norm_dx(float x, float dy, float mean, float rstd, float k, float mb,
                              float mg) {
  const float xhat = (x - mean) * rstd;
  return k * (dy - mb - xhat * mg);
}

/// Channel c's gradients: dbeta = sum dy, dgamma = sum dy * xhat, and (dx not null)
/// dx = gamma * rstd * (dy - dbeta / n - xhat * dgamma / n), n = rows * spatial.
GOSSIP_HD void batch_norm_backward_channel(const float* x, const float* dy, const float* gamma,
                                           const BatchNormGeom& g, int rows, int c, float mean,
                                           float rstd, float* dx, float* dgamma, float* dbeta) {
  double sb = 0.0, sg = 0.0;
  for (int r = 0; r < rows; ++r) {
    const std::int64_t off = (static_cast<std::int64_t>(r) * g.c + c) * g.spatial;
    for (int i = 0; i < g.spatial; ++i) {
      sb += dy[off + i];
      sg += dy[off + i] * ((x[off + i] - mean) * rstd);
    }
  }
  dgamma[c] = static_cast<float>(sg);
  dbeta[c] = static_cast<float>(sb);
  if (dx == nullptr) return;
  const double n = static_cast<double>(rows) * g.spatial;
  const float mb = static_cast<float>(sb / n), mg = static_cast<float>(sg / n);
  const float k = gamma[c] * rstd;
  for (int r = 0; r < rows; ++r) {
    const std::int64_t off = (static_cast<std::int64_t>(r) * g.c + c) * g.spatial;
    for (int i = 0; i < g.spatial; ++i)
      dx[off + i] = batch_norm_dx(x[off + i], dy[off + i], mean, rstd, k, mb, mg);
  }
}

// ---- dropout ---------------------------------------------------------------------------------
// Inverted dropout with a counter-based mask: element i of a batch is kept when the hash of
// (key, i) falls at or above p, and scaled by 1 / (1 - p). Forward and backward recompute the
// same mask from the key, so nothing is stored and every backend draws the same mask.

GOSSIP_HD std::uint64_t hash64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

/// The factor element i is multiplied by: 0 (dropped) or 1 / (1 - p) (kept).
GOSSIP_HD float dropout_scale(std::uint64_t key, std::int64_t i, float p) {
  const std::uint64_t h = hash64(key ^ hash64(static_cast<std::uint64_t>(i)));
  const float u = static_cast<float>(h >> 40) * (1.0f / 16777216.0f);  // 24 bits in [0, 1)
  return u < p ? 0.0f : 1.0f / (1.0f - p);
}

}  // namespace math
}  // namespace gossip
