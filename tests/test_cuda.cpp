// Tests for the CUDA backend, tagged [cuda]: each operation against the CPU backend (the
// reference) on the same inputs. Without a device they pass with a warning — the shared math is
// covered by the CPU tests, and the cuBLAS argument mapping by test_compute's column-major check.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <algorithm>
#include <functional>
#include <random>
#include <vector>

#include "gossip/backend.hpp"
#include "gossip/core.hpp"
#include "gossip/layer_math.hpp"
#include "gossip/sim.hpp"
#include "gossip/topology.hpp"
#include "gossip/train.hpp"
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

TEST_CASE("the CUDA backend's pinned memory holds received values that upload and come back "
          "whole; the CPU backend has none", "[cuda]") {
  CHECK(make_cpu_backend(1)->pinned_memory() == nullptr);
  if (!have_device()) return;
  auto gpu = make_backend(BackendChoice::kCuda, 1, false);
  HostMemory* memory = gpu->pinned_memory();
  REQUIRE(memory != nullptr);
  // As the transport's receive buffers use it: a vector through the allocator, reused.
  HostFloats received{HostAllocator<float>(memory)};
  for (int round = 0; round < 3; ++round) {
    const auto values = random_vector(100'003, 10 + round);
    received.assign(values.begin(), values.end());
    DeviceArray<float> d(*gpu, values.size());
    d.upload(received.data(), received.size());
    std::vector<float> back(values.size());
    d.download(back.data(), back.size());
    REQUIRE(back == values);
  }
  HostFloats other = std::move(received);  // the allocator moves with the buffer
  CHECK(other.get_allocator().memory() == memory);
}

TEST_CASE("the CUDA backend's download_async copies on a side stream what the work queued before "
          "it left, beside the work queued after it; copy() runs in stream order", "[cuda]") {
  if (!have_device()) return;
  auto gpu = make_backend(BackendChoice::kCuda, 1, false);
  const std::size_t n = 1 << 22;  // 16 MiB: a copy long enough to overlap the fills after it
  DeviceArray<float> src(*gpu, n), stage(*gpu, n), other(*gpu, n);
  HostFloats host(n, HostAllocator<float>(gpu->pinned_memory()));
  for (int round = 1; round <= 3; ++round) {
    gpu->fill(src.data(), static_cast<float>(round), static_cast<std::int64_t>(n));
    gpu->copy(stage.data(), src.data(), stage.bytes());  // after the fill, before the next one
    gpu->fill(src.data(), -1.0f, static_cast<std::int64_t>(n));
    gpu->download_async(host.data(), stage.data(), stage.bytes());
    for (int k = 0; k < 8; ++k)  // later work on the compute stream, not on the stage
      gpu->fill(other.data(), static_cast<float>(k), static_cast<std::int64_t>(n));
    gpu->wait_downloads();
    REQUIRE(std::all_of(host.begin(), host.end(), [&](float v) { return v == round; }));
  }
  std::vector<float> back(n);
  other.download(back.data(), n);
  CHECK(back.front() == 7.0f);
  CHECK(back.back() == 7.0f);
}

TEST_CASE("a CUDA graph of queued work replays it: the same values as running it, nothing read "
          "back while capturing, the loss read after a replay; the CPU backend has no graphs",
          "[cuda]") {
  std::string why;
  CHECK(make_cpu_backend(1)->capture_begin() == "cpu backend: no CUDA graphs here");
  CHECK(make_cpu_backend(1)->capture_end(why) == nullptr);
  CHECK(why == "cpu backend: no CUDA graphs here");
  if (!have_device()) return;
  auto gpu = make_backend(BackendChoice::kCuda, 1, false);
  CHECK(gpu->capture_end(why) == nullptr);
  CHECK(why == "capture_end without capture_begin");
  const int rows = 16, cols = 10;
  const auto logits = random_vector(rows * cols, 31);
  std::vector<std::int32_t> labels(rows);
  for (int r = 0; r < rows; ++r) labels[r] = r % cols;
  DeviceArray<float> dl(*gpu, logits.size()), dg(*gpu, logits.size()), acc(*gpu, logits.size());
  DeviceArray<std::int32_t> dlab(*gpu, rows);
  dl.upload(logits.data(), logits.size());
  dlab.upload(labels.data(), rows);
  // Eager, once: the gradient, and acc = 0 + 0.5 * gradient.
  gpu->fill(acc.data(), 0.0f, rows * cols);
  const auto [loss, right] = gpu->softmax_xent(dl.data(), dlab.data(), rows, cols, dg.data());
  CHECK(loss > 0.0);
  gpu->add_weighted(acc.data(), 0.5f, dg.data(), rows * cols);
  std::vector<float> eager(logits.size());
  acc.download(eager.data(), eager.size());
  // Captured: the same work, nothing runs until replayed; each replay adds 0.5 * gradient.
  gpu->fill(acc.data(), 0.0f, rows * cols);
  REQUIRE(gpu->capture_begin().empty());
  const auto [zero_loss, zero_right] =
      gpu->softmax_xent(dl.data(), dlab.data(), rows, cols, dg.data());
  gpu->add_weighted(acc.data(), 0.5f, dg.data(), rows * cols);
  std::unique_ptr<StepGraph> graph = gpu->capture_end(why);
  REQUIRE(graph != nullptr);
  CHECK(why.empty());
  CHECK(zero_loss == 0.0);
  CHECK(zero_right == 0);
  std::vector<float> got(logits.size());
  acc.download(got.data(), got.size());
  CHECK(std::all_of(got.begin(), got.end(), [](float v) { return v == 0.0f; }));
  REQUIRE(graph->replay().empty());
  acc.download(got.data(), got.size());
  CHECK(got == eager);
  CHECK(graph->softmax_result() == std::pair<double, std::int64_t>(loss, right));
  // The backend's softmax buffers outgrown by a larger call: the graph's stay valid.
  std::vector<float> big(256 * cols, 0.0f);
  std::vector<std::int32_t> big_labels(256, 1);
  DeviceArray<float> dbig(*gpu, big.size());
  DeviceArray<std::int32_t> dbig_labels(*gpu, big_labels.size());
  dbig.upload(big.data(), big.size());
  dbig_labels.upload(big_labels.data(), big_labels.size());
  gpu->softmax_xent(dbig.data(), dbig_labels.data(), 256, cols, nullptr);
  REQUIRE(graph->replay().empty());
  acc.download(got.data(), got.size());
  for (std::size_t i = 0; i < got.size(); ++i) REQUIRE(got[i] == 2.0f * eager[i]);
  CHECK(graph->softmax_result() == std::pair<double, std::int64_t>(loss, right));
  // A capture broken by a call that cannot be captured (reading back) ends with its reason,
  // and the backend works as before.
  REQUIRE(gpu->capture_begin().empty());
  CHECK_THROWS(acc.download(got.data(), got.size()));
  CHECK(gpu->capture_end(why) == nullptr);
  CHECK_FALSE(why.empty());
  acc.download(got.data(), got.size());
  CHECK(got[0] == 2.0f * eager[0]);
}

TEST_CASE("train.graphs: step on the GPU: a trainer replaying its step as a CUDA graph ends "
          "bit-identical to one launching it call by call", "[cuda]") {
  if (!have_device()) return;
  RunConfig c = test::small_synthetic_config(1024, 256, 3);
  c.data.synthetic_dim = 16;
  c.model = test::tiny_residual_model();
  c.train.batch = 32;
  c.train.eval_batch = 256;
  const DataSets data = load_datasets(c);
  std::vector<std::int64_t> all(static_cast<std::size_t>(data.train.n));
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = static_cast<std::int64_t>(i);
  // 40 steps (past an epoch), an evaluation at step 10 (a larger batch: the backend's scratch
  // grows), the parameters halved at step 20 (as mixing writes them in place).
  auto trace = [&](GraphMode mode, std::vector<double>& losses) {
    c.train.graphs = mode;
    auto gpu = make_backend(BackendChoice::kCuda, 1, false);
    Trainer t(*gpu, c, data.train, all, 0);
    std::vector<float> params(static_cast<std::size_t>(t.num_params()));
    for (int s = 0; s < 40; ++s) {
      losses.push_back(t.step());
      if (s == 10) t.evaluate(data.test);
      if (s == 20) {
        t.download_params(params);
        for (float& v : params) v *= 0.5f;
        t.upload_params(params);
      }
    }
    t.download_params(params);
    INFO("graphs: " << t.graphs());
    CHECK(t.graphs() == graph_mode_name(mode));
    return params;
  };
  std::vector<double> eager_loss, again_loss, graph_loss;
  const std::vector<float> eager = trace(GraphMode::kOff, eager_loss);
  const std::vector<float> again = trace(GraphMode::kOff, again_loss);
  REQUIRE(again == eager);  // the eager step repeats bit for bit (else nothing below can)
  REQUIRE(again_loss == eager_loss);
  const std::vector<float> graph = trace(GraphMode::kStep, graph_loss);
  CHECK(graph_loss == eager_loss);
  CHECK(graph == eager);
  CHECK(eager_loss.back() < eager_loss.front());
}

TEST_CASE("gossip sim on the GPU with several worker threads, a backend and stream each, ends "
          "bit-identical to one worker, and near the CPU's run", "[cuda]") {
  if (!have_device()) return;
  RunConfig c = test::small_synthetic_config(1024, 256, 5);
  c.train.epochs = 2;
  c.sim.step_ms = 2.0;
  const DataSets data = load_datasets(c);
  GeneratorSpec spec;
  spec.kind = GeneratorKind::kRing;
  spec.n = 5;
  const Topology ring = make_topology(spec);
  const SimResult cpu = simulate(c, ring, data);
  c.train.backend = BackendChoice::kCuda;
  c.sim.workers = 1;
  const SimResult one = simulate(c, ring, data);
  c.sim.workers = 3;  // peers 0 and 3 on the first worker's backend, 1 and 4, 2
  const SimResult three = simulate(c, ring, data);
  CHECK(one.workers == 1);
  CHECK(three.workers == 3);
  REQUIRE(three.params_sha256.size() == 5);
  CHECK(three.params_sha256 == one.params_sha256);
  CHECK(three.evals.back().average_accuracy == one.evals.back().average_accuracy);
  CHECK(one.evals.back().average_accuracy ==
        Approx(cpu.evals.back().average_accuracy).margin(0.02));
  // gossip.overlap: each round's message comes down on the side stream during the first step.
  c.gossip.overlap = true;
  const SimResult overlapped = simulate(c, ring, data);
  c.train.backend = BackendChoice::kCpu;
  c.sim.workers = 1;
  const SimResult overlapped_cpu = simulate(c, ring, data);
  CHECK(overlapped.evals.back().average_accuracy ==
        Approx(overlapped_cpu.evals.back().average_accuracy).margin(0.02));
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
    // Queued (a training step reads the loss after its backward): the same, read later.
    gpu->queue_softmax_xent(dl.data(), dlab.data(), rows, cols, dg.data());
    gpu->fill(dl.data(), 0.0f, rows * cols);  // queued work after it does not change it
    CHECK(gpu->queued_softmax_result() == std::pair<double, std::int64_t>(loss, right));
  }
}

TEST_CASE("CUDA backends of several peers in one process, each on its own thread and stream, "
          "match the CPU (train.peers_per_process)", "[cuda]") {
  if (!have_device()) return;
  constexpr int kPeers = 4, kRounds = 40, m = 64, n = 32, k = 96;
  // Per peer and round: C = A B, then mixing C with the peer's previous C (0.5 / 0.5), and the
  // loss of C's rows as logits. On the CPU first, one peer after another.
  struct Out {
    std::vector<float> mixed;
    double loss = 0;
    std::int64_t right = 0;
  };
  auto work = [&](Backend& b, int peer, Out& out) {
    const auto g = row_major_gemm(false, false, m, n, k);
    auto a = random_vector(m * k, 10 + peer), w = random_vector(k * n, 20 + peer);
    std::vector<std::int32_t> labels(m);
    for (int r = 0; r < m; ++r) labels[r] = (r + peer) % n;
    DeviceArray<float> da(b, a.size()), dw(b, w.size()), dc(b, m * n), prev(b, m * n),
        mixed(b, m * n), grad(b, m * n);
    DeviceArray<std::int32_t> dl(b, m);
    da.upload(a.data(), a.size());
    dw.upload(w.data(), w.size());
    dl.upload(labels.data(), labels.size());
    b.fill(prev.data(), 0.0f, m * n);
    const float weights[] = {0.5f, 0.5f};
    for (int round = 0; round < kRounds; ++round) {
      b.gemm(g, da.data(), dw.data(), dc.data());
      const float* in[] = {dc.data(), prev.data()};
      b.mix(mixed.data(), in, weights, 2, m * n);
      const auto [loss, right] = b.softmax_xent(mixed.data(), dl.data(), m, n, grad.data());
      out.loss += loss;
      out.right += right;
      std::swap(prev, mixed);
    }
    out.mixed.resize(static_cast<std::size_t>(m * n));
    prev.download(out.mixed.data(), out.mixed.size());
  };
  auto cpu = make_cpu_backend(1);
  std::vector<Out> ref(kPeers), got(kPeers);
  for (int p = 0; p < kPeers; ++p) work(*cpu, p, ref[p]);
  // On the GPU: each peer's backend made and used on its own thread, as gossip peer --ranks does.
  std::vector<std::string> errors(kPeers);
  std::vector<std::thread> threads;
  for (int p = 0; p < kPeers; ++p)
    threads.emplace_back([&, p] {
      try {
        auto gpu = make_backend(BackendChoice::kCuda, 1, false);
        work(*gpu, p, got[p]);
      } catch (const std::exception& e) {
        errors[p] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  for (int p = 0; p < kPeers; ++p) {
    INFO("peer " << p << ": " << errors[p]);
    REQUIRE(errors[p].empty());
    CHECK(got[p].right == ref[p].right);
    CHECK(got[p].loss == Approx(ref[p].loss).epsilon(1e-4));
    REQUIRE(got[p].mixed.size() == ref[p].mixed.size());
    for (std::size_t i = 0; i < got[p].mixed.size(); ++i)
      REQUIRE(got[p].mixed[i] == Approx(ref[p].mixed[i]).margin(1e-3));
  }
}

namespace {

/// Runs `op` on the CPU and on the device over the same inputs and returns both outputs.
/// `op(backend, inputs, output)` gets backend pointers for every input and for the output.
std::pair<std::vector<float>, std::vector<float>> both(
    Backend& cpu, Backend& gpu, const std::vector<std::vector<float>>& inputs, std::size_t out_size,
    const std::function<void(Backend&, const std::vector<const float*>&, float*)>& op) {
  std::vector<const float*> host_in;
  for (const auto& v : inputs) host_in.push_back(v.data());
  std::vector<float> ref(out_size, 0.0f);
  op(cpu, host_in, ref.data());
  std::vector<DeviceArray<float>> dev;
  std::vector<const float*> dev_in;
  for (const auto& v : inputs) {
    dev.emplace_back(gpu, v.size());
    dev.back().upload(v.data(), v.size());
    dev_in.push_back(dev.back().data());
  }
  DeviceArray<float> out(gpu, out_size);
  gpu.fill(out.data(), 0.0f, static_cast<std::int64_t>(out_size));
  op(gpu, dev_in, out.data());
  std::vector<float> got(out_size);
  out.download(got.data(), out_size);
  return {got, ref};
}

/// Every element of `got` within `tol` of `ref`, relative to the larger of |ref| and 1.
void require_close(const std::vector<float>& got, const std::vector<float>& ref, double tol) {
  REQUIRE(got.size() == ref.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i << " of " << got.size());
    REQUIRE(std::isfinite(got[i]));
    REQUIRE(std::abs(got[i] - ref[i]) <= tol * std::max(1.0, std::abs(double(ref[i]))));
  }
}

}  // namespace

TEST_CASE("CUDA layer kernels match the CPU backend", "[cuda]") {
  if (!have_device()) return;
  auto cpu = make_cpu_backend(1);
  auto gpu = make_backend(BackendChoice::kCuda, 1, false);
  ConvGeom g;
  g.c = 3, g.h = 9, g.w = 8, g.oc = 4, g.k = 3, g.stride = 2, g.pad = 1;
  g.oh = conv_out_size(g.h, g.k, g.stride, g.pad);
  g.ow = conv_out_size(g.w, g.k, g.stride, g.pad);
  const int rows = 3;
  const std::size_t in = static_cast<std::size_t>(rows) * g.c * g.h * g.w;
  const std::size_t col = static_cast<std::size_t>(g.patch()) * rows * g.positions();
  const std::size_t out = static_cast<std::size_t>(rows) * g.oc * g.positions();
  auto x = random_vector(in, 7);
  SECTION("im2col and col2im are bit-identical") {
    auto [a, b] = both(*cpu, *gpu, {x}, col,
                       [&](Backend& be, auto& i, float* o) { be.im2col(i[0], g, rows, o); });
    REQUIRE(a == b);
    auto [c, d] = both(*cpu, *gpu, {random_vector(col, 8)}, in,
                       [&](Backend& be, auto& i, float* o) { be.col2im(i[0], g, rows, o); });
    REQUIRE(c == d);
  }
  SECTION("the convolution's layout changes are bit-identical") {
    auto bias = random_vector(g.oc, 9);
    auto [a, b] = both(*cpu, *gpu, {random_vector(out, 10), bias}, out,
                       [&](Backend& be, auto& i, float* o) { be.conv_output(i[0], i[1], g, rows, true, o); });
    REQUIRE(a == b);
    auto [c, d] = both(*cpu, *gpu, {random_vector(out, 11)}, out,
                       [&](Backend& be, auto& i, float* o) { be.conv_grad_layout(i[0], g, rows, o); });
    REQUIRE(c == d);
  }
  SECTION("pooling and group norm are bit-identical") {
    PoolGeom p;
    p.c = g.c, p.h = g.h, p.w = g.w, p.k = 3, p.stride = 2;
    p.oh = conv_out_size(p.h, p.k, p.stride, 0);
    p.ow = conv_out_size(p.w, p.k, p.stride, 0);
    const std::size_t pooled = static_cast<std::size_t>(rows) * p.c * p.oh * p.ow;
    auto [a, b] = both(*cpu, *gpu, {x}, pooled,
                       [&](Backend& be, auto& i, float* o) { be.pool_forward(i[0], p, rows, o, nullptr); });
    REQUIRE(a == b);
    auto [c, d] = both(*cpu, *gpu, {random_vector(pooled, 12)}, in,
                       [&](Backend& be, auto& i, float* o) { be.pool_backward(i[0], nullptr, p, rows, o); });
    REQUIRE(c == d);
    GroupNormGeom n;
    n.c = g.c, n.spatial = g.h * g.w, n.groups = 3;
    auto gamma = random_vector(g.c, 13), beta = random_vector(g.c, 14);
    auto [e, f] = both(*cpu, *gpu, {x, gamma, beta, std::vector<float>(2 * rows * n.groups)}, in,
                       [&](Backend& be, auto& i, float* o) {
                         float* stats = const_cast<float*>(i[3]);
                         be.group_norm_forward(i[0], i[1], i[2], n, rows, o, stats,
                                               stats + rows * n.groups);
                       });
    REQUIRE(e == f);
  }
  // The device sums each channel in a block's fixed tree, the CPU in one loop (both in double):
  // the statistics agree to rounding, evaluation (no sums) bit for bit.
  SECTION("batch norm: training, its running statistics and backward match to rounding; "
          "evaluation is bit-identical") {
    BatchNormGeom bn;
    bn.c = g.c, bn.spatial = g.h * g.w;
    const std::size_t c = static_cast<std::size_t>(bn.c);
    auto gamma = random_vector(c, 15), beta = random_vector(c, 16);
    // Training: y from the batch's statistics (mean, rstd and the running ones are scratch).
    auto [a, b] = both(*cpu, *gpu, {x, gamma, beta, std::vector<float>(4 * c)}, in,
                       [&](Backend& be, auto& i, float* o) {
                         float* s = const_cast<float*>(i[3]);
                         be.batch_norm_forward(i[0], i[1], i[2], bn, rows, true, o, s, s + c,
                                               s + 2 * c, s + 3 * c);
                       });
    require_close(a, b, 1e-5);
    // The running mean and variance it moves (from 0): the output this time.
    auto [r1, r2] = both(*cpu, *gpu, {x, gamma, beta, std::vector<float>(2 * c + in)}, 2 * c,
                         [&](Backend& be, auto& i, float* o) {
                           float* s = const_cast<float*>(i[3]);
                           be.batch_norm_forward(i[0], i[1], i[2], bn, rows, true, s + 2 * c, s,
                                                 s + c, o, o + c);
                         });
    require_close(r1, r2, 1e-5);
    // Evaluation: the running statistics normalise.
    auto running_var = random_vector(c, 17);
    for (float& v : running_var) v = std::abs(v) + 0.5f;
    auto [e, f] = both(*cpu, *gpu, {x, gamma, beta, random_vector(c, 18), running_var}, in,
                       [&](Backend& be, auto& i, float* o) {
                         be.batch_norm_forward(i[0], i[1], i[2], bn, rows, false, o, nullptr,
                                               nullptr, const_cast<float*>(i[3]),
                                               const_cast<float*>(i[4]));
                       });
    REQUIRE(e == f);
    // Backward: dx, then dgamma and dbeta.
    auto rstd = running_var;
    auto dy = random_vector(in, 19), mean = random_vector(c, 20);
    auto [h, k] = both(*cpu, *gpu, {x, dy, gamma, mean, rstd, std::vector<float>(2 * c)}, in,
                       [&](Backend& be, auto& i, float* o) {
                         float* s = const_cast<float*>(i[5]);
                         be.batch_norm_backward(i[0], i[1], i[2], i[3], i[4], bn, rows, o, s,
                                                s + c);
                       });
    require_close(h, k, 1e-5);
    auto [u, v] = both(*cpu, *gpu, {x, dy, gamma, mean, rstd}, 2 * c,
                       [&](Backend& be, auto& i, float* o) {
                         be.batch_norm_backward(i[0], i[1], i[2], i[3], i[4], bn, rows, nullptr,
                                                o, o + c);
                       });
    require_close(u, v, 1e-5);
  }
  SECTION("dropout draws the same mask") {
    auto [a, b] = both(*cpu, *gpu, {x}, in,
                       [&](Backend& be, auto& i, float* o) { be.dropout(i[0], o, in, 0.3f, 99); });
    REQUIRE(a == b);
  }
}

namespace {

/// `host` on `gpu` (any element type), and back.
template <typename T>
DeviceArray<T> upload_all(Backend& gpu, const std::vector<T>& host) {
  DeviceArray<T> d(gpu, host.size());
  d.upload(host.data(), host.size());
  return d;
}

template <typename T>
std::vector<T> download_all(const DeviceArray<T>& d) {
  std::vector<T> out(d.size());
  d.download(out.data(), out.size());
  return out;
}

}  // namespace

TEST_CASE("cuDNN's convolutions match the CPU's im2col + GEMM at each precision", "[cuda]") {
  if (!have_device()) return;
  auto cpu = make_cpu_backend(1);
  auto gpu = make_backend(BackendChoice::kCuda, 1, false);
  if (gpu->conv_library().empty()) {
    // gpu-check sets GOSSIP_EXPECT_CUDNN where cuDNN is meant to load: then this is a failure.
    REQUIRE(std::getenv("GOSSIP_EXPECT_CUDNN") == nullptr);
    WARN("cuDNN does not load here (" << gpu->conv_line() << "): comparisons skipped");
    return;
  }
  // A residual stage's shape (stride 2, padding 1) and a first layer's (one channel, no pad).
  for (const auto& [c, hw, oc, k, stride, pad] :
       {std::tuple{16, 14, 32, 3, 2, 1}, std::tuple{1, 28, 8, 5, 1, 0}}) {
    ConvGeom g;
    g.c = c, g.h = hw, g.w = hw, g.oc = oc, g.k = k, g.stride = stride, g.pad = pad;
    g.oh = conv_out_size(g.h, g.k, g.stride, g.pad);
    g.ow = conv_out_size(g.w, g.k, g.stride, g.pad);
    const int rows = 5;
    const std::size_t in = std::size_t(rows) * g.c * g.h * g.w, nw = std::size_t(g.oc) * g.patch();
    const std::size_t out = std::size_t(rows) * g.oc * g.positions();
    const std::size_t col = std::size_t(g.patch()) * rows * g.positions();
    auto x = random_vector(in, 31), w = random_vector(nw, 32), bias = random_vector(g.oc, 33);
    auto dy = random_vector(out, 34);
    // The reference: the CPU's im2col + GEMM, as the conv2d layer runs it there.
    std::vector<float> colm(col), t(out), y(out), dw(nw), db(g.oc), dcol(col), dx(in);
    cpu->im2col(x.data(), g, rows, colm.data());
    cpu->gemm(conv_forward_gemm(g, rows), w.data(), colm.data(), t.data());
    cpu->conv_output(t.data(), bias.data(), g, rows, true, y.data());
    cpu->conv_grad_layout(dy.data(), g, rows, t.data());
    cpu->gemm(conv_weight_grad_gemm(g, rows, false), t.data(), colm.data(), dw.data());
    cpu->row_sums(t.data(), g.oc, rows * g.positions(), false, db.data());
    cpu->gemm(conv_input_grad_gemm(g, rows), w.data(), t.data(), dcol.data());
    cpu->col2im(dcol.data(), g, rows, dx.data());
    // fp32 is strict (FMA math only); TF32 keeps 10 mantissa bits, bf16 7.
    for (const auto& [gemm, tol] : {std::pair{"cublas", 1e-4}, std::pair{"cublas_tf32", 2e-2},
                                    std::pair{"cublas_bf16", 6e-2}}) {
      INFO(gemm << ", c " << c << " oc " << oc << " k " << k);
      gpu->use_gemm(gemm);
      auto dx_ = upload_all(*gpu, x), dw_ = upload_all(*gpu, w), db_ = upload_all(*gpu, bias);
      auto ddy = upload_all(*gpu, dy);
      DeviceArray<float> dy_out(*gpu, out), g_w(*gpu, nw), g_b(*gpu, g.oc), g_x(*gpu, in);
      gpu->conv_forward(dx_.data(), dw_.data(), db_.data(), g, rows, true, dy_out.data());
      gpu->conv_backward(dx_.data(), dw_.data(), ddy.data(), g, rows, g_w.data(), g_b.data(),
                         g_x.data());
      // Sums over a patch (up to 144 terms) and over the batch (up to 980): scaled tolerances.
      require_close(download_all(dy_out), y, tol);
      require_close(download_all(g_b), db, 1e-4);
      require_close(download_all(g_w), dw, tol * 8);
      require_close(download_all(g_x), dx, tol * 2);
    }
    gpu->use_gemm("cublas");
  }
}

TEST_CASE("CUDA compressed-gossip kernels match the CPU backend bit for bit", "[cuda]") {
  if (!have_device()) return;
  auto cpu = make_cpu_backend(1);
  auto gpu = make_backend(BackendChoice::kCuda, 1, false);
  const std::int64_t n = 1300, block = 512, blocks = 3;
  auto v = random_vector(n, 21);
  for (std::int64_t i = block; i < 2 * block; ++i) v[i] = 0.0f;  // a block of zeros
  const auto dv = upload_all(*gpu, v);
  for (int bits : {8, 4}) {
    SECTION(cat("quantize and dequantize_add, ", bits, " bits")) {
      std::vector<float> scales(blocks);
      std::vector<std::int8_t> codes(n);
      cpu->quantize(v.data(), n, bits, block, 77, scales.data(), codes.data());
      DeviceArray<float> ds(*gpu, blocks);
      DeviceArray<std::int8_t> dc(*gpu, n);
      gpu->quantize(dv.data(), n, bits, block, 77, ds.data(), dc.data());
      REQUIRE(download_all(ds) == scales);
      REQUIRE(download_all(dc) == codes);
      auto target = random_vector(n, 22);
      auto dt = upload_all(*gpu, target);
      cpu->dequantize_add(target.data(), 0.3f, scales.data(), codes.data(), n, block, bits);
      gpu->dequantize_add(dt.data(), 0.3f, ds.data(), dc.data(), n, block, bits);
      REQUIRE(download_all(dt) == target);
    }
  }
  SECTION("scatter_add, add_weighted, choco_difference and choco_step") {
    const std::vector<std::uint32_t> index = {1299, 0, 7, 512, 1023, 44};
    const auto values = random_vector(index.size(), 23), xhat = random_vector(n, 24),
               s = random_vector(n, 25);
    const auto di = upload_all(*gpu, index);
    const auto dval = upload_all(*gpu, values), dxhat = upload_all(*gpu, xhat),
               dsum = upload_all(*gpu, s);
    auto x = random_vector(n, 26);
    auto dx = upload_all(*gpu, x);
    std::vector<float> d(n);
    DeviceArray<float> dd(*gpu, n);
    cpu->scatter_add(x.data(), -0.5f, index.data(), values.data(), 6);
    gpu->scatter_add(dx.data(), -0.5f, di.data(), dval.data(), 6);
    cpu->add_weighted(x.data(), 0.7f, s.data(), n);
    gpu->add_weighted(dx.data(), 0.7f, dsum.data(), n);
    cpu->choco_difference(x.data(), xhat.data(), d.data(), n);
    gpu->choco_difference(dx.data(), dxhat.data(), dd.data(), n);
    cpu->choco_step(x.data(), s.data(), xhat.data(), 0.4f, n);
    gpu->choco_step(dx.data(), dsum.data(), dxhat.data(), 0.4f, n);
    REQUIRE(download_all(dd) == d);
    REQUIRE(download_all(dx) == x);
  }
}

TEST_CASE("CUDA's distances for the clipped mix match the CPU backend's to rounding", "[cuda]") {
  if (!have_device()) return;
  auto cpu = make_cpu_backend(1);
  auto gpu = make_backend(BackendChoice::kCuda, 1, false);
  // The quickstart MLP's size (not a multiple of 16 or of the grid) and 11 messages, so the
  // device takes them in two launches; one null message (||r||^2) among them.
  const std::int64_t n = 235146;
  const auto r = random_vector(n, 31);
  std::vector<std::vector<float>> m;
  std::vector<DeviceArray<float>> dm;
  for (int j = 0; j < 11; ++j) {
    m.push_back(random_vector(n, 40 + j));
    for (auto& v : m.back()) v *= static_cast<float>(j + 1) * 0.5f;
    dm.push_back(upload_all(*gpu, m.back()));
  }
  std::vector<const float*> host_m, dev_m;
  for (int j = 0; j < 11; ++j) {
    host_m.push_back(j == 4 ? nullptr : m[j].data());
    dev_m.push_back(j == 4 ? nullptr : dm[j].data());
  }
  const auto dr = upload_all(*gpu, r);
  std::vector<double> want(11), got(11);
  cpu->squared_distances(r.data(), host_m.data(), 11, n, want.data());
  gpu->squared_distances(dr.data(), dev_m.data(), 11, n, got.data());
  for (int j = 0; j < 11; ++j) {
    INFO("message " << j);
    CHECK(got[j] == Approx(want[j]).epsilon(1e-5));
  }
  // The same bits again (a fixed grid: one order of the sum).
  std::vector<double> again(11);
  gpu->squared_distances(dr.data(), dev_m.data(), 11, n, again.data());
  CHECK(again == got);
}

TEST_CASE("the CUDA backend is a plugin: built with nvcc, it loads and resolves, but is only "
          "mapped into a process when a CUDA driver is present", "[cuda]") {
  const char* bin = std::getenv("GOSSIP_BIN");
  REQUIRE(bin != nullptr);
  // `gossip --version` loads the plugin on purpose (RTLD_NOW: every symbol resolved against the
  // executable) and says so.
  std::string out;
  {
    FILE* p = popen((std::string(bin) + " --version 2>&1").c_str(), "r");
    REQUIRE(p != nullptr);
    char buf[512];
    while (std::fgets(buf, sizeof buf, p)) out += buf;
    REQUIRE(pclose(p) == 0);
  }
  INFO(out);
  if (!GOSSIP_HAVE_CUDA) {
    CHECK(out.find("CUDA backend not built") != std::string::npos);
    return;
  }
  CHECK(out.find("libgossip-cuda.so loads") != std::string::npos);
  // This test process itself only maps the CUDA libraries when a driver is there.
  cuda_device_count();
  std::ifstream maps("/proc/self/maps");
  std::string line, mapped;
  while (std::getline(maps, line))
    if (line.find("libcublas") != std::string::npos) mapped = line;
  if (out.find("no CUDA driver") != std::string::npos) CHECK(mapped.empty());
  // And the plugin loads in this process too (checked last: loading it maps the libraries), as
  // in every program that picks a backend: a plugin that resolved symbols against `gossip`
  // alone failed to load here, and every [cuda] comparison above was skipped even on a GPU.
  const std::string here = cuda_plugin_check();
  INFO(here);
  CHECK(here.find("libgossip-cuda.so loads") != std::string::npos);
}
