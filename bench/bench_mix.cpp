// bench/bench_mix.cpp: `gossip bench mix` — what a robust aggregate (gossip.aggregate) costs a
// round's mixing. Three peers on a ring, so each has two neighbours, hold the quickstart MLP's
// 235,146 parameters in this process. They exchange through the in-memory network and mix with
// D-PSGD (weights 1/3). The timed part is the three mix_phase calls of a round: the collect,
// the hygiene check for NaN or Inf, and the aggregate's sums. The publishes before them are not
// timed. The reference is `mean` in the same run (today's mixing, hygiene included); ratio =
// clipped / mean (the target is 1.5 at most). trimmed_mean and median are printed beside it.
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <memory>
#include <vector>

#include "bench/bench.hpp"
#include "gossip/args.hpp"
#include "gossip/backend.hpp"
#include "gossip/config.hpp"
#include "gossip/core.hpp"
#include "gossip/gossip.hpp"
#include "gossip/json.hpp"
#include "gossip/rng.hpp"
#include "gossip/topology.hpp"
#include "sim/sim_network.hpp"

namespace gossip::bench {
namespace {

const char* kMixHelp =
    "usage: gossip bench mix [--json] [--rounds N] [--peers P]\n"
    "\n"
    "What gossip.aggregate costs a round's mixing: three peers on a ring (two neighbours each)\n"
    "with the quickstart MLP's 235,146 parameters, in this process, mixing with D-PSGD; with\n"
    "--peers P (3 to 9), P peers of the complete graph, so P values a coordinate for\n"
    "trimmed_mean and median (a sorting network above three, not the ring's median of three). Timed:\n"
    "the three mix_phase calls of a round (collect, the NaN/Inf check, the aggregate's sums);\n"
    "the publishes before them are not. Reference in the same run: gossip.aggregate mean.\n"
    "ratio = clipped / mean (target <= 1.5); trimmed_mean and median beside it.\n"
    "Default 50 rounds, best of 5.\n";

constexpr std::int64_t kParams = 235146;  // MLP 784-256-128-10

/// Seconds per round of the peers' mix_phase under `aggregate`, over `rounds` rounds, for
/// `peers` peers (3: a ring; more: the complete graph).
double mix_seconds(Aggregate aggregate, int rounds, int peers) {
  const int kPeers = peers;
  GeneratorSpec spec;
  spec.kind = peers == 3 ? GeneratorKind::kRing : GeneratorKind::kComplete;
  spec.n = kPeers;
  const Topology ring = make_topology(spec);
  GossipConfig g;
  g.aggregate.kind = aggregate;
  auto cpu = make_cpu_backend(1);
  std::vector<std::vector<float>> x(kPeers, std::vector<float>(kParams));
  for (int p = 0; p < kPeers; ++p) {
    auto rng = make_rng(1, p, Stream::kSynthetic);
    for (auto& v : x[p]) v = static_cast<float>(normal01(rng));
  }
  SimNetwork network(kPeers, kParams, 1, SimConfig{}, 1);
  std::vector<std::unique_ptr<Algorithm>> algs;
  for (int p = 0; p < kPeers; ++p)
    algs.push_back(make_algorithm(Learner{cpu.get(), x[p].data(), kParams, {}},
                                  network.exchange(p), ring, g));
  double total = 0.0;
  for (int r = 0; r < rounds; ++r) {
    for (auto& a : algs) a->local_phase(r);
    const auto t0 = std::chrono::steady_clock::now();
    for (auto& a : algs) a->mix_phase(r);
    total += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  return total / rounds;
}

/// The best of `reps` runs of each aggregate, the runs interleaved (mean, clipped, trimmed_mean,
/// median, mean, ...) so that a slow spell of a noisy machine falls on all of them alike.
std::array<double, 4> best_mix_seconds(int rounds, int reps, int peers) {
  constexpr Aggregate kAll[] = {Aggregate::kMean, Aggregate::kClipped, Aggregate::kTrimmedMean,
                                Aggregate::kMedian};
  std::array<double, 4> best{1e300, 1e300, 1e300, 1e300};
  for (int k = 0; k < reps; ++k)
    for (std::size_t a = 0; a < 4; ++a) best[a] = std::min(best[a], mix_seconds(kAll[a], rounds, peers));
  return best;
}

}  // namespace

int run_mix(int argc, char** argv) {
  Args args(argc, argv, {"rounds", "peers"}, {"json"});
  if (args.help()) {
    std::printf("%s", kMixHelp);
    return kExitOk;
  }
  const long rounds = args.get_int("rounds", 50);
  if (rounds < 1 || rounds > 100000) throw InputError("--rounds must be in 1..100000");
  const long peers = args.get_int("peers", 3);
  if (peers < 3 || peers > 9) throw InputError("--peers must be in 3..9");
  const bool json = args.has("json");
  if (!json)
    std::printf("gossip bench mix: %ld %s peers, %lld parameters, %ld rounds, best of 5\n%s\n",
                peers, peers == 3 ? "ring" : "complete-graph", static_cast<long long>(kParams),
                rounds, blas_kernel_line().c_str());
  const int r = static_cast<int>(rounds);
  const auto [mean, clipped, trimmed, median] = best_mix_seconds(r, 5, static_cast<int>(peers));
  const double ratio = clipped / mean;
  if (json) {
    JsonObject o;
    o.add("bench", "mix")
        .add("rounds", static_cast<std::int64_t>(rounds))
        .add("peers", static_cast<std::int64_t>(peers))
        .add("mean_ms", mean * 1e3)
        .add("clipped_ms", clipped * 1e3)
        .add("trimmed_mean_ms", trimmed * 1e3)
        .add("median_ms", median * 1e3)
        .add("ratio", ratio)
        .add("trimmed_mean_ratio", trimmed / mean)
        .add("median_ratio", median / mean);
    std::printf("%s\n", o.str().c_str());
    return kExitOk;
  }
  std::printf("%-14s %12s %8s\n", "aggregate", "ms a round", "ratio");
  std::printf("%-14s %12.3f %8s\n", "mean (ref)", mean * 1e3, "1.00");
  std::printf("%-14s %12.3f %8.2f\n", "clipped", clipped * 1e3, ratio);
  std::printf("%-14s %12.3f %8.2f\n", "trimmed_mean", trimmed * 1e3, trimmed / mean);
  std::printf("%-14s %12.3f %8.2f\n", "median", median * 1e3, median / mean);
  std::printf("ratio = clipped / mean = %.2f (target <= 1.5)\n", ratio);
  return kExitOk;
}

}  // namespace gossip::bench
