// compute/cpu_backend.cpp: the CPU backend, made of its parts: host memory as its device and GEMM
// through one of the providers of gemm_provider.hpp (OpenBLAS or oneDNN, chosen by
// gemm_choice.cpp) here; its layer kernels (cpu_layers.cpp) and gossip kernels (cpu_gossip.cpp,
// cpu_robust.cpp) as loops over gossip::math.
#include <cstdlib>
#include <cstring>
#include <vector>

#include "gossip/backend.hpp"
#include "gossip/core.hpp"
#include "src/compute/cpu_gossip.hpp"
#include "src/compute/cpu_layers.hpp"
#include "src/compute/gemm_provider.hpp"

namespace gossip {
namespace {

/// The CPU backend: the device and GEMM parts are this class's own; the layer and gossip kernels
/// come from the part classes (each implements its interface, a virtual base of Backend).
class CpuBackend final : public Backend, public cpu::LayerLoops, public cpu::GossipLoops {
 public:
  explicit CpuBackend(int threads) : gemms_(cpu::make_gemm_providers(threads)) {}

  std::string name() const override { return "cpu"; }
  std::string describe() const override {
    return cat("cpu (", gemm_->describe(), ")");
  }

  // ---- the device: host memory, copies done at once ------------------------------------------
  bool host_memory() const override { return true; }
  void* allocate(std::size_t bytes) override {
    // 64-byte alignment for vector loads; size rounded up as aligned_alloc requires.
    void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (p == nullptr) throw RuntimeError(cat("out of host memory allocating ", bytes, " bytes"));
    return p;
  }
  void release(void* p) noexcept override { std::free(p); }
  void upload(void* dst, const void* src, std::size_t bytes) override {
    std::memcpy(dst, src, bytes);
  }
  void download(void* dst, const void* src, std::size_t bytes) override {
    std::memcpy(dst, src, bytes);
  }
  void synchronize() override {}
  void copy(void* dst, const void* src, std::size_t bytes) override {
    std::memcpy(dst, src, bytes);
  }
  /// Nothing to wait for: download_async() copied at once.
  void wait_downloads() override {}
  /// Nothing to pin: the buffers are the device's already.
  void pin_host(void* /*p*/, std::size_t /*bytes*/) override {}
  /// None: uploads are plain copies.
  HostMemory* pinned_memory() override { return nullptr; }
  std::string capture_begin() override { return kNoGraphs; }
  std::unique_ptr<StepGraph> capture_end(std::string& why) override {
    why = kNoGraphs;
    return nullptr;
  }

  // ---- GEMM ----------------------------------------------------------------------------------
  void gemm(const RowMajorGemm& g, const float* a, const float* b, float* c) override {
    gemm_->gemm(g, a, b, c);
  }
  std::string gemm_name() const override { return gemm_->name(); }
  void use_gemm(const std::string& name) override {
    for (auto& p : gemms_)
      if (p->name() == name) {
        gemm_ = p.get();
        return;
      }
    throw InputError(cat("the CPU backend has no GEMM '", name, "'"));
  }

 private:
  static constexpr const char* kNoGraphs = "cpu backend: no CUDA graphs here";

  std::vector<std::unique_ptr<cpu::GemmProvider>> gemms_;
  cpu::GemmProvider* gemm_ = gemms_.front().get();  // openblas until use_gemm
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(int threads) {
  return std::make_unique<CpuBackend>(threads);
}

std::vector<std::string> cpu_gemm_names() {
  std::vector<std::string> names{"openblas", "onednn"};
  if (cpu::blis_refusal().empty()) names.push_back("blis");
  return names;
}

namespace cpu {

std::vector<std::unique_ptr<GemmProvider>> make_gemm_providers(int threads) {
  std::vector<std::unique_ptr<GemmProvider>> out;
  out.push_back(make_openblas_gemm(threads));
  out.push_back(make_onednn_gemm(threads));
  if (auto blis = make_blis_gemm(threads)) out.push_back(std::move(blis));
  out.push_back(make_onednn_bf16_gemm(threads));
  return out;
}

}  // namespace cpu

}  // namespace gossip
