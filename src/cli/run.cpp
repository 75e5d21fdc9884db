// cli/run.cpp: `gossip run CONFIG --out DIR` — the whole peer network on this machine.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gossip/args.hpp"
#include "src/cli/commands.hpp"
#include "gossip/overrides.hpp"
#include "gossip/config.hpp"
#include "gossip/core.hpp"
#include "gossip/launcher.hpp"
#include "gossip/report.hpp"

namespace gossip::cli {
namespace {

const char* kRunHelp =
    "usage: gossip run CONFIG --out DIR [--epochs N] [--algorithm NAME] [--topology FILE]\n"
    "                  [--period H] [--keep-going] [--restart on-failure] [--no-progress]\n"
    "                  [--tensorboard] [--until-round N] [--faults FILE]\n"
    "                  [--dashboard [ADDR:]PORT] [--metrics-port P] [--peers-per-process N]\n"
    "                  [--netem rate=RATE[,delay=TIME,...]] [--exec COMMAND] [--force]\n"
    "       gossip run --resume DIR [--until-round N] [--no-progress]\n"
    "\n"
    "Starts one `gossip peer` process per rank of CONFIG's topology on this machine, shows one\n"
    "progress line for the whole network: the round every peer has completed (redrawn every\n"
    "second on a terminal, every 5 s in a log), an ETA from the measured round rate, and the\n"
    "last evaluation's accuracy of the average model, lowest and highest peer accuracy and\n"
    "consensus distance. Writes DIR/metrics.csv, DIR/summary.json (the same columns and\n"
    "fields, with the same meaning, as gossip sim; docs/outputs.md) and DIR/events.jsonl, plus\n"
    "each peer's files and log (every line starting with its UTC time) in DIR/peers/R/, among\n"
    "them its per-round timeline, trace.json (Chrome trace events: open it in Perfetto; the\n"
    "final table shows where the time went). A disconnected topology is refused before\n"
    "anything starts. `gossip plot DIR` draws the curves. On an elastic topology the fault\n"
    "schedule's joins start new peers ahead of their round and its leaves stop peers (exit 0);\n"
    "the progress line shows the live count (docs/membership.md#elastic-membership).\n"
    "\n"
    "options:\n"
    "  --out DIR          where to write results (required)\n"
    "%s"
    "                     (the overrides are passed on to every peer)\n"
    "  --keep-going       when a peer dies, report it and let the others train on without it;\n"
    "                     exit 0 when every peer still alive finished. A peer started again\n"
    "                     by hand (gossip peer ... --rejoin) is followed and counted alive\n"
    "                     (default: stop every peer and exit 1 saying which one failed and why)\n"
    "  --restart on-failure  start a peer that died (not by the fault schedule) again, up to 3\n"
    "                     times per rank: it rejoins the running network (gossip peer --rejoin)\n"
    "  --no-progress      no progress bar\n"
    "  --force            start the peers even when this machine looks too small for them: by\n"
    "                     default a run whose peer processes exceed 32 a core, or whose peers\n"
    "                     need more memory than is available (a process's 48 MB and the\n"
    "                     model's buffers a peer), is refused before anything starts (exit 2)\n"
    "  --peers-per-process N  host N consecutive ranks in each peer process, one thread each\n"
    "                     (train.peers_per_process; default 1): peers sharing a GPU share one\n"
    "                     CUDA context instead of paying one each. Not with kill, pause or\n"
    "                     restart faults, --restart, --netem, exec: or an elastic run\n"
    "  --tensorboard      also write the metrics as TensorBoard event files in DIR/tensorboard/\n"
    "                     (a run per peer and the average model; train.tensorboard)\n"
    "  --dashboard [ADDR:]PORT  serve a live page of the run at http://ADDR:PORT/: the graph\n"
    "                     with each peer's state and component, link traffic, accuracy, loss\n"
    "                     and consensus curves, the event log, where the time went; ADDR is\n"
    "                     127.0.0.1 unless given (docs/observe.md). A port in use is said and\n"
    "                     the run goes on without it\n"
    "  --metrics-port P   Prometheus metrics (net.metrics_port): peer R at port P+R, the\n"
    "                     whole run (the peers' pages merged under a peer label) at P+n;\n"
    "                     also written to DIR/peers/R/metrics.prom and DIR/metrics.prom\n"
    "  --until-round N    every peer stops after round N with a checkpoint (to continue later,\n"
    "                     e.g. in the next slot of a time-limited job)\n"
    "  --netem SPEC       emulated links (net.emulate): each peer in its own network namespace,\n"
    "                     joined by a veth pair to a bridge, its link limited to rate=RATE each\n"
    "                     way (tbf; bit, kbit, mbit, gbit), with delay=TIME, jitter=TIME,\n"
    "                     loss=P%% through netem where the kernel has it (an error where not);\n"
    "                     unreachable=A-B+C-D: those pairs of ranks have no route to each\n"
    "                     other (their links go through a relay, or never form with\n"
    "                     net.reachable: yes, and the run reports the split they make);\n"
    "                     nat=A+B/C+D: each group behind a NAT that forwards nothing in;\n"
    "                     firewall=A+B: those ranks take no incoming connection (nftables);\n"
    "                     the peers talk TCP over the bridge, like separate hosts. Needs root\n"
    "                     and iproute2; every namespace, link and qdisc is removed at the end\n"
    "                     (also on Ctrl-C or a failure)\n"
    "  --exec COMMAND     start COMMAND (through /bin/sh, e.g. \"python3 examples/torch_fmnist.py\")\n"
    "                     for each rank instead of `gossip peer` (the config's exec: does the\n"
    "                     same): a script over the gossip Python module, whose Peer.from_env()\n"
    "                     reads gossip peer's arguments from GOSSIP_PEER_ARGS (a JSON list).\n"
    "                     Everything else is unchanged: the run's CA, the progress line, the\n"
    "                     outputs, --keep-going, --netem. The average model: once every peer\n"
    "                     has finished, the launcher averages their final parameters and one\n"
    "                     process waiting in Peer.finish() evaluates it with the script's\n"
    "                     evaluate= (none given: summary.json says there is no average model)\n"
    "  --resume DIR       continue the run in DIR (stopped by --until-round, Ctrl-C or a crash)\n"
    "                     from the newest round every peer has a checkpoint of\n"
    "                     (train.checkpoint_every), with the config and options it was started\n"
    "                     with (DIR/run-command); a synchronous run resumed ends bit-identical\n"
    "                     to the same run never stopped\n"
    "\n"
    "exit codes: 0 done, 1 a peer failed, 2 bad config or topology (or too many peers for this\n"
    "machine, or a --resume whose config changed: the key is named), 3 topology disconnected,\n"
    "130 interrupted (Ctrl-C or SIGTERM, also while the peers start, stops every peer)\n";


/// The options a run was started with, kept as DIR/run-command (one argument a line, the
/// config and DIR made absolute) so that `--resume DIR` starts it again the same way.
void save_command(const Args& args, const std::vector<std::string>& given, const std::string& out) {
  std::ofstream f(out + "/run-command", std::ios::trunc);
  f << std::filesystem::absolute(args.config_path()).string() << "\n--out\n"
    << std::filesystem::absolute(out).string() << "\n";
  for (std::size_t i = 0; i < given.size(); ++i) {
    const std::string& a = given[i];
    if (a == args.config_path()) continue;
    const bool with_value = a == "--out" || a == "--resume" || a == "--until-round";
    if (with_value) {
      ++i;
      continue;
    }
    if (a.rfind("--out=", 0) == 0 || a.rfind("--resume=", 0) == 0 ||
        a.rfind("--until-round=", 0) == 0)
      continue;
    f << a << "\n";
  }
  if (!f) throw InputError(cat(out, "/run-command: cannot write"));
}

/// DIR/run-command's arguments.
std::vector<std::string> saved_command(const std::string& dir) {
  std::ifstream f(dir + "/run-command");
  if (!f)
    throw InputError(cat("--resume ", dir, ": no run-command file there (is it the --out folder "
                         "of a gossip run?)"));
  std::vector<std::string> out;
  for (std::string line; std::getline(f, line);)
    if (!line.empty()) out.push_back(line);
  if (out.empty()) throw InputError(cat(dir, "/run-command: empty"));
  return out;
}

/// The config with the command line's overrides, --tensorboard, --peers-per-process, --netem
/// and --exec.
RunConfig run_config(Args& args) {
  RunConfig config = load_config(args.config_path());
  apply_overrides(args, config);
  if (args.has("tensorboard")) config.train.tensorboard = true;
  if (args.get("peers-per-process")) {
    const std::int64_t per = args.get_int("peers-per-process", 1);
    if (per < 1 || per > kMaxPeersPerProcess)
      throw InputError(cat("--peers-per-process ", per, ": must be 1 to ", kMaxPeersPerProcess));
    config.train.peers_per_process = static_cast<int>(per);
  }
  if (const auto netem = args.get("netem"))
    config.net.emulate = parse_link_emulation(*netem, "--netem");
  if (const auto command = args.get("exec")) {
    if (command->find_first_not_of(" \t") == std::string::npos)
      throw InputError("--exec: the command is empty");
    config.exec = *command;
  }
  return config;
}

}  // namespace

int run_run(int argc, char** argv) {
  Args args(argc, argv,
            with_override_options({"out", "resume", "until-round", "restart", "netem", "exec",
                                   "dashboard", "metrics-port", "peers-per-process"}),
            {"keep-going", "no-progress", "tensorboard", "force"});
  if (args.help()) {
    std::printf(kRunHelp, override_help().c_str());
    return kExitOk;
  }
  const std::vector<std::string> given(argv + 1, argv + argc);
  if (const auto dir = args.get("resume"); dir && args.positional().empty()) {
    // gossip run --resume DIR: the saved command, resumed; this call's own options on top.
    std::vector<std::string> again = {"run"};
    for (const auto& a : saved_command(*dir)) again.push_back(a);
    again.insert(again.end(), given.begin(), given.end());
    std::vector<char*> cargv;
    for (auto& a : again) cargv.push_back(a.data());
    return run_run(static_cast<int>(cargv.size()), cargv.data());
  }
  const std::string out = args.get("resume") ? *args.get("resume") : args.required("out", "DIR");
  RunConfig config = run_config(args);
  LaunchOptions opt;
  opt.config_path = args.config_path();
  opt.peer_arguments = override_arguments(args);
  opt.out_dir = out;
  opt.keep_going = args.has("keep-going");
  if (const auto restart = args.get("restart")) {
    if (*restart != "on-failure")
      throw InputError(cat("--restart: unknown policy '", *restart, "' (expected on-failure)"));
    opt.restart_on_failure = true;
  }
  opt.progress = !args.has("no-progress");
  opt.force = args.has("force");
  if (const auto dashboard = args.get("dashboard"))
    opt.dashboard = dashboard_address(*dashboard, "--dashboard");
  if (args.get("metrics-port")) {
    config.net.metrics_port = metrics_port_option(args, 0);
    opt.peer_arguments.insert(opt.peer_arguments.end(),
                              {"--metrics-port", cat(config.net.metrics_port)});
  }
  opt.resume = args.get("resume").has_value();
  opt.until_round = args.get_int("until-round", 0);
  if (args.get("until-round") && opt.until_round < 1)
    throw InputError("--until-round must be at least 1");
  if (!opt.resume) {
    make_output_dir(out);
    save_command(args, given, out);
  }
  return launch(config, opt);
}

}  // namespace gossip::cli
