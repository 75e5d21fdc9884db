// compute/gemm_onednn.cpp: the oneDNN GEMM provider, the only file that sees oneDNN. dnnl_sgemm
// is row-major and JIT-compiles its kernel for the ISA the CPU reports (cpuid features, not a
// table of CPU models), so a CPU newer than OpenBLAS's table still gets AVX-512 or AMX code.
// Debian's oneDNN runs on OpenMP: each call's team size is set in the calling thread.
// train.precision: bf16 runs oneDNN's matmul primitive with fpmath_mode bf16 instead: fp32 in and
// out, the products in bf16 with fp32 accumulation (AVX512-BF16 or AMX instructions).
#include <dnnl.h>
#include <omp.h>

#include <map>
#include <mutex>
#include <thread>
#include <tuple>

#include "gossip/core.hpp"
#include "src/compute/gemm_provider.hpp"

namespace gossip::cpu {
namespace {

/// The name of a oneDNN ISA level, for messages.
const char* isa_name(dnnl_cpu_isa_t isa) {
  switch (isa) {
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

class OneDnnGemm final : public GemmProvider {
 public:
  explicit OneDnnGemm(int threads) : threads_(threads) {}
  std::string name() const override { return "onednn"; }
  std::string describe() const override {
    const dnnl_version_t* v = dnnl_version();
    const int threads = threads_ > 0 ? threads_ : omp_get_max_threads();
    return cat("oneDNN ", v->major, ".", v->minor, ".", v->patch, " ",
               isa_name(dnnl_get_effective_cpu_isa()), ", ", threads,
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
  int threads_;
};

void check(dnnl_status_t s, const char* what) {
  if (s != dnnl_success)
    throw RuntimeError(cat("oneDNN: ", what, " failed (status ", static_cast<int>(s), ")"));
}

/// A row-major m x n view with leading dimension ld, transposed or not, as a memory descriptor.
dnnl_memory_desc_t matrix(int rows, int cols, int ld, bool transposed) {
  dnnl_memory_desc_t md;
  const dnnl_dims_t dims = {rows, cols};
  const dnnl_dims_t strides = {transposed ? 1 : ld, transposed ? ld : 1};
  check(dnnl_memory_desc_init_by_strides(&md, 2, dims, dnnl_f32, strides), "memory_desc_init");
  return md;
}

/// oneDNN's matmul with fpmath_mode bf16, one primitive a GEMM shape (the model has a handful)
/// and calling thread, made on first use: a primitive owns its scratchpad, so two threads (the
/// simulator's workers) must not run one at once.
class OneDnnBf16Gemm final : public GemmProvider {
 public:
  explicit OneDnnBf16Gemm(int threads) : threads_(threads) {}
  ~OneDnnBf16Gemm() override {
    for (auto& [key, p] : primitives_) dnnl_primitive_destroy(p.primitive);
    if (engine_ != nullptr) dnnl_engine_destroy(engine_);
  }
  std::string name() const override { return "onednn_bf16"; }
  std::string describe() const override {
    const dnnl_version_t* v = dnnl_version();
    return cat("oneDNN ", v->major, ".", v->minor, ".", v->patch, " matmul, bf16 products with "
               "fp32 accumulation");
  }
  void gemm(const RowMajorGemm& g, const float* a, const float* b, float* c) override {
    if (threads_ > 0 && omp_get_max_threads() != threads_) omp_set_num_threads(threads_);
    const Primitive& p = primitive(g);
    thread_local struct Stream {
      dnnl_stream_t stream = nullptr;
      dnnl_engine_t engine = nullptr;
      ~Stream() {
        if (stream != nullptr) dnnl_stream_destroy(stream);
      }
    } local;
    if (local.engine != engine_) {
      if (local.stream != nullptr) dnnl_stream_destroy(local.stream);
      check(dnnl_stream_create(&local.stream, engine_, dnnl_stream_default_flags),
            "stream_create");
      local.engine = engine_;
    }
    dnnl_memory_t mem[3] = {};
    const void* ptr[3] = {a, b, c};
    for (int i = 0; i < 3; ++i)
      check(dnnl_memory_create(&mem[i], &p.md[i], engine_, const_cast<void*>(ptr[i])),
            "memory_create");
    const dnnl_exec_arg_t args[3] = {
        {DNNL_ARG_SRC, mem[0]}, {DNNL_ARG_WEIGHTS, mem[1]}, {DNNL_ARG_DST, mem[2]}};
    const dnnl_status_t s = dnnl_primitive_execute(p.primitive, local.stream, 3, args);
    if (s == dnnl_success) dnnl_stream_wait(local.stream);
    for (dnnl_memory_t m : mem) dnnl_memory_destroy(m);
    check(s, "matmul");
  }

 private:
  struct Primitive {
    dnnl_primitive_t primitive = nullptr;
    dnnl_memory_desc_t md[3];  // A, B, C
  };
  using Key = std::tuple<std::thread::id, bool, bool, int, int, int, int, int, int, float, float>;

  const Primitive& primitive(const RowMajorGemm& g) {
    const Key key{std::this_thread::get_id(), g.trans_a, g.trans_b, g.m,     g.n,   g.k,
                  g.lda,                      g.ldb,     g.ldc,     g.alpha, g.beta};
    std::lock_guard lock(mu_);
    if (auto it = primitives_.find(key); it != primitives_.end()) return it->second;
    if (engine_ == nullptr) check(dnnl_engine_create(&engine_, dnnl_cpu, 0), "engine_create");
    Primitive p;
    p.md[0] = matrix(g.m, g.k, g.lda, g.trans_a);
    p.md[1] = matrix(g.k, g.n, g.ldb, g.trans_b);
    p.md[2] = matrix(g.m, g.n, g.ldc, false);
    dnnl_matmul_desc_t desc;
    check(dnnl_matmul_desc_init(&desc, &p.md[0], &p.md[1], nullptr, &p.md[2]), "matmul_desc");
    dnnl_primitive_attr_t attr;
    check(dnnl_primitive_attr_create(&attr), "attr_create");
    check(dnnl_primitive_attr_set_fpmath_mode(attr, dnnl_fpmath_mode_bf16), "fpmath_mode");
    if (g.alpha != 1.0f)
      check(dnnl_primitive_attr_set_output_scales(attr, 1, 0, &g.alpha), "output_scales");
    dnnl_post_ops_t ops = nullptr;
    if (g.beta != 0.0f) {  // C = alpha AB + beta C: a sum post-op
      check(dnnl_post_ops_create(&ops), "post_ops_create");
      check(dnnl_post_ops_append_sum(ops, g.beta), "append_sum");
      check(dnnl_primitive_attr_set_post_ops(attr, ops), "set_post_ops");
    }
    dnnl_primitive_desc_t pd;
    const dnnl_status_t made = dnnl_primitive_desc_create(&pd, &desc, attr, engine_, nullptr);
    dnnl_primitive_attr_destroy(attr);
    if (ops != nullptr) dnnl_post_ops_destroy(ops);
    check(made, "matmul primitive_desc");
    const dnnl_status_t created = dnnl_primitive_create(&p.primitive, pd);
    dnnl_primitive_desc_destroy(pd);
    check(created, "matmul primitive");
    return primitives_.emplace(key, p).first->second;
  }

  int threads_;
  std::mutex mu_;
  dnnl_engine_t engine_ = nullptr;
  std::map<Key, Primitive> primitives_;
};

}  // namespace

std::unique_ptr<GemmProvider> make_onednn_gemm(int threads) {
  return std::make_unique<OneDnnGemm>(threads);
}

std::unique_ptr<GemmProvider> make_onednn_bf16_gemm(int threads) {
  return std::make_unique<OneDnnBf16Gemm>(threads);
}

std::string onednn_bf16_refusal() {
  const dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
  if (isa == dnnl_cpu_isa_avx512_core_bf16 || isa == dnnl_cpu_isa_avx512_core_amx) return "";
  return cat("this CPU has no bf16 instructions (oneDNN dispatches to ", isa_name(isa),
             "; bf16 needs AVX512-BF16 or AMX)");
}

}  // namespace gossip::cpu
