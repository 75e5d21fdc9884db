/// backend: where tensors live and the few operations training needs (DESIGN idea 3). The CPU
/// backend runs a GEMM chosen by measuring (OpenBLAS or oneDNN) and loops over gossip::math; the CUDA backend runs cuBLAS and the same
/// math in kernels. Pointers returned by a backend are device pointers: only that backend's
/// operations (and upload/download) may touch them, unless host_memory() is true.
#pragma once
#if !defined(GOSSIP_ROOM_COMPUTE)
#error "gossip/backend.hpp belongs to room compute, which this room does not use (see the room table in meson.build)"
#endif

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "gossip/compute_choices.hpp"
#include "gossip/gemm.hpp"
#include "gossip/host_memory.hpp"
#include "gossip/layer_math.hpp"

namespace gossip {

/// A recorded step (Backend::capture_end), valid while its backend lives.
class StepGraph {
 public:
  virtual ~StepGraph() = default;
  /// Runs the recorded work once more, queued like any other call: "" or why not.
  virtual std::string replay() = 0;
  /// The mean loss and correct predictions of the last softmax_xent recorded, from the last
  /// replay (waits for it).
  virtual std::pair<double, std::int64_t> softmax_result() = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;

  /// "cpu" or "cuda".
  virtual std::string name() const = 0;
  /// A line for logs: BLAS kernel, threads or device name.
  virtual std::string describe() const = 0;
  /// True when device pointers are ordinary host memory (the CPU backend).
  virtual bool host_memory() const = 0;

  virtual void* allocate(std::size_t bytes) = 0;
  virtual void release(void* p) noexcept = 0;
  virtual void upload(void* dst, const void* src, std::size_t bytes) = 0;
  virtual void download(void* dst, const void* src, std::size_t bytes) = 0;
  /// Waits for queued work (a no-op on the CPU).
  virtual void synchronize() = 0;
  /// Queues a copy of `bytes` from host memory `src` (page-locked where the backend has it) to
  /// this backend's `dst`, after the work queued before it, and returns without waiting: `src`
  /// must stay unchanged until the backend next waits for its work (synchronize(), a download,
  /// a loss read). A step's batch goes up so, while the last step's update still runs. Default
  /// (the CPU): upload(), done at once.
  virtual void upload_async(void* dst, const void* src, std::size_t bytes) {
    upload(dst, src, bytes);
  }
  /// Copies `bytes` between two of this backend's buffers after the work queued before it (a
  /// GPU: on the device, in stream order, without waiting; the CPU: at once).
  virtual void copy(void* dst, const void* src, std::size_t bytes) = 0;
  /// Starts copying `bytes` of `src` (this backend's) to `dst` (host memory, page-locked where
  /// the backend has it) once the work queued so far is done, beside the work queued after it
  /// (the CUDA backend: on a side stream, so the copy overlaps the next step's kernels). `dst`
  /// holds the bytes once wait_downloads() returns; until then neither buffer may be touched,
  /// and no later work may write `src`. Default (the CPU): download(), done at once.
  virtual void download_async(void* dst, const void* src, std::size_t bytes) {
    download(dst, src, bytes);
  }
  /// Waits for every download_async() started so far (a no-op where they are done at once).
  virtual void wait_downloads() {}
  /// Makes a host buffer that upload() and download() use every round faster to copy (the CUDA
  /// backend page-locks it for the backend's lifetime); a no-op on the CPU.
  virtual void pin_host(void* /*p*/, std::size_t /*bytes*/) {}
  /// Page-locked host memory for buffers that are filled elsewhere and then uploaded (the
  /// transport's receive buffers: NetConfig::host_memory), valid for the backend's lifetime;
  /// null where uploads need none (the CPU).
  virtual HostMemory* pinned_memory() { return nullptr; }
  /// CUDA graphs, for a step whose shapes and buffers are fixed (train.graphs: step; `gossip
  /// bench step` measures whether one pays): the work queued between capture_begin() and
  /// capture_end() is recorded into a graph instead of run, and the graph's replay() runs it
  /// again, reading and writing the buffers it was recorded with. While capturing,
  /// softmax_xent reads nothing back (it returns loss 0 and 0 correct); after a replay, the
  /// graph's softmax_result() reads what the last softmax_xent it recorded would have returned.
  /// capture_begin returns "" when it worked, else why not (a backend without graphs says so);
  /// capture_end returns the graph, or null with `why` set, and the backend works as before.
  /// Buffers a backend owns and a graph may have recorded (scratch, workspaces) live as long as
  /// the backend, so a graph stays valid however the backend's later calls grow them.
  virtual std::string capture_begin() { return no_graphs(); }
  virtual std::unique_ptr<StepGraph> capture_end(std::string& why) {
    why = no_graphs();
    return nullptr;
  }

  /// C = alpha op(A) op(B) + beta C, row-major (see gemm.hpp).
  virtual void gemm(const RowMajorGemm& g, const float* a, const float* b, float* c) = 0;
  /// The GEMM that gemm() runs: one of cpu_gemm_names() on the CPU, "cublas" on CUDA.
  virtual std::string gemm_name() const = 0;
  /// Makes `name` run gemm() from now on (choose_gemm picks it); InputError when this backend has
  /// no GEMM of that name. Not thread-safe: call it before the backend is shared.
  virtual void use_gemm(const std::string& name) = 0;
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
    const auto& [backend, result] = queued_softmax();
    return backend == this ? result : std::pair<double, std::int64_t>{0.0, 0};
  }
  /// One SGD-with-momentum step over n parameters (math::sgd_update).
  virtual void sgd_update(float* params, float* velocity, const float* grads, std::int64_t n,
                          float lr, float momentum, float weight_decay, bool nesterov) = 0;
  /// out[i] = sum_j w[j] * in[j][i] over n elements, j ascending (math::mix_element). `in` and
  /// `w` are host arrays of k entries; the buffers they point to are device pointers. `out` may
  /// alias none of the inputs.
  virtual void mix(float* out, const float* const* in, const float* w, int k,
                   std::int64_t n) = 0;
  /// p[i] = value.
  virtual void fill(float* p, float value, std::int64_t n) = 0;

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
  virtual std::string conv_library() const { return {}; }
  /// For the peer's first line: "convolutions: cudnn 9.19.0" or "convolutions: im2col + GEMM
  /// (why)".
  virtual std::string conv_line() const { return "convolutions: im2col + GEMM"; }
  /// train.conv, before any layer is built: "" when it is taken, else why it cannot run here
  /// (an InputError's text).
  virtual std::string use_conv(ConvEngine engine) {
    return engine == ConvEngine::kCudnn
               ? "train.conv: cudnn runs on the CUDA backend with cuDNN 9; the " + name() +
                     " backend runs im2col + GEMM (train.conv: auto or im2col)"
               : std::string();
  }
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

  // ---- compressed gossip (gossip/compress_math.hpp says what each element is) -----------------
  // CHOCO-SGD's element work on vectors in backend memory; which coordinates top_k and random_k
  // keep is chosen on the host (gossip/compress.hpp), and packets are packed there and checked
  // on the host too (gossip/packet.hpp).
  /// d[i] = math::choco_difference(x[i], xhat[i]) for n elements.
  virtual void choco_difference(const float* x, const float* xhat, float* d, std::int64_t n) = 0;
  /// x[i] = math::choco_step(x[i], s[i], xhat[i], gamma) for n elements, in place.
  virtual void choco_step(float* x, const float* s, const float* xhat, float gamma,
                          std::int64_t n) = 0;
  /// Stochastic quantization of n floats in blocks of `block`: scales[b] = the maximum |v| of
  /// block b (math::max_magnitude from 0), and codes[i] = math::quantize_code(v[i], scales[b],
  /// math::quantize_levels(bits), math::uniform_at(key, i)).
  virtual void quantize(const float* v, std::int64_t n, int bits, std::int64_t block,
                        std::uint64_t key, float* scales, std::int8_t* codes) = 0;
  /// target[i] = math::add_weighted(target[i], weight, math::dequantize(codes[i], scales[b],
  /// levels)) for n elements, b = i / block; blocks whose scale is 0 are left alone.
  virtual void dequantize_add(float* target, float weight, const float* scales,
                              const std::int8_t* codes, std::int64_t n, std::int64_t block,
                              int bits) = 0;
  /// target[index[j]] = math::add_weighted(target[index[j]], weight, values[j]) for j < k; the
  /// indices are distinct.
  virtual void scatter_add(float* target, float weight, const std::uint32_t* index,
                           const float* values, std::int64_t k) = 0;
  /// target[i] = math::add_weighted(target[i], weight, values[i]) for n elements.
  virtual void add_weighted(float* target, float weight, const float* values, std::int64_t n) = 0;

  // ---- robust mixing: ClippedGossip's distances (gossip/math.hpp) ------------------------------
  /// out[j] = the sum over i < n of math::squared_difference(m[j][i], r[i]), for j < k (m[j]
  /// null: of r[i] alone, ||r||^2), into host memory; r and m in backend memory. Each backend
  /// sums in its own fixed order (the same bits on every run of it), so two backends agree to
  /// rounding. The clipped mix is then mix() with each message's weight scaled by
  /// math::clip_scale.
  virtual void squared_distances(const float* r, const float* const* m, int k, std::int64_t n,
                                 double* out) = 0;

 private:
  std::string no_graphs() const { return name() + " backend: no CUDA graphs here"; }
  /// This thread's last queued result, and the backend that computed it.
  static std::pair<const Backend*, std::pair<double, std::int64_t>>& queued_softmax() {
    thread_local std::pair<const Backend*, std::pair<double, std::int64_t>> last{nullptr, {0.0, 0}};
    return last;
  }
};

/// A typed device array owned by RAII; move-only.
template <typename T>
class DeviceArray {
 public:
  DeviceArray() = default;
  DeviceArray(Backend& backend, std::size_t n)
      : backend_(&backend), size_(n),
        data_(static_cast<T*>(n ? backend.allocate(n * sizeof(T)) : nullptr)) {}
  ~DeviceArray() { reset(); }
  DeviceArray(DeviceArray&& o) noexcept { *this = std::move(o); }
  DeviceArray& operator=(DeviceArray&& o) noexcept {
    if (this != &o) {
      reset();
      backend_ = std::exchange(o.backend_, nullptr);
      size_ = std::exchange(o.size_, 0);
      data_ = std::exchange(o.data_, nullptr);
    }
    return *this;
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;

  T* data() { return data_; }
  const T* data() const { return data_; }
  std::size_t size() const { return size_; }
  std::size_t bytes() const { return size_ * sizeof(T); }
  void upload(const T* host, std::size_t n) { backend_->upload(data_, host, n * sizeof(T)); }
  void download(T* host, std::size_t n) const { backend_->download(host, data_, n * sizeof(T)); }

 private:
  void reset() noexcept {
    if (data_ != nullptr) backend_->release(data_);
    data_ = nullptr;
    size_ = 0;
  }

  Backend* backend_ = nullptr;
  std::size_t size_ = 0;
  T* data_ = nullptr;
};

/// The backend named `name` (a row of backend_table, gossip/compute_choices.hpp); throws
/// InputError "backend: unknown value 'x' (expected one of: auto, cpu, cuda)" otherwise.
BackendChoice parse_backend_choice(const std::string& name);

/// Makes a backend. kAuto picks CUDA only when this build has it and a device is present, else
/// the CPU (logging one line saying why); kCuda without a device or without CUDA in the build
/// throws InputError. `threads` is the CPU BLAS thread count (0 = leave OpenBLAS's default).
/// `device`: the CUDA backend runs on visible device `device` modulo their count (a peer passes
/// its rank: one peer per device, round robin; CUDA_VISIBLE_DEVICES says which are visible).
std::unique_ptr<Backend> make_backend(BackendChoice choice, int threads = 1,
                                      bool log_choice = true, int device = 0);

/// The CUDA backend's GEMM for train.precision: cublas (fp32), cublas_tf32 or cublas_bf16 (the
/// plugin's own table, src/compute/cuda/cuda_backend.cu, holds the same names).
std::string cuda_gemm_name(Precision precision);

/// train.conv on `backend`, before any layer is built: InputError saying why when it cannot run
/// there (cudnn on the CPU, or where cuDNN does not load).
void use_conv(Backend& backend, ConvEngine engine);
/// What runs a backend's convolutions, for summaries: "cudnn 9.19.0" or "im2col".
std::string conv_name(const Backend& backend);

/// The CPU backend directly (tests, references).
std::unique_ptr<Backend> make_cpu_backend(int threads = 1);

/// Number of CUDA devices usable by this build (0 when built without CUDA or none present).
int cuda_device_count();
/// Why `choice` cannot run here ("" when it can): "cuda was asked for but ..." with no device,
/// or in a build without the CUDA backend. What make_backend throws, asked before anything
/// starts (gossip run).
std::string backend_refusal(BackendChoice choice);
/// Why train.conv `engine` cannot run where `choice` puts the peers ("" when it can): cudnn on
/// the CPU or where cuDNN does not load. Asked before anything starts (gossip run).
std::string conv_refusal(BackendChoice choice, ConvEngine engine);
/// Why train.graphs `mode` cannot run where `choice` puts the peers ("" when it can): step
/// anywhere but the CUDA backend. Asked before anything starts (gossip run).
std::string graphs_refusal(BackendChoice choice, GraphMode mode);
/// Why train.precision cannot run on the GPU `choice` puts the peers on ("" when it can, and
/// for the CPU, whose GEMM choice refuses what it cannot run): tf32 and bf16 need compute
/// capability 8.0.
std::string precision_refusal(BackendChoice choice, Precision precision);
/// One line on the CUDA backend for `gossip --version`: not built; or built, and whether its
/// plugin loads (it is loaded here even without a driver, to check it) and what it sees.
std::string cuda_plugin_check();

/// OpenBLAS's kernel name (openblas_get_corename()), for benchmark and log lines.
std::string blas_core_name();

// ---- which GEMM the CPU backend runs (docs/config.md, train.gemm) ------------------------------

/// The CPU backend's GEMMs in this build, in the order they are timed: "openblas" (OpenBLAS, its
/// kernel from a table of CPU models) and "onednn" (oneDNN, JIT code for the CPU's ISA features).
/// make_cpu_backend starts with "openblas".
std::vector<std::string> cpu_gemm_names();

/// What decides the GEMM: `requested` is train.gemm (auto or a name; `requested_by` says where it
/// came from otherwise, e.g. a benchmark's --gemm); `env` is GOSSIP_GEMM's
/// value (empty: unset), used when `requested` is auto; `cache_dir` holds the choices measured
/// on this machine ("" for no cache); `threads` is the backend's thread count (part of the key).
struct GemmRequest {
  std::string requested = "auto";
  std::string env;
  std::string cache_dir;
  int threads = 1;
  std::string requested_by = "train.gemm";  // where `requested` came from, for messages
  // train.precision: bf16 runs oneDNN's bf16 matmul (onednn_bf16) whatever train.gemm says
  // (auto or onednn), on a CPU with AVX512-BF16 or AMX; fp32 chooses as above.
  Precision precision = Precision::kFp32;
};

/// The request of a run: train.gemm, this process's GOSSIP_GEMM, gemm_cache_dir() and
/// train.precision.
GemmRequest gemm_request(const std::string& train_gemm, int threads,
                         Precision precision = Precision::kFp32);
/// $XDG_CACHE_HOME/gossip, else $HOME/.cache/gossip, else "" (none).
std::string gemm_cache_dir();

/// The GEMM chosen and why: `source` is "train.gemm", "GOSSIP_GEMM", "cached", "measured", "the
/// only candidate", or the device backend's own.
struct GemmChoice {
  std::string name;
  std::string source;
  /// "GEMM onednn (measured)", for a peer's first line.
  std::string line() const;
};

/// Chooses `backend`'s GEMM and makes it run. An explicit train.gemm wins, then GOSSIP_GEMM;
/// for auto, the cache file for this CPU (model and feature flags), thread count, candidates and
/// `shapes`, else every candidate is timed over `shapes` (the model's step: a few milliseconds)
/// and the fastest is kept and cached. A cache file that does not read as one is ignored with a
/// warning on stderr. Throws InputError naming train.gemm or GOSSIP_GEMM and the choices for an
/// unknown name. A device backend keeps its one GEMM. With request.precision bf16 the CPU runs
/// onednn_bf16; InputError when the backend is a device's, train.gemm names another GEMM, or the
/// CPU has no bf16 instructions.
GemmChoice choose_gemm(Backend& backend, const GemmRequest& request,
                       const std::vector<RowMajorGemm>& shapes);

/// Seconds of the best of `reps` passes over `shapes` (after a warm-up pass) and the flops of a
/// pass.
struct GemmTiming {
  std::string name;
  double seconds = 0.0;
  double flops = 0.0;
};
/// Times every GEMM of `backend` over `shapes`; leaves its GEMM as it was.
std::vector<GemmTiming> time_gemms(Backend& backend, const std::vector<RowMajorGemm>& shapes,
                                   int reps);

}  // namespace gossip
