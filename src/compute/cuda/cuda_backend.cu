// compute/cuda/cuda_backend.cu: the CUDA backend.
//
// What it computes: exactly what the CPU backend computes — the element-wise math comes from the
// same gossip::math functions (include/gossip/math.hpp), GEMM from the same row-major descriptor
// mapped by to_column_major() onto cublasSgemm. The CPU backend is the reference; tests tagged
// [cuda] compare the two when a device is present.
//
// Layout: what the class needs (status checks, the GEMM table, page-locked memory, a captured
// graph), then the Backend class, a section per part: the device (streams, copies, page-locked
// memory, graphs) and GEMM (cuBLAS) written here; the layer kernels and the gossip kernels calling
// the launchers of layer_kernels.cu (cuDNN's convolutions: cudnn_conv.cu), gossip_kernels.cu and
// robust_kernels.cu on the backend's stream; then the factory and the plugin's entry points. One
// class rather than a class per part: the parts share the stream, a graph's capture reads the
// softmax's buffers, and cuDNN runs at the GEMM's precision.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <mutex>
#include <new>
#include <unordered_set>
#include <vector>

#include "src/compute/cuda/cuda_backend.hpp"
#include "src/compute/cuda/cudnn_conv.cuh"
#include "src/compute/cuda/gossip_kernels.cuh"
#include "src/compute/cuda/layer_kernels.cuh"
#include "src/compute/cuda/robust_kernels.cuh"
#include "gossip/core.hpp"

namespace gossip::cuda {
namespace {

/// Turns a failed CUDA runtime or cuBLAS status into the project's check error, naming the call.
void check_status(bool ok, const char* file, int line, const char* call, const std::string& why) {
  if (!ok) ::gossip::detail::throw_check(file, line, ::gossip::cat(call, ": ", why));
}

}  // namespace
}  // namespace gossip::cuda

#define GOSSIP_CUDA_CHECK(call)                                                            \
  do {                                                                                     \
    const cudaError_t err_ = (call);                                                       \
    ::gossip::cuda::check_status(err_ == cudaSuccess, __FILE__, __LINE__, #call,            \
                                 err_ == cudaSuccess ? "" : cudaGetErrorString(err_));     \
  } while (0)
#define GOSSIP_CUBLAS_CHECK(call)                                                          \
  do {                                                                                     \
    const cublasStatus_t st_ = (call);                                                     \
    ::gossip::cuda::check_status(st_ == CUBLAS_STATUS_SUCCESS, __FILE__, __LINE__, #call,   \
                                 st_ == CUBLAS_STATUS_SUCCESS ? std::string()              \
                                     : ::gossip::cat("cuBLAS status ", int(st_)));          \
  } while (0)

namespace gossip::cuda {
namespace {

// ---- the backend --------------------------------------------------------------------------

/// The CUDA backend's GEMMs by name (train.precision picks one) and the products they run.
struct GemmRow {
  const char* name;
  MathMode mode;
};
constexpr std::size_t kBlasWorkspace = std::size_t{32} << 20;

constexpr GemmRow kGemms[] = {{"cublas", MathMode::kStrict},
                              {"cublas_tf32", MathMode::kTf32},
                              {"cublas_bf16", MathMode::kBf16}};

/// Page-locked host memory from cudaMallocHost on one device (any thread may ask: the device is
/// set first, so no thread makes a context on another GPU), plain memory where CUDA will not
/// lock more; release() tells the two apart. Every buffer goes back before it is destroyed.
class PinnedMemory final : public HostMemory {
 public:
  explicit PinnedMemory(int device) : device_(device) {}
  void* allocate(std::size_t bytes) override {
    void* p = nullptr;
    if (cudaSetDevice(device_) == cudaSuccess && cudaMallocHost(&p, bytes) == cudaSuccess) {
      std::lock_guard lk(mu_);
      locked_.insert(p);
      return p;
    }
    cudaGetLastError();  // not sticky: clear it
    return ::operator new(bytes);
  }
  void release(void* p) noexcept override {
    if (p == nullptr) return;
    bool locked = false;
    {
      std::lock_guard lk(mu_);
      locked = locked_.erase(p) > 0;
    }
    if (locked) cudaFreeHost(p);
    else ::operator delete(p);
  }

 private:
  int device_;
  std::mutex mu_;
  std::unordered_set<void*> locked_;
};

/// The loss and correct count of `rows` rows from a softmax's per-row buffers (device memory),
/// read on `stream` after the work queued there.
std::pair<double, std::int64_t> read_softmax(cudaStream_t stream, const float* row_loss,
                                             const int* row_correct, int rows) {
  std::vector<float> loss(rows);
  std::vector<int> correct(rows);
  GOSSIP_CUDA_CHECK(cudaMemcpyAsync(loss.data(), row_loss, rows * sizeof(float),
                                    cudaMemcpyDeviceToHost, stream));
  GOSSIP_CUDA_CHECK(cudaMemcpyAsync(correct.data(), row_correct, rows * sizeof(int),
                                    cudaMemcpyDeviceToHost, stream));
  GOSSIP_CUDA_CHECK(cudaStreamSynchronize(stream));
  double total = 0.0;
  std::int64_t right = 0;
  for (int r = 0; r < rows; ++r) {
    total += loss[r];
    right += correct[r];
  }
  return {total / rows, right};
}

/// A captured step: its executable graph, launched on the backend's stream, and where its
/// softmax writes each row's loss (buffers the backend keeps for its lifetime).
class CudaGraph final : public StepGraph {
 public:
  CudaGraph(cudaStream_t stream, cudaGraph_t graph, cudaGraphExec_t exec, const float* row_loss,
            const int* row_correct, int rows)
      : stream_(stream), graph_(graph), exec_(exec), row_loss_(row_loss),
        row_correct_(row_correct), rows_(rows) {}
  ~CudaGraph() override {
    cudaGraphExecDestroy(exec_);
    cudaGraphDestroy(graph_);
  }
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;

  std::string replay() override {
    const cudaError_t e = cudaGraphLaunch(exec_, stream_);
    return e == cudaSuccess ? "" : cat("cudaGraphLaunch: ", cudaGetErrorString(e));
  }
  std::pair<double, std::int64_t> softmax_result() override {
    if (rows_ == 0) return {0.0, 0};  // it recorded no softmax
    return read_softmax(stream_, row_loss_, row_correct_, rows_);
  }

 private:
  cudaStream_t stream_;
  cudaGraph_t graph_;
  cudaGraphExec_t exec_;
  const float* row_loss_;
  const int* row_correct_;
  int rows_;
};

class CudaBackend final : public Backend {
 public:
  /// On visible device `device` modulo their count (CUDA_VISIBLE_DEVICES numbers them).
  explicit CudaBackend(int device) {
    device_ = device % std::max(1, device_count());
    GOSSIP_CUDA_CHECK(cudaSetDevice(device_));
    // Non-blocking: the peers of one process (train.peers_per_process) each have a stream, and
    // none of them waits for work another thread puts on the legacy default stream (a library's
    // synchronous call); this backend never uses that stream itself.
    GOSSIP_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    GOSSIP_CUBLAS_CHECK(cublasCreate(&blas_));
    GOSSIP_CUBLAS_CHECK(cublasSetStream(blas_, stream_));
    // cuBLAS's workspace is the backend's (32 MiB, what Hopper's kernels ask for at most), so a
    // GEMM in a graph capture (train.graphs: step) allocates nothing.
    GOSSIP_CUDA_CHECK(cudaMalloc(&blas_workspace_, kBlasWorkspace));
    GOSSIP_CUBLAS_CHECK(cublasSetWorkspace(blas_, blas_workspace_, kBlasWorkspace));
    cudaDeviceProp prop{};
    GOSSIP_CUDA_CHECK(cudaGetDeviceProperties(&prop, device_));
    device_name_ = prop.name;
    capability_ = prop.major * 10 + prop.minor;
    have_cudnn_ = !cudnn_version(&cudnn_why_).empty();  // its handle waits for a convolution
    pinned_memory_ = std::make_unique<PinnedMemory>(device_);
  }
  ~CudaBackend() override {
    conv_.reset();
    for (void* p : pinned_) cudaHostUnregister(p);
    cudaFree(scratch_loss_);
    cudaFree(scratch_correct_);
    cudaFree(scratch_partial_);
    for (void* p : retired_) cudaFree(p);
    cublasDestroy(blas_);
    cudaFree(blas_workspace_);
    if (copy_stream_ != nullptr) {
      cudaStreamSynchronize(copy_stream_);
      cudaEventDestroy(queued_);
      cudaEventDestroy(copied_);
      cudaStreamDestroy(copy_stream_);
    }
    cudaStreamDestroy(stream_);
  }

  std::string name() const override { return "cuda"; }
  std::string describe() const override {
    return cat("cuda (device ", device_, ": ", device_name_, ", cuBLAS, ", conv_line(), ")");
  }

  // ---- the device: cudaMalloc'ed memory, copies on the backend's stream -----------------------
  bool host_memory() const override { return false; }
  void* allocate(std::size_t bytes) override {
    void* p = nullptr;
    GOSSIP_CUDA_CHECK(cudaMalloc(&p, bytes));
    return p;
  }
  void release(void* p) noexcept override { cudaFree(p); }
  void upload(void* dst, const void* src, std::size_t bytes) override {
    GOSSIP_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_));
    GOSSIP_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }
  void download(void* dst, const void* src, std::size_t bytes) override {
    GOSSIP_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_));
    GOSSIP_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }
  void synchronize() override { GOSSIP_CUDA_CHECK(cudaStreamSynchronize(stream_)); }
  void upload_async(void* dst, const void* src, std::size_t bytes) override {
    GOSSIP_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_));
  }
  void copy(void* dst, const void* src, std::size_t bytes) override {
    GOSSIP_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_));
  }
  /// On a side stream of its own (made at the first call), after an event on the compute
  /// stream, so the next step's kernels run while the copy engine moves the bytes.
  void download_async(void* dst, const void* src, std::size_t bytes) override {
    if (copy_stream_ == nullptr) {
      GOSSIP_CUDA_CHECK(cudaStreamCreateWithFlags(&copy_stream_, cudaStreamNonBlocking));
      GOSSIP_CUDA_CHECK(cudaEventCreateWithFlags(&queued_, cudaEventDisableTiming));
      GOSSIP_CUDA_CHECK(cudaEventCreateWithFlags(&copied_, cudaEventDisableTiming));
    }
    GOSSIP_CUDA_CHECK(cudaEventRecord(queued_, stream_));
    GOSSIP_CUDA_CHECK(cudaStreamWaitEvent(copy_stream_, queued_, 0));
    GOSSIP_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, copy_stream_));
    GOSSIP_CUDA_CHECK(cudaEventRecord(copied_, copy_stream_));
  }
  void wait_downloads() override {
    if (copy_stream_ != nullptr) GOSSIP_CUDA_CHECK(cudaEventSynchronize(copied_));
  }
  /// Page-locks a host buffer the peer copies to and from every round, so those copies go by
  /// DMA instead of through the driver's staging buffer. Best effort: a refusal leaves it
  /// pageable.
  void pin_host(void* p, std::size_t bytes) override {
    if (p == nullptr || bytes == 0) return;
    if (cudaHostRegister(p, bytes, cudaHostRegisterDefault) == cudaSuccess) pinned_.push_back(p);
    else cudaGetLastError();
  }
  HostMemory* pinned_memory() override { return pinned_memory_.get(); }

  std::string capture_begin() override {
    if (capturing_) return "a capture is under way already";
    const cudaError_t e = cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal);
    if (e != cudaSuccess) return cat("cudaStreamBeginCapture: ", cudaGetErrorString(e));
    capturing_ = true;
    captured_rows_ = 0;
    return "";
  }
  std::unique_ptr<StepGraph> capture_end(std::string& why) override {
    if (!capturing_) {
      why = "capture_end without capture_begin";
      return nullptr;
    }
    capturing_ = false;
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    cudaError_t e = cudaStreamEndCapture(stream_, &graph);
    if (e == cudaSuccess) e = cudaGraphInstantiate(&exec, graph, 0);
    if (e == cudaSuccess) {
      why.clear();
      return std::make_unique<CudaGraph>(stream_, graph, exec, scratch_loss_, scratch_correct_,
                                         captured_rows_);
    }
    why = cat("capturing the step: ", cudaGetErrorString(e));
    cudaGetLastError();  // an invalidated capture's error is not sticky
    if (graph != nullptr) cudaGraphDestroy(graph);
    return nullptr;
  }

  // ---- GEMM: cuBLAS at the precision use_gemm chose -------------------------------------------
  void gemm(const RowMajorGemm& g, const float* a, const float* b, float* c) override {
    const ColumnMajorGemm cm = to_column_major(g);
    const cublasOperation_t ta = cm.trans_first ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t tb = cm.trans_second ? CUBLAS_OP_T : CUBLAS_OP_N;
    if (math_ == MathMode::kBf16) {
      // fp32 operands and result, bf16 tensor-core products, fp32 accumulation.
      GOSSIP_CUBLAS_CHECK(cublasGemmEx(blas_, ta, tb, cm.m, cm.n, cm.k, &cm.alpha, b, CUDA_R_32F,
                                       cm.ld_first, a, CUDA_R_32F, cm.ld_second, &cm.beta, c,
                                       CUDA_R_32F, cm.ldc, CUBLAS_COMPUTE_32F_FAST_16BF,
                                       CUBLAS_GEMM_DEFAULT));
      return;
    }
    GOSSIP_CUBLAS_CHECK(cublasSgemm(blas_, ta, tb, cm.m, cm.n, cm.k, &cm.alpha, b, cm.ld_first, a,
                                    cm.ld_second, &cm.beta, c, cm.ldc));
  }
  std::string gemm_name() const override {
    return std::find_if(std::begin(kGemms), std::end(kGemms),
                        [&](const GemmRow& g) { return g.mode == math_; })->name;
  }
  /// "cublas": strict fp32 products (cuDNN: FMA math only); "cublas_tf32": TF32 tensor-core
  /// products, fp32 storage and accumulation (train.precision: tf32); "cublas_bf16": bf16
  /// products, fp32 accumulation and storage (train.precision: bf16; cuDNN's convolutions take
  /// bf16 copies of their operands). Tensor-core precisions need compute capability 8.0.
  void use_gemm(const std::string& name) override {
    const auto* row = std::find_if(std::begin(kGemms), std::end(kGemms),
                                   [&](const GemmRow& g) { return name == g.name; });
    if (row == std::end(kGemms))
      throw InputError(cat("the CUDA backend's GEMM is cublas (cublas_tf32, cublas_bf16 for "
                           "train.precision tf32, bf16), not '", name, "'"));
    const MathMode m = row->mode;
    if (m != MathMode::kStrict && capability_ < 80)
      throw InputError(cat("train.precision: ", m == MathMode::kTf32 ? "tf32" : "bf16",
                           " needs tensor cores of compute capability 8.0 or later; ",
                           device_name_, " has ", capability_ / 10, ".", capability_ % 10,
                           " (precision: fp32)"));
    math_ = m;
    GOSSIP_CUBLAS_CHECK(cublasSetMathMode(blas_, m == MathMode::kTf32 ? CUBLAS_TF32_TENSOR_OP_MATH
                                                                      : CUBLAS_DEFAULT_MATH));
  }

  // ---- layer kernels: layer_kernels.cu's launchers, cuDNN's convolutions -----------------------
  void bias_act(float* y, const float* bias, int rows, int cols, bool relu) override {
    launch_bias_act(stream_, y, bias, rows, cols, relu);
  }
  void relu_backward(float* dy, const float* y, std::int64_t n) override {
    launch_relu_backward(stream_, dy, y, n);
  }
  void column_sums(const float* dy, int rows, int cols, float* db) override {
    launch_column_sums(stream_, dy, rows, cols, db);
  }
  std::pair<double, std::int64_t> softmax_xent(const float* logits, const std::int32_t* labels,
                                               int rows, int cols, float* grad) override {
    queue_softmax_xent(logits, labels, rows, cols, grad);
    return queued_softmax_result();  // nothing read back while capturing
  }
  void queue_softmax_xent(const float* logits, const std::int32_t* labels, int rows, int cols,
                          float* grad) override {
    ensure_scratch(rows);
    launch_softmax_xent(stream_, logits, labels, rows, cols, grad, scratch_loss_,
                        scratch_correct_);
    queued_rows_ = rows;
    if (capturing_) captured_rows_ = rows;
  }
  std::pair<double, std::int64_t> queued_softmax_result() override {
    if (capturing_ || queued_rows_ == 0) return {0.0, 0};  // a graph reads nothing back
    return read_softmax(stream_, scratch_loss_, scratch_correct_, queued_rows_);
  }

  std::string conv_library() const override {
    return have_cudnn_ && use_cudnn_ ? cat("cudnn ", cudnn_version()) : std::string();
  }
  std::string conv_line() const override {
    if (!conv_library().empty()) return cat("convolutions: ", conv_library());
    return cat("convolutions: im2col + GEMM (",
               have_cudnn_ ? "train.conv: im2col" : cudnn_why_, ")");
  }
  std::string use_conv(ConvEngine engine) override {
    if (engine == ConvEngine::kCudnn && !have_cudnn_)
      return cat("train.conv: cudnn, but ", cudnn_why_,
                 " (put libcudnn.so.9 on the library path or name it in GOSSIP_CUDNN; or "
                 "train.conv: auto or im2col)");
    use_cudnn_ = engine != ConvEngine::kIm2col;
    return {};
  }
  void conv_forward(const float* x, const float* w, const float* bias, const ConvGeom& g,
                    int rows, bool relu, float* y) override {
    cudnn().forward(x, w, bias, g, rows, relu, math_, y);
  }
  void conv_backward(const float* x, const float* w, const float* dy, const ConvGeom& g, int rows,
                     float* dw, float* db, float* dx) override {
    cudnn().backward(x, w, dy, g, rows, math_, dw, db, dx);
  }

  void relu(const float* x, float* y, std::int64_t n) override { launch_relu(stream_, x, y, n); }
  void row_sums(const float* a, int rows, int cols, bool accumulate, float* out) override {
    launch_row_sums(stream_, a, rows, cols, accumulate, out);
  }
  void im2col(const float* x, const ConvGeom& g, int count, float* col) override {
    launch_im2col(stream_, x, g, count, col);
  }
  void col2im(const float* col, const ConvGeom& g, int count, float* dx) override {
    launch_col2im(stream_, col, g, count, dx);
  }
  void conv_output(const float* t, const float* bias, const ConvGeom& g, int count, bool relu,
                   float* y) override {
    launch_conv_output(stream_, t, bias, g, count, relu, y);
  }
  void conv_grad_layout(const float* dy, const ConvGeom& g, int count, float* t) override {
    launch_conv_grad_layout(stream_, dy, g, count, t);
  }
  void pool_forward(const float* x, const PoolGeom& g, int rows, float* y,
                    std::int32_t* arg) override {
    launch_pool_forward(stream_, x, g, rows, y, arg);
  }
  void pool_backward(const float* dy, const std::int32_t* arg, const PoolGeom& g, int rows,
                     float* dx) override {
    launch_pool_backward(stream_, dy, arg, g, rows, dx);
  }
  void group_norm_forward(const float* x, const float* gamma, const float* beta,
                          const GroupNormGeom& g, int rows, float* y, float* mean,
                          float* rstd) override {
    launch_group_norm_forward(stream_, x, gamma, beta, g, rows, y, mean, rstd);
  }
  void group_norm_backward(const float* x, const float* dy, const float* gamma,
                           const float* mean, const float* rstd, const GroupNormGeom& g, int rows,
                           float* dx, float* dgamma, float* dbeta) override {
    launch_group_norm_backward(stream_, x, dy, gamma, mean, rstd, g, rows, dx, dgamma, dbeta);
  }
  void batch_norm_forward(const float* x, const float* gamma, const float* beta,
                          const BatchNormGeom& g, int rows, bool training, float* y, float* mean,
                          float* rstd, float* running_mean, float* running_var) override {
    launch_batch_norm_forward(stream_, x, gamma, beta, g, rows, training, y, mean, rstd,
                              running_mean, running_var);
  }
  void batch_norm_backward(const float* x, const float* dy, const float* gamma,
                           const float* mean, const float* rstd, const BatchNormGeom& g, int rows,
                           float* dx, float* dgamma, float* dbeta) override {
    launch_batch_norm_backward(stream_, x, dy, gamma, mean, rstd, g, rows, dx, dgamma, dbeta);
  }
  void dropout(const float* x, float* y, std::int64_t n, float p, std::uint64_t key) override {
    launch_dropout(stream_, x, y, n, p, key);
  }

  // ---- gossip kernels: gossip_kernels.cu's and robust_kernels.cu's launchers -------------------
  void sgd_update(float* params, float* velocity, const float* grads, std::int64_t n, float lr,
                  float momentum, float weight_decay, bool nesterov) override {
    launch_sgd_update(stream_, params, velocity, grads, n, lr, momentum, weight_decay, nesterov);
  }
  void mix(float* out, const float* const* in, const float* w, int k, std::int64_t n) override {
    launch_mix(stream_, out, in, w, k, n);
  }
  void fill(float* p, float value, std::int64_t n) override { launch_fill(stream_, p, value, n); }
  void choco_difference(const float* x, const float* xhat, float* d, std::int64_t n) override {
    launch_choco_difference(stream_, x, xhat, d, n);
  }
  void choco_step(float* x, const float* s, const float* xhat, float gamma,
                  std::int64_t n) override {
    launch_choco_step(stream_, x, s, xhat, gamma, n);
  }
  void quantize(const float* v, std::int64_t n, int bits, std::int64_t block, std::uint64_t key,
                float* scales, std::int8_t* codes) override {
    launch_quantize(stream_, v, n, bits, block, key, scales, codes);
  }
  void dequantize_add(float* target, float weight, const float* scales, const std::int8_t* codes,
                      std::int64_t n, std::int64_t block, int bits) override {
    launch_dequantize_add(stream_, target, weight, scales, codes, n, block, bits);
  }
  void scatter_add(float* target, float weight, const std::uint32_t* index, const float* values,
                   std::int64_t k) override {
    launch_scatter_add(stream_, target, weight, index, values, k);
  }
  void add_weighted(float* target, float weight, const float* values, std::int64_t n) override {
    launch_add_weighted(stream_, target, weight, values, n);
  }

  void squared_distances(const float* r, const float* const* m, int k, std::int64_t n,
                         double* out) override {
    if (scratch_partial_ == nullptr)
      GOSSIP_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&scratch_partial_),
                                   kDistanceBlocks * kMaxDistances * sizeof(double)));
    std::vector<double> partial(static_cast<std::size_t>(kDistanceBlocks) * kMaxDistances);
    for (int j = 0; j < k; j += kMaxDistances) {
      const int g = std::min(kMaxDistances, k - j);
      launch_squared_distances(stream_, r, m + j, g, n, scratch_partial_);
      download(partial.data(), scratch_partial_,
               static_cast<std::size_t>(kDistanceBlocks) * g * sizeof(double));
      for (int q = 0; q < g; ++q) {
        double sum = 0.0;
        for (int b = 0; b < kDistanceBlocks; ++b) sum += partial[static_cast<std::size_t>(b) * g + q];
        out[j + q] = sum;
      }
    }
  }

 private:
  /// The softmax's per-row buffers for `rows` rows. Outgrown ones are kept until the backend
  /// goes (retired_): a captured graph may still write them.
  void ensure_scratch(int rows) {
    if (rows <= scratch_rows_) return;
    retired_.push_back(scratch_loss_);
    retired_.push_back(scratch_correct_);
    GOSSIP_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&scratch_loss_), rows * sizeof(float)));
    GOSSIP_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&scratch_correct_), rows * sizeof(int)));
    scratch_rows_ = rows;
  }

  /// cuDNN's handle, made at the first convolution (a model without one never pays for it).
  CudnnConv& cudnn() {
    if (!conv_) conv_ = std::make_unique<CudnnConv>(stream_);
    return *conv_;
  }

  int device_ = 0;
  cudaStream_t stream_ = nullptr;
  cudaStream_t copy_stream_ = nullptr;  // download_async's, from its first call
  cudaEvent_t queued_ = nullptr;        // download_async: the work queued before it is done
  cudaEvent_t copied_ = nullptr;        // ... and its copy is
  cublasHandle_t blas_ = nullptr;
  MathMode math_ = MathMode::kStrict;  // use_gemm
  std::string device_name_;
  int capability_ = 0;                // compute capability, major * 10 + minor
  bool have_cudnn_ = false;           // cuDNN loads here (else cudnn_why_ says why)
  std::unique_ptr<CudnnConv> conv_;   // its handle, from the first convolution on
  std::string cudnn_why_;
  std::vector<void*> pinned_;         // pin_host's buffers, unpinned with the backend
  std::unique_ptr<PinnedMemory> pinned_memory_;  // the transport's receive buffers
  bool capturing_ = false;            // between capture_begin and capture_end
  int captured_rows_ = 0;             // rows of the last softmax_xent captured
  int queued_rows_ = 0;               // rows of the last queue_softmax_xent
  std::vector<void*> retired_;        // outgrown scratch, freed with the backend
  void* blas_workspace_ = nullptr;    // cuBLAS's, set once so a capture allocates nothing
  bool use_cudnn_ = true;             // train.conv
  float* scratch_loss_ = nullptr;
  int* scratch_correct_ = nullptr;
  int scratch_rows_ = 0;
  double* scratch_partial_ = nullptr;  // squared_distances: the blocks' shares
};

}  // namespace

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver"/"no device" error
    return 0;
  }
  return n;
}

std::unique_ptr<Backend> make_backend(int device) {
  if (device_count() <= 0) throw RuntimeError("no CUDA device is present");
  return std::make_unique<CudaBackend>(device);
}

}  // namespace gossip::cuda

// The plugin's entry points, looked up by name (dlsym) from compute/backend.cpp.
extern "C" int gossip_cuda_device_count() { return gossip::cuda::device_count(); }
/// cuDNN's version ("9.19.0") into `out` (at most `size` bytes, NUL-terminated), or why it does
/// not load; returns 1 when it loads.
extern "C" int gossip_cuda_cudnn(char* out, int size) {
  std::string why;
  const std::string v = gossip::cuda::cudnn_version(&why);
  std::snprintf(out, static_cast<std::size_t>(size), "%s", v.empty() ? why.c_str() : v.c_str());
  return v.empty() ? 0 : 1;
}
/// Device 0's compute capability as major * 10 + minor (0 without a device).
extern "C" int gossip_cuda_capability() {
  cudaDeviceProp prop{};
  if (gossip::cuda::device_count() <= 0 || cudaGetDeviceProperties(&prop, 0) != cudaSuccess)
    return 0;
  return prop.major * 10 + prop.minor;
}
/// A backend on visible device `device` modulo their count.
extern "C" gossip::Backend* gossip_cuda_make_backend(int device) {
  return gossip::cuda::make_backend(device).release();
}
