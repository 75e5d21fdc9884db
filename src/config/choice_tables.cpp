// config/choice_tables.cpp: the rows of the run config's smaller named choices as data: the
// aggregation rules, the policies and the fault schedule's actions (the algorithms,
// compressors and attacks have a file each; the choices without traits are whole in their
// header, GOSSIP_NAMED_CHOICE). The loader names each choice once
// through its table; everything after it goes by the enum and the row's traits.
#include <array>

#include "gossip/choice.hpp"
#include "gossip/config.hpp"
#include "gossip/core.hpp"

namespace gossip {

std::span<const AggregateTraits> aggregate_table() {
  static constexpr std::array rows{
#define GOSSIP_AGGREGATE_ROW(id, name, tau, byzantine, robust, summary) \
  AggregateTraits{Aggregate::id, name, tau, byzantine, robust, summary},
      GOSSIP_AGGREGATES(GOSSIP_AGGREGATE_ROW)
#undef GOSSIP_AGGREGATE_ROW
  };
  return rows;
}

const AggregateTraits& traits(Aggregate a) { return choice_row(aggregate_table(), a); }

const char* aggregate_name(Aggregate a) { return traits(a).name; }

std::span<const PolicyRow<ByzantinePolicy>> byzantine_policy_table() {
  using Row = NamedRow<ByzantinePolicy>;
  static constexpr std::array rows{GOSSIP_BYZANTINE_POLICIES(GOSSIP_NAMED_ROW)};
  return rows;
}

std::span<const PolicyRow<PartitionPolicy>> partition_policy_table() {
  using Row = NamedRow<PartitionPolicy>;
  static constexpr std::array rows{GOSSIP_PARTITION_POLICIES(GOSSIP_NAMED_ROW)};
  return rows;
}

const char* policy_name(ByzantinePolicy policy) {
  return choice_row(byzantine_policy_table(), policy).name;
}

const char* policy_name(PartitionPolicy policy) {
  return choice_row(partition_policy_table(), policy).name;
}

std::span<const FaultActionTraits> fault_action_table() {
  static constexpr std::array rows{
#define GOSSIP_FAULT_ACTION_ROW(id, name, links, spans, change, signal, summary) \
  FaultActionTraits{FaultAction::id, name, links, spans, change, signal, summary},
      GOSSIP_FAULT_ACTIONS(GOSSIP_FAULT_ACTION_ROW)
#undef GOSSIP_FAULT_ACTION_ROW
  };
  return rows;
}

const FaultActionTraits& traits(FaultAction action) {
  if (action == FaultAction::kNone) throw InputError("a fault entry with no action has no traits");
  return choice_row(fault_action_table(), action);
}

const char* fault_action_name(FaultAction action) {
  return action == FaultAction::kNone ? "none" : traits(action).name;
}

}  // namespace gossip
