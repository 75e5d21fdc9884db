// gossip/mixing.cpp: the weighted sum every algorithm ends a round with, in one fixed order,
// and the hygiene before it (non-finite messages left out). The robust aggregation rules that
// may replace the plain sum are in robust.cpp.
#include "src/gossip/mixing.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <utility>

#include "gossip/core.hpp"
#include "gossip/math.hpp"
#include "gossip/wire.hpp"

namespace gossip::mixing {

std::vector<int> ids(std::span<const Neighbour> neighbours) {
  std::vector<int> out;
  out.reserve(neighbours.size());
  for (const auto& nb : neighbours) out.push_back(nb.peer);
  return out;
}

std::vector<Term> pull_terms(int self, double self_weight, std::span<const Neighbour> in,
                             std::span<const Inbox> got, std::int64_t* missing) {
  std::vector<Term> terms;
  terms.reserve(in.size() + 1);
  std::int64_t absent = 0;
  std::size_t g = 0;
  for (const auto& nb : in) {
    while (g < got.size() && got[g].peer < nb.peer) ++g;
    if (g < got.size() && got[g].peer == nb.peer) {
      terms.push_back({nb.peer, got[g].params.data(), nb.weight, got[g].checked_finite});
    } else {
      self_weight += nb.weight;  // a missing neighbour's share stays with this peer
      ++absent;
    }
  }
  const auto at = std::lower_bound(terms.begin(), terms.end(), self,
                                   [](const Term& t, int p) { return t.peer < p; });
  terms.insert(at, Term{self, nullptr, self_weight});
  if (missing != nullptr) *missing = absent;
  return terms;
}

bool finite(std::span<const float> values) { return wire::all_finite(values); }

std::vector<int> drop_nonfinite(std::vector<Term>& terms, int self, std::int64_t n) {
  std::vector<int> dropped;
  double to_self = 0.0;
  std::erase_if(terms, [&](const Term& t) {
    if (t.peer == self || t.checked_finite ||
        wire::all_finite({t.host, static_cast<std::size_t>(n)}))
      return false;
    dropped.push_back(t.peer);
    to_self += t.weight;
    return true;
  });
  for (Term& t : terms)
    if (t.peer == self) t.weight += to_self;
  return dropped;
}

PeerBuffer::PeerBuffer(const Learner& learner) : learner_(learner) {
  GOSSIP_CHECK(learner.backend != nullptr && learner.params != nullptr);
  if (learner.backend->host_memory()) {
    chunk_.resize(static_cast<std::size_t>(std::min(kChunk, learner.num_params)));
  } else {
    out_ = DeviceArray<float>(*learner.backend, static_cast<std::size_t>(learner.num_params));
    // Page-locked where the backend has it (a GPU's): the download for each round's message
    // goes by DMA, not through the driver's staging copy.
    host_ = HostFloats(static_cast<std::size_t>(learner.num_params),
                       HostAllocator<float>(learner.backend->pinned_memory()));
  }
}

std::span<const float> PeerBuffer::host_view() {
  const auto n = static_cast<std::size_t>(learner_.num_params);
  if (learner_.backend->host_memory()) return {learner_.params, n};
  uploaded_.clear();  // a new round: the host buffers staged before may hold other values now
  learner_.backend->download(host_.data(), learner_.params, n * sizeof(float));
  return {host_.data(), n};
}

void PeerBuffer::download(std::span<float> out) const {
  GOSSIP_CHECK_EQ(static_cast<std::int64_t>(out.size()), learner_.num_params);
  learner_.backend->download(out.data(), learner_.params, out.size_bytes());
}

bool PeerBuffer::download_async(std::span<float> out) {
  GOSSIP_CHECK_EQ(static_cast<std::int64_t>(out.size()), learner_.num_params);
  if (learner_.backend->host_memory()) {
    download(out);
    return false;
  }
  wait_download();
  learner_.backend->copy(out_.data(), learner_.params, out.size_bytes());
  learner_.backend->download_async(out.data(), out_.data(), out.size_bytes());
  copying_ = true;
  return true;
}

void PeerBuffer::wait_download() {
  if (!copying_) return;
  copying_ = false;
  learner_.backend->wait_downloads();
}

const float* PeerBuffer::on_device(const float* host) {
  if (host == nullptr) return nullptr;
  // This peer's own parameters as host_view() downloaded them: they are on the device already.
  if (!host_.empty() && host == host_.data()) return learner_.params;
  for (const auto& [h, d] : uploaded_)
    if (h == host) return d;
  const std::int64_t n = learner_.num_params;
  if (uploaded_.size() == staged_.size())
    staged_.emplace_back(*learner_.backend, static_cast<std::size_t>(n));
  DeviceArray<float>& into = staged_[uploaded_.size()];
  into.upload(host, static_cast<std::size_t>(n));
  uploaded_.emplace_back(host, into.data());
  return into.data();
}

void PeerBuffer::distances(std::span<const float> own, std::span<const float* const> messages,
                           double* out) {
  GossipKernels& b = *learner_.backend;
  const auto k = static_cast<int>(messages.size());
  if (k == 0) return;
  const std::int64_t n = learner_.num_params;
  GOSSIP_CHECK_EQ(static_cast<std::int64_t>(own.size()), n);
  if (b.host_memory()) {
    b.squared_distances(own.data(), messages.data(), k, n, out);
  } else {
    // Neighbour messages arrive in host memory: staged on the device once, for these distances
    // and the mix after them.
    std::vector<const float*> m(messages.size());
    for (std::size_t j = 0; j < messages.size(); ++j) m[j] = on_device(messages[j]);
    b.squared_distances(on_device(own.data()), m.data(), k, n, out);
  }
  for (int j = 0; j < k; ++j) out[j] = std::sqrt(out[j]);
}

void PeerBuffer::mix(std::span<const Term> terms) {
  wait_download();  // its snapshot is in out_
  GossipKernels& b = *learner_.backend;
  const std::int64_t n = learner_.num_params;
  in_.clear();
  w_.clear();
  for (const Term& t : terms) {
    const float* p = learner_.params;
    if (t.host != nullptr)  // neighbour buffers arrive in host memory: staged on a device
      p = b.host_memory() ? t.host : on_device(t.host);
    in_.push_back(p);
    w_.push_back(static_cast<float>(t.weight));
  }
  uploaded_.clear();  // the messages change with the next collect
  const int k = static_cast<int>(in_.size());
  if (b.host_memory()) {
    // Chunk by chunk into a small buffer that stays in L1, then over the parameters: the same
    // per-element sums as one call, without a second parameter-sized buffer to stream through.
    for (std::int64_t start = 0; start < n; start += kChunk) {
      const std::int64_t len = std::min(kChunk, n - start);
      chunk_in_.resize(in_.size());
      for (int j = 0; j < k; ++j) chunk_in_[j] = in_[j] + start;
      b.mix(chunk_.data(), chunk_in_.data(), w_.data(), k, len);
      std::memcpy(learner_.params + start, chunk_.data(), static_cast<std::size_t>(len) * 4);
    }
  } else {
    b.mix(out_.data(), in_.data(), w_.data(), k, n);
    b.copy(learner_.params, out_.data(), out_.bytes());
  }
}

}  // namespace gossip::mixing

namespace gossip {

void ModelAverage::add(std::span<const float> model) {
  GOSSIP_CHECK_EQ(model.size(), sum_.size());
  for (std::size_t i = 0; i < sum_.size(); ++i) sum_[i] += model[i];
  ++count_;
}

void ModelAverage::write(std::span<float> out) const {
  GOSSIP_CHECK(count_ > 0 && out.size() == sum_.size());
  for (std::size_t i = 0; i < sum_.size(); ++i)
    out[i] = static_cast<float>(sum_[i] / static_cast<double>(count_));
}

}  // namespace gossip
