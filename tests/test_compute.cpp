// Tests for compute: the row-major -> column-major GEMM mapping (what cuBLAS receives) against
// column-major cblas_sgemm and a naive triple loop; the CPU backend's element-wise ops and mixing
// against plain loops over gossip::math.
#include <catch2/catch.hpp>
#include <cblas.h>

#include <cmath>
#include <random>
#include <vector>

#include "gossip/backend.hpp"
#include "tests/helpers.hpp"
#include "gossip/gemm.hpp"
#include "gossip/math.hpp"

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
