/// peer: one real peer process — its trainer, its transport (its links to the neighbours), the
/// gossip algorithm (the same objects the simulator runs) and its convergence monitor. `gossip
/// peer` runs it directly (under Slurm, mpirun, Kubernetes); `gossip run` starts one per rank
/// and reads its events.
#pragma once
#if !defined(GOSSIP_ROOM_PEER)
#error "gossip/peer.hpp belongs to room peer, which this room does not use (see the room table in meson.build)"
#endif

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gossip/backend.hpp"
#include "gossip/config.hpp"
#include "gossip/monitor.hpp"
#include "gossip/net.hpp"
#include "gossip/report.hpp"
#include "gossip/topology.hpp"

namespace gossip {

/// A worker of PyTorch's torchrun (its elastic agent sets TORCHELASTIC_RUN_ID, RANK, WORLD_SIZE,
/// LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT and TORCHELASTIC_RESTART_COUNT): rank R listens on
/// port net.base_port + R moved by a block the run id and MASTER_PORT choose (as a job id does);
/// on one node every rank is at MASTER_ADDR, across nodes only rank 0
/// is listed there and the others announce `own_host` (signed records, learned).
struct TorchRun {
  std::string master_addr;
  int master_port = 0;
  int world_size = 0;        // WORLD_SIZE
  int local_world_size = 0;  // LOCAL_WORLD_SIZE: ranks on this node (the world size: one node)
  int restart_count = 0;     // TORCHELASTIC_RESTART_COUNT: > 0 once the agent restarted it
  std::string run_id;        // TORCHELASTIC_RUN_ID (--rdzv_id; standalone: a fresh one a job)
  std::string own_host;      // this node's address toward MASTER_ADDR (several nodes only)
  bool one_node() const;
};

/// How this process was started: its rank and, under a launcher (Open MPI's mpirun, srun, an MPI
/// launcher's PMI, torchrun, a Kubernetes Indexed Job), how many ranks it started, its job and
/// hosts.
struct Launch {
  std::optional<int> rank;
  std::string rank_source;              // "--rank", "SLURM_PROCID", ... ("" when no rank)
  std::optional<int> world_size;        // ranks the launcher started (mpirun -np, srun -n)
  std::string world_size_source;        // e.g. "OMPI_COMM_WORLD_SIZE=4"
  std::string launcher;                 // "mpirun", "srun", "the MPI launcher"
  std::optional<std::uint64_t> job_id;  // the launcher's job: offsets the ports (job_base_port)
  std::string job_source;
  std::vector<std::string> hosts;       // host of each rank (Slurm's node list, a hostfile)
  std::string hosts_source;
  std::string node;                     // the node the launcher says this rank is on
  std::optional<TorchRun> torchrun;     // under torchrun: where the ranks listen
};

struct PeerOptions {
  int rank = 0;
  std::string out_dir;      // the run's folder: this peer writes into out_dir/peers/R/
  int events_fd = -1;       // write "@gossip ..." event lines there for the launcher (1: stdout)
  std::string config_path;  // recorded in the ready event, for `gossip collect`
  Launch launch;            // how this rank was started (ports, hosts)
  std::int64_t resume_round = -1;  // >= 0: continue from its checkpoint-ROUND.ckpt
  std::int64_t until_round = 0;    // > 0: stop after this round, with a checkpoint
  std::string tls_dir;      // TLS credentials in `gossip keys init` layout; overrides net.tls
  bool rejoin = false;      // restarted into a running network: append to its files
  /// With rejoin: the round the network was at when this peer was started again (the
  /// launcher's restart). A peer that finds no live neighbour starts there and trains alone;
  /// the schedule's kills before it are past. -1: not known (it takes its neighbours' round).
  std::int64_t rejoin_round = -1;
  std::int64_t leave_at_round = -1;  // >= 0: an elastic run's peer announces its leave then
  /// gossip peer --join: the ranks of the live members this new identity contacts; they
  /// announce its join, and it joins the run where the member timeline then says.
  std::vector<int> join_contacts;
  /// The CUDA device (modulo the visible ones) this peer's backend takes; -1: its rank's. The
  /// peers of one process (gossip peer --ranks) share its device.
  int device = -1;
  /// This peer's backend instead of the one train.backend names (a test's host backend that
  /// keeps its tensors apart as a GPU's would, as SimHooks::backend); null: train.backend's.
  std::function<std::unique_ptr<Backend>()> backend;
};

/// How the process of `opt` begins: rejoining, from a checkpoint (--resume-round), or afresh.
inline PeerStart peer_start(const PeerOptions& opt) {
  return opt.rejoin ? PeerStart::kRejoined
                    : opt.resume_round >= 0 ? PeerStart::kResumed : PeerStart::kFresh;
}

/// This peer's TLS settings: off when net.tls is off; else the files in `tls_dir` when given,
/// else net.tls's files with "{rank}" replaced by `rank`. Throws InputError, saying how to make
/// credentials, when TLS is on and neither names any.
TlsConfig peer_tls(const RunConfig& config, const std::string& tls_dir, int rank);

/// `gossip doctor`: what net::diagnose found from peer `opt.rank`'s place, one line per
/// neighbour and what to change (`text`), the same as one JSON object (`json`), and whether every
/// link can form one way or the other.
struct DoctorOutcome {
  bool can_start = false;
  std::string text;
  std::string json;
};
DoctorOutcome doctor(const RunConfig& config, const Topology& topology, const PeerOptions& opt);

/// The folder of rank `rank`'s files in the run folder `out_dir`: out_dir/peers/R.
std::string peer_dir(const std::string& out_dir, int rank);

/// Reads the rank from, in order: `cli` (--rank), torchrun's RANK (with WORLD_SIZE, MASTER_ADDR,
/// MASTER_PORT, when TORCHELASTIC_RUN_ID says torchrun started it), GOSSIP_RANK, OMPI_COMM_WORLD_RANK (with
/// OMPI_COMM_WORLD_SIZE and the job id), SLURM_PROCID of an srun task (with SLURM_NTASKS,
/// SLURM_JOB_ID and the step's node list), PMI_RANK (with PMI_SIZE), JOB_COMPLETION_INDEX (a
/// Kubernetes Indexed Job), else the trailing number of the host name (a StatefulSet pod
/// "gossip-3" is rank 3). Throws InputError when a variable is malformed.
Launch detect_launch(std::optional<int> cli);

/// Refuses a launch that does not fit the topology: a world size other than its peer count, or
/// a host list that does not place this rank where the launcher says it runs. Every rank of a
/// wrong launch throws the same InputError, naming both numbers.
void check_launch(const Launch& launch, const Topology& topology, const std::string& topology_path);

/// An MPI hostfile line: a host and how many ranks run on it.
struct HostSlots {
  std::string host;
  int slots = 1;
};
/// Slurm's compressed host list ("node[01-03,7],login1") in order; InputError names `what`.
std::vector<std::string> expand_slurm_hostlist(std::string_view list, const std::string& what);
/// Slurm's tasks per node ("2(x3),1") as one count per node; InputError names `what`.
std::vector<int> expand_slurm_tasks_per_node(std::string_view text, const std::string& what);
/// An MPI hostfile ("host slots=N" a line, '#' comments); errors name `path` and the line.
std::vector<HostSlots> parse_hostfile(const std::string& text, const std::string& path);
/// The host of each of `ranks` ranks when they fill the hosts' slots in order (srun's block
/// distribution, mpirun's mapping by slot); InputError naming `what` when there are too few.
std::vector<std::string> hosts_by_slot(const std::vector<HostSlots>& hosts, int ranks,
                                       const std::string& what);

/// The first port of a job's block: base_port itself when there is no job id, else base_port plus
/// a multiple of `peers` chosen by the job id, below 32768 when the block fits there, so that two
/// jobs on one host (most likely) use different ports.
int job_base_port(int base_port, int peers, std::optional<std::uint64_t> job_id);

/// "host:port" of every rank: the topology's `peers:` addresses when it has them, else the
/// launcher's host of each rank (or net.host) and port job_base_port(net.base_port) + rank.
std::vector<std::string> peer_addresses(const RunConfig& config, const Topology& topology,
                                        const Launch& launch);
std::vector<std::string> peer_addresses(const RunConfig& config, const Topology& topology);
/// What rank `rank` announces: net.advertise, else its listed address, else (peers: says
/// `learned`) the one net.host and net.base_port give it.
std::string announced_address(const RunConfig& config, const Topology& topology,
                              const Launch& launch, int rank);

/// Where a peer whose address is `address` listens: `bind` (net.bind) when given — HOST:PORT
/// as it is, a bare HOST with the port of `address` — since behind a NAT or in a container the
/// address the neighbours dial is not one this machine has; else `address` when its host is a
/// numeric IP, else every interface ("0.0.0.0:port"): a host name may resolve on its own machine
/// to an address no other machine reaches (Debian maps it to 127.0.1.1).
std::string listen_address(const std::string& address, const std::string& bind = {});

/// The one peer lifecycle, driven round by round by its caller (run_peer's loop for `gossip
/// peer`, the Python module for a user's script): the network, membership watch, algorithm,
/// checkpoints and record of a peer; the caller decides when a round runs. It mixes either the caller's own flat float32 buffer (join: a PyTorch model whose
/// parameters the caller trains) or gossip's own model from the config on this rank's shard
/// (join_model: its local steps run inside each round, as in run_peer). Not thread-safe: one
/// thread drives it. Errors are InputError (bad use, refused by the neighbours) or RuntimeError.
class PeerSession {
 public:
  /// Checks the rank and the TLS credentials and opens DIR/peers/R/; connects to nobody yet.
  PeerSession(RunConfig config, Topology topology, PeerOptions options);
  ~PeerSession();
  PeerSession(const PeerSession&) = delete;
  PeerSession& operator=(const PeerSession&) = delete;

  int rank() const;
  int size() const;
  const RunConfig& config() const;
  const Topology& topology() const;
  /// This rank's shard: indices into the training set (data.shard, train.seed), as every
  /// `gossip peer` and the simulator draw it.
  std::vector<std::int64_t> shard() const;

  /// Joins the network with the caller's buffer, which must stay where it is, and alive, until
  /// finish(); `model` names the model for the handshake (peers with another name or size are
  /// refused); `rounds` is how many rounds the caller plans (the launcher's progress line; 0 =
  /// not known). Throws InputError when already joined, or when a neighbour refused us because
  /// its buffer differs (naming both).
  void join(std::span<float> params, const std::string& model, std::int64_t rounds);
  /// Joins with gossip's own model (config.model) on this rank's shard; rounds and evaluations
  /// follow the run's plan, as for `gossip peer`.
  void join_model();
  bool joined() const;
  /// The buffer that is mixed (the caller's, or the own model's parameters on the host).
  std::span<float> params();

  /// One round of the configured algorithm: the own model's local steps (none for a caller's
  /// buffer), publish, collect, mix into the buffer in place. Returns the rounds done.
  std::int64_t average();
  std::int64_t rounds_done() const;
  /// The caller's `rounds`, or the plan's for the own model.
  std::int64_t planned_rounds() const;
  /// Own model: whether the plan evaluates after the rounds done so far.
  bool eval_due() const;
  /// Records an evaluation after the rounds done: metrics.csv, a parameter snapshot and the
  /// launcher's eval event. Own model: evaluates it on the test set (loss and accuracy are then
  /// ignored); `epoch` < 0 takes the plan's.
  void report(double loss, double accuracy, double epoch);
  /// The trace's clock (seconds), and a span of an overlapped round on the trace's overlap
  /// track: `part` is copy, copy_wait or exposed (InputError otherwise), [start, end] on that
  /// clock; summary.json sums them (overlap_s). For a caller that mixes beside its steps.
  double trace_now() const;
  void trace_overlap(std::int64_t round, const std::string& part, double start, double end);
  /// Checkpoints (train.checkpoint_every, gossip run --until-round and --resume), the same
  /// files as a `gossip peer`'s, with the caller's own state inside.
  /// The caller state of the checkpoint this peer resumed from (PeerOptions::resume_round; its
  /// parameters, the algorithm's state and the round are restored by join), or nullopt when it
  /// started afresh.
  std::optional<std::vector<std::byte>> resumed_state() const;
  /// Whether the rounds done call for a checkpoint: a multiple of `every` (< 0: the config's
  /// train.checkpoint_every; 0: none) before the last round, or PeerOptions::until_round;
  /// false once that round's checkpoint is written.
  bool checkpoint_due(std::int64_t every = -1) const;
  /// Writes DIR/peers/R/checkpoint-ROUND.ckpt after the rounds done: the buffer (own model: the
  /// trainer's state), the algorithm's state and `caller_state`; keeps the newest 3.
  void save_checkpoint(std::span<const std::byte> caller_state);
  /// Whether the rounds done reach PeerOptions::until_round (before the last round).
  bool stop_due() const;
  /// Whether the live graph has split and monitor.on_partition is stop: the caller then
  /// records an evaluation, saves a checkpoint and finishes (summary.json's
  /// stopped_by_partition is true).
  bool partition_stop_due() const;
  /// An elastic run whose schedule takes this peer out: whether the rounds done reach the round
  /// it leaves (its last round, one before, was mixed as usual). The caller then finishes.
  bool leave_due() const;
  /// An elastic run: announce this peer's leave at the next round (SIGTERM does this under
  /// gossip peer). It takes effect membership_lead rounds later, when leave_due() says so; the
  /// last member cannot leave (said in the log, and it trains on).
  void request_leave();
  /// Leaves the network at until_round without a summary (as gossip peer --until-round does),
  /// for `gossip run --resume` to continue. Throws InputError when that round has no checkpoint.
  void stop();
  /// Peers this peer's membership view holds dead, ascending.
  std::vector<int> dead_peers() const;
  /// The live graph without them.
  LiveGraph live_graph() const;
  /// Writes params.bin, summary.json and the done event, and leaves the network (says bye).
  /// `awaits_average`: the caller then waits for the launcher's average model to evaluate it
  /// (the done event says so; the Python front end's finish()).
  Summary finish(bool awaits_average = false);
  bool finished() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// Runs one peer to the end of training. Returns the process exit code; throws on bad input.
int run_peer(const RunConfig& config, const Topology& topology, const PeerOptions& options);

}  // namespace gossip
