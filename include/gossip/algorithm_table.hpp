/// algorithm_table: every gossip algorithm as one row, the only place an algorithm is named.
/// gossip.algorithm is parsed once (src/config) into an AlgorithmKind; everything downstream asks
/// the row's traits (which graphs, which keys apply, what the simulator must schedule) instead of
/// comparing names. A new algorithm is its source file (a class and its make_ function, in
/// src/gossip), one row here, its docs and a test: the enum, the name table, the traits and
/// make_algorithm's dispatch all come from GOSSIP_ALGORITHMS.
#pragma once
#if !defined(GOSSIP_ROOM_CONFIG)
#error "gossip/algorithm_table.hpp belongs to room config, which this room does not use (see the room table in meson.build)"
#endif

#include <string>
#include <vector>

#include "gossip/choice.hpp"

namespace gossip {

/// Which mixing weights an algorithm needs of every round of the topology.
enum class WeightsNeed {
  kRows,       // row-stochastic (pull: a peer's in-weights and self weight sum to 1)
  kColumns,    // column-stochastic (push-sum: out-weights sum to 1), so directed graphs work
  kFixedRows,  // row-stochastic and the same graph every round (CHOCO's public copies)
  kFixedSymmetric,  // symmetric, doubly stochastic, the same every round, and no eigenvalue at or
                    // below -1/3 (D²'s correction settles only then; gradient_tracking)
  kNone,       // the graph's weights are not used (all-reduce's ring over all peers)
};

// One row per algorithm: X(enum id, name, make_ function (src/gossip), {traits}), the traits an
// AlgorithmTraits initializer naming each field it sets, in the struct's order, so a trait out of
// order or misspelt does not compile. A flag a row leaves out is false and a left-out not_robust
// is nullptr; weights and summary every row names. The traits' commas make them several macro
// arguments: an X takes them as `...`.
#define GOSSIP_ALGORITHMS(X)                                                                       \
  X(kDpsgd, "dpsgd", make_dpsgd,                                                                   \
    {.weights = WeightsNeed::kRows,                                                                \
     .overlaps = true,                                                                             \
     .elastic = true,                                                                              \
     .partial_buffers = true,                                                                      \
     .summary = "D-PSGD: local steps, then average with the in-neighbours"})                       \
  X(kLocalSgd, "local_sgd", make_local_sgd,                                                        \
    {.weights = WeightsNeed::kRows,                                                                \
     .overlaps = true,                                                                             \
     .elastic = true,                                                                              \
     .outer_step = true,                                                                           \
     .partial_buffers = true,                                                                      \
     .summary = "local SGD: gossip.period local steps between averagings"})                        \
  X(kPushSum, "push_sum", make_push_sum,                                                           \
    {.weights = WeightsNeed::kColumns,                                                             \
     .not_robust = "its messages carry push-sum weights whose total must stay n; a clipped or "    \
                   "trimmed message would change it",                                              \
     .summary = "push-sum (SGP): directed graphs, column-stochastic weights"})                     \
  X(kAsync, "async", make_async_gossip,                                                            \
    {.weights = WeightsNeed::kRows,                                                                \
     .stale_rounds = true,                                                                         \
     .summary = "asynchronous gossip: mixes the latest rounds up to gossip.max_staleness old"})    \
  X(kChoco, "choco", make_choco,                                                                   \
    {.weights = WeightsNeed::kFixedRows,                                                           \
     .compresses = true,                                                                           \
     .needs_every_message = true,                                                                  \
     .not_robust = "it mixes public copies built from compressed differences, not the "            \
                   "neighbours' messages",                                                         \
     .summary = "CHOCO-SGD: compressed differences against public copies"})                        \
  X(kAllreduce, "allreduce", make_allreduce,                                                       \
    {.weights = WeightsNeed::kNone,                                                                \
     .needs_every_message = true,                                                                  \
     .ring = true,                                                                                 \
     .not_robust = "it sums chunks relayed round a ring into the exact average; no peer mixes "    \
                   "its neighbours",                                                               \
     .summary = "ring all-reduce over all peers (the exact-average baseline)"})                    \
  X(kGradientTracking, "gradient_tracking", make_gradient_tracking,                                \
    {.weights = WeightsNeed::kFixedSymmetric,                                                      \
     .needs_every_message = true,                                                                  \
     .not_robust = "its messages are models plus a correction whose sum over the peers must stay " \
                   "zero; a clipped or trimmed message would change it",                           \
     .summary = "D² gradient tracking: D-PSGD whose messages carry a correction for skewed "       \
                "shards"})

enum class AlgorithmKind { GOSSIP_ALGORITHMS(GOSSIP_CHOICE_ENUM) };

/// One algorithm's row. kind and name come from the row's id and name; the rest from its traits.
struct AlgorithmTraits {
  AlgorithmKind kind{};
  const char* name = "";
  WeightsNeed weights;
  // Takes gossip.choco (compress, consensus_step, gossip_steps; keeps public copies in its
  // checkpoints).
  bool compresses = false;
  bool overlaps = false;             // takes gossip.overlap
  bool needs_every_message = false;  // refuses sim.message_loss
  // Mixes rounds up to gossip.max_staleness old, so the simulator keeps that many more in flight.
  bool stale_rounds = false;
  // Relays through ring neighbours outside the graph (all-reduce's 2 (n - 1) hops a round), which
  // peers must connect and queue rounds for.
  bool ring = false;
  // Its peers may join and leave while it runs (each member graph's weights are symmetric pulls).
  bool elastic = false;
  bool outer_step = false;  // takes gossip.outer (DiLoCo's outer step over its rounds)
  // A round may mix part of the buffer and leave the rest as it is (the Python optimizer's
  // buffer_period: BatchNorm statistics mixed every k rounds).
  bool partial_buffers = false;
  // nullptr when it takes gossip.aggregate other than mean (it mixes its neighbours' whole
  // parameters with a row-stochastic W), else why it cannot.
  const char* not_robust = nullptr;
  const char* summary;  // one line for docs and --help
};

/// Every row, in the table's order.
const std::vector<AlgorithmTraits>& algorithm_table();
/// The row of `kind`.
const AlgorithmTraits& traits(AlgorithmKind kind);
/// The name configs and reports use: "dpsgd", "choco", ...
const char* algorithm_name(AlgorithmKind kind);
/// "dpsgd, local_sgd, push_sum, async, choco, allreduce or gradient_tracking", for messages and
/// --help.
std::string algorithm_choices();
/// The algorithm named `text`. Throws InputError "WHAT: unknown algorithm 'X' (expected ...)".
AlgorithmKind parse_algorithm(const std::string& text, const std::string& what);

}  // namespace gossip
