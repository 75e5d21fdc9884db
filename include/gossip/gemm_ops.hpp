/// gemm_ops: a Backend's matrix products (gossip/backend.hpp): one row-major descriptor
/// (gossip/gemm.hpp) run by the GEMM the backend has chosen: on the CPU one of several providers
/// (OpenBLAS, oneDNN, BLIS; choose_gemm picks one by measuring), on CUDA cuBLAS at the precision
/// train.precision names. Operands are pointers of the backend's device.
/// Keep this header free of anything nvcc's C++17 mode cannot compile.
#pragma once
#if !defined(GOSSIP_ROOM_COMPUTE)
#error "gossip/gemm_ops.hpp belongs to room compute, which this room does not use (see the room table in meson.build)"
#endif

#include <string>

#include "gossip/backend_device.hpp"
#include "gossip/gemm.hpp"

namespace gossip {

/// The GEMM of a backend, on its device.
class GemmOps : public virtual Device {
 public:
  /// C = alpha op(A) op(B) + beta C, row-major (see gemm.hpp).
  virtual void gemm(const RowMajorGemm& g, const float* a, const float* b, float* c) = 0;
  /// The GEMM that gemm() runs: one of cpu_gemm_names() on the CPU, "cublas" on CUDA.
  virtual std::string gemm_name() const = 0;
  /// Makes `name` run gemm() from now on (choose_gemm picks it); InputError when this backend has
  /// no GEMM of that name. Not thread-safe: call it before the backend is shared.
  virtual void use_gemm(const std::string& name) = 0;
};

}  // namespace gossip
