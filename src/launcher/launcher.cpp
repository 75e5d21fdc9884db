// launcher/launcher.cpp: `gossip run`. Starts the peers, follows their "@gossip" event lines,
// hands them to the NetworkRecord (which merges evaluations into metrics.csv with the consensus
// distance and the accuracy of the average model), draws the progress bar, and ends the run:
// summary.json on success; every child stopped on Ctrl-C or on a peer's failure.
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <optional>
#include <tuple>
#include <variant>

#include "src/launcher/children.hpp"
#include "src/launcher/network.hpp"
#include "src/launcher/emulated_network.hpp"
#include "src/launcher/mps.hpp"
#include "src/launcher/network_record.hpp"
#include "src/launcher/observe.hpp"
#include "src/launcher/run_guard.hpp"
#include "gossip/checkpoint.hpp"
#include "gossip/core.hpp"
#include "gossip/json.hpp"
#include "gossip/events.hpp"
#include "gossip/faults.hpp"
#include "gossip/gossip.hpp"
#include "gossip/launcher.hpp"
#include "gossip/layer_spec.hpp"
#include "gossip/model.hpp"
#include "gossip/monitor.hpp"
#include "gossip/net.hpp"
#include "gossip/report.hpp"
#include "gossip/topology.hpp"
#include "gossip/progress.hpp"

namespace gossip::launch_parts {
namespace {

std::atomic<int> g_signal{0};

void on_signal(int sig) { g_signal = sig; }

/// The newest round of which every peer of OUT has a valid checkpoint; refused files are
/// named on stderr. Throws InputError when there is none, or when the run has finished.
std::int64_t common_checkpoint(const std::string& out, int n) {
  if (std::filesystem::exists(out + "/summary.json"))
    throw InputError(cat(out, ": that run has finished (summary.json is there); nothing to "
                         "resume"));
  std::vector<std::int64_t> common;
  for (int r = 0; r < n; ++r) {
    std::vector<std::string> refused;
    const auto rounds = valid_checkpoints(cat(out, "/peers/", r), r, &refused);
    for (const auto& why : refused)
      std::fprintf(stderr, "gossip run: refusing checkpoint %s\n", why.c_str());
    if (r == 0) {
      common = rounds;
    } else {
      std::vector<std::int64_t> both;
      std::set_intersection(common.begin(), common.end(), rounds.begin(), rounds.end(),
                            std::back_inserter(both));
      common = std::move(both);
    }
  }
  if (common.empty())
    throw InputError(cat(out, ": nothing to resume: no round has a valid checkpoint from all ",
                         n, " peers (checkpoints are peers/R/checkpoint-ROUND.ckpt, written every "
                         "train.checkpoint_every rounds or at --until-round)"));
  std::printf("gossip run: resuming %s from round %lld, the newest round every peer has a "
              "checkpoint of\n", out.c_str(), static_cast<long long>(common.back()));
  return common.back();
}

/// ["a","b"]: a JSON list of strings (GOSSIP_PEER_ARGS).
std::string json_list(const std::vector<std::string>& items) {
  std::string out = "[";
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += ',';
    out += json_string(items[i]);
  }
  out += ']';
  return out;
}

}  // namespace


void Network::start_observers(const RunConfig& config, const Topology& topology) {
  if (!opt_.dashboard.empty()) {
    dashboard_ = std::make_unique<DashboardState>(
        launcher::dashboard_setup("gossip run", opt_.out_dir, config, topology));
    try {
      dashboard_server_ = std::make_unique<launcher::DashboardServer>(opt_.dashboard, *dashboard_);
      std::printf("gossip run: dashboard at http://%s/ (read-only; it closes with the run, and "
                  "`gossip watch %s` shows the run folder any time)\n",
                  dashboard_server_->address().c_str(), opt_.out_dir.c_str());
    } catch (const RuntimeError& e) {
      std::fprintf(stderr, "gossip run: %s; the run goes on without a dashboard\n", e.what());
    }
  }
  if (config.net.metrics_port > 0) {
    try {
      metrics_ = std::make_unique<launcher::RunMetrics>(config, n_, opt_.out_dir);
      std::printf("gossip run: Prometheus metrics of the whole run at http://%s/metrics; peer r "
                  "at http://%s:%d+r/metrics\n", metrics_->address().c_str(),
                  config.net.metrics_host.c_str(), config.net.metrics_port);
    } catch (const RuntimeError& e) {
      std::fprintf(stderr, "gossip run: %s; the run goes on without the merged /metrics (each "
                   "peer still serves its own)\n", e.what());
    }
  }
  std::fflush(stdout);
}

/// The run's TLS credentials, and the words for them on the run's first line.
struct RunCredentials {
  std::string dir;   // --tls-dir of every peer, or "" when they use the config's settings
  std::string line;
};

/// The run's own TLS credentials when TLS is on and the config names none: a fresh CA (whose
/// key is never written, so no one can issue more) and a key and certificate per rank in
/// OUT/tls. A resumed run keeps the ones it has there while they serve every rank, and says
/// why when they do not before it makes new ones.
RunCredentials run_credentials(const RunConfig& config, const std::string& out_dir, int n,
                               bool resume) {
  if (!config.net.tls) return {"", "TLS off (net.tls: off)"};
  if (!config.net.tls_ca.empty()) return {"", "TLS with net.tls's credentials"};
  const std::string dir = cat(out_dir, "/tls");
  std::string fresh = cat("TLS with a fresh CA in ", dir);
  if (resume) {
    const std::string problem = key_set_problem(dir, config.net.run_id, n);
    if (problem.empty()) return {dir, cat("TLS with the run's own CA, kept from ", dir)};
    fresh = cat("TLS with a fresh CA in ", dir, " (the run's own could not be kept: ", problem,
                ")");
  }
  KeySetOptions keys;
  keys.run_id = config.net.run_id;
  keys.peers = n;
  keys.write_ca_key = false;
  keys.overwrite = true;
  create_key_set(dir, keys);
  return {dir, fresh};
}

std::vector<std::string> Network::peer_argv(int r, bool rejoin, int last) const {
  std::vector<std::string> argv = peer_args(r, rejoin, last);
  std::vector<std::string> prefix;
  if (links_) prefix = links_->exec_prefix(r);
  if (!exec_.empty()) {
    // exec: the command, through /bin/sh, with gossip peer's arguments for Peer.from_env().
    prefix.insert(prefix.end(), {"/usr/bin/env", cat("GOSSIP_PEER_ARGS=", json_list(argv)),
                                 cat("GOSSIP_AVERAGE_DIR=", opt_.out_dir), "/bin/sh", "-c",
                                 exec_});
    return prefix;
  }
  prefix.insert(prefix.end(),
                {std::filesystem::read_symlink("/proc/self/exe").string(), "peer"});
  argv.insert(argv.begin(), prefix.begin(), prefix.end());
  return argv;
}

std::vector<std::string> Network::peer_args(int r, bool rejoin, int last) const {
  std::vector<std::string> argv{opt_.config_path, "--out", opt_.out_dir, "--events-fd",
                                std::to_string(launcher::kEventsFd)};
  if (last > r) argv.insert(argv.begin() + 1, {"--ranks", cat(r, "-", last)});
  else argv.insert(argv.begin() + 1, {"--rank", std::to_string(r)});
  if (links_) argv.insert(argv.end(), {"--hosts", cat(opt_.out_dir, "/netem-hosts")});
  if (!tls_dir_.empty()) argv.insert(argv.end(), {"--tls-dir", tls_dir_});
  if (rejoin) argv.insert(argv.end(), {"--rejoin", "--rejoin-round", cat(live_round(r, true))});
  else if (resume_round_ >= 0) argv.insert(argv.end(), {"--resume-round", cat(resume_round_)});
  if (opt_.until_round > 0) argv.insert(argv.end(), {"--until-round", cat(opt_.until_round)});
  argv.insert(argv.end(), opt_.peer_arguments.begin(), opt_.peer_arguments.end());
  return argv;
}

void Network::start() {
  if (!exec_.empty()) {  // nothing of an earlier run's average model in this folder
    for (const char* f : {"/average.bin", "/average-request.json", "/average-eval.json"})
      std::filesystem::remove(opt_.out_dir + f);
  }
  peer_round_.assign(n_, resume_round_ >= 0 ? resume_round_ : 0);
  if (resume_round_ >= 0) recover_unmerged();
  epoch_started_.assign(std::max<std::size_t>(1, topology_.epochs().size()), false);
  epoch_noted_ = epoch_done_ = epoch_started_;
  epoch_started_[0] = epoch_noted_[0] = epoch_done_[0] = true;
  for (int r = 0; r < n_; ++r) {
    // In batches: between two, every child that has already ended is reaped, and a Ctrl-C or
    // SIGTERM stops the start there (run() then stops the children started).
    if (r > 0 && r % kStartBatch == 0) {
      for (auto& c : children_) launcher::reap(children_, c);
      if (g_signal != 0) return;
    }
    const std::string dir = cat(opt_.out_dir, "/peers/", r);
    if (!initial_member(r)) {  // an elastic run's later member: started when it joins
      launcher::Child c;
      c.rank = r;
      c.log_path = dir + "/peer.log";
      children_.push_back(std::move(c));
      continue;
    }
    make_output_dir(dir);
    spawned_[r] = Clock::now();
    if (per_process_ > 1) {  // ranks r to last in one process (train.peers_per_process)
      const int last = std::min(n_, r + per_process_) - 1;
      for (int f = r + 1; f <= last; ++f) {  // a follower's peer.log is its process's
        const std::string follower = cat(opt_.out_dir, "/peers/", f);
        make_output_dir(follower);
        std::filesystem::remove(follower + "/peer.log");
        std::filesystem::create_symlink(cat("../", r, "/peer.log"), follower + "/peer.log");
      }
      for (auto& c : launcher::spawn_group(r, last - r + 1, r, peer_argv(r, false, last),
                                           dir + "/peer.log"))
        children_.push_back(std::move(c));
      r = last;
      continue;
    }
    children_.push_back(launcher::spawn_child(r, peer_argv(r, false), dir + "/peer.log"));
  }
}




void Network::merge_ready_rounds() {
  for (const EvaluationFigures& f : record_.merge_ready_rounds()) {
    if (dashboard_) dashboard_->on_figures(f, now_s());
    if (metrics_) metrics_->evaluation(f);
    status_ = cat("acc ", fixed(f.test_accuracy, 4), "  peers ", fixed(f.peer_accuracy_min, 3),
                  "-", fixed(f.peer_accuracy_max, 3), "  consensus ", sci(f.consensus_distance),
                  " (round ", f.round, ")");
    show_progress();
  }
}


/// The progress line at the round every live peer has completed, with the last evaluation.
void Network::show_progress() {
  last_progress_ = Clock::now();
  const std::int64_t total = record_.total_rounds();
  if (total == 0) return;  // no peer has said how many rounds there are yet
  const std::int64_t done = std::min(total, slowest_round());
  if (topology_.epochs().empty()) return progress_.update(done, total, stage(done, total));
  int live = 0;  // an elastic run: the members whose processes run
  for (const auto& c : children_) live += c.running;
  progress_.update(done, total, cat("live ", live, "  ", stage(done, total)));
}

/// The text after the progress bar: the last evaluation merged, else the stage the run is in.
std::string Network::stage(std::int64_t done, std::int64_t total) const {
  if (!status_.empty()) return status_;
  const std::int64_t start = std::max<std::int64_t>(0, resume_round_);
  const bool moved = std::any_of(peer_round_.begin(), peer_round_.end(),
                                 [&](std::int64_t r) { return r > start; });
  if (!moved) return "starting the peers";
  if (done < total) return "training (no evaluation merged yet)";
  return "the peers are finishing (no evaluation merged)";
}

std::int64_t Network::live_round(int except, bool furthest) const {
  std::int64_t round = -1;
  for (std::size_t r = 0; r < children_.size(); ++r)
    if (static_cast<int>(r) != except && children_[r].running && !killed_by_schedule(r))
      round = round < 0 ? peer_round_[r]
              : furthest ? std::max(round, peer_round_[r])
                         : std::min(round, peer_round_[r]);
  return round >= 0 ? round : peer_round_[except];  // no one runs: where it was itself
}

std::int64_t Network::slowest_round() const {
  std::int64_t round = std::numeric_limits<std::int64_t>::max();
  for (int r = 0; r < n_; ++r) {
    if (std::find(record_.dead().begin(), record_.dead().end(), r) != record_.dead().end())
      continue;
    // An elastic run: a peer not started yet, or one that left, holds nobody back.
    if (!topology_.epochs().empty() && !children_.empty() && !children_[r].running) continue;
    round = std::min(round, peer_round_[r]);
  }
  return round == std::numeric_limits<std::int64_t>::max() ? 0 : round;
}

int Network::fail(const std::string& why) {
  progress_.finish();
  std::fprintf(stderr, "gossip run: %s\n", why.c_str());
  launcher::stop_all(children_, 3000);
  std::fprintf(stderr, "gossip run: stopped all peers; logs in %s/peers/*/peer.log\n",
               opt_.out_dir.c_str());
  return kExitFailure;
}

int Network::run() {
  progress_.enable(opt_.progress);
  start();
  for (;;) {
    if (g_signal != 0) {
      progress_.finish();
      std::fprintf(stderr, "gossip run: interrupted; stopping %d peers\n", n_);
      launcher::stop_all(children_, 3000);
      return 130;
    }
    std::vector<pollfd> fds;
    for (auto& c : children_)
      if (c.out_fd >= 0) fds.push_back({c.out_fd, POLLIN, 0});
    if (!fds.empty()) poll(fds.data(), fds.size(), 200);
    bool all_exited = true;
    for (auto& c : children_) {
      if (reap_and_read(c)) {
        const ExitVerdict verdict = judge_exit(c);
        if (verdict.fatal) return fail(*verdict.fatal);
        if (verdict.restarted) {
          all_exited = false;
          continue;
        }
      }
      all_exited &= !c.running && c.out_fd < 0;
    }
    // An elastic run whose joiners have not all been started is not over.
    all_exited &= std::all_of(epoch_started_.begin(), epoch_started_.end(), [](bool b) { return b; });
    const bool outside_running = follow_outside();
    merge_ready_rounds();
    if (!exec_.empty() && !outside_running) hand_out_average();
    carry_out_faults();
    if (!topology_.epochs().empty()) {
      start_joiners();
      note_membership(slowest_round());
    }
    if (Clock::now() - last_progress_ >= std::chrono::seconds(1)) show_progress();
    if (metrics_) update_metrics();
    if (all_exited && !outside_running) break;
  }
  return end_run();
}

bool Network::reap_and_read(launcher::Child& c) {
  // Reap before reading: a child that has exited has all its lines in the pipe, so its
  // "done" event is read before it is judged (read first, and a child that writes it and
  // exits in between looked like a failure).
  const bool was_running = c.running;
  const bool exited = launcher::reap(children_, c);
  std::vector<std::string> lines;
  launcher::read_lines(c, lines);
  for (const auto& l : lines)
    if (const auto e = parse_event(l)) handle_event(c.rank, *e);
  return exited && was_running;
}

Network::ExitVerdict Network::judge_exit(const launcher::Child& c) {
  const bool stopped_as_asked = opt_.until_round > 0 && c.exit_code == 0;
  if (killed_by_schedule(c.rank)) {
    peer_gone(c.rank, "killed by the fault schedule");
    watch_outside(c.rank);
  } else if (c.exit_code != 0 || (!record_.has_finished(c.rank) && !stopped_as_asked)) {
    const std::string why = cat("peer ", c.rank, " failed (exit code ", c.exit_code,
                                "); last lines of its log:\n", launcher::tail_lines(c.log_path, 6));
    if (opt_.restart_on_failure && restarts_[c.rank] < kMaxRestarts) {
      ++restarts_[c.rank];
      progress_.note(cat(why, "\nstarting peer ", c.rank, " again (--restart on-failure, ",
                         restarts_[c.rank], " of ", kMaxRestarts, ")"));
      record_.log_fault(peer_round_[c.rank], "restart", {c.rank}, 0.0);
      restart(c.rank);
      return {.restarted = true, .fatal = std::nullopt};
    }
    if (!opt_.keep_going) return {.restarted = false, .fatal = why};
    progress_.note(why);
    peer_gone(c.rank, cat("failed (exit code ", c.exit_code, ")"));
    watch_outside(c.rank);
  }
  return {};
}

int Network::end_run() {
  if (dashboard_) dashboard_->set_finished(now_s());
  if (metrics_) {
    update_metrics();
    metrics_->write();
  }
  if (static_cast<int>(record_.dead().size()) == n_) return fail("every peer failed");
  show_progress();  // the line as the run ended: its last round and stage
  progress_.finish();
  if (opt_.until_round > 0 && record_.finished() == 0) {
    std::printf("gossip run: every peer stopped after round %lld as asked, with a checkpoint; "
                "continue with: gossip run --resume %s\n",
                static_cast<long long>(opt_.until_round), opt_.out_dir.c_str());
    return record_.dead().empty() ? kExitOk : kExitFailure;
  }
  // Peak resident memory of each rank's peer process (the largest if it was started again).
  std::vector<double> rss_mb(n_, 0.0);
  for (const auto& c : children_)
    rss_mb[c.rank] = std::max(rss_mb[c.rank], static_cast<double>(c.max_rss_kb) / 1024.0);
  record_.finish(std::chrono::duration<double>(Clock::now() - t0_).count(), rss_mb);
  // A peer the schedule killed is not a failure: the run succeeded if every other one finished.
  // Under --keep-going the run succeeded when every peer still alive finished (summary.json
  // says who died, when, and who came back).
  if (opt_.keep_going) return kExitOk;
  for (int r : record_.dead())
    if (!killed_by_schedule(r)) return kExitFailure;
  return kExitOk;
}

/// What the peers' processes inherit. Each peer's BLAS (and a Python peer's OpenMP) starts with
/// train.threads threads unless the environment says otherwise: OpenBLAS would start one per
/// core in every peer, and with several peers on a host their idle threads spin for work and
/// take the cores from the others' rounds (a gossip round of the quickstart's size costs about
/// 1.5x more). Peers on CUDA take one visible device each, round robin by rank (make_backend);
/// where they outnumber the devices, MPS lets their kernels run side by side (train.mps): the
/// daemon returned, if any, lives as long as the run. With train.peers_per_process it is the
/// processes that count.
std::unique_ptr<launcher::MpsDaemon> peer_environment(const RunConfig& config, int peers,
                                                      const std::string& out_dir) {
  const std::string threads = std::to_string(config.train.threads);
  setenv("OPENBLAS_NUM_THREADS", threads.c_str(), 0);
  setenv("OMP_NUM_THREADS", threads.c_str(), 0);
  const int per = config.train.peers_per_process;
  const int processes = (peers + per - 1) / per;
  if (per > 1)
    std::printf("gossip run: %d peers in %d processes of up to %d (train.peers_per_process), "
                "one thread each (on a GPU the peers of a process share its device and CUDA "
                "context)\n", peers, processes, per);
  std::string line;
  auto mps = launcher::start_mps(config, processes, out_dir + "/mps", line);
  if (!line.empty()) std::printf("gossip run: %s\n", line.c_str());
  return mps;
}

/// train.peers_per_process > 1: what cannot act on one peer of a process that hosts several is
/// refused before any peer starts.
void check_grouping(const RunConfig& config, const LaunchOptions& options, bool elastic) {
  if (config.train.peers_per_process == 1) return;
  const std::string where = config.where("train.peers_per_process");
  auto refuse = [&](const std::string& what) {
    throw InputError(cat(where, ": ", config.train.peers_per_process, " peers a process, but ",
                         what, " acts on one peer's process; no peer was started (leave "
                         "train.peers_per_process at 1)"));
  };
  if (elastic) refuse("an elastic run, whose peers join and leave,");
  if (!config.exec.empty()) refuse("exec:, whose script is one peer,");
  if (config.net.emulate.enabled()) refuse("--netem, which gives each peer a namespace,");
  if (options.restart_on_failure) refuse("--restart on-failure");
  for (const Fault& f : config.faults)
    if (f.action != FaultAction::kNone && traits(f.action).signal)
      refuse(cat("the fault schedule's ", fault_action_name(f.action), " at round ", f.round));
}

void check_backend(const RunConfig& config) {
  // A backend that cannot run here is refused before any peer starts (each would fail alike).
  if (!config.exec.empty()) return;
  if (const std::string why = backend_refusal(config.train.backend); !why.empty())
    throw InputError(cat(config.where("train.backend"), ": ", why,
                         "; no peer was started (train.backend: auto uses a GPU where there is "
                         "one, the CPU elsewhere)"));
  if (const std::string why = conv_refusal(config.train.backend, config.train.conv); !why.empty())
    throw InputError(cat(config.where("train.conv"), ": ", why, "; no peer was started"));
  if (const std::string why = graphs_refusal(config.train.backend, config.train.graphs);
      !why.empty())
    throw InputError(cat(config.where("train.graphs"), ": ", why, "; no peer was started"));
  if (const std::string why = precision_refusal(config.train.backend, config.train.precision);
      !why.empty())
    throw InputError(cat(config.where("train.precision"), ": ", why, "; no peer was started"));
}

/// True when every address of the topology's peers: list is on loopback (127.0.0.0/8,
/// localhost, ::1): the file describes peers on one machine, which --netem spreads over
/// namespaces of their own.
bool loopback_only(const Topology& t) {
  for (int p = 0; p < t.n(); ++p) {
    const std::string a = t.address(p).value_or("");
    const bool loopback = a.rfind("127.", 0) == 0 || a.rfind("localhost:", 0) == 0 ||
                          a.rfind("[::1]:", 0) == 0;
    if (!loopback) return false;
  }
  return true;
}

/// The peers' arguments with --topology FILE in place of any --topology they had.
std::vector<std::string> with_topology(std::vector<std::string> args, const std::string& file) {
  for (std::size_t i = 0; i < args.size();) {
    if (args[i] == "--topology" && i + 1 < args.size()) {
      args.erase(args.begin() + static_cast<std::ptrdiff_t>(i),
                 args.begin() + static_cast<std::ptrdiff_t>(i + 2));
    } else if (args[i].rfind("--topology=", 0) == 0) {
      args.erase(args.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      ++i;
    }
  }
  args.insert(args.end(), {"--topology", file});
  return args;
}

/// A peer process is a member for one stretch of rounds: a rank that leaves and joins again is
/// refused, naming both rounds (the simulator follows it; a real run gives the joiner a rank that
/// has not been a member).
void refuse_second_stretch(const RunConfig& config, const Topology& topology) {
  const auto& epochs = topology.epochs();
  for (int r = 0; r < topology.n(); ++r) {
    std::int64_t left = -1;
    bool was = false;
    for (const auto& e : epochs) {
      const bool is = std::binary_search(e.members.begin(), e.members.end(), r);
      if (was && !is) left = e.from;
      if (!was && is && left >= 0)
        throw InputError(cat(config.where("faults"), ": rank ", r, " leaves from round ", left,
                             " and joins again from round ", e.from, "; a peer process of "
                             "gossip run is a member for one stretch of rounds: let a rank that "
                             "has not been a member join instead (gossip sim follows either)"));
      was = is;
    }
  }
}

/// The refusals before anything is written: an elastic run's options, the fault schedule, the
/// backend, peers_per_process and, with --netem, a topology whose peers: are on other hosts.
/// `drop_addresses`: --netem with a topology that lists its peers' (loopback) addresses.
void refuse_before_start(const RunConfig& config, const LaunchOptions& options,
                         const Topology& loaded, const Topology& topology, bool drop_addresses) {
  const bool elastic = !topology.epochs().empty();
  if (elastic && (options.resume || options.until_round > 0 || config.net.emulate.enabled() ||
                  !config.exec.empty() || options.restart_on_failure))
    throw InputError(cat(config.where("faults"), ": a run whose peers join and leave does not "
                         "take --resume, --until-round, --netem, --restart or exec: yet"));
  check_faults(config, loaded);
  if (elastic) refuse_second_stretch(config, topology);
  check_backend(config);
  check_grouping(config, options, elastic);
  if (drop_addresses && !loopback_only(topology))
    throw InputError(cat("--netem '", config.net.emulate.text, "': emulated links give every "
                         "peer its own address, but the topology ", config.gossip.topology,
                         " places the peers on other hosts (peers:); leave them out to use "
                         "--netem"));
}

/// --netem over a topology with its peers' loopback addresses: the peers read the same graph,
/// written without them, from OUT/netem-topology.yaml.
void write_bare_topology(const RunConfig& config, const Topology& topology,
                         LaunchOptions& options) {
  // One machine's loopback addresses: the peers take their namespaces' instead, from the same
  // graph written without its peers: list.
  Topology bare = topology;
  bare.set_addresses({});
  const std::string file = cat(options.out_dir, "/netem-topology.yaml");
  std::ofstream(file, std::ios::trunc) << to_yaml(bare);
  options.peer_arguments = with_topology(options.peer_arguments, file);
  std::printf("gossip run: --netem: the loopback addresses of %s (peers:) give way to the "
              "namespaces' own; the peers read the same graph from %s\n",
              config.gossip.topology.c_str(), file.c_str());
}

/// Ctrl-C and SIGTERM set g_signal, which the run looks at between its steps.
void catch_signals() {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

/// --netem: each peer's network namespace and emulated link into `links`, and OUT/netem-hosts.
/// Returns false when a Ctrl-C or SIGTERM came while they were made (they are removed then).
bool make_links(const RunConfig& config, int n, const std::string& out_dir,
                std::optional<launcher::EmulatedNetwork>& links) {
  try {
    links.emplace(config.net.emulate, n, [] { return g_signal != 0; });
  } catch (const RuntimeError&) {
    if (g_signal == 0) throw;
    std::fprintf(stderr, "gossip run: interrupted while making the emulated links; removed "
                 "them\n");
    return false;
  }
  std::ofstream(out_dir + "/netem-hosts", std::ios::trunc) << links->hostfile();
  std::printf("gossip run: each peer in its own network namespace (%s to %s), its link %s\n",
              links->peer_namespace(0).c_str(), links->peer_namespace(n - 1).c_str(),
              config.net.emulate.text.c_str());
  std::fflush(stdout);
  return true;
}

/// Every peer runs the GEMM chosen here once (measured or explicit): peers that each measured
/// at the same moment, on a busy machine, could pick different kernels.
void share_gemm(const GemmChoice& gemm) {
  const auto cpu_gemms = cpu_gemm_names();
  if (std::find(cpu_gemms.begin(), cpu_gemms.end(), gemm.name) != cpu_gemms.end())
    setenv("GOSSIP_GEMM", gemm.name.c_str(), 1);
  std::printf("gossip run: the peers' matrix products: %s\n", gemm.line().c_str());
  std::fflush(stdout);
}

void remove_links(launcher::EmulatedNetwork& links) {
  links.remove();
  if (const auto left = links.leftovers(); !left.empty())
    std::fprintf(stderr, "gossip run: network namespace %s is still there after removal\n",
                 left.front().c_str());
}

}  // namespace gossip::launch_parts

namespace gossip {

using namespace launch_parts;

int launch(const RunConfig& config, const LaunchOptions& given) {
  LaunchOptions options = given;
  if (config.gossip.topology.empty())
    throw InputError(cat(config.path, ": gossip.topology: `gossip run` needs a topology file"));
  const Topology loaded = load_topology(config.gossip.topology);
  check_algorithm(config, loaded);
  if (!options.force)  // before anything that grows with the peers (the analysis included)
    check_machine_fits(config, run_topology(config, loaded),
                       config.exec.empty() ? flat_size(config.model) : 0, this_machine());
  const TopologyReport report = analyze(loaded);
  if (!report.connected) {
    std::fprintf(stderr,
                 "gossip run: refusing to start: %s is not connected; its components are %s\n",
                 config.gossip.topology.c_str(), format_components(report.components).c_str());
    return kExitDisconnected;
  }
  // An elastic run's joins and leaves: the member timeline over max_peers ranks, each peer's
  // graph from it (run_topology, as gossip sim and every peer derive it).
  const Topology topology = run_topology(config, loaded);
  const bool elastic = !topology.epochs().empty();
  const bool drop_addresses = config.net.emulate.enabled() && topology.has_addresses();
  refuse_before_start(config, options, loaded, topology, drop_addresses);
  make_output_dir(options.out_dir);
  if (drop_addresses) write_bare_topology(config, topology, options);
  keep_run_identity(config, topology, options.out_dir, options.resume);
  const std::int64_t resume_round =
      options.resume ? common_checkpoint(options.out_dir, topology.n()) : -1;
  const RunCredentials credentials =
      run_credentials(config, options.out_dir, topology.n(), options.resume);
  const std::string& tls = credentials.line;
  std::printf("gossip run: %d peers%s on %s (spectral gap per round %.4f), algorithm %s, period "
              "%d, %s; peer logs in %s/peers/\n",
              loaded.n(), elastic ? cat(" at the start (up to ", topology.n(), " ranks)").c_str() : "",
              config.gossip.topology.c_str(), 1.0 - report.rho_per_round,
              algorithm_name(config.gossip.algorithm), config.gossip.period, tls.c_str(),
              options.out_dir.c_str());
  std::fflush(stdout);
  catch_signals();
  std::optional<launcher::EmulatedNetwork> links;
  if (config.net.emulate.enabled() && !make_links(config, topology.n(), options.out_dir, links))
    return 130;
  const auto mps = peer_environment(config, topology.n(), options.out_dir);
  Network net(config, options, topology, resume_round,
              credentials.dir,
              links ? &*links : nullptr);
  share_gemm(net.gemm());
  const int code = net.run();
  if (links) remove_links(*links);
  return code;
}

}  // namespace gossip
