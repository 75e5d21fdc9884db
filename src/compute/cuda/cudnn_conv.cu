// compute/cuda/cudnn_conv.cu: convolutions through cuDNN (see cudnn_conv.cuh).
//
// cuDNN's legacy convolution API (cudnnConvolutionForward / BackwardData / BackwardFilter) on
// NCHW tensors with PyTorch's filter layout, which is also ours. The functions are looked up in
// libcudnn.so.9 at run time; nothing here links cuDNN. The bias and ReLU are one kernel after
// the convolution (reading bf16 directly at that precision); the bias gradient is a per-channel
// block sum, as batch norm's.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <dlfcn.h>

#include <cstdlib>
#include <mutex>
#include <string>

#include "gossip/core.hpp"
#include "gossip/math.hpp"
#include "src/compute/cuda/cudnn_conv.cuh"
#include "src/compute/cuda/launch.cuh"
#include "src/compute/cuda/layer_kernels.cuh"

namespace gossip::cuda {
namespace {

using I64 = long long;

#define GOSSIP_CUDNN_FUNCTIONS(X)                                                                \
  X(cudnnGetVersion) X(cudnnGetErrorString) X(cudnnCreate) X(cudnnDestroy) X(cudnnSetStream)     \
  X(cudnnCreateTensorDescriptor) X(cudnnDestroyTensorDescriptor) X(cudnnSetTensor4dDescriptor)   \
  X(cudnnCreateFilterDescriptor) X(cudnnDestroyFilterDescriptor) X(cudnnSetFilter4dDescriptor)   \
  X(cudnnCreateConvolutionDescriptor) X(cudnnDestroyConvolutionDescriptor)                       \
  X(cudnnSetConvolution2dDescriptor) X(cudnnSetConvolutionMathType)                              \
  X(cudnnGetConvolutionForwardAlgorithm_v7) X(cudnnGetConvolutionBackwardDataAlgorithm_v7)       \
  X(cudnnGetConvolutionBackwardFilterAlgorithm_v7) X(cudnnConvolutionForward)                    \
  X(cudnnConvolutionBackwardData) X(cudnnConvolutionBackwardFilter)

/// cuDNN's functions, looked up once per process.
struct CudnnApi {
#define GOSSIP_CUDNN_POINTER(f) decltype(&::f) f = nullptr;
  GOSSIP_CUDNN_FUNCTIONS(GOSSIP_CUDNN_POINTER)
#undef GOSSIP_CUDNN_POINTER
  std::string version;  // "9.19.0" when loaded
  std::string why;      // why not, otherwise
};

CudnnApi load_cudnn() {
  CudnnApi api;
  const char* env = std::getenv("GOSSIP_CUDNN");
  const std::string file = env != nullptr && *env != '\0' ? env : "libcudnn.so.9";
  void* lib = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    api.why = cat("cuDNN not found (", dlerror(), ")");
    return api;
  }
  std::string missing;
#define GOSSIP_CUDNN_LOOKUP(f)                                              \
  api.f = reinterpret_cast<decltype(&::f)>(dlsym(lib, #f));               \
  if (api.f == nullptr) missing += cat(missing.empty() ? "" : ", ", #f);
  GOSSIP_CUDNN_FUNCTIONS(GOSSIP_CUDNN_LOOKUP)
#undef GOSSIP_CUDNN_LOOKUP
  if (!missing.empty()) {
    api = CudnnApi{};
    api.why = cat(file, " lacks ", missing);
    return api;
  }
  const std::size_t v = api.cudnnGetVersion();
  if (v < 90000) {
    api = CudnnApi{};
    api.why = cat(file, " is cuDNN ", v, "; version 9 is required");
    return api;
  }
  api.version = cat(v / 10000, ".", v / 100 % 100, ".", v % 100);
  return api;
}

const CudnnApi& api() {
  static const CudnnApi a = load_cudnn();
  return a;
}

void check_cudnn(cudnnStatus_t st, const char* call) {
  if (st != CUDNN_STATUS_SUCCESS)
    throw RuntimeError(cat("cuDNN ", call, ": ", api().cudnnGetErrorString(st)));
}
#define GOSSIP_CUDNN(call, ...) check_cudnn(api().call(__VA_ARGS__), #call)

cudnnHandle_t as_handle(void* h) { return static_cast<cudnnHandle_t>(h); }

// ---- kernels --------------------------------------------------------------------------------

__device__ float to_float(float v) { return v; }
__device__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }

/// y[i] = act(t[i] + bias[channel of i]) for an NCHW [rows, oc, positions] tensor.
template <class T>
__global__ void channel_bias_act_kernel(const T* t, const float* bias, int oc, int positions,
                                        I64 n, bool relu, float* y) {
  GOSSIP_GRID_STRIDE(i, n)
    y[i] = math::bias_act(to_float(t[i]), bias[(i / positions) % oc], relu);
}

__global__ void to_bf16_kernel(const float* in, __nv_bfloat16* out, I64 n) {
  GOSSIP_GRID_STRIDE(i, n) out[i] = __float2bfloat16_rn(in[i]);
}

__global__ void from_bf16_kernel(const __nv_bfloat16* in, float* out, I64 n) {
  GOSSIP_GRID_STRIDE(i, n) out[i] = __bfloat162float(in[i]);
}

__nv_bfloat16* to_bf16(cudaStream_t s, const float* in, I64 n, DeviceScratch& into) {
  auto* out = static_cast<__nv_bfloat16*>(into.get(static_cast<std::size_t>(n) * 2));
  to_bf16_kernel<<<grid_for(n), kThreads, 0, s>>>(in, out, n);
  check_launch("to_bf16");
  return out;
}

void from_bf16(cudaStream_t s, const void* in, I64 n, float* out) {
  from_bf16_kernel<<<grid_for(n), kThreads, 0, s>>>(static_cast<const __nv_bfloat16*>(in), out,
                                                     n);
  check_launch("from_bf16");
}

constexpr std::size_t kMaxWorkspace = std::size_t{256} << 20;

/// The first of cuDNN's ranked algorithms that ran, is deterministic and fits the workspace cap
/// (or, when none is deterministic, the first that ran and fits).
template <class Perf>
const Perf& pick(const Perf* perf, int count, const char* what) {
  const Perf* fallback = nullptr;
  for (int i = 0; i < count; ++i) {
    if (perf[i].status != CUDNN_STATUS_SUCCESS || perf[i].memory > kMaxWorkspace) continue;
    if (perf[i].determinism == CUDNN_DETERMINISTIC) return perf[i];
    if (fallback == nullptr) fallback = &perf[i];
  }
  if (fallback == nullptr) throw RuntimeError(cat("cuDNN offers no ", what, " algorithm"));
  return *fallback;
}

/// One pass's choice (pick) taken: its algorithm, its workspace, and its math type on `desc`.
template <class Perf, class Algo>
void adopt(const Perf* perf, int count, const char* what, cudnnConvolutionDescriptor_t desc,
           Algo& algo, std::size_t& bytes) {
  const Perf& p = pick(perf, count, what);
  algo = p.algo;
  bytes = p.memory;
  GOSSIP_CUDNN(cudnnSetConvolutionMathType, desc, p.mathType);
}

}  // namespace

std::string cudnn_version(std::string* why) {
  if (why != nullptr) *why = api().why;
  return api().version;
}

DeviceScratch::~DeviceScratch() {
  for (void* p : retired_) cudaFree(p);
  cudaFree(p_);
}

void* DeviceScratch::get(std::size_t bytes) {
  if (bytes <= bytes_) return p_;
  void* grown = nullptr;
  const cudaError_t err = cudaMalloc(&grown, bytes);
  if (err != cudaSuccess)
    throw RuntimeError(cat("cudaMalloc of ", bytes, " bytes: ", cudaGetErrorString(err)));
  if (p_ != nullptr) retired_.push_back(p_);  // queued work or a graph may still use it
  p_ = grown;
  bytes_ = bytes;
  return p_;
}

/// One shape at one precision: its descriptors and the algorithm of each pass.
struct CudnnConv::Plan {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t fwd = nullptr, bwd_data = nullptr, bwd_filter = nullptr;
  cudnnConvolutionFwdAlgo_t fwd_algo{};
  cudnnConvolutionBwdDataAlgo_t data_algo{};
  cudnnConvolutionBwdFilterAlgo_t filter_algo{};
  std::size_t fwd_bytes = 0, data_bytes = 0, filter_bytes = 0;

  ~Plan() {
    const CudnnApi& a = api();
    a.cudnnDestroyTensorDescriptor(x);
    a.cudnnDestroyTensorDescriptor(y);
    a.cudnnDestroyFilterDescriptor(w);
    a.cudnnDestroyConvolutionDescriptor(fwd);
    a.cudnnDestroyConvolutionDescriptor(bwd_data);
    a.cudnnDestroyConvolutionDescriptor(bwd_filter);
  }
};

CudnnConv::CudnnConv(cudaStream_t stream) : stream_(stream) {
  if (api().version.empty()) throw RuntimeError(api().why);
  cudnnHandle_t h = nullptr;
  GOSSIP_CUDNN(cudnnCreate, &h);
  handle_ = h;
  GOSSIP_CUDNN(cudnnSetStream, h, stream_);
}

CudnnConv::~CudnnConv() {
  plans_.clear();
  if (handle_ != nullptr) api().cudnnDestroy(as_handle(handle_));
}

void* CudnnConv::workspace(std::size_t bytes) {
  return bytes == 0 ? nullptr : workspace_.get(bytes);
}

CudnnConv::Plan& CudnnConv::plan(const ConvGeom& g, int rows, MathMode math) {
  const Key key{g.c, g.h, g.w, g.oc, g.k, g.stride, g.pad, rows, static_cast<int>(math)};
  if (auto it = plans_.find(key); it != plans_.end()) return *it->second;
  auto p = std::make_unique<Plan>();
  const cudnnDataType_t data = math == MathMode::kBf16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT;
  const cudnnMathType_t want = math == MathMode::kStrict ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH;
  GOSSIP_CUDNN(cudnnCreateTensorDescriptor, &p->x);
  GOSSIP_CUDNN(cudnnCreateTensorDescriptor, &p->y);
  GOSSIP_CUDNN(cudnnCreateFilterDescriptor, &p->w);
  GOSSIP_CUDNN(cudnnSetTensor4dDescriptor, p->x, CUDNN_TENSOR_NCHW, data, rows, g.c, g.h, g.w);
  GOSSIP_CUDNN(cudnnSetTensor4dDescriptor, p->y, CUDNN_TENSOR_NCHW, data, rows, g.oc, g.oh, g.ow);
  GOSSIP_CUDNN(cudnnSetFilter4dDescriptor, p->w, data, CUDNN_TENSOR_NCHW, g.oc, g.c, g.k, g.k);
  for (cudnnConvolutionDescriptor_t* d : {&p->fwd, &p->bwd_data, &p->bwd_filter}) {
    GOSSIP_CUDNN(cudnnCreateConvolutionDescriptor, d);
    GOSSIP_CUDNN(cudnnSetConvolution2dDescriptor, *d, g.pad, g.pad, g.stride, g.stride, 1, 1,
                 CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT);
    GOSSIP_CUDNN(cudnnSetConvolutionMathType, *d, want);
  }
  cudnnHandle_t h = as_handle(handle_);
  int n = 0;
  cudnnConvolutionFwdAlgoPerf_t fwd[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
  GOSSIP_CUDNN(cudnnGetConvolutionForwardAlgorithm_v7, h, p->x, p->w, p->fwd, p->y,
               CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &n, fwd);
  adopt(fwd, n, "forward", p->fwd, p->fwd_algo, p->fwd_bytes);
  cudnnConvolutionBwdDataAlgoPerf_t bd[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
  GOSSIP_CUDNN(cudnnGetConvolutionBackwardDataAlgorithm_v7, h, p->w, p->y, p->bwd_data, p->x,
               CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &n, bd);
  adopt(bd, n, "backward data", p->bwd_data, p->data_algo, p->data_bytes);
  cudnnConvolutionBwdFilterAlgoPerf_t bf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
  GOSSIP_CUDNN(cudnnGetConvolutionBackwardFilterAlgorithm_v7, h, p->x, p->y, p->bwd_filter,
               p->w, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &n, bf);
  adopt(bf, n, "backward filter", p->bwd_filter, p->filter_algo, p->filter_bytes);
  return *plans_.emplace(key, std::move(p)).first->second;
}

void CudnnConv::forward(const float* x, const float* w, const float* bias, const ConvGeom& g,
                        int rows, bool relu, MathMode math, float* y) {
  Plan& p = plan(g, rows, math);
  const float one = 1.0f, zero = 0.0f;
  const I64 n_out = static_cast<I64>(rows) * g.oc * g.positions();
  const I64 n_in = static_cast<I64>(rows) * g.c * g.h * g.w;
  const I64 n_w = static_cast<I64>(g.oc) * g.patch();
  void* ws = workspace(p.fwd_bytes);
  if (math == MathMode::kBf16) {
    const auto* x16 = to_bf16(stream_, x, n_in, x16_);
    const auto* w16 = to_bf16(stream_, w, n_w, w16_);
    void* y16 = y16_.get(static_cast<std::size_t>(n_out) * 2);
    GOSSIP_CUDNN(cudnnConvolutionForward, as_handle(handle_), &one, p.x, x16, p.w, w16, p.fwd,
                 p.fwd_algo, ws, p.fwd_bytes, &zero, p.y, y16);
    channel_bias_act_kernel<<<grid_for(n_out), kThreads, 0, stream_>>>(
        static_cast<const __nv_bfloat16*>(y16), bias, g.oc, g.positions(), n_out, relu, y);
  } else {
    GOSSIP_CUDNN(cudnnConvolutionForward, as_handle(handle_), &one, p.x, x, p.w, w, p.fwd,
                 p.fwd_algo, ws, p.fwd_bytes, &zero, p.y, y);
    channel_bias_act_kernel<<<grid_for(n_out), kThreads, 0, stream_>>>(y, bias, g.oc,
                                                                       g.positions(), n_out,
                                                                       relu, y);
  }
  check_launch("channel_bias_act");
}

void CudnnConv::backward(const float* x, const float* w, const float* dy, const ConvGeom& g,
                         int rows, MathMode math, float* dw, float* db, float* dx) {
  Plan& p = plan(g, rows, math);
  const float one = 1.0f, zero = 0.0f;
  const I64 n_out = static_cast<I64>(rows) * g.oc * g.positions();
  const I64 n_in = static_cast<I64>(rows) * g.c * g.h * g.w;
  const I64 n_w = static_cast<I64>(g.oc) * g.patch();
  launch_channel_sums(stream_, dy, rows, g.oc, g.positions(), false, db);
  cudnnHandle_t h = as_handle(handle_);
  if (math == MathMode::kBf16) {
    const auto* dy16 = to_bf16(stream_, dy, n_out, y16_);
    const auto* x16 = to_bf16(stream_, x, n_in, x16_);
    void* out16 = dx16_.get(static_cast<std::size_t>(std::max(n_in, n_w)) * 2);
    GOSSIP_CUDNN(cudnnConvolutionBackwardFilter, h, &one, p.x, x16, p.y, dy16, p.bwd_filter,
                 p.filter_algo, workspace(p.filter_bytes), p.filter_bytes, &zero, p.w, out16);
    from_bf16(stream_, out16, n_w, dw);
    if (dx != nullptr) {
      const auto* w16 = to_bf16(stream_, w, n_w, w16_);
      GOSSIP_CUDNN(cudnnConvolutionBackwardData, h, &one, p.w, w16, p.y, dy16, p.bwd_data,
                   p.data_algo, workspace(p.data_bytes), p.data_bytes, &zero, p.x, out16);
      from_bf16(stream_, out16, n_in, dx);
    }
    return;
  }
  GOSSIP_CUDNN(cudnnConvolutionBackwardFilter, h, &one, p.x, x, p.y, dy, p.bwd_filter,
               p.filter_algo, workspace(p.filter_bytes), p.filter_bytes, &zero, p.w, dw);
  if (dx != nullptr)
    GOSSIP_CUDNN(cudnnConvolutionBackwardData, h, &one, p.w, w, p.y, dy, p.bwd_data, p.data_algo,
                 workspace(p.data_bytes), p.data_bytes, &zero, p.x, dx);
}

}  // namespace gossip::cuda
