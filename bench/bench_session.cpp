// bench/bench_session.cpp: `gossip bench session` — one rank of a PeerSession network (the
// object the Python module's gossip.Peer wraps) driven round by round from C++: joins with a
// buffer of F floats and times its gossip rounds. bench/python_overhead.py starts 8 of these and
// 8 Python peers doing the same rounds through the module, and prints the ratio.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "bench/bench.hpp"
#include "gossip/args.hpp"
#include "gossip/config.hpp"
#include "gossip/core.hpp"
#include "gossip/peer.hpp"
#include "gossip/rng.hpp"
#include "gossip/topology.hpp"

namespace gossip::bench {
namespace {

const char* kHelp =
    "usage: gossip bench session CONFIG --rank R --out DIR [--tls-dir DIR] [--floats F]\n"
    "                            [--warm W] [--rounds N]\n"
    "\n"
    "One peer of CONFIG's network as the Python module runs it (a PeerSession joined with a\n"
    "buffer of F float32 values, default 80202: examples/torch_fmnist.py's CNN), driven from\n"
    "C++: W untimed rounds (default 20), then N timed rounds (default 200) of publish, collect\n"
    "and mix. Prints one JSON object: the median and mean seconds of a timed round. Start one\n"
    "per rank; bench/python_overhead.py does, beside the same rounds from Python.\n";

}  // namespace

int run_session(int argc, char** argv) {
  Args args(argc, argv, {"rank", "out", "tls-dir", "floats", "warm", "rounds"}, {});
  if (args.help()) {
    std::printf("%s", kHelp);
    return kExitOk;
  }
  const long floats = args.get_int("floats", 80202);
  const long warm = args.get_int("warm", 20);
  const long rounds = args.get_int("rounds", 200);
  if (floats <= 0 || warm < 0 || rounds <= 0)
    throw InputError("--floats and --rounds must be positive and --warm 0 or more");
  RunConfig config = load_config(args.config_path());
  Topology topology = load_topology(config.gossip.topology);
  PeerOptions opt;
  opt.rank = static_cast<int>(args.get_int("rank", -1));
  opt.out_dir = args.required("out", "the run's folder");
  opt.tls_dir = args.get_or("tls-dir", "");
  PeerSession session(std::move(config), std::move(topology), std::move(opt));
  std::vector<float> x(static_cast<std::size_t>(floats));
  auto rng = make_rng(1, session.rank(), Stream::kSim);
  for (auto& v : x) v = static_cast<float>(normal01(rng));
  session.join(x, cat("bench-", floats), warm + rounds);
  std::vector<double> seconds;
  for (long r = 0; r < warm + rounds; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    session.average();
    if (r >= warm)
      seconds.push_back(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  session.finish();
  double mean = 0.0;
  for (double s : seconds) mean += s / static_cast<double>(seconds.size());
  std::nth_element(seconds.begin(), seconds.begin() + std::ssize(seconds) / 2, seconds.end());
  std::printf("{\"median_s\": %.9f, \"mean_s\": %.9f}\n", seconds[seconds.size() / 2], mean);
  return kExitOk;
}

}  // namespace gossip::bench
