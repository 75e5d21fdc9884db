// net/link_failure.cpp: the words of a failed connect, and the kind a refusal gives a link.
#include "src/net/link_failure.hpp"

#include <asio.hpp>

#include "gossip/core.hpp"

namespace gossip::net {

LinkFailure connect_failure(const std::error_code& ec, bool late, std::chrono::milliseconds within,
                            const std::string& address) {
  LinkFailureKind kind = LinkFailureKind::kConnectFailed;
  if (late || ec == asio::error::timed_out) kind = LinkFailureKind::kTimedOut;
  else if (ec == asio::error::connection_refused) kind = LinkFailureKind::kRefused;
  else if (ec == asio::error::host_unreachable || ec == asio::error::network_unreachable)
    kind = LinkFailureKind::kNoRoute;
  const std::string what =
      late ? cat("no answer within ", within.count(), " ms") : ec.message();
  return {kind, cat(link_failure_name(kind), address.empty() ? "" : " dialling ", address, " (",
                    what, ")")};
}

LinkFailureKind failure_of(wire::RefusalKind refusal) {
  switch (refusal) {
    case wire::RefusalKind::kModel: return LinkFailureKind::kModel;
    case wire::RefusalKind::kTopology: return LinkFailureKind::kTopology;
    case wire::RefusalKind::kIdentity: return LinkFailureKind::kIdentity;
    default: return LinkFailureKind::kHandshakeRefused;
  }
}

}  // namespace gossip::net
