// config/compress_table.cpp: the rows of GOSSIP_COMPRESSORS as data, and what is said of a
// compressor from its row: its name, --compress's parser and printer, its default consensus step.
// Messages list the compressors from the table, so a new row shows up in them.
#include "gossip/compress_table.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "gossip/config.hpp"
#include "gossip/core.hpp"

namespace gossip {

const std::vector<CompressTraits>& compress_table() {
  static const std::vector<CompressTraits> rows{
#define GOSSIP_COMPRESSOR_ROW(id, name, parameter, halves, step, summary) \
  {CompressKind::id, name, CompressParameter::parameter, halves, summary},
      GOSSIP_COMPRESSORS(GOSSIP_COMPRESSOR_ROW)
#undef GOSSIP_COMPRESSOR_ROW
  };
  return rows;
}

const CompressTraits& traits(CompressKind kind) {
  return compress_table().at(static_cast<std::size_t>(kind));
}

const char* compress_kind_name(CompressKind kind) { return traits(kind).name; }

bool find_compress_kind(const std::string& name, CompressKind& kind) {
  for (const auto& row : compress_table())
    if (name == row.name) {
      kind = row.kind;
      return true;
    }
  return false;
}

std::string wire_halves_refusal(WireFormat wire, CompressKind kind) {
  const auto halves = [](const CompressTraits& row) { return row.halves; };
  return cat(wire_format_name(wire), " with choco rounds the values that ",
             list_compressors(halves), " keep; ", compress_kind_name(kind), " sends ",
             traits(kind).summary, ", so set gossip.wire: fp32");
}

std::string describe(const CompressConfig& c) {
  const char* name = compress_kind_name(c.kind);
  switch (traits(c.kind).parameter) {
    case CompressParameter::kFraction: return cat(name, " ", c.fraction);
    case CompressParameter::kBits: return cat(name, " ", c.bits, " bits");
    case CompressParameter::kNothing: break;
  }
  return name;
}

namespace {

/// --compress's form of a row: "top_k:FRACTION", "quantize:BITS", "none".
std::string argument_form(const CompressTraits& row) {
  switch (row.parameter) {
    case CompressParameter::kFraction: return cat(row.name, ":FRACTION");
    case CompressParameter::kBits: return cat(row.name, ":BITS");
    case CompressParameter::kNothing: break;
  }
  return row.name;
}

}  // namespace

CompressConfig parse_compress(const std::string& text, const std::string& what) {
  const auto colon = text.find(':');
  const std::string name = text.substr(0, colon);
  const std::string value = colon == std::string::npos ? "" : text.substr(colon + 1);
  CompressConfig c;
  if (!find_compress_kind(name, c.kind))
    throw InputError(cat(what, ": unknown compressor '", name, "' in '", text, "' (expected ",
                         list_compressors(any_compressor, argument_form), ")"));
  const CompressParameter parameter = traits(c.kind).parameter;
  if (parameter == CompressParameter::kNothing) {
    if (colon != std::string::npos)
      throw InputError(cat(what, ": '", name, "' takes no value, got '", text, "'"));
    return c;
  }
  const bool fraction = parameter == CompressParameter::kFraction;
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(value.c_str(), &end);
  if (value.empty() || *end != '\0' || errno == ERANGE || !std::isfinite(v))
    throw InputError(cat(what, ": ", name, " needs ", fraction ? "a fraction" : "its bits",
                         " after the colon (", name, fraction ? ":0.01" : ":8", "), got '", text,
                         "'"));
  if (fraction) {
    if (!(v > 0) || v > 1)
      throw InputError(cat(what, ": ", name, " fraction must be in (0, 1], got ", value));
    c.fraction = v;
  } else {
    if (v != 4 && v != 8)
      throw InputError(cat(what, ": ", name, " bits must be 4 or 8, got ", value));
    c.bits = static_cast<int>(v);
  }
  return c;
}

std::string compress_argument(const CompressConfig& c) {
  const char* name = compress_kind_name(c.kind);
  switch (traits(c.kind).parameter) {
    case CompressParameter::kFraction: {
      char fraction[64];
      std::snprintf(fraction, sizeof fraction, "%.17g", c.fraction);
      return cat(name, ":", fraction);
    }
    case CompressParameter::kBits: return cat(name, ":", c.bits);
    case CompressParameter::kNothing: break;
  }
  return name;
}

double default_consensus_step(const CompressConfig& c) {
  switch (c.kind) {
#define GOSSIP_COMPRESSOR_STEP(id, name, parameter, halves, step, summary) \
  case CompressKind::id: return step;
    GOSSIP_COMPRESSORS(GOSSIP_COMPRESSOR_STEP)
#undef GOSSIP_COMPRESSOR_STEP
  }
  return 1.0;
}

double consensus_step(const ChocoConfig& c) {
  if (c.consensus_step > 0) return c.consensus_step;
  // Several sparsified exchanges a round compound the step: top_k 1% with 3 or 5 of them
  // diverged at its one-step default of 0.1 and trained at 0.05. 8-bit quantize with 3 kept
  // its 0.9 stable and ended higher there than at 0.45 (docs/compression.md), so it keeps it.
  const bool compounded = c.gossip_steps > 1 && c.compress.sparse();
  return default_consensus_step(c.compress) * (compounded ? 0.5 : 1.0);
}

}  // namespace gossip
