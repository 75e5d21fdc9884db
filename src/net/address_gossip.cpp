// net/address_gossip.cpp: the members' addresses, and their signed records passed around.
#include "src/net/address_gossip.hpp"

#include <algorithm>

#include "gossip/core.hpp"
#include "src/net/socket.hpp"

namespace gossip::net {
namespace {
constexpr std::chrono::milliseconds kAskAddressesEvery{250};
}  // namespace

AddressGossip::AddressGossip(const NetConfig& config, RendezvousIo& io, SSL_CTX* tls, Hooks hooks)
    : config_(config), io_(io), hooks_(std::move(hooks)),
      book_(std::make_unique<AddressBook>(tls, config.handshake.run_id, config.rank, config.size,
                                          config.addresses[config.rank])),
      addresses_(config.addresses), learned_(config.addresses.size(), false) {}

std::string AddressGossip::address_of(int peer) const {
  std::lock_guard lk(mu_);
  return addresses_[peer];
}

std::vector<PeerAddress> AddressGossip::addresses() const {
  std::lock_guard lk(mu_);
  std::vector<PeerAddress> out;
  for (int r = 0; r < config_.size; ++r) {
    const AddressSource source = r == config_.rank      ? AddressSource::kOwn
                                 : learned_[r]          ? AddressSource::kLearned
                                 : addresses_[r].empty() ? AddressSource::kUnknown
                                                         : AddressSource::kListed;
    out.push_back({r, addresses_[r], source});
  }
  return out;
}

AddressBook::Verdict AddressGossip::take(const wire::AddressRecord& record, int from) {
  const int rank = static_cast<int>(record.rank);
  AddressBook::Taken taken = book_->take(record);
  if (taken.verdict == AddressBook::Verdict::kRefused) {
    const std::pair key{from, rank};
    if (std::find(refused_records_.begin(), refused_records_.end(), key) == refused_records_.end()) {
      refused_records_.push_back(key);
      const std::string why = cat("peer ", from, " passed on an address record for peer ", rank,
                                  " (", record.address, ") that is not believed: ", taken.why);
      hooks_.log(why);
      hooks_.alert(TransportAlert{MemberEventKind::kAddressRefused, rank, why});
    }
    return taken.verdict;
  }
  if (taken.verdict == AddressBook::Verdict::kKnown) return taken.verdict;
  std::string before;
  {
    std::lock_guard lk(mu_);
    before = std::exchange(addresses_[rank], record.address);
    learned_[rank] = true;
  }
  if (before != record.address)
    hooks_.log(cat("peer ", rank, " announces ", record.address, " (its signed record, passed on "
                   "by peer ", from, before.empty() ? ")" : cat("; listed as ", before, ")")));
  hooks_.learned(rank, record.address, from);
  hooks_.pass_on(taken.frame, from);  // so that it reaches every member
  return taken.verdict;
}

void AddressGossip::ask(Clock::time_point until) {
  if (io_.stopping() || !book_->signing() || Clock::now() > until) return;
  if (!hooks_.missing()) return;
  std::vector<int> known;
  for (int r = 0; r < config_.size; ++r)
    if (r != config_.rank && !address_of(r).empty()) known.push_back(r);
  if (!known.empty()) ask_member(known[ask_next_++ % known.size()]);
  auto timer = io_.new_timer(kAskAddressesEvery);
  timer->async_wait([this, timer, until](std::error_code ec) {
    if (!ec) ask(until);
  });
}

std::shared_ptr<std::vector<std::byte>> AddressGossip::with_records(
    const wire::Rendezvous& m) const {
  const auto head = wire::encode_rendezvous(m);
  auto bytes = std::make_shared<std::vector<std::byte>>(head.begin(), head.end());
  for (const FrameBytes& f : book_->frames()) bytes->insert(bytes->end(), f->begin(), f->end());
  return bytes;
}

void AddressGossip::ask_member(int member) {
  auto socket = io_.new_socket();
  auto timer = io_.close_after(socket, config_.timeouts.handshake).timer;
  // The records the member answers with, once its answer has said how many.
  auto take_answer = [this, socket, member](std::optional<wire::Rendezvous> m, std::string why) {
    std::error_code ignored;
    if (!m || m->kind != wire::RendezvousKind::kAddressAnswer ||
        m->status != wire::RendezvousStatus::kOk || m->nonce > std::uint64_t(config_.size)) {
      hooks_.log(cat("asked peer ", member, " for the members' addresses: ",
                     m ? (m->text.empty() ? std::string("refused") : m->text) : why));
      return socket->close(ignored);
    }
    read_records(socket, m->nonce, 2 * config_.timeouts.handshake,
                 [this, socket, member](std::vector<wire::AddressRecord> records,
                                        std::string rwhy) {
                   std::error_code ignored2;
                   socket->close(ignored2);
                   if (!rwhy.empty()) hooks_.log(cat("peer ", member, "'s address records: ", rwhy));
                   for (const auto& r : records) take(r, member);
                 });
  };
  asio::async_connect(
      *socket, io_.endpoints_of(address_of(member)),
      [this, socket, timer, member, take_answer](std::error_code ec,
                                                 const asio::ip::tcp::endpoint&) {
        timer->cancel();
        if (ec || io_.stopping()) return;  // not up yet: asked again in turn
        wire::Rendezvous ask = io_.message(wire::RendezvousKind::kAddressAsk,
                                           static_cast<std::uint32_t>(member));
        ask.nonce = book_->frames().size();
        auto bytes = with_records(ask);
        asio::async_write(*socket, asio::buffer(*bytes),
                          [this, socket, bytes, take_answer](std::error_code wec, std::size_t) {
                            if (wec || io_.stopping()) return;
                            io_.read(socket, 2 * config_.timeouts.handshake, take_answer);
                          });
      });
}

void AddressGossip::serve_ask(Socket asker, const wire::Rendezvous& ask) {
  std::error_code ignored;
  if (!book_->signing() || ask.nonce == 0 || ask.nonce > std::uint64_t(config_.size)) {
    hooks_.log_refusal(cat("address ask from ", remote_name(*asker), " refused: ",
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
                   hooks_.log_refusal(cat("address ask from peer ", from, " refused: ", why));
                   return asker->close(ignored2);
                 }
                 for (const auto& r : records) take(r, from);
                 answer_ask(asker, from);
               });
}

void AddressGossip::answer_ask(Socket asker, int from) {
  // Answered only for an asker whose own signed record we now hold.
  wire::Rendezvous a =
      io_.message(wire::RendezvousKind::kAddressAnswer, static_cast<std::uint32_t>(from));
  if (!book_->address(from)) {
    a.status = wire::RendezvousStatus::kFailed;
    a.text = cat("peer ", config_.rank, " holds no signed record of peer ", from);
    return io_.answer(asker, a);
  }
  a.nonce = book_->frames().size();
  auto bytes = with_records(a);
  asio::async_write(*asker, asio::buffer(*bytes), [asker, bytes](std::error_code, std::size_t) {
    std::error_code ignored;
    asker->close(ignored);
  });
}

struct AddressGossip::RecordRead {
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

void AddressGossip::read_records(
    Socket socket, std::size_t count, std::chrono::milliseconds within,
    std::function<void(std::vector<wire::AddressRecord>, std::string)> then) {
  auto read = std::make_shared<RecordRead>();
  read->left = count;
  read->within = within;
  read->then = std::move(then);
  auto [timer, late] = io_.close_after(socket, within);
  read->timer = timer;
  read->late = late;
  read_records(std::move(socket), std::move(read));
}

void AddressGossip::read_records(Socket socket, std::shared_ptr<RecordRead> read) {
  if (read->left == 0) return read->done("");
  asio::async_read(*socket, asio::buffer(read->header), [this, socket, read](std::error_code ec,
                                                                              std::size_t) {
    if (io_.stopping()) return;
    if (ec)
      return read->done(*read->late ? cat("no records within ", read->within.count(), " ms")
                                    : cat("connection closed (", ec.message(), ")"));
    const auto h = wire::decode_header(read->header, wire::kHeaderBytes + wire::kMaxControlPayload,
                                       config_.handshake.wire);
    if (!h) return read->done(h.error);
    if (h.value->type != wire::FrameType::kAddress)
      return read->done(cat("a ", wire::frame_type_name(static_cast<std::uint16_t>(h.value->type)),
                            " frame where address frames were due"));
    read_record_body(socket, read, *h.value);
  });
}

void AddressGossip::read_record_body(Socket socket, std::shared_ptr<RecordRead> read,
                                     const wire::FrameHeader& header) {
  read->payload.resize(header.payload_bytes);
  asio::async_read(*socket, asio::buffer(read->payload),
                   [this, socket, read, header](std::error_code e, std::size_t) {
                     if (io_.stopping()) return;
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
}

}  // namespace gossip::net
