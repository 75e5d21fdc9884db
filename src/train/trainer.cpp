// train/trainer.cpp: a peer's local training loop pieces — schedule, SGD, batches, evaluation.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>

#include "gossip/core.hpp"
#include "gossip/train.hpp"

namespace gossip {

double learning_rate(const OptimizerConfig& o, double epoch, double total_epochs) {
  if (o.warmup_epochs > 0 && epoch < o.warmup_epochs)
    return o.lr * (epoch + 1e-12) / o.warmup_epochs;
  if (o.schedule == LrSchedule::kStep && o.step_epochs > 0)
    return o.lr * std::pow(o.gamma, std::floor((epoch - o.warmup_epochs) / o.step_epochs));
  if (o.schedule == LrSchedule::kCosine) {
    const double span = std::max(1e-12, total_epochs - o.warmup_epochs);
    const double t = std::clamp((epoch - o.warmup_epochs) / span, 0.0, 1.0);
    return o.min_lr + 0.5 * (o.lr - o.min_lr) * (1.0 + std::cos(M_PI * t));
  }
  return o.lr;
}

ShardBalance balance_for(const RunConfig& config,
                         const std::vector<std::vector<std::int64_t>>& shards, int peer) {
  GOSSIP_CHECK(peer >= 0 && peer < std::ssize(shards));
  ShardBalance b;
  const std::int64_t batch = std::max(1, config.train.batch);
  // The sampler's own count: whole batches, or one short batch for a shard under one batch.
  auto steps = [&](const std::vector<std::int64_t>& s) {
    return static_cast<double>(std::max<std::int64_t>(1, std::ssize(s) / batch));
  };
  double steps_sum = 0.0, samples_sum = 0.0;
  for (const auto& s : shards) {
    steps_sum += steps(s);
    samples_sum += static_cast<double>(s.size());
  }
  const double mean_steps = steps_sum / static_cast<double>(shards.size());
  // Equal shards keep their own schedule exactly (bit for bit as before this option existed).
  if (mean_steps != steps(shards[peer])) b.schedule_steps_per_epoch = mean_steps;
  if (config.data.balance == Balance::kWeighted && samples_sum > 0)
    b.lr_scale = static_cast<double>(shards[peer].size()) * static_cast<double>(shards.size()) /
                 samples_sum;
  return b;
}

Sgd::Sgd(GossipKernels& backend, std::int64_t n, const OptimizerConfig& config,
         std::int64_t trained)
    : backend_(&backend), n_(trained < 0 ? n : trained), config_(config), velocity_(backend, n) {
  backend.fill(velocity_.data(), 0.0f, n);
}

void Sgd::step(float* params, const float* grads, float lr) {
  backend_->sgd_update(params, velocity_.data(), grads, n_, lr,
                       static_cast<float>(config_.momentum),
                       static_cast<float>(config_.weight_decay), config_.nesterov);
}

Trainer::Trainer(Backend& backend, const RunConfig& config, const Dataset& train,
                 std::vector<std::int64_t> shard, int peer, const ShardBalance& balance,
                 bool shared_scratch, std::span<const float> initial)
    : backend_(&backend),
      config_(&config),
      train_(&train),
      peer_(peer),
      model_(backend, config.model, std::max(config.train.batch, config.train.eval_batch),
             config.train.batch, shared_scratch),
      sgd_(backend, model_.num_params(), config.optimizer, model_.trainable_params()),
      sampler_(std::move(shard), config.train.batch, config.train.seed, peer),
      balance_(balance) {
  if (train.dim != config.model.input_size())
    throw InputError(cat(config.where("model.input"), ": input ", shape_string(config.model.input),
                         " (", config.model.input_size(), " features) does not match the data's ",
                         train.dim, " features"));
  if (initial.empty()) model_.init(config.train.seed, config.train.same_init ? 0 : peer, peer);
  else model_.init_from(initial, config.train.seed, peer);
  batch_rows_ = std::max(config.train.batch, config.train.eval_batch);
  if (config.train.graphs == GraphMode::kStep) {
    if (backend.host_memory())
      throw InputError(cat(config.where("train.graphs"), ": step replays the training step as "
                           "a CUDA graph; the ", backend.name(), " backend has none (train.graphs:"
                           " off)"));
    for (const LayerConfig& l : config.model.layers)
      if (l.type == LayerKind::kDropout)
        graph_why_ = "dropout draws new masks every step, which a graph would repeat";
  }
  shared_scratch_ = shared_scratch && backend.host_memory();
  if (shared_scratch_) return;
  const auto floats = static_cast<std::size_t>(batch_rows_) * train.dim;
  if (!backend.host_memory()) {  // gathered on the host, then uploaded
    host_x_ = HostFloats(floats, HostAllocator<float>(backend.pinned_memory()));
    host_y_ = decltype(host_y_)(static_cast<std::size_t>(batch_rows_),
                                HostAllocator<std::int32_t>(backend.pinned_memory()));
  }
  x_ = DeviceArray<float>(backend, floats);
  y_ = DeviceArray<std::int32_t>(backend, static_cast<std::size_t>(batch_rows_));
}

Trainer::Batch Trainer::batch_buffers() {
  if (!shared_scratch_) {
    if (backend_->host_memory()) return {x_.data(), y_.data()};
    return {host_x_.data(), host_y_.data()};
  }
  thread_local std::vector<float> x;
  thread_local std::vector<std::int32_t> y;
  const auto floats = static_cast<std::size_t>(batch_rows_) * train_->dim;
  if (x.size() < floats) x.resize(floats);
  if (y.size() < static_cast<std::size_t>(batch_rows_)) y.resize(static_cast<std::size_t>(batch_rows_));
  return {x.data(), y.data()};
}

Trainer::State Trainer::state() const {
  State s;
  s.params.resize(static_cast<std::size_t>(num_params()));
  download_params(s.params);
  s.velocity.resize(s.params.size());
  backend_->download(s.velocity.data(), sgd_.velocity(), s.velocity.size() * sizeof(float));
  s.steps = steps_;
  s.sampler = sampler_.state();
  return s;
}

void Trainer::restore(const State& s) {
  const auto n = static_cast<std::size_t>(num_params());
  if (s.params.size() != n || s.velocity.size() != n)
    throw InputError(cat("the saved state has ", s.params.size(), " parameters and ",
                         s.velocity.size(), " momentum values; this model has ", n));
  upload_params(s.params);
  backend_->upload(sgd_.velocity(), s.velocity.data(), n * sizeof(float));
  steps_ = s.steps;
  sampler_.restore(s.sampler);
}

void Trainer::upload_batch(int rows, std::int64_t dim) {
  // Without waiting: the loss read that ends the step waits for it, before the host buffers
  // take the next batch.
  const auto n = static_cast<std::size_t>(rows);
  const auto floats = n * static_cast<std::size_t>(dim);
  backend_->upload_async(x_.data(), host_x_.data(), floats * sizeof(float));
  backend_->upload_async(y_.data(), host_y_.data(), n * sizeof(std::int32_t));
}

double Trainer::step() {
  const auto& idx = sampler_.next();
  const int rows = static_cast<int>(idx.size());
  Batch b = batch_buffers();
  gather_batch(*train_, idx, b.x, b.y);
  if (!backend_->host_memory()) {
    upload_batch(rows, train_->dim);
    b = {x_.data(), y_.data()};
  }
  // The rate for this step is taken at the epoch the step starts in.
  const double per_epoch = balance_.schedule_steps_per_epoch > 0
                              ? balance_.schedule_steps_per_epoch
                              : static_cast<double>(sampler_.batches_per_epoch());
  last_lr_ = balance_.lr_scale * learning_rate(config_->optimizer,
                                               static_cast<double>(steps_) / per_epoch,
                                               config_->train.epochs);
  BatchResult r = forward_backward(b.x, b.y, rows, std::exchange(during_next_, {}));
  sgd_.step(model_.params(), model_.grads(), static_cast<float>(last_lr_));
  ++steps_;
  return r.loss;
}

BatchResult Trainer::forward_backward(const float* x, const std::int32_t* y, int rows,
                                      const std::function<void()>& meanwhile) {
  // A graph reads the buffers it was captured with: the same batch buffers, the same rows.
  if (graph_ && rows == graph_rows_ && x == graph_x_ && y == graph_y_) {
    if (std::string why = graph_->replay(); why.empty()) {
      if (meanwhile) meanwhile();
      const auto [loss, correct] = graph_->softmax_result();
      return {loss, correct, rows};
    } else {
      graph_.reset();
      graph_why_ = why;
      log_line(cat("peer ", peer_, ": train.graphs: step: ", why, "; the step runs eagerly"));
    }
  }
  // The first step runs eagerly (cuDNN's plans and workspaces are made then, which a capture
  // cannot do); the next full batch is captured, and replayed at once.
  if (!graph_ && config_->train.graphs == GraphMode::kStep && graph_why_.empty() && graph_warm_ &&
      rows == config_->train.batch) {
    std::string why = backend_->capture_begin();
    if (why.empty()) {
      try {
        model_.forward_backward(x, y, rows);
      } catch (const std::exception& e) {
        why = cat("capturing the step: ", e.what());
      }
      std::string ended;
      graph_ = backend_->capture_end(ended);
      if (why.empty()) why = ended;
      if (!why.empty()) graph_.reset();
    }
    if (graph_) {
      graph_rows_ = rows;
      graph_x_ = x;
      graph_y_ = y;
      return forward_backward(x, y, rows, meanwhile);  // replayed at once
    }
    graph_why_ = why;
    log_line(cat("peer ", peer_, ": train.graphs: step: ", why, "; the step runs eagerly"));
  }
  graph_warm_ = true;
  return model_.forward_backward(x, y, rows, meanwhile);
}

std::string Trainer::graphs() const {
  if (config_->train.graphs == GraphMode::kOff) return "off";
  if (!graph_why_.empty()) return cat("off (", graph_why_, ")");
  return "step";
}

Evaluation Trainer::evaluate(const Dataset& data, std::int64_t limit) {
  const std::int64_t n = limit > 0 ? std::min(limit, data.n) : data.n;
  const int chunk = std::max(config_->train.batch, config_->train.eval_batch);
  double loss = 0.0;
  std::int64_t correct = 0;
  std::vector<std::int64_t> idx;
  for (std::int64_t start = 0; start < n; start += chunk) {
    const int rows = static_cast<int>(std::min<std::int64_t>(chunk, n - start));
    idx.resize(rows);
    for (int i = 0; i < rows; ++i) idx[i] = start + i;
    Batch b = batch_buffers();
    gather_batch(data, idx, b.x, b.y);
    if (!backend_->host_memory()) {
      upload_batch(rows, data.dim);
      b = {x_.data(), y_.data()};
    }
    BatchResult r = model_.evaluate(b.x, b.y, rows);
    loss += r.loss * rows;
    correct += r.correct;
  }
  Evaluation e;
  e.samples = n;
  e.loss = n ? loss / n : 0.0;
  e.accuracy = n ? static_cast<double>(correct) / n : 0.0;
  return e;
}

void Trainer::download_params(std::span<float> out) const {
  GOSSIP_CHECK_EQ(static_cast<std::int64_t>(out.size()), model_.num_params());
  backend_->download(out.data(), model_.params(), out.size_bytes());
}

void Trainer::upload_params(std::span<const float> in) {
  GOSSIP_CHECK_EQ(static_cast<std::int64_t>(in.size()), model_.num_params());
  backend_->upload(model_.params(), in.data(), in.size_bytes());
}

std::string data_cache_dir(const DataConfig& d) {
  if (d.cache_dir == "off") return "";
  if (!d.cache_dir.empty()) return d.cache_dir;
  auto env = [](const char* name) {
    const char* v = std::getenv(name);
    return std::string(v ? v : "");
  };
  if (const std::string v = env("GOSSIP_CACHE_DIR"); !v.empty()) return v;
  if (const std::string v = env("XDG_CACHE_HOME"); !v.empty()) return v + "/gossip";
  if (const std::string v = env("HOME"); !v.empty()) return v + "/.cache/gossip";
  return "";
}

namespace {

/// data.synthetic: one draw split in two, so train and test come from the same distribution.
DataSets synthetic_sets(const RunConfig& config) {
  const DataConfig& d = config.data;
  DataSets s;
  Dataset all = make_synthetic(d.synthetic_train + d.synthetic_test, d.synthetic_dim, d.classes,
                               config.train.seed, d.synthetic_separation);
  auto split = [&](std::int64_t from, std::int64_t count) {
    Dataset part;
    part.n = count;
    part.dim = all.dim;
    part.classes = all.classes;
    part.x.assign(all.x.begin() + from * all.dim, all.x.begin() + (from + count) * all.dim);
    part.y.assign(all.y.begin() + from, all.y.begin() + from + count);
    return part;
  };
  s.train = split(0, d.synthetic_train);
  s.test = split(d.synthetic_train, d.synthetic_test);
  return s;
}

DataSets image_sets(const DataConfig& d) {
  DataSets s;
  // The image sets are the same for every peer (each trains on its shard's indices): one
  // read-only decoded copy per host (data.cache_dir), so a peer, and a joiner started while
  // the others train, starts without decompressing them.
  const std::string cache = data_cache_dir(d);
  if (cache.empty()) {
    s.train = load_idx(d.train_images, d.train_labels, d.classes);
    s.test = load_idx(d.test_images, d.test_labels, d.classes);
  } else {
    std::string warning;
    s.train = load_idx_mapped(d.train_images, d.train_labels, d.classes, cache, &warning);
    if (!warning.empty()) log_line(cat("warning: ", warning));
    warning.clear();
    s.test = load_idx_mapped(d.test_images, d.test_labels, d.classes, cache, &warning);
    if (!warning.empty()) log_line(cat("warning: ", warning));
  }
  return s;
}

/// data.normalize: one mean and one standard deviation over all training features, applied to
/// both sets: folded into the pixels' scale and offset for image sets, applied in place
/// otherwise.
void normalize_sets(DataSets& s) {
  double sum = 0.0, sq = 0.0;
  const std::int64_t count = s.train.n * s.train.dim;
  if (s.train.pixels.empty()) {
    for (float v : s.train.x) {
      sum += v;
      sq += static_cast<double>(v) * v;
    }
  } else {
    std::array<std::int64_t, 256> histogram{};
    for (std::uint8_t p : s.train.pixels) ++histogram[p];
    for (int p = 0; p < 256; ++p) {
      const double v = p / 255.0;
      sum += histogram[p] * v;
      sq += histogram[p] * v * v;
    }
  }
  const double mean = sum / static_cast<double>(count);
  const double sd = std::sqrt(std::max(sq / static_cast<double>(count) - mean * mean, 1e-12));
  for (Dataset* set : {&s.train, &s.test}) {
    for (float& v : set->x) v = static_cast<float>((v - mean) / sd);
    set->pixel_scale = static_cast<float>(1.0 / (255.0 * sd));
    set->pixel_offset = static_cast<float>(-mean / sd);
  }
}

}  // namespace

DataSets load_datasets(const RunConfig& config) {
  const DataConfig& d = config.data;
  DataSets s = d.synthetic ? synthetic_sets(config) : image_sets(d);
  if (d.limit_train > 0 && d.limit_train < s.train.n) {
    s.train.n = d.limit_train;
    const auto kept = static_cast<std::size_t>(d.limit_train) * s.train.dim;
    if (s.train.pixels.empty()) s.train.x.resize(kept);
    else s.train.pixels.truncate(kept);
    s.train.y.resize(d.limit_train);
  }
  if (d.normalize) normalize_sets(s);
  return s;
}

std::vector<std::vector<std::int64_t>> shard_for(const RunConfig& config, const Dataset& train,
                                                 int n_peers) {
  ShardSpec spec;
  spec.kind = parse_shard_kind(config.data.shard);
  spec.alpha = config.data.alpha;
  spec.shards_per_peer = config.data.shards_per_peer;
  return make_shards(train.y, train.classes, n_peers, spec, config.train.seed);
}

}  // namespace gossip
