/// tensorboard: a run's metrics rows as TensorBoard event files, DIR/tensorboard/RUN/
/// events.out.tfevents.SECONDS.gossip: one run per peer ("peer_3") and one for the average model
/// ("average"). TensorBoard's own record format, written by a minimal encoder: each record is
/// its length (uint64, little-endian), the length's masked CRC-32C, the serialized `Event`
/// protobuf, and its masked CRC-32C; the first event of a file names the format version
/// ("brain.Event:2"). docs/outputs.md lists the scalars.
#pragma once
#if !defined(GOSSIP_ROOM_REPORT)
#error "gossip/tensorboard.hpp belongs to room report, which this room does not use (see the room table in meson.build)"
#endif

#include <cstdint>
#include <fstream>
#include <map>
#include <string>
#include <string_view>

namespace gossip {

struct MetricsRow;

/// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78) of `data`, continuing from `crc`.
std::uint32_t crc32c(std::string_view data, std::uint32_t crc = 0);
/// TensorBoard's masked CRC: ((crc >> 15) | (crc << 17)) + 0xa282ead8.
std::uint32_t masked_crc32c(std::string_view data);

/// One serialized `Event` with a scalar summary: wall_time, step and one Summary.Value (tag,
/// simple_value).
std::string scalar_event(double wall_time, std::int64_t step, std::string_view tag, float value);
/// The first event of a file: wall_time and file_version.
std::string version_event(double wall_time);
/// `event` framed as a TFRecord: length, masked CRC of the length, event, masked CRC of it.
std::string tf_record(std::string_view event);

/// Writes the scalars of metrics rows under DIR/tensorboard/, a file per run (peer, average),
/// opened at its first row. Not thread-safe.
class TensorBoardWriter {
 public:
  explicit TensorBoardWriter(std::string dir) : dir_(std::move(dir)) {}
  /// The row's scalars at step = its round: loss, test_accuracy, consensus_distance (average
  /// model only), bytes_sent, seconds, epoch, and seconds_per_round (since the run's previous
  /// row; none at its first). NaN values (a peer not evaluated) are left out.
  void write(const MetricsRow& row);
  void flush();

 private:
  std::string dir_;
  std::map<int, std::ofstream> files_;  // by peer, -1 the average
  std::map<int, std::pair<std::int64_t, double>> previous_;  // (round, seconds) of the last row
  std::ofstream& file(int peer);
};

}  // namespace gossip
