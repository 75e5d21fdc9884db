// config/fault_action_table.cpp: the rows of GOSSIP_FAULT_ACTIONS as data. The loader names a
// fault's action once through this table; the launcher, the simulator and the fault decorators
// go by the enum and its traits.
#include <array>

#include "gossip/config.hpp"
#include "gossip/core.hpp"

namespace gossip {

std::span<const FaultActionTraits> fault_action_table() {
  static constexpr std::array rows{
#define GOSSIP_FAULT_ACTION_ROW(id, name, links, spans, membership, signal, summary) \
  FaultActionTraits{FaultAction::id, name, links, spans, membership, signal, summary},
      GOSSIP_FAULT_ACTIONS(GOSSIP_FAULT_ACTION_ROW)
#undef GOSSIP_FAULT_ACTION_ROW
  };
  return rows;
}

const FaultActionTraits& traits(FaultAction action) {
  if (action == FaultAction::kNone) throw InputError("a fault entry with no action has no traits");
  return fault_action_table()[static_cast<std::size_t>(action) - 1];
}

const char* fault_action_name(FaultAction action) {
  return action == FaultAction::kNone ? "none" : traits(action).name;
}

}  // namespace gossip
