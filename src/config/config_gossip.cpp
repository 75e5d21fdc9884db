// config/config_gossip.cpp: the gossip: section (compressor, choco, outer step, aggregate,
// policies, wire), and its keys checked against the algorithms that read them.
#include "src/config/sections.hpp"

namespace gossip::sections {

/// gossip.choco.compress's form of a row: "{kind: top_k, fraction: F}", "{kind: none}".
std::string map_form(const CompressTraits& row) {
  switch (row.parameter) {
    case CompressParameter::kFraction: return cat("{kind: ", row.name, ", fraction: F}");
    case CompressParameter::kBits: return cat("{kind: ", row.name, ", bits: 8}");
    case CompressParameter::kNothing: break;
  }
  return cat("{kind: ", row.name, "}");
}

/// A compressor: {kind: top_k | random_k, fraction: F} or {kind: quantize, bits: 4 | 8}, or
/// {kind: none}. A field the kind does not take is an error, as is a fraction outside (0, 1].
CompressConfig read_compress(const Reader& r, const Node& n, const std::string& field) {
  if (!n.is_map())
    r.fail(n, field,
           cat("expected ", list_compressors(any_compressor, map_form), ", got ", n.describe()));
  CompressConfig c;
  bool fraction = false;
  bool bits = false;
  bool has_kind = false;
  r.each(n, field, Handlers{
      {"kind", [&](auto& v, auto& f) {
         const std::string name = r.text(v, f);
         if (!find_compress_kind(name, c.kind))
           r.fail(v, f, cat("unknown value '", name, "' (expected one of: ",
                            list_compressors(any_compressor),
                            ")"));
         has_kind = true;
       }},
      {"fraction", [&](auto& v, auto& f) {
         c.fraction = r.positive(v, f, false);
         if (c.fraction > 1) r.fail(v, f, cat("must be in (0, 1], got ", c.fraction));
         fraction = true;
       }},
      {"bits", [&](auto& v, auto& f) {
         c.bits = r.integer(v, f);
         if (c.bits != 4 && c.bits != 8) r.fail(v, f, cat("must be 4 or 8, got ", c.bits));
         bits = true;
       }},
  });
  if (!has_kind)
    r.fail(n, field, cat("a compressor needs its kind: ",
                         list_compressors(any_compressor)));
  // A key the kind does not take: "is for top_k and random_k, not quantize".
  const auto only_for = [&](CompressParameter parameter, const char* key) {
    if (traits(c.kind).parameter == parameter) return;
    const auto taking = [&](const CompressTraits& row) { return row.parameter == parameter; };
    r.fail_at(field + "." + key, cat("is for ", list_compressors(taking, "and"), ", not ",
                                     compress_kind_name(c.kind)));
  };
  if (fraction) only_for(CompressParameter::kFraction, "fraction");
  if (bits) only_for(CompressParameter::kBits, "bits");
  return c;
}

/// gossip.choco: CHOCO-SGD's compressor, consensus step and compressed exchanges a round.
void read_choco(const Reader& r, const Node& n, const std::string& field, ChocoConfig& c) {
  r.each(n, field, Handlers{
      {"compress", [&](auto& v, auto& f) { c.compress = read_compress(r, v, f); }},
      {"consensus_step", [&](auto& v, auto& f) {
         c.consensus_step = r.positive(v, f, false);
         if (c.consensus_step > 1) r.fail(v, f, cat("must be in (0, 1], got ", c.consensus_step));
       }},
      {"gossip_steps", [&](auto& v, auto& f) {
         c.gossip_steps = r.positive_int(v, f, false);
         if (c.gossip_steps > kMaxGossipSteps)
           r.fail(v, f, cat("must be at most ", kMaxGossipSteps, ", got ", c.gossip_steps));
       }},
  });
}

/// gossip.outer: {optimizer: nesterov, lr: LR, momentum: MU, compress: C, fragments: F}
/// (DiLoCo's outer step; local_sgd).
void read_outer(const Reader& r, const Node& n, const std::string& field, OuterConfig& c) {
  r.each(n, field, outer_handlers(r, c));
}

Handlers outer_handlers(const Reader& r, OuterConfig& c) {
  c.enabled = true;
  return Handlers{
      {"compress", [&](auto& v, auto& f) { c.compress = read_compress(r, v, f); }},
      {"fragments", [&](auto& v, auto& f) {
         c.fragments = r.positive_int(v, f, false);
         if (c.fragments > kMaxFragments)
           r.fail(v, f, cat("must be at most ", kMaxFragments, ", got ", c.fragments));
       }},
      {"optimizer", [&](auto& v, auto& f) { r.choice(v, f, {"nesterov"}); }},
      {"lr", [&](auto& v, auto& f) { c.lr = r.positive(v, f, false); }},
      {"momentum", [&](auto& v, auto& f) {
         c.momentum = r.positive(v, f, true);
         if (c.momentum >= 1) r.fail(v, f, cat("must be in [0, 1), got ", c.momentum));
       }},
  };
}

/// The keys gossip: held before they went to the sections of the rooms that read them: each is
/// refused there with its new place.
const Moved kMovedFromGossip = {
    {"compress", "gossip.choco.compress"},
    {"consensus_step", "gossip.choco.consensus_step"},
    {"gossip_steps", "gossip.choco.gossip_steps"},
    {"round_timeout_s", "monitor.round_timeout_s"},
    {"round_timeout_floor_s", "monitor.round_timeout_floor_s"},
    {"suspect_after_s", "monitor.suspect_after_s"},
    {"dead_after_rounds", "monitor.dead_after_rounds"},
    {"dead_after_s", "monitor.dead_after_s"},
    {"on_partition", "monitor.on_partition"},
};


/// gossip.aggregate: a name (`clipped`) or {kind: clipped, tau: T, ratio: R, byzantine: B}. tau
/// and ratio are clipped's alone (ratio its adaptive rule's), byzantine clipped's and
/// trimmed_mean's.
AggregateConfig read_aggregate(const Reader& r, const Node& n, const std::string& field) {
  AggregateConfig a;
  if (n.is_scalar()) {
    a.kind = r.named(n, field, aggregate_table());
    return a;
  }
  bool tau = false, ratio = false, byzantine = false;
  r.each(n, field, Handlers{
      {"kind", [&](auto& v, auto& f) { a.kind = r.named(v, f, aggregate_table()); }},
      {"tau", [&](auto& v, auto& f) {
         a.tau = r.positive(v, f, false);
         tau = true;
       }},
      {"ratio", [&](auto& v, auto& f) {
         a.ratio = r.number(v, f);
         if (!(a.ratio >= 1.0) || !std::isfinite(a.ratio))
           r.fail(v, f, cat("must be a number >= 1, got ", a.ratio));
         ratio = true;
       }},
      {"byzantine", [&](auto& v, auto& f) {
         a.byzantine = r.integer_in(v, f, 0, 64);
         byzantine = true;
       }},
  });
  const AggregateTraits& row = traits(a.kind);
  const auto takes_tau = [](const AggregateTraits& t) { return t.tau; };
  const auto takes_b = [](const AggregateTraits& t) { return t.byzantine; };
  if (tau && !row.tau)
    r.fail_at(field + ".tau", cat("is for ", choice_list_if(aggregate_table(), takes_tau, "and"),
                                  ", not ", row.name));
  if (ratio && !row.tau)
    r.fail_at(field + ".ratio", cat("is for ", choice_list_if(aggregate_table(), takes_tau, "and"),
                                    ", not ", row.name));
  if (ratio && tau)
    r.fail_at(field + ".ratio", "is the adaptive radius's; with a fixed tau it has no use");
  if (byzantine && !row.byzantine)
    r.fail_at(field + ".byzantine",
              cat("is for ", choice_list_if(aggregate_table(), takes_b, "and"), ", not ",
                  row.name));
  return a;
}

void read_gossip(const Reader& r, const Node& n, GossipConfig& g) {
  r.each(n, "gossip", Handlers{
      {"topology", [&](auto& v, auto& f) { g.topology = r.path(v, f); }},
      {"algorithm", [&](auto& v, auto& f) {
         g.algorithm = r.algorithm(v, f);
       }},
      {"choco", [&](auto& v, auto& f) { read_choco(r, v, f, g.choco); }},
      {"overlap", [&](auto& v, auto& f) { g.overlap = r.boolean(v, f); }},
      {"outer", [&](auto& v, auto& f) { read_outer(r, v, f, g.outer); }},
      {"aggregate", [&](auto& v, auto& f) { g.aggregate = read_aggregate(r, v, f); }},
      {"on_byzantine", [&](auto& v, auto& f) { g.on_byzantine = r.named(v, f, byzantine_policy_table()); }},
      {"wire", [&](auto& v, auto& f) { g.wire = r.named(v, f, wire_format_table()); }},
      {"period", [&](auto& v, auto& f) { g.period = r.positive_int(v, f, false); }},
      {"max_staleness", [&](auto& v, auto& f) { g.max_staleness = r.positive_int(v, f, true); }},
  }, kMovedFromGossip);
}

namespace {

/// A robust aggregate: every algorithm that runs with it must take it. gossip.aggregate runs
/// with gossip.algorithm and any the sweep lists; compare.aggregates with the sweep's.
void check_robust_aggregates(const RunConfig& cfg) {
  const GossipConfig& g = cfg.gossip;
  std::vector<AlgorithmKind> runs{g.algorithm};
  runs.insert(runs.end(), cfg.compare.algorithms.begin(), cfg.compare.algorithms.end());
  const std::vector<AlgorithmKind> swept =
      cfg.compare.algorithms.empty() ? runs : cfg.compare.algorithms;
  std::vector<std::tuple<std::string, Aggregate, const std::vector<AlgorithmKind>*>> uses{
      {"gossip.aggregate", g.aggregate.kind, &runs}};
  for (std::size_t i = 0; i < cfg.compare.aggregates.size(); ++i)
    uses.emplace_back(cat("compare.aggregates[", i, "]"), cfg.compare.aggregates[i].kind, &swept);
  for (const auto& [field, kind, algorithms] : uses)
    for (AlgorithmKind a : *algorithms)
      if (const char* why = traits(a).not_robust; why && traits(kind).robust)
        throw InputError(cat(cfg.where(field), ": ", aggregate_name(kind), " is for ",
                             choice_list_if(std::span(algorithm_table()),
                                            [](const AlgorithmTraits& t) { return !t.not_robust; },
                                            "and"),
                             ", not ", algorithm_name(a), ": ", why));
}

/// dct_top_k is the outer step's alone (choco's public copies take a packet's coordinates as
/// they are, and dct_top_k's are DCT coefficients); the outer compressor's packets are fp32 and
/// mixed as the plain mean of what the peers decode.
void check_outer_compress(const RunConfig& cfg) {
  const GossipConfig& g = cfg.gossip;
  const auto dct_refusal = [&](const std::string& field) {
    throw InputError(cat(cfg.where(field), ": dct_top_k sends DCT coefficients of DiLoCo's "
                         "pseudo-gradient, which choco's public copies cannot take; use it as "
                         "gossip.outer.compress (local_sgd with gossip.outer)"));
  };
  if (g.choco.compress.kind == CompressKind::kDctTopK) dct_refusal("gossip.choco.compress");
  for (const CompressConfig& c : cfg.compare.compress)
    if (c.kind == CompressKind::kDctTopK) dct_refusal("compare.compress");
  if (!outer_packets(g)) return;
  const char* key = g.outer.compress.kind != CompressKind::kNone ? "gossip.outer.compress"
                                                                  : "gossip.outer.fragments";
  if (g.wire != WireFormat::kFp32)
    throw InputError(cat(cfg.where("gossip.wire"), ": ", key, " sends its own packets (fp32 "
                         "values, or quantize's codes); set gossip.wire: fp32"));
  if (traits(g.aggregate.kind).robust)
    throw InputError(cat(cfg.where("gossip.aggregate"), ": ", aggregate_name(g.aggregate.kind),
                         " weighs whole parameter messages; ", key, " sends packets of "
                         "pseudo-gradients or fragments, so leave gossip.aggregate out"));
}

}  // namespace

/// Keys that only some algorithms take, checked once the whole file is read (the algorithm may
/// come after them). A sweep (compare.algorithms) may list an algorithm that takes them.
void check_gossip_keys(const RunConfig& cfg) {
  const GossipConfig& g = cfg.gossip;
  const char* name = algorithm_name(g.algorithm);
  // Whether the algorithm, or one the sweep lists, has the trait.
  auto takes = [&](bool AlgorithmTraits::*trait) {
    if (traits(g.algorithm).*trait) return true;
    for (AlgorithmKind a : cfg.compare.algorithms)
      if (traits(a).*trait) return true;
    return false;
  };
  auto any_whole_buffers = [&] {
    if (!traits(g.algorithm).compresses) return true;
    for (AlgorithmKind a : cfg.compare.algorithms)
      if (!traits(a).compresses) return true;
    return false;
  };
  const bool compresses = takes(&AlgorithmTraits::compresses);
  if (cfg.lines.count("gossip.choco.compress") && !compresses)
    throw InputError(cat(cfg.where("gossip.choco.compress"), ": compression is for "
                         "gossip.algorithm: choco; ", name, " sends whole parameter buffers"));
  if (!cfg.compare.compress.empty() && !compresses)
    throw InputError(cat(cfg.where("compare.compress"), ": compressors are swept for "
                         "gossip.algorithm: choco, which neither gossip.algorithm nor "
                         "compare.algorithms names"));
  if (cfg.lines.count("gossip.choco.consensus_step") && !compresses)
    throw InputError(cat(cfg.where("gossip.choco.consensus_step"), ": the consensus step is "
                         "choco's; ", name, " does not take one"));
  if (g.choco.gossip_steps != 1 && !compresses)
    throw InputError(cat(cfg.where("gossip.choco.gossip_steps"), ": several compressed "
                         "exchanges a round are choco's; ", name, " exchanges once a round"));
  // In a sweep beside an algorithm that sends whole buffers the wire is theirs (compare keeps
  // choco at fp32 unless its compressor is top_k or random_k).
  if (g.wire != WireFormat::kFp32 && compresses && !traits(g.choco.compress.kind).halves &&
      !any_whole_buffers())
    throw InputError(
        cat(cfg.where("gossip.wire"), ": ", wire_halves_refusal(g.wire, g.choco.compress.kind)));
  check_outer_compress(cfg);
  check_robust_aggregates(cfg);
  if (g.overlap && !takes(&AlgorithmTraits::overlaps))
    throw InputError(cat(cfg.where("gossip.overlap"), ": overlap is for dpsgd and local_sgd, "
                         "not ", name));
  if (cfg.sim.message_loss > 0 && takes(&AlgorithmTraits::needs_every_message)) {
    AlgorithmKind strict = g.algorithm;
    for (AlgorithmKind a : cfg.compare.algorithms)
      if (!traits(strict).needs_every_message && traits(a).needs_every_message) strict = a;
    throw InputError(cat(cfg.where("sim.message_loss"), ": ", algorithm_name(strict),
                         " needs every message (a lost one leaves the peers' copies out of "
                         "step); set message_loss to 0"));
  }
}

}  // namespace gossip::sections

namespace gossip {

const CompressConfig* packet_compressor(const GossipConfig& g) {
  if (traits(g.algorithm).compresses) return &g.choco.compress;
  if (traits(g.algorithm).outer_step && g.outer.enabled && g.outer.compress.kind != CompressKind::kNone)
    return &g.outer.compress;
  return nullptr;
}

bool outer_packets(const GossipConfig& g) {
  return traits(g.algorithm).outer_step && g.outer.enabled &&
         (g.outer.compress.kind != CompressKind::kNone || g.outer.fragments > 1);
}

Aggregate parse_aggregate(const std::string& text, const std::string& what) {
  return parse_choice(aggregate_table(), text, what);
}

std::string describe(const AggregateConfig& a) {
  const AggregateTraits& row = traits(a.kind);
  std::string s = row.name;
  if (row.tau && a.tau > 0) return cat(s, ", tau ", a.tau);  // a fixed radius: b has no use
  if (row.tau) s += cat(", adaptive tau, ratio ", a.ratio);
  if (row.byzantine) s += cat(", byzantine ", a.byzantine);
  return s;
}

std::string describe_choco(const ChocoConfig& c) {
  return cat(describe(c.compress), ", gamma ", consensus_step(c),
             c.gossip_steps > 1 ? cat(", ", c.gossip_steps, " gossip steps a round") : "");
}

WireFormat parse_wire_format(const std::string& text, const std::string& what) {
  return parse_choice(wire_format_table(), text, what);
}

}  // namespace gossip
