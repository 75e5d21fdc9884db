/// net/link_failure: a link's failure as a typed value — its kind (the GOSSIP_LINK_FAILURES
/// table, gossip/exchange.hpp) and the words for a person (the address, the error, what the
/// other end said), which nobody reads back. Made from an error code or a handshake's refusal here, in one place;
/// the mailboxes keep the last one per link and links() reports both.
#pragma once
#if !defined(GOSSIP_ROOM_NET)
#error "src/net/link_failure.hpp belongs to room net, which this room does not use (see the room table in meson.build)"
#endif

#include <chrono>
#include <string>
#include <system_error>

#include "gossip/exchange.hpp"
#include "gossip/wire.hpp"

namespace gossip::net {

struct LinkFailure {
  LinkFailureKind kind = LinkFailureKind::kNone;
  std::string why;  // "refused dialling 127.0.0.1:7101 (Connection refused)", ...
};

/// A failed connect: refused, no route, timed out (`late`: our deadline of `within` closed the
/// socket) or failed; its words are the kind's name, " dialling `address`" when one is given,
/// and the error's words in parentheses: "no route dialling 10.0.0.2:29501 (No route to host)".
LinkFailure connect_failure(const std::error_code& ec, bool late, std::chrono::milliseconds within,
                            const std::string& address = "");

/// The failure a link takes from a handshake refused either way: the model and topology
/// fingerprints and identities are kinds of their own, the rest a refused handshake.
LinkFailureKind failure_of(wire::RefusalKind refusal);

}  // namespace gossip::net
