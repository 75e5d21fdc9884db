// net/net_exchange.cpp: NetExchange, the caller's side. Validates the config, starts the I/O
// thread (which runs Links and the sessions), and implements Exchange on top of Mailboxes.
#include <algorithm>
#include <atomic>
#include <future>
#include <iostream>
#include <mutex>
#include <thread>

#include "gossip/core.hpp"
#include "gossip/half.hpp"
#include "gossip/net.hpp"
#include "src/net/links.hpp"
#include "src/net/socket.hpp"

namespace gossip {
namespace {

constexpr std::chrono::seconds kShutdownGrace{2};  // for the byes before the I/O is stopped

void log_to_stderr(const std::string& line) {
  static std::mutex mu;
  std::lock_guard lk(mu);
  std::cerr << line << '\n';
}

NetConfig validated(NetConfig c) {
  if (c.size < 1) throw InputError(cat("net: size ", c.size, " must be at least 1"));
  if (c.rank < 0 || c.rank >= c.size)
    throw InputError(cat("net: rank ", c.rank, " is not in 0..", c.size - 1));
  if (static_cast<int>(c.addresses.size()) != c.size)
    throw InputError(cat("net: ", c.addresses.size(), " addresses for ", c.size, " peers"));
  if (c.handshake.param_count == 0) throw InputError("net: handshake.param_count is 0");
  if (c.handshake.run_id.size() > wire::kMaxRunIdBytes)
    throw InputError(cat("net: run id longer than ", wire::kMaxRunIdBytes, " bytes"));
  if (c.handshake.model.size() > wire::kMaxModelBytes)
    throw InputError(cat("net: a model fingerprint of more than ", wire::kMaxModelBytes, " bytes"));
  if (auto why = wire::check_gossip_settings(c.handshake.gossip); !why.empty())
    throw InputError(cat("net: handshake: ", why));
  const std::uint64_t need = default_max_frame_bytes(c.handshake.param_count);
  if (c.max_frame_bytes == 0) c.max_frame_bytes = need;
  if (c.max_frame_bytes < need - wire::kMaxControlPayload)
    throw InputError(cat("net: max_frame_bytes ", c.max_frame_bytes,
                         " is smaller than one params frame (",
                         need - wire::kMaxControlPayload, " bytes)"));
  for (const std::string& a : c.addresses)
    if (a.empty() && !c.tls.enabled)
      throw InputError("net: an address to be learned needs TLS (a member's address is believed "
                       "only signed by its certificate)");
  for (int p : c.later)
    if (std::find(c.neighbours.begin(), c.neighbours.end(), p) == c.neighbours.end())
      throw InputError(cat("net: later peer ", p, " is not a neighbour"));
  for (int p : c.contacts)
    if (std::find(c.neighbours.begin(), c.neighbours.end(), p) == c.neighbours.end() ||
        std::find(c.later.begin(), c.later.end(), p) != c.later.end())
      throw InputError(cat("net: contact ", p, " is not a neighbour awaited at the start"));
  if (!c.log) c.log = log_to_stderr;
  return c;
}

}  // namespace

class NetExchange::Impl {
 public:
  Impl(NetConfig config, NetListener listener)
      : listener_(checked(std::move(listener))), config_(validated(std::move(config))),
        mail_(config_.rank, config_.size, config_.neighbours, config_.handshake.param_count,
              config_.max_queued_rounds, config_.log, config_.host_memory),
        links_(io(), listener_.impl_->acceptor, config_, config_.max_frame_bytes, mail_,
               resolve_dialled()),
        work_(asio::make_work_guard(io())) {
    const auto give_up = std::chrono::steady_clock::now() + config_.timeouts.start;
    mail_.on_sends_wait([this] { post([this] { links_.detach_held(); }); });
    mail_.set_later(config_.later);
    asio::post(io(), [this, give_up] { links_.start(give_up); });
    thread_ = std::thread([this] { run(); });
    for (int p : mail_.wait_connected(give_up)) {
      // The lower rank of a pair dials: a link we wait for has no error of ours to tell.
      if (p < config_.rank && links_.reachability().state != Reachability::kUnreachable)
        mail_.note_never_formed(p, {LinkFailureKind::kNeverFormed,
                                    cat("peer ", p, " never dialled in to ",
                                        links_.address_of(config_.rank), " (it dials: the lower "
                                        "rank of a pair does; it did not start, or cannot reach "
                                        "this address)")});
      else if (!links_.address_of(p).empty())
        mail_.note_never_formed(p, {LinkFailureKind::kTimedOut,
                                    cat("no answer dialling ", links_.address_of(p))});
      gone_at_start(p, cat("peer ", p, " (", links_.address_of(p), ") not connected within ",
                           config_.timeouts.start.count(), " ms of start (", link_why(p),
                           "); carrying on without it: the link is absent from the live graph"));
    }
  }

  /// The link to `peer` (not up at the start's deadline) is gone, unless it came meanwhile: the
  /// I/O thread changes it, and this waits until it has.
  void gone_at_start(int peer, const std::string& line) {
    std::promise<void> done;
    post([&] {
      links_.not_formed_by_start(peer, line);
      done.set_value();
    });
    done.get_future().wait();
  }

  /// Why the link to `peer` is not up, as the mailboxes have it.
  std::string link_why(int peer) const {
    for (const LinkStatus& l : mail_.links())
      if (l.peer == peer) return l.why;
    return {};
  }

  ~Impl() {
    std::promise<std::size_t> relayed;
    auto relayed_now = relayed.get_future();
    asio::post(io(), [this, &relayed] {
      links_.shutdown();
      relayed.set_value(links_.relayed_links());
    });
    work_.reset();
    // The links this peer relays outlive its run: their ends close them when they finish.
    auto grace = std::chrono::duration_cast<std::chrono::milliseconds>(kShutdownGrace);
    if (relayed_now.wait_for(kShutdownGrace) == std::future_status::ready) {
      if (const std::size_t n = relayed_now.get(); n > 0) {
        grace += config_.timeouts.reconnect;
        links_.log(cat("relaying ", n, n == 1 ? " link" : " links", " still: waiting up to ",
                       grace.count(), " ms for their ends to close them"));
      }
    }
    if (done_.get_future().wait_for(grace) != std::future_status::ready) {
      links_.log(cat("shutdown: I/O still busy after ", grace.count(), " ms; stopping"));
      io().stop();
    }
    thread_.join();
  }

  asio::io_context& io() { return listener_.impl_->io; }

  void publish(std::int64_t round, std::span<const float> params, double weight,
               std::span<const int> to) {
    mail_.check_healthy();
    GOSSIP_CHECK_EQ(params.size(), config_.handshake.param_count);
    std::vector<int> targets(to.begin(), to.end());
    for (int p : targets)
      GOSSIP_CHECK_MSG(mail_.is_neighbour(p), "publish: peer ", p, " is not a neighbour of ",
                       config_.rank);
    if (targets.empty()) return;
    publishes_params_ = true;
    // fp32 goes out from the caller's buffer as it is; bf16 and fp16 from its rounded copy,
    // which the frames keep alive until they are written.
    std::span<const std::byte> values = std::as_bytes(params);
    std::shared_ptr<const void> keep;
    if (config_.handshake.wire != WireFormat::kFp32) {
      auto half = narrowed(params, round);
      values = std::as_bytes(std::span<const std::uint16_t>(*half));
      keep = std::move(half);
    }
    auto tokens = mail_.start_sends(targets.size());
    asio::post(io(), [this, round, values, keep = std::move(keep), weight,
                      targets = std::move(targets), tokens = std::move(tokens)]() mutable {
      links_.publish(round, values, keep, weight, targets, std::move(tokens));
    });
  }

  void publish_packet(std::int64_t round, std::span<const std::byte> packet,
                      std::span<const int> to) {
    mail_.check_healthy();
    GOSSIP_CHECK_LE(packet.size() + wire::kHeaderBytes, config_.max_frame_bytes);
    std::vector<int> targets(to.begin(), to.end());
    for (int p : targets)
      GOSSIP_CHECK_MSG(mail_.is_neighbour(p), "publish_packet: peer ", p,
                       " is not a neighbour of ", config_.rank);
    if (targets.empty()) return;
    auto tokens = mail_.start_sends(targets.size());
    asio::post(io(), [this, round, packet, targets = std::move(targets),
                      tokens = std::move(tokens)]() mutable {
      links_.publish_packet(round, packet, targets, std::move(tokens));
    });
  }

  const NetConfig& config() const { return config_; }
  /// Runs `f` on the I/O thread.
  template <typename F>
  void post(F f) { asio::post(io(), std::move(f)); }
  net::Links& links() { return links_; }
  net::Mailboxes& mail() { return mail_; }
  /// Whether this peer sends whole parameter frames (so its neighbours do too, and gate them).
  bool publishes_params() const { return publishes_params_; }
  const net::Mailboxes& mail() const { return mail_; }
  const net::Links& links() const { return links_; }

 private:
  static NetListener checked(NetListener listener) {
    GOSSIP_CHECK_MSG(listener.impl_, "NetExchange: the listener was moved from");
    return listener;
  }

  /// `params` rounded to the wire format, in a buffer no frame still holds. The I/O thread may
  /// still be letting go of the last one as collect() returns, so a few are kept and reused:
  /// a fresh half-megabyte buffer each round costs its page faults. Throws wire_overflow's error
  /// when the format cannot hold a parameter (it would arrive as inf, which receivers refuse).
  std::shared_ptr<std::vector<std::uint16_t>> narrowed(std::span<const float> params,
                                                       std::int64_t round) {
    std::shared_ptr<std::vector<std::uint16_t>> half;
    for (const auto& h : half_)
      if (h.use_count() == 1) half = h;
    // The I/O thread's last reads of it happen before its release of it: seen, then written.
    std::atomic_thread_fence(std::memory_order_acquire);
    if (!half) {
      half = std::make_shared<std::vector<std::uint16_t>>(params.size());
      if (half_.size() < kHalfBuffers) half_.push_back(half);
    }
    if (!narrow_to_wire(params, config_.handshake.wire, *half))
      throw RuntimeError(wire_overflow(params, config_.handshake.wire, round));
    return half;
  }

  std::vector<asio::ip::tcp::resolver::results_type> resolve_dialled() {
    std::vector<asio::ip::tcp::resolver::results_type> out(config_.size);
    for (int p : mail_.neighbours())
      if (!config_.addresses[p].empty() &&
          (p > config_.rank || !config_.listed ||
           std::find(config_.contacts.begin(), config_.contacts.end(), p) !=
               config_.contacts.end()))
        out[p] = net::resolve(io(), config_.addresses[p]);
    return out;
  }

  // The I/O thread: an exception escaping a handler is a bug, but it must still reach the
  // caller, so it is logged, recorded (the next call throws it) and the loop carries on.
  void run() {
    for (;;) {
      try {
        io().run();
        break;
      } catch (const std::exception& e) {
        links_.log(cat("I/O thread: unexpected exception: ", e.what()));
        mail_.fail(e.what());
      }
    }
    done_.set_value();
  }

  NetListener listener_;  // owns the io_context: declared first, destroyed last
  NetConfig config_;
  net::Mailboxes mail_;
  net::Links links_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  std::promise<void> done_;
  std::thread thread_;
  // Publishes rounded to bf16 / fp16, for reuse once no frame holds them.
  static constexpr std::size_t kHalfBuffers = 4;
  std::vector<std::shared_ptr<std::vector<std::uint16_t>>> half_;
  bool publishes_params_ = false;  // the caller's thread only
};

namespace {
const std::string& own_address(const NetConfig& c) {
  if (c.rank < 0 || c.rank >= static_cast<int>(c.addresses.size()) || c.addresses[c.rank].empty())
    throw InputError(cat("net: no address for rank ", c.rank, " (", c.addresses.size(),
                         " addresses; set net.advertise)"));
  return c.addresses[c.rank];
}
}  // namespace

NetExchange::NetExchange(NetConfig config)
    : NetExchange(config, NetListener(own_address(config))) {}

NetExchange::NetExchange(NetConfig config, NetListener listener)
    : impl_(std::make_unique<Impl>(std::move(config), std::move(listener))) {}

NetExchange::~NetExchange() = default;

int NetExchange::rank() const { return impl_->config().rank; }
int NetExchange::size() const { return impl_->config().size; }

void NetExchange::publish(std::int64_t round, std::span<const float> params, double weight,
                          std::span<const int> to) {
  impl_->publish(round, params, weight, to);
}

void NetExchange::publish_packet(std::int64_t round, std::span<const std::byte> packet,
                                 std::span<const int> to) {
  impl_->publish_packet(round, packet, to);
}

std::vector<Inbox> NetExchange::collect(std::int64_t round, std::span<const int> from,
                                        const CollectOptions& options) {
  impl_->mail().check_healthy();
  auto got = impl_->mail().collect(round, from, options);
  // A synchronous round is in: the neighbours may send the next one (their gate, in
  // Session::send_params). Packets (CHOCO, all-reduce) and asynchronous rounds are not gated.
  if (options.mode == CollectMode::kSync && impl_->publishes_params() &&
      round < wire::kMaxReadyRound)
    impl_->post([impl = impl_.get(), round] { impl->links().send_ready(round + 1); });
  return got;
}

std::vector<int> NetExchange::dead_peers() const { return impl_->mail().dead_peers(); }

// The round is not sent: a view frame's round field stays 0 (a view is the peer's state, and
// a heartbeat repeats it in later rounds).
void NetExchange::send_view(std::int64_t, std::span<const Member> view, std::span<const int> to,
                            std::span<const Probe> probes) {
  std::vector<int> targets;
  for (int p : to)
    if (impl_->mail().is_neighbour(p)) targets.push_back(p);
  if (targets.empty()) return;
  auto encode = [&](std::span<const Probe> with) {
    return std::make_shared<const std::vector<std::byte>>(
        wire::encode_frame(wire::FrameType::kView, static_cast<std::uint32_t>(rank()), 0,
                           wire::encode_view(view, with)));
  };
  // The heartbeat repeats the view alone: a probe goes out once.
  auto frame = encode(probes);
  auto plain = probes.empty() ? frame : encode({});
  impl_->post([this, frame = std::move(frame), plain = std::move(plain),
               targets = std::move(targets)] { impl_->links().send_view(frame, plain, targets); });
}

std::vector<PeerView> NetExchange::take_views() { return impl_->mail().take_views(); }

void NetExchange::announce(std::span<const Announcement> known, std::span<const int> to) {
  if (known.empty()) return;
  std::vector<int> targets;
  for (int p : to)
    if (impl_->mail().is_neighbour(p)) targets.push_back(p);
  const std::size_t count = std::min(known.size(), kMaxAnnouncements);
  auto frame = std::make_shared<const std::vector<std::byte>>(wire::encode_frame(
      wire::FrameType::kAnnounce, static_cast<std::uint32_t>(rank()), 0,
      wire::encode_announcements(known.first(count))));
  impl_->post([this, frame = std::move(frame), targets = std::move(targets)] {
    impl_->links().send_announce(frame, targets);
  });
}

std::vector<Announcement> NetExchange::take_announcements() {
  return impl_->mail().take_announcements();
}
std::vector<int> NetExchange::excused_peers() const { return impl_->mail().excused_peers(); }
std::optional<Inbox> NetExchange::newest(std::span<const int> from) {
  return impl_->mail().newest(from);
}

std::optional<std::vector<int>> NetExchange::heard_within(double seconds) const {
  return impl_->mail().heard_within(seconds);
}
std::vector<TransportAlert> NetExchange::take_alerts() { return impl_->mail().take_alerts(); }
std::vector<LinkStatus> NetExchange::links() const { return impl_->mail().links(); }

std::vector<int> NetExchange::connected_peers() const {
  return impl_->mail().peers_in(net::LinkState::kUp);
}

void NetExchange::waiting_for(std::int64_t round) {
  impl_->post([impl = impl_.get(), round] { impl->links().send_ready(round); });
}

void NetExchange::expect(std::span<const int> peers) {
  std::vector<int> v(peers.begin(), peers.end());
  asio::post(impl_->io(), [this, v = std::move(v)] { impl_->links().expect(v); });
}

std::vector<int> NetExchange::await_peers(std::span<const int> peers,
                                          std::chrono::milliseconds timeout) {
  for (int p : peers)
    GOSSIP_CHECK_MSG(impl_->mail().is_neighbour(p), "await_peers: peer ", p, " is not a neighbour");
  return impl_->mail().wait_up(peers, std::chrono::steady_clock::now() + timeout);
}

std::vector<int> NetExchange::shared_memory_peers() const {
  return impl_->mail().shared_memory_peers();
}

std::uint64_t NetExchange::bytes_sent() const { return impl_->links().bytes_sent(); }
ReachabilityReport NetExchange::reachability() const { return impl_->links().reachability(); }
std::vector<PeerAddress> NetExchange::addresses() const { return impl_->links().addresses(); }
std::uint64_t NetExchange::bytes_relayed() const { return impl_->links().bytes_relayed(); }
std::vector<LinkTraffic> NetExchange::link_traffic() const {
  return impl_->links().link_traffic();
}

std::vector<NetExchange::CryptoSpan> NetExchange::take_crypto_spans() {
  return impl_->links().crypto_log().take();
}

}  // namespace gossip
