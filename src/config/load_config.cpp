// config/load_config.cpp: run-config YAML -> RunConfig. Every key is checked against the fields
// its section knows, every value against its type and range, and each problem names the file and
// line ("configs/x.yaml:7: optimizer.lr: must be > 0, got -1").
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <functional>
#include <map>

#include "gossip/config.hpp"
#include "gossip/core.hpp"

namespace gossip {
namespace {

class Reader {
 public:
  Reader(std::string name, std::string dir) : name_(std::move(name)), dir_(std::move(dir)) {}

  [[noreturn]] void fail(const YAML::Node& node, const std::string& field,
                         const std::string& what) const {
    const int line = node.Mark().line >= 0 ? node.Mark().line + 1 : 0;
    throw InputError(cat(name_, ":", line, ": ", field, ": ", what));
  }

  template <typename T>
  T get(const YAML::Node& node, const std::string& field) const {
    if (!node.IsScalar()) fail(node, field, "expected a single value");
    try {
      return node.as<T>();
    } catch (const YAML::Exception&) {
      fail(node, field, cat("cannot read '", node.Scalar(), "' as ", type_name<T>()));
    }
  }

  template <typename T>
  std::vector<T> get_list(const YAML::Node& node, const std::string& field) const {
    if (node.IsScalar()) return {get<T>(node, field)};
    if (!node.IsSequence()) fail(node, field, "expected a list");
    std::vector<T> out;
    for (std::size_t i = 0; i < node.size(); ++i)
      out.push_back(get<T>(node[i], cat(field, "[", i, "]")));
    return out;
  }

  std::string path(const YAML::Node& node, const std::string& field) const {
    std::filesystem::path p = get<std::string>(node, field);
    if (p.is_relative()) p = std::filesystem::path(dir_) / p;
    return p.lexically_normal().string();
  }

  double positive(const YAML::Node& node, const std::string& field, bool allow_zero) const {
    double v = get<double>(node, field);
    if (v < 0 || (!allow_zero && v == 0))
      fail(node, field, cat("must be ", allow_zero ? ">= 0" : "> 0", ", got ", v));
    return v;
  }

  int positive_int(const YAML::Node& node, const std::string& field, bool allow_zero) const {
    long v = get<long>(node, field);
    if (v < 0 || (!allow_zero && v == 0) || v > 1'000'000'000)
      fail(node, field, cat("must be ", allow_zero ? ">= 0" : "> 0", ", got ", v));
    return static_cast<int>(v);
  }

  std::string choice(const YAML::Node& node, const std::string& field,
                     std::initializer_list<const char*> allowed) const {
    std::string v = get<std::string>(node, field);
    std::string list;
    for (const char* a : allowed) {
      if (v == a) return v;
      list += (list.empty() ? "" : ", ") + std::string(a);
    }
    fail(node, field, cat("unknown value '", v, "' (expected one of: ", list, ")"));
  }

  /// Calls the handler of each key in `section`; unknown keys are errors.
  void each(const YAML::Node& section, const std::string& prefix,
            const std::map<std::string, std::function<void(const YAML::Node&, const std::string&)>>&
                handlers) const {
    if (!section.IsMap()) fail(section, prefix, "expected a mapping of keys to values");
    for (const auto& kv : section) {
      const std::string key = kv.first.as<std::string>();
      auto it = handlers.find(key);
      const std::string field = prefix.empty() ? key : prefix + "." + key;
      if (it == handlers.end()) {
        std::string known;
        for (const auto& [k, _] : handlers) known += (known.empty() ? "" : ", ") + k;
        fail(kv.first, field, cat("unknown key (known here: ", known, ")"));
      }
      it->second(kv.second, field);
    }
  }

 private:
  template <typename T>
  static const char* type_name() {
    if constexpr (std::is_same_v<T, bool>) return "true/false";
    else if constexpr (std::is_integral_v<T>) return "an integer";
    else if constexpr (std::is_floating_point_v<T>) return "a number";
    else return "text";
  }

  std::string name_;
  std::string dir_;
};

using Handlers = std::map<std::string, std::function<void(const YAML::Node&, const std::string&)>>;

void read_data(const Reader& r, const YAML::Node& n, DataConfig& d) {
  r.each(n, "data", Handlers{
      {"train_images", [&](auto& v, auto& f) { d.train_images = r.path(v, f); }},
      {"train_labels", [&](auto& v, auto& f) { d.train_labels = r.path(v, f); }},
      {"test_images", [&](auto& v, auto& f) { d.test_images = r.path(v, f); }},
      {"test_labels", [&](auto& v, auto& f) { d.test_labels = r.path(v, f); }},
      {"classes", [&](auto& v, auto& f) { d.classes = r.positive_int(v, f, false); }},
      {"normalize", [&](auto& v, auto& f) { d.normalize = r.get<bool>(v, f); }},
      {"limit_train", [&](auto& v, auto& f) { d.limit_train = r.positive_int(v, f, true); }},
      {"shard", [&](auto& v, auto& f) { d.shard = r.choice(v, f, {"iid", "dirichlet", "shards"}); }},
      {"alpha", [&](auto& v, auto& f) { d.alpha = r.positive(v, f, false); }},
      {"shards_per_peer", [&](auto& v, auto& f) { d.shards_per_peer = r.positive_int(v, f, false); }},
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

void read_optimizer(const Reader& r, const YAML::Node& n, OptimizerConfig& o) {
  r.each(n, "optimizer", Handlers{
      {"lr", [&](auto& v, auto& f) { o.lr = r.positive(v, f, false); }},
      {"momentum", [&](auto& v, auto& f) {
         o.momentum = r.positive(v, f, true);
         if (o.momentum >= 1) r.fail(v, f, cat("must be below 1, got ", o.momentum));
       }},
      {"nesterov", [&](auto& v, auto& f) { o.nesterov = r.get<bool>(v, f); }},
      {"weight_decay", [&](auto& v, auto& f) { o.weight_decay = r.positive(v, f, true); }},
      {"schedule", [&](auto& v, auto& f) { o.schedule = r.choice(v, f, {"constant", "step", "cosine"}); }},
      {"warmup_epochs", [&](auto& v, auto& f) { o.warmup_epochs = r.positive(v, f, true); }},
      {"step_epochs", [&](auto& v, auto& f) { o.step_epochs = r.positive(v, f, false); }},
      {"gamma", [&](auto& v, auto& f) { o.gamma = r.positive(v, f, false); }},
      {"min_lr", [&](auto& v, auto& f) { o.min_lr = r.positive(v, f, true); }},
  });
}

void read_train(const Reader& r, const YAML::Node& n, TrainConfig& t) {
  r.each(n, "train", Handlers{
      {"epochs", [&](auto& v, auto& f) { t.epochs = r.positive(v, f, false); }},
      {"batch", [&](auto& v, auto& f) { t.batch = r.positive_int(v, f, false); }},
      {"seed", [&](auto& v, auto& f) { t.seed = r.get<std::uint64_t>(v, f); }},
      {"backend", [&](auto& v, auto& f) { t.backend = r.choice(v, f, {"auto", "cpu", "cuda"}); }},
      {"threads", [&](auto& v, auto& f) { t.threads = r.positive_int(v, f, false); }},
      {"evals_per_epoch", [&](auto& v, auto& f) { t.evals_per_epoch = r.positive_int(v, f, false); }},
      {"eval_batch", [&](auto& v, auto& f) { t.eval_batch = r.positive_int(v, f, false); }},
      {"eval_limit", [&](auto& v, auto& f) { t.eval_limit = r.positive_int(v, f, true); }},
      {"same_init", [&](auto& v, auto& f) { t.same_init = r.get<bool>(v, f); }},
  });
}

void read_gossip(const Reader& r, const YAML::Node& n, GossipConfig& g) {
  r.each(n, "gossip", Handlers{
      {"topology", [&](auto& v, auto& f) { g.topology = r.path(v, f); }},
      {"algorithm", [&](auto& v, auto& f) {
         g.algorithm = r.choice(v, f, {"dpsgd", "local_sgd", "push_sum", "async"});
       }},
      {"period", [&](auto& v, auto& f) { g.period = r.positive_int(v, f, false); }},
      {"max_staleness", [&](auto& v, auto& f) { g.max_staleness = r.positive_int(v, f, true); }},
      {"round_timeout_s", [&](auto& v, auto& f) { g.round_timeout_s = r.positive(v, f, false); }},
  });
}

void read_sim(const Reader& r, const YAML::Node& n, SimConfig& s) {
  r.each(n, "sim", Handlers{
      {"workers", [&](auto& v, auto& f) { s.workers = r.positive_int(v, f, true); }},
      {"latency_ms", [&](auto& v, auto& f) { s.latency_ms = r.positive(v, f, true); }},
      {"bandwidth_mbps", [&](auto& v, auto& f) { s.bandwidth_mbps = r.positive(v, f, false); }},
      {"step_ms", [&](auto& v, auto& f) { s.step_ms = r.positive(v, f, true); }},
      {"stragglers", [&](auto& v, auto& f) { s.stragglers = r.get_list<int>(v, f); }},
      {"straggler_factor", [&](auto& v, auto& f) { s.straggler_factor = r.positive(v, f, false); }},
      {"message_loss", [&](auto& v, auto& f) {
         s.message_loss = r.positive(v, f, true);
         if (s.message_loss >= 1) r.fail(v, f, "must be below 1");
       }},
      {"consensus_only", [&](auto& v, auto& f) { s.consensus_only = r.get<bool>(v, f); }},
      {"consensus_dim", [&](auto& v, auto& f) { s.consensus_dim = r.positive_int(v, f, false); }},
      {"consensus_rounds", [&](auto& v, auto& f) { s.consensus_rounds = r.positive_int(v, f, false); }},
      {"peer_eval_limit", [&](auto& v, auto& f) { s.peer_eval_limit = r.positive_int(v, f, true); }},
  });
}

void read_net(const Reader& r, const YAML::Node& n, NetworkConfig& c) {
  r.each(n, "net", Handlers{
      {"run_id", [&](auto& v, auto& f) { c.run_id = r.get<std::string>(v, f); }},
      {"host", [&](auto& v, auto& f) { c.host = r.get<std::string>(v, f); }},
      {"base_port", [&](auto& v, auto& f) {
         c.base_port = r.positive_int(v, f, false);
         if (c.base_port > 65000) r.fail(v, f, cat("must be at most 65000, got ", c.base_port));
       }},
      {"connect_timeout_s", [&](auto& v, auto& f) { c.connect_timeout_s = r.positive(v, f, false); }},
      {"shared_memory", [&](auto& v, auto& f) { c.shared_memory = r.get<bool>(v, f); }},
  });
}

void read_compare(const Reader& r, const YAML::Node& n, CompareConfig& c) {
  r.each(n, "compare", Handlers{
      {"topologies", [&](auto& v, auto& f) {
         for (auto& s : r.get_list<std::string>(v, f)) {
           YAML::Node tmp(s);
           c.topologies.push_back(r.path(tmp, f));
         }
       }},
      {"algorithms", [&](auto& v, auto& f) { c.algorithms = r.get_list<std::string>(v, f); }},
      {"periods", [&](auto& v, auto& f) { c.periods = r.get_list<int>(v, f); }},
      {"shards", [&](auto& v, auto& f) { c.shards = r.get_list<std::string>(v, f); }},
      {"seeds", [&](auto& v, auto& f) { c.seeds = r.get_list<std::uint64_t>(v, f); }},
      {"target_accuracy", [&](auto& v, auto& f) { c.target_accuracy = r.positive(v, f, false); }},
  });
}

RunConfig read(const YAML::Node& root, const std::string& name, const std::string& dir) {
  Reader r(name, dir);
  RunConfig cfg;
  cfg.path = name;
  if (!root.IsDefined() || root.IsNull()) throw InputError(cat(name, ": the config is empty"));
  r.each(root, "", Handlers{
      {"data", [&](auto& v, auto&) { read_data(r, v, cfg.data); }},
      {"model", [&](auto& v, auto& f) {
         r.each(v, f, Handlers{{"layers", [&](auto& x, auto& g) {
                  cfg.model.layers = r.get_list<int>(x, g);
                  if (cfg.model.layers.size() < 2) r.fail(x, g, "need at least input and output sizes");
                  for (int s : cfg.model.layers)
                    if (s <= 0) r.fail(x, g, cat("sizes must be positive, got ", s));
                }}});
       }},
      {"optimizer", [&](auto& v, auto&) { read_optimizer(r, v, cfg.optimizer); }},
      {"train", [&](auto& v, auto&) { read_train(r, v, cfg.train); }},
      {"gossip", [&](auto& v, auto&) { read_gossip(r, v, cfg.gossip); }},
      {"sim", [&](auto& v, auto&) { read_sim(r, v, cfg.sim); }},
      {"net", [&](auto& v, auto&) { read_net(r, v, cfg.net); }},
      {"compare", [&](auto& v, auto&) { read_compare(r, v, cfg.compare); }},
  });
  if (cfg.data.synthetic && cfg.model.layers.front() != cfg.data.synthetic_dim)
    throw InputError(cat(name, ": model.layers: input size ", cfg.model.layers.front(),
                         " does not match data.synthetic.dim ", cfg.data.synthetic_dim));
  if (cfg.model.layers.back() != cfg.data.classes)
    throw InputError(cat(name, ": model.layers: output size ", cfg.model.layers.back(),
                         " does not match the ", cfg.data.classes, " classes of the data"));
  return cfg;
}

}  // namespace

RunConfig load_config_from_string(const std::string& text, const std::string& name,
                                  const std::string& dir) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    throw InputError(cat(name, ":", e.mark.line + 1, ": not valid YAML: ", e.msg));
  }
  return read(root, name, dir);
}

RunConfig load_config(const std::string& path) {
  YAML::Node root;
  if (!std::filesystem::is_regular_file(path))
    throw InputError(cat(path, ": no such config file"));
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::ParserException& e) {
    throw InputError(cat(path, ":", e.mark.line + 1, ": not valid YAML: ", e.msg));
  } catch (const YAML::Exception& e) {
    throw InputError(cat(path, ": cannot read: ", e.what()));
  }
  const auto dir = std::filesystem::path(path).parent_path().string();
  return read(root, path, dir.empty() ? "." : dir);
}

}  // namespace gossip
