// config/overrides.cpp: the config overrides shared by gossip sim, run and peer.
#include "gossip/overrides.hpp"

#include "gossip/choice.hpp"
#include "gossip/core.hpp"

namespace gossip {

namespace {

// The value options, in the order override_arguments() passes them on.
const char* const kNames[] = {"epochs",   "algorithm", "topology", "period", "faults",
                              "compress", "wire",      "aggregate", "on-byzantine", "shard",
                              "seed"};

/// The integer option `name` in [lo, hi], or `fallback` when it is not given.
int bounded_int(const Args& args, const char* name, int fallback, int lo, int hi) {
  const auto text = args.get(name);
  if (!text) return fallback;
  const long v = args.get_int(name, fallback);  // a value past long's range comes back clamped
  if (v < lo || v > hi)
    throw InputError(cat("--", name, " must be in ", lo, "..", hi, ", got ", *text));
  return static_cast<int>(v);
}

}  // namespace

std::string override_help() {
  const auto bar = [](const auto& rows) {  // "a | b | c": the names of a choice's rows
    std::string list;
    for (const auto& row : rows) list += (list.empty() ? "" : " | ") + std::string(row.name);
    return list;
  };
  const auto robust = [](const AlgorithmTraits& t) { return !t.not_robust; };
  return cat(
      "  --epochs N         override train.epochs (fractions allowed: 0.5)\n"
      "  --algorithm NAME   override gossip.algorithm:\n",
      choice_help(std::span(algorithm_table()), 21),
      "  --topology FILE    override gossip.topology (a path from the current directory)\n"
      "  --period H         override gossip.period (local steps per round)\n"
      "  --faults FILE      the fault schedule from FILE (a YAML file with a faults: list) instead\n"
      "                     of the config's faults:\n"
      "  --compress C       override gossip.choco.compress: top_k:FRACTION, random_k:FRACTION,\n"
      "                     quantize:BITS (4 or 8) or none\n"
      "  --wire FORMAT      override gossip.wire (", bar(wire_format_table()), "; whole parameter\n"
      "                     messages, and choco's top_k / random_k values, rounded to 16 bits\n"
      "                     as they leave a peer)\n"
      "  --aggregate NAME   override gossip.aggregate (",
      choice_list_if(std::span(algorithm_table()), robust, "and"), "): what a peer does with\n"
      "                     its neighbours' messages, robust ones against peers that lie\n"
      "                     (docs/byzantine.md):\n",
      choice_help(aggregate_table(), 21),
      "  --on-byzantine WHAT  override gossip.on_byzantine, what a peer does with a neighbour\n"
      "                     suspected of lying:\n",
      choice_help(byzantine_policy_table(), 21),
      "  --shard KIND       override data.shard (", bar(shard_kind_table()), ")\n"
      "  --seed N           override train.seed\n");
}

std::set<std::string> with_override_options(std::set<std::string> own) {
  for (const char* name : kNames) own.insert(name);
  return own;
}

double epochs_option(const Args& args, double fallback) {
  const auto text = args.get("epochs");
  if (!text) return fallback;
  const double v = args.get_double("epochs", fallback);
  if (!(v > 0 && v <= kMaxEpochs))  // NaN too
    throw InputError(cat("--epochs must be in (0, ", kMaxEpochs, "], got ", *text));
  return v;
}

int threads_option(const Args& args, int fallback) {
  return bounded_int(args, "threads", fallback, 1, kMaxThreads);
}

int metrics_port_option(const Args& args, int fallback) {
  return bounded_int(args, "metrics-port", fallback, 1, 65000);
}

int workers_option(const Args& args, int fallback) {
  return bounded_int(args, "workers", fallback, 0, kMaxWorkers);
}

void apply_overrides(const Args& args, RunConfig& config) {
  if (args.get("epochs")) {
    config.train.epochs = epochs_option(args, config.train.epochs);
    config.lines.erase("train.epochs");  // errors about it name the option, not the file
  }
  if (auto algorithm = args.get("algorithm")) {
    config.gossip.algorithm = parse_algorithm(*algorithm, "--algorithm");
    config.lines.erase("gossip.algorithm");  // errors about it name the option, not the file
  }
  config.gossip.topology = args.get_or("topology", config.gossip.topology);
  config.gossip.period = static_cast<int>(args.get_int("period", config.gossip.period));
  if (auto faults = args.get("faults")) use_faults_file(config, *faults);
  if (args.get("period") && config.gossip.period < 1)
    throw InputError(cat("--period must be at least 1, got ", *args.get("period")));
  if (auto compress = args.get("compress")) {
    config.gossip.choco.compress = parse_compress(*compress, "--compress");
    config.lines.erase("gossip.choco.compress");
  }
  if (auto wire = args.get("wire")) {
    config.gossip.wire = parse_wire_format(*wire, "--wire");
    config.lines.erase("gossip.wire");
  }
  if (auto aggregate = args.get("aggregate")) {
    config.gossip.aggregate = AggregateConfig{};
    config.gossip.aggregate.kind = parse_aggregate(*aggregate, "--aggregate");
    config.lines.erase("gossip.aggregate");
  }
  if (auto on = args.get("on-byzantine")) {
    config.gossip.on_byzantine = parse_choice(byzantine_policy_table(), *on, "--on-byzantine");
    config.lines.erase("gossip.on_byzantine");
  }
  if (auto shard = args.get("shard")) {
    parse_choice(shard_kind_table(), *shard, "--shard");  // one of the table's names
    config.data.shard = *shard;
    config.lines.erase("data.shard");
  }
  if (args.get("seed")) {
    const long seed = args.get_int("seed", 0);
    if (seed < 0) throw InputError(cat("--seed must not be negative, got ", *args.get("seed")));
    config.train.seed = static_cast<std::uint64_t>(seed);
  }
}

std::vector<std::string> override_arguments(const Args& args) {
  std::vector<std::string> out;
  for (const char* name : kNames)
    if (auto value = args.get(name)) {
      out.push_back(std::string("--") + name);
      out.push_back(*value);
    }
  return out;
}

}  // namespace gossip
