// Tests for compute: the row-major -> column-major GEMM mapping (what cuBLAS receives) against
// column-major cblas_sgemm and a naive triple loop, for linear layers and the convolution's
// GEMMs; the CPU backend's element-wise ops and mixing against plain loops over gossip::math;
// each layer kernel (im2col/col2im, pooling, group norm, dropout) against a plain reference; the
// compressed-gossip operations against plain loops over gossip/compress_math.hpp.
#include <catch2/catch.hpp>
#include <cblas.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <vector>

#include "gossip/backend.hpp"
#include "gossip/compress_math.hpp"
#include "gossip/core.hpp"
#include "gossip/gemm.hpp"
#include "gossip/layer_math.hpp"
#include "gossip/math.hpp"
#include "src/compute/gemm_provider.hpp"
#include "tests/helpers.hpp"

using namespace gossip;
using gossip::test::random_vector;

namespace {

// Naive reference: row-major C = alpha op(A) op(B) + beta C, accumulating in double.
void naive_gemm(const RowMajorGemm& g, const float* a, const float* b, float* c) {
  for (int i = 0; i < g.m; ++i)
    for (int j = 0; j < g.n; ++j) {
      double acc = 0.0;
      for (int p = 0; p < g.k; ++p) {
        const float av = g.trans_a ? a[p * g.lda + i] : a[i * g.lda + p];
        const float bv = g.trans_b ? b[j * g.ldb + p] : b[p * g.ldb + j];
        acc += static_cast<double>(av) * bv;
      }
      c[i * g.ldc + j] = static_cast<float>(g.alpha * acc + g.beta * c[i * g.ldc + j]);
    }
}

void require_finite_nonzero(const std::vector<float>& v) {
  bool any_nonzero = false;
  for (float x : v) {
    REQUIRE(std::isfinite(x));
    any_nonzero |= x != 0.0f;
  }
  REQUIRE(any_nonzero);
}

}  // namespace

TEST_CASE("the GEMM mapping drives column-major cblas_sgemm to the row-major product", "[compute]") {
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      SECTION(std::string("trans_a=") + (ta ? "T" : "N") + " trans_b=" + (tb ? "T" : "N")) {
        const int m = 7, n = 5, k = 9;
        RowMajorGemm g = row_major_gemm(ta, tb, m, n, k, 0.75f, 0.5f);
        // Padded leading dimensions, so a swapped lda/ldb would read the wrong elements.
        g.lda += 3;
        g.ldb += 2;
        g.ldc += 1;
        const int a_rows = ta ? k : m, b_rows = tb ? n : k;
        auto a = random_vector(static_cast<std::size_t>(a_rows) * g.lda, 1);
        auto b = random_vector(static_cast<std::size_t>(b_rows) * g.ldb, 2);
        auto c0 = random_vector(static_cast<std::size_t>(m) * g.ldc, 3);
        auto expect = c0, got = c0;
        naive_gemm(g, a.data(), b.data(), expect.data());
        const ColumnMajorGemm cm = to_column_major(g);
        cblas_sgemm(CblasColMajor, cm.trans_first ? CblasTrans : CblasNoTrans,
                    cm.trans_second ? CblasTrans : CblasNoTrans, cm.m, cm.n, cm.k, cm.alpha,
                    b.data(), cm.ld_first, a.data(), cm.ld_second, cm.beta, got.data(), cm.ldc);
        require_finite_nonzero(got);
        for (std::size_t i = 0; i < got.size(); ++i) REQUIRE(got[i] == Approx(expect[i]).margin(1e-5));
      }
    }
}

TEST_CASE("the CPU backend's GEMM matches a naive triple loop", "[compute]") {
  auto cpu = make_cpu_backend(1);
  const int m = 33, n = 17, k = 65;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      RowMajorGemm g = row_major_gemm(ta, tb, m, n, k);
      auto a = random_vector(static_cast<std::size_t>(m) * k, 4);
      auto b = random_vector(static_cast<std::size_t>(k) * n, 5);
      std::vector<float> expect(static_cast<std::size_t>(m) * n, 0.0f), got = expect;
      naive_gemm(g, a.data(), b.data(), expect.data());
      cpu->gemm(g, a.data(), b.data(), got.data());
      require_finite_nonzero(got);
      for (std::size_t i = 0; i < got.size(); ++i) REQUIRE(got[i] == Approx(expect[i]).margin(1e-4));
    }
}

TEST_CASE("mixing equals a plain weighted-sum loop, bit for bit", "[compute]") {
  auto cpu = make_cpu_backend(1);
  for (int k : {1, 3, 5}) {
    SECTION("k = " + std::to_string(k)) {
      const std::int64_t n = 10007;  // not a multiple of the block size
      std::vector<std::vector<float>> bufs;
      std::vector<const float*> in;
      std::vector<float> w;
      for (int j = 0; j < k; ++j) {
        bufs.push_back(random_vector(n, 10 + j));
        w.push_back(1.0f / (j + 2));
      }
      for (auto& b : bufs) in.push_back(b.data());
      std::vector<float> got(n), expect(n);
      cpu->mix(got.data(), in.data(), w.data(), k, n);
      for (std::int64_t i = 0; i < n; ++i) {
        float acc = 0.0f;
        for (int j = 0; j < k; ++j) acc += w[j] * bufs[j][i];
        expect[i] = acc;
        REQUIRE(math::mix_element(in.data(), w.data(), k, i) == acc);
      }
      require_finite_nonzero(got);
      REQUIRE(got == expect);
    }
  }
}

TEST_CASE("mixing with doubly stochastic weights preserves the average", "[compute]") {
  auto cpu = make_cpu_backend(1);
  // Three peers on a triangle with weights 1/3 each: every output is the average.
  auto x0 = random_vector(100, 21), x1 = random_vector(100, 22), x2 = random_vector(100, 23);
  const float* in[] = {x0.data(), x1.data(), x2.data()};
  const float w[] = {1.0f / 3, 1.0f / 3, 1.0f / 3};
  std::vector<float> out(100);
  cpu->mix(out.data(), in, w, 3, 100);
  for (int i = 0; i < 100; ++i)
    REQUIRE(out[i] == Approx((x0[i] + x1[i] + x2[i]) / 3.0).margin(1e-6));
}

TEST_CASE("element-wise ops follow gossip::math", "[compute]") {
  auto cpu = make_cpu_backend(1);
  SECTION("bias and ReLU") {
    std::vector<float> y = {-1.0f, 0.5f, 2.0f, -3.0f};
    std::vector<float> b = {0.5f, -1.0f};
    cpu->bias_act(y.data(), b.data(), 2, 2, true);
    CHECK(y == std::vector<float>{0.0f, 0.0f, 2.5f, 0.0f});
  }
  SECTION("column sums") {
    std::vector<float> dy = {1, 2, 3, 4, 5, 6};
    std::vector<float> db(3);
    cpu->column_sums(dy.data(), 2, 3, db.data());
    CHECK(db == std::vector<float>{5, 7, 9});
  }
  SECTION("softmax cross-entropy of uniform logits is ln(classes)") {
    std::vector<float> logits(2 * 4, 0.0f), grad(8);
    std::vector<std::int32_t> labels = {1, 3};
    auto [loss, correct] = cpu->softmax_xent(logits.data(), labels.data(), 2, 4, grad.data());
    CHECK(loss == Approx(std::log(4.0)));
    CHECK(grad[1] == Approx((0.25 - 1.0) / 2));
    CHECK(grad[0] == Approx(0.25 / 2));
    (void)correct;
    // Queued, as a training step does it: the same loss, kept until read.
    std::vector<float> queued_grad(8);
    cpu->queue_softmax_xent(logits.data(), labels.data(), 2, 4, queued_grad.data());
    CHECK(queued_grad == grad);
    CHECK(cpu->queued_softmax_result().first == loss);
  }
  SECTION("SGD with momentum matches the closed form over two steps") {
    float p = 1.0f, v = 0.0f;
    math::sgd_update(p, v, 0.5f, 0.1f, 0.9f, 0.0f, false);  // v = 0.5, p = 0.95
    math::sgd_update(p, v, 0.5f, 0.1f, 0.9f, 0.0f, false);  // v = 0.95, p = 0.855
    CHECK(v == Approx(0.95f));
    CHECK(p == Approx(0.855f));
    float q = 1.0f, u = 0.0f;
    math::sgd_update(q, u, 0.5f, 0.1f, 0.9f, 0.0f, true);   // nesterov: d = 0.5 + 0.45
    CHECK(q == Approx(1.0f - 0.1f * 0.95f));
    float r = 2.0f, s = 0.0f;
    math::sgd_update(r, s, 0.0f, 0.1f, 0.0f, 0.5f, false);  // weight decay only
    CHECK(r == Approx(2.0f - 0.1f * 1.0f));
  }
}

TEST_CASE("backend choice: cpu always works, cuda without a device is a clear error", "[compute]") {
  CHECK(make_backend(BackendChoice::kCpu, 1, false)->name() == "cpu");
  CHECK_THROWS_AS(parse_backend_choice("gpu"), std::exception);
  if (cuda_device_count() == 0) {
    CHECK(make_backend(BackendChoice::kAuto, 1, false)->name() == "cpu");
    CHECK_THROWS_WITH(make_backend(BackendChoice::kCuda, 1, false),
                      Catch::Contains("cuda") || Catch::Contains("CUDA"));
  }
}

// ---- layer kernels against plain references ----------------------------------------------------

namespace {

ConvGeom conv_geom(int c, int h, int w, int oc, int k, int stride, int pad) {
  ConvGeom g;
  g.c = c;
  g.h = h;
  g.w = w;
  g.oc = oc;
  g.k = k;
  g.stride = stride;
  g.pad = pad;
  g.oh = conv_out_size(h, k, stride, pad);
  g.ow = conv_out_size(w, k, stride, pad);
  return g;
}

PoolGeom pool_geom(int c, int h, int w, int k, int stride) {
  PoolGeom g;
  g.c = c;
  g.h = h;
  g.w = w;
  g.k = k;
  g.stride = stride;
  g.oh = conv_out_size(h, k, stride, 0);
  g.ow = conv_out_size(w, k, stride, 0);
  return g;
}

/// Direct convolution, accumulated in double: y[n, o, i, j] = b[o] + sum x * w.
std::vector<float> direct_conv(const std::vector<float>& x, const std::vector<float>& w,
                               const std::vector<float>& b, const ConvGeom& g, int rows) {
  std::vector<float> y(static_cast<std::size_t>(rows) * g.oc * g.oh * g.ow);
  for (int n = 0; n < rows; ++n)
    for (int o = 0; o < g.oc; ++o)
      for (int i = 0; i < g.oh; ++i)
        for (int j = 0; j < g.ow; ++j) {
          double acc = b[o];
          for (int c = 0; c < g.c; ++c)
            for (int kh = 0; kh < g.k; ++kh)
              for (int kw = 0; kw < g.k; ++kw) {
                const int ih = i * g.stride - g.pad + kh, iw = j * g.stride - g.pad + kw;
                if (ih < 0 || ih >= g.h || iw < 0 || iw >= g.w) continue;
                acc += static_cast<double>(x[((n * g.c + c) * g.h + ih) * g.w + iw]) *
                       w[((o * g.c + c) * g.k + kh) * g.k + kw];
              }
          y[((n * g.oc + o) * g.oh + i) * g.ow + j] = static_cast<float>(acc);
        }
  return y;
}

void require_close(const std::vector<float>& got, const std::vector<float>& expect,
                   double margin = 1e-4) {
  REQUIRE(got.size() == expect.size());
  require_finite_nonzero(got);
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i);
    REQUIRE(got[i] == Approx(expect[i]).margin(margin));
  }
}

}  // namespace

TEST_CASE("the convolution's GEMMs drive column-major cblas_sgemm to the row-major product",
          "[compute]") {
  // What cuBLAS receives for each of the three GEMMs, checked with column-major cblas_sgemm.
  const ConvGeom g = conv_geom(3, 9, 8, 5, 3, 2, 1);
  const int count = 2, cols = count * g.oh * g.ow;
  const std::vector<std::pair<const char*, RowMajorGemm>> cases = {
      {"forward", conv_forward_gemm(g, count)},
      {"weight gradient", conv_weight_grad_gemm(g, count, false)},
      {"weight gradient, accumulating", conv_weight_grad_gemm(g, count, true)},
      {"input gradient", conv_input_grad_gemm(g, count)}};
  CHECK(cases[0].second.m == 5);
  CHECK(cases[0].second.n == cols);
  CHECK(cases[0].second.k == 27);
  for (const auto& [name, gm] : cases) {
    SECTION(name) {
      const int a_rows = gm.trans_a ? gm.k : gm.m, b_rows = gm.trans_b ? gm.n : gm.k;
      auto a = random_vector(static_cast<std::size_t>(a_rows) * gm.lda, 31);
      auto b = random_vector(static_cast<std::size_t>(b_rows) * gm.ldb, 32);
      auto c0 = random_vector(static_cast<std::size_t>(gm.m) * gm.ldc, 33);
      auto expect = c0, got = c0;
      naive_gemm(gm, a.data(), b.data(), expect.data());
      const ColumnMajorGemm cm = to_column_major(gm);
      cblas_sgemm(CblasColMajor, cm.trans_first ? CblasTrans : CblasNoTrans,
                  cm.trans_second ? CblasTrans : CblasNoTrans, cm.m, cm.n, cm.k, cm.alpha,
                  b.data(), cm.ld_first, a.data(), cm.ld_second, cm.beta, got.data(), cm.ldc);
      require_close(got, expect);
    }
  }
}

TEST_CASE("im2col + GEMM + conv_output equals a direct convolution", "[compute]") {
  auto cpu = make_cpu_backend(1);
  for (const ConvGeom& g : {conv_geom(3, 9, 8, 5, 3, 2, 1), conv_geom(2, 7, 7, 4, 5, 1, 0),
                            conv_geom(1, 6, 6, 3, 3, 1, 2)}) {
    SECTION(cat("c", g.c, " ", g.h, "x", g.w, " k", g.k, " s", g.stride, " p", g.pad)) {
      const int rows = 3;
      auto x = random_vector(static_cast<std::size_t>(rows) * g.c * g.h * g.w, 41);
      auto w = random_vector(static_cast<std::size_t>(g.oc) * g.patch(), 42);
      auto b = random_vector(g.oc, 43);
      std::vector<float> col(static_cast<std::size_t>(g.patch()) * rows * g.positions());
      std::vector<float> t(static_cast<std::size_t>(g.oc) * rows * g.positions());
      std::vector<float> y(t.size());
      cpu->im2col(x.data(), g, rows, col.data());
      cpu->gemm(conv_forward_gemm(g, rows), w.data(), col.data(), t.data());
      cpu->conv_output(t.data(), b.data(), g, rows, false, y.data());
      const auto expect = direct_conv(x, w, b, g, rows);
      require_close(y, expect);
      cpu->conv_output(t.data(), b.data(), g, rows, true, y.data());
      for (std::size_t i = 0; i < y.size(); ++i) REQUIRE(y[i] == Approx(std::max(expect[i], 0.0f)).margin(1e-4));
      // conv_grad_layout is conv_output's inverse layout change (without the bias).
      std::vector<float> zero(g.oc, 0.0f), back(t.size());
      cpu->conv_output(t.data(), zero.data(), g, rows, false, y.data());
      cpu->conv_grad_layout(y.data(), g, rows, back.data());
      REQUIRE(back == t);
    }
  }
}

TEST_CASE("col2im adds every im2col entry back to the pixel it came from", "[compute]") {
  auto cpu = make_cpu_backend(1);
  const ConvGeom g = conv_geom(2, 7, 6, 3, 3, 2, 1);
  const int rows = 2;
  const std::int64_t ld = static_cast<std::int64_t>(rows) * g.positions();
  auto dcol = random_vector(static_cast<std::size_t>(g.patch()) * ld, 51);
  // Plain reference: scatter each entry of the im2col matrix onto its source pixel.
  std::vector<double> expect(static_cast<std::size_t>(rows) * g.c * g.h * g.w, 0.0);
  for (int c = 0; c < g.c; ++c)
    for (int kh = 0; kh < g.k; ++kh)
      for (int kw = 0; kw < g.k; ++kw)
        for (int n = 0; n < rows; ++n)
          for (int i = 0; i < g.oh; ++i)
            for (int j = 0; j < g.ow; ++j) {
              const int ih = i * g.stride - g.pad + kh, iw = j * g.stride - g.pad + kw;
              if (ih < 0 || ih >= g.h || iw < 0 || iw >= g.w) continue;
              const int row = (c * g.k + kh) * g.k + kw;
              expect[((n * g.c + c) * g.h + ih) * g.w + iw] +=
                  dcol[row * ld + n * g.positions() + i * g.ow + j];
            }
  std::vector<float> dx(expect.size());
  cpu->col2im(dcol.data(), g, rows, dx.data());
  require_close(dx, std::vector<float>(expect.begin(), expect.end()));
}

TEST_CASE("the CPU's im2col, col2im and pooling backward equal the CUDA kernels' per-element "
          "math bit for bit", "[compute]") {
  // The CUDA kernels compute one element each with math::im2col_value, col2im_value and
  // pool_backward_value (gathers); the CPU backend copies and scatters. Same bits, every shape.
  auto cpu = make_cpu_backend(1);
  for (const ConvGeom& g : {conv_geom(3, 9, 8, 5, 3, 2, 1), conv_geom(2, 7, 7, 4, 5, 1, 0),
                            conv_geom(1, 6, 6, 3, 3, 1, 2), conv_geom(2, 12, 12, 4, 5, 1, 0),
                            conv_geom(2, 8, 9, 3, 3, 3, 2), conv_geom(1, 5, 5, 2, 5, 2, 3)}) {
    SECTION(cat("conv c", g.c, " ", g.h, "x", g.w, " k", g.k, " s", g.stride, " p", g.pad)) {
      const int rows = 3;
      const std::int64_t ld = static_cast<std::int64_t>(rows) * g.positions();
      const auto x = random_vector(static_cast<std::size_t>(rows) * g.c * g.h * g.w, 71);
      std::vector<float> col(static_cast<std::size_t>(g.patch()) * ld, -7.0f);
      cpu->im2col(x.data(), g, rows, col.data());
      for (int row = 0; row < g.patch(); ++row)
        for (int n = 0; n < rows; ++n)
          for (int p = 0; p < g.positions(); ++p) {
            const float want = math::im2col_value(x.data() + n * g.c * g.h * g.w, g, row,
                                                  p / g.ow, p % g.ow);
            REQUIRE(col[row * ld + n * g.positions() + p] == want);
          }
      const auto dcol = random_vector(col.size(), 72);
      std::vector<float> dx(x.size(), -7.0f);
      cpu->col2im(dcol.data(), g, rows, dx.data());
      for (int n = 0; n < rows; ++n)
        for (int ci = 0; ci < g.c; ++ci)
          for (int ih = 0; ih < g.h; ++ih)
            for (int iw = 0; iw < g.w; ++iw)
              REQUIRE(dx[((n * g.c + ci) * g.h + ih) * g.w + iw] ==
                      math::col2im_value(dcol.data(), ld, g, n, ci, ih, iw));
    }
  }
  for (bool max : {true, false})
    for (int stride : {1, 2, 3}) {
      SECTION(cat(max ? "max" : "average", " pooling k3 s", stride)) {
        const PoolGeom g = pool_geom(2, 8, 7, 3, stride);
        const int rows = 2, planes = rows * g.c;
        const auto x = random_vector(static_cast<std::size_t>(planes) * g.h * g.w, 73);
        const auto dy = random_vector(static_cast<std::size_t>(planes) * g.oh * g.ow, 74);
        std::vector<float> y(dy.size());
        std::vector<std::int32_t> arg(dy.size());
        cpu->pool_forward(x.data(), g, rows, y.data(), max ? arg.data() : nullptr);
        std::vector<float> dx(x.size(), -7.0f);
        cpu->pool_backward(dy.data(), max ? arg.data() : nullptr, g, rows, dx.data());
        const int out = g.oh * g.ow;
        for (int p = 0; p < planes; ++p)
          for (int ih = 0; ih < g.h; ++ih)
            for (int iw = 0; iw < g.w; ++iw)
              REQUIRE(dx[(p * g.h + ih) * g.w + iw] ==
                      math::pool_backward_value(dy.data() + p * out,
                                                max ? arg.data() + p * out : nullptr, g, ih, iw));
      }
    }
}

TEST_CASE("pooling forward and backward equal plain loops", "[compute]") {
  auto cpu = make_cpu_backend(1);
  for (bool max : {true, false})
    for (int stride : {2, 1}) {
      SECTION(cat(max ? "max" : "average", " pooling, k3 stride ", stride)) {
        const PoolGeom g = pool_geom(2, 7, 8, 3, stride);
        const int rows = 2, planes = rows * g.c;
        auto x = random_vector(static_cast<std::size_t>(planes) * g.h * g.w, 61);
        auto dy = random_vector(static_cast<std::size_t>(planes) * g.oh * g.ow, 62);
        std::vector<float> y(dy.size()), expect_y(dy.size());
        std::vector<double> expect_dx(x.size(), 0.0);
        std::vector<std::int32_t> arg(dy.size());
        for (int p = 0; p < planes; ++p)
          for (int i = 0; i < g.oh; ++i)
            for (int j = 0; j < g.ow; ++j) {
              const std::size_t o = (static_cast<std::size_t>(p) * g.oh + i) * g.ow + j;
              double best = -1e30, sum = 0.0;
              std::size_t at = 0;
              for (int a = 0; a < g.k; ++a)
                for (int b = 0; b < g.k; ++b) {
                  const std::size_t idx = (static_cast<std::size_t>(p) * g.h + i * stride + a) * g.w + j * stride + b;
                  sum += x[idx];
                  if (x[idx] > best) best = x[idx], at = idx;
                }
              expect_y[o] = static_cast<float>(max ? best : sum / (g.k * g.k));
              if (max) expect_dx[at] += dy[o];
              else
                for (int a = 0; a < g.k; ++a)
                  for (int b = 0; b < g.k; ++b)
                    expect_dx[(static_cast<std::size_t>(p) * g.h + i * stride + a) * g.w + j * stride + b] +=
                        dy[o] / (g.k * g.k);
            }
        cpu->pool_forward(x.data(), g, rows, y.data(), max ? arg.data() : nullptr);
        require_close(y, expect_y, 1e-6);
        std::vector<float> dx(x.size());
        cpu->pool_backward(dy.data(), max ? arg.data() : nullptr, g, rows, dx.data());
        require_close(dx, std::vector<float>(expect_dx.begin(), expect_dx.end()), 1e-5);
      }
    }
}

TEST_CASE("group norm normalises each group and scales each channel", "[compute]") {
  auto cpu = make_cpu_backend(1);
  GroupNormGeom g;
  g.c = 6;
  g.spatial = 5;
  g.groups = 3;
  const int rows = 2;
  auto x = random_vector(static_cast<std::size_t>(rows) * g.c * g.spatial, 71);
  for (auto& v : x) v = 3.0f * v + 1.5f;  // a mean and scale to remove
  auto gamma = random_vector(g.c, 72), beta = random_vector(g.c, 73);
  std::vector<float> y(x.size()), mean(rows * g.groups), rstd(rows * g.groups);
  cpu->group_norm_forward(x.data(), gamma.data(), beta.data(), g, rows, y.data(), mean.data(),
                          rstd.data());
  const int per = g.group_size();
  for (int ng = 0; ng < rows * g.groups; ++ng) {
    double m = 0.0, v = 0.0;
    for (int i = 0; i < per; ++i) m += x[ng * per + i];
    m /= per;
    for (int i = 0; i < per; ++i) v += (x[ng * per + i] - m) * (x[ng * per + i] - m);
    v /= per;
    REQUIRE(mean[ng] == Approx(m).margin(1e-5));
    REQUIRE(rstd[ng] == Approx(1.0 / std::sqrt(v + g.eps)).epsilon(1e-5));
    for (int i = 0; i < per; ++i) {
      const int c = (ng % g.groups) * (g.c / g.groups) + i / g.spatial;
      REQUIRE(y[ng * per + i] ==
              Approx((x[ng * per + i] - m) / std::sqrt(v + g.eps) * gamma[c] + beta[c]).margin(1e-5));
    }
  }
  // Gradients of sum(y * dy): dbeta = sum dy per channel, and dx sums to zero over each group
  // (a shift of the whole group does not change its normalised values).
  auto dy = random_vector(x.size(), 74);
  std::vector<float> dx(x.size()), dgamma(g.c), dbeta(g.c);
  cpu->group_norm_backward(x.data(), dy.data(), gamma.data(), mean.data(), rstd.data(), g, rows,
                           dx.data(), dgamma.data(), dbeta.data());
  require_finite_nonzero(dx);
  for (int c = 0; c < g.c; ++c) {
    double s = 0.0;
    for (int n = 0; n < rows; ++n)
      for (int i = 0; i < g.spatial; ++i) s += dy[(n * g.c + c) * g.spatial + i];
    REQUIRE(dbeta[c] == Approx(s).margin(1e-5));
  }
  for (int ng = 0; ng < rows * g.groups; ++ng) {
    double s = 0.0;
    for (int i = 0; i < per; ++i) s += dx[ng * per + i];
    REQUIRE(s == Approx(0.0).margin(1e-4));
  }
}

TEST_CASE("dropout keeps 1 - p of the elements, scaled, with the same mask for the same key",
          "[compute]") {
  auto cpu = make_cpu_backend(1);
  const std::int64_t n = 20000;
  std::vector<float> x(n, 1.0f), y(n), again(n), other(n);
  cpu->dropout(x.data(), y.data(), n, 0.3f, 77);
  cpu->dropout(x.data(), again.data(), n, 0.3f, 77);
  cpu->dropout(x.data(), other.data(), n, 0.3f, 78);
  CHECK(y == again);
  CHECK(y != other);
  std::int64_t kept = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    REQUIRE((y[i] == 0.0f || y[i] == Approx(1.0 / 0.7)));
    REQUIRE(y[i] == math::dropout_scale(77, i, 0.3f));
    kept += y[i] != 0.0f;
  }
  CHECK(kept == Approx(0.7 * n).epsilon(0.03));
  cpu->dropout(x.data(), y.data(), n, 0.0f, 77);
  CHECK(y == x);  // evaluation: p = 0 is an exact copy
}

TEST_CASE("row sums and ReLU follow their definitions", "[compute]") {
  auto cpu = make_cpu_backend(1);
  std::vector<float> a = {1, 2, 3, -4, 5, 6}, sums = {10, 20};
  cpu->row_sums(a.data(), 2, 3, false, sums.data());
  CHECK(sums == std::vector<float>{6, 7});
  cpu->row_sums(a.data(), 2, 3, true, sums.data());
  CHECK(sums == std::vector<float>{12, 14});
  std::vector<float> r(6);
  cpu->relu(a.data(), r.data(), 6);
  CHECK(r == std::vector<float>{1, 2, 3, 0, 5, 6});
}

// ---- compressed gossip (gossip/compress_math.hpp) ---------------------------------------------

namespace {

/// Bit-for-bit equality of float vectors (so -0 and +0 differ, and NaN would show).
bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE("the CPU backend's compressed-gossip operations equal plain loops over compress_math "
          "bit for bit", "[compute][compress]") {
  // The CUDA kernels (gossip_kernels.cu) call the same compress_math functions per element;
  // these loops are what both must give.
  auto cpu = make_cpu_backend(1);
  const std::int64_t n = 1300, block = 512, blocks = 3;  // two whole blocks and a partial one
  auto v = random_vector(n, 81);
  for (std::int64_t i = 0; i < n; ++i) v[i] *= std::pow(10.0f, static_cast<float>(i % 4) - 2.0f);
  for (std::int64_t i = block; i < 2 * block; ++i) v[i] = 0.0f;  // a block of zeros
  v[3] = -0.0f;

  for (int bits : {8, 4}) {
    SECTION(cat("quantize and dequantize_add, ", bits, " bits")) {
      const int levels = math::quantize_levels(bits);
      const std::uint64_t key = 0x1234abcdULL + bits;
      std::vector<float> scales(blocks, -1.0f);
      std::vector<std::int8_t> codes(n, 99);
      cpu->quantize(v.data(), n, bits, block, key, scales.data(), codes.data());
      for (std::int64_t b = 0; b < blocks; ++b) {
        float want = 0.0f;
        for (std::int64_t i = b * block; i < std::min(n, (b + 1) * block); ++i)
          want = std::max(want, std::fabs(v[i]));
        REQUIRE(std::memcmp(&scales[b], &want, sizeof(float)) == 0);
      }
      CHECK(scales[1] == 0.0f);
      bool some_not_zero = false;
      for (std::int64_t i = 0; i < n; ++i) {
        const int want = math::quantize_code(v[i], scales[i / block], levels,
                                             math::uniform_at(key, i));
        REQUIRE(codes[i] == want);
        REQUIRE(std::abs(codes[i]) <= levels);
        if (i / block == 1) REQUIRE(codes[i] == 0);
        some_not_zero |= codes[i] != 0;
      }
      CHECK(some_not_zero);

      // Add them back, with arbitrary codes in a block whose scale is 0: that block is skipped.
      for (std::int64_t i = block; i < 2 * block; ++i) codes[i] = static_cast<std::int8_t>(i % 5);
      const float weight = 0.37f;
      auto target = random_vector(n, 82);
      auto want = target;
      for (std::int64_t i = 0; i < n; ++i)
        if (scales[i / block] != 0.0f)
          want[i] += weight * math::dequantize(codes[i], scales[i / block], levels);
      cpu->dequantize_add(target.data(), weight, scales.data(), codes.data(), n, block, bits);
      REQUIRE(same_bits(target, want));
    }
  }

  SECTION("scatter_add, add_weighted, choco_difference and choco_step") {
    const std::vector<std::uint32_t> index = {1299, 0, 7, 512, 1023, 44, 1024};  // distinct
    const auto values = random_vector(index.size(), 83);
    auto target = random_vector(n, 84);
    auto want = target;
    for (std::size_t j = 0; j < index.size(); ++j) want[index[j]] += -0.25f * values[j];
    cpu->scatter_add(target.data(), -0.25f, index.data(), values.data(),
                     static_cast<std::int64_t>(index.size()));
    REQUIRE(same_bits(target, want));

    const auto dense = random_vector(n, 85);
    for (std::int64_t i = 0; i < n; ++i) want[i] += 0.6f * dense[i];
    cpu->add_weighted(target.data(), 0.6f, dense.data(), n);
    REQUIRE(same_bits(target, want));

    const auto xhat = random_vector(n, 86), s = random_vector(n, 87);
    std::vector<float> d(n), want_d(n);
    for (std::int64_t i = 0; i < n; ++i) want_d[i] = v[i] - xhat[i];
    cpu->choco_difference(v.data(), xhat.data(), d.data(), n);
    REQUIRE(same_bits(d, want_d));

    auto x = v;
    auto want_x = v;
    for (std::int64_t i = 0; i < n; ++i) want_x[i] = v[i] + 0.45f * (s[i] - xhat[i]);
    cpu->choco_step(x.data(), s.data(), xhat.data(), 0.45f, n);
    REQUIRE(same_bits(x, want_x));
    for (std::int64_t i = 0; i < n; ++i)
      REQUIRE(want_x[i] == math::choco_step(v[i], s[i], xhat[i], 0.45f));
  }
}

// ---- the CPU backend's GEMM providers and how one is chosen -------------------------------------

namespace {

/// Checks `backend`'s current GEMM against a naive loop over transposes, odd sizes, alpha, beta
/// and padded leading dimensions; `tolerance(k, alpha)` is the error allowed a C element.
template <typename Tolerance>
void check_gemm_against_naive(Backend& backend, Tolerance tolerance) {
  struct Case { int m, n, k; float alpha, beta; int pad; };
  const Case cases[] = {{1, 1, 1, 1.0f, 0.0f, 0},     {33, 17, 65, 1.0f, 0.0f, 0},
                        {7, 13, 3, 0.75f, 0.5f, 3},   {64, 96, 128, 1.0f, 1.0f, 0},
                        {31, 257, 100, -1.5f, 2.0f, 5}, {200, 10, 784, 0.5f, 0.0f, 1}};
  for (const Case& t : cases)
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        INFO(backend.gemm_name() << " m=" << t.m << " n=" << t.n << " k=" << t.k << " trans_a="
                                 << ta << " trans_b=" << tb << " alpha=" << t.alpha
                                 << " beta=" << t.beta << " pad=" << t.pad);
        RowMajorGemm g = row_major_gemm(ta, tb, t.m, t.n, t.k, t.alpha, t.beta);
        // Leading dimensions larger than tight, each by another amount.
        g.lda += t.pad;
        g.ldb += 2 * t.pad;
        g.ldc += t.pad + (t.pad > 0 ? 1 : 0);
        const int a_rows = ta ? t.k : t.m, b_rows = tb ? t.n : t.k;
        auto a = random_vector(static_cast<std::size_t>(a_rows) * g.lda, 6);
        auto b = random_vector(static_cast<std::size_t>(b_rows) * g.ldb, 7);
        auto c0 = random_vector(static_cast<std::size_t>(t.m) * g.ldc, 8);
        auto expect = c0, got = c0;
        naive_gemm(g, a.data(), b.data(), expect.data());
        backend.gemm(g, a.data(), b.data(), got.data());
        require_finite_nonzero(got);
        const double tol = tolerance(t.k, t.alpha);
        for (std::size_t i = 0; i < got.size(); ++i) {
          const bool padding = static_cast<int>(i % static_cast<std::size_t>(g.ldc)) >= t.n;
          if (padding)  // what lies past n in a row of C is not the product's: untouched
            REQUIRE(got[i] == c0[i]);
          else
            REQUIRE(got[i] == Approx(expect[i]).margin(tol).epsilon(1e-5));
        }
      }
}

}  // namespace

TEST_CASE("every CPU GEMM matches a naive loop: transposes, odd sizes, alpha, beta, padding",
          "[compute][gemm]") {
  auto cpu = make_cpu_backend(1);
  // BLIS is among them on a machine with libblis (scripts/setup.sh installs it).
  REQUIRE(cpu_gemm_names() == std::vector<std::string>{"openblas", "onednn", "blis"});
  for (const std::string& name : cpu_gemm_names()) {
    cpu->use_gemm(name);
    CHECK(cpu->gemm_name() == name);
    check_gemm_against_naive(*cpu, [](int k, float) {
      return 1e-5 * std::sqrt(static_cast<double>(k)) + 1e-5;
    });
  }
}

TEST_CASE("train.precision: bf16 products match a naive loop to bf16's precision, or are refused "
          "with the reason", "[compute][gemm]") {
  auto cpu = make_cpu_backend(1);
  GemmRequest r;
  r.precision = gossip::Precision::kBf16;
  r.requested = "openblas";
  CHECK_THROWS_WITH(choose_gemm(*cpu, r, {}),
                    Catch::Contains("train.precision: bf16 runs oneDNN's bf16 matmul, not "
                                    "train.gemm openblas"));
  r.requested = "auto";
  const std::string why = cpu::onednn_bf16_refusal();
  if (!why.empty()) {  // a CPU without AVX512-BF16 or AMX: refused, saying so
    CHECK_THROWS_WITH(choose_gemm(*cpu, r, {}), Catch::Contains("no bf16 instructions"));
    return;
  }
  const GemmChoice c = choose_gemm(*cpu, r, {});
  CHECK(c.name == "onednn_bf16");
  CHECK(cpu->gemm_name() == "onednn_bf16");
  // bf16 keeps 8 significant bits: each product is off by up to 2^-8 of itself, and k of them
  // add up (as a random walk, sqrt(k), for random signs).
  check_gemm_against_naive(*cpu, [](int k, float alpha) {
    return std::abs(alpha) * 8.0 / 256.0 * std::sqrt(static_cast<double>(k));
  });
}

TEST_CASE("train.precision: tf32 is a GPU's: the CPU backend refuses it with the reason",
          "[compute][gemm]") {
  auto cpu = make_cpu_backend(1);
  GemmRequest r;
  r.precision = gossip::Precision::kTf32;
  CHECK_THROWS_WITH(choose_gemm(*cpu, r, {}),
                    Catch::Contains("train.precision: tf32 runs on a GPU's tensor cores; the cpu "
                                    "backend computes in fp32"));
  CHECK(gossip::parse_choice(gossip::precision_table(), "tf32", "train.precision") ==
        gossip::Precision::kTf32);
}

TEST_CASE("train.conv: the CPU backend runs im2col + GEMM and refuses cudnn with the reason",
          "[compute][conv]") {
  auto cpu = make_cpu_backend(1);
  CHECK(cpu->conv_library().empty());
  CHECK(gossip::conv_name(*cpu) == "im2col");
  CHECK(cpu->conv_line() == "convolutions: im2col + GEMM");
  CHECK_NOTHROW(gossip::use_conv(*cpu, gossip::ConvEngine::kAuto));
  CHECK_NOTHROW(gossip::use_conv(*cpu, gossip::ConvEngine::kIm2col));
  CHECK_THROWS_WITH(gossip::use_conv(*cpu, gossip::ConvEngine::kCudnn),
                    Catch::Contains("train.conv: cudnn runs on the CUDA backend with cuDNN 9; the "
                                    "cpu backend runs im2col + GEMM"));
  CHECK(gossip::parse_choice(gossip::conv_engine_table(), "im2col", "train.conv") ==
        gossip::ConvEngine::kIm2col);
  CHECK_THROWS_WITH(gossip::parse_choice(gossip::conv_engine_table(), "winograd", "train.conv"),
                    Catch::Contains("auto, cudnn"));
  // Before any peer would start: the CPU, or a GPU without cuDNN, cannot take cudnn.
  if (gossip::cuda_device_count() == 0) {
    CHECK_THAT(gossip::conv_refusal(gossip::BackendChoice::kAuto, gossip::ConvEngine::kCudnn),
               Catch::Contains("the peers would run on the CPU"));
    CHECK(gossip::precision_refusal(gossip::BackendChoice::kAuto, gossip::Precision::kBf16)
              .empty());  // the CPU's GEMM choice answers for the CPU
  }
  CHECK(gossip::conv_refusal(gossip::BackendChoice::kCpu, gossip::ConvEngine::kAuto).empty());
}

namespace {

/// A fresh, empty cache folder for one test.
std::string fresh_cache_dir(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / cat("gossip-gemm-test-", getpid(), "-", name);
  std::filesystem::remove_all(dir);
  return dir.string();
}

std::vector<std::filesystem::path> files_in(const std::string& dir) {
  std::vector<std::filesystem::path> out;
  if (std::filesystem::exists(dir))
    for (const auto& e : std::filesystem::directory_iterator(dir)) out.push_back(e.path());
  return out;
}

std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

const std::vector<RowMajorGemm> kMlpStep = {row_major_gemm(false, true, 32, 256, 784),
                                            row_major_gemm(true, false, 256, 784, 32),
                                            row_major_gemm(false, true, 32, 10, 256),
                                            row_major_gemm(true, false, 10, 256, 32),
                                            row_major_gemm(false, false, 32, 256, 10)};

}  // namespace

TEST_CASE("an explicit GEMM is honoured: train.gemm over GOSSIP_GEMM, GOSSIP_GEMM over auto",
          "[compute][gemm]") {
  auto cpu = make_cpu_backend(1);
  CHECK(cpu->gemm_name() == "openblas");  // what make_cpu_backend starts with
  const std::string dir = fresh_cache_dir("explicit");
  for (const std::string& name : cpu_gemm_names()) {
    INFO(name);
    const std::string other = name == "openblas" ? "onednn" : "openblas";
    GemmChoice c = choose_gemm(*cpu, GemmRequest{name, other, dir, 1}, kMlpStep);
    CHECK(c.name == name);
    CHECK(c.source == "train.gemm");
    CHECK(cpu->gemm_name() == name);
    c = choose_gemm(*cpu, GemmRequest{"auto", other, dir, 1}, kMlpStep);
    CHECK(c.name == other);
    CHECK(c.source == "GOSSIP_GEMM");
    CHECK(cpu->gemm_name() == other);
    CHECK(c.line() == cat("GEMM ", other, " (GOSSIP_GEMM)"));
  }
  CHECK(files_in(dir).empty());  // an explicit choice measures nothing and writes no cache
}

TEST_CASE("a bad GEMM name is an InputError naming where it came from and the choices",
          "[compute][gemm]") {
  auto cpu = make_cpu_backend(1);
  CHECK_THROWS_WITH(choose_gemm(*cpu, GemmRequest{"mkl", "", "", 1}, kMlpStep),
                    "train.gemm: unknown GEMM 'mkl' (expected auto, openblas, onednn or blis)");
  CHECK_THROWS_WITH(choose_gemm(*cpu, GemmRequest{"auto", "blas", "", 1}, kMlpStep),
                    "GOSSIP_GEMM: unknown GEMM 'blas' (expected auto, openblas, onednn or blis)");
  CHECK_THROWS_AS(cpu->use_gemm("mkl"), InputError);
  CHECK(cpu->gemm_name() == "openblas");  // left as it was
}

TEST_CASE("auto measures the candidates, picks one that exists, caches it and reads it back",
          "[compute][gemm]") {
  auto cpu = make_cpu_backend(1);
  const std::string dir = fresh_cache_dir("auto");
  const auto names = cpu_gemm_names();

  const std::vector<GemmTiming> t = time_gemms(*cpu, kMlpStep, 2);
  REQUIRE(t.size() == names.size());
  for (std::size_t i = 0; i < t.size(); ++i) {
    CHECK(t[i].name == names[i]);
    CHECK(t[i].seconds > 0.0);
    // 2 m n k per product, summed over the step's products.
    CHECK(t[i].flops == 2.0 * (32.0 * 256 * 784 * 2 + 32.0 * 10 * 256 * 2 + 32.0 * 256 * 10));
  }
  CHECK(cpu->gemm_name() == "openblas");  // timing leaves the GEMM as it was

  const GemmChoice first = choose_gemm(*cpu, GemmRequest{"auto", "", dir, 1}, kMlpStep);
  CHECK(first.source == "measured");
  CHECK(std::find(names.begin(), names.end(), first.name) != names.end());
  CHECK(cpu->gemm_name() == first.name);
  const auto files = files_in(dir);
  REQUIRE(files.size() == 1);
  CHECK_THAT(read_text(files[0]), Catch::Contains("choice: " + first.name));

  // The same machine, threads and shapes: the cached choice, whatever a new timing would say.
  // Written by hand as the other candidate, so that reading it (not measuring) is what is shown.
  const std::string other = first.name == "openblas" ? "onednn" : "openblas";
  std::ofstream(files[0], std::ios::trunc) << "gossip gemm cache 1\ncpu: test\nchoice: " << other
                                           << "\n";
  auto fresh = make_cpu_backend(1);
  GemmChoice again = choose_gemm(*fresh, GemmRequest{"auto", "", dir, 1}, kMlpStep);
  CHECK(again.name == other);
  CHECK(again.source == "cached");
  CHECK(fresh->gemm_name() == other);

  // Other shapes (or another thread count) are another key: measured again, a second file.
  again = choose_gemm(*fresh, GemmRequest{"auto", "", dir, 2}, kMlpStep);
  CHECK(again.source == "measured");
  CHECK(files_in(dir).size() == 2);
  std::filesystem::remove_all(dir);
}

TEST_CASE("a corrupt GEMM cache file is ignored with a warning and replaced, never fatal",
          "[compute][gemm]") {
  auto cpu = make_cpu_backend(1);
  const std::string dir = fresh_cache_dir("corrupt");
  choose_gemm(*cpu, GemmRequest{"auto", "", dir, 1}, kMlpStep);
  const auto files = files_in(dir);
  REQUIRE(files.size() == 1);
  const std::string bad[] = {"", "\x01\x02garbage\n", "gossip gemm cache 1\nchoice: mkl\n",
                             "gossip gemm cache 1\ncpu: x\n", "gossip gemm cache 9\nchoice: onednn\n"};
  for (const std::string& text : bad) {
    INFO(text);
    std::ofstream(files[0], std::ios::trunc | std::ios::binary) << text;
    GemmChoice c;
    REQUIRE_NOTHROW(c = choose_gemm(*cpu, GemmRequest{"auto", "", dir, 1}, kMlpStep));
    CHECK(c.source == "measured");
    const auto names = cpu_gemm_names();
    CHECK(std::find(names.begin(), names.end(), c.name) != names.end());
    // Rewritten as a good file: the next run reads it.
    CHECK(choose_gemm(*cpu, GemmRequest{"auto", "", dir, 1}, kMlpStep).source == "cached");
  }
  // A cache folder that cannot be made (a file in its place): measured, no error.
  const std::string blocked = fresh_cache_dir("blocked");
  std::ofstream(blocked) << "a file, not a folder";
  CHECK(choose_gemm(*cpu, GemmRequest{"auto", "", blocked, 1}, kMlpStep).source == "measured");
  std::filesystem::remove(blocked);
  std::filesystem::remove_all(dir);
}

TEST_CASE("the CPU backend's distances for the clipped mix are sums of math::squared_difference "
          "to float rounding, the same bits on every call", "[compute]") {
  auto cpu = make_cpu_backend(1);
  for (const std::int64_t n : {1, 15, 16, 17, 1000, 235146}) {
    const auto r = random_vector(n, 3);
    std::vector<std::vector<float>> m;
    for (int j = 0; j < 5; ++j) m.push_back(random_vector(n, 10 + j));
    m[3].assign(r.begin(), r.end());  // one message equal to r: distance 0
    const std::vector<const float*> ptr{m[0].data(), m[1].data(), nullptr, m[3].data(),
                                        m[4].data()};
    std::vector<double> got(5), again(5);
    cpu->squared_distances(r.data(), ptr.data(), 5, n, got.data());
    cpu->squared_distances(r.data(), ptr.data(), 5, n, again.data());
    CHECK(again == got);
    for (int j = 0; j < 5; ++j) {
      double want = 0.0;
      for (std::int64_t i = 0; i < n; ++i) {
        const float mi = ptr[j] ? ptr[j][i] : 0.0f;
        want += static_cast<double>(math::squared_difference(mi, r[i]));
      }
      INFO("n " << n << ", message " << j);
      CHECK(got[j] == Approx(want).epsilon(1e-5));
    }
    CHECK(got[3] == 0.0);
    // One message alone gives the bits it gives among others (each pass sums a message alone).
    double alone = 0.0;
    cpu->squared_distances(r.data(), ptr.data() + 4, 1, n, &alone);
    CHECK(alone == got[4]);
  }
  CHECK(math::clip_scale(2.0, 1.0) == 1.0);
  CHECK(math::clip_scale(2.0, 2.0) == 1.0);
  CHECK(math::clip_scale(2.0, 8.0) == 0.25);
}

