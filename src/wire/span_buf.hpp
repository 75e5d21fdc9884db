/// wire/span_buf: a read-only std::streambuf over caller memory, so the Cereal decoders (hello,
/// checkpoint) read a payload without copying it and can ask how many bytes are left before
/// they allocate from a length they were sent.
#pragma once
#if !defined(GOSSIP_ROOM_WIRE)
#error "src/wire/span_buf.hpp belongs to room wire, which this room does not use (see the room table in meson.build)"
#endif

#include <cstddef>
#include <span>
#include <streambuf>

namespace gossip::wire {

class SpanBuf : public std::streambuf {
 public:
  explicit SpanBuf(std::span<const std::byte> bytes) {
    char* p = const_cast<char*>(reinterpret_cast<const char*>(bytes.data()));
    setg(p, p, p + bytes.size());
  }
  std::size_t left() const { return static_cast<std::size_t>(egptr() - gptr()); }
};

}  // namespace gossip::wire
