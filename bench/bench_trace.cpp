// bench/bench_trace.cpp: `gossip bench trace` — what recording a peer's per-round timeline
// (trace.json) costs. The reference is the part of a round that is the same with or without it:
// one local step of the quickstart's MLP (784-256-128-10, batch 32) and D-PSGD's mixing with two
// ring neighbours (three saxpys over its 235k parameters), in this process, with no network (so
// a real round, which also waits for its neighbours, is longer and the share smaller). Ours is
// the same round recorded as a peer records it: the step timed as compute, a publish as send,
// a collect as wait, the mixing as the rest, the round closed. Also the recording alone, over
// many rounds. ratio = recorded round / bare round; the target is under 1.02.
#include <cblas.h>

#include <cstdio>
#include <numeric>
#include <string>
#include <vector>

#include "bench/bench.hpp"
#include "gossip/args.hpp"
#include "gossip/backend.hpp"
#include "gossip/config.hpp"
#include "gossip/core.hpp"
#include "gossip/json.hpp"
#include "gossip/timeline.hpp"
#include "gossip/train.hpp"

namespace gossip::bench {
namespace {

const char* kTraceHelp =
    "usage: gossip bench trace [--json] [--rounds N]\n"
    "\n"
    "What recording the per-round timeline (DIR/peers/R/trace.json) costs a peer. Reference,\n"
    "measured in the same run: the quickstart MLP's local step (784-256-128-10, batch 32) and\n"
    "D-PSGD's mixing with two neighbours (three saxpys), in this process; ours: the same round\n"
    "recorded as a peer records it, with the 20 encrypt spans a TLS round of the 0.94 MB\n"
    "buffer with two neighbours puts on the transport's track (clock reads around each\n"
    "seal and open, handed to the timeline). Also the recording alone per round, over many\n"
    "rounds.\n"
    "ratio = recorded round / bare round (target < 1.02). Default 200 rounds, best of 5.\n";

}  // namespace

namespace {

/// The quickstart's MLP and optimizer on synthetic data of its shape.
RunConfig quickstart_mlp_config() {
  RunConfig c;
  c.model = ModelConfig::mlp({784, 256, 128, 10});
  c.data.synthetic = true;
  c.data.synthetic_dim = 784;
  c.data.classes = 10;
  c.data.synthetic_train = 4096;
  c.data.synthetic_test = 64;
  c.train.batch = 32;
  c.optimizer.lr = 0.01;
  c.optimizer.momentum = 0.9;
  return c;
}

}  // namespace

int run_trace(int argc, char** argv) {
  Args args(argc, argv, {"rounds"}, {"json"});
  if (args.help()) {
    std::printf("%s", kTraceHelp);
    return kExitOk;
  }
  const int rounds = static_cast<int>(args.get_int("rounds", 200));
  if (rounds < 1) throw InputError("--rounds must be positive");
  const bool json = args.has("json");

  const RunConfig c = quickstart_mlp_config();
  auto cpu = make_cpu_backend(1);
  const DataSets data = load_datasets(c);
  std::vector<std::int64_t> shard(static_cast<std::size_t>(data.train.n));
  std::iota(shard.begin(), shard.end(), 0);
  Trainer trainer(*cpu, c, data.train, shard, 0);
  const auto n = static_cast<int>(trainer.num_params());
  std::vector<float> left(static_cast<std::size_t>(n), 0.01f), right(left), out(left);
  auto mix = [&] {
    cblas_sscal(n, 0.0f, out.data(), 1);
    cblas_saxpy(n, 1.0f / 3, trainer.params(), 1, out.data(), 1);
    cblas_saxpy(n, 1.0f / 3, left.data(), 1, out.data(), 1);
    cblas_saxpy(n, 1.0f / 3, right.data(), 1, out.data(), 1);
  };
  if (!json)
    std::printf("gossip bench trace: %d rounds of the quickstart MLP's step and ring mixing, "
                "best of 5\n%s\n",
                rounds, blas_kernel_line().c_str());

  const double bare = best_seconds_per_call([&] {
    trainer.step();
    mix();
  }, rounds, 5);
  std::int64_t r = 0;
  // The encrypt track of a TLS round (records of 128 KiB): 16 records opened, 4 batches sealed,
  // each timed by two clock reads on the transport's thread and put on the timeline.
  constexpr int kEncryptSpans = 20;
  std::vector<std::pair<std::chrono::steady_clock::time_point,
                        std::chrono::steady_clock::time_point>> crypto(kEncryptSpans);
  const auto encrypt_track = [&](Timeline& t) {
    for (auto& [a, b] : crypto) {
      a = std::chrono::steady_clock::now();
      b = std::chrono::steady_clock::now();
    }
    const auto t0 = std::chrono::steady_clock::time_point{};
    for (const auto& [a, b] : crypto)
      t.add(Phase::kEncrypt, std::chrono::duration<double>(a - t0).count(),
            std::chrono::duration<double>(b - t0).count());
  };
  Timeline timeline(0, [] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  });
  const double recorded = best_seconds_per_call([&] {
    timeline.begin_round(r++);
    timeline.time(Phase::kCompute, [&] { return trainer.step(); });
    timeline.time(Phase::kSend, [] {});
    timeline.mixing();
    timeline.time(Phase::kWait, [] {});
    mix();
    timeline.end_round();
    encrypt_track(timeline);
  }, rounds, 5);
  // The recording alone: the same calls around nothing, over many rounds.
  Timeline alone(0, [] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  });
  const double recording = best_seconds_per_call([&] {
    alone.begin_round(r++);
    alone.time(Phase::kCompute, [] { return 0.0; });
    alone.time(Phase::kSend, [] {});
    alone.mixing();
    alone.time(Phase::kWait, [] {});
    alone.end_round();
    encrypt_track(alone);
  }, 20000, 5);
  const double ratio = recorded / bare;
  if (json) {
    std::printf("%s\n", JsonObject()
                            .add("bench", "trace").add("rounds", rounds)
                            .add("round_ms", bare * 1e3).add("recorded_round_ms", recorded * 1e3)
                            .add("recording_us_per_round", recording * 1e6)
                            .add("recording_share", recording / bare).add("ratio", ratio)
                            .str().c_str());
    return kExitOk;
  }
  std::printf("\n%14s  %18s  %22s  %8s\n", "round ms", "recorded round ms",
              "recording us/round", "ratio");
  std::printf("%14.3f  %18.3f  %22.3f  %8.3f\n", bare * 1e3, recorded * 1e3, recording * 1e6,
              ratio);
  std::printf("\nrecording the timeline costs %.2f us a round, %.3f%% of the bare round (target "
              "< 2%%)\n",
              recording * 1e6, 100.0 * recording / bare);
  return kExitOk;
}

}  // namespace gossip::bench
