// report/prometheus.cpp: the Prometheus text exposition format (0.0.4): a registry of metric
// families a peer updates after each round, its rendering, and the merge of several peers'
// pages into one (the launcher's /metrics). Names follow Prometheus's conventions: base units
// in the name (_seconds, _bytes), counters end in _total (docs/observe.md).
#include "gossip/prometheus.hpp"

#include <charconv>
#include <cmath>

#include "gossip/core.hpp"

namespace gossip {
namespace {

/// A label value escaped as the format asks (backslash, double quote, newline).
std::string escape_label(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

/// HELP text escaped (backslash, newline).
std::string escape_help(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string label_text(const MetricLabels& labels, const std::string& extra = {}) {
  if (labels.empty() && extra.empty()) return "";
  std::string out = "{";
  for (const auto& [k, v] : labels) {
    if (out.size() > 1) out += ',';
    out += cat(k, "=\"", escape_label(v), "\"");
  }
  if (!extra.empty()) out += (out.size() > 1 ? "," : "") + extra;
  return out + "}";
}

const char* type_text(MetricType t) {
  switch (t) {
    case MetricType::kCounter: return "counter";
    case MetricType::kHistogram: return "histogram";
    case MetricType::kGauge: break;
  }
  return "gauge";
}

}  // namespace

std::string metric_value(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

void MetricsRegistry::define(const std::string& name, MetricType type, const std::string& help,
                             std::vector<double> buckets) {
  std::lock_guard lock(mutex_);
  if (families_.count(name)) return;
  Family& f = families_[name];
  f.type = type;
  f.help = help;
  f.buckets = std::move(buckets);
}

MetricsRegistry::Family& MetricsRegistry::family(const std::string& name) {
  const auto it = families_.find(name);
  GOSSIP_CHECK_MSG(it != families_.end(), cat("metric ", name, " was not defined"));
  return it->second;
}

void MetricsRegistry::set(const std::string& name, const MetricLabels& labels, double value) {
  std::lock_guard lock(mutex_);
  family(name).series[labels].value = value;
}

void MetricsRegistry::add(const std::string& name, const MetricLabels& labels, double value) {
  std::lock_guard lock(mutex_);
  family(name).series[labels].value += value;
}

void MetricsRegistry::observe(const std::string& name, const MetricLabels& labels,
                              double value) {
  std::lock_guard lock(mutex_);
  Family& f = family(name);
  Series& s = f.series[labels];
  s.bucket_counts.resize(f.buckets.size(), 0.0);
  for (std::size_t i = 0; i < f.buckets.size(); ++i)
    if (value <= f.buckets[i]) s.bucket_counts[i] += 1.0;  // cumulative: every bound above it
  s.value += value;
  s.count += 1.0;
}

void MetricsRegistry::clear(const std::string& name) {
  std::lock_guard lock(mutex_);
  family(name).series.clear();
}

std::string MetricsRegistry::text() const {
  std::lock_guard lock(mutex_);
  std::string out;
  for (const auto& [name, f] : families_) {
    out += cat("# HELP ", name, " ", escape_help(f.help), "\n# TYPE ", name, " ", type_text(f.type),
               "\n");
    for (const auto& [labels, s] : f.series) {
      if (f.type != MetricType::kHistogram) {
        out += cat(name, label_text(labels), " ", metric_value(s.value), "\n");
        continue;
      }
      for (std::size_t i = 0; i < f.buckets.size(); ++i)
        out += cat(name, "_bucket", label_text(labels, cat("le=\"", metric_value(f.buckets[i]),
                                                            "\"")),
                   " ", metric_value(i < s.bucket_counts.size() ? s.bucket_counts[i] : 0.0),
                   "\n");
      out += cat(name, "_bucket", label_text(labels, "le=\"+Inf\""), " ", metric_value(s.count),
                 "\n", name, "_sum", label_text(labels), " ", metric_value(s.value), "\n", name,
                 "_count", label_text(labels), " ", metric_value(s.count), "\n");
    }
  }
  return out;
}

std::string merge_expositions(const std::vector<Exposition>& sources, const std::string& label) {
  struct Merged {
    std::string help, type;
    std::vector<std::string> lines;
  };
  std::map<std::string, Merged> families;
  for (const Exposition& src : sources) {
    const std::string extra = cat(label, "=\"", escape_label(src.label_value), "\"");
    std::string current;  // the family the series lines belong to (the last TYPE line's)
    std::size_t at = 0;
    while (at < src.text.size()) {
      auto end = src.text.find('\n', at);
      if (end == std::string::npos) end = src.text.size();
      const std::string line = src.text.substr(at, end - at);
      at = end + 1;
      if (line.rfind("# HELP ", 0) == 0 || line.rfind("# TYPE ", 0) == 0) {
        const auto name_end = line.find(' ', 7);
        if (name_end == std::string::npos) continue;
        current = line.substr(7, name_end - 7);
        Merged& m = families[current];
        std::string& slot = line[2] == 'H' ? m.help : m.type;
        if (slot.empty()) slot = line;
        continue;
      }
      if (line.empty() || line[0] == '#' || current.empty()) continue;
      const auto brace = line.find('{');
      const auto space = line.find(' ');
      if (space == std::string::npos) continue;
      std::string series;
      if (brace != std::string::npos && brace < space)
        series = cat(line.substr(0, brace + 1), extra, ",", line.substr(brace + 1));
      else
        series = cat(line.substr(0, space), "{", extra, "}", line.substr(space));
      families[current].lines.push_back(series);
    }
  }
  std::string out;
  for (const auto& [name, m] : families) {
    if (!m.help.empty()) out += m.help + "\n";
    if (!m.type.empty()) out += m.type + "\n";
    for (const auto& l : m.lines) out += l + "\n";
  }
  return out;
}

}  // namespace gossip
