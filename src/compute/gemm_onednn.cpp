// compute/gemm_onednn.cpp: the oneDNN GEMM provider, the only file that sees oneDNN. dnnl_sgemm
// is row-major and JIT-compiles its kernel for the ISA the CPU reports (cpuid features, not a
// table of CPU models), so a CPU newer than OpenBLAS's table still gets AVX-512 or AMX code.
// Debian's oneDNN runs on OpenMP: each call's team size is set in the calling thread.
#include <dnnl.h>
#include <omp.h>

#include "gossip/core.hpp"
#include "src/compute/gemm_provider.hpp"

namespace gossip::cpu {
namespace {

class OneDnnGemm final : public GemmProvider {
 public:
  explicit OneDnnGemm(int threads) : threads_(threads) {}
  std::string name() const override { return "onednn"; }
  std::string describe() const override {
    const dnnl_version_t* v = dnnl_version();
    const int threads = threads_ > 0 ? threads_ : omp_get_max_threads();
    return cat("oneDNN ", v->major, ".", v->minor, ".", v->patch, " ", isa(), ", ", threads,
               " thread", threads == 1 ? "" : "s");
  }
  void gemm(const RowMajorGemm& g, const float* a, const float* b, float* c) override {
    // OpenMP's thread count is per calling thread: the simulator's workers each set their own.
    if (threads_ > 0 && omp_get_max_threads() != threads_) omp_set_num_threads(threads_);
    const dnnl_status_t s =
        dnnl_sgemm(g.trans_a ? 'T' : 'N', g.trans_b ? 'T' : 'N', g.m, g.n, g.k, g.alpha, a, g.lda,
                   b, g.ldb, g.beta, c, g.ldc);
    if (s != dnnl_success)
      throw RuntimeError(cat("dnnl_sgemm failed (status ", static_cast<int>(s), ") for m=", g.m,
                             " n=", g.n, " k=", g.k));
  }

 private:
  /// The widest ISA oneDNN dispatches to on this CPU.
  static const char* isa() {
    switch (dnnl_get_effective_cpu_isa()) {
      case dnnl_cpu_isa_avx512_core_amx: return "AVX-512+AMX";
      case dnnl_cpu_isa_avx512_core_bf16: return "AVX-512 BF16";
      case dnnl_cpu_isa_avx512_core_vnni: return "AVX-512 VNNI";
      case dnnl_cpu_isa_avx512_core: return "AVX-512";
      case dnnl_cpu_isa_avx2_vnni: return "AVX2 VNNI";
      case dnnl_cpu_isa_avx2: return "AVX2";
      case dnnl_cpu_isa_avx: return "AVX";
      case dnnl_cpu_isa_sse41: return "SSE4.1";
      default: return "generic";
    }
  }

  int threads_;
};

}  // namespace

std::unique_ptr<GemmProvider> make_onednn_gemm(int threads) {
  return std::make_unique<OneDnnGemm>(threads);
}

}  // namespace gossip::cpu
