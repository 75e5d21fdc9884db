// compute/cuda/cudnn_conv.cuh: convolutions through cuDNN for the CUDA backend, forward and both
// backward passes, at the backend's precision. cuDNN is loaded at run time (dlopen of
// libcudnn.so.9, or the file GOSSIP_CUDNN names), so the plugin loads without it and the layers
// fall back to im2col + GEMM, saying why. Included only by .cu files.
#pragma once
#if !defined(GOSSIP_ROOM_COMPUTE)
#error "src/compute/cuda/cudnn_conv.cuh belongs to room compute, which this room does not use (see the room table in meson.build)"
#endif

#include <cuda_runtime.h>

#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "gossip/layer_math.hpp"

namespace gossip::cuda {

/// How products run: strict fp32 (FMA only), TF32 tensor cores on fp32 data, or bf16 operands
/// (converted on the device) with fp32 accumulation.
enum class MathMode { kStrict, kTf32, kBf16 };

/// cuDNN's version as "9.19.0" when it loads here, else empty with `why` set (the same answer
/// for the whole process: the library is loaded once).
std::string cudnn_version(std::string* why = nullptr);

/// A growable device buffer (grows, never shrinks; freed with its owner). An outgrown buffer is
/// kept until then too: queued work, or a CUDA graph captured with it, may still use it.
class DeviceScratch {
 public:
  DeviceScratch() = default;
  DeviceScratch(const DeviceScratch&) = delete;
  DeviceScratch& operator=(const DeviceScratch&) = delete;
  ~DeviceScratch();
  void* get(std::size_t bytes);

 private:
  void* p_ = nullptr;
  std::size_t bytes_ = 0;
  std::vector<void*> retired_;
};

/// The convolutions of one backend: its cuDNN handle on the backend's stream, the algorithms
/// chosen once per shape and precision (cuDNN's heuristic ranking, the first deterministic one
/// whose workspace fits 256 MiB, so a run repeats bit for bit), the workspace they share, and
/// bf16 copies of the operands.
class CudnnConv {
 public:
  /// Throws RuntimeError when cuDNN is not loaded (check cudnn_version() first).
  explicit CudnnConv(cudaStream_t stream);
  ~CudnnConv();
  CudnnConv(const CudnnConv&) = delete;
  CudnnConv& operator=(const CudnnConv&) = delete;

  /// y = act(conv(x, w) + bias), NCHW, W [oc, c, k, k].
  void forward(const float* x, const float* w, const float* bias, const ConvGeom& g, int rows,
               bool relu, MathMode math, float* y);
  /// dw = conv's weight gradient, db = per-channel sums of dy, dx (when not null) = the input's
  /// gradient. dy is the gradient after the activation's backward.
  void backward(const float* x, const float* w, const float* dy, const ConvGeom& g, int rows,
                MathMode math, float* dw, float* db, float* dx);

 private:
  struct Plan;
  Plan& plan(const ConvGeom& g, int rows, MathMode math);
  void* workspace(std::size_t bytes);

  cudaStream_t stream_;
  void* handle_ = nullptr;  // cudnnHandle_t
  using Key = std::tuple<int, int, int, int, int, int, int, int, int>;
  std::map<Key, std::unique_ptr<Plan>> plans_;
  DeviceScratch workspace_, x16_, w16_, y16_, dx16_;
};

}  // namespace gossip::cuda
