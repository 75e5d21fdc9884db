/// layer_kernels: a Backend's layer operations (gossip/backend.hpp): the element-wise work of
/// the layers (gossip/layer_math.hpp says what each element is) and their loss, on the CPU as
/// loops and on CUDA as kernels over the same functions (DESIGN idea 3), and the convolution
/// library where one runs whole convolutions (cuDNN). Pointers are the backend's device's.
/// Keep this header free of anything nvcc's C++17 mode cannot compile.
#pragma once
#if !defined(GOSSIP_ROOM_COMPUTE)
#error "gossip/layer_kernels.hpp belongs to room compute, which this room does not use (see the room table in meson.build)"
#endif

#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>

#include "gossip/backend_device.hpp"
#include "gossip/compute_choices.hpp"
#include "gossip/layer_math.hpp"

namespace gossip {

/// The layer operations of a backend, on its device.
class LayerKernels : public virtual Device {
 public:
  // ---- linear layers and the loss ------------------------------------------------------------
  /// y[r, c] = act(y[r, c] + bias[c]) for a rows x cols row-major y, in place.
  virtual void bias_act(float* y, const float* bias, int rows, int cols, bool relu) = 0;
  /// dy[i] = relu_backward(dy[i], y[i]) for n elements, in place.
  virtual void relu_backward(float* dy, const float* y, std::int64_t n) = 0;
  /// db[c] = sum_r dy[r, c].
  virtual void column_sums(const float* dy, int rows, int cols, float* db) = 0;
  /// Softmax cross-entropy over rows; grad = (softmax - onehot) / rows. Returns the mean loss and
  /// the number of correct arg-max predictions. `grad` may be null (evaluation only).
  virtual std::pair<double, std::int64_t> softmax_xent(const float* logits,
                                                       const std::int32_t* labels, int rows,
                                                       int cols, float* grad) = 0;
  /// softmax_xent with the loss and correct count left on the backend until
  /// queued_softmax_result() reads them: a training step queues its backward pass before it
  /// waits for the loss, so a device is not left idle while the host launches it. The CPU (and
  /// any backend that does not override these) computes it at once and keeps the result for
  /// the calling thread: a host backend may be shared by threads stepping their own peers (the
  /// simulator's workers), and one's loss is never another's.
  virtual void queue_softmax_xent(const float* logits, const std::int32_t* labels, int rows,
                                  int cols, float* grad) {
    queued_softmax() = {this, softmax_xent(logits, labels, rows, cols, grad)};
  }
  /// The last queue_softmax_xent's mean loss and correct predictions (waits for them; while a
  /// graph is captured, 0 and 0 as softmax_xent gives then).
  virtual std::pair<double, std::int64_t> queued_softmax_result() {
    const auto& [kernels, result] = queued_softmax();
    return kernels == this ? result : std::pair<double, std::int64_t>{0.0, 0};
  }

  // ---- layers beyond linear (gossip/layer_math.hpp says what each element is) ----------------
  /// y[i] = max(x[i], 0) for n elements (y may be x).
  virtual void relu(const float* x, float* y, std::int64_t n) = 0;
  /// out[r] = sum_c a[r, c] for a rows x cols row-major a, added to out when `accumulate`.
  virtual void row_sums(const float* a, int rows, int cols, bool accumulate, float* out) = 0;
  /// The im2col matrix [patch x count * positions] of `count` samples x [count, c, h, w].
  virtual void im2col(const float* x, const ConvGeom& g, int count, float* col) = 0;
  /// dx [count, c, h, w] from the gradient of the im2col matrix (math::col2im_value).
  virtual void col2im(const float* col, const ConvGeom& g, int count, float* dx) = 0;
  /// From GEMM layout to NCHW: y[n, o, p] = act(t[o, n * positions + p] + bias[o]).
  virtual void conv_output(const float* t, const float* bias, const ConvGeom& g, int count,
                           bool relu, float* y) = 0;
  /// From NCHW to GEMM layout: t[o, n * positions + p] = dy[n, o, p].
  virtual void conv_grad_layout(const float* dy, const ConvGeom& g, int count, float* t) = 0;
  /// The library that runs whole convolutions (conv_forward, conv_backward), as "cudnn 9.19.0";
  /// empty where conv2d layers run im2col + GEMM (the CPU; the CUDA backend without cuDNN or
  /// with train.conv: im2col). Layers ask once, when they are built.
  virtual std::string conv_library() const = 0;
  /// For the peer's first line: "convolutions: cudnn 9.19.0" or "convolutions: im2col + GEMM
  /// (why)".
  virtual std::string conv_line() const = 0;
  /// train.conv, before any layer is built: "" when it is taken, else why it cannot run here
  /// (an InputError's text).
  virtual std::string use_conv(ConvEngine engine) = 0;
  /// y [rows, oc, oh, ow] = act(conv(x, W) + b), W [oc, c, k, k] (conv_library() only).
  virtual void conv_forward(const float* /*x*/, const float* /*w*/, const float* /*bias*/,
                            const ConvGeom& /*g*/, int /*rows*/, bool /*relu*/, float* /*y*/) {
    throw std::logic_error("conv_forward: this backend has no convolution library");
  }
  /// dw, db (overwritten) and dx (when not null) from dy after the activation's backward.
  virtual void conv_backward(const float* /*x*/, const float* /*w*/, const float* /*dy*/,
                             const ConvGeom& /*g*/, int /*rows*/, float* /*dw*/, float* /*db*/,
                             float* /*dx*/) {
    throw std::logic_error("conv_backward: this backend has no convolution library");
  }
  /// Pooling of `rows` samples x [rows, c, h, w] -> y [rows, c, oh, ow]; max pooling when `arg`
  /// is not null (it receives each output's arg-max index within its plane), else average.
  virtual void pool_forward(const float* x, const PoolGeom& g, int rows, float* y,
                            std::int32_t* arg) = 0;
  /// dx [rows, c, h, w] from dy [rows, c, oh, ow] (and the forward's arg-max for max pooling).
  virtual void pool_backward(const float* dy, const std::int32_t* arg, const PoolGeom& g,
                             int rows, float* dx) = 0;
  /// Group norm of `rows` samples; saves each (sample, group)'s mean and rstd (rows * groups).
  virtual void group_norm_forward(const float* x, const float* gamma, const float* beta,
                                  const GroupNormGeom& g, int rows, float* y, float* mean,
                                  float* rstd) = 0;
  /// Its backward: dx (may be null), and dgamma, dbeta (c each, overwritten).
  virtual void group_norm_backward(const float* x, const float* dy, const float* gamma,
                                   const float* mean, const float* rstd, const GroupNormGeom& g,
                                   int rows, float* dx, float* dgamma, float* dbeta) = 0;
  /// Batch norm of `rows` samples. Training: each channel's batch mean and rstd into mean and
  /// rstd (c each), the running statistics moved toward them (BatchNormGeom). Evaluation: the
  /// running statistics normalise, and nothing is written but y.
  virtual void batch_norm_forward(const float* x, const float* gamma, const float* beta,
                                  const BatchNormGeom& g, int rows, bool training, float* y,
                                  float* mean, float* rstd, float* running_mean,
                                  float* running_var) = 0;
  /// Its backward (after a training forward): dx (may be null), and dgamma, dbeta (c each,
  /// overwritten).
  virtual void batch_norm_backward(const float* x, const float* dy, const float* gamma,
                                   const float* mean, const float* rstd, const BatchNormGeom& g,
                                   int rows, float* dx, float* dgamma, float* dbeta) = 0;
  /// y[i] = x[i] * math::dropout_scale(key, i, p) for n elements; backward is the same map
  /// applied to dy (the mask is recomputed from the key, never stored).
  virtual void dropout(const float* x, float* y, std::int64_t n, float p, std::uint64_t key) = 0;

 private:
  /// This thread's last queued result, and the layer kernels that computed it.
  static std::pair<const LayerKernels*, std::pair<double, std::int64_t>>& queued_softmax() {
    thread_local std::pair<const LayerKernels*, std::pair<double, std::int64_t>> last{
        nullptr, {0.0, 0}};
    return last;
  }
};

/// train.conv on `kernels` (a backend's), before any layer is built: InputError saying why when
/// it cannot run there (cudnn on the CPU, or where cuDNN does not load).
void use_conv(LayerKernels& kernels, ConvEngine engine);
/// What runs a backend's convolutions, for summaries: "cudnn 9.19.0" or "im2col".
std::string conv_name(const LayerKernels& kernels);

}  // namespace gossip
