// report/metrics_read.cpp: reads back the metrics.csv that RunRecord writes (for gossip plot), and
// refuses anything else with the file and line of the first problem.
#include <cerrno>
#include <cstdlib>
#include <fstream>

#include "gossip/core.hpp"
#include "gossip/report.hpp"

namespace gossip {

std::vector<std::string> split_csv_line(const std::string& line) {
  std::vector<std::string> out;
  std::size_t from = 0;
  for (;;) {
    const auto comma = line.find(',', from);
    out.push_back(line.substr(from, comma - from));
    if (comma == std::string::npos) return out;
    from = comma + 1;
  }
}

namespace {

double number(const std::string& text, const std::string& where, const char* column) {
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || errno == ERANGE)
    throw InputError(cat(where, ": ", column, ": expected a number, got '", text, "'"));
  return v;
}

}  // namespace

MetricsRow parse_metrics_row(const std::string& line, const std::string& where) {
  const auto f = split_csv_line(line);
  if (f.size() != 8)
    throw InputError(cat(where, ": expected 8 comma-separated values, got ", f.size()));
  MetricsRow r;
  r.round = static_cast<std::int64_t>(number(f[0], where, "round"));
  r.epoch = number(f[1], where, "epoch");
  r.peer = static_cast<int>(number(f[2], where, "peer"));
  r.loss = number(f[3], where, "loss");
  r.test_accuracy = number(f[4], where, "test_accuracy");
  r.consensus_distance = number(f[5], where, "consensus_distance");
  r.bytes_sent = static_cast<std::uint64_t>(number(f[6], where, "bytes_sent"));
  r.seconds = number(f[7], where, "seconds");
  if (r.peer < -1) throw InputError(cat(where, ": peer: ", r.peer, " is not a peer id or -1"));
  return r;
}

std::vector<MetricsRow> read_metrics(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError(cat(path, ": cannot open"));
  std::string line;
  if (!std::getline(in, line) || line != kMetricsHeader)
    throw InputError(cat(path, ":1: expected the header '", kMetricsHeader, "'"));
  std::vector<MetricsRow> rows;
  for (int n = 2; std::getline(in, line); ++n)
    if (!line.empty()) rows.push_back(parse_metrics_row(line, cat(path, ":", n)));
  return rows;
}

}  // namespace gossip
