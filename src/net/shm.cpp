// net/shm.cpp: sealed memfd segments for same-host neighbours (see shm.hpp).
//
// Layout: a 4 KiB header page (magic, token, param count, slots, bytes per value, stride), then
// `slots` slots of `stride` bytes, each a 64-byte slot header (the sequence number) followed by
// the values (float32, or bf16 / fp16 as gossip.wire says).
#include "src/net/shm.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <random>

#include "gossip/core.hpp"
#include "gossip/half.hpp"
#include "gossip/rng.hpp"

namespace gossip::net {
namespace {

constexpr std::uint64_t kMagic = 0x314D485350495347ULL;  // bytes "GSIPSHM1"
constexpr std::uint64_t kPage = 4096;
constexpr std::uint64_t kSlotHeader = 64;

struct Header {
  std::uint64_t magic, token, param_count;
  std::uint32_t slots, value_bytes;
  std::uint64_t stride;
};
static_assert(sizeof(Header) <= kPage);
static_assert(std::atomic_ref<std::uint64_t>::is_always_lock_free);

std::uint64_t stride_for(std::uint64_t param_count, std::uint64_t value_bytes) {
  return (kSlotHeader + param_count * value_bytes + kPage - 1) / kPage * kPage;
}

std::uint64_t segment_bytes(std::uint64_t param_count, std::uint64_t value_bytes,
                            std::uint32_t slots) {
  return kPage + slots * stride_for(param_count, value_bytes);
}

std::string sys_error(const char* what) { return cat(what, ": ", std::strerror(errno)); }

// memcpy that also says whether every float is finite (no exponent of all ones): one pass, so
// checking a same-host neighbour's model costs nothing beyond the copy.
__attribute__((target_clones("avx2", "default"))) bool copy_finite(float* __restrict dst,
                                                               const float* __restrict src,
                                                               std::size_t n) {
  std::uint32_t bad = 0;
  for (std::size_t i = 0; i < n; ++i) {
    std::uint32_t bits;
    std::memcpy(&bits, src + i, 4);
    std::memcpy(dst + i, &bits, 4);
    bad |= static_cast<std::uint32_t>((bits & 0x7f800000u) == 0x7f800000u);
  }
  return bad == 0;
}

// Copies a publish into its slot with non-temporal stores where the processor has them: the
// lines go out of the writer's cache, so each reader on another core fetches them from the
// shared cache or memory instead of snooping them out of the writer's private cache, and the
// writer keeps its cache for training (about 10% off a gossip round of 8 peers here).
void copy_to_slot(std::byte* dst, std::span<const std::byte> src) {
#if defined(__x86_64__)
  std::size_t i = 0;
  for (; i < src.size() && (reinterpret_cast<std::uintptr_t>(dst + i) & 15) != 0; ++i)
    dst[i] = src[i];
  for (; i + 16 <= src.size(); i += 16)
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i),
                     _mm_loadu_si128(reinterpret_cast<const __m128i*>(src.data() + i)));
  for (; i < src.size(); ++i) dst[i] = src[i];
  _mm_sfence();  // the streamed stores are visible before the sequence says "done"
#else
  std::memcpy(dst, src.data(), src.size());
#endif
}

std::atomic_ref<std::uint64_t> slot_seq(const std::byte* slot) {
  // Only ever loaded through a read-only mapping (a plain load on x86-64 and AArch64).
  return std::atomic_ref<std::uint64_t>(
      *reinterpret_cast<std::uint64_t*>(const_cast<std::byte*>(slot)));
}

}  // namespace

std::uint64_t host_key() {
  static const std::uint64_t key = [] {
    std::string boot;
    std::ifstream("/proc/sys/kernel/random/boot_id") >> boot;
    if (boot.empty()) return std::uint64_t{0};
    std::uint64_t h = 0x9E3779B97F4A7C15ULL;
    for (char c : boot) h = mix64(h ^ static_cast<unsigned char>(c));
    for (const char* ns : {"/proc/self/ns/pid", "/proc/self/ns/mnt", "/proc/self/ns/net",
                           "/proc/self/ns/ipc"}) {
      struct stat st {};
      if (::stat(ns, &st) != 0) return std::uint64_t{0};
      h = mix64(h ^ static_cast<std::uint64_t>(st.st_ino));
      h = mix64(h ^ static_cast<std::uint64_t>(st.st_dev));
    }
    return h == 0 ? 1 : h;
  }();
  return key;
}

// --- our segment -----------------------------------------------------------------------------

std::unique_ptr<ShmSegment> ShmSegment::create(std::uint64_t param_count, WireFormat wire,
                                               std::uint32_t slots, std::string* why) {
  GOSSIP_CHECK(slots >= 2 && slots <= kMaxShmSlots);
  if (host_key() == 0) {
    *why = "cannot tell which host this is (no /proc)";
    return nullptr;
  }
  std::unique_ptr<ShmSegment> s(new ShmSegment());
  const std::uint64_t value_bytes = wire_value_bytes(wire);
  const std::uint64_t bytes = segment_bytes(param_count, value_bytes, slots);
  s->fd_ = memfd_create("gossip-params", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (s->fd_ < 0) {
    *why = sys_error("memfd_create");
    return nullptr;
  }
  if (::ftruncate(s->fd_, static_cast<off_t>(bytes)) != 0) {
    *why = sys_error("ftruncate");
    return nullptr;
  }
  // Sealed against shrinking, a reader's mapping can never lose its pages (no SIGBUS).
  if (::fcntl(s->fd_, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    *why = sys_error("sealing the memfd");
    return nullptr;
  }
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, s->fd_, 0);
  if (p == MAP_FAILED) {
    *why = sys_error("mmap");
    return nullptr;
  }
  s->base_ = static_cast<std::byte*>(p);
  s->param_count_ = param_count;
  s->value_bytes_ = value_bytes;
  s->stride_ = stride_for(param_count, value_bytes);
  std::random_device rd;
  const std::uint64_t token = (std::uint64_t{rd()} << 32) ^ rd() ^ mix64(bytes);
  const Header h{kMagic, token, param_count, slots, static_cast<std::uint32_t>(value_bytes),
                 s->stride_};
  std::memcpy(s->base_, &h, sizeof h);
  s->offer_ = wire::ShmOffer{host_key(), static_cast<std::uint32_t>(::getpid()),
                             static_cast<std::uint32_t>(s->fd_), token, bytes, slots};
  return s;
}

ShmSegment::~ShmSegment() {
  if (base_) ::munmap(base_, offer_.bytes);
  if (fd_ >= 0) ::close(fd_);
}

wire::ShmNote ShmSegment::write(double weight, std::span<const std::byte> values) {
  GOSSIP_CHECK_EQ(values.size(), param_count_ * value_bytes_);
  const auto slot = static_cast<std::uint32_t>(writes_ % offer_.slots);
  ++writes_;
  std::byte* s = base_ + kPage + slot * stride_;
  auto seq = slot_seq(s);
  const std::uint64_t odd = 2 * writes_ - 1;
  seq.store(odd, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  copy_to_slot(s + kSlotHeader, values);
  seq.store(odd + 1, std::memory_order_release);
  return wire::ShmNote{slot, odd + 1, weight};
}

// --- a neighbour's segment -------------------------------------------------------------------

std::unique_ptr<ShmView> ShmView::open(const wire::ShmOffer& offer, std::uint64_t param_count,
                                       WireFormat wire, std::string* why) {
  if (offer.slots < 2 || offer.slots > kMaxShmSlots) {
    *why = cat("it offers ", offer.slots, " slots (2..", kMaxShmSlots, " allowed)");
    return nullptr;
  }
  const std::uint64_t value_bytes = wire_value_bytes(wire);
  const std::uint64_t bytes = segment_bytes(param_count, value_bytes, offer.slots);
  if (offer.bytes != bytes) {
    *why = cat("it offers a segment of ", offer.bytes, " bytes; ", param_count, " ",
               wire_format_name(wire), " params in ", offer.slots, " slots need ", bytes);
    return nullptr;
  }
  const std::string path = cat("/proc/", offer.pid, "/fd/", offer.fd);
  // O_NONBLOCK: should the path name a FIFO, opening it must not hang the I/O thread.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) {
    *why = sys_error(cat("open ", path).c_str());
    return nullptr;
  }
  struct stat st {};
  const int seals = ::fcntl(fd, F_GET_SEALS);
  std::string bad;
  if (::fstat(fd, &st) != 0) bad = sys_error("fstat");
  else if (!S_ISREG(st.st_mode)) bad = cat(path, " is not a regular file");
  else if (static_cast<std::uint64_t>(st.st_size) != bytes)
    bad = cat(path, " has ", st.st_size, " bytes, the offer says ", bytes);
  else if (seals < 0 || !(seals & F_SEAL_SHRINK))
    bad = cat(path, " is not a memfd sealed against shrinking");
  void* p = MAP_FAILED;
  if (bad.empty()) {
    p = ::mmap(nullptr, bytes, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) bad = sys_error("mmap");
  }
  ::close(fd);
  if (!bad.empty()) {
    *why = bad;
    return nullptr;
  }
  std::unique_ptr<ShmView> v(new ShmView());
  v->base_ = static_cast<const std::byte*>(p);
  v->bytes_ = bytes;
  v->stride_ = stride_for(param_count, value_bytes);
  v->slots_ = offer.slots;
  v->wire_ = wire;
  Header h{};
  std::memcpy(&h, v->base_, sizeof h);
  if (h.magic != kMagic || h.token != offer.token)
    *why = cat(path, " is not the segment offered (magic or token differ)");
  else if (h.param_count != param_count || h.slots != offer.slots || h.stride != v->stride_ ||
           h.value_bytes != value_bytes)
    *why = cat(path, " describes ", h.param_count, " params of ", h.value_bytes, " bytes in ",
               h.slots, " slots");
  else
    return v;
  return nullptr;
}

ShmView::~ShmView() {
  if (base_) ::munmap(const_cast<std::byte*>(base_), bytes_);
}

ShmView::Read ShmView::read(const wire::ShmNote& note, std::span<float> out,
                            bool* all_finite) const {
  if (note.slot >= slots_)
    throw InputError(cat("shm-params names slot ", note.slot, " of ", slots_));
  GOSSIP_CHECK_EQ(stride_for(out.size(), wire_value_bytes(wire_)), stride_);
  const std::byte* s = base_ + kPage + note.slot * stride_;
  auto seq = slot_seq(s);
  if (seq.load(std::memory_order_acquire) != note.seq) return Read::kTorn;
  const bool finite =
      wire_ == WireFormat::kFp32
          ? copy_finite(out.data(), reinterpret_cast<const float*>(s + kSlotHeader), out.size())
          : widen_from_wire(std::span(reinterpret_cast<const std::uint16_t*>(s + kSlotHeader),
                                      out.size()),
                            wire_, out);
  std::atomic_thread_fence(std::memory_order_acquire);
  if (seq.load(std::memory_order_relaxed) != note.seq) return Read::kTorn;
  *all_finite = finite;
  return Read::kOk;
}

}  // namespace gossip::net
