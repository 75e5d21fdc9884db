/// net/address_gossip: the members' addresses as this peer knows them, and the gossip of their
/// signed records (address_book.hpp) that keeps them current. A record travels on every link
/// once it is up (each end sends what it holds), and a new one is passed on to the other
/// neighbours, so it floods the member graph. A peer that lacks a neighbour's address before any
/// link is up asks the members whose addresses it knows (the listed ones: its bootstrap) on
/// their own port: an address ask, with its own signed record, which the member answers with
/// every record it holds; a member answers only an asker whose record checks out.
#pragma once
#if !defined(GOSSIP_ROOM_NET)
#error "src/net/address_gossip.hpp belongs to room net, which this room does not use (see the room table in meson.build)"
#endif

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "src/net/address_book.hpp"
#include "src/net/rendezvous_io.hpp"

namespace gossip::net {

class AddressGossip {
 public:
  using Clock = std::chrono::steady_clock;
  using Socket = RendezvousIo::Socket;
  /// What the gossip needs of the rest of the transport (all on the I/O thread).
  struct Hooks {
    /// A newer signed record of `peer` at `address`, passed on by `from` (after it is held).
    std::function<void(int peer, const std::string& address, int from)> learned;
    /// Queues `frame` on every link that is up but the one to `except`.
    std::function<void(const FrameBytes& frame, int except)> pass_on;
    /// Whether a neighbour we wait for has no address yet (and no link up).
    std::function<bool()> missing;
    std::function<void(TransportAlert)> alert;
    std::function<void(const std::string&)> log;
    std::function<void(const std::string&)> log_refusal;
  };

  /// `tls` (the run's TLS context, or nullptr when TLS is off: then nothing is signed).
  AddressGossip(const NetConfig& config, RendezvousIo& io, SSL_CTX* tls, Hooks hooks);

  // --- any thread ----------------------------------------------------------------------------
  /// The address rank `peer` is dialled at: its signed record's, else the listed one ("" when
  /// neither is known yet).
  std::string address_of(int peer) const;
  /// Every member's address as this peer knows it now (NetExchange::addresses).
  std::vector<PeerAddress> addresses() const;

  // --- I/O thread ----------------------------------------------------------------------------
  /// A record `from` passed on (a link's frame, or a rendezvous): checked, held and passed on
  /// to the other neighbours when new, an address_refused alert when not believed.
  AddressBook::Verdict take(const wire::AddressRecord& record, int from);
  /// While a neighbour's address is unknown (and its link not up), asks the members whose
  /// addresses are known, one each kAskAddressesEvery in turn, for the records they hold.
  void ask(Clock::time_point until);
  /// An address ask that came to our port: read the asker's records, answer with ours.
  void serve_ask(Socket asker, const wire::Rendezvous& ask);
  /// Every record held, ours first, as address frames (for a link that comes up).
  std::vector<FrameBytes> frames() const { return book_->frames(); }
  /// Address asks being served now (they count against net.max_pending_handshakes).
  std::size_t serving() const { return serving_; }

 private:
  struct RecordRead;
  void ask_member(int member);
  void answer_ask(Socket asker, int from);
  /// Reads `count` address frames from `socket` within `within`; `then` gets them, or why not.
  void read_records(Socket socket, std::size_t count, std::chrono::milliseconds within,
                    std::function<void(std::vector<wire::AddressRecord>, std::string)> then);
  void read_records(Socket socket, std::shared_ptr<RecordRead> read);
  void read_record_body(Socket socket, std::shared_ptr<RecordRead> read,
                        const wire::FrameHeader& header);
  /// `m` then every record we hold, as one write.
  std::shared_ptr<std::vector<std::byte>> with_records(const wire::Rendezvous& m) const;

  const NetConfig& config_;
  RendezvousIo& io_;
  const Hooks hooks_;
  std::unique_ptr<AddressBook> book_;
  // The listed addresses, replaced by the members' signed records as they come (written by the
  // I/O thread under mu_, read by any thread).
  mutable std::mutex mu_;
  std::vector<std::string> addresses_;
  std::vector<bool> learned_;
  std::vector<std::pair<int, int>> refused_records_;  // (passed on by, rank): said once each
  std::size_t ask_next_ = 0;  // the member ask() asks next (in rank order)
  std::size_t serving_ = 0;
};

}  // namespace gossip::net
