// gossip/robust.cpp: the robust aggregation rules (clipped, trimmed_mean, median) and their
// outlier heuristics, behind liar_shaped and bridge_shaped (robust.hpp; docs/byzantine.md has
// the evidence for each constant).
#include "src/gossip/robust.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <utility>

#include "gossip/core.hpp"
#include "gossip/math.hpp"
#include "gossip/wire.hpp"

namespace gossip::mixing {

bool liar_shaped(double distance, double own_norm, const float* message,
                 std::span<const float> own) {
  return distance > kFlagNormShare * own_norm ||
         std::abs(above_share(message, own) - 0.5) > kFlagSignSkew;
}

double above_share(const float* message, std::span<const float> own) {
  std::int64_t above = 0, below = 0;
  for (std::size_t i = 0; i < own.size(); ++i) {
    above += message[i] > own[i];
    below += message[i] < own[i];
  }
  return above + below == 0 ? 0.5
                            : static_cast<double>(above) / static_cast<double>(above + below);
}

Heading heading(std::size_t j, std::span<const Term> terms, std::span<const char> liar, int self,
                std::span<const float> own) {
  std::vector<const float*> in;
  std::vector<double> w;
  for (std::size_t k = 0; k < terms.size(); ++k)
    if (k != j && terms[k].peer != self && !liar[k]) {
      in.push_back(terms[k].host);
      w.push_back(terms[k].weight);
    }
  const float* m = terms[j].host;
  double vg = 0.0, gg = 0.0, vr = 0.0, vv = 0.0, rr = 0.0;
  for (std::size_t i = 0; i < own.size(); ++i) {
    const double r = own[i];
    const double v = static_cast<double>(m[i]) - r;
    double g = 0.0;
    for (std::size_t k = 0; k < in.size(); ++k) g += w[k] * (static_cast<double>(in[k][i]) - r);
    vg += v * g;
    gg += g * g;
    vr += v * r;
    vv += v * v;
    rr += r * r;
  }
  Heading h;
  // With no pull to compare with (no other neighbour, or all equal to this peer) it is taken
  // as opposed: such an outlier is clipped to the gate, as before the heading counted.
  h.pull = gg > 0.0 && vv > 0.0 ? vg / std::sqrt(gg * vv) : -1.0;
  h.radial = rr > 0.0 && vv > 0.0 ? vr / std::sqrt(rr * vv) : 0.0;
  return h;
}

bool bridge_shaped(const Heading& h) {
  return h.pull >= -kBridgeCos && std::abs(h.radial) <= kBridgeCos;
}

namespace {

/// ||own||, by the learner's backend.
double own_norm_of(std::span<const float> own, PeerBuffer& buffer) {
  const float* none[] = {nullptr};
  double v = 0.0;
  buffer.distances(own, none, &v);
  return v;
}

/// clip_terms' hygiene: each term's distance to this peer's own message into `d` (0 for its own
/// term), computed by the learner's backend where the parameters are (on a GPU, from the
/// messages it uploads for the mix). A message with NaN or Inf has a distance that is not finite
/// (as has one so far off, beyond about 1e19, that its squares overflow float): such a term
/// leaves, its weight into `to_self`, and its peer into out.nonfinite. False when this peer's
/// own message is not finite: every distance is NaN through it, which says nothing of the
/// neighbours, so their own check decides (drop_nonfinite) and nobody is clipped.
bool keep_finite(std::vector<Term>& terms, int self, std::span<const float> own,
                 PeerBuffer& buffer, Clipping& out, std::vector<double>& d, double& to_self) {
  std::vector<const float*> messages;
  for (const Term& t : terms)
    if (t.peer != self) messages.push_back(t.host);
  std::vector<double> dm(messages.size());
  buffer.distances(own, messages, dm.data());
  // The own message's finiteness, from its distances (a NaN or Inf of its own makes every one
  // non-finite) or, alone, its norm.
  const bool own_finite =
      std::any_of(dm.begin(), dm.end(), [](double v) { return std::isfinite(v); }) ||
      std::isfinite(own_norm_of(own, buffer));
  if (!own_finite) {
    out.nonfinite = drop_nonfinite(terms, self, static_cast<std::int64_t>(own.size()));
    return false;
  }
  std::vector<Term> kept;
  std::size_t next = 0;
  for (const Term& t : terms) {
    const double dj = t.peer == self ? 0.0 : dm[next++];
    if (!std::isfinite(dj)) {
      out.nonfinite.push_back(t.peer);
      to_self += t.weight;
      continue;
    }
    kept.push_back(t);
    d.push_back(dj);
  }
  terms = std::move(kept);
  return true;
}

/// The radius `tau` (into out.tau) and the gate beyond which a neighbour is clipped. Fixed: both
/// a.tau. Adaptive: the reference distance is the lower median of the distances heard (the
/// ceil(k/2)-th smallest), so that two far neighbours (a liar and the far side of a bridge) do
/// not set it, but never beyond the (b + 1)-th largest, so that the b farthest cannot (on the
/// ring, k = 2: the nearer one's distance); the gate is `ratio` times it. With b = 0 (none may
/// lie, or the liars are cut) it is the largest, and nobody is clipped; with no more than b
/// heard, 0.
double clipping_gate(std::span<const Term> terms, std::span<const double> d, int self,
                     const AggregateConfig& a, int byzantine, Clipping& out) {
  if (a.tau > 0) return out.tau = a.tau;
  std::vector<double> heard;
  for (std::size_t j = 0; j < terms.size(); ++j)
    if (terms[j].peer != self) heard.push_back(d[j]);
  if (static_cast<int>(heard.size()) <= byzantine) return 0.0;
  std::sort(heard.begin(), heard.end(), std::greater<>());
  const std::size_t k = heard.size();
  const auto b = static_cast<std::size_t>(byzantine);
  out.tau = heard[b == 0 ? 0 : std::max(b, k - (k + 1) / 2)];
  return b == 0 ? out.tau : a.ratio * out.tau;
}

/// Under the adaptive tau, which outliers (beyond `gate`) are shaped like liars, known before
/// any is clipped, and whether one is not (`headed`: it is clipped by its heading). A fixed tau
/// clips every neighbour beyond it to it: none is marked.
struct Outliers {
  std::vector<char> liar;  // per term
  bool headed = false;
};

Outliers mark_outliers(const std::vector<Term>& terms, const std::vector<double>& d, int self,
                       double gate, const AggregateConfig& a, std::span<const float> own,
                       PeerBuffer& buffer, double& own_norm) {
  Outliers out{std::vector<char>(terms.size(), 0), false};
  if (a.tau <= 0)
    for (std::size_t j = 0; j < terms.size(); ++j) {
      if (terms[j].peer == self || d[j] <= gate) continue;
      if (own_norm < 0) own_norm = own_norm_of(own, buffer);
      out.liar[j] = liar_shaped(d[j], own_norm, terms[j].host, own);
      out.headed = out.headed || !out.liar[j];
    }
  return out;
}

}  // namespace

Clipping clip_terms(std::vector<Term>& terms, int self, std::span<const float> own,
                    const AggregateConfig& a, PeerBuffer& buffer) {
  Clipping out;
  std::vector<double> d;
  double to_self = 0.0;
  if (!keep_finite(terms, self, own, buffer, out, d, to_self)) return out;
  // The b that may lie include those hygiene already left out.
  const int byzantine = std::max(0, a.byzantine - static_cast<int>(out.nonfinite.size()));
  const double gate = clipping_gate(terms, d, self, a, byzantine, out);
  double own_norm = -1.0;  // computed when first needed
  const Outliers outliers = mark_outliers(terms, d, self, gate, a, own, buffer, own_norm);
  const std::vector<char>& liar = outliers.liar;
  // When an outlier is not liar-shaped: the weights before clipping, for its heading.
  const std::vector<Term> unclipped = outliers.headed ? terms : std::vector<Term>{};
  for (std::size_t j = 0; j < terms.size(); ++j) {
    if (terms[j].peer == self || d[j] <= gate) continue;
    double c = math::clip_scale(out.tau, d[j]);
    const bool shaped = liar[j] != 0;
    if (a.tau <= 0) {
      // An outlier that does not look like a liar (near, and as often above this peer as
      // below) is clipped to the gate, the most a neighbour within it pulls; one that does, to
      // the reference. One that also heads like the far side of a bridge (neither straight
      // against the pull of the other neighbours but the liar-shaped, as dissensus does, nor
      // along this peer's own parameters, as scaling does) to kBridgeGate times the gate:
      // across a bridge between two groups of unlike data the far side lies tens of references
      // away.
      if (!shaped)
        c = math::clip_scale(
            bridge_shaped(heading(j, unclipped, liar, self, own)) ? kBridgeGate * gate : gate,
            d[j]);
      // Farther than this peer's own norm is no honest neighbour's message (measured: 0.14 of
      // the norm at most, across a bridge): its pull falls further, as norm / distance, so a
      // liar sending -4x (5 norms away) pulls a fifth of tau, not tau.
      if (own_norm > 0 && d[j] > own_norm) c *= own_norm / d[j];
    }
    to_self += terms[j].weight * (1.0 - c);
    terms[j].weight *= c;
    // Flagged only when cut to under kFlagClipShare, and then either farther than
    // kFlagNormShare of this peer's own norm or one-signed: two honest neighbours' distances
    // can differ by more than the ratio, by large factors (near consensus; or on a path, whose
    // end clings to its one neighbour: 0.03 against 0.42, 5 % of the norm, measured), while a
    // liar's message lies many norms away (sign_flip: 2 |x|, ipm: 1.5 |x|) or, hiding in the
    // honest spread (ALIE), below or above this peer's model in nearly every coordinate.
    if (c >= kFlagClipShare) continue;
    if (own_norm < 0) own_norm = own_norm_of(own, buffer);
    if (a.tau > 0 ? liar_shaped(d[j], own_norm, terms[j].host, own) : shaped)
      out.clipped.push_back(terms[j].peer);
  }
  for (Term& t : terms)
    if (t.peer == self) t.weight += to_self;
  return out;
}

namespace {

/// Coordinate by coordinate over the k values in[j][i]: sorted, `trim` dropped at each end and
/// the rest averaged into out[i] (summed in double, ascending). dropped[j] counts the
/// coordinates where in[j] lies outside the kept values, strictly below the lowest or above the
/// highest: a value equal to a kept one is as good as kept, whichever of the equals the sort
/// left out (a plateau of equal values, which medians make as they converge, drops nobody).
void generic_trim(const std::vector<const float*>& in, std::size_t trim, std::vector<float>& out,
                  std::vector<std::int64_t>& dropped) {
  const std::size_t k = in.size();
  std::vector<float> v(k);
  for (std::size_t i = 0; i < out.size(); ++i) {
    for (std::size_t j = 0; j < k; ++j) v[j] = in[j][i];
    std::sort(v.begin(), v.end());
    double sum = 0.0;
    for (std::size_t j = trim; j < k - trim; ++j) sum += v[j];
    out[i] = static_cast<float>(sum / static_cast<double>(k - 2 * trim));
    const float low = v[trim], high = v[k - 1 - trim];
    for (std::size_t j = 0; j < k; ++j) dropped[j] += (in[j][i] < low) | (in[j][i] > high);
  }
}

/// The most values a coordinate network_trim takes (a peer and 31 neighbours).
constexpr std::size_t kNetworkMax = 32;

/// generic_trim's results for k <= kNetworkMax, by a sorting network of min / max (odd-even
/// transposition: k passes, right for every k) run over chunks of coordinates: each comparator
/// is one long pass over two rows of a chunk (in L1 / L2), which vectorizes as a saxpy does
/// (generic_trim's sort branches on every comparison: 12-13x mean's mix at 5 and 9 values;
/// over blocks of 16 lanes held in fixed arrays, 8x; this, 4-5.6x). Equal values are
/// interchangeable in the network, so ties need no care, and what each input drops is its
/// place against the lowest and the highest kept value.
void network_trim(const std::vector<const float*>& in, std::size_t trim, std::vector<float>& out,
                  std::vector<std::int64_t>& dropped) {
  constexpr std::size_t kChunk = 512;
  const std::size_t k = in.size();
  const std::size_t n = out.size();
  std::vector<float> sorted(k * kChunk);  // row j of the chunk at j * kChunk
  std::vector<double> sum(kChunk);
  std::int64_t count[kNetworkMax] = {};
  const double keep = static_cast<double>(k - 2 * trim);
  for (std::size_t base = 0; base < n; base += kChunk) {
    const std::size_t m = std::min(kChunk, n - base);
    for (std::size_t j = 0; j < k; ++j)
      std::memcpy(sorted.data() + j * kChunk, in[j] + base, m * sizeof(float));
    for (std::size_t pass = 0; pass < k; ++pass)
      for (std::size_t a = pass % 2; a + 1 < k; a += 2) {
        float* x = sorted.data() + a * kChunk;
        float* y = x + kChunk;
        for (std::size_t i = 0; i < m; ++i) {
          const float lo = std::min(x[i], y[i]), hi = std::max(x[i], y[i]);
          x[i] = lo;
          y[i] = hi;
        }
      }
    const float* low = sorted.data() + trim * kChunk;
    const float* high = sorted.data() + (k - 1 - trim) * kChunk;
    for (std::size_t j = 0; j < k; ++j) {
      const float* v = in[j] + base;
      std::int32_t drops = 0;
      for (std::size_t i = 0; i < m; ++i) drops += (v[i] < low[i]) | (v[i] > high[i]);
      count[j] += drops;
    }
    for (std::size_t i = 0; i < m; ++i) sum[i] = 0.0;
    for (std::size_t j = trim; j < k - trim; ++j) {
      const float* row = sorted.data() + j * kChunk;
      for (std::size_t i = 0; i < m; ++i) sum[i] += static_cast<double>(row[i]);
    }
    for (std::size_t i = 0; i < m; ++i) out[base + i] = static_cast<float>(sum[i] / keep);
  }
  for (std::size_t j = 0; j < k; ++j) dropped[j] += count[j];
}

/// generic_trim for k = 3, trim = 1, with the same values: the median of three by min and max,
/// and an input dropped where its value differs from it. No branches: the compiler vectorizes
/// it.
void median_of_three(const float* a, const float* b, const float* c, std::vector<float>& out,
                     std::vector<std::int64_t>& dropped) {
  std::int64_t kept[3] = {0, 0, 0};
  constexpr std::size_t kBlock = 4096;  // int32 counts a block, so the lanes stay 32-bit wide
  for (std::size_t start = 0; start < out.size(); start += kBlock) {
    const std::size_t end = std::min(out.size(), start + kBlock);
    std::int32_t kx = 0, ky = 0, kz = 0;
    for (std::size_t i = start; i < end; ++i) {
      const float x = a[i], y = b[i], z = c[i];
      const float mid = std::max(std::min(x, y), std::min(std::max(x, y), z));
      out[i] = mid;
      kx += x == mid;
      ky += y == mid;
      kz += z == mid;
    }
    kept[0] += kx;
    kept[1] += ky;
    kept[2] += kz;
  }
  const auto n = static_cast<std::int64_t>(out.size());
  for (int j = 0; j < 3; ++j) dropped[static_cast<std::size_t>(j)] += n - kept[j];
}

/// The neighbours robust_average dropped far more often than an honest one is (in[j], peer[j]:
/// each value and whose, this peer's own first; dropped[j]: the coordinates it was dropped
/// from).
std::vector<int> dropped_suspects(const std::vector<const float*>& in,
                                  const std::vector<int>& peer,
                                  const std::vector<std::int64_t>& dropped, std::size_t trim,
                                  std::span<const float> own, PeerBuffer& buffer) {
  const std::size_t k = in.size();
  // An honest value is dropped from about 2 trim / k of the coordinates; flagged is a
  // neighbour dropped from more than halfway between that and all of them, and from that much
  // more than its fellow neighbours are (their median). The second test keeps the ring honest:
  // medians on a ring settle where every peer lies between its two neighbours, so both are
  // dropped almost everywhere with nobody lying (measured: every peer of the quickstart named
  // both its neighbours in the last 40 rounds of the cosine schedule), while a liar is dropped
  // everywhere and its fellow about half the time. A neighbour that passes both is named only
  // when it is also shaped like a liar (liar_shaped): an honest neighbour across a bridge (the
  // other clique of two) is dropped almost everywhere too, with nobody lying (measured: the
  // bridge peers of two cliques named each other from round 19 on).
  const auto n = static_cast<double>(own.size());
  double own_norm = -1.0;  // computed when first needed
  const double share = (1.0 + 2.0 * static_cast<double>(trim) / static_cast<double>(k)) / 2.0;
  std::vector<int> suspects;
  std::vector<std::int64_t> others;
  for (std::size_t j = 1; j < k; ++j) {
    const auto d = static_cast<double>(dropped[j]);
    if (d <= share * n) continue;
    others.clear();
    for (std::size_t l = 1; l < k; ++l)
      if (l != j) others.push_back(dropped[l]);
    double fellows = 0.0;  // none but this one: the first test alone
    if (!others.empty()) {
      std::sort(others.begin(), others.end());
      const std::size_t m = others.size();
      fellows = static_cast<double>(others[(m - 1) / 2] + others[m / 2]) / 2.0;
    }
    if (d - fellows <= (1.0 - share) * n) continue;
    // Its distance and this peer's norm, by the backend as clipped's are (a null message:
    // the norm).
    const float* pair[] = {in[j], nullptr};
    double dn[2] = {0.0, own_norm};
    buffer.distances(own, std::span<const float* const>(pair, own_norm < 0 ? 2 : 1), dn);
    own_norm = dn[1];
    if (liar_shaped(dn[0], own_norm, in[j], own)) suspects.push_back(peer[j]);
  }
  return suspects;
}

}  // namespace

std::vector<int> robust_average(std::span<const Term> terms, int self, std::span<const float> own,
                                const AggregateConfig& a, std::vector<float>& out,
                                PeerBuffer& buffer) {
  std::vector<const float*> in{own.data()};
  std::vector<int> peer{self};
  for (const Term& t : terms)
    if (t.peer != self) {
      in.push_back(t.host);
      peer.push_back(t.peer);
    }
  const std::size_t k = in.size();
  const std::size_t trim =
      a.kind == Aggregate::kTrimmedMean && 2 * static_cast<std::size_t>(a.byzantine) < k
          ? static_cast<std::size_t>(a.byzantine)
          : (k - 1) / 2;  // median: as many dropped at each end as leave one or two values
  out.resize(own.size());
  std::vector<std::int64_t> dropped(k, 0);
  if (k == 3 && trim == 1) {  // a ring: the median of three, without a sort (the same values)
    median_of_three(in[0], in[1], in[2], out, dropped);
  } else if (k <= kNetworkMax) {
    network_trim(in, trim, out, dropped);
  } else {
    generic_trim(in, trim, out, dropped);
  }
  return dropped_suspects(in, peer, dropped, trim, own, buffer);
}

}  // namespace gossip::mixing
