/// prometheus: a run's live figures in the Prometheus text exposition format (version 0.0.4),
/// what a peer serves at /metrics and writes to DIR/peers/R/metrics.prom when it finishes, and
/// the merge of the peers' pages that `gossip run` serves for the whole run
/// (docs/observe.md lists every metric).
#pragma once
#if !defined(GOSSIP_ROOM_REPORT)
#error "gossip/prometheus.hpp belongs to room report, which this room does not use (see the room table in meson.build)"
#endif

#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace gossip {

enum class MetricType { kCounter, kGauge, kHistogram };

/// Label names and values of one series, in the order given.
using MetricLabels = std::vector<std::pair<std::string, std::string>>;

/// Metric families and their series. Thread-safe: a peer's thread updates it after each round
/// while the HTTP server's thread renders it.
class MetricsRegistry {
 public:
  /// Declares a family (once; later calls with the same name are ignored). `buckets`: a
  /// histogram's upper bounds, ascending (+Inf is added).
  void define(const std::string& name, MetricType type, const std::string& help,
              std::vector<double> buckets = {});
  /// Sets a counter or gauge series to `value` (a counter from a running total kept elsewhere).
  void set(const std::string& name, const MetricLabels& labels, double value);
  /// Adds `value` to a counter or gauge series.
  void add(const std::string& name, const MetricLabels& labels, double value);
  /// Records one observation of a histogram series.
  void observe(const std::string& name, const MetricLabels& labels, double value);
  /// Drops every series of a family (a gauge whose label set changes, such as member states).
  void clear(const std::string& name);
  /// The exposition text: each family's HELP and TYPE, then its series in label order.
  std::string text() const;

 private:
  struct Series {
    double value = 0.0;               // counter, gauge; a histogram's sum
    std::vector<double> bucket_counts;  // histogram: cumulative at render
    double count = 0.0;
  };
  struct Family {
    MetricType type = MetricType::kGauge;
    std::string help;
    std::vector<double> buckets;
    std::map<MetricLabels, Series> series;
  };
  Family& family(const std::string& name);
  mutable std::mutex mutex_;
  std::map<std::string, Family> families_;
};

/// One source's exposition text for merge_expositions: each of its series gets the label
/// `label`="value" (a peer's page gets peer="3").
struct Exposition {
  std::string label_value;
  std::string text;
};

/// The expositions as one page: each family once (its HELP and TYPE from the first source that
/// has it), every source's series under it with `label` added. Lines that are not HELP, TYPE or
/// a series are dropped; a source's text is trusted to be this writer's own.
std::string merge_expositions(const std::vector<Exposition>& sources, const std::string& label);

/// A sample value as the text format writes it: integers without a fraction, +Inf, -Inf, NaN.
std::string metric_value(double v);

}  // namespace gossip
