// compute/cpu_backend.cpp: the CPU backend. GEMM through one of the providers of
// gemm_provider.hpp (OpenBLAS or oneDNN, chosen by gemm_choice.cpp); element-wise work as loops
// over gossip::math (layers in cpu_layers.cpp, compressed gossip in cpu_compress.cpp).
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "gossip/backend.hpp"
#include "gossip/core.hpp"
#include "gossip/math.hpp"
#include "src/compute/cpu_compress.hpp"
#include "src/compute/cpu_layers.hpp"
#include "src/compute/cpu_robust.hpp"
#include "src/compute/gemm_provider.hpp"

namespace gossip {
namespace {

/// o[i] = (first ? 0 : o[i]) + w[0] x0[i] + ... + w[M-1] x{M-1}[i], summed left to right.
template <int M>
void mix_pass(float* __restrict o, const float* const* in, const float* w, std::int64_t start,
              std::int64_t len, bool first) {
  const float* __restrict x0 = in[0] + start;
  const float* __restrict x1 = M > 1 ? in[1] + start : x0;
  const float* __restrict x2 = M > 2 ? in[2] + start : x0;
  const float w0 = w[0], w1 = M > 1 ? w[1] : 0.0f, w2 = M > 2 ? w[2] : 0.0f;
  if (first) {
    for (std::int64_t i = 0; i < len; ++i) {
      float acc = 0.0f;
      acc += w0 * x0[i];
      if constexpr (M > 1) acc += w1 * x1[i];
      if constexpr (M > 2) acc += w2 * x2[i];
      o[i] = acc;
    }
  } else {
    for (std::int64_t i = 0; i < len; ++i) {
      float acc = o[i];
      acc += w0 * x0[i];
      if constexpr (M > 1) acc += w1 * x1[i];
      if constexpr (M > 2) acc += w2 * x2[i];
      o[i] = acc;
    }
  }
}

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(int threads) : gemms_(cpu::make_gemm_providers(threads)) {}

  std::string name() const override { return "cpu"; }
  std::string describe() const override {
    return cat("cpu (", gemm_->describe(), ")");
  }
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

  void bias_act(float* y, const float* bias, int rows, int cols, bool relu) override {
    for (int r = 0; r < rows; ++r) {
      float* row = y + static_cast<std::int64_t>(r) * cols;
      for (int c = 0; c < cols; ++c) row[c] = math::bias_act(row[c], bias[c], relu);
    }
  }

  void relu_backward(float* dy, const float* y, std::int64_t n) override {
    for (std::int64_t i = 0; i < n; ++i) dy[i] = math::relu_backward(dy[i], y[i]);
  }

  void column_sums(const float* dy, int rows, int cols, float* db) override {
    std::fill(db, db + cols, 0.0f);
    for (int r = 0; r < rows; ++r) {
      const float* row = dy + static_cast<std::int64_t>(r) * cols;
      for (int c = 0; c < cols; ++c) db[c] += row[c];
    }
  }

  std::pair<double, std::int64_t> softmax_xent(const float* logits, const std::int32_t* labels,
                                               int rows, int cols, float* grad) override {
    double loss = 0.0;
    std::int64_t correct = 0;
    const float scale = 1.0f / static_cast<float>(rows);
    for (int r = 0; r < rows; ++r) {
      bool ok = false;
      const std::int64_t off = static_cast<std::int64_t>(r) * cols;
      loss += math::softmax_xent_row(logits + off, cols, labels[r], scale,
                                     grad ? grad + off : nullptr, &ok);
      correct += ok ? 1 : 0;
    }
    return {loss / rows, correct};
  }

  void sgd_update(float* params, float* velocity, const float* grads, std::int64_t n, float lr,
                  float momentum, float weight_decay, bool nesterov) override {
    for (std::int64_t i = 0; i < n; ++i)
      math::sgd_update(params[i], velocity[i], grads[i], lr, momentum, weight_decay, nesterov);
  }

  void mix(float* out, const float* const* in, const float* w, int k, std::int64_t n) override {
    // Per element this is acc = 0; acc += w[j] * in[j][i] for j ascending: bit-identical to
    // math::mix_element (no FMA contraction: the build uses -std=c++20, which turns it off).
    // Passes of up to three inputs each read their inputs once, so a ring's mix (k = 3) is one
    // streaming pass over memory; with more inputs, blocks keep `out` in L1 between passes.
    const std::int64_t block = k <= 3 ? std::max<std::int64_t>(n, 1) : 4096;
    for (std::int64_t start = 0; start < n; start += block) {
      const std::int64_t len = std::min(block, n - start);
      float* o = out + start;
      int j = 0;
      if (k == 0) std::fill(o, o + len, 0.0f);
      while (j < k) {
        const int m = std::min(3, k - j);
        const bool first = j == 0;
        if (m == 3) mix_pass<3>(o, in + j, w + j, start, len, first);
        else if (m == 2) mix_pass<2>(o, in + j, w + j, start, len, first);
        else mix_pass<1>(o, in + j, w + j, start, len, first);
        j += m;
      }
    }
  }

  void fill(float* p, float value, std::int64_t n) override { std::fill(p, p + n, value); }

  // Layer operations: loops over gossip/layer_math.hpp in cpu_layers.cpp.
  void relu(const float* x, float* y, std::int64_t n) override { cpu::relu(x, y, n); }
  void row_sums(const float* a, int rows, int cols, bool accumulate, float* out) override {
    cpu::row_sums(a, rows, cols, accumulate, out);
  }
  void im2col(const float* x, const ConvGeom& g, int count, float* col) override {
    cpu::im2col(x, g, count, col);
  }
  void col2im(const float* col, const ConvGeom& g, int count, float* dx) override {
    cpu::col2im(col, g, count, dx);
  }
  void conv_output(const float* t, const float* bias, const ConvGeom& g, int count, bool relu,
                   float* y) override {
    cpu::conv_output(t, bias, g, count, relu, y);
  }
  void conv_grad_layout(const float* dy, const ConvGeom& g, int count, float* t) override {
    cpu::conv_grad_layout(dy, g, count, t);
  }
  void pool_forward(const float* x, const PoolGeom& g, int rows, float* y,
                    std::int32_t* arg) override {
    cpu::pool_forward(x, g, rows, y, arg);
  }
  void pool_backward(const float* dy, const std::int32_t* arg, const PoolGeom& g, int rows,
                     float* dx) override {
    cpu::pool_backward(dy, arg, g, rows, dx);
  }
  void group_norm_forward(const float* x, const float* gamma, const float* beta,
                          const GroupNormGeom& g, int rows, float* y, float* mean,
                          float* rstd) override {
    cpu::group_norm_forward(x, gamma, beta, g, rows, y, mean, rstd);
  }
  void batch_norm_forward(const float* x, const float* gamma, const float* beta,
                          const BatchNormGeom& g, int rows, bool training, float* y, float* mean,
                          float* rstd, float* running_mean, float* running_var) override {
    cpu::batch_norm_forward(x, gamma, beta, g, rows, training, y, mean, rstd, running_mean,
                            running_var);
  }
  void batch_norm_backward(const float* x, const float* dy, const float* gamma,
                           const float* mean, const float* rstd, const BatchNormGeom& g, int rows,
                           float* dx, float* dgamma, float* dbeta) override {
    cpu::batch_norm_backward(x, dy, gamma, mean, rstd, g, rows, dx, dgamma, dbeta);
  }
  void group_norm_backward(const float* x, const float* dy, const float* gamma,
                           const float* mean, const float* rstd, const GroupNormGeom& g, int rows,
                           float* dx, float* dgamma, float* dbeta) override {
    cpu::group_norm_backward(x, dy, gamma, mean, rstd, g, rows, dx, dgamma, dbeta);
  }
  void dropout(const float* x, float* y, std::int64_t n, float p, std::uint64_t key) override {
    cpu::dropout(x, y, n, p, key);
  }

  // Compressed gossip: loops over gossip/compress_math.hpp in cpu_compress.cpp.
  void choco_difference(const float* x, const float* xhat, float* d, std::int64_t n) override {
    cpu::choco_difference(x, xhat, d, n);
  }
  void choco_step(float* x, const float* s, const float* xhat, float gamma,
                  std::int64_t n) override {
    cpu::choco_step(x, s, xhat, gamma, n);
  }
  void quantize(const float* v, std::int64_t n, int bits, std::int64_t block, std::uint64_t key,
                float* scales, std::int8_t* codes) override {
    cpu::quantize(v, n, bits, block, key, scales, codes);
  }
  void dequantize_add(float* target, float weight, const float* scales, const std::int8_t* codes,
                      std::int64_t n, std::int64_t block, int bits) override {
    cpu::dequantize_add(target, weight, scales, codes, n, block, bits);
  }
  void scatter_add(float* target, float weight, const std::uint32_t* index, const float* values,
                   std::int64_t k) override {
    cpu::scatter_add(target, weight, index, values, k);
  }
  void add_weighted(float* target, float weight, const float* values, std::int64_t n) override {
    cpu::add_weighted(target, weight, values, n);
  }
  void squared_distances(const float* r, const float* const* m, int k, std::int64_t n,
                         double* out) override {
    cpu::squared_distances(r, m, k, n, out);
  }

 private:
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
