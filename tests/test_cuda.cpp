// Tests for the CUDA backend, tagged [cuda]: each operation against the CPU backend (the
// reference) on the same inputs. Without a device they pass with a warning — the shared math is
// covered by the CPU tests, and the cuBLAS argument mapping by test_compute's column-major check.
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <random>
#include <vector>

#include "gossip/backend.hpp"
#include "tests/helpers.hpp"
#include "gossip_config.h"

using namespace gossip;
using gossip::test::random_vector;

namespace {

bool have_device() {
  if (cuda_device_count() > 0) return true;
  WARN("no CUDA device present (build has CUDA backend: " << (GOSSIP_HAVE_CUDA ? "yes" : "no")
                                                         << "): [cuda] comparisons skipped");
  return false;
}

std::vector<float> on_device(Backend& gpu, const std::vector<float>& host,
                             const std::function<void(float*)>& op) {
  DeviceArray<float> d(gpu, host.size());
  d.upload(host.data(), host.size());
  op(d.data());
  std::vector<float> out(host.size());
  d.download(out.data(), out.size());
  return out;
}

}  // namespace

TEST_CASE("CUDA GEMM matches the CPU backend for every transpose pair", "[cuda]") {
  if (!have_device()) return;
  auto cpu = make_cpu_backend(1);
  auto gpu = make_backend(BackendChoice::kCuda, 1, false);
  const int m = 31, n = 19, k = 45;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      const auto g = row_major_gemm(ta, tb, m, n, k);
      auto a = random_vector(m * k, 1), b = random_vector(k * n, 2);
      std::vector<float> ref(m * n, 0.0f);
      cpu->gemm(g, a.data(), b.data(), ref.data());
      DeviceArray<float> da(*gpu, a.size()), db(*gpu, b.size()), dc(*gpu, ref.size());
      da.upload(a.data(), a.size());
      db.upload(b.data(), b.size());
      gpu->gemm(g, da.data(), db.data(), dc.data());
      std::vector<float> got(ref.size());
      dc.download(got.data(), got.size());
      for (std::size_t i = 0; i < got.size(); ++i) {
        REQUIRE(std::isfinite(got[i]));
        REQUIRE(got[i] == Approx(ref[i]).margin(1e-4));
      }
    }
}

TEST_CASE("CUDA element-wise kernels match the CPU backend", "[cuda]") {
  if (!have_device()) return;
  auto cpu = make_cpu_backend(1);
  auto gpu = make_backend(BackendChoice::kCuda, 1, false);
  const int rows = 8, cols = 10;
  auto y = random_vector(rows * cols, 3), bias = random_vector(cols, 4);
  SECTION("bias + ReLU") {
    auto ref = y;
    cpu->bias_act(ref.data(), bias.data(), rows, cols, true);
    DeviceArray<float> db(*gpu, cols);
    db.upload(bias.data(), cols);
    auto got = on_device(*gpu, y, [&](float* p) { gpu->bias_act(p, db.data(), rows, cols, true); });
    REQUIRE(got == ref);
  }
  SECTION("mixing is bit-identical (no FMA contraction on the device)") {
    auto a = random_vector(5000, 5), b = random_vector(5000, 6);
    const float w[] = {0.25f, 0.75f};
    std::vector<float> ref(5000);
    const float* in[] = {a.data(), b.data()};
    cpu->mix(ref.data(), in, w, 2, 5000);
    DeviceArray<float> da(*gpu, 5000), dbuf(*gpu, 5000), out(*gpu, 5000);
    da.upload(a.data(), 5000);
    dbuf.upload(b.data(), 5000);
    const float* din[] = {da.data(), dbuf.data()};
    gpu->mix(out.data(), din, w, 2, 5000);
    std::vector<float> got(5000);
    out.download(got.data(), 5000);
    REQUIRE(got == ref);
  }
  SECTION("softmax cross-entropy") {
    std::vector<std::int32_t> labels = {0, 1, 2, 3, 4, 5, 6, 7};
    std::vector<float> gref(rows * cols);
    auto [loss_ref, right_ref] = cpu->softmax_xent(y.data(), labels.data(), rows, cols, gref.data());
    DeviceArray<float> dl(*gpu, y.size()), dg(*gpu, y.size());
    DeviceArray<std::int32_t> dlab(*gpu, rows);
    dl.upload(y.data(), y.size());
    dlab.upload(labels.data(), rows);
    auto [loss, right] = gpu->softmax_xent(dl.data(), dlab.data(), rows, cols, dg.data());
    CHECK(loss == Approx(loss_ref).epsilon(1e-5));
    CHECK(right == right_ref);
  }
}
