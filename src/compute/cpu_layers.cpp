// compute/cpu_layers.cpp: the CPU backend's layer kernels, each a loop nest over one
// gossip/math.hpp or gossip/layer_math.hpp function (the CUDA backend runs the same functions in
// kernels), or, for im2col, col2im and pooling's backward, a copy or scatter that gives bit for
// bit what those functions give (tests/test_compute.cpp checks it) without their per-element
// index arithmetic. Loops are ordered so the innermost index walks memory contiguously.
#include "src/compute/cpu_layers.hpp"

#include <algorithm>

#include "gossip/math.hpp"

namespace gossip::cpu {

using I64 = std::int64_t;

// ---- linear layers and the loss --------------------------------------------------------------

void LayerLoops::bias_act(float* y, const float* bias, int rows, int cols, bool relu) {
  for (int r = 0; r < rows; ++r) {
    float* row = y + static_cast<I64>(r) * cols;
    for (int c = 0; c < cols; ++c) row[c] = math::bias_act(row[c], bias[c], relu);
  }
}

void LayerLoops::relu_backward(float* dy, const float* y, I64 n) {
  for (I64 i = 0; i < n; ++i) dy[i] = math::relu_backward(dy[i], y[i]);
}

void LayerLoops::column_sums(const float* dy, int rows, int cols, float* db) {
  std::fill(db, db + cols, 0.0f);
  for (int r = 0; r < rows; ++r) {
    const float* row = dy + static_cast<I64>(r) * cols;
    for (int c = 0; c < cols; ++c) db[c] += row[c];
  }
}

std::pair<double, I64> LayerLoops::softmax_xent(const float* logits, const std::int32_t* labels,
                                                int rows, int cols, float* grad) {
  double loss = 0.0;
  I64 correct = 0;
  const float scale = 1.0f / static_cast<float>(rows);
  for (int r = 0; r < rows; ++r) {
    bool ok = false;
    const I64 off = static_cast<I64>(r) * cols;
    loss += math::softmax_xent_row(logits + off, cols, labels[r], scale,
                                   grad ? grad + off : nullptr, &ok);
    correct += ok ? 1 : 0;
  }
  return {loss / rows, correct};
}

// ---- layers beyond linear --------------------------------------------------------------------

void LayerLoops::relu(const float* x, float* y, I64 n) {
  for (I64 i = 0; i < n; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

void LayerLoops::row_sums(const float* a, int rows, int cols, bool accumulate, float* out) {
  for (int r = 0; r < rows; ++r) {
    const float* row = a + static_cast<I64>(r) * cols;
    float acc = 0.0f;
    for (int c = 0; c < cols; ++c) acc += row[c];
    out[r] = accumulate ? out[r] + acc : acc;
  }
}

namespace {

/// The output columns ow whose input column ow * stride - pad + kw lies inside [0, w): [lo, hi).
struct Span {
  int lo, hi;
};
Span valid_outputs(int w, int out, int stride, int pad, int kw) {
  const int first = pad - kw;  // ow * stride >= pad - kw
  const int lo = first <= 0 ? 0 : (first + stride - 1) / stride;
  const int last = w - 1 + pad - kw;  // ow * stride <= w - 1 + pad - kw
  const int hi = last < 0 ? 0 : std::min(out, last / stride + 1);
  return {std::min(lo, hi), hi};
}

}  // namespace

// im2col and col2im walk the im2col matrix a row (ci, kh, kw) at a time with the index
// arithmetic hoisted out of the inner loop, which is a plain copy (stride 1) or a strided one.
// They produce exactly math::im2col_value and math::col2im_value (what the CUDA kernels call per
// element): im2col copies; col2im scatters each row in ascending (kh, kw) order onto zeroed
// pixels, so every pixel sums the same terms in the same order as the gather, from 0.0f.
void LayerLoops::im2col(const float* x, const ConvGeom& g, int count, float* col) {
  const I64 ld = static_cast<I64>(count) * g.positions();
  const I64 in_size = static_cast<I64>(g.c) * g.h * g.w;
  for (int row = 0; row < g.patch(); ++row) {
    const int kw = row % g.k, kh = (row / g.k) % g.k, ci = row / (g.k * g.k);
    const Span s = valid_outputs(g.w, g.ow, g.stride, g.pad, kw);
    for (int n = 0; n < count; ++n) {
      const float* plane = x + n * in_size + static_cast<I64>(ci) * g.h * g.w;
      float* out = col + row * ld + static_cast<I64>(n) * g.positions();
      for (int oh = 0; oh < g.oh; ++oh, out += g.ow) {
        const int ih = oh * g.stride - g.pad + kh;
        if (ih < 0 || ih >= g.h) {
          std::fill_n(out, g.ow, 0.0f);
          continue;
        }
        const I64 base = static_cast<I64>(ih) * g.w - g.pad + kw;  // input column of ow = 0
        std::fill_n(out, s.lo, 0.0f);
        if (g.stride == 1) {
          std::copy(plane + base + s.lo, plane + base + s.hi, out + s.lo);
        } else {
          for (int ow = s.lo; ow < s.hi; ++ow) out[ow] = plane[base + ow * g.stride];
        }
        std::fill(out + s.hi, out + g.ow, 0.0f);
      }
    }
  }
}

void LayerLoops::col2im(const float* col, const ConvGeom& g, int count, float* dx) {
  const I64 ld = static_cast<I64>(count) * g.positions();
  const I64 plane_size = static_cast<I64>(g.h) * g.w;
  std::fill_n(dx, count * g.c * plane_size, 0.0f);
  for (int ci = 0; ci < g.c; ++ci)
    for (int n = 0; n < count; ++n) {
      float* plane = dx + (static_cast<I64>(n) * g.c + ci) * plane_size;
      for (int kh = 0; kh < g.k; ++kh)
        for (int kw = 0; kw < g.k; ++kw) {
          const int row = (ci * g.k + kh) * g.k + kw;
          const Span s = valid_outputs(g.w, g.ow, g.stride, g.pad, kw);
          const float* src = col + row * ld + static_cast<I64>(n) * g.positions();
          for (int oh = 0; oh < g.oh; ++oh, src += g.ow) {
            const int ih = oh * g.stride - g.pad + kh;
            if (ih < 0 || ih >= g.h) continue;
            const I64 base = static_cast<I64>(ih) * g.w - g.pad + kw;
            if (g.stride == 1) {
              for (int ow = s.lo; ow < s.hi; ++ow) plane[base + ow] += src[ow];
            } else {
              for (int ow = s.lo; ow < s.hi; ++ow) plane[base + ow * g.stride] += src[ow];
            }
          }
        }
    }
}

void LayerLoops::conv_output(const float* t, const float* bias, const ConvGeom& g, int count,
                             bool relu, float* y) {
  const int p = g.positions();
  const I64 ld = static_cast<I64>(count) * p;
  for (int n = 0; n < count; ++n)
    for (int o = 0; o < g.oc; ++o) {
      const float* src = t + o * ld + static_cast<I64>(n) * p;
      float* dst = y + (static_cast<I64>(n) * g.oc + o) * p;
      for (int i = 0; i < p; ++i) dst[i] = math::bias_act(src[i], bias[o], relu);
    }
}

void LayerLoops::conv_grad_layout(const float* dy, const ConvGeom& g, int count, float* t) {
  const int p = g.positions();
  const I64 ld = static_cast<I64>(count) * p;
  for (int n = 0; n < count; ++n)
    for (int o = 0; o < g.oc; ++o)
      std::copy_n(dy + (static_cast<I64>(n) * g.oc + o) * p, p, t + o * ld + static_cast<I64>(n) * p);
}

std::string LayerLoops::use_conv(ConvEngine engine) {
  return engine == ConvEngine::kCudnn
             ? "train.conv: cudnn runs on the CUDA backend with cuDNN 9; the cpu backend runs "
               "im2col + GEMM (train.conv: auto or im2col)"
             : std::string();
}

void LayerLoops::pool_forward(const float* x, const PoolGeom& g, int rows, float* y,
                              std::int32_t* arg) {
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

// Scatter form of math::pool_backward_value: each output's gradient goes to the input it came
// from (max) or is shared over its window (average), outputs in ascending order onto zeroed
// inputs, so each input sums the same terms in the same order as the gather the CUDA kernel does.
void LayerLoops::pool_backward(const float* dy, const std::int32_t* arg, const PoolGeom& g,
                               int rows, float* dx) {
  const I64 planes = static_cast<I64>(rows) * g.c;
  const I64 plane_in = static_cast<I64>(g.h) * g.w, plane_out = static_cast<I64>(g.oh) * g.ow;
  std::fill_n(dx, planes * plane_in, 0.0f);
  const float inv = 1.0f / static_cast<float>(g.k * g.k);
  for (I64 pl = 0; pl < planes; ++pl) {
    const float* dyp = dy + pl * plane_out;
    float* dxp = dx + pl * plane_in;
    if (arg) {
      const std::int32_t* ap = arg + pl * plane_out;
      for (I64 o = 0; o < plane_out; ++o) dxp[ap[o]] += dyp[o];
      continue;
    }
    for (int oh = 0; oh < g.oh; ++oh)
      for (int ow = 0; ow < g.ow; ++ow) {
        const float v = dyp[oh * g.ow + ow] * inv;
        for (int i = 0; i < g.k; ++i)
          for (int j = 0; j < g.k; ++j) dxp[(oh * g.stride + i) * g.w + ow * g.stride + j] += v;
      }
  }
}

void LayerLoops::group_norm_forward(const float* x, const float* gamma, const float* beta,
                                    const GroupNormGeom& g, int rows, float* y, float* mean,
                                    float* rstd) {
  const int per = g.c / g.groups;
  for (I64 ng = 0; ng < static_cast<I64>(rows) * g.groups; ++ng) {
    const I64 off = ng * g.group_size();
    math::group_norm_forward_group(x + off, gamma, beta, static_cast<int>(ng % g.groups) * per,
                                   per, g.spatial, g.eps, y + off, mean + ng, rstd + ng);
  }
}

void LayerLoops::group_norm_backward(const float* x, const float* dy, const float* gamma,
                                     const float* mean, const float* rstd, const GroupNormGeom& g,
                                     int rows, float* dx, float* dgamma, float* dbeta) {
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

void LayerLoops::batch_norm_forward(const float* x, const float* gamma, const float* beta,
                                    const BatchNormGeom& g, int rows, bool training, float* y,
                                    float* mean, float* rstd, float* running_mean,
                                    float* running_var) {
  for (int c = 0; c < g.c; ++c) {
    if (training) {
      math::batch_norm_stats_channel(x, g, rows, c, mean, rstd, running_mean, running_var);
      math::batch_norm_apply_channel(x, gamma, beta, g, rows, c, mean[c], rstd[c], y);
    } else {
      math::batch_norm_apply_channel(x, gamma, beta, g, rows, c, running_mean[c],
                                     math::batch_norm_running_rstd(running_var[c], g.eps), y);
    }
  }
}

void LayerLoops::batch_norm_backward(const float* x, const float* dy, const float* gamma,
                                     const float* mean, const float* rstd, const BatchNormGeom& g,
                                     int rows, float* dx, float* dgamma, float* dbeta) {
  for (int c = 0; c < g.c; ++c)
    math::batch_norm_backward_channel(x, dy, gamma, g, rows, c, mean[c], rstd[c], dx, dgamma,
                                      dbeta);
}

void LayerLoops::dropout(const float* x, float* y, I64 n, float p, std::uint64_t key) {
  for (I64 i = 0; i < n; ++i) y[i] = x[i] * math::dropout_scale(key, i, p);
}

}  // namespace gossip::cpu
