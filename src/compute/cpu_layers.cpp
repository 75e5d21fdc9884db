// compute/cpu_layers.cpp: the CPU backend's layer operations, each a loop nest over one
// gossip/layer_math.hpp function (the CUDA backend runs the same functions in kernels). Loops are
// ordered so the innermost index walks memory contiguously.
#include "src/compute/cpu_layers.hpp"

#include <algorithm>

namespace gossip::cpu {

using I64 = std::int64_t;

void relu(const float* x, float* y, I64 n) {
  for (I64 i = 0; i < n; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

void row_sums(const float* a, int rows, int cols, bool accumulate, float* out) {
  for (int r = 0; r < rows; ++r) {
    const float* row = a + static_cast<I64>(r) * cols;
    float acc = 0.0f;
    for (int c = 0; c < cols; ++c) acc += row[c];
    out[r] = accumulate ? out[r] + acc : acc;
  }
}

void im2col(const float* x, const ConvGeom& g, int count, float* col) {
  const I64 ld = static_cast<I64>(count) * g.positions();
  const I64 in_size = static_cast<I64>(g.c) * g.h * g.w;
  for (int row = 0; row < g.patch(); ++row)
    for (int n = 0; n < count; ++n) {
      const float* xn = x + n * in_size;
      float* out = col + row * ld + static_cast<I64>(n) * g.positions();
      for (int oh = 0; oh < g.oh; ++oh)
        for (int ow = 0; ow < g.ow; ++ow) out[oh * g.ow + ow] = math::im2col_value(xn, g, row, oh, ow);
    }
}

void col2im(const float* col, const ConvGeom& g, int count, float* dx) {
  const I64 ld = static_cast<I64>(count) * g.positions();
  for (int n = 0; n < count; ++n)
    for (int ci = 0; ci < g.c; ++ci) {
      float* plane = dx + (static_cast<I64>(n) * g.c + ci) * g.h * g.w;
      for (int ih = 0; ih < g.h; ++ih)
        for (int iw = 0; iw < g.w; ++iw)
          plane[ih * g.w + iw] = math::col2im_value(col, ld, g, n, ci, ih, iw);
    }
}

void conv_output(const float* t, const float* bias, const ConvGeom& g, int count, bool relu,
                 float* y) {
  const int p = g.positions();
  const I64 ld = static_cast<I64>(count) * p;
  for (int n = 0; n < count; ++n)
    for (int o = 0; o < g.oc; ++o) {
      const float* src = t + o * ld + static_cast<I64>(n) * p;
      float* dst = y + (static_cast<I64>(n) * g.oc + o) * p;
      for (int i = 0; i < p; ++i) dst[i] = math::bias_act(src[i], bias[o], relu);
    }
}

void conv_grad_layout(const float* dy, const ConvGeom& g, int count, float* t) {
  const int p = g.positions();
  const I64 ld = static_cast<I64>(count) * p;
  for (int n = 0; n < count; ++n)
    for (int o = 0; o < g.oc; ++o)
      std::copy_n(dy + (static_cast<I64>(n) * g.oc + o) * p, p, t + o * ld + static_cast<I64>(n) * p);
}

void pool_forward(const float* x, const PoolGeom& g, int rows, float* y, std::int32_t* arg) {
  const I64 planes = static_cast<I64>(rows) * g.c;
  for (I64 pl = 0; pl < planes; ++pl) {
    const float* xp = x + pl * g.h * g.w;
    float* yp = y + pl * g.oh * g.ow;
    std::int32_t* ap = arg ? arg + pl * g.oh * g.ow : nullptr;
    for (int oh = 0; oh < g.oh; ++oh)
      for (int ow = 0; ow < g.ow; ++ow) {
        const int o = oh * g.ow + ow;
        yp[o] = ap ? math::max_pool_value(xp, g, oh, ow, ap + o) : math::avg_pool_value(xp, g, oh, ow);
      }
  }
}

void pool_backward(const float* dy, const std::int32_t* arg, const PoolGeom& g, int rows,
                   float* dx) {
  const I64 planes = static_cast<I64>(rows) * g.c;
  for (I64 pl = 0; pl < planes; ++pl) {
    const float* dyp = dy + pl * g.oh * g.ow;
    const std::int32_t* ap = arg ? arg + pl * g.oh * g.ow : nullptr;
    float* dxp = dx + pl * g.h * g.w;
    for (int ih = 0; ih < g.h; ++ih)
      for (int iw = 0; iw < g.w; ++iw) dxp[ih * g.w + iw] = math::pool_backward_value(dyp, ap, g, ih, iw);
  }
}

void group_norm_forward(const float* x, const float* gamma, const float* beta,
                        const GroupNormGeom& g, int rows, float* y, float* mean, float* rstd) {
  const int per = g.c / g.groups;
  for (I64 ng = 0; ng < static_cast<I64>(rows) * g.groups; ++ng) {
    const I64 off = ng * g.group_size();
    math::group_norm_forward_group(x + off, gamma, beta, static_cast<int>(ng % g.groups) * per,
                                   per, g.spatial, g.eps, y + off, mean + ng, rstd + ng);
  }
}

void group_norm_backward(const float* x, const float* dy, const float* gamma, const float* mean,
                         const float* rstd, const GroupNormGeom& g, int rows, float* dx,
                         float* dgamma, float* dbeta) {
  for (int c = 0; c < g.c; ++c)
    math::group_norm_param_grads(x, dy, mean, rstd, g, rows, c, dgamma + c, dbeta + c);
  if (dx == nullptr) return;
  const int per = g.c / g.groups;
  for (I64 ng = 0; ng < static_cast<I64>(rows) * g.groups; ++ng) {
    const I64 off = ng * g.group_size();
    math::group_norm_backward_group(x + off, dy + off, gamma, static_cast<int>(ng % g.groups) * per,
                                    per, g.spatial, mean[ng], rstd[ng], dx + off);
  }
}

void dropout(const float* x, float* y, I64 n, float p, std::uint64_t key) {
  for (I64 i = 0; i < n; ++i) y[i] = x[i] * math::dropout_scale(key, i, p);
}

}  // namespace gossip::cpu
