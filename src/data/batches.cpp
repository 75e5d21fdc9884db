// data/batches.cpp: per-epoch batches without replacement, and copying a batch's rows out.
//
// The permutation of epoch e of peer p comes from (seed, p, kBatch) and e, so a peer draws the
// same batches whichever process or thread runs it (DESIGN idea 2).
#include <algorithm>
#include <cstring>

#include "gossip/core.hpp"
#include "gossip/data.hpp"
#include "gossip/rng.hpp"

namespace gossip {

BatchSampler::BatchSampler(std::vector<std::int64_t> indices, int batch, std::uint64_t seed,
                           int peer)
    : indices_(std::move(indices)), batch_size_(batch), seed_(seed), peer_(peer) {
  if (indices_.empty()) throw InputError(cat("peer ", peer, ": empty data shard"));
  if (batch < 1) throw InputError(cat("batch size must be >= 1, got ", batch));
  const auto size = static_cast<std::int64_t>(indices_.size());
  // A shard smaller than one batch gives one (short) batch per epoch: the whole shard.
  batch_size_ = static_cast<int>(std::min<std::int64_t>(batch, size));
  per_epoch_ = size / batch_size_;
  reshuffle();
}

void BatchSampler::reshuffle() {
  // Epoch e's stream: the peer's batch seed, re-derived with e in the peer slot.
  auto g = make_rng(derive_seed(seed_, static_cast<std::uint64_t>(peer_), Stream::kBatch),
                    static_cast<std::uint64_t>(epoch_index_), Stream::kBatch);
  order_ = indices_;
  for (std::size_t i = order_.size(); i > 1; --i) {
    std::swap(order_[i - 1], order_[uniform_below(g, i)]);
  }
  pos_ = 0;
}

const std::vector<std::int64_t>& BatchSampler::next() {
  if (pos_ + batch_size_ > static_cast<std::int64_t>(order_.size())) {
    ++epoch_index_;  // the short remainder of the epoch is dropped
    reshuffle();
  }
  batch_.assign(order_.begin() + pos_, order_.begin() + pos_ + batch_size_);
  pos_ += batch_size_;
  ++drawn_;
  return batch_;
}

void BatchSampler::restore(const State& s) {
  if (s.epoch < 0 || s.pos < 0 || s.pos > static_cast<std::int64_t>(indices_.size()) ||
      s.drawn < 0)
    throw InputError(cat("peer ", peer_, ": sampler state (epoch ", s.epoch, ", position ", s.pos,
                         ") does not fit a shard of ", indices_.size(), " samples"));
  epoch_index_ = s.epoch;
  reshuffle();
  pos_ = s.pos;
  drawn_ = s.drawn;
}

double BatchSampler::epoch() const {
  return static_cast<double>(drawn_) / static_cast<double>(per_epoch_);
}

void gather_batch(const Dataset& data, const std::vector<std::int64_t>& idx, float* x,
                  std::int32_t* y) {
  const auto dim = static_cast<std::size_t>(data.dim);
  for (std::size_t i = 0; i < idx.size(); ++i) {
    const std::int64_t r = idx[i];
    GOSSIP_CHECK_MSG(r >= 0 && r < data.n, "gather_batch: index ", r, " outside 0..", data.n - 1);
    if (data.pixels.empty()) {
      std::memcpy(x + i * dim, data.x.data() + static_cast<std::size_t>(r) * dim,
                  dim * sizeof(float));
    } else {
      const std::uint8_t* p = data.pixels.data() + static_cast<std::size_t>(r) * dim;
      for (std::size_t j = 0; j < dim; ++j)
        x[i * dim + j] = static_cast<float>(p[j]) * data.pixel_scale + data.pixel_offset;
    }
    if (y) y[i] = data.y[static_cast<std::size_t>(r)];
  }
}

Dataset select_rows(const Dataset& data, const std::vector<std::int64_t>& rows) {
  Dataset out;
  out.n = static_cast<std::int64_t>(rows.size());
  out.dim = data.dim;
  out.classes = data.classes;
  out.pixel_scale = data.pixel_scale;
  out.pixel_offset = data.pixel_offset;
  const auto dim = static_cast<std::size_t>(data.dim);
  if (data.pixels.empty()) out.x.reserve(rows.size() * dim);
  else out.pixels.owned().reserve(rows.size() * dim);
  out.y.reserve(rows.size());
  for (const std::int64_t r : rows) {
    GOSSIP_CHECK_MSG(r >= 0 && r < data.n, "select_rows: index ", r, " outside 0..", data.n - 1);
    const std::size_t at = static_cast<std::size_t>(r) * dim;
    if (data.pixels.empty())
      out.x.insert(out.x.end(), data.x.begin() + at, data.x.begin() + at + dim);
    else
      out.pixels.owned().insert(out.pixels.owned().end(), data.pixels.begin() + at,
                                data.pixels.begin() + at + dim);
    out.y.push_back(data.y[static_cast<std::size_t>(r)]);
  }
  return out;
}

}  // namespace gossip
