// config/load_config.cpp: run-config YAML -> RunConfig. Every key is checked against the fields
// its section knows (unknown and repeated keys are errors), every value against its type and
// range (numbers must be finite), and each problem names the file and line
// ("configs/x.yaml:7: optimizer.lr: must be > 0, got -1"). The line of every field read is kept
// in RunConfig::lines, so checks made later (config + topology) can name it too. Each section
// has its reader in a file of its own (src/config/sections.hpp); this file reads the top level.
#include <filesystem>
#include <map>
#include <regex>
#include <set>

#include "src/config/sections.hpp"

namespace gossip {
namespace {

using namespace sections;

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

void check_local_steps(const RunConfig& config, double steps) {
  if (steps <= static_cast<double>(kMaxLocalSteps)) return;
  // Below 2^63 the count prints as an integer; a plan past it (a config built in code) as is.
  const std::string count = steps < 9e18 ? cat(static_cast<std::int64_t>(steps)) : cat(steps);
  throw InputError(cat(config.where("train.epochs"), ": ", config.train.epochs, " epochs plan ",
                       count, " local steps per peer, more than the ", kMaxLocalSteps,
                       " a run may take (lower train.epochs, or raise train.batch)"));
}

namespace {

bool is_faults_field(const std::string& field) {
  return field == "faults" || field.rfind("faults[", 0) == 0 || field.rfind("faults.", 0) == 0;
}

/// A faults file read and checked: only faults: in it, and at least one.
RunConfig read_faults_file(const std::string& path) {
  RunConfig c = load_config(path);
  for (const auto& [field, line] : c.lines)
    if (!is_faults_field(field))
      throw InputError(cat(path, ":", line, ": ", field, ": a faults file holds only faults:"));
  if (c.faults.empty()) throw InputError(cat(path, ": faults: the file names no fault"));
  return c;
}

}  // namespace

std::string RunConfig::where(const std::string& field) const {
  // The schedule of a --faults FILE is that file's: its entries' lines are its own.
  const std::string& file = !faults_path.empty() && is_faults_field(field) ? faults_path : path;
  if (file.empty()) return field;
  const auto it = lines.find(field);
  return it == lines.end() ? cat(file, ": ", field) : cat(file, ":", it->second, ": ", field);
}

void use_faults_file(RunConfig& config, const std::string& path) {
  RunConfig c = read_faults_file(path);
  std::erase_if(config.lines, [](const auto& kv) { return is_faults_field(kv.first); });
  config.lines.insert(c.lines.begin(), c.lines.end());
  config.faults = std::move(c.faults);
  config.faults_path = path;
}

std::vector<Fault> load_faults(const std::string& path) {
  const RunConfig c = read_faults_file(path);
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
