/// gossip/mixing: pieces the algorithms share (not a public header): a host view of the
/// learner's buffer for publishing, and the one mixing step, params <- sum_j w_j x_j in
/// ascending peer id with this peer at its place, through GossipKernels::mix.
#pragma once
#if !defined(GOSSIP_ROOM_GOSSIP)
#error "src/gossip/mixing.hpp belongs to room gossip, which this room does not use (see the room table in meson.build)"
#endif

#include <cstdint>
#include <span>
#include <vector>

#include "gossip/backend_device.hpp"
#include "gossip/exchange.hpp"
#include "gossip/gossip.hpp"
#include "gossip/gossip_kernels.hpp"
#include "gossip/topology.hpp"

namespace gossip::mixing {

/// One term of a weighted sum: peer `peer`'s buffer `host` (null = this peer's own parameters).
struct Term {
  int peer = 0;
  const float* host = nullptr;
  double weight = 0.0;
  bool checked_finite = false;  // its Inbox's: the transport found every value finite
};

/// Peer ids of a neighbour list (ascending, as the topology keeps them).
std::vector<int> ids(std::span<const Neighbour> neighbours);

/// Pull-mixing terms for `self`: W[self][self] x_self + W[self][j] x_j over in-neighbours j.
/// A neighbour absent from `got` has its weight added to the self weight; the count of such
/// neighbours is returned through `missing`. Terms are in ascending peer id.
std::vector<Term> pull_terms(int self, double self_weight, std::span<const Neighbour> in,
                             std::span<const Inbox> got, std::int64_t* missing);

/// Whether none of the floats is NaN or infinite.
bool finite(std::span<const float> values);

/// Hygiene before any aggregate: a neighbour term whose message holds a NaN or an infinity (not
/// scanned again when the transport checked it on receipt: Term::checked_finite) is removed and its weight given to the self term (as a missing neighbour's). Returns the peers
/// removed, ascending.
std::vector<int> drop_nonfinite(std::vector<Term>& terms, int self, std::int64_t n);

/// The learner's buffer as the exchange sees it, and mixing into it.
class PeerBuffer {
 public:
  explicit PeerBuffer(const Learner& learner);

  /// The parameters as a host span (downloaded first on a device backend). Valid until the next
  /// mix() or local step.
  std::span<const float> host_view();
  /// params <- sum of terms (ascending peer id); weights are rounded to float for
  /// GossipKernels::mix.
  void mix(std::span<const Term> terms);
  /// Copies the parameters to a host buffer.
  void download(std::span<float> out) const;
  /// Starts copying the parameters, as they are once the work queued so far is done, to `out`
  /// (page-locked host memory on a GPU) beside the work queued next: on a device backend a
  /// snapshot on the device (in the mixing target, free until mix()), then Device::
  /// download_async from it, so the next step may change the parameters (BatchNorm's running
  /// statistics in its forward pass) while the copy runs. Returns false when the copy is done
  /// already (the CPU); else `out` holds it once wait_download() returns.
  bool download_async(std::span<float> out);
  /// Waits for download_async's copy (mix() does first).
  void wait_download();
  /// out[j] = ||messages[j] - own|| (a null message: ||own||), computed by the learner's backend
  /// (GossipKernels::squared_distances) where the parameters are: on a device backend the messages
  /// (host buffers) are uploaded once, for these and the next mix(). `own` is host_view()'s
  /// span or another host buffer of the parameters' size.
  void distances(std::span<const float> own, std::span<const float* const> messages, double* out);

 private:
  static constexpr std::int64_t kChunk = 2048;  // floats per host mixing chunk (8 KiB)

  Learner learner_;
  std::vector<float> chunk_;                // host backends: mixing target of one chunk
  std::vector<const float*> chunk_in_;      // host backends: inputs offset to that chunk
  DeviceArray<float> out_;                  // device backends: mixing target, then copied back
  std::vector<DeviceArray<float>> staged_;  // device backends: uploaded neighbour buffers
  // Device backends: the host buffers uploaded since the last mix, and where (in staged_).
  std::vector<std::pair<const float*, const float*>> uploaded_;
  /// A device backend's copy of a host buffer: the parameters for host_view()'s span, else
  /// uploaded (once until the next mix).
  const float* on_device(const float* host);
  HostFloats host_;  // device backends: the downloaded parameters, in page-locked memory
  bool copying_ = false;  // a download_async not waited for
  std::vector<const float*> in_;
  std::vector<float> w_;
};

}  // namespace gossip::mixing
