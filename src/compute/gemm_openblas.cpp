// compute/gemm_openblas.cpp: the OpenBLAS GEMM provider, the only file that sees OpenBLAS. Its
// kernel comes from OpenBLAS's table of CPU models (openblas_get_corename()); a CPU newer than
// the table gets a generic kernel, which is why it is one candidate among several.
#include <cblas.h>

#include "gossip/backend.hpp"
#include "gossip/core.hpp"
#include "src/compute/gemm_provider.hpp"

namespace gossip {
namespace cpu {
namespace {

class OpenBlasGemm final : public GemmProvider {
 public:
  explicit OpenBlasGemm(int threads) {
    if (threads > 0) openblas_set_num_threads(threads);
  }
  std::string name() const override { return "openblas"; }
  std::string describe() const override {
    return cat("OpenBLAS ", blas_core_name(), ", ", openblas_get_num_threads(), " thread",
               openblas_get_num_threads() == 1 ? "" : "s");
  }
  void gemm(const RowMajorGemm& g, const float* a, const float* b, float* c) override {
    const ColumnMajorGemm cm = to_column_major(g);
    cblas_sgemm(CblasColMajor, cm.trans_first ? CblasTrans : CblasNoTrans,
                cm.trans_second ? CblasTrans : CblasNoTrans, cm.m, cm.n, cm.k, cm.alpha, b,
                cm.ld_first, a, cm.ld_second, cm.beta, c, cm.ldc);
  }
};

}  // namespace

std::unique_ptr<GemmProvider> make_openblas_gemm(int threads) {
  return std::make_unique<OpenBlasGemm>(threads);
}

}  // namespace cpu

std::string blas_core_name() {
  const char* name = openblas_get_corename();
  return name ? name : "unknown";
}

}  // namespace gossip
