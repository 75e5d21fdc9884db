// compute/gemm_blis.cpp: the BLIS GEMM provider (Debian's libblis4), the only file that sees BLIS.
// BLIS picks its kernels at run time from the CPU's features (its "x86_64" configuration family:
// Haswell, SkylakeX, Zen... sub-configurations), not from a table of CPU models, and takes
// row-major operands directly through its strides. libblis also exports the BLAS and CBLAS
// symbols OpenBLAS exports, so it is loaded with dlopen(RTLD_LOCAL | RTLD_DEEPBIND) and called
// through the addresses dlsym gives: OpenBLAS's cblas_sgemm stays OpenBLAS's. Without libblis on
// the machine the provider is absent from the candidates, with the reason in blis_refusal().
#include <dlfcn.h>

#include <blis.h>

#include <mutex>

#include "gossip/core.hpp"
#include "src/compute/gemm_provider.hpp"

namespace gossip::cpu {
namespace {

constexpr const char* kLibrary = "libblis.so.4";

/// libblis, opened once: its functions, or why it cannot be used.
struct Blis {
  decltype(&bli_sgemm) sgemm = nullptr;
  decltype(&bli_thread_set_num_threads) set_threads = nullptr;
  decltype(&bli_info_get_version_str) version = nullptr;
  decltype(&bli_arch_query_id) arch = nullptr;
  decltype(&bli_arch_string) arch_name = nullptr;
  std::string refusal;
};

const Blis& blis() {
  static const Blis loaded = [] {
    Blis b;
    void* handle = dlopen(kLibrary, RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
    if (handle == nullptr) {
      const char* why = dlerror();
      b.refusal = cat(kLibrary, " cannot be loaded (", why ? why : "unknown",
                      "): install Debian's libblis4");
      return b;
    }
    auto find = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(handle, name));
      if (fn == nullptr && b.refusal.empty())
        b.refusal = cat(kLibrary, " has no ", name);
    };
    find(b.sgemm, "bli_sgemm");
    find(b.set_threads, "bli_thread_set_num_threads");
    find(b.version, "bli_info_get_version_str");
    find(b.arch, "bli_arch_query_id");
    find(b.arch_name, "bli_arch_string");
    return b;
  }();
  return loaded;
}

class BlisGemm final : public GemmProvider {
 public:
  explicit BlisGemm(int threads) : threads_(threads) {
    if (threads > 0) blis().set_threads(threads);
  }
  std::string name() const override { return "blis"; }
  std::string describe() const override {
    const Blis& b = blis();
    return cat("BLIS ", b.version(), " ", b.arch_name(b.arch()),
               threads_ > 0 ? cat(", ", threads_, " thread", threads_ == 1 ? "" : "s") : "");
  }
  void gemm(const RowMajorGemm& g, const float* a, const float* b, float* c) override {
    // Row-major: element (i, j) of a stored m x k matrix with leading dimension lda sits at
    // i * lda + j, so its row stride is lda and its column stride 1 (op() as stored).
    float alpha = g.alpha, beta = g.beta;
    blis().sgemm(g.trans_a ? BLIS_TRANSPOSE : BLIS_NO_TRANSPOSE,
                 g.trans_b ? BLIS_TRANSPOSE : BLIS_NO_TRANSPOSE, g.m, g.n, g.k, &alpha,
                 const_cast<float*>(a), g.lda, 1, const_cast<float*>(b), g.ldb, 1, &beta, c,
                 g.ldc, 1);
  }

 private:
  int threads_;
};

}  // namespace

std::string blis_refusal() { return blis().refusal; }

std::unique_ptr<GemmProvider> make_blis_gemm(int threads) {
  if (!blis().refusal.empty()) return nullptr;
  return std::make_unique<BlisGemm>(threads);
}

}  // namespace gossip::cpu
