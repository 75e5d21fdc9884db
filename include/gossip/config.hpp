/// config: the run configuration every command reads (one YAML file, see docs/config.md). Plain
/// structs with defaults; the loader (src/config, on the one YAML reader gossip/yaml.hpp)
/// validates every field and reports problems as "FILE:LINE: field: what is wrong".
/// Paths inside a config are resolved relative to the config file.
#pragma once
#if !defined(GOSSIP_ROOM_CONFIG)
#error "gossip/config.hpp belongs to room config, which this room does not use (see the room table in meson.build)"
#endif

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <vector>

#include "gossip/algorithm_table.hpp"
#include "gossip/choice.hpp"
#include "gossip/compress_table.hpp"
#include "gossip/compute_choices.hpp"
#include "gossip/event_kind.hpp"
#include "gossip/half.hpp"
#include "gossip/layer_table.hpp"

namespace gossip {

/// data.balance: how peers with unequal shards (dirichlet, shards) step, one row each.
#define GOSSIP_BALANCES(X)                                                                     \
  X(kEqualSteps, "equal_steps",                                                                \
    "every peer takes the same number of local steps a round; the schedule follows the run")   \
  X(kWeighted, "weighted",                                                                     \
    "the same, each peer's step scaled by its shard's share: the loss over all samples")

/// optimizer.schedule: the learning rate over the epochs, one row each.
#define GOSSIP_LR_SCHEDULES(X)                                                                 \
  X(kConstant, "constant", "optimizer.lr throughout")                                         \
  X(kStep, "step", "times gamma every step_epochs (after the warm-up)")                       \
  X(kCosine, "cosine", "cosine decay to min_lr over the run (after the warm-up)")

GOSSIP_NAMED_CHOICE(Balance, GOSSIP_BALANCES, balance_table, balance_name)
GOSSIP_NAMED_CHOICE(LrSchedule, GOSSIP_LR_SCHEDULES, lr_schedule_table, lr_schedule_name)

struct DataConfig {
  // Real data: IDX files (plain or .gz). Defaults are Debian's dataset-fashion-mnist package.
  std::string train_images = "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz";
  std::string train_labels = "/usr/share/datasets/fashion-mnist/train-labels-idx1-ubyte.gz";
  std::string test_images = "/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz";
  std::string test_labels = "/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz";
  int classes = 10;
  // Where the decoded test images are cached and mapped, one read-only copy shared by the
  // processes of a host: "" = $GOSSIP_CACHE_DIR, else $XDG_CACHE_HOME/gossip, else
  // $HOME/.cache/gossip; "off" = every process loads its own copy.
  std::string cache_dir;
  // Synthetic data (data.synthetic: {...}) replaces the files when set.
  bool synthetic = false;
  std::int64_t synthetic_train = 4096;
  std::int64_t synthetic_test = 1024;
  int synthetic_dim = 16;
  double synthetic_separation = 4.0;
  // Standardise features with the training set's mean and standard deviation (one scalar each).
  bool normalize = false;
  // Use only the first N training samples (0 = all); handy for quick runs.
  std::int64_t limit_train = 0;
  // Sharding across peers: "iid" | "dirichlet" | "shards".
  std::string shard = "iid";
  double alpha = 0.5;
  int shards_per_peer = 2;
  // Unequal shards (dirichlet, shards): kEqualSteps (every peer takes the same number of local
  // steps a round, so a small shard is revisited more often, and the learning-rate schedule
  // follows the run's epochs, not the shard's) or kWeighted (the same, and each peer's step is
  // scaled by its shard's share of the samples, so the network minimises the loss over all
  // samples rather than the mean of the peers' losses).
  Balance balance = Balance::kEqualSteps;
};

/// A tensor's shape per sample: [features] or [channels, height, width].
using Shape = std::vector<int>;

/// The model: an input shape and a stack of layers, softmax cross-entropy on the last layer's
/// output (which must be flat with data.classes entries).
struct ModelConfig {
  Shape input;
  std::vector<LayerConfig> layers;

  /// The MLP shorthand `layers: [784, 256, 128, 10]`: input [784], then linear 256, relu,
  /// linear 128, relu, linear 10.
  static ModelConfig mlp(const std::vector<int>& sizes);
  /// Product of the input shape (the features of one sample).
  int input_size() const;
};

/// "[1,28,28]".
std::string shape_string(const Shape& s);
/// Product of the dimensions.
std::int64_t shape_size(const Shape& s);

/// Infers every activation's shape: result[0] is the input, result[i + 1] the output of layer i.
/// Throws InputError "PREFIX: model.layers[i] (type): what is wrong" naming both shapes when a
/// layer does not fit its input (unknown type, missing or bad field, a kernel larger than its
/// input, groups that do not divide the channels, linear on an unflattened input). `where`
/// turns a field name ("model.layers[3].kernel") into the message prefix (RunConfig::where); by
/// default the bare field.
std::vector<Shape> infer_shapes(const ModelConfig& model,
                                const std::function<std::string(const std::string&)>& where = {});

struct OptimizerConfig {
  double lr = 0.01;
  double momentum = 0.0;
  bool nesterov = false;
  double weight_decay = 0.0;
  LrSchedule schedule = LrSchedule::kConstant;
  double warmup_epochs = 0.0;         // linear warm-up (cosine and step)
  double step_epochs = 0.0;           // step: multiply by gamma every step_epochs
  double gamma = 0.1;
  double min_lr = 0.0;                // cosine floor
};

/// The bounds of what a run may ask for (docs/config.md, "What is checked"), the same for the
/// config's fields and the command-line overrides. Past them a run does not end in any useful
/// time, or asks for more threads than a machine has: a typo, refused before anything starts.
inline constexpr double kMaxEpochs = 10000;                   // train.epochs in (0, kMaxEpochs]
inline constexpr int kMaxThreads = 1024;                      // train.threads in [1, kMaxThreads]
inline constexpr int kMaxWorkers = 1024;                      // sim.workers in [0, kMaxWorkers]
inline constexpr int kMaxPeersPerProcess = 256;  // train.peers_per_process in [1, this]
inline constexpr std::int64_t kMaxLocalSteps = 100'000'000;  // local steps a run plans per peer
inline constexpr int kMaxGossipSteps = 64;                    // gossip.choco.gossip_steps <= 64
inline constexpr int kMaxFragments = 1024;                     // gossip.outer.fragments <= 1024

struct TrainConfig {
  double epochs = 1.0;
  int batch = 32;
  std::uint64_t seed = 1;
  BackendChoice backend = BackendChoice::kAuto;
  int threads = 1;               // CPU BLAS threads per peer
  std::string gemm = "auto";     // auto | openblas | onednn: the CPU backend's GEMM
  // bf16 computes the matrix products in bf16 with fp32 accumulation and fp32 master weights
  // (oneDNN; CPUs with AVX512-BF16 or AMX only).
  Precision precision = Precision::kFp32;
  // How conv2d layers run: cuDNN where the CUDA backend loads it (auto), or im2col + GEMM.
  ConvEngine conv = ConvEngine::kAuto;
  // The training step replayed as a CUDA graph (step) or launched call by call (off).
  GraphMode graphs = GraphMode::kOff;
  // gossip run: CUDA MPS for peers that share a GPU (auto: when they outnumber the GPUs).
  MpsMode mps = MpsMode::kAuto;
  // gossip run: how many peers one process hosts, one thread each (consecutive ranks; they
  // share the process's CUDA context and cuDNN instead of paying one each).
  int peers_per_process = 1;
  // Also write the run's metrics as TensorBoard event files in OUT/tensorboard/ (a run per
  // peer and one for the average model).
  bool tensorboard = false;
  int evals_per_epoch = 1;
  int eval_batch = 1000;
  std::int64_t eval_limit = 0;   // evaluate on the first N test samples (0 = all)
  /// The test samples a peer's own evaluation takes: `last` (its final one) eval_limit's, else
  /// peer_eval_limit's when that is fewer.
  std::int64_t peer_eval_samples(bool last) const {
    if (last || peer_eval_limit == 0) return eval_limit;
    return eval_limit == 0 ? peer_eval_limit : std::min(eval_limit, peer_eval_limit);
  }
  // A peer's own evaluations before its last take the first N test samples (0: eval_limit's);
  // the last one, and the average model's every one, take eval_limit's (the final figures stay
  // exact). gossip run's peers and gossip sim's alike.
  std::int64_t peer_eval_limit = 2000;
  bool same_init = true;         // all peers start from peer 0's initialisation
  std::int64_t checkpoint_every = 0;  // rounds between checkpoints of each peer (0 = none)
};

/// gossip.choco.compress: what CHOCO-SGD sends of the difference between a peer's parameters and
/// its public copy (docs/config.md).
struct CompressConfig {
  CompressKind kind = CompressKind::kNone;
  double fraction = 0.01;     // top_k, random_k: share of the coordinates sent, in (0, 1]
  int bits = 8;               // quantize: 4 or 8
  bool operator==(const CompressConfig&) const = default;
  /// The kinds that send a fraction of the coordinates (top_k, random_k).
  bool sparse() const { return traits(kind).parameter == CompressParameter::kFraction; }
};

/// "top_k 0.01", "random_k 0.05", "quantize 8 bits", "none".
std::string describe(const CompressConfig& c);

/// A compressor from the command line (`--compress`): "top_k:0.01", "random_k:0.05",
/// "quantize:8" or "none", checked as gossip.choco.compress is (a fraction in (0, 1], 4 or 8
/// bits).
/// Throws InputError "WHAT: ..." naming what is wrong.
CompressConfig parse_compress(const std::string& text, const std::string& what);
/// The inverse of parse_compress: "top_k:0.01" (the fraction to full double precision).
std::string compress_argument(const CompressConfig& c);

/// gossip.wire from the command line (`--wire`): "fp32", "bf16" or "fp16". Throws InputError
/// "WHAT: unknown value ..." naming the value and the choices.
WireFormat parse_wire_format(const std::string& text, const std::string& what);

/// gossip.choco: CHOCO-SGD's own settings (docs/config.md); no other algorithm takes them.
struct ChocoConfig {
  CompressConfig compress;          // what a peer sends of x - xhat
  double consensus_step = 0.0;      // gamma; 0 = default_consensus_step(compress)
  // Compressed exchanges per round (compress, send, consensus step, repeated) after the round's
  // local steps; each costs one message per link and one network round trip.
  int gossip_steps = 1;
};

/// gossip.on_byzantine: what a peer does with a neighbour its monitor suspects of lying
/// (byzantine_suspect), one row each: X(enum id, name, one line for docs and --help).
#define GOSSIP_BYZANTINE_POLICIES(X)                                                            \
  X(kReport, "report", "an event; mixing goes on as the aggregate decides")                     \
  X(kCut, "cut", "the suspect is no longer mixed, and the live graph is taken without it, for good")

enum class ByzantinePolicy { GOSSIP_BYZANTINE_POLICIES(GOSSIP_CHOICE_ENUM) };

/// monitor.on_partition: what a peer does when its live graph splits, one row each.
#define GOSSIP_PARTITION_POLICIES(X)                                                            \
  X(kContinue, "continue", "the peers train on in their parts")                                 \
  X(kStop, "stop", "each peer stops with a checkpoint when it sees the split")

enum class PartitionPolicy { GOSSIP_PARTITION_POLICIES(GOSSIP_CHOICE_ENUM) };

/// A policy's row (NamedRow).
template <typename Policy>
using PolicyRow = NamedRow<Policy>;
std::span<const PolicyRow<ByzantinePolicy>> byzantine_policy_table();
std::span<const PolicyRow<PartitionPolicy>> partition_policy_table();
/// "report", "cut"; "continue", "stop".
const char* policy_name(ByzantinePolicy policy);
const char* policy_name(PartitionPolicy policy);

/// gossip.aggregate: how a peer combines the whole-parameter messages of its in-neighbours
/// (dpsgd, local_sgd, async; docs/config.md, docs/byzantine.md). mean is W's weighted sum;
/// clipped is ClippedGossip's self-centred clipping, x_i + sum_j W_ij clip(m_j - r_i, tau);
/// trimmed_mean and median are coordinate-wise over the peer's own message and its neighbours'.
/// One row per rule:
///   X(enum id, name, takes tau and ratio (a clipping radius), takes byzantine, robust (not the
///     plain weighted sum: a kernel of its own, and only for the algorithms that mix whole
///     messages), one line for docs and --help)
#define GOSSIP_AGGREGATES(X)                                                                    \
  X(kMean, "mean", false, false, false, "the mixing matrix's weighted sum (the default)")      \
  X(kClipped, "clipped", true, true, true,                                                      \
    "each neighbour's difference from the peer clipped to a radius tau (adaptive unless set)") \
  X(kTrimmedMean, "trimmed_mean", false, true, true,                                            \
    "per coordinate, the mean without the b largest and b smallest values")                    \
  X(kMedian, "median", false, false, true, "per coordinate, the median")

enum class Aggregate { GOSSIP_AGGREGATES(GOSSIP_CHOICE_ENUM) };

struct AggregateTraits {
  Aggregate kind;
  const char* name;
  bool tau;        // takes tau and ratio
  bool byzantine;  // takes byzantine
  bool robust;     // not the weighted sum
  const char* summary;
};
/// Every rule, in the order messages and docs list them.
std::span<const AggregateTraits> aggregate_table();
const AggregateTraits& traits(Aggregate a);
/// "mean", "clipped", "trimmed_mean", "median".
const char* aggregate_name(Aggregate a);

struct AggregateConfig {
  Aggregate kind = Aggregate::kMean;
  // clipped: a fixed clipping radius; 0 = adaptive: each round a reference distance r (the
  // lower median of the distances heard, at most the (b + 1)-th largest, b = byzantine), and a
  // neighbour farther than ratio * r is clipped to r (docs/byzantine.md).
  double tau = 0.0;
  // clipped's adaptive rule: how many reference distances away a neighbour is still mixed
  // whole. 1 clips everyone beyond r.
  double ratio = 2.0;
  // Neighbours assumed to lie: clipped's adaptive radius clips the b farthest; trimmed_mean
  // drops the b largest and b smallest values of each coordinate.
  int byzantine = 1;
  bool operator==(const AggregateConfig&) const = default;
};

/// gossip.aggregate's kind from the command line (`--aggregate`). Throws InputError "WHAT:
/// unknown value ..." naming the value and the choices.
Aggregate parse_aggregate(const std::string& text, const std::string& what);
/// "clipped, adaptive tau, ratio 2, byzantine 1", "clipped, tau 0.5", "trimmed_mean, byzantine 2",
/// "median", "mean".
std::string describe(const AggregateConfig& a);

/// gossip.outer: DiLoCo's outer optimizer on local SGD's averagings (docs/config.md): the
/// pseudo-gradient (parameters when the local phase began minus what the mixing made of it)
/// goes through Nesterov momentum with its own learning rate.
struct OuterConfig {
  bool enabled = false;
  double lr = 0.7;        // DiLoCo's
  double momentum = 0.9;  // in [0, 1)
  /// gossip.outer.compress: the pseudo-gradients travel compressed (dct_top_k: DeMo's, quantize:
  /// INTELLECT-1's int8) with error feedback, and the peers average what they decode instead of
  /// mixing parameters; none: the parameters are mixed as they are.
  CompressConfig compress;
  /// gossip.outer.fragments: Streaming DiLoCo's F (> 1: the buffer in F fragments, round r
  /// synchronising fragment r mod F alone); 1: the whole buffer every round.
  int fragments = 1;
};

struct GossipConfig {
  std::string topology;             // path of a topology YAML (relative to the config)
  AlgorithmKind algorithm = AlgorithmKind::kDpsgd;  // a row of gossip/algorithm_table.hpp
  int period = 1;                   // local steps between gossip rounds (local SGD's H)
  int max_staleness = 2;            // async: oldest acceptable neighbour round
  ChocoConfig choco;                // choco only
  bool overlap = false;             // dpsgd, local_sgd: send round r while computing round r+1
  // How parameter values travel: whole parameter messages (every algorithm but choco), and
  // choco's top_k and random_k values (in varint-indexed packets): fp32, or rounded to bf16 /
  // fp16 as they leave a peer and widened back on receipt (gossip/half.hpp).
  WireFormat wire = WireFormat::kFp32;
  AggregateConfig aggregate;        // dpsgd, local_sgd, async: mean unless set
  ByzantinePolicy on_byzantine = ByzantinePolicy::kReport;
  OuterConfig outer;                // local_sgd only: DiLoCo's outer Nesterov step
};

/// The compressor whose packets a run's algorithm sends instead of parameter buffers: choco's
/// (gossip.choco.compress), or local_sgd's outer one (gossip.outer.compress); nullptr when its
/// messages are whole parameter buffers.
const CompressConfig* packet_compressor(const GossipConfig& g);
/// local_sgd's outer step sends packets instead of its parameters: compressed pseudo-gradients
/// (gossip.outer.compress) or Streaming DiLoCo's fragments (gossip.outer.fragments > 1).
bool outer_packets(const GossipConfig& g);

/// monitor.preset: the membership timing for a kind of network, as HashiCorp memberlist's
/// DefaultLocalConfig, DefaultLANConfig and DefaultWANConfig (docs/config.md has the table).
/// One row each: X(enum id, name, one line for docs); the timing is monitor_preset's.
#define GOSSIP_MONITOR_PRESETS(X)                                                               \
  X(kLocal, "local", "peers on one host: short waits")                                          \
  X(kLan, "lan", "one data centre (the default)")                                               \
  X(kWan, "wan", "peers across the internet: long waits, slow to bury")

/// monitor_preset_name: "local", "lan", "wan", the preset's name in configs.
GOSSIP_NAMED_CHOICE(MonitorPreset, GOSSIP_MONITOR_PRESETS, monitor_preset_table,
                    monitor_preset_name)
using MonitorPresetRow = NamedRow<MonitorPreset>;

/// monitor: how the convergence monitor waits for, suspects and buries neighbours, and what a
/// peer does when its live graph splits. The defaults are the `lan` preset.
struct MonitorConfig {
  MonitorPreset preset = MonitorPreset::kLan;
  // How long a peer waits for a neighbour that is alive (it heartbeats) but slow before leaving
  // it out of a round (and suspecting it): the deadline of every collect.
  double round_timeout_s = 30.0;
  // Real peers wait that long only while too few rounds were measured: then for
  // 8 x the 95th percentile of the last 64 rounds' durations, at least round_timeout_floor_s
  // (0: always round_timeout_s).
  double round_timeout_floor_s = 2.0;
  // A neighbour silent this long (no frame at all; links carry a heartbeat every 250 ms) is
  // suspected at once and not waited for; a closed link makes it suspect at once too.
  double suspect_after_s = 1.0;
  // Membership (SWIM with Lifeguard's suspicion): a suspicion held for dead_after_rounds rounds
  // and dead_after_s seconds without the peer refuting it becomes a death.
  std::int64_t dead_after_rounds = 3;
  double dead_after_s = 1.0;
  // An elastic run: a dead member leaves the member graph this many rounds after the last round
  // a neighbour heard from it (plus the announcement's lead), if its death was confirmed by
  // then; later, at its confirmation plus the lead. 0: at its confirmation plus the lead.
  // Counted in rounds, the removal is the same round in gossip run and gossip sim.
  std::int64_t remove_dead_after_rounds = 0;
  PartitionPolicy on_partition = PartitionPolicy::kContinue;  // when the live graph splits
};

/// The timing of `preset` (every field but on_partition, which is no timing and keeps its
/// default). monitor_preset(kLan) == MonitorConfig{}.
MonitorConfig monitor_preset(MonitorPreset preset);

/// monitor.round_timeout_s as a collect deadline.
std::chrono::milliseconds round_timeout(const MonitorConfig& monitor);

/// CHOCO's consensus step when gossip.choco.consensus_step is not given: 1 without compression
/// (CHOCO is then D-PSGD), and for each compressor the value the shipped sweep found best.
double default_consensus_step(const CompressConfig& c);
/// gossip.choco.consensus_step, or its default: default_consensus_step's, halved when several
/// compressed exchanges make a round (gossip_steps > 1).
double consensus_step(const ChocoConfig& c);
/// choco's settings for a log line: "top_k 0.01, gamma 0.05" (", 5 gossip steps a round" when
/// gossip_steps > 1).
std::string describe_choco(const ChocoConfig& c);

struct SimConfig {
  int workers = 0;                  // worker threads for virtual peers (0 = number of cores)
  double latency_ms = 1.0;          // per message
  double bandwidth_mbps = 1000.0;   // per link, megabits per second
  double step_ms = 0.0;             // simulated compute per local step (0 = measure)
  std::vector<int> stragglers;      // peers that compute straggler_factor times slower
  double straggler_factor = 4.0;
  double message_loss = 0.0;        // probability a message is dropped
  bool consensus_only = false;      // peers average random vectors, no gradients
  std::int64_t consensus_dim = 1000;
  std::int64_t consensus_rounds = 50;
  // Peers whose models are evaluated at each evaluation when there are more (evenly spaced
  // ranks; 0 = every peer); the last evaluation adds the 8 peers a screening of every model on
  // 1000 test samples finds lowest (docs/sim.md).
  std::int64_t eval_peers = 64;
  // Peers whose per-round timeline is written (DIR/peers/R/trace.json, on the simulated clock):
  // this many evenly spaced ranks (0 = none).
  std::int64_t trace_peers = 16;
  // The CPU model (docs/sim.md, "The CPU"): off by default, when a peer's only costs are its
  // steps and its links.
  int cores = 0;                    // cores the peers share (0 = a core each, as separate hosts)
  double byte_cpu_ns = 0.0;         // CPU a byte costs its sender, and again its receiver
  double message_cpu_us = 0.0;      // CPU a message costs its sender, and again its receiver
                                    // (charged twice to a collect that waits: sim_network.hpp)
  bool exchange_cpu = false;        // charge the measured CPU of mixing, compressing, relaying
  /// Links that go through a relay ({a, b, relay}, a < b): a message between a and b reaches
  /// the relay as any other, then leaves on the relay's own sending link after the relay's own
  /// messages of the round, and the relay's link is busy that much longer (docs/sim.md). Set
  /// from net.emulate's NATs and firewalls by simulate_relays (sim/).
  std::vector<std::array<int, 3>> relayed;
};

/// Emulated links (`net.emulate`, `gossip run --netem`): "rate=100mbit[,delay=5ms,jitter=1ms,
/// loss=0.1%]". `gossip run` puts each peer in its own network namespace with its link to the
/// others limited to `rate` each way (tbf), and delayed or lossy through netem when asked.
struct LinkEmulation {
  std::string text;               // as given ("" = no emulation)
  double rate_bits_per_s = 0.0;   // per peer link, each direction
  double delay_ms = 0.0;          // one way, each direction (netem)
  double jitter_ms = 0.0;         // netem
  double loss_percent = 0.0;      // netem
  /// Pairs of ranks (a < b) that cannot reach each other: each has an unreachable route to the
  /// other's address ("No route to host"), as peers behind firewalls or separate NATs.
  std::vector<std::pair<int, int>> unreachable;
  /// Groups of ranks behind one NAT each (nat=1+2+3/4+5): a router namespace masquerades their
  /// connections out and forwards none in; they reach each other on the NAT's own network.
  std::vector<std::vector<int>> nats;
  /// Ranks whose namespace drops every connection coming in (firewall=5+7); they dial out.
  std::vector<int> firewalled;
  bool enabled() const { return rate_bits_per_s > 0.0; }
  /// Asks for delay, jitter or loss: needs the kernel's netem qdisc.
  bool needs_netem() const { return delay_ms > 0.0 || jitter_ms > 0.0 || loss_percent > 0.0; }
};

/// Parses "rate=1gbit,delay=5ms,jitter=1ms,loss=0.1%,unreachable=0-1+4-5" (rate is required;
/// units bit, kbit, mbit, gbit per second; us, ms, s; loss in percent). Throws InputError "WHAT: ..." (or without the
/// prefix when `what` is empty) naming the item that is wrong.
LinkEmulation parse_link_emulation(const std::string& text, const std::string& what);

/// The simulator's model of emulated links: sim.bandwidth_mbps = the rate, and sim.latency_ms =
/// twice the delay (netem sits on both ends of every peer's link, so a message from one peer to
/// another is delayed on the sender's end and again on the switch's end towards the receiver).
/// Jitter and loss are not modelled (TCP resends what netem drops, so no message is lost); the
/// relays that unreachable pairs, NATs and firewalls need are (sim/: simulated_relays).
/// Does nothing when `e` is not enabled.
void simulate_links(SimConfig& sim, const LinkEmulation& e);

/// Checks "host:port" (host a name, IPv4, or [IPv6]; port 1..65535), as a topology's peers:
/// and net.advertise take it: "" when fine, otherwise what is wrong.
std::string address_problem(const std::string& address);

struct NetworkConfig {
  static constexpr std::size_t kMaxRunIdBytes = 256;  // what the wire handshake carries
  std::string run_id = "gossip";
  std::string host = "127.0.0.1";   // when the topology gives no addresses
  int base_port = 29500;            // port of rank r = base_port + r
  // The address a peer binds, when it is not the one its neighbours dial (behind a NAT or in a
  // container): HOST (the port stays its address's) or HOST:PORT; "" = its own address when that
  // is a numeric IP, else every interface.
  std::string bind;
  // The address this peer announces (HOST:PORT others can dial), when it is not the one the
  // run's configuration lists for it (or none is listed: peers: says `learned`): it travels to
  // the members in a record signed by the peer's TLS certificate. "" = the listed address.
  std::string advertise;
  // Whether this peer's neighbours can dial it (auto: other members dial it back at the start);
  // an unreachable peer dials every neighbour itself (docs/network.md#peers-that-cannot-be-dialled).
  ReachableSetting reachable = ReachableSetting::kAuto;
  // Where a link goes when neither end can dial the other: empty = any member found reachable,
  // lowest rank first (relays_auto); else these, in order: "HOST:PORT", or "peer R" (a rank).
  std::vector<std::string> relays;
  bool relays_auto = true;  // false with `relays: none` (or a list): members are not asked
  // Prometheus /metrics (docs/observe.md): peer r serves metrics_port + r on metrics_host, and
  // `gossip run` the whole run's on metrics_port + n; 0 = off.
  int metrics_port = 0;
  std::string metrics_host = "127.0.0.1";
  double connect_timeout_s = 60.0;  // start deadline for dialling neighbours
  // The transport's deadline for one frame once it has begun: writing it, or reading its body
  // (a link that stalls mid-frame this long is closed). 0: monitor.round_timeout_s (a frame may
  // take as long as a round may wait for it). io_timeout() resolves it.
  double io_timeout_s = 0.0;
  // How long a joiner of an elastic run waits for its donors' hand-over (their parameters) once
  // it is a member. 0: connect_timeout_s + monitor.round_timeout_s (the donors dial it, then
  // send a round's message). handover_timeout() resolves it.
  double handover_timeout_s = 0.0;
  bool shared_memory = true;        // same-host neighbours exchange parameters in memory
  std::string congestion;           // net.congestion: TCP congestion control; "" = the system's
  // Mutual TLS between peers (net.tls): on unless `net.tls: off`. The three PEM paths (relative
  // to the config; "{rank}" stands for the peer's rank) are given together or not at all; when
  // not, `gossip run` makes a fresh CA and certificates in its output folder.
  bool tls = true;
  std::string tls_ca;
  std::string tls_cert;
  std::string tls_key;
  LinkEmulation emulate;            // net.emulate: gossip run's links; gossip sim and compare
                                    // model them (it wins over sim.bandwidth_mbps, latency_ms)
};

struct Fault;  // below: one entry of the fault schedule

struct CompareConfig {
  std::vector<std::string> topologies;  // relative to the config
  std::vector<AlgorithmKind> algorithms;  // empty = gossip.algorithm
  std::vector<int> periods;             // empty = gossip.period
  std::vector<std::string> shards;      // empty = data.shard
  std::vector<std::uint64_t> seeds;     // empty = train.seed
  // choco settings: one per compressor (empty = gossip.choco.compress)
  std::vector<CompressConfig> compress;
  // gossip.aggregate of each setting (empty = gossip.aggregate; the algorithms must take it).
  std::vector<AggregateConfig> aggregates;
  // The attacks crossed with every other axis: each a fault-schedule attack entry added to the
  // setting's faults, or `none` (a Fault with no action): nothing added. Empty = no attack
  // axis (the config's faults alone).
  std::vector<Fault> attacks;
  // Membership schedules crossed with the other axes (an elastic topology's joins and leaves):
  // each a name and its join/leave entries, added to the setting's faults; `none` is the static
  // run (name "static", no entries). Empty = no membership axis.
  struct Membership {
    std::string name;
    std::vector<Fault> changes;
  };
  std::vector<Membership> memberships;
  // local_sgd's outer steps crossed with the other axes (DiLoCo, Streaming DiLoCo, DeMo, ...):
  // each a name (the row's label), gossip.outer's keys, and the period and overlap it runs at
  // (0 and false: the config's). Empty = gossip.outer alone.
  struct OuterCell {
    std::string name;
    OuterConfig outer;
    int period = 0;
    bool overlap = false;
  };
  std::vector<OuterCell> outer;
  double target_accuracy = 0.8;
  // A pure-averaging pass (learning rate 0) on every topology, its measured contraction of the
  // consensus distance per round against rho^2; 0 rounds = no pass.
  std::int64_t averaging_rounds = 0;
};

/// What an attacking peer sends instead of its parameters (faults[].kind), each with its one
/// parameter (faults[].s, .std, .z or .epsilon); docs/config.md#attacks gives the formulas.
enum class AttackKind {
  kNone,       // not an attack entry
  kSignFlip,   // -s x
  kScale,      // s x
  kNoise,      // Gaussian noise of standard deviation `std`
  kAlie,       // "a little is enough": the neighbours' mean minus z standard deviations
  kIpm,        // inner-product manipulation: -epsilon times the neighbours' mean
  kDissensus,  // to each victim v: x_v - epsilon (mean of the neighbours - x_v)
  kNan,        // every value NaN
  kInf,        // every value +inf
};

/// One row per attack kind: its name, its parameter's key ("" for none) and that parameter's
/// default (NaN when the entry must give it).
struct AttackTraits {
  AttackKind kind;
  const char* name;
  const char* parameter;
  double default_value;
};
/// Every attack kind, in the order messages and docs list them.
const std::vector<AttackTraits>& attack_table();
/// The row of `kind` (kNone has none: throws).
const AttackTraits& attack_traits(AttackKind kind);
/// "sign_flip, scale, noise, ..." for messages.
std::string attack_choices();

/// net.io_timeout_s, or monitor.round_timeout_s where it is 0, as a duration.
std::chrono::milliseconds io_timeout(const NetworkConfig& net, const MonitorConfig& monitor);
/// net.handover_timeout_s, or connect_timeout_s + monitor.round_timeout_s where it is 0.
std::chrono::milliseconds handover_timeout(const NetworkConfig& net, const MonitorConfig& monitor);

/// A fault schedule entry's action (faults[]: the key that names its peers or links), one row
/// each:
///   X(enum id, name, acts on links (else peers), spans rounds (takes to_round),
///     the membership change it schedules (an elastic topology's: announced at its round;
///     gossip/event_kind.hpp), process signal
///     (gossip run sends it to the peers' processes, gossip sim stops its virtual peers),
///     one line for docs)
#define GOSSIP_FAULT_ACTIONS(X)                                                                    \
  X(kKill, "kill", false, false, std::nullopt, true, "SIGKILL the peers at the round")             \
  X(kRestart, "restart", false, false, std::nullopt, true,                                         \
    "start killed peers again from their newest checkpoint")                                       \
  X(kPause, "pause", false, false, std::nullopt, true,                                             \
    "SIGSTOP the peers for `seconds`, then SIGCONT")                                               \
  X(kCut, "cut", true, true, std::nullopt, false,                                                  \
    "no message crosses the links, both ways, from round to to_round")                             \
  X(kAttack, "attack", false, true, std::nullopt, false,                                           \
    "the peers send what `kind` makes of their parameters, from round to to_round")                \
  X(kJoin, "join", false, false, ChangeKind::kJoin, false,                                         \
    "the peers join the elastic run, announced at round")                                          \
  X(kLeave, "leave", false, false, ChangeKind::kLeave, false,                                      \
    "the peers leave the elastic run, announced at round")

enum class FaultAction {
  kNone,  // no action: compare.attacks' `none` cell, or an entry not read yet
  GOSSIP_FAULT_ACTIONS(GOSSIP_CHOICE_ENUM)
};

struct FaultActionTraits {
  FaultAction kind;
  const char* name;
  bool links;       // acts on links (Fault::links), not peers (Fault::peers)
  bool spans;       // lasts from round to to_round
  std::optional<ChangeKind> change;  // an elastic run's scheduled membership change, not a fault
  bool signal;      // a signal to a process (a stop of a virtual peer), carried out by the launcher
  const char* summary;
};
/// Every action, in the order messages and docs list them (kNone has no row).
std::span<const FaultActionTraits> fault_action_table();
/// The row of `action` (kNone: throws).
const FaultActionTraits& traits(FaultAction action);
/// "kill", "cut", ...: the action's name in configs and records ("none" for kNone).
const char* fault_action_name(FaultAction action);

/// One entry of the fault schedule (`faults:`): at `round`, kill (SIGKILL), restart, or pause
/// (SIGSTOP for `seconds`, then SIGCONT) the listed peers; or from `round` until `to_round`, cut
/// the listed links (both ways); or from `round` until `to_round` (0: the end of the run), let
/// the listed peers attack: send what `attack` says instead of their parameters. `gossip run`
/// carries it out on its processes and `gossip sim` on its virtual peers; cuts and attacks act
/// in each peer's exchange (CutLinks and Attack, gossip/faults.hpp).
struct Fault {
  std::int64_t round = 1;     // from_round, for a cut or an attack
  std::int64_t to_round = 0;  // cut, attack: the first round the links are back, or the attack
                              // over (attack: 0 = never)
  FaultAction action = FaultAction::kNone;
  std::vector<int> peers;     // kill, restart, pause, attack, join, leave
  std::vector<std::pair<int, int>> links;  // cut
  double seconds = 0.0;       // pause only
  AttackKind attack = AttackKind::kNone;  // attack only: what the peers send
  double parameter = 0.0;     // attack only: the kind's parameter (s, std, z or epsilon)
};

/// An attack entry's kind and parameter for logs: "sign_flip (s = 1)", "nan".
std::string describe_attack(const Fault& fault);
/// Whether `fault` is an elastic run's join or leave (its action's membership trait).
inline bool is_membership(const Fault& fault) {
  return fault.action != FaultAction::kNone && traits(fault.action).change.has_value();
}

struct RunConfig {
  std::string path;  // the file it was loaded from ("" when built in code)
  DataConfig data;
  ModelConfig model = ModelConfig::mlp({784, 256, 128, 10});
  OptimizerConfig optimizer;
  TrainConfig train;
  GossipConfig gossip;
  MonitorConfig monitor;
  SimConfig sim;
  NetworkConfig net;
  CompareConfig compare;
  std::vector<Fault> faults;  // the fault schedule, in file order
  std::string faults_path;    // --faults FILE: where the schedule came from ("" = this file)
  /// `exec:` a command (run by /bin/sh) that `gossip run` starts for each rank instead of
  /// `gossip peer`: a Python training script over the gossip module (GOSSIP_PEER_ARGS in its
  /// environment carries gossip peer's arguments). Relative paths in it are the caller's.
  std::string exec;
  /// Line of each field the file set, by dotted name ("gossip.algorithm"); empty in code.
  std::map<std::string, int> lines;

  /// "FILE:LINE: field" for a field the file set, "FILE: field" for one it did not, "field"
  /// for a config built in code: the prefix of a message about that field.
  std::string where(const std::string& field) const;
};

/// Refuses a run that plans more than kMaxLocalSteps local steps per peer (`steps`, a double so
/// that a plan too large for an integer is refused before it is converted): throws InputError
/// "FILE:LINE: train.epochs: ..." naming the steps and what would bring them down.
void check_local_steps(const RunConfig& config, double steps);

/// Loads and validates a run config; throws InputError "FILE:LINE: field: problem". Numbers
/// must be finite (.nan and .inf are refused); a key given twice in one map is an error.
RunConfig load_config(const std::string& path);
/// A fault schedule file (`--faults FILE`): a YAML map whose only key is `faults:`, read and
/// checked as a run config's. Throws InputError "FILE:LINE: field: problem".
std::vector<Fault> load_faults(const std::string& path);
/// `--faults FILE` on `config`: its schedule becomes the file's, and errors about an entry name
/// the file and the entry's line there (RunConfig::faults_path).
void use_faults_file(RunConfig& config, const std::string& path);
/// The same from text (tests); `name` stands for the file in messages, `dir` resolves paths.
RunConfig load_config_from_string(const std::string& text, const std::string& name,
                                  const std::string& dir = ".");
/// Every key a run config may hold, dotted and sorted ("gossip.choco.compress.kind",
/// "faults[].round"; the fields of model.layers' items are not among them): the loader's own
/// tables, listed by running them on no file. docs/config.md documents each (a test checks).
std::vector<std::string> config_keys();

}  // namespace gossip
