// cli/bench.cpp: `gossip bench NAME` dispatches to the benchmarks in bench/.
#include <cstdio>
#include <cstring>

#include "bench/bench.hpp"
#include "gossip/args.hpp"
#include "src/cli/commands.hpp"
#include "gossip/core.hpp"

namespace gossip::cli {
namespace {

// Add a benchmark here and its file in bench/meson.build.
const Subcommand kBenches[] = {
    {"step", "time per training step vs PyTorch; GFLOP/s vs bare sgemm", bench::run_step},
    {"sim", "1024 virtual peers: round time, mixing share; mixing vs bare saxpy", bench::run_sim},
    {"gossip", "one gossip round of 8/16 peer processes vs torch.distributed gloo",
     bench::run_gossip},
    {"wan", "8 peers on emulated 1 Gbit/s links (root): 4 algorithms vs gloo all-reduce",
     bench::run_wan},
    {"session", "one PeerSession peer's rounds driven from C++ (bench/python_overhead.py)",
     bench::run_session},
    {"trace", "what recording the per-round timeline (trace.json) costs a round",
     bench::run_trace},
    {"mix", "gossip.aggregate's cost: clipped, trimmed_mean, median vs mean mixing",
     bench::run_mix},
};

void usage() {
  std::printf("usage: gossip bench NAME [--json] [options] (gossip bench NAME --help)\n\n"
              "Each benchmark measures a reference in the same run and reports ratio = ours /\n"
              "reference; --json prints one JSON object with a `ratio` field.\n\nbenchmarks:\n");
  print_subcommands(kBenches, 8);
}

}  // namespace

int run_bench(int argc, char** argv) {
  if (wants_usage(argc, argv)) {
    usage();
    return argc < 2 ? kExitBadInput : kExitOk;
  }
  for (const auto& b : kBenches)
    if (!std::strcmp(argv[1], b.name)) return b.run(argc - 1, argv + 1);
  throw InputError(cat("unknown benchmark '", argv[1], "' (see gossip bench --help)"));
}

}  // namespace gossip::cli
