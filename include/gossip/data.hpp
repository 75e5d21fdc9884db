/// data: IDX reader (plain and .gz), synthetic sets with a known answer, sharding across peers,
/// batches drawn without replacement each epoch. Depends only on core.
#pragma once
#if !defined(GOSSIP_ROOM_DATA)
#error "gossip/data.hpp belongs to room data, which this room does not use (see the room table in meson.build)"
#endif

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "gossip/choice.hpp"

namespace gossip {

/// The pixel bytes of an image set: either owned, or a read-only view of a cache file that every
/// process loading the same IDX file maps (load_idx_mapped), so the peers of one host share one
/// copy of the test set in the page cache instead of holding one each.
class Pixels {
 public:
  Pixels() = default;
  Pixels(std::initializer_list<std::uint8_t> bytes) : own_(bytes) {}

  const std::uint8_t* data() const { return mapping_ ? view_ : own_.data(); }
  std::size_t size() const { return mapping_ ? size_ : own_.size(); }
  bool empty() const { return size() == 0; }
  std::uint8_t operator[](std::size_t i) const { return data()[i]; }
  const std::uint8_t* begin() const { return data(); }
  const std::uint8_t* end() const { return data() + size(); }

  /// Keeps the first n bytes (n <= size()).
  void truncate(std::size_t n);
  /// The owned bytes, to fill; a mapped set is read-only (throws).
  std::vector<std::uint8_t>& owned();
  /// The cache file these bytes are mapped from, or "" when they are this process's own.
  const std::string& mapped_file() const { return file_; }

  /// A view of `size` bytes at `view` that stays valid while `mapping` lives.
  static Pixels mapped(std::shared_ptr<const void> mapping, const std::uint8_t* view,
                       std::size_t size, std::string file);

 private:
  std::vector<std::uint8_t> own_;
  std::shared_ptr<const void> mapping_;
  const std::uint8_t* view_ = nullptr;
  std::size_t size_ = 0;
  std::string file_;
};

/// A labelled classification set, features row-major (n x dim). Image sets keep the file's bytes
/// (a quarter of the floats' memory) and turn them into features a batch at a time:
/// feature = pixel * pixel_scale + pixel_offset (1/255 and 0, or with normalisation folded in).
struct Dataset {
  std::int64_t n = 0;
  int dim = 0;
  int classes = 0;
  std::vector<float> x;               // n * dim features (synthetic sets); empty for image sets
  Pixels pixels;                      // n * dim bytes (image sets); empty for synthetic sets
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

/// load_idx, with the image bytes decoded once into a cache file under `cache_dir` (made when
/// missing) and mapped read-only: every process of the host that loads the same file (same path,
/// size and modification time) maps the same cache file. The first one decodes and checks the IDX
/// file as load_idx does, under a lock, and publishes the cache file by renaming it into place; a
/// cache file of the wrong size or header is rebuilt. When the cache cannot be written (a
/// read-only folder, a full disk) the set is loaded into memory as load_idx does and `warning`
/// says why; it is empty otherwise.
Dataset load_idx_mapped(const std::string& images_path, const std::string& labels_path,
                        int classes, const std::string& cache_dir, std::string* warning);

/// Synthetic set with a known answer: `classes` Gaussian blobs in `dim` dimensions, well separated
/// (a linear model reaches ~100% accuracy), deterministic from the seed.
Dataset make_synthetic(std::int64_t n, int dim, int classes, std::uint64_t seed,
                       double separation = 4.0);


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
