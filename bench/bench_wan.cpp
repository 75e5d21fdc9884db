// bench/bench_wan.cpp: `gossip bench wan` — rounds of the MLP (one local SGD step and one
// exchange of the 0.94 MB parameter buffer) by 8 peer processes on emulated links: each peer in
// its own network namespace behind a rate-limited veth link (the launcher's EmulatedNetwork,
// which `gossip run --netem` uses), talking TLS over TCP as separate hosts would. Four
// configurations: ring all-reduce, D-PSGD on the ring, D-PSGD on the one-peer exponential graph
// with overlap, CHOCO-SGD top-1% on the ring; beside each, the simulator's prediction for the
// same links (sim.bandwidth_mbps and sim.latency_ms from the same --netem text). The outside
// reference is torch.distributed's gloo all-reduce run in the same namespaces, when Debian's
// python3-torch is installed; without it the ratios are left empty, never guessed.
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>
#include <vector>

#include "bench/bench.hpp"
#include "gossip_config.h"
#include "gossip/args.hpp"
#include "gossip/backend.hpp"
#include "gossip/compress.hpp"
#include "gossip/config.hpp"
#include "gossip/core.hpp"
#include "gossip/gossip.hpp"
#include "gossip/json.hpp"
#include "gossip/model.hpp"
#include "gossip/net.hpp"
#include "gossip/progress.hpp"
#include "gossip/rng.hpp"
#include "gossip/topology.hpp"
#include "gossip/train.hpp"
#include "sim/sim_network.hpp"
#include "src/launcher/emulated_network.hpp"

namespace gossip::bench {
namespace {

const char* kHelp =
    "usage: gossip bench wan [--json] [--rounds N] [--peers N] [--netem SPEC]\n"
    "                        [--congestion NAME] [--repeats R] [--relay]\n"
    "\n"
    "Needs root and iproute2 (it makes a network namespace per peer, as gossip run --netem).\n"
    "Runs --peers (8) peer processes, each in its own network namespace behind a veth link\n"
    "limited to --netem (rate=1gbit) each way, over TLS on TCP, for --rounds (30) timed rounds\n"
    "of the MLP 784-256-128-10 (one SGD step at batch 32 on synthetic data, then the exchange):\n"
    "  allreduce        ring all-reduce (gossip.algorithm: allreduce)\n"
    "  dpsgd_ring       D-PSGD on the ring\n"
    "  onepeer_overlap  D-PSGD on the one-peer exponential graph, gossip.overlap: true\n"
    "  choco_ring       CHOCO-SGD, top_k 1%, on the ring\n"
    "and reports seconds per round (the slowest peer), bytes per peer per round (as counted by\n"
    "the exchange, and as the peer's interface sent them, TCP/IP and TLS included), the CPU\n"
    "time a peer process used per round (and that times peers / cores), and the\n"
    "simulator's predicted seconds per round for the same links and this machine's CPU: the\n"
    "step measured alone, the peers sharing the cores (sim.cores), the CPU a byte and a message\n"
    "cost (sim.byte_cpu_ns, sim.message_cpu_us: from the peers first passing the buffer, then\n"
    "a top-1% packet, round a ring, nothing else) and the CPU of mixing and compressing\n"
    "(sim.exchange_cpu, measured as the simulator runs).\n"
    "Reference in the same run: torch.distributed gloo all_reduce of the same buffer in the\n"
    "same namespaces (Debian's python3-torch; 'reference unavailable' without it, and the\n"
    "ratios null). --json: ratio = onepeer_overlap / gloo, choco_ratio = choco_ring / gloo,\n"
    "allreduce_ratio = allreduce / gloo.\n"
    "--relay: also dpsgd_ring with ranks 3 and 4 behind two NATs (nftables), so that their\n"
    "link goes through peer 0 (net.relays: auto), against the direct ring: relay_cost.\n"
    "--congestion NAME: our peers' TCP congestion control (net.congestion: cubic, reno, bbr;\n"
    "default: the system's); the gloo reference always runs with the system's.\n"
    "--repeats R (3): the calibration and every configuration run R times in turn, and each\n"
    "keeps its median run (by CPU for the calibration, by seconds per round for the rest): 8\n"
    "processes on 2 cores move a single run by +-15 %.\n"
    "Every namespace (and its links and qdiscs) is removed at the end, on failure or Ctrl-C.\n";

constexpr std::int64_t kFloats = 235146;  // MLP 784-256-128-10
constexpr int kBatch = 32;
/// The configurations measured: a label (the table's row, the JSON's key, a worker's argument),
/// a graph and the gossip settings it runs.
struct Config {
  const char* name;
  GeneratorKind graph;
  AlgorithmKind algorithm;
  bool overlap;
  double top_k;  // choco's top_k fraction (0: no compressor)
};
constexpr Config kConfigs[] = {
    {"allreduce", GeneratorKind::kRing, AlgorithmKind::kAllreduce, false, 0.0},
    {"dpsgd_ring", GeneratorKind::kRing, AlgorithmKind::kDpsgd, false, 0.0},
    {"onepeer_overlap", GeneratorKind::kOnePeerExponential, AlgorithmKind::kDpsgd, true, 0.0},
    {"choco_ring", GeneratorKind::kRing, AlgorithmKind::kChoco, false, 0.01},
};

std::atomic<int> g_signal{0};
void on_signal(int sig) { g_signal = sig; }

/// The topology and gossip settings of one configuration.
struct Setting {
  Topology topology;
  GossipConfig gossip;
};

Setting setting(const std::string& name, int peers) {
  const Config* c = std::find_if(std::begin(kConfigs), std::end(kConfigs),
                                 [&](const Config& k) { return name == k.name; });
  if (c == std::end(kConfigs)) throw InputError(cat("bench wan: no configuration '", name, "'"));
  GeneratorSpec spec;
  spec.kind = c->graph;
  spec.n = peers;
  Setting s{make_topology(spec), GossipConfig{}};
  s.gossip.algorithm = c->algorithm;
  s.gossip.overlap = c->overlap;
  if (c->top_k > 0) {
    s.gossip.choco.compress.kind = CompressKind::kTopK;
    s.gossip.choco.compress.fraction = c->top_k;
  }
  return s;
}

int warm_rounds(int peers) { return std::max(3, peers); }  // a ring synchronises a hop a round

/// Bytes this namespace's eth0 has sent, or -1 when it cannot be read.
double eth0_tx_bytes() {
  std::ifstream f("/sys/class/net/eth0/statistics/tx_bytes");
  double b = -1.0;
  return f >> b ? b : -1.0;
}

/// The MLP and its optimizer on synthetic batches: what one local step costs.
struct MlpStep {
  std::unique_ptr<Backend> cpu = make_cpu_backend(1);
  Model model{*cpu, std::vector<int>{784, 256, 128, 10}, kBatch};
  OptimizerConfig opt = [] {
    OptimizerConfig o;
    o.lr = 0.01;
    o.momentum = 0.9;
    return o;
  }();
  Sgd sgd{*cpu, model.num_params(), opt};
  std::vector<float> x;
  std::vector<std::int32_t> y;
  int next = 0;
  static constexpr int kBatches = 8;

  explicit MlpStep(int rank) {
    model.init(1, 0);
    auto rng = make_rng(1, rank, Stream::kSynthetic);
    x.resize(static_cast<std::size_t>(kBatches) * kBatch * 784);
    for (auto& v : x) v = static_cast<float>(normal01(rng));
    y.resize(static_cast<std::size_t>(kBatches) * kBatch);
    for (auto& v : y) v = static_cast<std::int32_t>(uniform_below(rng, 10));
  }
  double operator()() {
    const int b = next++ % kBatches;
    const auto r = model.forward_backward(x.data() + static_cast<std::size_t>(b) * kBatch * 784,
                                          y.data() + static_cast<std::size_t>(b) * kBatch, kBatch);
    sgd.step(model.params(), model.grads(), 0.01f);
    return r.loss;
  }
};

/// CPU seconds (user and system) this process has used.
double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  const auto s = [](const timeval& t) { return t.tv_sec + t.tv_usec / 1e6; };
  return s(u.ru_utime) + s(u.ru_stime);
}

/// A peer's network settings: TLS over TCP to `hosts` (rank r at hosts[r]:port+r), no shared
/// memory, as between separate hosts.
NetConfig net_config(int rank, const std::vector<std::string>& hosts, int port,
                     const std::string& tls_dir, const std::string& congestion) {
  NetConfig cfg;
  cfg.congestion = congestion;
  cfg.shared_memory = false;  // separate hosts
  cfg.tls = tls_files_in(tls_dir, rank);
  cfg.tls.enabled = true;
  cfg.rank = rank;
  cfg.size = static_cast<int>(hosts.size());
  for (std::size_t r = 0; r < hosts.size(); ++r)  // a port each, so two may share a host
    cfg.addresses.push_back(cat(hosts[r], ":", port + static_cast<int>(r)));
  cfg.handshake.run_id = "bench";
  cfg.handshake.model = "784-256-128-10";
  cfg.handshake.param_count = kFloats;
  cfg.log = [](const std::string&) {};
  return cfg;
}

/// Prints what the rounds of `run_round` cost this process: warm-up rounds, then `rounds` timed
/// ones; "seconds_per_round exchange_bytes_per_round wire_bytes_per_round cpu_seconds_per_round".
template <typename Round>
void time_rounds(const NetExchange& ex, int warm, int rounds, Round run_round) {
  for (int r = 0; r < warm; ++r) run_round(r);
  const std::uint64_t bytes0 = ex.bytes_sent();
  const double wire0 = eth0_tx_bytes(), cpu0 = cpu_seconds();
  const auto t0 = std::chrono::steady_clock::now();
  for (int r = warm; r < warm + rounds; ++r) run_round(r);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / rounds;
  const double wire1 = eth0_tx_bytes();
  std::printf("%.9f %.1f %.1f %.9f\n", seconds,
              static_cast<double>(ex.bytes_sent() - bytes0) / rounds,
              wire0 < 0 || wire1 < 0 ? -1.0 : (wire1 - wire0) / rounds,
              (cpu_seconds() - cpu0) / rounds);
}

/// The calibration of sim.byte_cpu_ns and sim.message_cpu_us: every peer passes a message to
/// the next one round the ring (rank + 1) and takes the previous one's, nothing else, over the
/// same links, TLS and TCP as the rounds, with as many processes sharing the cores. The message
/// is the parameter buffer ("transfer") or a top-1% packet of it ("transfer-packets").
int transfer_worker(int rank, const std::vector<std::string>& hosts, int port, int rounds,
                    const std::string& tls_dir, const std::string& congestion, bool packets) {
  const int peers = static_cast<int>(hosts.size());
  NetConfig cfg = net_config(rank, hosts, port, tls_dir, congestion);
  const std::vector<int> next{(rank + 1) % peers}, previous{(rank + peers - 1) % peers};
  cfg.neighbours = {std::min(next[0], previous[0]), std::max(next[0], previous[0])};
  // No topology: the handshake's fingerprint stays 0 on every peer.
  NetExchange ex(std::move(cfg));
  std::vector<float> buffer(kFloats);
  auto rng = make_rng(1, rank, Stream::kSynthetic);
  for (auto& v : buffer) v = static_cast<float>(normal01(rng));
  std::vector<std::byte> packet;
  Compressor(setting("choco_ring", peers).gossip.choco.compress, kFloats, 1, rank)
      .encode(buffer, 1, Scaling::kContractive, packet);
  time_rounds(ex, warm_rounds(peers), rounds, [&](int r) {
    if (packets)
      ex.publish_packet(r, packet, next);
    else
      ex.publish(r, buffer, 1.0, next);
    ex.collect(r, previous, CollectOptions{});
  });
  return 0;
}

/// One peer process, inside its namespace: warm-up rounds, then `rounds` timed ones (see
/// time_rounds).
int worker(int rank, const std::string& name, const std::vector<std::string>& hosts, int port,
           int rounds, const std::string& tls_dir, const std::string& congestion) {
  if (name == "transfer" || name == "transfer-packets")
    return transfer_worker(rank, hosts, port, rounds, tls_dir, congestion,
                           name == "transfer-packets");
  const int peers = static_cast<int>(hosts.size());
  const Setting s = setting(name, peers);
  NetConfig cfg = net_config(rank, hosts, port, tls_dir, congestion);
  std::set<int> nbrs;
  for (std::int64_t t = 0; t < s.topology.period(); ++t) {
    for (const auto& nb : s.topology.in_neighbours(rank, t)) nbrs.insert(nb.peer);
    for (const auto& nb : s.topology.out_neighbours(rank, t)) nbrs.insert(nb.peer);
  }
  for (int p : extra_neighbours(s.gossip, rank, peers)) nbrs.insert(p);
  nbrs.erase(rank);
  cfg.neighbours.assign(nbrs.begin(), nbrs.end());
  cfg.max_queued_rounds = static_cast<std::size_t>(std::max<std::int64_t>(
      4, max_round_lead(s.topology) + 1 + extra_round_lead(s.gossip, peers)));
  cfg.handshake.topology_fingerprint = s.topology.fingerprint();
  NetExchange ex(std::move(cfg));
  MlpStep step(rank);
  if (step.model.num_params() != kFloats) throw RuntimeError("the MLP is not 235146 floats");
  auto a = make_algorithm(Learner{step.cpu.get(), step.model.params(), kFloats, std::ref(step)},
                          ex, s.topology, s.gossip, 1);
  time_rounds(ex, warm_rounds(peers), rounds, [&](int r) { a->run_round(r); });
  return 0;
}

/// What the simulator predicts for one configuration: seconds per round over the timed rounds
/// (the slowest peer's clock), with each local step costing `step_s` of CPU, and the CPU model
/// of `sim` (the phases' own CPU measured as they run here).
double predict(const std::string& name, int peers, int rounds, const SimConfig& sim,
               double step_s, const LinkEmulation& links) {
  const Setting s = setting(name, peers);
  SimNetwork net(peers, kFloats, traits(s.gossip.algorithm).ring ? 2 : 1,
                 simulated_relays(sim, links, s.topology), 1);
  net.set_step_seconds(step_s);
  std::vector<std::vector<float>> x(peers, std::vector<float>(kFloats));
  auto cpu = make_cpu_backend(1);
  std::vector<std::unique_ptr<Algorithm>> algorithms;
  for (int p = 0; p < peers; ++p) {
    auto rng = make_rng(1, p, Stream::kSim);
    for (auto& v : x[p]) v = static_cast<float>(normal01(rng));
    // The step leaves the parameters alone (a CHOCO packet is 1% of them whatever they are);
    // the network model charges its time.
    const Learner learner{cpu.get(), x[p].data(), kFloats, [] { return 0.0; }};
    algorithms.push_back(
        make_algorithm(net.timed(p, learner), net.exchange(p), s.topology, s.gossip, 1));
  }
  const auto clock = [&] {
    double t = 0.0;
    for (int p = 0; p < peers; ++p) t = std::max(t, net.exchange(p).now());
    return t;
  };
  const int warm = warm_rounds(peers);
  double t0 = 0.0;
  for (int r = 0; r < warm + rounds; ++r) {
    if (r == warm) t0 = clock();
    for (int p = 0; p < peers; ++p) {  // as the simulator's Swarm::round charges compute
      Algorithm& a = *algorithms[p];
      const double compute = a.local_steps(r) * net.step_seconds(p);
      if (a.overlaps()) {
        net.run_phase(p, [&] { a.local_phase(r); });
        net.exchange(p).work(compute);
      } else {
        net.exchange(p).work(compute);
        net.run_phase(p, [&] { a.local_phase(r); });
      }
    }
    for (int st = 0; st < algorithms.front()->relay_steps(); ++st)
      for (int p = 0; p < peers; ++p)
        net.run_phase(p, [&] { algorithms[p]->relay_phase(r, st); });
    for (int p = 0; p < peers; ++p) net.run_phase(p, [&] { algorithms[p]->mix_phase(r); });
  }
  return (clock() - t0) / rounds;
}

std::string quoted(const std::vector<std::string>& argv) {
  std::string s;
  for (const auto& a : argv) s += cat(s.empty() ? "" : " ", "'", a, "'");
  return s;
}

struct Measured {
  double seconds = 0.0;      // slowest peer's seconds per round
  double bytes = 0.0;        // mean over peers of exchange bytes per round
  double wire_bytes = -1.0;  // mean over peers of eth0 bytes per round (-1: not read)
  double cpu = 0.0;          // mean over peers of CPU seconds per round (their own process)
};

/// Starts one command per rank (its argv from `command(r)`) and reads each one's last line of
/// four numbers.
Measured run_ranks(int peers, const std::function<std::vector<std::string>(int)>& command,
                   const std::string& what) {
  if (g_signal) throw RuntimeError("gossip bench wan: interrupted");
  std::vector<FILE*> kids;
  for (int r = 0; r < peers; ++r) {
    FILE* p = popen(quoted(command(r)).c_str(), "r");
    if (!p) throw RuntimeError(cat("cannot start ", what, " rank ", r));
    kids.push_back(p);
  }
  Measured m;
  bool failed = false;
  double wire = 0.0;
  for (FILE* p : kids) {
    double s = -1.0, b = 0.0, w = -1.0, c = 0.0;
    char line[512];
    while (std::fgets(line, sizeof line, p))
      if (std::sscanf(line, "%lf %lf %lf %lf", &s, &b, &w, &c) != 4) s = -1.0;
    failed |= pclose(p) != 0 || s < 0;
    m.seconds = std::max(m.seconds, s);
    m.bytes += b / peers;
    m.cpu += c / peers;
    wire = wire < 0 || w < 0 ? -1.0 : wire + w / peers;
  }
  if (g_signal) throw RuntimeError("gossip bench wan: interrupted");
  if (failed) throw RuntimeError(cat("gossip bench wan: a peer of ", what, " failed"));
  m.wire_bytes = wire;
  return m;
}

/// One configuration's row: measured, and as the simulator predicts it.
struct WanRow {
  std::string name;
  Measured m;
  double predicted = 0.0;
};

/// Everything run_wan measured, for the JSON object or the table.
struct WanFigures {
  const LinkEmulation& links;
  int peers, rounds, repeats;
  const std::string& congestion;
  const SimConfig& sim;
  double step_alone;
  unsigned cores;
  Measured big, small;  // the calibration's whole buffer and top-1% packet
  const std::vector<WanRow>& rows;
  Measured gloo;        // the reference (seconds 0: unavailable)
  bool python;
};

/// A configuration's time over gloo's all-reduce (NaN without the reference).
double gloo_ratio(const WanFigures& f, const std::string& n) {
  const auto row = std::find_if(f.rows.begin(), f.rows.end(),
                                [&](const WanRow& r) { return r.name == n; });
  return f.gloo.seconds > 0 ? row->m.seconds / f.gloo.seconds : NAN;
}

double nullable(double v) { return v < 0 ? NAN : v; }

/// dpsgd_ring with one link relayed over dpsgd_ring direct (--relay; NaN without it).
double relay_cost(const WanFigures& f) {
  const auto find = [&](const std::string& n) {
    return std::find_if(f.rows.begin(), f.rows.end(), [&](const WanRow& r) { return r.name == n; });
  };
  const auto relayed = find("dpsgd_ring_relayed"), direct = find("dpsgd_ring");
  if (relayed == f.rows.end() || direct == f.rows.end()) return NAN;
  return relayed->m.seconds / direct->m.seconds;
}

void print_wan_json(const WanFigures& f) {
  const auto ratio = [&f](const std::string& n) { return gloo_ratio(f, n); };
  JsonObject o;
  o.add("bench", "wan").add("netem", f.links.text).add("peers", f.peers).add("rounds", f.rounds)
      .add("repeats", f.repeats)
      .add("congestion", f.congestion.empty() ? "system" : f.congestion)
      .add("step_ms_alone", f.step_alone * 1e3).add("sim_cores", f.sim.cores)
      .add("sim_byte_cpu_ns", f.sim.byte_cpu_ns).add("sim_message_cpu_us", f.sim.message_cpu_us)
      .add("sim_bandwidth_mbps", f.sim.bandwidth_mbps).add("sim_latency_ms", f.sim.latency_ms);
  for (const auto& r : f.rows)
    o.add(r.name + "_ms", r.m.seconds * 1e3)
        .add(r.name + "_bytes_per_round", r.m.bytes)
        .add(r.name + "_wire_bytes_per_round", nullable(r.m.wire_bytes))
        .add(r.name + "_cpu_ms_per_peer", r.m.cpu * 1e3)
        .add(r.name + "_sim_ms", r.predicted * 1e3)
        .add(r.name + "_sim_error", r.predicted / r.m.seconds - 1.0);
  o.add("reference", f.python ? "gloo all_reduce" : "reference unavailable")
      .add("gloo_allreduce_ms", f.gloo.seconds > 0 ? f.gloo.seconds * 1e3 : NAN)
      .add("gloo_allreduce_cpu_ms_per_peer", f.gloo.seconds > 0 ? f.gloo.cpu * 1e3 : NAN)
      .add("gloo_allreduce_wire_bytes_per_round",
           f.gloo.seconds > 0 ? nullable(f.gloo.wire_bytes) : NAN)
      .add("ratio", ratio("onepeer_overlap"))
      .add("choco_ratio", ratio("choco_ring"))
      .add("allreduce_ratio", ratio("allreduce"));
  if (const double cost = relay_cost(f); !std::isnan(cost)) o.add("relay_cost", cost);
  std::printf("%s\n", o.str().c_str());
}

void print_wan_table(const WanFigures& f) {
  const auto ratio = [&f](const std::string& n) { return gloo_ratio(f, n); };
  std::printf("simulator: links %.0f Mbit/s, latency %.3f ms; MLP step alone %.3f ms; %d peers "
              "share %u cores; a message costs each end %.1f us and a byte %.3f ns of CPU (the "
              "peers passing a message round a ring: %.3f ms CPU a round for the buffer, %.3f "
              "ms for a top-1%% packet)\n\n",
              f.sim.bandwidth_mbps, f.sim.latency_ms, f.step_alone * 1e3, f.peers, f.cores,
              f.sim.message_cpu_us, f.sim.byte_cpu_ns, f.big.cpu * 1e3, f.small.cpu * 1e3);
  std::printf("%-16s  %9s  %11s  %12s  %10s  %10s  %8s  %8s  %8s\n", "configuration",
              "ms/round", "bytes/round", "wire B/round", "CPU ms/peer", "CPU-bound", "sim ms",
              "sim err", "vs gloo");
  const double share = static_cast<double>(f.peers) / f.cores;  // peers per core
  for (const auto& r : f.rows) {
    const double rat = ratio(r.name);
    std::printf("%-16s  %9.2f  %11.0f  %12s  %11.2f  %10.2f  %8.2f  %7.1f%%  %8s\n",
                r.name.c_str(), r.m.seconds * 1e3, r.m.bytes,
                r.m.wire_bytes < 0 ? "-" : cat(static_cast<long long>(r.m.wire_bytes)).c_str(),
                r.m.cpu * 1e3, r.m.cpu * share * 1e3, r.predicted * 1e3,
                100.0 * (r.predicted / r.m.seconds - 1.0),
                std::isnan(rat) ? "-" : fixed(rat, 3).c_str());
  }
  if (f.python)
    std::printf("%-16s  %9.2f  %11s  %12s  %11.2f  %10.2f\n", "gloo all_reduce",
                f.gloo.seconds * 1e3, "-",
                f.gloo.wire_bytes < 0 ? "-" : cat(static_cast<long long>(f.gloo.wire_bytes)).c_str(),
                f.gloo.cpu * 1e3, f.gloo.cpu * share * 1e3);
  else
    std::printf("\ngloo reference: reference unavailable (python3 cannot import torch; "
                "apt-get install python3-torch); ratios not computed\n");
  std::printf("(bytes/round: per peer, as the exchange counts them; wire B/round: what the "
              "peer's interface sent, TCP/IP and TLS included; CPU ms/peer: what one peer "
              "process used a round; CPU-bound: that times peers / cores, the round time if the "
              "cores were the only limit; sim ms: the simulator with sim.cores, sim.byte_cpu_ns, "
              "sim.message_cpu_us and sim.exchange_cpu as above)\n");
  if (const double cost = relay_cost(f); !std::isnan(cost))
    std::printf("relay cost: dpsgd_ring with the link 3-4 relayed through peer 0 (ranks 3 and 4 "
                "behind NATs of their own) takes %.3fx the direct ring's round\n", cost);
}

/// `gossip bench wan --worker R`: one rank of a configuration, in its namespace.
int run_worker(const Args& args, int rounds, const std::string& congestion) {
  std::vector<std::string> hosts;
  const std::string list = args.required("hosts", "A,B,...");
  for (std::size_t pos = 0; pos <= list.size();) {
    const auto comma = std::min(list.find(',', pos), list.size());
    hosts.push_back(list.substr(pos, comma - pos));
    pos = comma + 1;
  }
  return worker(static_cast<int>(args.get_int("worker", 0)), args.required("config", "NAME"),
                hosts, static_cast<int>(args.get_int("port", 0)), rounds,
                args.required("tls", "DIR"), congestion);
}

/// The median of `v` by `key`.
Measured median_by(std::vector<Measured> v, double Measured::*key) {
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end(),
                   [key](const Measured& a, const Measured& b) { return a.*key < b.*key; });
  return v[v.size() / 2];
}

/// The outside reference: gloo's all-reduce of the same buffer, in the same namespaces
/// (`repeats` runs, the median; `port` moves on by 10 a run).
Measured measure_gloo(const std::string& python, const launcher::EmulatedNetwork& network,
                      int peers, int rounds, int repeats, int& port) {
  std::string looked;
  const auto found = bench_script("torch_wan.py", &looked);
  if (!found) {
    std::fprintf(stderr, "gossip bench wan: the gloo reference torch_wan.py was not found "
                 "(looked in %s; set GOSSIP_BENCH_DIR); no reference column\n", looked.c_str());
    return Measured{};
  }
  const std::string script = *found;
  std::vector<Measured> gloos;
  for (int k = 0; k < repeats; ++k) {
    port += 10;
    gloos.push_back(run_ranks(peers, [&](int r) {
      auto argv = network.exec_prefix(r);
      argv.insert(argv.end(), {python, script,
                               std::to_string(r), std::to_string(peers), std::to_string(kFloats),
                               std::to_string(rounds), std::to_string(warm_rounds(peers)),
                               network.address(0), std::to_string(port)});
      return argv;
    }, "the gloo reference"));
  }
  return median_by(gloos, &Measured::seconds);
}

/// The simulator's CPU cost of a byte and of a message, from the calibration's medians: each
/// peer sends and takes one message a round, so CPU = 2 (message + bytes * byte) for both.
void calibrate_cpu(SimConfig& sim, const Measured& big, const Measured& small) {
  const double byte_s = std::max(0.0, (big.cpu - small.cpu) / (2.0 * (big.bytes - small.bytes)));
  sim.byte_cpu_ns = byte_s * 1e9;
  sim.message_cpu_us = std::max(0.0, small.cpu / 2.0 - byte_s * small.bytes) * 1e6;
}

}  // namespace

/// dpsgd_ring on `natted`'s links (ranks 3 and 4 behind two NATs of their own: neither can dial
/// the other, their link goes through peer 0, the lowest-ranked member that can be dialled), R
/// times; the median run.
Measured run_relayed(const LinkEmulation& natted, int peers, int rounds, int repeats, int& port,
                     const std::string& self, const std::string& tls_dir,
                     const std::string& congestion) {
  launcher::EmulatedNetwork network(natted, peers, [] { return g_signal != 0; });
  std::string hosts;
  for (int r = 0; r < peers; ++r) hosts += cat(r ? "," : "", network.address(r));
  std::vector<Measured> runs;
  for (int k = 0; k < repeats; ++k) {
    port += 10;
    runs.push_back(run_ranks(peers, [&](int r) {
      auto argv = network.exec_prefix(r);
      argv.insert(argv.end(), {self, "bench", "wan", "--worker", std::to_string(r), "--config",
                               "dpsgd_ring", "--hosts", hosts, "--port", std::to_string(port),
                               "--rounds", std::to_string(rounds), "--tls", tls_dir,
                               "--congestion", congestion});
      return argv;
    }, "dpsgd_ring with a relayed link"));
  }
  network.remove();
  return median_by(runs, &Measured::seconds);
}

/// The simulator's model of these links and of this machine's CPU: a step measured alone
/// (`step_alone`), the peers sharing the cores; byte_cpu_ns comes from the calibration later.
SimConfig sim_model(const LinkEmulation& links, unsigned cores, double& step_alone) {
  SimConfig sim;
  simulate_links(sim, links);
  MlpStep alone(0);
  step_alone = best_seconds_per_call([&] { alone(); }, 50, 5);
  sim.cores = static_cast<int>(cores);
  sim.exchange_cpu = true;
  return sim;
}

int run_wan(int argc, char** argv) {
  Args args(argc, argv,
            {"rounds", "peers", "netem", "worker", "config", "hosts", "port", "tls", "congestion",
             "repeats"},
            {"json", "relay"});
  const std::string congestion = args.get_or("congestion", "");
  if (args.help()) {
    std::printf("%s", kHelp);
    return kExitOk;
  }
  const int rounds = static_cast<int>(args.get_int("rounds", 30));
  if (rounds <= 0) throw InputError("--rounds must be positive");
  if (args.get("worker")) return run_worker(args, rounds, congestion);
  const int peers = static_cast<int>(args.get_int("peers", 8));
  if (peers < 3) throw InputError("--peers must be at least 3");
  const int repeats = static_cast<int>(args.get_int("repeats", 3));
  if (repeats < 1 || repeats > 9) throw InputError("--repeats must be 1 to 9");
  const LinkEmulation links = parse_link_emulation(args.get_or("netem", "rate=1gbit"), "--netem");
  if (geteuid() != 0)
    throw InputError("gossip bench wan needs root: it puts each peer in its own network "
                     "namespace and sets tc qdiscs on their links (as gossip run --netem does)");
  const bool json = args.has("json");
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  double step_alone = 0.0;
  SimConfig sim = sim_model(links, cores, step_alone);

  struct sigaction sa{};
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  launcher::EmulatedNetwork network(links, peers, [] { return g_signal != 0; });
  const RunCredentials credentials("gossip-bench-wan", peers);
  const std::filesystem::path& tls_dir = credentials.dir();
  std::string hosts;
  for (int r = 0; r < peers; ++r) hosts += cat(r ? "," : "", network.address(r));
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  if (!json)
    std::printf("gossip bench wan: %d peers, each in its own network namespace, links %s "
                "(tbf both ways), TLS over TCP (congestion control: %s); %d timed rounds of the "
                "MLP (%lld floats)\n%s\n",
                peers, links.text.c_str(),
                congestion.empty() ? "the system's" : congestion.c_str(), rounds,
                static_cast<long long>(kFloats), blas_kernel_line().c_str());

  std::vector<WanRow> rows;
  int port = 29700;
  // Calibration: what a message and a byte cost the CPU at each end (TLS, TCP/IP, the veth and
  // the bridge, waking the threads), from the peers passing a message round the ring over these
  // links, nothing else: the whole buffer, then a top-1% packet. Each peer sends and takes one
  // message a round, so CPU = 2 (message + bytes * byte) for both sizes: two equations.
  // One run of worker config `name` on every rank (`what` names it in errors).
  const auto run_config = [&](const char* name, const std::string& what) {
    port += 10;
    return run_ranks(peers, [&](int r) {
      auto argv = network.exec_prefix(r);
      argv.insert(argv.end(), {self, "bench", "wan", "--worker", std::to_string(r), "--config",
                               name, "--hosts", hosts, "--port", std::to_string(port),
                               "--rounds", std::to_string(rounds), "--tls", tls_dir.string(),
                               "--congestion", congestion});
      return argv;
    }, what);
  };
  const auto calibrate = [&](const char* what) {
    return run_config(what, cat("the calibration ", what));
  };
  // R passes in turn, so that a burst of load falls on one run of each, not on every run of one.
  std::vector<Measured> bigs, smalls;
  std::vector<std::vector<Measured>> runs(std::size(kConfigs));
  for (int k = 0; k < repeats; ++k) {
    if (!json && repeats > 1) std::printf("pass %d of %d\n", k + 1, repeats);
    bigs.push_back(calibrate("transfer"));
    smalls.push_back(calibrate("transfer-packets"));
    for (std::size_t c = 0; c < std::size(kConfigs); ++c)
      runs[c].push_back(run_config(kConfigs[c].name, kConfigs[c].name));
  }
  const Measured big = median_by(bigs, &Measured::cpu), small = median_by(smalls, &Measured::cpu);
  calibrate_cpu(sim, big, small);
  for (std::size_t c = 0; c < std::size(kConfigs); ++c)
    rows.push_back(WanRow{kConfigs[c].name, median_by(runs[c], &Measured::seconds),
                       predict(kConfigs[c].name, peers, rounds, sim, step_alone, links)});
  // The outside reference: gloo's all-reduce of the same buffer, in the same namespaces.
  const auto python = torch_python();
  const Measured gloo =
      python ? measure_gloo(*python, network, peers, rounds, repeats, port) : Measured{};
  network.remove();
  if (args.has("relay")) {
    // The simulator charges the relay's hop (sim.relayed, from the NATs).
    LinkEmulation natted = links;
    natted.nats = {{3}, {4}};
    const Measured relayed = run_relayed(natted, peers, rounds, repeats, port, self,
                                         tls_dir.string(), congestion);
    rows.push_back(WanRow{"dpsgd_ring_relayed", relayed,
                          predict("dpsgd_ring", peers, rounds, sim, step_alone, natted)});
  }
  const WanFigures figures{links, peers, rounds, repeats, congestion, sim, step_alone, cores,
                           big, small, rows, gloo, python.has_value()};
  if (json) print_wan_json(figures);
  else print_wan_table(figures);
  return kExitOk;
}

}  // namespace gossip::bench
