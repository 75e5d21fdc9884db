// fuzz/fuzz_frame.cpp: libFuzzer target for the frame and record-header decoders
// (src/wire/frame.cpp). Any bytes:
// no crash, no allocation before the size check (scripts/fuzz.sh caps malloc), and a frame that
// is accepted re-encodes to exactly the input; so do the note of an accepted shm-params frame,
// the membership view of an accepted view frame, and the payload of a params frame accepted in
// any wire format (fp32, bf16, fp16: widening is exact, so narrowing back gives the same bits).
#include <cstdint>
#include <cstdlib>
#include <algorithm>
#include <cstring>
#include <vector>

#include "gossip/wire.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace gossip::wire;
  const auto bytes = std::as_bytes(std::span(data, size));
  const std::uint64_t max_frame = 1 << 16;
  const auto header = decode_header(bytes, max_frame);
  const auto frame = decode_frame(bytes, max_frame);
  if (!header && frame) std::abort();  // a frame cannot be good if its header is not
  // The record header in front: a length it accepts is within bounds and re-encodes.
  if (const auto length = decode_record_length(bytes)) {
    if (*length.value == 0 || *length.value > kMaxRecordBytes) std::abort();
    const auto again = encode_record_header(*length.value);
    if (!std::equal(again.begin(), again.begin() + 4, bytes.begin())) std::abort();
  } else if (length.error.empty()) {
    std::abort();
  }
  for (const auto wire : {gossip::WireFormat::kFp32, gossip::WireFormat::kBf16,
                          gossip::WireFormat::kFp16}) {
    const auto f = decode_frame(bytes, max_frame, wire);
    if (!f) {
      if (f.error.empty()) std::abort();
      continue;
    }
    if (f.value->header.type != FrameType::kParams) continue;
    const auto payload = f.value->payload;
    // The header checked the length: a weight and whole values, within the 64 KiB frame.
    std::vector<float> out((payload.size() - kWeightBytes) / gossip::wire_value_bytes(wire));
    const auto params = decode_params(payload, wire, out, f.value->header.round);
    if (!params) {
      if (params.error.empty()) std::abort();
      continue;
    }
    const auto again = encode_params(out, *params.value, wire);
    if (!std::equal(again.begin(), again.end(), payload.begin(), payload.end())) std::abort();
  }
  if (!frame) {
    if (frame.error.empty()) std::abort();  // every refusal says why
    return 0;
  }
  const FrameHeader& h = frame.value->header;
  if (!check_payload(h, frame.value->payload).empty()) std::abort();
  const auto again = encode_frame(h.type, h.sender, h.round, frame.value->payload);
  if (again.size() != size || std::memcmp(again.data(), data, size) != 0) std::abort();
  if (h.type == FrameType::kShmParams) {
    const auto note = decode_shm_note(frame.value->payload);
    if (!note) {
      if (note.error.empty()) std::abort();
      return 0;
    }
    const auto payload = encode_shm_note(*note.value);
    if (!std::equal(payload.begin(), payload.end(), frame.value->payload.begin())) std::abort();
  }
  if (h.type == FrameType::kAnnounce) {  // membership changes: accepted ones re-encode exactly
    const auto changes = decode_announcements(frame.value->payload, 4096);
    if (!changes) {
      if (changes.error.empty()) std::abort();
      return 0;
    }
    const auto payload = encode_announcements(*changes.value);
    if (payload.size() != frame.value->payload.size() ||
        !std::equal(payload.begin(), payload.end(), frame.value->payload.begin()))
      std::abort();
  }
  if (h.type == FrameType::kView) {  // a membership view: accepted ones re-encode exactly
    const auto view = decode_view(frame.value->payload, 4096);
    if (!view) {
      if (view.error.empty()) std::abort();
      return 0;
    }
    const auto payload = encode_view(view.value->members, view.value->probes);
    if (payload.size() != frame.value->payload.size() ||
        !std::equal(payload.begin(), payload.end(), frame.value->payload.begin()))
      std::abort();
  }
  return 0;
}
