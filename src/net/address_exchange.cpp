// net/address_exchange.cpp: the part of Links that passes the members' signed address records
// (address_book.hpp) around. A record travels on every link once it is up (each end sends what
// it holds), and a new one is passed on to the other neighbours, so it floods the member graph.
// A peer that lacks a neighbour's address before any link is up asks the members whose addresses
// it knows (the listed ones: its bootstrap) on their own port: an address ask, with its own
// signed record, which the member answers with every record it holds; a member answers only an
// asker whose record checks out.
#include <algorithm>

#include "gossip/core.hpp"
#include "src/net/links.hpp"
#include "src/net/socket.hpp"

namespace gossip::net {
namespace {
constexpr std::chrono::milliseconds kAskAddressesEvery{250};
}  // namespace

AddressBook::Verdict Links::take_record(const wire::AddressRecord& record, int from) {
  const int rank = static_cast<int>(record.rank);
  AddressBook::Taken taken = book_->take(record);
  if (taken.verdict == AddressBook::Verdict::kRefused) {
    const std::pair key{from, rank};
    if (std::find(refused_records_.begin(), refused_records_.end(), key) == refused_records_.end()) {
      refused_records_.push_back(key);
      const std::string why = cat("peer ", from, " passed on an address record for peer ", rank,
                                  " (", record.address, ") that is not believed: ", taken.why);
      log(why);
      mail_.alert(TransportAlert{MemberEventKind::kAddressRefused, rank, why});
    }
    return taken.verdict;
  }
  if (taken.verdict == AddressBook::Verdict::kKnown) return taken.verdict;
  learned(rank, record.address, from);
  for (int p : mail_.neighbours())  // passed on, so that it reaches every member
    if (Link& l = *links_[p]; p != from && l.session && l.session->established() &&
                              !l.session->closed())
      l.session->send_view(taken.frame);  // a control frame, queued as a view is
  return taken.verdict;
}

void Links::ask_addresses(Clock::time_point until) {
  if (stopping_ || !book_->signing() || Clock::now() > until) return;
  bool missing = false;
  for (int p : mail_.neighbours())
    if (!links_[p]->later && address_of(p).empty() && mail_.state(p) != LinkState::kUp)
      missing = true;
  if (!missing) return;
  std::vector<int> known;
  for (int r = 0; r < config_.size; ++r)
    if (r != config_.rank && !address_of(r).empty()) known.push_back(r);
  if (!known.empty()) ask_addresses_of(known[ask_next_++ % known.size()]);
  auto timer = new_timer(kAskAddressesEvery);
  timer->async_wait([this, timer, until](std::error_code ec) {
    if (!ec) ask_addresses(until);
  });
}

std::shared_ptr<std::vector<std::byte>> Links::with_records(const wire::Rendezvous& m) const {
  const auto head = wire::encode_rendezvous(m);
  auto bytes = std::make_shared<std::vector<std::byte>>(head.begin(), head.end());
  for (const FrameBytes& f : book_->frames()) bytes->insert(bytes->end(), f->begin(), f->end());
  return bytes;
}

void Links::ask_addresses_of(int member) {
  auto socket = new_socket();
  auto timer = close_after(socket, config_.timeouts.handshake).timer;
  asio::async_connect(
      *socket, endpoints_of(address_of(member)),
      [this, socket, timer, member](std::error_code ec, const asio::ip::tcp::endpoint&) {
        timer->cancel();
        if (ec || stopping_) return;  // not up yet: asked again in turn
        wire::Rendezvous ask = rendezvous(wire::RendezvousKind::kAddressAsk,
                                          static_cast<std::uint32_t>(member));
        ask.nonce = book_->frames().size();
        auto bytes = with_records(ask);
        asio::async_write(*socket, asio::buffer(*bytes), [this, socket, bytes, member](
                                                             std::error_code wec, std::size_t) {
          if (wec || stopping_) return;
          read_rendezvous(socket, 2 * config_.timeouts.handshake,
                          [this, socket, member](std::optional<wire::Rendezvous> m,
                                                 std::string why) {
            std::error_code ignored;
            if (!m || m->kind != wire::RendezvousKind::kAddressAnswer ||
                m->status != wire::RendezvousStatus::kOk || m->nonce > std::uint64_t(config_.size)) {
              log(cat("asked peer ", member, " for the members' addresses: ",
                      m ? (m->text.empty() ? std::string("refused") : m->text) : why));
              return socket->close(ignored);
            }
            read_records(socket, m->nonce, 2 * config_.timeouts.handshake,
                         [this, socket, member](std::vector<wire::AddressRecord> records,
                                                std::string rwhy) {
                           std::error_code ignored2;
                           socket->close(ignored2);
                           if (!rwhy.empty())
                             log(cat("peer ", member, "'s address records: ", rwhy));
                           for (const auto& r : records) take_record(r, member);
                         });
          });
        });
      });
}

void Links::serve_address_ask(std::shared_ptr<asio::ip::tcp::socket> asker,
                              const wire::Rendezvous& ask) {
  std::error_code ignored;
  if (!book_->signing() || ask.nonce == 0 || ask.nonce > std::uint64_t(config_.size)) {
    log_refusal(cat("address ask from ", remote_name(*asker), " refused: ",
                    book_->signing() ? "it sent no record of its own" : "TLS is off here"));
    return asker->close(ignored);
  }
  const int from = static_cast<int>(ask.from);
  ++serving_;
  read_records(asker, ask.nonce, config_.timeouts.handshake,
               [this, asker, from](std::vector<wire::AddressRecord> records, std::string why) {
                 --serving_;
                 std::error_code ignored2;
                 if (!why.empty()) {
                   log_refusal(cat("address ask from peer ", from, " refused: ", why));
                   return asker->close(ignored2);
                 }
                 for (const auto& r : records) take_record(r, from);
                 // Answered only for an asker whose own signed record we now hold.
                 wire::Rendezvous a = rendezvous(wire::RendezvousKind::kAddressAnswer,
                                                 static_cast<std::uint32_t>(from));
                 if (!book_->address(from)) {
                   a.status = wire::RendezvousStatus::kFailed;
                   a.text = cat("peer ", config_.rank, " holds no signed record of peer ", from);
                   return send_rendezvous(asker, a, [asker](std::error_code) {
                     std::error_code ignored3;
                     asker->close(ignored3);
                   });
                 }
                 a.nonce = book_->frames().size();
                 auto bytes = with_records(a);
                 asio::async_write(*asker, asio::buffer(*bytes),
                                   [asker, bytes](std::error_code, std::size_t) {
                                     std::error_code ignored3;
                                     asker->close(ignored3);
                                   });
               });
}

struct Links::RecordRead {
  std::size_t left = 0;
  std::vector<wire::AddressRecord> got;
  wire::HeaderBytes header{};
  std::vector<std::byte> payload;
  std::shared_ptr<asio::steady_timer> timer;
  std::shared_ptr<bool> late;
  std::chrono::milliseconds within{0};
  std::function<void(std::vector<wire::AddressRecord>, std::string)> then;
  void done(std::string why) {
    timer->cancel();
    auto call = std::move(then);
    if (call) call(std::move(got), std::move(why));
  }
};

void Links::read_records(std::shared_ptr<asio::ip::tcp::socket> socket, std::size_t count,
                         std::chrono::milliseconds within,
                         std::function<void(std::vector<wire::AddressRecord>, std::string)> then) {
  auto read = std::make_shared<RecordRead>();
  read->left = count;
  read->within = within;
  read->then = std::move(then);
  auto [timer, late] = close_after(socket, within);
  read->timer = timer;
  read->late = late;
  read_records(std::move(socket), std::move(read));
}

void Links::read_records(std::shared_ptr<asio::ip::tcp::socket> socket,
                         std::shared_ptr<RecordRead> read) {
  if (read->left == 0) return read->done("");
  asio::async_read(*socket, asio::buffer(read->header), [this, socket, read](std::error_code ec,
                                                                              std::size_t) {
    if (stopping_) return;
    if (ec)
      return read->done(*read->late ? cat("no records within ", read->within.count(), " ms")
                                    : cat("connection closed (", ec.message(), ")"));
    const auto h = wire::decode_header(read->header, wire::kHeaderBytes + wire::kMaxControlPayload,
                                       config_.handshake.wire);
    if (!h) return read->done(h.error);
    if (h.value->type != wire::FrameType::kAddress)
      return read->done(cat("a ", wire::frame_type_name(static_cast<std::uint16_t>(h.value->type)),
                            " frame where address frames were due"));
    read->payload.resize(h.value->payload_bytes);
    asio::async_read(*socket, asio::buffer(read->payload),
                     [this, socket, read, header = *h.value](std::error_code e, std::size_t) {
                       if (stopping_) return;
                       if (e) return read->done(cat("connection closed (", e.message(), ")"));
                       if (auto why = wire::check_payload(header, read->payload); !why.empty())
                         return read->done(why);
                       auto r = wire::decode_address_record(read->payload,
                                                            static_cast<std::size_t>(config_.size));
                       if (!r) return read->done(r.error);
                       read->got.push_back(std::move(*r.value));
                       --read->left;
                       read_records(socket, read);
                     });
  });
}

}  // namespace gossip::net
