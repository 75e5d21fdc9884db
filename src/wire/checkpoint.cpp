// wire/checkpoint.cpp: the checkpoint codec. The payload is Cereal's binary archive of fixed-width
// fields; the buffers (parameters, momentum, from version 2 the algorithm's state) are each a
// u64 count and their raw floats, and from version 3 the caller's state a u64 count and its
// bytes, each count checked against the bytes left before anything is allocated. Version 1 and
// 2 files (no algorithm state, no caller state) are still read. The SHA-256 over the payload catches a torn or corrupted file.
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <bit>
#include <cstring>
#include <istream>
#include <sstream>
#include <streambuf>

#include <cereal/archives/binary.hpp>

#include "gossip/checkpoint.hpp"
#include "gossip/core.hpp"
#include "src/wire/span_buf.hpp"
#include "gossip/hash.hpp"

namespace gossip {
namespace {

using wire::SpanBuf;

static_assert(std::endian::native == std::endian::little,
              "checkpoints are little-endian; big-endian hosts are not supported");

constexpr char kMagic[8] = {'G', 'O', 'S', 'S', 'I', 'P', 'C', 'K'};
constexpr std::uint32_t kVersion = 3;
constexpr std::size_t kHeader = sizeof kMagic + 4 + 8;
constexpr std::size_t kDigest = 32;

struct Refused {
  std::string why;
};

std::array<std::byte, kDigest> digest(std::span<const std::byte> payload) {
  const std::string hex = sha256_hex(payload.data(), payload.size());
  std::array<std::byte, kDigest> out{};
  for (std::size_t i = 0; i < kDigest; ++i)
    out[i] = static_cast<std::byte>(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
  return out;
}

template <typename Archive>
void fields(Archive& ar, Checkpoint& c) {
  ar(c.rank, c.round, c.rounds, c.run_fingerprint, c.steps, c.sampler_epoch, c.sampler_pos,
     c.sampler_drawn, c.weight, c.loss_sum, c.loss_count, c.missing, c.bytes_sent);
}

void read_floats(cereal::BinaryInputArchive& ar, const SpanBuf& buf, std::vector<float>& v,
                 const char* what) {
  std::uint64_t n = 0;
  ar(n);
  if (n > buf.left() / sizeof(float))
    throw Refused{cat(what, " of ", n, " floats is longer than the ", buf.left(),
                      " bytes left")};
  v.resize(n);
  ar(cereal::binary_data(v.data(), n * sizeof(float)));
}

void read_bytes(cereal::BinaryInputArchive& ar, const SpanBuf& buf, std::vector<std::byte>& v,
                const char* what) {
  std::uint64_t n = 0;
  ar(n);
  if (n > buf.left())
    throw Refused{cat(what, " of ", n, " bytes is longer than the ", buf.left(), " bytes left")};
  v.resize(n);
  ar(cereal::binary_data(v.data(), n));
}

}  // namespace

std::vector<std::byte> encode_checkpoint(const Checkpoint& c) {
  std::ostringstream os;
  {
    cereal::BinaryOutputArchive ar(os);
    Checkpoint copy = c;
    fields(ar, copy);
    for (const auto* v : {&c.params, &c.velocity, &c.algorithm_state}) {
      ar(static_cast<std::uint64_t>(v->size()));
      ar(cereal::binary_data(v->data(), v->size() * sizeof(float)));
    }
    ar(static_cast<std::uint64_t>(c.caller_state.size()));
    ar(cereal::binary_data(c.caller_state.data(), c.caller_state.size()));
  }
  const std::string payload = os.str();
  std::vector<std::byte> out(kHeader + payload.size() + kDigest);
  std::memcpy(out.data(), kMagic, sizeof kMagic);
  std::memcpy(out.data() + 8, &kVersion, 4);
  const std::uint64_t length = payload.size();
  std::memcpy(out.data() + 12, &length, 8);
  std::memcpy(out.data() + kHeader, payload.data(), payload.size());
  const auto d = digest({out.data() + kHeader, payload.size()});
  std::memcpy(out.data() + kHeader + payload.size(), d.data(), kDigest);
  return out;
}

std::optional<Checkpoint> decode_checkpoint(std::span<const std::byte> bytes, std::string* why) {
  auto refuse = [&](std::string reason) -> std::optional<Checkpoint> {
    if (why) *why = std::move(reason);
    return std::nullopt;
  };
  if (bytes.size() < kHeader + kDigest)
    return refuse(cat("truncated: ", bytes.size(), " bytes, less than a checkpoint's header"));
  if (std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0)
    return refuse("not a gossip checkpoint (wrong magic)");
  std::uint32_t version = 0;
  std::memcpy(&version, bytes.data() + 8, 4);
  if (version < 1 || version > kVersion)
    return refuse(cat("checkpoint version ", version, ", this build reads versions 1 to ",
                      kVersion));
  std::uint64_t length = 0;
  std::memcpy(&length, bytes.data() + 12, 8);
  if (length != bytes.size() - kHeader - kDigest)
    return refuse(cat("truncated or padded: the header says ", length, " payload bytes, the file has ",
                      bytes.size() - kHeader - kDigest));
  const auto payload = bytes.subspan(kHeader, length);
  const auto d = digest(payload);
  if (std::memcmp(d.data(), bytes.data() + kHeader + length, kDigest) != 0)
    return refuse("checksum mismatch: the file is corrupt");
  Checkpoint c;
  SpanBuf buf(payload);
  std::istream is(&buf);
  try {
    cereal::BinaryInputArchive ar(is);
    fields(ar, c);
    read_floats(ar, buf, c.params, "parameter buffer");
    read_floats(ar, buf, c.velocity, "momentum buffer");
    if (version >= 2) read_floats(ar, buf, c.algorithm_state, "algorithm state");
    if (version >= 3) read_bytes(ar, buf, c.caller_state, "caller state");
  } catch (const Refused& r) {
    return refuse(r.why);
  } catch (const cereal::Exception&) {
    return refuse("truncated payload");
  }
  if (buf.left() != 0) return refuse(cat(buf.left(), " trailing bytes in the payload"));
  return c;
}

namespace {

/// The rounds of DIR/checkpoint-*.ckpt files, by name, ascending.
std::vector<std::int64_t> checkpoint_rounds(const std::string& dir) {
  std::vector<std::int64_t> rounds;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    long long r = -1;
    char tail[8] = {};
    if (std::sscanf(name.c_str(), "checkpoint-%lld.%5s", &r, tail) == 2 &&
        std::string(tail) == "ckpt" && r >= 0 && name == cat("checkpoint-", r, ".ckpt"))
      rounds.push_back(r);
  }
  std::sort(rounds.begin(), rounds.end());
  return rounds;
}

}  // namespace

std::string checkpoint_path(const std::string& dir, std::int64_t round) {
  return cat(dir, "/checkpoint-", round, ".ckpt");
}

void write_checkpoint_file(const std::string& path, const Checkpoint& c) {
  const auto bytes = encode_checkpoint(c);
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) throw RuntimeError(cat(tmp, ": cannot write a checkpoint: ", std::strerror(errno)));
  const bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size() &&
                  std::fflush(f) == 0 && fsync(fileno(f)) == 0;
  std::fclose(f);
  if (!ok) throw RuntimeError(cat(tmp, ": writing the checkpoint failed"));
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) throw RuntimeError(cat(path, ": cannot rename the checkpoint into place: ", ec.message()));
}

std::optional<Checkpoint> read_checkpoint_file(const std::string& path, std::string* why) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (why) *why = "cannot open it";
    return std::nullopt;
  }
  std::vector<char> raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto* p = reinterpret_cast<const std::byte*>(raw.data());
  return decode_checkpoint({p, raw.size()}, why);
}

std::vector<std::int64_t> valid_checkpoints(const std::string& dir, int rank,
                                            std::vector<std::string>* refused) {
  std::vector<std::int64_t> ok;
  for (std::int64_t r : checkpoint_rounds(dir)) {
    const std::string path = checkpoint_path(dir, r);
    std::string why;
    const auto c = read_checkpoint_file(path, &why);
    if (c && c->rank == rank && c->round == r) {
      ok.push_back(r);
      continue;
    }
    if (c) why = cat("it holds rank ", c->rank, " round ", c->round, ", not rank ", rank,
                     " round ", r);
    if (refused) refused->push_back(cat(path, ": ", why));
  }
  return ok;
}

void prune_checkpoints(const std::string& dir, std::size_t keep) {
  const auto rounds = checkpoint_rounds(dir);
  for (std::size_t i = 0; i + keep < rounds.size(); ++i) {
    std::error_code ec;
    std::filesystem::remove(checkpoint_path(dir, rounds[i]), ec);
  }
}

}  // namespace gossip
