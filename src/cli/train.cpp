// cli/train.cpp: `gossip train CONFIG --out DIR` — one peer on its own, no gossip. A progress line
// per evaluation; metrics.csv and summary.json per DESIGN.md's contracts.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <numeric>

#include "gossip/args.hpp"
#include "src/cli/commands.hpp"
#include "gossip/backend.hpp"
#include "gossip/config.hpp"
#include "gossip/core.hpp"
#include "gossip/hash.hpp"
#include "gossip/report.hpp"
#include "gossip/train.hpp"

namespace gossip::cli {

namespace {

const char* kTrainHelp =
    "usage: gossip train CONFIG --out DIR [--epochs N] [--backend auto|cpu|cuda] [--threads N]\n"
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
    "\n"
    "exit codes: 0 done, 1 runtime failure, 2 bad config, data file or option\n";

}  // namespace

int run_train(int argc, char** argv) {
  Args args(argc, argv, {"out", "epochs", "backend", "threads"}, {});
  if (args.help()) {
    std::printf("%s", kTrainHelp);
    return kExitOk;
  }
  const std::string out = args.required("out", "DIR");

  RunConfig config = load_config(args.config_path());
  config.train.epochs = args.get_double("epochs", config.train.epochs);
  config.train.backend = args.get_or("backend", config.train.backend);
  config.train.threads = static_cast<int>(args.get_int("threads", config.train.threads));
  if (config.train.epochs <= 0) throw InputError("--epochs must be positive");

  auto backend = make_backend(parse_backend_choice(config.train.backend), config.train.threads);
  const auto t0 = std::chrono::steady_clock::now();
  DataSets data = load_datasets(config);
  std::vector<std::int64_t> all(data.train.n);
  std::iota(all.begin(), all.end(), 0);
  Trainer trainer(*backend, config, data.train, std::move(all), 0);
  std::printf("gossip train: %s, model %s (%lld params), %lld train / %lld test samples on %s\n",
              config.path.c_str(), trainer.model().fingerprint().c_str(),
              static_cast<long long>(trainer.num_params()), static_cast<long long>(data.train.n),
              static_cast<long long>(data.test.n), backend->describe().c_str());

  MetricsWriter metrics(out);
  const std::int64_t per_epoch = trainer.steps_per_epoch();
  const std::int64_t total = static_cast<std::int64_t>(std::ceil(config.train.epochs * per_epoch));
  const std::int64_t eval_every =
      std::max<std::int64_t>(1, per_epoch / config.train.evals_per_epoch);
  double loss_sum = 0.0;
  std::int64_t loss_count = 0;
  Evaluation last;
  auto mark = std::chrono::steady_clock::now();
  std::int64_t mark_step = 0;
  for (std::int64_t s = 1; s <= total; ++s) {
    const double loss = trainer.step();
    if (!std::isfinite(loss))
      throw RuntimeError(cat("training diverged at step ", s, " (loss ", loss,
                             "): lower optimizer.lr"));
    loss_sum += loss;
    ++loss_count;
    if (s % eval_every != 0 && s != total) continue;
    const auto now = std::chrono::steady_clock::now();
    const double span = std::chrono::duration<double>(now - mark).count();
    const double rate = (s - mark_step) * config.train.batch / std::max(span, 1e-9);
    last = trainer.evaluate(data.test, config.train.eval_limit);
    MetricsRow row;
    row.round = s;
    row.epoch = trainer.epoch();
    row.peer = 0;
    row.loss = loss_sum / loss_count;
    row.test_accuracy = last.accuracy;
    row.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    metrics.write(row);
    metrics.flush();
    std::printf("epoch %6.2f  step %7lld/%lld  loss %.4f  test_acc %.4f  lr %.4g  %.0f samples/s\n",
                row.epoch, static_cast<long long>(s), static_cast<long long>(total), row.loss,
                last.accuracy, trainer.last_lr(), rate);
    std::fflush(stdout);
    loss_sum = 0.0;
    loss_count = 0;
    mark = std::chrono::steady_clock::now();
    mark_step = s;
  }

  std::vector<float> params(trainer.num_params());
  trainer.download_params(params);
  Summary summary;
  summary.test_accuracy = last.accuracy;
  summary.peer_accuracy_min = last.accuracy;
  summary.peer_accuracy_max = last.accuracy;
  summary.rounds = 0;
  summary.epochs = trainer.epoch();
  summary.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  summary.params_sha256 = {sha256_hex(params)};
  summary.extra["test_loss"] = json_number(last.loss);
  summary.extra["steps"] = std::to_string(trainer.steps());
  summary.extra["backend"] = json_string(backend->name());
  write_summary(out, summary);
  std::printf("done: test_accuracy %.4f after %.2f epochs in %.1f s; wrote %s/summary.json\n",
              last.accuracy, summary.epochs, summary.wall_seconds, out.c_str());
  return kExitOk;
}

}  // namespace gossip::cli
