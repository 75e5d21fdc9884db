// peer/doctor.cpp: `gossip doctor`'s judgement. net::diagnose checks the network from one peer's
// place; this file turns what it found into one line per neighbour, what to change, and whether
// the run can start: every link must form one way or the other (this peer dials the neighbour,
// or the neighbour dials this peer back), or go through a relay.
#include <cstdio>

#include "gossip/core.hpp"
#include "gossip/json.hpp"
#include "gossip/net.hpp"
#include "gossip/peer.hpp"
#include "src/peer/members.hpp"
#include "src/peer/net_setup.hpp"

namespace gossip {
namespace {

std::string fixed2(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.2f", v);
  return b;
}

/// The port of "host:port" ("" when there is none).
std::string port_of(const std::string& address) {
  const auto colon = address.rfind(':');
  return colon == std::string::npos ? "" : address.substr(colon + 1);
}

struct Judged {
  std::string line;                 // what was found
  std::vector<std::string> advice;  // what to change
  bool we_dial = false;             // this peer can make the link
  bool it_dials = false;            // the neighbour can
};

/// This peer's dial of `c`'s neighbour, and its TLS answer: what was found and what to change.
void judge_dial(const NeighbourCheck& c, const DoctorRequest& q, Judged& j) {
  if (!c.dialled) {
    j.line += cat("not dialled: ", c.dial_error);
    j.advice.push_back(
        c.dial_failure == LinkFailureKind::kRefused
            ? cat("nothing listens at ", c.address, ": start peer ", c.peer, " (a peer waits "
                  "net.connect_timeout_s for its neighbours), or forward port ",
                  port_of(c.address), " to it")
            : cat(c.address, " cannot be reached from here (", c.dial_error, "): open port ",
                  port_of(c.address), " on its host, or give the address it can be dialled at "
                  "in peers:; else it must dial this peer, or a relay carries the link"));
  } else {
    j.line += cat("dialled in ", fixed2(c.connect_ms), " ms");
    if (q.tls.enabled) {
      if (!c.tls_error.empty()) {
        j.line += cat(", TLS refused: ", c.tls_error);
        j.advice.push_back(cat("peer ", c.peer, "'s TLS identity is not one this run accepts (",
                               c.tls_error, "): both need certificates of the same CA and run id "
                               "(gossip keys init)"));
      } else if (c.tls_rank != c.peer) {
        j.line += cat(", but it answers as peer ", c.tls_rank);
        j.advice.push_back(cat(c.address, " is peer ", c.tls_rank, ", not peer ", c.peer,
                               ": the peers: list has them in the wrong order"));
      } else {
        j.line += cat(", TLS identity peer ", c.tls_rank, " of run '", q.run_id, "'");
        j.we_dial = true;
      }
    } else {
      j.we_dial = true;
    }
  }
}

/// The neighbour's dial back to this peer at `ours` (as it says, and as it arrived here when
/// this peer is `listening`): what was found and what to change.
void judge_dial_back(const NeighbourCheck& c, const std::string& ours, bool listening,
                     Judged& j) {
  if (!c.asked) {
    if (c.dialled) j.line += "; it did not answer a dial-back request (not a running peer?)";
    return;
  }
  if (c.dialled_back && (c.probe_came || !listening)) {
    j.line += cat("; it dialled this peer back at ", ours,
                  listening ? "" : " (on its word: this peer's port is taken here)");
    j.it_dials = true;
  } else if (c.dialled_back) {
    j.line += cat("; it says it dialled ", ours, " back, but nothing arrived here");
  } else {
    j.line += cat("; it could not dial this peer back: ", c.dial_back);
    j.advice.push_back(cat("peer ", c.peer, " cannot dial this peer at ", ours, ": open port ",
                           port_of(ours), ", forward it to this machine, or give this peer's "
                           "reachable address in peers: (with net.bind for where it listens); "
                           "else this peer dials its neighbours itself"));
  }
}

Judged judge(const NeighbourCheck& c, const DoctorRequest& q, bool listening) {
  Judged j;
  const std::string ours = q.addresses[q.rank];
  j.line = cat("peer ", c.peer, " at ", c.address, ": ");
  if (c.address.empty()) {
    // Not listed: it announces its address in the run, and dials this peer itself.
    j.line = cat("peer ", c.peer, ": its address is not listed (learned in the run from its "
                 "signed record); it dials this peer at ", ours);
    j.it_dials = true;
    return j;
  }
  if (!c.resolve_error.empty()) {
    j.line += c.resolve_error;
    j.advice.push_back(cat("peer ", c.peer, "'s address ", c.address, " does not resolve: fix its "
                           "entry in the topology's peers: list (or net.host, --hosts)"));
    return j;
  }
  judge_dial(c, q, j);
  if (c.clock_offset_ms)
    j.line += cat(", clock ", *c.clock_offset_ms >= 0 ? "+" : "", fixed2(*c.clock_offset_ms),
                  " ms");
  judge_dial_back(c, ours, listening, j);
  return j;
}

/// The first relay candidate for the link to `peer` that answers from here ("peer K at ADDR",
/// or the address of one net.relays names), "" when none does: net.relays' in order, or (auto)
/// the other members with known addresses, lowest rank first, four at most.
std::string relay_for(const RunConfig& config, const DoctorRequest& q, int peer) {
  auto candidates = peer_parts::named_relays(config, q.addresses);
  std::erase_if(candidates, [&](const auto& c) { return c.first == peer || c.first == q.rank; });
  if (config.net.relays_auto)
    for (int r = 0; r < static_cast<int>(q.addresses.size()) && candidates.size() < 4; ++r)
      if (r != q.rank && r != peer && !q.addresses[r].empty())
        candidates.emplace_back(r, q.addresses[r]);
  for (const RelayCheck& c : probe_relays(candidates, q.timeout))
    if (c.dialled)
      return c.rank >= 0 ? cat("peer ", c.rank, " at ", c.address) : c.address;
  return {};
}

/// The request for `opt`'s peer: its neighbours' listed addresses, its run id and TLS identity.
DoctorRequest doctor_request(const RunConfig& config, const Topology& topology,
                             const PeerOptions& opt) {
  DoctorRequest q;
  q.rank = opt.rank;
  q.addresses = peer_addresses(config, topology, opt.launch);
  q.neighbours = peer_parts::all_neighbours(topology, opt.rank);
  q.run_id = config.net.run_id;
  q.tls = peer_tls(config, opt.tls_dir, opt.rank);
  return q;
}

/// What to change about a link that forms only through a relay: `relay` (the one that answers
/// here), or "" when none does.
std::string relay_advice(int peer, const std::string& relay) {
  const bool forms = !relay.empty();
  return forms ? cat("the link to peer ", peer, " will go through a relay: ", relay,
                     " answers here (a member relays once it finds itself reachable); peer ",
                     peer, " must reach it too: run gossip doctor from there")
               : cat("the link to peer ", peer, " forms only through a relay, and none "
                     "answers here: run a member on an address both can dial, or name one in "
                     "net.relays");
}

/// The JSON of one neighbour's check: what was found, whether its link forms, and its relay.
JsonObject check_json(const NeighbourCheck& c, const DoctorRequest& q, bool forms,
                      const std::string& relay) {
  JsonObject o;
  o.add("peer", c.peer).add("address", c.address).add("resolves", c.resolve_error.empty())
      .add("dialled", c.dialled).add("dial_error", c.dial_error);
  if (c.connect_ms >= 0) o.add("connect_ms", c.connect_ms);
  if (q.tls.enabled) o.add("tls_rank", c.tls_rank).add("tls_error", c.tls_error);
  o.add("answered_dial_back", c.asked).add("dialled_back", c.dialled_back)
      .add("probe_came", c.probe_came).add("dial_back", c.dial_back);
  if (c.clock_offset_ms) o.add("clock_offset_ms", *c.clock_offset_ms);
  else o.raw("clock_offset_ms", "null");
  o.add("link_forms", forms).add("relay", relay);
  return o;
}

/// The report's last lines: this peer's announced address when it is not the `listed` one, its
/// reachability, the advice and the verdict.
std::string closing_text(const DoctorRequest& q, const std::string& listed, bool unreachable,
                         const std::vector<std::string>& advice, bool can_start) {
  std::string text;
  if (q.addresses[q.rank] != listed)
    text += cat("  this peer announces ", q.addresses[q.rank], " (net.advertise), ",
                listed.empty() ? std::string("not listed") : cat("not its listed ", listed),
                ": the members learn it from its signed record, and it dials its neighbours "
                "itself\n");
  if (unreachable)
    text += cat("  this peer is unreachable at ", q.addresses[q.rank],
                " for some neighbours: in the run it dials them itself\n");
  for (const std::string& a : advice) text += cat("  - ", a, "\n");
  text += can_start ? "the run can start: every link forms one way or the other\n"
                    : "the run cannot start as things are: see above\n";
  return text;
}

}  // namespace

DoctorOutcome doctor(const RunConfig& config, const Topology& topology, const PeerOptions& opt) {
  if (opt.rank < 0 || opt.rank >= topology.n())
    throw InputError(cat("rank ", opt.rank, " is not in the topology ", config.gossip.topology,
                         " (ranks 0..", topology.n() - 1, ")"));
  DoctorRequest q = doctor_request(config, topology, opt);
  const std::string listed = q.addresses[opt.rank];
  q.addresses[opt.rank] = announced_address(config, topology, opt.launch, opt.rank);
  q.listen = listen_address(q.addresses[opt.rank], config.net.bind);
  const DoctorReport report = diagnose(q);
  DoctorOutcome out;
  out.can_start = true;
  std::vector<std::string> advice;
  JsonArray checks;
  out.text = cat("gossip doctor: peer ", opt.rank, " of ", topology.n(), ", announced at ",
                 q.addresses[opt.rank], ", listening on ", q.listen,
                 report.listen_error.empty() ? ""
                                             : cat(" (", report.listen_error,
                                                   ": dial backs are taken on their word)"),
                 "\n");
  bool unreachable = false;
  for (const NeighbourCheck& c : report.neighbours) {
    const Judged j = judge(c, q, report.listen_error.empty());
    out.text += cat("  ", j.line, "\n");
    advice.insert(advice.end(), j.advice.begin(), j.advice.end());
    if (c.asked && !c.dialled_back) unreachable = true;
    bool forms = j.we_dial || j.it_dials;
    std::string relay;
    // Nothing listens there (refused): the neighbour is not running. Else, when neither end
    // can dial the other (no route, no answer: a NAT or a firewall), the link needs a relay.
    const bool absent = !c.dialled && !c.asked && c.dial_failure == LinkFailureKind::kRefused;
    if (!forms && !c.address.empty() && c.resolve_error.empty() && !absent) {
      relay = relay_for(config, q, c.peer);
      forms = !relay.empty();
      advice.push_back(relay_advice(c.peer, relay));
    }
    if (!forms) out.can_start = false;
    checks.add(check_json(c, q, forms, relay));
  }
  out.text += closing_text(q, listed, unreachable, advice, out.can_start);
  out.json = JsonObject()
                 .add("rank", opt.rank)
                 .add("address", q.addresses[opt.rank])
                 .add("listen", q.listen)
                 .add("listen_error", report.listen_error)
                 .add("neighbours", checks)
                 .add("advice", JsonArray::of(advice))
                 .add("can_start", out.can_start)
                 .str();
  return out;
}

}  // namespace gossip
