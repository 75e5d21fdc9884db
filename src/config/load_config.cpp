// config/load_config.cpp: run-config YAML -> RunConfig. Every key is checked against the fields
// its section knows (unknown and repeated keys are errors), every value against its type and
// range (numbers must be finite), and each problem names the file and line
// ("configs/x.yaml:7: optimizer.lr: must be > 0, got -1"). The line of every field read is kept
// in RunConfig::lines, so checks made later (config + topology) can name it too.
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <tuple>
#include <utility>

#include "gossip/choice.hpp"
#include "gossip/config.hpp"
#include "gossip/core.hpp"
#include "gossip/yaml.hpp"

namespace gossip {
namespace {

using yaml::Node;
using Handlers = std::map<std::string, std::function<void(const Node&, const std::string&)>>;
/// Keys that moved out of a section: old key -> its new dotted place ("monitor.suspect_after_s").
using Moved = std::map<std::string, std::string>;

// Config-shaped reads on a document: "FILE:LINE: field: what is wrong".
class Reader {
 public:
  Reader(const yaml::Document& doc, std::string dir, std::map<std::string, int>& lines)
      : doc_(doc), dir_(std::move(dir)), lines_(lines) {}

  /// A Reader that reads no file but lists into `keys` every key the tables it is given name
  /// (config_keys): each() then calls each handler with `probes` (an empty map, a list of one)
  /// so that the tables of the maps under a key are listed too, whatever the reads make of them.
  Reader(const yaml::Document& doc, std::map<std::string, int>& lines,
         std::set<std::string>& keys, std::vector<Node> probes)
      : doc_(doc), dir_("."), lines_(lines), listing_(&keys), probes_(std::move(probes)) {}

  [[noreturn]] void fail(const Node& node, const std::string& field,
                         const std::string& what) const {
    doc_.fail(node, cat(field, ": ", what));
  }

  bool boolean(const Node& node, const std::string& field) const {
    return doc_.boolean(node, field);
  }
  std::string text(const Node& node, const std::string& field) const {
    return doc_.text(node, field);
  }
  int integer(const Node& node, const std::string& field) const {
    return static_cast<int>(doc_.integer(node, field, INT_MIN, INT_MAX));
  }
  std::uint64_t seed(const Node& node, const std::string& field) const {
    return static_cast<std::uint64_t>(doc_.integer(node, field, 0, INT64_MAX));
  }

  std::string path(const Node& node, const std::string& field) const {
    return resolve(text(node, field));
  }
  std::string resolve(const std::string& file) const {
    std::filesystem::path p = file;
    if (p.is_relative()) p = std::filesystem::path(dir_) / p;
    return p.lexically_normal().string();
  }

  double number(const Node& node, const std::string& field) const {
    return doc_.number(node, field);
  }

  double positive(const Node& node, const std::string& field, bool allow_zero) const {
    const double v = doc_.number(node, field);
    if (v < 0 || (!allow_zero && v == 0))
      fail(node, field, cat("must be ", allow_zero ? ">= 0" : "> 0", ", got ", v));
    return v;
  }

  /// An integer in [lo, hi]: "field: 1000000 is outside 1..1024".
  int integer_in(const Node& node, const std::string& field, int lo, int hi) const {
    return static_cast<int>(doc_.integer(node, field, lo, hi));
  }

  int positive_int(const Node& node, const std::string& field, bool allow_zero) const {
    const std::int64_t v = doc_.integer(node, field, INT64_MIN, INT64_MAX);
    if (v < 0 || (!allow_zero && v == 0))
      fail(node, field, cat("must be ", allow_zero ? ">= 0" : "> 0", ", got ", v));
    if (v > 1'000'000'000) fail(node, field, cat("must be at most 1000000000, got ", v));
    return static_cast<int>(v);
  }

  std::string choice(const Node& node, const std::string& field,
                     std::initializer_list<const char*> allowed) const {
    const std::string v = text(node, field);
    std::string list;
    for (const char* a : allowed) {
      if (v == a) return v;
      list += (list.empty() ? "" : ", ") + std::string(a);
    }
    fail(node, field, cat("unknown value '", v, "' (expected one of: ", list, ")"));
  }

  /// An algorithm's name (gossip/algorithm_table.hpp): the node's text, or `named` when given.
  AlgorithmKind algorithm(const Node& node, const std::string& field,
                          const std::string& named = "") const {
    const std::string v = named.empty() ? text(node, field) : named;
    for (const auto& row : algorithm_table())
      if (v == row.name) return row.kind;
    fail(node, field, cat("unknown value '", v, "' (expected one of: ", algorithm_choices(), ")"));
  }

  /// A value named by a row of `table` (gossip/choice.hpp): "field: unknown value 'x' (expected
  /// one of: ...)".
  template <ChoiceRow Row>
  auto named(const Node& node, const std::string& field, std::span<const Row> table) const {
    const std::string v = text(node, field);
    if (const Row* row = find_choice(table, v)) return row->kind;
    fail(node, field, cat("unknown value '", v, "' (expected one of: ", choice_names(table), ")"));
  }

  /// One value or a list of them, each read by `read(node, field)`.
  template <typename Read>
  auto list(const Node& node, const std::string& field, Read read) const {
    std::vector<decltype(read(node, field))> out;
    if (node.is_scalar()) {
      out.push_back(read(node, field));
      return out;
    }
    doc_.list(node, field);
    std::size_t i = 0;
    for (const Node& item : node) out.push_back(read(item, cat(field, "[", i++, "]")));
    return out;
  }
  std::vector<int> ints(const Node& node, const std::string& field) const {
    return list(node, field,
                [this](const Node& n, const std::string& f) { return integer(n, f); });
  }
  std::vector<std::string> texts(const Node& node, const std::string& field) const {
    return list(node, field, [this](const Node& n, const std::string& f) { return text(n, f); });
  }

  /// The node must be a list.
  void sequence(const Node& node, const std::string& field) const { doc_.list(node, field); }

  /// Fails at the line each() recorded for `field` (a field already read).
  [[noreturn]] void fail_at(const std::string& field, const std::string& what) const {
    throw InputError(cat(doc_.name(), ":", lines_.at(field), ": ", field, ": ", what));
  }

  /// Records the line of a field read without each() (list items).
  void mark(const std::string& field, int line) const { lines_[field] = line; }

  /// Calls the handler of each key in `section`, in file order, and records its line; unknown
  /// and repeated keys are errors, and a key of `moved` is refused with its new place
  /// ("gossip.compress: moved to gossip.choco.compress").
  void each(const Node& section, const std::string& prefix, const Handlers& handlers,
            const Moved& moved = {}) const {
    if (listing_) {
      list_keys(prefix, handlers);
      return;
    }
    for (const auto& [key, value] : section.entries()) {
      const auto to = moved.find(key.scalar());
      if (to != moved.end())
        doc_.fail(key, cat(yaml::field(prefix, key.scalar()), ": moved to ", to->second,
                           " (docs/config.md)"));
    }
    std::vector<std::string> allowed;
    for (const auto& [key, _] : handlers) allowed.push_back(key);
    doc_.keys(section, allowed, prefix);
    for (const auto& [key, value] : section.entries()) {
      const std::string field = yaml::field(prefix, key.scalar());
      lines_[field] = key.line();
      handlers.at(key.scalar())(value, field);
    }
  }

 private:
  const yaml::Document& doc_;
  std::string dir_;
  std::map<std::string, int>& lines_;
  std::set<std::string>* listing_ = nullptr;
  std::vector<Node> probes_;

  void list_keys(const std::string& prefix, const Handlers& handlers) const {
    for (const auto& [key, handler] : handlers) {
      const std::string field = yaml::field(prefix, key);
      listing_->insert(field);
      for (const Node& probe : probes_) {
        try {
          handler(probe, field);
        } catch (const std::exception&) {
          // A probe is no value of this key; only the keys its handler's tables name count.
        }
      }
    }
  }
};

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
      {"shard", [&](auto& v, auto& f) { d.shard = r.choice(v, f, {"iid", "dirichlet", "shards"}); }},
      {"alpha", [&](auto& v, auto& f) { d.alpha = r.positive(v, f, false); }},
      {"shards_per_peer", [&](auto& v, auto& f) { d.shards_per_peer = r.positive_int(v, f, false); }},
      {"balance", [&](auto& v, auto& f) { d.balance = r.choice(v, f, {"equal_steps", "weighted"}); }},
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

/// One item of model.layers: `relu`, or `conv2d: {out_channels: 32, kernel: 5}`.
LayerConfig read_layer(const Reader& r, const Node& item, const std::string& name) {
  LayerConfig l;
  Node fields;
  if (item.is_scalar()) {
    l.type = item.scalar();
  } else if (item.is_map() && item.size() == 1) {
    const auto entries = item.entries();
    l.type = entries[0].first.scalar();
    fields = entries[0].second;
  } else {
    r.fail(item, name, cat("expected a layer such as `relu` or `linear: {out: 10}`, got ",
                           item.describe()));
  }
  Handlers h;
  auto positive = [&](int& into) {
    return [&r, &into](const Node& v, const std::string& f) { into = r.positive_int(v, f, false); };
  };
  std::vector<const char*> required;
  if (l.type == "linear") {
    h = {{"out", positive(l.out)}};
    required = {"out"};
  } else if (l.type == "conv2d") {
    l.stride = 1;
    h = {{"out_channels", positive(l.out)}, {"kernel", positive(l.kernel)},
         {"stride", positive(l.stride)},
         {"padding", [&](auto& v, auto& f) { l.padding = r.positive_int(v, f, true); }}};
    required = {"out_channels", "kernel"};
  } else if (l.type == "maxpool2d" || l.type == "avgpool2d") {
    h = {{"kernel", positive(l.kernel)}, {"stride", positive(l.stride)}};
    required = {"kernel"};
  } else if (l.type == "dropout") {
    l.p = -1.0;
    h = {{"p", [&](auto& v, auto& f) {
            l.p = r.positive(v, f, true);
            if (l.p >= 1.0) r.fail(v, f, cat("must be below 1, got ", l.p));
          }}};
    required = {"p"};
  } else if (l.type == "groupnorm") {
    h = {{"groups", positive(l.groups)}};
    required = {"groups"};
  } else if (l.type != "relu" && l.type != "flatten") {
    r.fail(item, name, cat("unknown layer type '", l.type, "' (expected one of: linear, conv2d, "
                           "maxpool2d, avgpool2d, relu, flatten, dropout, groupnorm)"));
  }
  if (fields.defined() && !fields.is_null()) {
    if (!fields.is_map())
      r.fail(fields, name, cat(l.type, ": expected a map of fields, got ", fields.describe()));
    r.each(fields, name, h);
  }
  for (const char* f : required) {
    const bool given = fields.is_map() && fields[f].defined();
    if (!given)
      r.fail(item, name, cat(l.type, " needs the field '", f, "'"));
  }
  if ((l.type == "maxpool2d" || l.type == "avgpool2d") && l.stride == 0) l.stride = l.kernel;
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
      {"schedule", [&](auto& v, auto& f) { o.schedule = r.choice(v, f, {"constant", "step", "cosine"}); }},
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
      {"backend", [&](auto& v, auto& f) { t.backend = r.choice(v, f, {"auto", "cpu", "cuda"}); }},
      {"threads", [&](auto& v, auto& f) { t.threads = r.integer_in(v, f, 1, kMaxThreads); }},
      {"gemm", [&](auto& v, auto& f) { t.gemm = r.choice(v, f, {"auto", "openblas", "onednn"}); }},
      {"precision", [&](auto& v, auto& f) { t.precision = r.choice(v, f, {"fp32", "bf16"}); }},
      {"tensorboard", [&](auto& v, auto& f) { t.tensorboard = r.boolean(v, f); }},
      {"evals_per_epoch", [&](auto& v, auto& f) { t.evals_per_epoch = r.positive_int(v, f, false); }},
      {"eval_batch", [&](auto& v, auto& f) { t.eval_batch = r.positive_int(v, f, false); }},
      {"eval_limit", [&](auto& v, auto& f) { t.eval_limit = r.positive_int(v, f, true); }},
      {"peer_eval_limit", [&](auto& v, auto& f) { t.peer_eval_limit = r.positive_int(v, f, true); }},
      {"same_init", [&](auto& v, auto& f) { t.same_init = r.boolean(v, f); }},
      {"checkpoint_every", [&](auto& v, auto& f) { t.checkpoint_every = r.positive_int(v, f, true); }},
  });
}

/// gossip.choco.compress's form of a row: "{kind: top_k, fraction: F}", "{kind: none}".
std::string map_form(const CompressTraits& row) {
  switch (row.parameter) {
    case CompressParameter::kFraction: return cat("{kind: ", row.name, ", fraction: F}");
    case CompressParameter::kBits: return cat("{kind: ", row.name, ", bits: 8}");
    case CompressParameter::kNothing: break;
  }
  return cat("{kind: ", row.name, "}");
}

/// A compressor: {kind: top_k | random_k, fraction: F} or {kind: quantize, bits: 4 | 8}, or
/// {kind: none}. A field the kind does not take is an error, as is a fraction outside (0, 1].
CompressConfig read_compress(const Reader& r, const Node& n, const std::string& field) {
  if (!n.is_map())
    r.fail(n, field,
           cat("expected ", list_compressors(any_compressor, map_form), ", got ", n.describe()));
  CompressConfig c;
  bool fraction = false;
  bool bits = false;
  bool has_kind = false;
  r.each(n, field, Handlers{
      {"kind", [&](auto& v, auto& f) {
         const std::string name = r.text(v, f);
         if (!find_compress_kind(name, c.kind))
           r.fail(v, f, cat("unknown value '", name, "' (expected one of: ",
                            list_compressors(any_compressor),
                            ")"));
         has_kind = true;
       }},
      {"fraction", [&](auto& v, auto& f) {
         c.fraction = r.positive(v, f, false);
         if (c.fraction > 1) r.fail(v, f, cat("must be in (0, 1], got ", c.fraction));
         fraction = true;
       }},
      {"bits", [&](auto& v, auto& f) {
         c.bits = r.integer(v, f);
         if (c.bits != 4 && c.bits != 8) r.fail(v, f, cat("must be 4 or 8, got ", c.bits));
         bits = true;
       }},
  });
  if (!has_kind)
    r.fail(n, field, cat("a compressor needs its kind: ",
                         list_compressors(any_compressor)));
  // A key the kind does not take: "is for top_k and random_k, not quantize".
  const auto only_for = [&](CompressParameter parameter, const char* key) {
    if (traits(c.kind).parameter == parameter) return;
    const auto taking = [&](const CompressTraits& row) { return row.parameter == parameter; };
    r.fail_at(field + "." + key, cat("is for ", list_compressors(taking, "and"), ", not ",
                                     compress_kind_name(c.kind)));
  };
  if (fraction) only_for(CompressParameter::kFraction, "fraction");
  if (bits) only_for(CompressParameter::kBits, "bits");
  return c;
}

/// gossip.choco: CHOCO-SGD's compressor, consensus step and compressed exchanges a round.
void read_choco(const Reader& r, const Node& n, const std::string& field, ChocoConfig& c) {
  r.each(n, field, Handlers{
      {"compress", [&](auto& v, auto& f) { c.compress = read_compress(r, v, f); }},
      {"consensus_step", [&](auto& v, auto& f) {
         c.consensus_step = r.positive(v, f, false);
         if (c.consensus_step > 1) r.fail(v, f, cat("must be in (0, 1], got ", c.consensus_step));
       }},
      {"gossip_steps", [&](auto& v, auto& f) {
         c.gossip_steps = r.positive_int(v, f, false);
         if (c.gossip_steps > kMaxGossipSteps)
           r.fail(v, f, cat("must be at most ", kMaxGossipSteps, ", got ", c.gossip_steps));
       }},
  });
}

/// gossip.outer: {optimizer: nesterov, lr: LR, momentum: MU} (DiLoCo's outer step; local_sgd).
void read_outer(const Reader& r, const Node& n, const std::string& field, OuterConfig& c) {
  c.enabled = true;
  r.each(n, field, Handlers{
      {"optimizer", [&](auto& v, auto& f) { r.choice(v, f, {"nesterov"}); }},
      {"lr", [&](auto& v, auto& f) { c.lr = r.positive(v, f, false); }},
      {"momentum", [&](auto& v, auto& f) {
         c.momentum = r.positive(v, f, true);
         if (c.momentum >= 1) r.fail(v, f, cat("must be in [0, 1), got ", c.momentum));
       }},
  });
}

/// The keys gossip: held before they went to the sections of the rooms that read them: each is
/// refused there with its new place.
const Moved kMovedFromGossip = {
    {"compress", "gossip.choco.compress"},
    {"consensus_step", "gossip.choco.consensus_step"},
    {"gossip_steps", "gossip.choco.gossip_steps"},
    {"round_timeout_s", "monitor.round_timeout_s"},
    {"round_timeout_floor_s", "monitor.round_timeout_floor_s"},
    {"suspect_after_s", "monitor.suspect_after_s"},
    {"dead_after_rounds", "monitor.dead_after_rounds"},
    {"dead_after_s", "monitor.dead_after_s"},
    {"on_partition", "monitor.on_partition"},
};

/// sim.peer_eval_limit governs real peers too now: refused there with its new place.
const Moved kMovedFromSim = {{"peer_eval_limit", "train.peer_eval_limit"}};

/// gossip.aggregate: a name (`clipped`) or {kind: clipped, tau: T, ratio: R, byzantine: B}. tau
/// and ratio are clipped's alone (ratio its adaptive rule's), byzantine clipped's and
/// trimmed_mean's.
AggregateConfig read_aggregate(const Reader& r, const Node& n, const std::string& field) {
  AggregateConfig a;
  if (n.is_scalar()) {
    a.kind = r.named(n, field, aggregate_table());
    return a;
  }
  bool tau = false, ratio = false, byzantine = false;
  r.each(n, field, Handlers{
      {"kind", [&](auto& v, auto& f) { a.kind = r.named(v, f, aggregate_table()); }},
      {"tau", [&](auto& v, auto& f) {
         a.tau = r.positive(v, f, false);
         tau = true;
       }},
      {"ratio", [&](auto& v, auto& f) {
         a.ratio = r.number(v, f);
         if (!(a.ratio >= 1.0) || !std::isfinite(a.ratio))
           r.fail(v, f, cat("must be a number >= 1, got ", a.ratio));
         ratio = true;
       }},
      {"byzantine", [&](auto& v, auto& f) {
         a.byzantine = r.integer_in(v, f, 0, 64);
         byzantine = true;
       }},
  });
  const AggregateTraits& row = traits(a.kind);
  const auto takes_tau = [](const AggregateTraits& t) { return t.tau; };
  const auto takes_b = [](const AggregateTraits& t) { return t.byzantine; };
  if (tau && !row.tau)
    r.fail_at(field + ".tau", cat("is for ", choice_list_if(aggregate_table(), takes_tau, "and"),
                                  ", not ", row.name));
  if (ratio && !row.tau)
    r.fail_at(field + ".ratio", cat("is for ", choice_list_if(aggregate_table(), takes_tau, "and"),
                                    ", not ", row.name));
  if (ratio && tau)
    r.fail_at(field + ".ratio", "is the adaptive radius's; with a fixed tau it has no use");
  if (byzantine && !row.byzantine)
    r.fail_at(field + ".byzantine",
              cat("is for ", choice_list_if(aggregate_table(), takes_b, "and"), ", not ",
                  row.name));
  return a;
}

void read_gossip(const Reader& r, const Node& n, GossipConfig& g) {
  r.each(n, "gossip", Handlers{
      {"topology", [&](auto& v, auto& f) { g.topology = r.path(v, f); }},
      {"algorithm", [&](auto& v, auto& f) {
         g.algorithm = r.algorithm(v, f);
       }},
      {"choco", [&](auto& v, auto& f) { read_choco(r, v, f, g.choco); }},
      {"overlap", [&](auto& v, auto& f) { g.overlap = r.boolean(v, f); }},
      {"outer", [&](auto& v, auto& f) { read_outer(r, v, f, g.outer); }},
      {"aggregate", [&](auto& v, auto& f) { g.aggregate = read_aggregate(r, v, f); }},
      {"on_byzantine", [&](auto& v, auto& f) { g.on_byzantine = r.named(v, f, byzantine_policy_table()); }},
      {"wire", [&](auto& v, auto& f) { g.wire = r.named(v, f, wire_format_table()); }},
      {"period", [&](auto& v, auto& f) { g.period = r.positive_int(v, f, false); }},
      {"max_staleness", [&](auto& v, auto& f) { g.max_staleness = r.positive_int(v, f, true); }},
  }, kMovedFromGossip);
}

/// monitor: the preset's timing first (wherever `preset` stands in the map), then each key set
/// beside it over the preset's value.
void read_monitor(const Reader& r, const Node& n, MonitorConfig& m) {
  auto preset = [&](const Node& v, const std::string& f) {
    return r.named(v, f, monitor_preset_table());
  };
  if (n.is_map() && n["preset"].defined())
    m = monitor_preset(preset(n["preset"], "monitor.preset"));
  r.each(n, "monitor", Handlers{
      {"preset", [&](auto& v, auto& f) { m.preset = preset(v, f); }},
      {"round_timeout_s", [&](auto& v, auto& f) { m.round_timeout_s = r.positive(v, f, false); }},
      {"round_timeout_floor_s", [&](auto& v, auto& f) { m.round_timeout_floor_s = r.positive(v, f, true); }},
      {"suspect_after_s", [&](auto& v, auto& f) { m.suspect_after_s = r.positive(v, f, false); }},
      {"dead_after_rounds", [&](auto& v, auto& f) { m.dead_after_rounds = r.positive_int(v, f, false); }},
      {"dead_after_s", [&](auto& v, auto& f) { m.dead_after_s = r.positive(v, f, true); }},
      {"remove_dead_after_rounds", [&](auto& v, auto& f) { m.remove_dead_after_rounds = r.positive_int(v, f, true); }},
      {"on_partition", [&](auto& v, auto& f) { m.on_partition = r.named(v, f, partition_policy_table()); }},
  });
}

void read_sim(const Reader& r, const Node& n, SimConfig& s) {
  r.each(n, "sim", Handlers{
      {"workers", [&](auto& v, auto& f) { s.workers = r.integer_in(v, f, 0, kMaxWorkers); }},
      {"latency_ms", [&](auto& v, auto& f) { s.latency_ms = r.positive(v, f, true); }},
      {"bandwidth_mbps", [&](auto& v, auto& f) { s.bandwidth_mbps = r.positive(v, f, false); }},
      {"step_ms", [&](auto& v, auto& f) { s.step_ms = r.positive(v, f, true); }},
      {"stragglers", [&](auto& v, auto& f) { s.stragglers = r.ints(v, f); }},
      {"straggler_factor", [&](auto& v, auto& f) { s.straggler_factor = r.positive(v, f, false); }},
      {"message_loss", [&](auto& v, auto& f) {
         s.message_loss = r.positive(v, f, true);
         if (s.message_loss >= 1) r.fail(v, f, "must be below 1");
       }},
      {"consensus_only", [&](auto& v, auto& f) { s.consensus_only = r.boolean(v, f); }},
      {"consensus_dim", [&](auto& v, auto& f) { s.consensus_dim = r.positive_int(v, f, false); }},
      {"consensus_rounds", [&](auto& v, auto& f) { s.consensus_rounds = r.positive_int(v, f, false); }},
      {"eval_peers", [&](auto& v, auto& f) { s.eval_peers = r.positive_int(v, f, true); }},
      {"trace_peers", [&](auto& v, auto& f) { s.trace_peers = r.positive_int(v, f, true); }},
      {"cores", [&](auto& v, auto& f) { s.cores = r.positive_int(v, f, true); }},
      {"byte_cpu_ns", [&](auto& v, auto& f) { s.byte_cpu_ns = r.positive(v, f, true); }},
      {"message_cpu_us", [&](auto& v, auto& f) { s.message_cpu_us = r.positive(v, f, true); }},
      {"exchange_cpu", [&](auto& v, auto& f) { s.exchange_cpu = r.boolean(v, f); }},
  }, kMovedFromSim);
}

/// net.tls: `off` (or `on`), or {ca, cert, key}, all three, paths relative to the config.
void read_tls(const Reader& r, const Node& v, const std::string& f, NetworkConfig& c) {
  if (v.is_scalar()) {
    const std::string s = r.choice(v, f, {"on", "off", "true", "false"});
    c.tls = s == "on" || s == "true";
    return;
  }
  if (!v.is_map())
    r.fail(v, f, cat("expected off, on, or {ca, cert, key}, got ", v.describe()));
  c.tls = true;
  r.each(v, f, Handlers{
      {"ca", [&](auto& x, auto& g) { c.tls_ca = r.path(x, g); }},
      {"cert", [&](auto& x, auto& g) { c.tls_cert = r.path(x, g); }},
      {"key", [&](auto& x, auto& g) { c.tls_key = r.path(x, g); }},
  });
  for (const auto& [value, key] : {std::pair{&c.tls_ca, "ca"}, std::pair{&c.tls_cert, "cert"},
                                   std::pair{&c.tls_key, "key"}})
    if (value->empty())
      r.fail(v, f, cat("names no ", key, " (give ca, cert and key together, e.g. from "
                       "`gossip keys init DIR`: {ca: DIR/ca.pem, cert: \"DIR/peer-{rank}.pem\", "
                       "key: \"DIR/peer-{rank}.key\"})"));
}

void read_net(const Reader& r, const Node& n, NetworkConfig& c) {
  r.each(n, "net", Handlers{
      {"run_id", [&](auto& v, auto& f) {
         c.run_id = r.text(v, f);
         if (c.run_id.size() > NetworkConfig::kMaxRunIdBytes)
           r.fail(v, f, cat("at most ", NetworkConfig::kMaxRunIdBytes,
                            " bytes (the handshake's limit), got ", c.run_id.size()));
       }},
      {"host", [&](auto& v, auto& f) { c.host = r.text(v, f); }},
      {"base_port", [&](auto& v, auto& f) {
         c.base_port = r.positive_int(v, f, false);
         if (c.base_port > 65000) r.fail(v, f, cat("must be at most 65000, got ", c.base_port));
       }},
      {"metrics_port", [&](auto& v, auto& f) {
         c.metrics_port = r.positive_int(v, f, true);
         if (c.metrics_port > 65000)
           r.fail(v, f, cat("must be at most 65000, got ", c.metrics_port));
       }},
      {"metrics_host", [&](auto& v, auto& f) { c.metrics_host = r.text(v, f); }},
      {"connect_timeout_s", [&](auto& v, auto& f) { c.connect_timeout_s = r.positive(v, f, false); }},
      {"io_timeout_s", [&](auto& v, auto& f) { c.io_timeout_s = r.positive(v, f, false); }},
      {"handover_timeout_s", [&](auto& v, auto& f) { c.handover_timeout_s = r.positive(v, f, false); }},
      {"shared_memory", [&](auto& v, auto& f) { c.shared_memory = r.boolean(v, f); }},
      {"congestion", [&](auto& v, auto& f) {
         const std::string name = r.text(v, f);
         const bool ok = !name.empty() && name.size() <= 15 &&
                         std::all_of(name.begin(), name.end(), [](char ch) {
                           return (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
                                  ch == '_' || ch == '-';
                         });
         if (!ok)
           r.fail(v, f, cat("'", name, "' is not the name of a TCP congestion control (system, "
                            "or one the kernel lists in net.ipv4.tcp_available_congestion_control:"
                            " cubic, reno, bbr, ...)"));
         c.congestion = name == "system" ? "" : name;
       }},
      {"tls", [&](auto& v, auto& f) { read_tls(r, v, f, c); }},
      {"emulate", [&](auto& v, auto& f) {
         try {
           c.emulate = parse_link_emulation(r.text(v, f), "");
         } catch (const InputError& e) {
           r.fail(v, f, e.what());
         }
       }},
  });
}

Fault read_fault(const Reader& r, const Node& item, const std::string& at);

/// A sweep's cells (compare.memberships, compare.attacks): each item `none` (`none_cell`) or a
/// map read by `read` at its field; `expected` says what a cell looks like.
template <typename Cell, typename Read>
std::vector<Cell> read_cells(const Reader& r, const Node& n, const std::string& field,
                             const char* expected, const Cell& none_cell, Read read) {
  r.sequence(n, field);
  std::vector<Cell> out;
  std::size_t i = 0;
  for (const Node& item : n) {
    const std::string at = cat(field, "[", i++, "]");
    r.mark(at, item.line());
    if (item.is_scalar()) {
      if (r.text(item, at) != "none")
        r.fail(item, at, cat("expected none or ", expected, ", got '", item.scalar(), "'"));
      out.push_back(none_cell);
      continue;
    }
    out.push_back(read(item, at));
  }
  return out;
}

/// compare.memberships: each item `none` (the static run) or {name: NAME, changes: [...]} with
/// join and leave entries of the fault schedule, read by its reader.
std::vector<CompareConfig::Membership> read_membership_cells(const Reader& r, const Node& n,
                                                             const std::string& field) {
  return read_cells(
      r, n, field, "{name: NAME, changes: [{round: R, join: [...]}, ...]}",
      CompareConfig::Membership{"static", {}}, [&](const Node& item, const std::string& at) {
        CompareConfig::Membership cell;
        r.each(item, at, Handlers{
            {"name", [&](auto& v, auto& f) { cell.name = r.text(v, f); }},
            {"changes", [&](auto& v, auto& f) {
               r.sequence(v, f);
               std::size_t k = 0;
               for (const Node& c : v) {
                 const std::string cf = cat(f, "[", k++, "]");
                 r.mark(cf, c.line());
                 Fault fault = read_fault(r, c, cf);
                 if (!is_membership(fault))
                   r.fail(c, cf, cat("a membership cell holds join and leave entries, not a ",
                                     fault_action_name(fault.action),
                                     " (put other faults in the config's faults:)"));
                 cell.changes.push_back(std::move(fault));
               }
             }},
        });
        if (cell.name.empty()) r.fail(item, at, "a membership cell needs its name");
        if (cell.changes.empty())
          r.fail(item, at, "a membership cell needs its changes (or none)");
        return cell;
      });
}

/// compare.attacks: each item `none` or an attack entry of the fault schedule, read by its
/// reader; any other action is refused (a sweep's cells differ by who lies, not who dies).
std::vector<Fault> read_attack_cells(const Reader& r, const Node& n, const std::string& field) {
  return read_cells(r, n, field, "an attack entry such as {round: 1, attack: [3], kind: sign_flip}",
                    Fault{}, [&](const Node& item, const std::string& at) {
                      Fault fault = read_fault(r, item, at);
                      if (fault.action != FaultAction::kAttack)
                        r.fail(item, at, cat("a sweep's cell is none or an attack entry ({round: "
                                             "1, attack: [3], kind: sign_flip}), not a ",
                                             fault_action_name(fault.action),
                                             " (put other faults in the config's faults:)"));
                      return fault;
                    });
}

void read_compare(const Reader& r, const Node& n, CompareConfig& c) {
  r.each(n, "compare", Handlers{
      {"topologies", [&](auto& v, auto& f) {
         for (const auto& s : r.texts(v, f)) c.topologies.push_back(r.resolve(s));
       }},
      {"algorithms", [&](auto& v, auto& f) {
         for (const auto& a : r.texts(v, f))
           c.algorithms.push_back(r.algorithm(v, f, a));
       }},
      {"periods", [&](auto& v, auto& f) { c.periods = r.ints(v, f); }},
      {"shards", [&](auto& v, auto& f) { c.shards = r.texts(v, f); }},
      {"seeds", [&](auto& v, auto& f) {
         c.seeds = r.list(v, f, [&](const Node& x, const std::string& g) { return r.seed(x, g); });
       }},
      {"target_accuracy", [&](auto& v, auto& f) { c.target_accuracy = r.positive(v, f, false); }},
      {"compress", [&](auto& v, auto& f) {
         r.sequence(v, f);
         std::size_t i = 0;
         for (const Node& item : v) c.compress.push_back(read_compress(r, item, cat(f, "[", i++, "]")));
       }},
      {"averaging_rounds", [&](auto& v, auto& f) {
         c.averaging_rounds = r.positive_int(v, f, true);
       }},
      {"aggregates", [&](auto& v, auto& f) {
         c.aggregates = r.list(v, f, [&](const Node& x, const std::string& g) {
           r.mark(g, x.line());
           return read_aggregate(r, x, g);
         });
       }},
      {"attacks", [&](auto& v, auto& f) { c.attacks = read_attack_cells(r, v, f); }},
      {"memberships", [&](auto& v, auto& f) { c.memberships = read_membership_cells(r, v, f); }},
  });
}

/// Keys that only some algorithms take, checked once the whole file is read (the algorithm may
/// come after them). A sweep (compare.algorithms) may list an algorithm that takes them.
void check_gossip_keys(const RunConfig& cfg) {
  const GossipConfig& g = cfg.gossip;
  const char* name = algorithm_name(g.algorithm);
  // Whether the algorithm, or one the sweep lists, has the trait.
  auto takes = [&](bool AlgorithmTraits::*trait) {
    if (traits(g.algorithm).*trait) return true;
    for (AlgorithmKind a : cfg.compare.algorithms)
      if (traits(a).*trait) return true;
    return false;
  };
  auto any_whole_buffers = [&] {
    if (!traits(g.algorithm).compresses) return true;
    for (AlgorithmKind a : cfg.compare.algorithms)
      if (!traits(a).compresses) return true;
    return false;
  };
  const bool compresses = takes(&AlgorithmTraits::compresses);
  if (cfg.lines.count("gossip.choco.compress") && !compresses)
    throw InputError(cat(cfg.where("gossip.choco.compress"), ": compression is for "
                         "gossip.algorithm: choco; ", name, " sends whole parameter buffers"));
  if (!cfg.compare.compress.empty() && !compresses)
    throw InputError(cat(cfg.where("compare.compress"), ": compressors are swept for "
                         "gossip.algorithm: choco, which neither gossip.algorithm nor "
                         "compare.algorithms names"));
  if (cfg.lines.count("gossip.choco.consensus_step") && !compresses)
    throw InputError(cat(cfg.where("gossip.choco.consensus_step"), ": the consensus step is "
                         "choco's; ", name, " does not take one"));
  if (g.choco.gossip_steps != 1 && !compresses)
    throw InputError(cat(cfg.where("gossip.choco.gossip_steps"), ": several compressed "
                         "exchanges a round are choco's; ", name, " exchanges once a round"));
  // In a sweep beside an algorithm that sends whole buffers the wire is theirs (compare keeps
  // choco at fp32 unless its compressor is top_k or random_k).
  if (g.wire != WireFormat::kFp32 && compresses && !traits(g.choco.compress.kind).halves &&
      !any_whole_buffers())
    throw InputError(
        cat(cfg.where("gossip.wire"), ": ", wire_halves_refusal(g.wire, g.choco.compress.kind)));
  // A robust aggregate: every algorithm that runs with it must take it. gossip.aggregate runs
  // with gossip.algorithm and any the sweep lists; compare.aggregates with the sweep's.
  std::vector<AlgorithmKind> runs{g.algorithm};
  runs.insert(runs.end(), cfg.compare.algorithms.begin(), cfg.compare.algorithms.end());
  const std::vector<AlgorithmKind> swept =
      cfg.compare.algorithms.empty() ? runs : cfg.compare.algorithms;
  std::vector<std::tuple<std::string, Aggregate, const std::vector<AlgorithmKind>*>> uses{
      {"gossip.aggregate", g.aggregate.kind, &runs}};
  for (std::size_t i = 0; i < cfg.compare.aggregates.size(); ++i)
    uses.emplace_back(cat("compare.aggregates[", i, "]"), cfg.compare.aggregates[i].kind, &swept);
  for (const auto& [field, kind, algorithms] : uses)
    for (AlgorithmKind a : *algorithms)
      if (const char* why = traits(a).not_robust; why && traits(kind).robust)
        throw InputError(cat(cfg.where(field), ": ", aggregate_name(kind), " is for ",
                             choice_list_if(std::span(algorithm_table()),
                                            [](const AlgorithmTraits& t) { return !t.not_robust; },
                                            "and"),
                             ", not ", algorithm_name(a), ": ", why));
  if (g.overlap && !takes(&AlgorithmTraits::overlaps))
    throw InputError(cat(cfg.where("gossip.overlap"), ": overlap is for dpsgd and local_sgd, "
                         "not ", name));
  if (cfg.sim.message_loss > 0 && takes(&AlgorithmTraits::needs_every_message)) {
    AlgorithmKind strict = g.algorithm;
    for (AlgorithmKind a : cfg.compare.algorithms)
      if (!traits(strict).needs_every_message && traits(a).needs_every_message) strict = a;
    throw InputError(cat(cfg.where("sim.message_loss"), ": ", algorithm_name(strict),
                         " needs every message (a lost one leaves the peers' copies out of "
                         "step); set message_loss to 0"));
  }
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

/// An attack entry's kind and parameter, checked once the whole entry is read: `kind` the field
/// that named it ("" when none did), `given` the fields of s, std, z and epsilon with their values.
void check_attack(const Reader& r, const Node& item, const std::string& at, Fault& fault,
                  const std::string& kind,
                  const std::vector<std::pair<std::string, double>>& given) {
  if (fault.action != FaultAction::kAttack) {
    const char* name = fault_action_name(fault.action);
    if (!kind.empty()) r.fail_at(kind, cat("kind is for attack, not ", name));
    if (!given.empty()) r.fail_at(given.front().first, cat("is for attack, not ", name));
    return;
  }
  if (fault.peers.empty()) r.fail(item, at, "an attack names at least one attacking peer");
  if (kind.empty())
    r.fail(item, at, cat("an attack needs its kind (one of: ", attack_choices(), ")"));
  const AttackTraits& t = attack_traits(fault.attack);
  fault.parameter = t.default_value;
  for (const auto& [field, value] : given) {
    const std::string key = field.substr(field.rfind('.') + 1);
    if (key != t.parameter)
      r.fail_at(field, cat("is not a parameter of ", t.name, *t.parameter
                               ? cat(" (its parameter is ", t.parameter, ")")
                               : std::string(" (it has none)")));
    fault.parameter = value;
    const bool scale = fault.attack == AttackKind::kScale;
    const bool zero_ok = fault.attack == AttackKind::kAlie;
    if (!scale && (value < 0 || (value == 0 && !zero_ok)))
      r.fail_at(field, cat("must be ", zero_ok ? ">= 0" : "> 0", ", got ", value));
  }
  if (std::isnan(fault.parameter))
    r.fail(item, at, cat(t.name, " needs its parameter ", t.parameter, " (e.g. ", t.parameter,
                         ": -4)"));
  if (fault.to_round > 0 && fault.to_round <= fault.round)
    r.fail(item, at, "an attack's to_round comes after its round");
}

/// One entry of a fault schedule, `at` its field ("faults[2]"): of faults: and of
/// compare.attacks alike, so an attack reads the same wherever it is written. The key that
/// names the peers or links is the action (fault_action_table).
Fault read_fault(const Reader& r, const Node& item, const std::string& at) {
  Fault fault;
  bool has_round = false;
  std::string kind;  // the field that named an attack's kind
  std::vector<std::pair<std::string, double>> given;  // an attack's parameter, as given
  auto peers = [&](const Node& v, const std::string& f) {
    fault.peers = r.ints(v, f);
    for (int p : fault.peers)
      if (p < 0) r.fail(v, f, cat("peer ", p, " is not a rank"));
  };
  auto links = [&](const Node& v, const std::string& f) {
    r.sequence(v, f);
    std::size_t k = 0;
    for (const Node& link : v) {
      const std::string lf = cat(f, "[", k++, "]");
      const std::vector<int> ends = r.ints(link, lf);
      if (ends.size() != 2 || ends[0] < 0 || ends[1] < 0 || ends[0] == ends[1])
        r.fail(link, lf, "a link is two different peers, e.g. [0, 1]");
      fault.links.emplace_back(ends[0], ends[1]);
    }
    if (fault.links.empty()) r.fail(v, f, cat("a ", fault_action_name(fault.action),
                                               " needs at least one link"));
  };
  auto round = [&](const Node& v, const std::string& f) {
    if (has_round) r.fail(v, f, "a fault has one round (or from_round for a cut)");
    fault.round = r.positive_int(v, f, false);
    has_round = true;
  };
  auto parameter = [&](const Node& v, const std::string& f) {
    given.emplace_back(f, r.number(v, f));
  };
  Handlers handlers{
      {"round", [&](auto& v, auto& f) { round(v, f); }},
      {"from_round", [&](auto& v, auto& f) { round(v, f); }},
      {"to_round", [&](auto& v, auto& f) { fault.to_round = r.positive_int(v, f, false); }},
      {"seconds", [&](auto& v, auto& f) { fault.seconds = r.positive(v, f, false); }},
      {"kind", [&](auto& v, auto& f) {
         const std::string name = r.text(v, f);
         for (const AttackTraits& t : attack_table())
           if (name == t.name) fault.attack = t.kind;
         if (fault.attack == AttackKind::kNone)
           r.fail(v, f, cat("unknown attack '", name, "' (expected one of: ", attack_choices(),
                            ")"));
         kind = f;
       }},
      {"s", parameter},
      {"std", parameter},
      {"z", parameter},
      {"epsilon", parameter},
  };
  for (const FaultActionTraits& row : fault_action_table())
    handlers.emplace(row.name, [&, row](const Node& v, const std::string& f) {
      if (fault.action != FaultAction::kNone)
        r.fail(v, f, cat("one action a fault: this one already says ",
                         fault_action_name(fault.action)));
      fault.action = row.kind;
      if (row.links) links(v, f);
      else peers(v, f);
    });
  r.each(item, at, handlers);
  const char* name = fault_action_name(fault.action);
  if (!has_round) r.fail(item, at, "a fault needs its round (from_round for a cut)");
  if (fault.action == FaultAction::kNone)
    r.fail(item, at, cat("a fault needs an action: ",
                         choice_list(fault_action_table())));
  if (fault.action == FaultAction::kPause && fault.seconds <= 0)
    r.fail(item, at, "a pause needs its length in seconds");
  if (fault.action != FaultAction::kPause && fault.seconds > 0)
    r.fail(item, at, cat("seconds is for pause, not ", name));
  if (fault.action == FaultAction::kCut && fault.to_round <= fault.round)
    r.fail(item, at, "a cut needs to_round after from_round");
  if (!traits(fault.action).spans && fault.to_round > 0) {
    const auto spans = [](const FaultActionTraits& t) { return t.spans; };
    std::vector<FaultActionTraits> spanning;
    for (const FaultActionTraits& t : fault_action_table())
      if (spans(t)) spanning.push_back(t);
    r.fail(item, at, cat("to_round is for ", choice_list(std::span<const FaultActionTraits>(spanning), "and"),
                         ", not ", name));
  }
  check_attack(r, item, at, fault, kind, given);
  return fault;
}

std::vector<Fault> read_faults(const Reader& r, const Node& n, const std::string& field) {
  r.sequence(n, field);
  std::vector<Fault> out;
  std::size_t i = 0;
  for (const Node& item : n) out.push_back(read_fault(r, item, cat(field, "[", i++, "]")));
  return out;
}

/// The top-level keys: a run config's sections, the fault schedule and exec.
void read_sections(const Reader& r, const Node& root, RunConfig& cfg) {
  r.each(root, "", Handlers{
      {"data", [&](auto& v, auto&) { read_data(r, v, cfg.data); }},
      {"model", [&](auto& v, auto&) { read_model(r, v, cfg.model); }},
      {"optimizer", [&](auto& v, auto&) { read_optimizer(r, v, cfg.optimizer); }},
      {"train", [&](auto& v, auto&) { read_train(r, v, cfg.train); }},
      {"gossip", [&](auto& v, auto&) { read_gossip(r, v, cfg.gossip); }},
      {"monitor", [&](auto& v, auto&) { read_monitor(r, v, cfg.monitor); }},
      {"sim", [&](auto& v, auto&) { read_sim(r, v, cfg.sim); }},
      {"net", [&](auto& v, auto&) { read_net(r, v, cfg.net); }},
      {"compare", [&](auto& v, auto&) { read_compare(r, v, cfg.compare); }},
      {"faults", [&](auto& v, auto& f) { cfg.faults = read_faults(r, v, f); }},
      {"exec", [&](auto& v, auto& f) {
         cfg.exec = r.text(v, f);
         if (cfg.exec.find_first_not_of(" \t") == std::string::npos)
           r.fail(v, f, "is empty: name the command each rank runs (e.g. python3 train.py)");
       }},
  });
}

RunConfig read(const yaml::Document& doc, const std::string& dir) {
  RunConfig cfg;
  cfg.path = doc.name();
  if (doc.empty()) throw InputError(cat(doc.name(), ": the config is empty"));
  const Reader r(doc, dir, cfg.lines);
  read_sections(r, doc.root(), cfg);
  check_model(cfg);
  check_gossip_keys(cfg);
  // net.emulate describes the links; the simulator models those same links (whatever order the
  // sections come in, and over sim.bandwidth_mbps and sim.latency_ms).
  simulate_links(cfg.sim, cfg.net.emulate);
  return cfg;
}

}  // namespace

std::vector<std::string> config_keys() {
  const auto probe = [](const char* text) { return yaml::Document::parse(text, "probe").root(); };
  const yaml::Document none = yaml::Document::parse("", "config keys");
  std::map<std::string, int> lines;
  std::set<std::string> keys;
  const Reader lister(none, lines, keys, {probe("{}"), probe("[{}]")});
  RunConfig scratch;
  read_sections(lister, none.root(), scratch);
  std::set<std::string> out;  // list items' indices as "[]": "faults[0].round" -> "faults[].round"
  const std::regex index(R"(\[[0-9]+\])");
  for (const std::string& k : keys) out.insert(std::regex_replace(k, index, "[]"));
  return {out.begin(), out.end()};
}

Aggregate parse_aggregate(const std::string& text, const std::string& what) {
  return parse_choice(aggregate_table(), text, what);
}

std::string describe(const AggregateConfig& a) {
  const AggregateTraits& row = traits(a.kind);
  std::string s = row.name;
  if (row.tau && a.tau > 0) return cat(s, ", tau ", a.tau);  // a fixed radius: b has no use
  if (row.tau) s += cat(", adaptive tau, ratio ", a.ratio);
  if (row.byzantine) s += cat(", byzantine ", a.byzantine);
  return s;
}

std::string describe_choco(const ChocoConfig& c) {
  return cat(describe(c.compress), ", gamma ", consensus_step(c),
             c.gossip_steps > 1 ? cat(", ", c.gossip_steps, " gossip steps a round") : "");
}

WireFormat parse_wire_format(const std::string& text, const std::string& what) {
  return parse_choice(wire_format_table(), text, what);
}

void check_local_steps(const RunConfig& config, double steps) {
  if (steps <= static_cast<double>(kMaxLocalSteps)) return;
  // Below 2^63 the count prints as an integer; a plan past it (a config built in code) as is.
  const std::string count = steps < 9e18 ? cat(static_cast<std::int64_t>(steps)) : cat(steps);
  throw InputError(cat(config.where("train.epochs"), ": ", config.train.epochs, " epochs plan ",
                       count, " local steps per peer, more than the ", kMaxLocalSteps,
                       " a run may take (lower train.epochs, or raise train.batch)"));
}

std::string RunConfig::where(const std::string& field) const {
  if (path.empty()) return field;
  const auto it = lines.find(field);
  return it == lines.end() ? cat(path, ": ", field) : cat(path, ":", it->second, ": ", field);
}

std::vector<Fault> load_faults(const std::string& path) {
  const RunConfig c = load_config(path);
  for (const auto& [field, line] : c.lines)
    if (field != "faults" && field.rfind("faults[", 0) != 0 && field.rfind("faults.", 0) != 0)
      throw InputError(cat(path, ":", line, ": ", field, ": a faults file holds only faults:"));
  if (c.faults.empty()) throw InputError(cat(path, ": faults: the file names no fault"));
  return c.faults;
}

RunConfig load_config_from_string(const std::string& text, const std::string& name,
                                  const std::string& dir) {
  return read(yaml::Document::parse(text, name), dir);
}

RunConfig load_config(const std::string& path) {
  const auto doc = yaml::Document::load_file(path, "config file");
  const auto dir = std::filesystem::path(path).parent_path().string();
  return read(doc, dir.empty() ? "." : dir);
}

}  // namespace gossip
