// report/tensorboard.cpp: TensorBoard event files from metrics rows. The `Event` and `Summary`
// protobufs (tensorflow/core/util/event.proto, framework/summary.proto) are few fields, encoded
// by hand here: varint keys and lengths, a little-endian double and float;
// tests/python/test_tensorboard.py parses the files with the protobuf library and checks every
// CRC.
#include "gossip/tensorboard.hpp"

#include <array>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "gossip/core.hpp"
#include "gossip/report.hpp"

namespace gossip {
namespace {

constexpr std::array<std::uint32_t, 256> make_crc32c_table() {
  std::array<std::uint32_t, 256> t{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    t[i] = c;
  }
  return t;
}
constexpr auto kCrc32cTable = make_crc32c_table();

void varint(std::string& out, std::uint64_t v) {
  while (v >= 0x80) {
    out += static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  out += static_cast<char>(v);
}

template <typename T>
void little_endian(std::string& out, T v) {
  char b[sizeof v];
  std::memcpy(b, &v, sizeof v);  // x86-64 and every target gossip builds for are little-endian
  out.append(b, sizeof v);
}

/// A length-delimited field: key (field << 3 | 2), length, bytes.
void bytes_field(std::string& out, int field, std::string_view bytes) {
  varint(out, static_cast<std::uint64_t>(field) << 3 | 2);
  varint(out, bytes.size());
  out += bytes;
}

/// wall_time (field 1, double) and step (field 2, int64) of an Event.
std::string event_head(double wall_time, std::int64_t step) {
  std::string e;
  e += static_cast<char>(1 << 3 | 1);
  little_endian(e, wall_time);
  if (step != 0) {
    e += static_cast<char>(2 << 3 | 0);
    varint(e, static_cast<std::uint64_t>(step));
  }
  return e;
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

std::uint32_t crc32c(std::string_view data, std::uint32_t crc) {
  crc = ~crc;
  for (unsigned char c : data) crc = kCrc32cTable[(crc ^ c) & 0xff] ^ (crc >> 8);
  return ~crc;
}

std::uint32_t masked_crc32c(std::string_view data) {
  const std::uint32_t crc = crc32c(data);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

std::string scalar_event(double wall_time, std::int64_t step, std::string_view tag, float value) {
  std::string v;  // Summary.Value: tag (1, string), simple_value (2, float)
  bytes_field(v, 1, tag);
  v += static_cast<char>(2 << 3 | 5);
  little_endian(v, value);
  std::string summary;  // Summary: value (1, repeated Value)
  bytes_field(summary, 1, v);
  std::string e = event_head(wall_time, step);
  bytes_field(e, 5, summary);  // Event.summary
  return e;
}

std::string version_event(double wall_time) {
  std::string e = event_head(wall_time, 0);
  bytes_field(e, 3, "brain.Event:2");  // Event.file_version
  return e;
}

std::string tf_record(std::string_view event) {
  std::string r;
  std::string length;
  little_endian(length, static_cast<std::uint64_t>(event.size()));
  r += length;
  little_endian(r, masked_crc32c(length));
  r += event;
  little_endian(r, masked_crc32c(event));
  return r;
}

std::ofstream& TensorBoardWriter::file(int peer) {
  auto it = files_.find(peer);
  if (it != files_.end()) return it->second;
  const std::string run = peer < 0 ? std::string("average") : cat("peer_", peer);
  const std::string folder = cat(dir_, "/tensorboard/", run);
  std::error_code ec;
  std::filesystem::create_directories(folder, ec);
  if (ec) throw InputError(cat(folder, ": cannot create the directory: ", ec.message()));
  const double t = now_seconds();
  const std::string path =
      cat(folder, "/events.out.tfevents.", static_cast<std::int64_t>(t), ".gossip");
  std::ofstream& out = files_[peer];
  out.open(path, std::ios::binary | std::ios::trunc);
  if (!out) throw InputError(cat(path, ": cannot open for writing"));
  out << tf_record(version_event(t));
  return out;
}

void TensorBoardWriter::write(const MetricsRow& row) {
  std::ofstream& out = file(row.peer);
  const double t = now_seconds();
  double per_round = NAN;
  if (auto p = previous_.find(row.peer); p != previous_.end() && row.round > p->second.first)
    per_round =
        (row.seconds - p->second.second) / static_cast<double>(row.round - p->second.first);
  previous_[row.peer] = {row.round, row.seconds};
  const std::pair<const char*, double> scalars[] = {
      {"loss", row.loss},
      {"test_accuracy", row.test_accuracy},
      {"consensus_distance", row.peer < 0 ? row.consensus_distance : NAN},
      {"bytes_sent", static_cast<double>(row.bytes_sent)},
      {"seconds", row.seconds},
      {"epoch", row.epoch},
      {"seconds_per_round", per_round}};
  for (const auto& [tag, value] : scalars)
    if (!std::isnan(value))
      out << tf_record(scalar_event(t, row.round, tag, static_cast<float>(value)));
  if (!out) throw RuntimeError(cat(dir_, "/tensorboard: write failed"));
}

void TensorBoardWriter::flush() {
  for (auto& [peer, f] : files_) f.flush();
}

}  // namespace gossip
