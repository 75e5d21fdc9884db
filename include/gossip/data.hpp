/// data: IDX reader (plain and .gz), synthetic sets with a known answer, sharding across peers,
/// batches drawn without replacement each epoch. Depends only on core.
#pragma once
#if !defined(GOSSIP_ROOM_DATA)
#error "gossip/data.hpp belongs to room data, which this room does not use (see the room table in meson.build)"
#endif

#include <cstdint>
#include <string>
#include <vector>

namespace gossip {

/// A labelled classification set, features row-major (n x dim). Image sets keep the file's bytes
/// (a quarter of the floats' memory) and turn them into features a batch at a time:
/// feature = pixel * pixel_scale + pixel_offset (1/255 and 0, or with normalisation folded in).
struct Dataset {
  std::int64_t n = 0;
  int dim = 0;
  int classes = 0;
  std::vector<float> x;               // n * dim features (synthetic sets); empty for image sets
  std::vector<std::uint8_t> pixels;   // n * dim bytes (image sets); empty for synthetic sets
  float pixel_scale = 1.0f / 255.0f;
  float pixel_offset = 0.0f;
  std::vector<std::int32_t> y;        // n labels in [0, classes)

  /// Feature j of row r, whichever way the set is stored.
  float feature(std::int64_t r, int j) const {
    const auto at = static_cast<std::size_t>(r) * static_cast<std::size_t>(dim) + j;
    return pixels.empty() ? x[at] : static_cast<float>(pixels[at]) * pixel_scale + pixel_offset;
  }
};

/// The rows `rows` of `data`, in that order, as a set of their own (same storage and scaling):
/// what a peer keeps of the training set.
Dataset select_rows(const Dataset& data, const std::vector<std::int64_t>& rows);

/// Reads an IDX image file (magic 0x00000803, rank 3) and label file (0x00000801, rank 1), plain
/// or gzip (detected by content, not name). Validates magic, ranks, dimensions, counts, label
/// range and that the files are complete; throws InputError naming the file and what is wrong.
Dataset load_idx(const std::string& images_path, const std::string& labels_path,
                 int classes = 10);

/// Synthetic set with a known answer: `classes` Gaussian blobs in `dim` dimensions, well separated
/// (a linear model reaches ~100% accuracy), deterministic from the seed.
Dataset make_synthetic(std::int64_t n, int dim, int classes, std::uint64_t seed,
                       double separation = 4.0);

enum class ShardKind { kIid, kDirichlet, kShards };

struct ShardSpec {
  ShardKind kind = ShardKind::kIid;
  double alpha = 0.5;        // dirichlet concentration (small = strong label skew)
  int shards_per_peer = 2;   // kShards: label-sorted shards per peer
};

/// Parses "iid" | "dirichlet" | "shards"; throws InputError otherwise.
ShardKind parse_shard_kind(const std::string& name);

/// Splits sample indices 0..labels.size()-1 among n_peers: disjoint, covering, each peer's list
/// sorted ascending, deterministic from the seed. Every peer gets at least one sample.
std::vector<std::vector<std::int64_t>> make_shards(const std::vector<std::int32_t>& labels,
                                                   int classes, int n_peers,
                                                   const ShardSpec& spec, std::uint64_t seed);

/// Draws batches of `batch` indices from a shard without replacement within each epoch; a new
/// permutation (from seed, peer, epoch) each epoch; the last short batch of an epoch is dropped
/// unless the shard is smaller than one batch.
class BatchSampler {
 public:
  BatchSampler(std::vector<std::int64_t> indices, int batch, std::uint64_t seed, int peer);

  /// The next batch of indices into the Dataset. Advances the epoch when one is exhausted.
  const std::vector<std::int64_t>& next();
  /// Completed epochs so far (fractional: batches drawn / batches per epoch).
  double epoch() const;
  std::int64_t batches_per_epoch() const { return per_epoch_; }
  std::int64_t shard_size() const { return static_cast<std::int64_t>(indices_.size()); }

  /// Where the sampler is: its epoch, position in the epoch's order and batches drawn. A
  /// sampler of the same shard, batch, seed and peer set to a state draws what the original
  /// drew next (the order is rebuilt from the epoch).
  struct State {
    std::int64_t epoch = 0, pos = 0, drawn = 0;
  };
  State state() const { return {epoch_index_, pos_, drawn_}; }
  /// Throws InputError when the state cannot belong to this shard.
  void restore(const State& s);

 private:
  void reshuffle();

  std::vector<std::int64_t> indices_;
  std::vector<std::int64_t> order_;
  std::vector<std::int64_t> batch_;
  int batch_size_;
  std::uint64_t seed_;
  int peer_;
  std::int64_t per_epoch_ = 0;
  std::int64_t epoch_index_ = 0;
  std::int64_t pos_ = 0;
  std::int64_t drawn_ = 0;
};

/// Copies the rows `idx` of `data` into x (idx.size() x dim) and y.
void gather_batch(const Dataset& data, const std::vector<std::int64_t>& idx, float* x,
                  std::int32_t* y);

}  // namespace gossip
