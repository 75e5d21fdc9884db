// bench/bench_gossip.cpp: `gossip bench gossip` — one gossip round (publish, collect, mix) of
// the 0.94 MB MLP buffer for 8 and 16 peer processes on a ring over loopback, against
// torch.distributed + gloo doing the same neighbour averaging with isend/irecv in the same run
// (when Debian's python3-torch is installed), and achieved bytes/s against a plain loopback
// socket pair measured in the same run.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <thread>
#include <vector>

#include "../src/cli/args.hpp"
#include "bench.hpp"
#include "gossip/backend.hpp"
#include "gossip/core.hpp"
#include "gossip/model.hpp"
#include "gossip/net.hpp"
#include "gossip/rng.hpp"

namespace gossip::bench {
namespace {

const char* kHelp =
    "usage: gossip bench gossip [--json] [--rounds N] [--peers 8,16]\n"
    "\n"
    "One gossip round (publish to both ring neighbours, collect theirs, mix with weights 1/3)\n"
    "of the MLP 784-256-128-10 parameter buffer (235146 floats, 0.94 MB) for 8 and 16 peer\n"
    "processes over loopback. Reference in the same run: torch.distributed with gloo doing the\n"
    "same averaging with isend/irecv (Debian's python3-torch); ratio = ours / gloo (target\n"
    "<= 0.5). Also the bytes/s the network moved against a plain loopback socket pair.\n";

constexpr std::int64_t kFloats = 235146;  // MLP 784-256-128-10

/// One peer process of the benchmark: R timed rounds; prints its seconds per round.
int worker(int rank, int peers, int base_port, int rounds) {
  NetConfig cfg;
  cfg.rank = rank;
  cfg.size = peers;
  for (int r = 0; r < peers; ++r) cfg.addresses.push_back(cat("127.0.0.1:", base_port + r));
  const int left = (rank + peers - 1) % peers, right = (rank + 1) % peers;
  cfg.neighbours = {std::min(left, right), std::max(left, right)};
  cfg.handshake.run_id = "bench";
  cfg.handshake.layer_sizes = {784, 256, 128, 10};
  cfg.handshake.param_count = kFloats;
  cfg.log = [](const std::string&) {};
  NetExchange ex(std::move(cfg));
  auto cpu = make_cpu_backend(1);
  std::vector<float> x(kFloats), out(kFloats);
  auto rng = make_rng(1, rank, Stream::kSim);
  for (auto& v : x) v = static_cast<float>(normal01(rng));
  std::vector<int> nbrs = {std::min(left, right), std::max(left, right)};
  const int warm = 3;
  auto t0 = std::chrono::steady_clock::now();
  for (int r = 0; r < rounds + warm; ++r) {
    if (r == warm) t0 = std::chrono::steady_clock::now();
    ex.publish(r, x, 1.0, nbrs);
    auto in = ex.collect(r, nbrs, CollectOptions{});
    if (in.size() != nbrs.size()) throw RuntimeError(cat("rank ", rank, ": lost a neighbour"));
    // Ascending order with this peer at its place, as the algorithms mix.
    std::vector<const float*> bufs;
    for (const auto& m : in) {
      if (m.peer > rank && bufs.size() == static_cast<std::size_t>(&m - in.data()))
        bufs.push_back(x.data());
      bufs.push_back(m.params.data());
    }
    if (bufs.size() < 3) bufs.push_back(x.data());
    const float w[3] = {1.0f / 3, 1.0f / 3, 1.0f / 3};
    cpu->mix(out.data(), bufs.data(), w, 3, kFloats);
    std::swap(x, out);
  }
  const double per_round =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / rounds;
  std::printf("%.9f %llu\n", per_round, static_cast<unsigned long long>(ex.bytes_sent()));
  return 0;
}

/// Starts `peers` worker processes; returns the slowest rank's seconds per round.
double run_ours(int peers, int rounds, int base_port) {
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  std::vector<std::pair<pid_t, FILE*>> kids;
  for (int r = 0; r < peers; ++r) {
    const std::string cmd = cat("'", self, "' bench gossip --worker ", r, " --peers ", peers,
                                " --port ", base_port, " --rounds ", rounds);
    FILE* p = popen(cmd.c_str(), "r");
    if (!p) throw RuntimeError("cannot start a benchmark peer");
    kids.push_back({0, p});
  }
  double worst = 0.0;
  for (auto& [pid, p] : kids) {
    double s = 0.0;
    unsigned long long bytes = 0;
    if (std::fscanf(p, "%lf %llu", &s, &bytes) != 2) s = -1.0;
    const int rc = pclose(p);
    if (s < 0 || rc != 0) throw RuntimeError("a benchmark peer failed");
    worst = std::max(worst, s);
  }
  return worst;
}

/// Bytes/s of one TCP stream over loopback between two threads (the plain-socket reference).
double loopback_bandwidth() {
  int ls = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(ls, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  listen(ls, 1);
  socklen_t len = sizeof addr;
  getsockname(ls, reinterpret_cast<sockaddr*>(&addr), &len);
  const std::size_t chunk = 1 << 20, total = std::size_t(512) << 20;
  std::thread sender([&] {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    connect(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    std::vector<char> buf(chunk, 1);
    for (std::size_t sent = 0; sent < total;) {
      const ssize_t k = send(s, buf.data(), chunk, 0);
      if (k <= 0) break;
      sent += static_cast<std::size_t>(k);
    }
    close(s);
  });
  int c = accept(ls, nullptr, nullptr);
  std::vector<char> buf(chunk);
  const auto t0 = std::chrono::steady_clock::now();
  std::size_t got = 0;
  for (ssize_t k; (k = recv(c, buf.data(), chunk, 0)) > 0;) got += static_cast<std::size_t>(k);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  sender.join();
  close(c);
  close(ls);
  return got / s;
}

}  // namespace

int run_gossip(int argc, char** argv) {
  cli::Args args(argc, argv, {"rounds", "peers", "worker", "port"}, {"json"});
  if (args.help()) {
    std::printf("%s", kHelp);
    return kExitOk;
  }
  const int rounds = static_cast<int>(args.get_int("rounds", 40));
  if (rounds <= 0) throw InputError("--rounds must be positive");
  if (args.get("worker"))
    return worker(static_cast<int>(args.get_int("worker", 0)),
                  static_cast<int>(args.get_int("peers", 8)),
                  static_cast<int>(args.get_int("port", 0)), rounds);

  std::vector<int> sizes;
  for (const std::string& part : {args.get_or("peers", "8,16")}) {
    std::size_t pos = 0;
    while (pos < part.size()) {
      const auto comma = part.find(',', pos);
      sizes.push_back(std::atoi(part.substr(pos, comma - pos).c_str()));
      if (sizes.back() < 3) throw InputError("--peers: each size must be at least 3");
      if (comma == std::string::npos) break;
      pos = comma + 1;
    }
  }
  const bool json = args.has("json");
  const auto python = torch_python();
  const int port = 23000 + static_cast<int>(getpid() % 8000);
  if (!json) {
    std::printf("gossip bench gossip: ring, %lld floats (%.2f MB) per message, loopback\n%s\n",
                static_cast<long long>(kFloats), kFloats * 4 / 1e6, blas_kernel_line().c_str());
    if (!python)
      std::printf("gloo reference: not available (install it with: apt-get install "
                  "python3-torch); reporting our figures alone\n");
  }
  const double loopback = loopback_bandwidth();
  struct Row {
    int peers;
    double ours, gloo;
  };
  std::vector<Row> rows;
  for (int n : sizes) {
    Row r{n, run_ours(n, rounds, port), 0.0};
    if (python) {
      auto line = run_python(*python, "torch_gossip.py",
                             {std::to_string(n), std::to_string(kFloats), std::to_string(rounds),
                              std::to_string(port + 100)});
      if (line) r.gloo = json_field(*line, "seconds_per_round").value_or(0.0);
    }
    rows.push_back(r);
  }
  // Bytes the whole ring moves in one round: every peer sends its buffer to two neighbours.
  auto ring_bytes = [](int n) { return 2.0 * n * (kFloats * 4.0); };
  const Row& main = rows.front();
  const double ratio = main.gloo > 0 ? main.ours / main.gloo : 0.0;
  if (json) {
    std::printf("{\"bench\": \"gossip\", \"loopback_bytes_per_s\": %.0f", loopback);
    for (const auto& r : rows)
      std::printf(", \"p%d_ours_ms\": %.3f, \"p%d_gloo_ms\": %.3f, \"p%d_bytes_per_s\": %.0f", r.peers,
                  r.ours * 1e3, r.peers, r.gloo * 1e3, r.peers, ring_bytes(r.peers) / r.ours);
    if (main.gloo > 0)
      std::printf(", \"ratio\": %.4f}\n", ratio);
    else
      std::printf(", \"ratio\": null}\n");
    return kExitOk;
  }
  std::printf("plain loopback socket pair: %.2f GB/s\n\n", loopback / 1e9);
  std::printf("%6s  %14s  %14s  %8s  %14s  %12s\n", "peers", "ours ms/round", "gloo ms/round",
              "ratio", "ours GB/s", "vs loopback");
  for (const auto& r : rows) {
    const auto [g, rat] = reference_cells(r.ours, r.gloo, 1e3, 2);
    const double bps = ring_bytes(r.peers) / r.ours;
    std::printf("%6d  %14.2f  %14s  %8s  %14.2f  %11.2fx\n", r.peers, r.ours * 1e3, g.c_str(),
                rat.c_str(), bps / 1e9, bps / loopback);
  }
  if (main.gloo > 0)
    std::printf("\nratio (%d peers, ours / gloo): %.3f  (target <= 0.5)\n", main.peers, ratio);
  return kExitOk;
}

}  // namespace gossip::bench
