// bench/fma_peak.cpp: the physical limit `gossip bench step` compares against: one core's fp32
// FMA rate, measured by a loop of independent fused multiply-adds in the widest vectors the CPU
// has (AVX-512, else AVX2, chosen at run time with __builtin_cpu_supports), with enough
// accumulators (16) to cover the FMA latency on two FMA ports. No memory traffic: the
// accumulators stay in registers, so the rate is what the core's FMA units can do.
#include <immintrin.h>

#include <algorithm>
#include <chrono>

#include "bench/bench.hpp"

namespace gossip::bench {
namespace {

constexpr int kAccumulators = 16;
// A repetition is about 3 ms of FMAs (AVX-512 at ~180 GFLOP/s); the best of many short ones is
// the core's rate even on a machine shared with other work (a preempted one is just not best).
constexpr long kIterations = 1'000'000;
constexpr int kRepetitions = 30;

/// Runs `iters` rounds of kAccumulators independent FMAs; returns a value that depends on all
/// of them (so none is optimised away).
__attribute__((target("avx512f"))) float fma_avx512(long iters) {
  __m512 acc[kAccumulators];
  for (int i = 0; i < kAccumulators; ++i) acc[i] = _mm512_set1_ps(0.001f * static_cast<float>(i));
  const __m512 mul = _mm512_set1_ps(0.999999f), add = _mm512_set1_ps(1e-7f);
  for (long n = 0; n < iters; ++n)
    for (int i = 0; i < kAccumulators; ++i) acc[i] = _mm512_fmadd_ps(acc[i], mul, add);
  __m512 sum = acc[0];
  for (int i = 1; i < kAccumulators; ++i) sum = _mm512_add_ps(sum, acc[i]);
  return _mm512_reduce_add_ps(sum);
}

__attribute__((target("avx2,fma"))) float fma_avx2(long iters) {
  __m256 acc[kAccumulators];
  for (int i = 0; i < kAccumulators; ++i) acc[i] = _mm256_set1_ps(0.001f * static_cast<float>(i));
  const __m256 mul = _mm256_set1_ps(0.999999f), add = _mm256_set1_ps(1e-7f);
  for (long n = 0; n < iters; ++n)
    for (int i = 0; i < kAccumulators; ++i) acc[i] = _mm256_fmadd_ps(acc[i], mul, add);
  __m256 sum = acc[0];
  for (int i = 1; i < kAccumulators; ++i) sum = _mm256_add_ps(sum, acc[i]);
  alignas(32) float out[8];
  _mm256_store_ps(out, sum);
  float s = 0.0f;
  for (float v : out) s += v;
  return s;
}

/// Without FMA instructions: separate multiply and add on SSE vectors (4 lanes), counted as 2
/// flops per lane as an FMA would be.
float mul_add_sse(long iters) {
  __m128 acc[kAccumulators];
  for (int i = 0; i < kAccumulators; ++i) acc[i] = _mm_set1_ps(0.001f * static_cast<float>(i));
  const __m128 mul = _mm_set1_ps(0.999999f), add = _mm_set1_ps(1e-7f);
  for (long n = 0; n < iters; ++n)
    for (int i = 0; i < kAccumulators; ++i) acc[i] = _mm_add_ps(_mm_mul_ps(acc[i], mul), add);
  __m128 sum = acc[0];
  for (int i = 1; i < kAccumulators; ++i) sum = _mm_add_ps(sum, acc[i]);
  alignas(16) float out[4];
  _mm_store_ps(out, sum);
  return out[0] + out[1] + out[2] + out[3];
}

}  // namespace

FmaPeak measure_fma_peak() {
  FmaPeak p;
  float (*loop)(long) = mul_add_sse;
  int lanes = 4;
  p.isa = "SSE (mul + add)";
  if (__builtin_cpu_supports("avx512f")) {
    loop = fma_avx512;
    lanes = 16;
    p.isa = "AVX-512 FMA";
  } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    loop = fma_avx2;
    lanes = 8;
    p.isa = "AVX2 FMA";
  }
  volatile float sink = loop(kIterations / 4);  // warm-up: the core's vector units, its clock
  double best = 1e300;
  for (int r = 0; r < kRepetitions; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    sink = loop(kIterations);
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
                              .count());
  }
  (void)sink;
  p.gflops = 2.0 * lanes * kAccumulators * static_cast<double>(kIterations) / best / 1e9;
  return p;
}

}  // namespace gossip::bench
