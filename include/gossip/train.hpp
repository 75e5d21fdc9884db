/// train: one peer's trainer — a model (gossip/model.hpp), SGD with momentum and a learning-rate schedule, and a data
/// shard drawn in batches — on a Backend. The gossip algorithms drive it one local step at a
/// time and mix its flat parameter buffer between steps. Not thread-safe; one per peer.
#pragma once
#if !defined(GOSSIP_ROOM_TRAIN)
#error "gossip/train.hpp belongs to room train, which this room does not use (see the room table in meson.build)"
#endif

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "gossip/backend.hpp"
#include "gossip/config.hpp"
#include "gossip/data.hpp"
#include "gossip/model.hpp"
#include "gossip/report.hpp"

namespace gossip {

/// Learning rate at a (fractional) epoch of a run of total_epochs: constant, step (times gamma
/// every step_epochs) or cosine (to min_lr at the end); both with linear warm-up if asked.
double learning_rate(const OptimizerConfig& o, double epoch, double total_epochs);

/// Loss and accuracy over a data set.
struct Evaluation {
  double loss = 0.0;
  double accuracy = 0.0;
  std::int64_t samples = 0;
};

/// SGD with momentum (optionally Nesterov) and weight decay over a flat buffer.
class Sgd {
 public:
  /// A velocity of `n` values on `backend` (its sgd_update runs the step); step() updates the
  /// first `trained` (-1: all n) of the parameters: a model's buffers after them (batch norm's
  /// running statistics) stay as they are.
  Sgd(GossipKernels& backend, std::int64_t n, const OptimizerConfig& config,
      std::int64_t trained = -1);
  /// params -= lr * update(grads); the velocity buffer is the optimizer state.
  void step(float* params, const float* grads, float lr);
  float* velocity() { return velocity_.data(); }
  const float* velocity() const { return velocity_.data(); }

 private:
  GossipKernels* backend_;
  std::int64_t n_;
  OptimizerConfig config_;
  DeviceArray<float> velocity_;
};

/// How a peer's share of the data shapes its training (data.balance, for unequal shards).
struct ShardBalance {
  double lr_scale = 1.0;  // weighted: this shard's samples / the mean shard's
  // Local steps that make one epoch of the learning-rate schedule: the mean over the peers'
  // shards, so every peer follows the run's schedule (0 = this shard's own epochs).
  double schedule_steps_per_epoch = 0.0;
};

/// The balance of peer `peer` among `shards` under config.data.balance. Equal shards give every
/// peer the same schedule as its own epochs and a scale of 1.
ShardBalance balance_for(const RunConfig& config,
                         const std::vector<std::vector<std::int64_t>>& shards, int peer);

class Trainer {
 public:
  /// `train` must outlive the trainer; `shard` indexes into it. The model is initialised from
  /// (seed, init_peer) and batches are drawn from (seed, peer). `shared_scratch` (host backends):
  /// the gradients, activations and batch buffers are the calling thread's, not this trainer's
  /// (Model's shared_scratch): what the simulator's virtual peers use, so that they hold their
  /// parameters and optimizer state and nothing else model-sized. `initial`, when given, is
  /// what the model's initialisation would draw (another trainer's of the same init stream,
  /// train.same_init), taken instead of drawing it again.
  Trainer(Backend& backend, const RunConfig& config, const Dataset& train,
          std::vector<std::int64_t> shard, int peer, const ShardBalance& balance = {},
          bool shared_scratch = false, std::span<const float> initial = {});

  /// One local step on the next batch. Returns that batch's mean loss. Under train.graphs:
  /// step (a device backend), the first step runs call by call, the next full batch's forward
  /// and backward are captured as a CUDA graph, and every later full batch replays it (into the
  /// same batch buffers and model buffers, so the values are those of the eager step); where
  /// the capture or a replay fails, the step runs eagerly from then on and a line says why.
  double step();
  /// Runs `task` once during the next step(): after its forward and backward passes are queued
  /// (on a GPU, still running), before it reads their loss and updates the parameters.
  void during_next_step(std::function<void()> task) { during_next_ = std::move(task); }
  /// "step", "off", or "off (why)" where train.graphs: step could not be kept: for the peer's
  /// first line and summary.json's `graphs`.
  std::string graphs() const;
  /// True while a captured graph replays the step (train.graphs: step, kept).
  bool replays_graph() const { return graph_ != nullptr; }
  /// Loss and accuracy of the current parameters on `data` (the first `limit` rows if > 0).
  Evaluation evaluate(const Dataset& data, std::int64_t limit = 0);

  /// Fractional epochs of this peer's shard consumed so far.
  double epoch() const { return sampler_.epoch(); }
  std::int64_t steps() const { return steps_; }
  std::int64_t steps_per_epoch() const { return sampler_.batches_per_epoch(); }
  double last_lr() const { return last_lr_; }
  int peer() const { return peer_; }

  Model& model() { return model_; }
  Backend& backend() { return *backend_; }
  /// The flat parameter buffer (a device pointer; host memory on the CPU backend).
  float* params() { return model_.params(); }
  std::int64_t num_params() const { return model_.num_params(); }
  void download_params(std::span<float> out) const;
  void upload_params(std::span<const float> in);

  /// Everything a resumed run needs to continue bit-identical: parameters, momentum, steps
  /// taken and where the batch sampler is.
  struct State {
    std::vector<float> params, velocity;
    std::int64_t steps = 0;
    BatchSampler::State sampler;
  };
  State state() const;
  /// Throws InputError when the buffers' sizes do not match this model.
  void restore(const State& s);

 private:
  Backend* backend_;
  const RunConfig* config_;
  const Dataset* train_;
  int peer_;
  Model model_;
  Sgd sgd_;
  BatchSampler sampler_;
  /// Where the next batch goes: x_/y_, or the calling thread's buffers (shared scratch); on a
  /// device backend it is gathered in host_x_/host_y_ first and uploaded.
  struct Batch {
    float* x;
    std::int32_t* y;
  };
  Batch batch_buffers();
  /// On a device: the batch gathered in host_x_/host_y_ up to x_/y_, queued (Device::
  /// upload_async).
  void upload_batch(int rows, std::int64_t dim);
  /// The model's forward and backward, or the graph of it (train.graphs: step).
  BatchResult forward_backward(const float* x, const std::int32_t* y, int rows,
                               const std::function<void()>& meanwhile);
  std::function<void()> during_next_;  // during_next_step's task
  std::unique_ptr<StepGraph> graph_;
  int graph_rows_ = 0;  // the batch it was captured with
  const float* graph_x_ = nullptr;
  const std::int32_t* graph_y_ = nullptr;
  bool graph_warm_ = false;  // a step ran eagerly: cuDNN's plans and workspaces exist
  std::string graph_why_;    // why train.graphs: step runs eagerly ("" while it does not)
  bool shared_scratch_ = false;
  int batch_rows_ = 0;  // rows the batch buffers hold
  // On a device: the batch gathered on the host, in the backend's page-locked memory
  // (Device::pinned_memory) so that its upload goes by DMA.
  HostFloats host_x_;
  std::vector<std::int32_t, HostAllocator<std::int32_t>> host_y_;
  DeviceArray<float> x_;
  DeviceArray<std::int32_t> y_;
  std::int64_t steps_ = 0;
  double last_lr_ = 0.0;
  ShardBalance balance_;
};

/// The train and test sets a config names (IDX files or synthetic).
struct DataSets {
  Dataset train;
  Dataset test;
};
/// The test images come from load_idx_mapped under data_cache_dir(config.data) when that is not
/// empty (one copy per host), from load_idx otherwise.
DataSets load_datasets(const RunConfig& config);

/// Where the test set is cached and mapped: data.cache_dir, else $GOSSIP_CACHE_DIR, else
/// $XDG_CACHE_HOME/gossip, else $HOME/.cache/gossip; "" when data.cache_dir is "off" (or no
/// home is known).
std::string data_cache_dir(const DataConfig& d);

/// The shards of `n_peers` peers for this config (data.shard, seed).
std::vector<std::vector<std::int64_t>> shard_for(const RunConfig& config, const Dataset& train,
                                                 int n_peers);

/// `gossip train`: one peer on the whole training set, no gossip, for config.train.epochs.
/// Prints a header line, one line per evaluation and a final line on stdout; writes
/// OUT_DIR/metrics.csv and OUT_DIR/summary.json (with test_loss, steps and backend). Returns
/// what summary.json says. Throws RuntimeError when training diverges.
Summary train_single(const RunConfig& config, const std::string& out_dir);

}  // namespace gossip
