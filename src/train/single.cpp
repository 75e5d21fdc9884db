// train/single.cpp: `gossip train` — one peer on the whole training set, no gossip: steps,
// an evaluation every 1/evals_per_epoch epoch with a progress line, and the run record.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <numeric>

#include "gossip/core.hpp"
#include "gossip/report.hpp"
#include "gossip/hash.hpp"
#include "gossip/train.hpp"

namespace gossip {

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

/// Samples per second of the steps since restart(), not counting evaluations.
class Rate {
 public:
  explicit Rate(int batch) : batch_(batch) {}
  double at(std::int64_t step) const {
    return (step - step_) * batch_ / std::max(since(mark_), 1e-9);
  }
  void restart(std::int64_t step) {
    mark_ = Clock::now();
    step_ = step;
  }

 private:
  int batch_;
  Clock::time_point mark_ = Clock::now();
  std::int64_t step_ = 0;
};

/// The first line: the config, the model, the data, the backend and its GEMM.
void print_train_start(const RunConfig& config, Trainer& trainer, const DataSets& data,
                       Backend& backend, const GemmChoice& gemm) {
  std::printf("gossip train: %s, model %s (%lld params), %lld train / %lld test samples on %s, "
              "%s%s\n",
              config.path.c_str(), trainer.model().fingerprint().c_str(),
              static_cast<long long>(trainer.num_params()), static_cast<long long>(data.train.n),
              static_cast<long long>(data.test.n), backend.describe().c_str(),
              gemm.line().c_str(),
              config.train.graphs == GraphMode::kOff
                  ? ""
                  : cat(", graphs: ", trainer.graphs()).c_str());
}

/// summary.json: the final parameters' digest, the last evaluation's loss, the steps and what
/// they ran on; the run started at t0.
Summary finish_record(RunRecord& record, Trainer& trainer, Backend& backend,
                      const GemmChoice& gemm, const Evaluation& last, Clock::time_point t0) {
  std::vector<float> params(trainer.num_params());
  trainer.download_params(params);
  RunEnd end{.rounds = 0, .bytes_sent = 0, .wall_seconds = since(t0), .connected = true,
             .params_sha256 = {sha256_hex(params)}, .gemm = gemm.name,
             .epochs = NAN, .average_missing = {}, .extra = {}};
  end.extra.add("test_loss", last.loss).add("steps", trainer.steps()).add("backend",
                                                                          backend.name());
  end.extra.add("conv", conv_name(backend)).add("graphs", trainer.graphs());
  return record.finish(std::move(end));
}

}  // namespace

Summary train_single(const RunConfig& config, const std::string& out_dir) {
  make_output_dir(out_dir);  // before the training, not after it
  auto backend = make_backend(config.train.backend, config.train.threads);
  use_conv(*backend, config.train.conv);
  const auto t0 = Clock::now();
  DataSets data = load_datasets(config);
  std::vector<std::int64_t> all(data.train.n);
  std::iota(all.begin(), all.end(), 0);
  Trainer trainer(*backend, config, data.train, std::move(all), 0);
  const GemmChoice gemm = choose_gemm(
      *backend, gemm_request(config.train.gemm, config.train.threads, config.train.precision),
      trainer.model().gemm_shapes(config.train.batch));
  print_train_start(config, trainer, data, *backend, gemm);

  RunRecord record(out_dir);
  if (config.train.tensorboard) record.enable_tensorboard();
  const std::int64_t per_epoch = trainer.steps_per_epoch();
  const double steps = std::ceil(config.train.epochs * static_cast<double>(per_epoch));
  check_local_steps(config, steps);  // before the count is made an integer
  const auto total = static_cast<std::int64_t>(steps);
  const std::int64_t eval_every =
      std::max<std::int64_t>(1, per_epoch / config.train.evals_per_epoch);
  double loss_sum = 0.0;
  std::int64_t loss_count = 0;
  Evaluation last;
  Rate rate(config.train.batch);
  for (std::int64_t s = 1; s <= total; ++s) {
    const double loss = trainer.step();
    if (!std::isfinite(loss))
      throw RuntimeError(cat("training diverged at step ", s, " (loss ", loss,
                             "): lower optimizer.lr"));
    loss_sum += loss;
    ++loss_count;
    if (s % eval_every != 0 && s != total) continue;
    const double samples_per_s = rate.at(s);
    last = trainer.evaluate(data.test, config.train.eval_limit);
    MetricsRow row{s, trainer.epoch(), 0, loss_sum / loss_count, last.accuracy, 0.0, 0, since(t0)};
    record.write(row);
    record.flush();
    std::printf("epoch %6.2f  step %7lld/%lld  loss %.4f  test_acc %.4f  lr %.4g  %.0f samples/s\n",
                row.epoch, static_cast<long long>(s), static_cast<long long>(total), row.loss,
                last.accuracy, trainer.last_lr(), samples_per_s);
    std::fflush(stdout);
    loss_sum = 0.0;
    loss_count = 0;
    rate.restart(s);
  }

  Summary summary = finish_record(record, trainer, *backend, gemm, last, t0);
  std::printf("done: test_accuracy %.4f after %.2f epochs in %.1f s; wrote %s/summary.json\n",
              summary.last.test_accuracy, summary.last.epoch, summary.end.wall_seconds,
              out_dir.c_str());
  return summary;
}

}  // namespace gossip
