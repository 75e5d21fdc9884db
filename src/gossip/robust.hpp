/// gossip/robust: the robust aggregation rules (gossip.aggregate clipped, trimmed_mean, median)
/// that replace the plain weighted sum for the algorithms that mix whole messages, and the one
/// rule behind their outlier heuristics: an outlier is clipped or dropped as a liar only when it
/// is liar_shaped, and clipped less when it heads like the far side of an honest bridge
/// (bridge_shaped). Each constant below says what it bounds; docs/byzantine.md has the
/// measurements each was chosen on. Not a public header.
#pragma once
#if !defined(GOSSIP_ROOM_GOSSIP)
#error "src/gossip/robust.hpp belongs to room gossip, which this room does not use (see the room table in meson.build)"
#endif

#include <cstddef>
#include <span>
#include <vector>

#include "gossip/config.hpp"
#include "src/gossip/mixing.hpp"

namespace gossip::mixing {

/// Self-centred clipping (ClippedGossip, He, Karimireddy and Jaggi 2022) applied to pull_terms'
/// output: a neighbour's term m_j (peer != self) beyond the gate is mixed as
/// r + clip(m_j - r, tau), r this peer's own message, so its weight becomes W_ij c_j with
/// c_j = tau / ||m_j - r|| and the self term gains W_ij (1 - c_j); a neighbour within the gate
/// keeps its weight exactly, so with none beyond it the terms are mean's. With `a.tau` given the
/// gate and the radius are both a.tau. Otherwise adaptive: tau is a reference distance, the
/// lower median of the distances heard (the ceil(k/2)-th smallest of k) but never beyond the
/// (b + 1)-th largest (b = a.byzantine; Dpsgd passes it less the neighbours hygiene left out),
/// and the gate `a.ratio` times it: only an outlier is clipped, to the reference when it is
/// liar_shaped, to twice the gate when it is bridge_shaped instead, and to the gate when
/// neither (tau 0 when no more than b were heard: then no neighbour moves this peer; with
/// b = 0 the largest, and nobody is clipped); one farther than
/// this peer's own norm ||r|| further, c_j times ||r|| / ||m_j - r||. The distances are the
/// hygiene check too: a neighbour whose distance is not finite (its message holds NaN or Inf,
/// or lies beyond about 1e19) is removed, its weight to the self term, and counts among the b,
/// so drop_nonfinite need not run before it.
struct Clipping {
  double tau = 0.0;
  std::vector<int> nonfinite;  // neighbours left out for NaN or Inf (hygiene), ascending
  // Neighbours clipped to under a quarter of their distance, and farther than kFlagNormShare of
  // this peer's own norm or with an above_share farther than kFlagSignSkew from one half
  // (outliers, for the monitor), ascending.
  std::vector<int> clipped;
};
inline constexpr double kFlagNormShare = 0.25;
inline constexpr double kFlagSignSkew = 0.35;
/// Of the coordinates where `message` and `own` differ, the share where the message is above
/// (one half when they are equal everywhere). An honest neighbour's difference is about as
/// often positive as negative; ALIE's (the honest mean less z standard deviations) is
/// one-signed.
double above_share(const float* message, std::span<const float> own);
/// Whether a neighbour's message that an aggregate cut or dropped as an outlier is shaped like a
/// liar's rather than an honest far neighbour's: farther than kFlagNormShare of the peer's own
/// norm, or one-signed (above_share farther than kFlagSignSkew from one half).
bool liar_shaped(double distance, double own_norm, const float* message,
                 std::span<const float> own);
/// Where neighbour j's difference v = m_j - r points (terms as clip_terms holds them, with the
/// weights before clipping; j a neighbour's index): `pull` is its cosine with the pull of the
/// other neighbours but those marked in `liar`, g = sum_k W_ik (m_k - r) (-1 when there is none
/// to compare with), `radial` its cosine with r itself. Dissensus sends a victim its own model
/// pushed straight against g (pull about -1); scaling sends s x, along r (radial about +1 or
/// -1); the far side of an honest bridge heads elsewhere (measured, two cliques on Dirichlet
/// shards: pull -0.78 to -0.32 from the 10th to the 90th percentile, radial within 0.1).
struct Heading {
  double pull = 0.0;
  double radial = 0.0;
};
Heading heading(std::size_t j, std::span<const Term> terms, std::span<const char> liar, int self,
                std::span<const float> own);
inline constexpr double kBridgeCos = 0.8;
/// A bridge_shaped outlier is clipped to this many gates (the others to one gate, or to tau when
/// liar_shaped): the far side of an honest bridge lies 4.4 tau away at the median and 73 at the
/// 90th percentile on the Dirichlet cliques, and 2 gates kept them together (docs/byzantine.md).
inline constexpr double kBridgeGate = 2.0;
/// A neighbour is flagged for the monitor only when clipping cut its pull to under this share.
inline constexpr double kFlagClipShare = 0.25;
/// An outlier that heads like the far side of a bridge: pull >= -kBridgeCos and |radial| <=
/// kBridgeCos.
bool bridge_shaped(const Heading& h);
/// The distances come from `buffer`'s backend (PeerBuffer::distances); the scale of a clipped
/// message is math::clip_scale.
Clipping clip_terms(std::vector<Term>& terms, int self, std::span<const float> own,
                    const AggregateConfig& a, PeerBuffer& buffer);

/// Coordinate-wise robust average of this peer's own message and the neighbour terms' messages
/// (unweighted; gossip.aggregate trimmed_mean or median) into `out`: trimmed_mean drops the b
/// largest and b smallest values of each coordinate (b = a.byzantine; the median when that
/// leaves none) and averages the rest; median is the middle value (the mean of the two middle
/// ones for an even count). Returns the neighbours dropped from more coordinates than an honest
/// one would be: more than (1 + 2 trim / k) / 2 of them, k the values a coordinate has (an
/// honest value is an extreme one in about 2 trim / k), and by that much more than their fellow
/// neighbours are, that are also liar_shaped.
/// `buffer` gives the distance and norm (PeerBuffer::distances) of the few neighbours it flags.
std::vector<int> robust_average(std::span<const Term> terms, int self, std::span<const float> own,
                                const AggregateConfig& a, std::vector<float>& out,
                                PeerBuffer& buffer);

}  // namespace gossip::mixing
