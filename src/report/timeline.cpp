// report/timeline.cpp: a peer's per-round timeline, its sums per phase, and its Chrome trace.
#include "gossip/timeline.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <utility>

#include "gossip/core.hpp"

namespace gossip {

namespace {

constexpr const char* kNames[kPhaseCount] = {"setup", "compute", "compress", "send", "wait",
                                             "mix", "evaluate", "checkpoint", "monitor",
                                             "finish", "encrypt"};

constexpr const char* kOverlapNames[kOverlapPartCount] = {"copy", "copy_wait", "exposed"};
constexpr std::uint8_t kFirstOverlap = kPhaseCount + 1;

double wall_total(const PhaseSeconds& s) {
  double total = 0.0;
  for (std::size_t i = 0; i < kWallPhaseCount; ++i) total += s[i];
  return total;
}

std::string shortest(double v) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

/// Microseconds as trace viewers like them: plain decimals ("1900000", "12.5"), never exponents.
std::string micros(double us) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, us, std::chars_format::fixed);
  return std::string(buf, r.ptr);
}

}  // namespace

std::string format_phase_seconds(const PhaseSeconds& s) {
  std::string out;
  for (std::size_t i = 0; i < kPhaseCount; ++i) {
    if (i) out += ',';
    out += kNames[i];
    out += ':';
    out += shortest(s[i]);
  }
  return out;
}

PhaseSeconds parse_phase_seconds(const std::string& text) {
  PhaseSeconds s{};
  std::size_t pos = 0;
  std::size_t seen = 0;
  while (pos < text.size()) {
    const std::size_t comma = std::min(text.find(',', pos), text.size());
    const std::string item = text.substr(pos, comma - pos);
    const std::size_t colon = item.find(':');
    const std::string name = item.substr(0, colon);
    const auto* at = std::find_if(std::begin(kNames), std::end(kNames),
                                  [&](const char* n) { return name == n; });
    double v = 0.0;
    const char* first = item.data() + (colon == std::string::npos ? item.size() : colon + 1);
    const auto r = std::from_chars(first, item.data() + item.size(), v);
    if (colon == std::string::npos || at == std::end(kNames) || r.ec != std::errc() ||
        r.ptr != item.data() + item.size() || !(v >= 0))
      throw InputError(cat("phase seconds: expected name:seconds with a phase name (",
                           format_phase_seconds({}), "), got '", item, "'"));
    s[static_cast<std::size_t>(at - std::begin(kNames))] = v;
    ++seen;
    pos = comma + 1;
  }
  if (seen != kPhaseCount)
    throw InputError(cat("phase seconds: expected all ", kPhaseCount, " phases, got ", seen));
  return s;
}

const char* phase_name(std::size_t index) {
  GOSSIP_CHECK_MSG(index < kPhaseCount, cat("phase ", index, " out of range"));
  return kNames[index];
}

JsonObject phase_json(const PhaseSeconds& s) {
  JsonObject o;
  for (std::size_t i = 0; i < kPhaseCount; ++i) o.add(kNames[i], s[i]);
  return o;
}

JsonObject phase_share_json(const PhaseSeconds& s) {
  const double total = wall_total(s);
  JsonObject o;
  for (std::size_t i = 0; i < kPhaseCount; ++i) o.add(kNames[i], total > 0 ? s[i] / total : 0.0);
  return o;
}

const char* overlap_part_name(std::size_t index) {
  GOSSIP_CHECK_MSG(index < kOverlapPartCount, cat("overlap part ", index, " out of range"));
  return kOverlapNames[index];
}

OverlapPart parse_overlap_part(const std::string& name) {
  for (std::size_t i = 0; i < kOverlapPartCount; ++i)
    if (name == kOverlapNames[i]) return static_cast<OverlapPart>(i);
  throw InputError(cat("overlap part '", name, "': expected copy, copy_wait or exposed"));
}

std::string phase_table(const std::vector<std::pair<std::string, PhaseSeconds>>& rows) {
  std::string out = cat(std::string(6, ' '));
  char buf[64];
  for (const char* n : kNames) {
    std::snprintf(buf, sizeof buf, " %9s", n);
    out += buf;
  }
  out += "   seconds\n";
  for (const auto& [label, s] : rows) {
    const double total = wall_total(s);
    std::snprintf(buf, sizeof buf, "%6s", label.c_str());
    out += buf;
    for (double v : s) {
      std::snprintf(buf, sizeof buf, " %8.1f%%", total > 0 ? 100.0 * v / total : 0.0);
      out += buf;
    }
    std::snprintf(buf, sizeof buf, " %9.2f\n", total);
    out += buf;
  }
  return out;
}

Timeline::Timeline(int peer, std::function<double()> clock)
    : peer_(peer), clock_(std::move(clock)) {}

void Timeline::keep(const Span& s) {
  if (s.phase < kWallPhaseCount || s.phase == kPhaseCount) {
    if (first_ < 0 || s.start < first_) first_ = s.start;
    last_ = std::max(last_, s.end);
  }
  if (s.phase < kPhaseCount) seconds_[s.phase] += s.end - s.start;
  if (spans_.size() < kMaxEvents) spans_.push_back(s);
  else ++dropped_;
}

void Timeline::add(Phase phase, double start, double end) {
  const Span s{start, std::max(start, end), round_, static_cast<std::uint8_t>(phase)};
  if (phase == Phase::kEncrypt) keep(Span{s.start, s.end, -1, s.phase});
  else if (round_ >= 0) inner_.push_back(s);
  else keep(s);
}

void Timeline::add_overlap(OverlapPart part, double start, double end, std::int64_t round) {
  const auto k = static_cast<std::size_t>(part);
  GOSSIP_CHECK_MSG(k < kOverlapPartCount, cat("overlap part ", k, " out of range"));
  overlap_seconds_[k] += std::max(0.0, end - start);
  if (round != last_overlap_round_) ++overlap_rounds_;
  last_overlap_round_ = round;
  keep(Span{start, std::max(start, end), round, static_cast<std::uint8_t>(kFirstOverlap + k)});
}

void Timeline::begin_round(std::int64_t round) {
  round_ = round;
  round_start_ = now();
  mixing_from_ = -1.0;
  inner_.clear();
}

void Timeline::mixing() { mixing_from_ = now(); }

void Timeline::end_round() {
  if (round_ < 0) return;
  const double end = std::max(round_start_, now());
  const double mid = mixing_from_ < 0 ? end : std::clamp(mixing_from_, round_start_, end);
  // The inner spans in time order; the gaps they leave become compress (local phase) or mix.
  std::sort(inner_.begin(), inner_.end(),
            [](const Span& a, const Span& b) { return a.start < b.start; });
  std::vector<Span> all;
  double at = round_start_;
  auto fill = [&](double until) {  // [at, until) is uncovered: split it at mid
    if (at < std::min(until, mid))
      all.push_back(Span{at, std::min(until, mid), round_, static_cast<std::uint8_t>(Phase::kCompress)});
    if (std::max(at, mid) < until)
      all.push_back(Span{std::max(at, mid), until, round_, static_cast<std::uint8_t>(Phase::kMix)});
    at = std::max(at, until);
  };
  for (Span s : inner_) {
    if (!all.empty() && s.start < at && s.end <= at && s.start >= all.back().start) {
      // Within the last span (a message sent during a step, on a GPU): that span is split
      // around it, so its time counts once, as this phase.
      const Span outer = all.back();
      all.pop_back();
      if (s.start > outer.start) all.push_back(Span{outer.start, s.start, round_, outer.phase});
      if (s.end > s.start) all.push_back(s);
      if (outer.end > s.end) all.push_back(Span{s.end, outer.end, round_, outer.phase});
      continue;
    }
    s.start = std::clamp(s.start, at, end);  // else inner spans never overlap nor leave the round
    s.end = std::clamp(s.end, s.start, end);
    fill(s.start);
    if (s.end > s.start) all.push_back(s);
    at = std::max(at, s.end);
  }
  fill(end);
  keep(Span{round_start_, end, round_, static_cast<std::uint8_t>(kPhaseCount)});
  for (const Span& s : all) keep(s);
  inner_.clear();
  round_ = -1;
}

void Timeline::write(const std::string& path) const {
  std::ofstream out(path, std::ios::trunc);
  if (!out) throw RuntimeError(cat(path, ": cannot open for writing"));
  // Microseconds from the first span, so the numbers stay short and exact enough.
  const double origin = first_ < 0 ? 0.0 : first_;
  auto us = [&](double s) { return micros(std::round((s - origin) * 1e9) / 1e3); };
  out << "{\"displayTimeUnit\": \"ms\", \"otherData\": {\"peer\": " << peer_
      << ", \"dropped_spans\": " << dropped_ << "}, \"traceEvents\": [\n";
  out << "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": " << peer_
      << ", \"tid\": 0, \"args\": {\"name\": \"peer " << peer_ << "\"}}";
  out << ",\n{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": " << peer_
      << ", \"tid\": 0, \"args\": {\"name\": \"rounds\"}}";
  out << ",\n{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": " << peer_
      << ", \"tid\": 1, \"args\": {\"name\": \"transport: TLS records\"}}";
  if (overlap_rounds_ > 0)
    out << ",\n{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": " << peer_
        << ", \"tid\": 2, \"args\": {\"name\": \"caller: overlapped rounds\"}}";
  for (const Span& s : spans_) {
    const bool is_round = s.phase == kPhaseCount;
    const bool overlap = s.phase >= kFirstOverlap;
    const int tid = overlap ? 2 : s.phase == static_cast<std::uint8_t>(Phase::kEncrypt) ? 1 : 0;
    const std::string name = is_round ? cat("round ", s.round)
                             : overlap ? kOverlapNames[s.phase - kFirstOverlap]
                                       : kNames[s.phase];
    out << ",\n{\"name\": \"" << name << "\", \"cat\": \""
        << (is_round ? "round" : overlap ? "overlap" : kNames[s.phase])
        << "\", \"ph\": \"X\", \"ts\": " << us(s.start)
        << ", \"dur\": " << micros(std::round((s.end - s.start) * 1e9) / 1e3)
        << ", \"pid\": " << peer_ << ", \"tid\": " << tid << ", \"args\": {\"round\": "
        << s.round << "}}";
  }
  out << "\n]}\n";
  if (!out) throw RuntimeError(cat(path, ": write failed"));
}

}  // namespace gossip
