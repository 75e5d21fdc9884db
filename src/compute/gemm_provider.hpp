// compute/gemm_provider.hpp: the CPU backend's matrix products behind one small interface, one
// implementation per library, each library inside its own file (gemm_openblas.cpp,
// gemm_onednn.cpp, gemm_blis.cpp). Which one runs is chosen by measuring (gemm_choice.cpp).
#pragma once
#if !defined(GOSSIP_ROOM_COMPUTE)
#error "src/compute/gemm_provider.hpp belongs to room compute, which this room does not use (see the room table in meson.build)"
#endif

#include <memory>
#include <string>
#include <vector>

#include "gossip/gemm.hpp"

namespace gossip::cpu {

/// One library's SGEMM: C = alpha op(A) op(B) + beta C, row-major (gossip/gemm.hpp). Thread-safe:
/// virtual peers of the simulator call it from several threads at once.
class GemmProvider {
 public:
  virtual ~GemmProvider() = default;
  /// "openblas", "onednn", "blis": what train.gemm and GOSSIP_GEMM call it.
  virtual std::string name() const = 0;
  /// The library and the kernel it runs, for log lines (e.g. "OpenBLAS 0.3.21 Prescott").
  virtual std::string describe() const = 0;
  virtual void gemm(const RowMajorGemm& g, const float* a, const float* b, float* c) = 0;
};

/// OpenBLAS's cblas_sgemm, in column-major mode through to_column_major (as cuBLAS is called).
/// `threads` > 0 sets OpenBLAS's thread count (process-wide); 0 leaves its default.
std::unique_ptr<GemmProvider> make_openblas_gemm(int threads);
/// oneDNN's dnnl_sgemm (row-major, JIT-compiled for the CPU's ISA: AVX2, AVX-512, AMX). `threads`
/// > 0 is the OpenMP team size of each call (set in the calling thread); 0 leaves the default.
std::unique_ptr<GemmProvider> make_onednn_gemm(int threads);

/// BLIS's bli_sgemm (row-major through its strides; kernels chosen at run time from the CPU's
/// features), from libblis.so.4 loaded apart from OpenBLAS (dlopen). nullptr when libblis cannot
/// be loaded: blis_refusal() says why. `threads` > 0 sets BLIS's thread count (process-wide).
std::unique_ptr<GemmProvider> make_blis_gemm(int threads);
std::string blis_refusal();

/// oneDNN's matmul with fpmath_mode bf16 (train.precision: bf16): fp32 operands, bf16 products,
/// fp32 accumulation. Not among the timed candidates: it is not fp32.
std::unique_ptr<GemmProvider> make_onednn_bf16_gemm(int threads);
/// Why this CPU cannot run bf16 products ("" when it can: AVX512-BF16 or AMX).
std::string onednn_bf16_refusal();

/// Every provider of this build, in the order of cpu_gemm_names(), then onednn_bf16.
std::vector<std::unique_ptr<GemmProvider>> make_gemm_providers(int threads);

}  // namespace gossip::cpu
