/// checkpoint: one peer's training state at the end of a round, as bytes (Cereal's binary
/// archive inside a header and a SHA-256 checksum), so that a stopped run resumes bit-identical
/// (train.checkpoint_every, gossip run --resume), with the caller's own state when a Python
/// script drives the peer: the codec, whose decoder never throws on bad
/// bytes but says why they were refused, and the checkpoint files of a peer's folder.
#pragma once
#if !defined(GOSSIP_ROOM_WIRE)
#error "gossip/checkpoint.hpp belongs to room wire, which this room does not use (see the room table in meson.build)"
#endif

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace gossip {

struct Checkpoint {
  std::int32_t rank = 0;
  std::int64_t round = 0;              // rounds completed
  std::int64_t rounds = 0;             // of the whole run (the plan must match on resume)
  std::uint64_t run_fingerprint = 0;   // topology, model and seed: must match on resume
  std::vector<float> params;           // the flat buffer (push-sum: the de-biased model)
  std::vector<float> velocity;         // the optimizer's momentum buffer
  std::int64_t steps = 0;              // local steps taken
  std::int64_t sampler_epoch = 0;      // the batch sampler's epoch, position and batches drawn
  std::int64_t sampler_pos = 0;
  std::int64_t sampler_drawn = 0;
  double weight = 1.0;                 // push-sum weight
  double loss_sum = 0.0;               // training loss accumulated since the last evaluation
  std::int64_t loss_count = 0;
  std::int64_t missing = 0;            // in-neighbours left out of mixing so far
  std::uint64_t bytes_sent = 0;        // before the checkpoint
  std::vector<float> algorithm_state;  // Algorithm::State::buffers (choco's copies), else empty
  // A caller's own bytes (a Python peer's torch optimizer state), opaque here; empty for gossip
  // peer. Defaulted, so that initializers written before it need not name it.
  std::vector<std::byte> caller_state = {};
};

/// "GOSSIPCK", u32 version, u64 payload length, payload, SHA-256 of the payload.
std::vector<std::byte> encode_checkpoint(const Checkpoint& c);

/// The checkpoint in `bytes`, or nullopt with `why` saying what is wrong (truncated, not a
/// checkpoint, another version, checksum mismatch, a length beyond the file).
std::optional<Checkpoint> decode_checkpoint(std::span<const std::byte> bytes, std::string* why);

/// DIR/checkpoint-ROUND.ckpt.
std::string checkpoint_path(const std::string& dir, std::int64_t round);

/// Writes `c` to PATH so that a reader never sees half of it (PATH.tmp, flushed to disk, then
/// renamed). Throws RuntimeError when it cannot.
void write_checkpoint_file(const std::string& path, const Checkpoint& c);

/// Reads and decodes PATH; nullopt with `why` when it cannot be read or is refused.
std::optional<Checkpoint> read_checkpoint_file(const std::string& path, std::string* why);

/// The rounds of DIR's checkpoints that decode and belong to `rank`, ascending; every refused
/// one is described in `refused` as "FILE: why".
std::vector<std::int64_t> valid_checkpoints(const std::string& dir, int rank,
                                            std::vector<std::string>* refused);

/// Removes DIR's checkpoints older than the newest `keep` (by round).
void prune_checkpoints(const std::string& dir, std::size_t keep);

}  // namespace gossip
