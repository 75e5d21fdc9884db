// net/link.cpp: a link's one place of changing state, and the table of links.
#include "src/net/link.hpp"

#include <stdexcept>
#include <utility>

#include "gossip/core.hpp"

namespace gossip::net {

void Link::become(LinkState next, const std::string& line) {
  if (!may_become(state_, next))
    throw std::logic_error(cat("link to peer ", peer_, ": ", link_state_name(state_),
                               " cannot become ", link_state_name(next)));
  const LinkLog log = link_state_row(next).log;
  if ((log == LinkLog::kAlways && line.empty()) || (log == LinkLog::kNever && !line.empty()))
    throw std::logic_error(cat("link to peer ", peer_, ": becoming ", link_state_name(next),
                               line.empty() ? " is always logged" : " is never logged"));
  state_ = next;
  mail_.set_state(peer_, next);
  if (!line.empty()) log_(line);
}

void Link::fail(LinkFailure failure) {
  failure_ = failure;
  mail_.note_failure(peer_, std::move(failure));
}

LinkTable::LinkTable(asio::io_context& io, int size, const std::vector<int>& neighbours,
                     Mailboxes& mail, Link::Log log)
    : log_(std::move(log)), neighbours_(neighbours), links_(size) {
  for (int p : neighbours_) links_[p] = std::make_unique<Link>(io, p, mail, log_);
}

Link* LinkTable::find(int peer) const {
  return peer >= 0 && peer < static_cast<int>(links_.size()) ? links_[peer].get() : nullptr;
}

}  // namespace gossip::net
