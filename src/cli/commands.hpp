/// cli/commands: the subcommands of the `gossip` binary, one file each in src/cli/.
#pragma once
#if !defined(GOSSIP_ROOM_CLI)
#error "src/cli/commands.hpp belongs to room cli, which this room does not use (see the room table in meson.build)"
#endif

namespace gossip::cli {

// One entry point per subcommand (src/cli/<name>.cpp). argv[0] is the subcommand name.
int run_train(int argc, char** argv);
int run_topo(int argc, char** argv);
int run_sim(int argc, char** argv);
int run_compare(int argc, char** argv);
int run_peer(int argc, char** argv);
int run_run(int argc, char** argv);
int run_collect(int argc, char** argv);
int run_watch(int argc, char** argv);
int run_bench(int argc, char** argv);
int run_plot(int argc, char** argv);
int run_keys(int argc, char** argv);
int run_doctor(int argc, char** argv);
int run_chaos(int argc, char** argv);

}  // namespace gossip::cli
