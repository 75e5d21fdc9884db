// cli/train.cpp: `gossip train CONFIG --out DIR` — one peer on its own, no gossip: the options,
// then train_single() (src/train/single.cpp) does the run.
#include <cstdio>

#include "gossip/args.hpp"
#include "src/cli/commands.hpp"
#include "gossip/overrides.hpp"
#include "gossip/backend.hpp"
#include "gossip/config.hpp"
#include "gossip/core.hpp"
#include "gossip/train.hpp"

namespace gossip::cli {

namespace {

const char* kTrainHelp =
    "usage: gossip train CONFIG --out DIR [--epochs N] [--backend auto|cpu|cuda] [--threads N]\n"
    "                    [--tensorboard]\n"
    "\n"
    "Trains one peer on the whole training set (no gossip) with the model, optimizer and data\n"
    "of CONFIG (YAML; see docs/config.md). Prints one line per evaluation (loss, test accuracy,\n"
    "samples/s) and writes DIR/metrics.csv and DIR/summary.json (fields in README.md).\n"
    "\n"
    "options:\n"
    "  --out DIR        where to write results (required)\n"
    "  --epochs N       override train.epochs\n"
    "  --backend NAME   override train.backend\n"
    "  --threads N      override train.threads (OpenBLAS threads)\n"
    "  --tensorboard    also write the metrics as TensorBoard event files in DIR/tensorboard/\n"
    "\n"
    "exit codes: 0 done, 1 runtime failure, 2 bad config, data file or option\n";

/// CONFIG with the command-line overrides applied.
RunConfig train_config(const Args& args) {
  RunConfig config = load_config(args.config_path());
  config.train.epochs = epochs_option(args, config.train.epochs);
  if (const auto b = args.get("backend")) config.train.backend = parse_backend_choice(*b);
  config.train.threads = threads_option(args, config.train.threads);
  if (args.has("tensorboard")) config.train.tensorboard = true;
  return config;
}

}  // namespace

int run_train(int argc, char** argv) {
  const Args args(argc, argv, {"out", "epochs", "backend", "threads"}, {"tensorboard"});
  if (args.help()) {
    std::printf("%s", kTrainHelp);
    return kExitOk;
  }
  const std::string out = args.required("out", "DIR");  // before the config, as everywhere
  train_single(train_config(args), out);
  return kExitOk;
}

}  // namespace gossip::cli
