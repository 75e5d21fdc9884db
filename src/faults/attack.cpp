// faults/attack.cpp: Attack, the fault schedule's attacks as an Exchange decorator: an attacking
// peer's outgoing parameters rewritten from its own and what it legitimately received (the
// formulas: gossip/faults.hpp, docs/config.md#attacks), and FaultedExchange, which stacks the
// schedule's decorators over a transport alike for a real peer and the simulator.
#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "gossip/faults.hpp"
#include "gossip/rng.hpp"

namespace gossip {
namespace {

/// mean(H) and, when `sd` is given, sd(H) (1/|H|), coordinate-wise, summed in double in H's
/// order (ascending sender).
void moments(const std::vector<std::span<const float>>& h, std::vector<double>& mean,
             std::vector<double>* sd) {
  const std::size_t n = h.front().size();
  const double k = static_cast<double>(h.size());
  mean.assign(n, 0.0);
  for (const auto& m : h)
    for (std::size_t i = 0; i < n; ++i) mean[i] += m[i];
  for (double& v : mean) v /= k;
  if (!sd) return;
  sd->assign(n, 0.0);
  for (const auto& m : h)
    for (std::size_t i = 0; i < n; ++i) {
      const double d = m[i] - mean[i];
      (*sd)[i] += d * d;
    }
  for (double& v : *sd) v = std::sqrt(v / k);
}

}  // namespace

Attack::Attack(Exchange& inner, std::span<const Fault> faults, std::uint64_t seed)
    : ForwardingExchange(inner), seed_(seed) {
  for (const Fault& f : faults)
    if (f.action == FaultAction::kAttack) attacks_.push_back(f);
}

std::vector<Inbox> Attack::collect(std::int64_t round, std::span<const int> from,
                                   const CollectOptions& options) {
  std::vector<Inbox> got = inner_->collect(round, from, options);
  heard_.clear();
  for (const Inbox& in : got) {
    if (in.params.empty() || attack_of(attacks_, in.peer, in.round / tags_per_round_)) continue;
    heard_.push_back(Heard{in.peer, std::vector<float>(in.params.begin(), in.params.end())});
  }
  return got;
}

void Attack::publish(std::int64_t round, std::span<const float> params, double weight,
                     std::span<const int> to) {
  const Fault* fault = attack_of(attacks_, inner_->rank(), round / tags_per_round_);
  if (!fault) return inner_->publish(round, params, weight, to);
  rewrite(*fault, round / tags_per_round_, params, to);
  if (fault->attack != AttackKind::kDissensus)
    return inner_->publish(round, sent_.front(), weight, to);
  for (std::size_t k = 0; k < to.size(); ++k)
    inner_->publish(round, sent_[k], weight, std::span<const int>(&to[k], 1));
}

void Attack::rewrite(const Fault& fault, std::int64_t round, std::span<const float> x,
                     std::span<const int> to) {
  const std::size_t n = x.size();
  const double p = fault.parameter;
  std::vector<std::span<const float>> h;  // H, or {x} when nothing was heard
  for (const Heard& m : heard_)
    if (m.params.size() == n) h.emplace_back(m.params);
  if (h.empty()) h.push_back(x);
  const bool dissensus = fault.attack == AttackKind::kDissensus;
  sent_.resize(dissensus ? to.size() : 1);
  for (auto& s : sent_) s.resize(n);
  std::vector<float>& out = sent_.front();
  std::vector<double> mean, sd;
  switch (fault.attack) {
    case AttackKind::kSignFlip:
      for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<float>(-p * x[i]);
      break;
    case AttackKind::kScale:
      for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<float>(p * x[i]);
      break;
    case AttackKind::kNoise: {
      // One stream a round, so any round's noise is the same whatever came before it.
      std::mt19937_64 g(mix64(derive_seed(seed_, static_cast<std::uint64_t>(inner_->rank()),
                                          Stream::kAttack) ^
                              static_cast<std::uint64_t>(round)));
      for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<float>(p * normal01(g));
      break;
    }
    case AttackKind::kAlie:
      moments(h, mean, &sd);
      for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<float>(mean[i] - p * sd[i]);
      break;
    case AttackKind::kIpm:
      moments(h, mean, nullptr);
      for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<float>(-p * mean[i]);
      break;
    case AttackKind::kDissensus:
      moments(h, mean, nullptr);
      for (std::size_t k = 0; k < to.size(); ++k) {
        std::span<const float> v = x;  // the recipient's own message, as heard
        for (const Heard& m : heard_)
          if (m.peer == to[k] && m.params.size() == n) v = m.params;
        for (std::size_t i = 0; i < n; ++i)
          sent_[k][i] = static_cast<float>(v[i] - p * (mean[i] - v[i]));
      }
      break;
    case AttackKind::kNan:
      std::fill(out.begin(), out.end(), std::numeric_limits<float>::quiet_NaN());
      break;
    case AttackKind::kInf:
      std::fill(out.begin(), out.end(), std::numeric_limits<float>::infinity());
      break;
    case AttackKind::kNone:
      std::copy(x.begin(), x.end(), out.begin());
      break;
  }
}

FaultedExchange::FaultedExchange(Exchange& transport, MembershipChannel& channel,
                                 std::span<const Fault> faults, std::uint64_t seed)
    : top_(&transport), membership_(&channel) {
  if (has_cuts(faults)) {
    cuts_ = std::make_unique<CutLinks>(*top_, channel, faults);
    top_ = cuts_.get();
    membership_ = cuts_.get();
  }
  if (attacks(faults, transport.rank())) {
    attack_ = std::make_unique<Attack>(*top_, faults, seed);
    top_ = attack_.get();
  }
}

}  // namespace gossip
