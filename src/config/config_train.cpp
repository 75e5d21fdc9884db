// config/config_train.cpp: the data:, model:, optimizer: and train: sections, and the model
// checked against the data.
#include "gossip/layer_spec.hpp"
#include "src/config/sections.hpp"

namespace gossip::sections {

void read_data(const Reader& r, const Node& n, DataConfig& d) {
  r.each(n, "data", Handlers{
      {"train_images", [&](auto& v, auto& f) { d.train_images = r.path(v, f); }},
      {"train_labels", [&](auto& v, auto& f) { d.train_labels = r.path(v, f); }},
      {"test_images", [&](auto& v, auto& f) { d.test_images = r.path(v, f); }},
      {"test_labels", [&](auto& v, auto& f) { d.test_labels = r.path(v, f); }},
      {"cache_dir", [&](auto& v, auto& f) {
         d.cache_dir = r.text(v, f) == "off" ? "off" : r.path(v, f);
       }},
      {"classes", [&](auto& v, auto& f) { d.classes = r.positive_int(v, f, false); }},
      {"normalize", [&](auto& v, auto& f) { d.normalize = r.boolean(v, f); }},
      {"limit_train", [&](auto& v, auto& f) { d.limit_train = r.positive_int(v, f, true); }},
      {"shard", [&](auto& v, auto& f) { d.shard = choice_row(shard_kind_table(), r.named(v, f, shard_kind_table())).name; }},
      {"alpha", [&](auto& v, auto& f) { d.alpha = r.positive(v, f, false); }},
      {"shards_per_peer", [&](auto& v, auto& f) { d.shards_per_peer = r.positive_int(v, f, false); }},
      {"balance", [&](auto& v, auto& f) { d.balance = r.named(v, f, balance_table()); }},
      {"synthetic", [&](auto& v, auto& f) {
         d.synthetic = true;
         r.each(v, f, Handlers{
             {"train", [&](auto& x, auto& g) { d.synthetic_train = r.positive_int(x, g, false); }},
             {"test", [&](auto& x, auto& g) { d.synthetic_test = r.positive_int(x, g, false); }},
             {"dim", [&](auto& x, auto& g) { d.synthetic_dim = r.positive_int(x, g, false); }},
             {"classes", [&](auto& x, auto& g) { d.classes = r.positive_int(x, g, false); }},
             {"separation", [&](auto& x, auto& g) { d.synthetic_separation = r.positive(x, g, false); }},
         });
       }},
  });
}

bool is_integer_text(const Node& n) {
  if (!n.is_scalar() || n.scalar().empty()) return false;
  const std::string& t = n.scalar();
  for (std::size_t i = 0; i < t.size(); ++i)
    if (!(std::isdigit(static_cast<unsigned char>(t[i])) || (i == 0 && (t[i] == '-' || t[i] == '+'))))
      return false;
  return true;
}

namespace {

/// How each key of a layer's row is read into `l`.
Handlers layer_handlers(const Reader& r, std::span<const LayerKey> keys, LayerConfig& l) {
  Handlers h;
  for (const LayerKey& key : keys) {
    if (key.whole) {
      h[key.name] = [&r, &l, key](const Node& v, const std::string& f) {
        l.*key.whole = r.positive_int(v, f, key.zero_allowed);
      };
      continue;
    }
    h[key.name] = [&r, &l, key](const Node& v, const std::string& f) {
      double& into = l.*key.fraction;
      into = r.positive(v, f, true);
      if (into >= 1.0) r.fail(v, f, cat("must be below 1, got ", into));
    };
  }
  return h;
}

}  // namespace

/// One item of model.layers: `relu`, or `conv2d: {out_channels: 32, kernel: 5}`.
LayerConfig read_layer(const Reader& r, const Node& item, const std::string& name) {
  LayerConfig l;
  Node fields;
  std::string type;
  if (item.is_scalar()) {
    type = item.scalar();
  } else if (item.is_map() && item.size() == 1) {
    const auto entries = item.entries();
    type = entries[0].first.scalar();
    fields = entries[0].second;
  } else {
    r.fail(item, name, cat("expected a layer such as `relu` or `linear: {out: 10}`, got ",
                           item.describe()));
  }
  const NamedRow<LayerKind>* row = find_choice(layer_table(), type);
  if (!row)
    r.fail(item, name, cat("unknown layer type '", type, "' (expected one of: ",
                           choice_names(layer_table()), ")"));
  const LayerSpec& spec = layer_spec(row->kind);
  l = spec.starts;
  l.type = row->kind;
  if (fields.defined() && !fields.is_null()) {
    if (!fields.is_map())
      r.fail(fields, name, cat(type, ": expected a map of fields, got ", fields.describe()));
    r.each(fields, name, layer_handlers(r, spec.key_list(), l));
  }
  for (const LayerKey& key : spec.key_list()) {
    const bool given = !key.required || (fields.is_map() && fields[key.name].defined());
    if (!given)
      r.fail(item, name, cat(type, " needs the field '", key.name, "'"));
  }
  if (spec.stride_defaults_to_kernel && l.stride == 0) l.stride = l.kernel;
  return l;
}

void read_model(const Reader& r, const Node& n, ModelConfig& m) {
  bool shorthand = false, have_input = false, have_layers = false;
  r.each(n, "model", Handlers{
      {"input", [&](auto& v, auto& f) {
         r.sequence(v, f);
         m.input = r.ints(v, f);
         if (m.input.size() != 1 && m.input.size() != 3)
           r.fail(v, f, cat("give [features] or [channels, height, width], got ",
                            shape_string(m.input)));
         for (int d : m.input)
           if (d <= 0) r.fail(v, f, cat("sizes must be positive, got ", shape_string(m.input)));
         have_input = true;
       }},
      {"layers", [&](auto& v, auto& f) {
         r.sequence(v, f);
         if (v.size() == 0) r.fail(v, f, "the model has no layers");
         have_layers = true;
         shorthand = true;
         for (const Node& item : v) shorthand = shorthand && is_integer_text(item);
         if (shorthand) {
           const std::vector<int> sizes = r.ints(v, f);
           if (sizes.size() < 2) r.fail(v, f, "need at least input and output sizes");
           for (int s : sizes)
             if (s <= 0) r.fail(v, f, cat("sizes must be positive, got ", s));
           const Shape input = m.input;
           m = ModelConfig::mlp(sizes);
           if (have_input) m.input = input;
           for (std::size_t i = 0; i < m.layers.size(); ++i) r.mark(cat(f, "[", i, "]"), v.line());
           return;
         }
         m.layers.clear();
         std::size_t i = 0;
         for (const Node& item : v) {
           const std::string name = cat(f, "[", i++, "]");
           r.mark(name, item.line());
           m.layers.push_back(read_layer(r, item, name));
         }
       }},
  });
  if (!have_layers) r.fail(n, "model", "needs `layers` (a list of layers, or MLP sizes)");
  if (shorthand && have_input)
    r.fail(n["input"], "model.input", "is implied by the MLP shorthand's first size; leave it out");
  if (!shorthand && !have_input)
    r.fail(n, "model", "needs `input`, the shape of one sample (e.g. [1, 28, 28] or [784])");
}

void read_optimizer(const Reader& r, const Node& n, OptimizerConfig& o) {
  r.each(n, "optimizer", Handlers{
      {"lr", [&](auto& v, auto& f) { o.lr = r.positive(v, f, false); }},
      {"momentum", [&](auto& v, auto& f) {
         o.momentum = r.positive(v, f, true);
         if (o.momentum >= 1) r.fail(v, f, cat("must be below 1, got ", o.momentum));
       }},
      {"nesterov", [&](auto& v, auto& f) { o.nesterov = r.boolean(v, f); }},
      {"weight_decay", [&](auto& v, auto& f) { o.weight_decay = r.positive(v, f, true); }},
      {"schedule", [&](auto& v, auto& f) { o.schedule = r.named(v, f, lr_schedule_table()); }},
      {"warmup_epochs", [&](auto& v, auto& f) { o.warmup_epochs = r.positive(v, f, true); }},
      {"step_epochs", [&](auto& v, auto& f) { o.step_epochs = r.positive(v, f, false); }},
      {"gamma", [&](auto& v, auto& f) { o.gamma = r.positive(v, f, false); }},
      {"min_lr", [&](auto& v, auto& f) { o.min_lr = r.positive(v, f, true); }},
  });
}

void read_train(const Reader& r, const Node& n, TrainConfig& t) {
  r.each(n, "train", Handlers{
      {"epochs", [&](auto& v, auto& f) {
         t.epochs = r.positive(v, f, false);
         if (t.epochs > kMaxEpochs)
           r.fail(v, f, cat("must be at most ", kMaxEpochs, ", got ", t.epochs));
       }},
      {"batch", [&](auto& v, auto& f) { t.batch = r.positive_int(v, f, false); }},
      {"seed", [&](auto& v, auto& f) { t.seed = r.seed(v, f); }},
      {"backend", [&](auto& v, auto& f) { t.backend = r.named(v, f, backend_table()); }},
      {"threads", [&](auto& v, auto& f) { t.threads = r.integer_in(v, f, 1, kMaxThreads); }},
      {"gemm", [&](auto& v, auto& f) { t.gemm = r.choice(v, f, {"auto", "openblas", "onednn"}); }},
      {"precision", [&](auto& v, auto& f) { t.precision = r.named(v, f, precision_table()); }},
      {"conv", [&](auto& v, auto& f) { t.conv = r.named(v, f, conv_engine_table()); }},
      {"mps", [&](auto& v, auto& f) { t.mps = r.named(v, f, mps_mode_table()); }},
      {"graphs", [&](auto& v, auto& f) { t.graphs = r.named(v, f, graph_mode_table()); }},
      {"peers_per_process", [&](auto& v, auto& f) {
         t.peers_per_process = r.integer_in(v, f, 1, kMaxPeersPerProcess);
       }},
      {"tensorboard", [&](auto& v, auto& f) { t.tensorboard = r.boolean(v, f); }},
      {"evals_per_epoch", [&](auto& v, auto& f) { t.evals_per_epoch = r.positive_int(v, f, false); }},
      {"eval_batch", [&](auto& v, auto& f) { t.eval_batch = r.positive_int(v, f, false); }},
      {"eval_limit", [&](auto& v, auto& f) { t.eval_limit = r.positive_int(v, f, true); }},
      {"peer_eval_limit", [&](auto& v, auto& f) { t.peer_eval_limit = r.positive_int(v, f, true); }},
      {"same_init", [&](auto& v, auto& f) { t.same_init = r.boolean(v, f); }},
      {"checkpoint_every", [&](auto& v, auto& f) { t.checkpoint_every = r.positive_int(v, f, true); }},
  });
}

/// "FILE:LINE: field" with the line of the field or, when the file did not set it (a missing
/// layer field), of the nearest enclosing one it did (the layer).
std::string where_nearest(const RunConfig& cfg, const std::string& field) {
  std::string p = field;
  while (!cfg.path.empty() && !cfg.lines.count(p)) {
    const auto cut = p.find_last_of(".[");
    if (cut == std::string::npos) break;
    p = p.substr(0, cut);
  }
  const auto it = cfg.lines.find(p);
  return it == cfg.lines.end() ? cfg.where(field) : cat(cfg.path, ":", it->second, ": ", field);
}

/// Shapes through the whole stack, the input against synthetic data, the output against the
/// classes: a model that cannot be built is refused here, at load time.
void check_model(const RunConfig& cfg) {
  auto where = [&](const std::string& f) { return where_nearest(cfg, f); };
  const std::vector<Shape> shapes = infer_shapes(cfg.model, where);
  if (cfg.data.synthetic && cfg.model.input_size() != cfg.data.synthetic_dim)
    throw InputError(cat(where("model.input"), ": input ", shape_string(cfg.model.input), " (",
                         cfg.model.input_size(), " features) does not match data.synthetic.dim ",
                         cfg.data.synthetic_dim));
  const std::size_t last = cfg.model.layers.size() - 1;
  if (shapes.back() != Shape{cfg.data.classes})
    throw InputError(cat(where(cat("model.layers[", last, "]")), ": layer ", last, " (",
                         cfg.model.layers[last].type, ") output ", shape_string(shapes.back()),
                         " (output size ", shape_size(shapes.back()),
                         ") does not match the data's classes [", cfg.data.classes, "]"));
}

}  // namespace gossip::sections
