/// compress_table: every compressor of compressed gossip (gossip.choco.compress) as one row, the
/// only place a compressor is named. The config parses gossip.choco.compress and --compress once
/// into a CompressKind; what differs between compressors outside their encoders (which parameter
/// a kind takes, whether its values may travel at 16 bits, its default consensus step) is the
/// row's. A new compressor is its encoder (gossip/compress.hpp), a packet kind if it needs one
/// (gossip/packet.hpp, read by PacketReader), one row here, its docs and a test.
#pragma once
#if !defined(GOSSIP_ROOM_CONFIG)
#error "gossip/compress_table.hpp belongs to room config, which this room does not use (see the room table in meson.build)"
#endif

#include <string>
#include <vector>

#include "gossip/choice.hpp"
#include "gossip/half.hpp"

namespace gossip {

/// What a compressor takes beside its kind.
enum class CompressParameter {
  kNothing,   // nothing
  kFraction,  // fraction: the share of the coordinates sent, in (0, 1] (a sparse compressor)
  kBits,      // bits: 4 or 8 a coordinate
};

// One row per compressor:
//   X(enum id, name, parameter, halves, default consensus step, one line for docs and --help)
// halves: its values may travel at gossip.wire bf16 or fp16; the default consensus step is an
// expression of `c`, the CompressConfig (docs/config.md says where each default comes from).
#define GOSSIP_COMPRESSORS(X)                                                                    \
  X(kNone, "none", kNothing, false, 1.0, "every coordinate, as float32")                         \
  X(kTopK, "top_k", kFraction, true, std::min(1.0, 10.0 * c.fraction),                           \
    "the largest fraction of the coordinates by magnitude, indices and values")                  \
  X(kRandomK, "random_k", kFraction, true, std::min(1.0, 2.0 * c.fraction),                      \
    "a fraction of the coordinates drawn from (seed, peer, round)")                              \
  X(kQuantize, "quantize", kBits, false, c.bits == 8 ? 0.9 : 0.5,                                \
    "every coordinate as a 4- or 8-bit code against its block's largest magnitude")              \
  X(kDctTopK, "dct_top_k", kFraction, false, 1.0,                                                \
    "DeMo's: the largest fraction of the DCT coefficients (chunks of 64) by magnitude, for "     \
    "gossip.outer.compress")

enum class CompressKind { GOSSIP_COMPRESSORS(GOSSIP_CHOICE_ENUM) };

struct CompressTraits {
  CompressKind kind;
  const char* name;
  CompressParameter parameter;
  bool halves;
  const char* summary;
};

/// Every row, in the table's order.
const std::vector<CompressTraits>& compress_table();
/// The row of `kind`.
const CompressTraits& traits(CompressKind kind);
/// "none", "top_k", "random_k", "quantize": the kind's name in configs, --compress and reports.
const char* compress_kind_name(CompressKind kind);
/// The compressor named `name`; false when none is.
bool find_compress_kind(const std::string& name, CompressKind& kind);
/// The compressors whose row passes `keep`, each as `form` writes it (its name unless given),
/// listed "a, b or c" (or "a, b and c" with joiner "and"): messages name compressors this way,
/// so a new row shows up in them.
template <typename Keep, typename Form>
std::string list_compressors(Keep keep, Form form, const char* joiner = "or") {
  std::vector<std::string> items;
  for (const CompressTraits& row : compress_table())
    if (keep(row)) items.push_back(form(row));
  std::string list;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i > 0 && i + 1 == items.size()) {
      list += ' ';
      list += joiner;
      list += ' ';
    } else if (i > 0) {
      list += ", ";
    }
    list += items[i];
  }
  return list;
}
template <typename Keep>
std::string list_compressors(Keep keep, const char* joiner = "or") {
  return list_compressors(keep, [](const CompressTraits& row) { return std::string(row.name); },
                          joiner);
}
/// Why gossip.wire `wire` (bf16, fp16) does not go with compressor `kind`, whose row says it
/// takes no 16-bit values: "bf16 with choco rounds the values that top_k or random_k keep;
/// quantize sends ..., so set gossip.wire: fp32".
std::string wire_halves_refusal(WireFormat wire, CompressKind kind);
/// Keeps every row (list_compressors).
inline bool any_compressor(const CompressTraits&) { return true; }

}  // namespace gossip
