/// overrides: the options that change a run config from the command line (--epochs,
/// --algorithm, --topology, --period, --faults, --compress, --shard, --seed), parsed once for gossip sim, gossip run and gossip peer, so
/// the three read them alike and gossip run can hand them on to its peers.
#pragma once
#if !defined(GOSSIP_ROOM_CONFIG)
#error "gossip/overrides.hpp belongs to room config, which this room does not use (see the room table in meson.build)"
#endif

#include <set>
#include <string>
#include <vector>

#include "gossip/args.hpp"
#include "gossip/config.hpp"

namespace gossip {

/// The --help lines of the overrides (each "  --name VALUE   override section.key\n"), the
/// choices of each listed from its table.
std::string override_help();

/// `own` plus the overrides' value options, for Args.
std::set<std::string> with_override_options(std::set<std::string> own);

/// Applies the overrides given in `args` to `config`; throws InputError naming the option when a
/// value is out of range (epochs as epochs_option, period at least 1).
void apply_overrides(const Args& args, RunConfig& config);

/// --metrics-port P (net.metrics_port) in 1..65000, or `fallback` when it is not given.
int metrics_port_option(const Args& args, int fallback);

/// --epochs, --threads and --workers: the option's value, or `fallback` when it is not given.
/// Throws InputError naming the option when the value is outside its config field's bounds
/// (gossip/config.hpp: epochs in (0, kMaxEpochs], threads in [1, kMaxThreads], workers in
/// [0, kMaxWorkers]).
double epochs_option(const Args& args, double fallback);
int threads_option(const Args& args, int fallback);
int workers_option(const Args& args, int fallback);

/// The overrides given in `args` as arguments again ("--epochs", "2", ...), in a fixed order:
/// what gossip run passes on to each `gossip peer`.
std::vector<std::string> override_arguments(const Args& args);

}  // namespace gossip
