// data/idx.cpp: the IDX reader (MNIST / Fashion-MNIST format), plain or gzip.
//
// An IDX file is a big-endian header (magic 0x000008RR: unsigned bytes, rank RR; then RR 32-bit
// dimension sizes) followed by the product of the dimensions in bytes. We read the header first,
// bound what it claims by a hard cap and by what the file on disk can possibly hold, and only then
// stream the payload, in 1 MiB chunks, straight into the float array (one allocation when the file
// size or gzip trailer confirms the header). Any defect is an InputError naming the file.
//
// load_idx_mapped decodes the images once per host into a cache file (a 64-byte header naming the
// source, then the pixel bytes) and maps it read-only, so the peers of a host share one copy.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iomanip>
#include <memory>
#include <sstream>
#include <stdexcept>

#include "gossip/core.hpp"
#include "gossip/data.hpp"
#include "gossip/hash.hpp"

namespace gossip {
namespace {

constexpr std::uint32_t kImagesMagic = 0x00000803;  // unsigned bytes, rank 3: n x rows x cols
constexpr std::uint32_t kLabelsMagic = 0x00000801;  // unsigned bytes, rank 1: n
constexpr std::uint64_t kMaxPayload = std::uint64_t{1} << 31;  // 2 GiB: far above any IDX set
constexpr std::uint32_t kMaxSide = 1u << 15;                   // rows, cols
constexpr std::uint64_t kMaxDeflateRatio = 1032;  // deflate cannot expand by more than this
constexpr std::size_t kChunk = std::size_t{16} << 20;     // largest single read
constexpr std::size_t kReadChunk = std::size_t{1} << 20;  // pixels converted per step

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw InputError(cat(path, ": ", what));
}

std::string hex32(std::uint32_t v) {
  std::ostringstream os;
  os << "0x" << std::hex << std::setw(8) << std::setfill('0') << v;
  return os.str();
}

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
struct GzCloser {
  void operator()(gzFile f) const { gzclose(f); }
};

/// A file read front to back, transparently gunzipped when it starts with 1f 8b.
class ByteSource {
 public:
  explicit ByteSource(const std::string& path) : path_(path) {
    file_.reset(std::fopen(path.c_str(), "rb"));
    if (!file_) fail(path, cat("cannot open: ", std::strerror(errno)));
    std::error_code ec;
    disk_size_ = std::filesystem::file_size(path, ec);
    if (ec) fail(path, cat("cannot stat: ", ec.message()));
    unsigned char magic[2] = {0, 0};
    const std::size_t got = std::fread(magic, 1, 2, file_.get());
    gz_ = got == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
    if (gz_ && disk_size_ >= 4 && std::fseek(file_.get(), -4, SEEK_END) == 0) {
      unsigned char t[4] = {0, 0, 0, 0};  // gzip trailer ISIZE: length mod 2^32, little-endian
      if (std::fread(t, 1, 4, file_.get()) == 4) {
        gz_length_ = std::uint32_t{t[0]} | (std::uint32_t{t[1]} << 8) |
                     (std::uint32_t{t[2]} << 16) | (std::uint32_t{t[3]} << 24);
      }
    }
    if (gz_) {
      file_.reset();
      gz_file_.reset(gzopen(path.c_str(), "rb"));
      if (!gz_file_) fail(path, "cannot open as gzip");
      gzbuffer(gz_file_.get(), 1u << 20);
    } else {
      std::rewind(file_.get());
    }
  }

  bool gz() const { return gz_; }
  std::uint64_t disk_size() const { return disk_size_; }
  /// What the gzip trailer says the decompressed length is, mod 2^32 (a hint: a file may lie).
  std::uint32_t gz_length_mod32() const { return gz_length_; }

  /// Reads up to n bytes; returns fewer only at the end of the data.
  std::size_t read(unsigned char* out, std::size_t n) {
    std::size_t total = 0;
    while (total < n) {
      std::size_t want = std::min(n - total, kChunk);
      std::size_t got = 0;
      if (gz_) {
        int r = gzread(gz_file_.get(), out + total, static_cast<unsigned>(want));
        if (r < 0) {
          int errnum = 0;
          std::string msg = gzerror(gz_file_.get(), &errnum);
          if (msg.rfind(path_ + ": ", 0) == 0) msg.erase(0, path_.size() + 2);  // zlib adds it
          fail(path_, cat("corrupt gzip data: ", msg));
        }
        got = static_cast<std::size_t>(r);
      } else {
        got = std::fread(out + total, 1, want, file_.get());
        if (got < want && std::ferror(file_.get())) fail(path_, "read error");
      }
      total += got;
      if (got < want) break;
    }
    return total;
  }

  /// True when the gzip stream ended before its end-of-stream marker.
  bool gz_cut_short() {
    if (!gz_) return false;
    int errnum = Z_OK;
    gzerror(gz_file_.get(), &errnum);
    return errnum == Z_BUF_ERROR;
  }

  /// Counts (and discards) what is left.
  std::uint64_t count_rest() {
    std::vector<unsigned char> scratch(1u << 16);
    std::uint64_t extra = 0;
    while (std::size_t got = read(scratch.data(), scratch.size())) extra += got;
    return extra;
  }

 private:
  std::string path_;
  std::unique_ptr<std::FILE, FileCloser> file_;
  std::unique_ptr<gzFile_s, GzCloser> gz_file_;
  bool gz_ = false;
  std::uint64_t disk_size_ = 0;
  std::uint32_t gz_length_ = 0;
};

std::uint32_t big_endian32(const unsigned char* p) {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) |
         std::uint32_t{p[3]};
}

/// "10000 images of 28x28" / "10000 labels": what the header announces, for messages.
std::string describe(const std::vector<std::uint32_t>& dims) {
  if (dims.size() == 3) return cat(dims[0], " images of ", dims[1], "x", dims[2]);
  return cat(dims[0], " labels");
}

/// One IDX file: the constructor reads and checks the header (and that the file can hold what it
/// claims), read() streams the payload, finish() checks nothing follows it.
class IdxReader {
 public:
  IdxReader(const std::string& path, std::uint32_t magic, int rank)
      : path_(path), src_(path), header_bytes_(4 + 4 * static_cast<std::uint64_t>(rank)) {
    read_header(magic, rank);
    payload_ = 1;
    for (std::uint32_t d : dims_) payload_ *= d;  // <= 2^32 * 2^15 * 2^15: no overflow
    claim_ = cat("header says ", describe(dims_), " (", payload_, " bytes)");
    if (payload_ > kMaxPayload) {
      fail(path, cat("implausible size: ", claim_, ", limit ", kMaxPayload));
    }
    if (src_.gz() && payload_ > kMaxDeflateRatio * src_.disk_size()) {
      fail(path, cat("truncated: ", claim_, " but a gzip file of ", src_.disk_size(),
                     " bytes cannot hold that much"));
    }
    if (!src_.gz()) {
      const std::uint64_t on_disk = src_.disk_size() - std::min(src_.disk_size(), header_bytes_);
      if (payload_ > on_disk) {
        fail(path, cat("truncated: ", claim_, " but only ", on_disk, " bytes follow"));
      }
    }
  }

  const std::vector<std::uint32_t>& dims() const { return dims_; }
  std::uint64_t payload_bytes() const { return payload_; }
  /// The file's size agrees with the header (plain), or the gzip trailer's length does: then it
  /// is safe to allocate for the whole payload up front.
  bool size_confirmed() const {
    return !src_.gz() || src_.gz_length_mod32() == ((header_bytes_ + payload_) & 0xffffffffu);
  }

  /// Reads the next up to n payload bytes; 0 once the payload is done. Throws if the data ends
  /// before the header's count.
  std::size_t read(unsigned char* out, std::size_t n) {
    const auto want = static_cast<std::size_t>(std::min<std::uint64_t>(n, payload_ - got_));
    const std::size_t r = src_.read(out, want);
    got_ += r;
    if (r < want) {
      fail(path_, cat("truncated: ", claim_, " but only ", got_, " bytes follow",
                      src_.gz_cut_short() ? " (gzip stream ends early)" : ""));
    }
    return r;
  }

  /// Reads the whole payload (for small files).
  std::vector<unsigned char> read_all() {
    std::vector<unsigned char> out(payload_);
    read(out.data(), out.size());
    return out;
  }

  /// Checks the payload was read completely and nothing follows it.
  void finish() {
    GOSSIP_CHECK_EQ(got_, payload_);
    if (std::uint64_t extra = src_.count_rest(); extra > 0) {
      fail(path_, cat("trailing garbage: ", extra, " bytes after the ", describe(dims_),
                      " the header announces"));
    }
  }

 private:
  void read_header(std::uint32_t magic, int rank) {
    std::array<unsigned char, 16> head{};
    const std::size_t got = src_.read(head.data(), header_bytes_);
    if (got < 4) {
      fail(path_, cat("truncated header: ", got, " bytes, an IDX file needs at least 4"));
    }
    const std::uint32_t found = big_endian32(head.data());
    if (found != magic) {
      std::string hint;
      if (found == kImagesMagic) hint = " (this is an IDX image file)";
      if (found == kLabelsMagic) hint = " (this is an IDX label file)";
      if (head[0] == 0x1f && head[1] == 0x8b) hint = " (gzip inside gzip?)";
      const char* kind = rank == 3 ? "images" : "labels";
      fail(path_, cat("wrong magic ", hex32(found), ", expected ", hex32(magic), " (IDX ", kind,
                      ", unsigned bytes, rank ", rank, ")", hint));
    }
    if (got < header_bytes_) {
      fail(path_, cat("truncated header: ", got, " bytes, an IDX rank-", rank, " header needs ",
                      header_bytes_));
    }
    dims_.resize(rank);
    for (int i = 0; i < rank; ++i) dims_[i] = big_endian32(head.data() + 4 + 4 * i);
    for (int i = 0; i < rank; ++i) {
      if (dims_[i] == 0) {
        fail(path_, cat("dimension ", i, " is 0 (header says ", describe(dims_), ")"));
      }
    }
    if (rank == 3 && (dims_[1] > kMaxSide || dims_[2] > kMaxSide)) {
      fail(path_, cat("implausible image size ", dims_[1], "x", dims_[2], " (at most ", kMaxSide,
                      " per side)"));
    }
  }

  std::string path_;
  ByteSource src_;
  std::uint64_t header_bytes_;
  std::vector<std::uint32_t> dims_;
  std::uint64_t payload_ = 0;
  std::uint64_t got_ = 0;
  std::string claim_;
};

void check_classes(int classes) {
  if (classes < 1 || classes > 256) {
    throw InputError(cat("load_idx: classes must be in 1..256, got ", classes));
  }
}

/// Opens both files, checks the counts agree, and fills everything but the pixels.
Dataset read_labels(IdxReader& images, IdxReader& labels, const std::string& images_path,
                    const std::string& labels_path, int classes) {
  if (labels.dims()[0] != images.dims()[0]) {
    fail(labels_path, cat("count mismatch: ", labels.dims()[0], " labels but ", images_path,
                          " has ", images.dims()[0], " images"));
  }
  Dataset d;
  d.n = images.dims()[0];
  d.dim = static_cast<int>(images.dims()[1] * images.dims()[2]);
  d.classes = classes;
  const std::vector<unsigned char> raw_labels = labels.read_all();
  labels.finish();
  d.y.resize(raw_labels.size());
  for (std::size_t i = 0; i < raw_labels.size(); ++i) {
    if (raw_labels[i] >= classes) {
      fail(labels_path, cat("label out of range: label ", int{raw_labels[i]}, " at index ", i,
                            " is not below classes = ", classes));
    }
    d.y[i] = raw_labels[i];
  }
  return d;
}

// --- The per-host cache of decoded image bytes (load_idx_mapped) ---------------------------------

/// What the cache file's header says, and must say, about the IDX file it was decoded from.
struct CacheHeader {
  char magic[16] = {'g', 'o', 's', 's', 'i', 'p', '-', 'i', 'd', 'x', '-', 'v', '1', 0, 0, 0};
  std::uint32_t n = 0, rows = 0, cols = 0, reserved = 0;
  std::uint64_t payload = 0;
  std::uint64_t source_size = 0;
  std::int64_t source_mtime_ns = 0;
  std::uint64_t reserved2 = 0;

  bool operator==(const CacheHeader&) const = default;
};
static_assert(sizeof(CacheHeader) == 64);

/// An operating-system failure around the cache (not a defect of the data): load_idx_mapped
/// falls back to loading into memory.
class CacheError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A file descriptor closed on scope exit.
struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

[[noreturn]] void os_fail(const std::string& what, const std::string& path) {
  throw CacheError(cat(what, " ", path, ": ", std::strerror(errno)));
}

/// The cache file when it exists with exactly the header wanted and the size it implies; -1
/// otherwise.
int open_valid(const std::string& path, const CacheHeader& want) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  CacheHeader got;
  struct stat st {};
  if (::fstat(fd, &st) != 0 || ::pread(fd, &got, sizeof got, 0) != sizeof got || !(got == want) ||
      static_cast<std::uint64_t>(st.st_size) != sizeof(CacheHeader) + want.payload) {
    ::close(fd);
    return -1;
  }
  return fd;
}

/// Writes the header and the decoded payload of `images` to `tmp`, then renames it to `path`.
void write_cache(IdxReader& images, const CacheHeader& header, const std::string& tmp,
                 const std::string& path) {
  Fd out(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (out.fd < 0) os_fail("cannot create", tmp);
  auto put = [&](const void* p, std::size_t n) {
    const auto* c = static_cast<const char*>(p);
    while (n > 0) {
      const ssize_t w = ::write(out.fd, c, n);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        ::unlink(tmp.c_str());
        os_fail("cannot write", tmp);
      }
      c += w;
      n -= static_cast<std::size_t>(w);
    }
  };
  put(&header, sizeof header);
  std::vector<unsigned char> chunk(std::min<std::uint64_t>(header.payload, kReadChunk));
  try {
    while (const std::size_t r = images.read(chunk.data(), chunk.size())) put(chunk.data(), r);
    images.finish();
  } catch (const InputError&) {
    ::unlink(tmp.c_str());  // a defect of the IDX file: no cache, and the caller hears of it
    throw;
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    os_fail("cannot rename into", path);
  }
}

/// Maps the cache file of `images` (building it first when missing or stale) and returns the
/// pixels as a view of it.
Pixels map_cached(IdxReader& images, const CacheHeader& want, const std::string& images_path,
                  const std::string& cache_dir) {
  std::error_code ec;
  std::filesystem::create_directories(cache_dir, ec);
  if (ec) throw CacheError(cat("cannot create ", cache_dir, ": ", ec.message()));
  const std::string canonical = std::filesystem::weakly_canonical(images_path, ec).string();
  const std::string key = cat(ec ? images_path : canonical, "\n", want.source_size, "\n",
                              want.source_mtime_ns);
  const std::string stem = cat(cache_dir, "/idx-", sha256_hex(key.data(), key.size()).substr(0, 24));
  const std::string path = stem + ".bin";
  int fd = open_valid(path, want);
  if (fd < 0) {
    // One process of the host decodes; the others wait on the lock and then find the file.
    Fd lock(::open((stem + ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
    if (lock.fd < 0) os_fail("cannot create", stem + ".lock");
    while (::flock(lock.fd, LOCK_EX) != 0) {
      if (errno != EINTR) os_fail("cannot lock", stem + ".lock");
    }
    fd = open_valid(path, want);
    if (fd < 0) {
      write_cache(images, want, cat(stem, ".tmp.", ::getpid()), path);
      fd = open_valid(path, want);
      if (fd < 0) throw CacheError(cat(path, ": not readable right after writing it"));
    }
  }
  Fd file(fd);
  const std::size_t length = sizeof(CacheHeader) + want.payload;
  void* base = ::mmap(nullptr, length, PROT_READ, MAP_SHARED, file.fd, 0);
  if (base == MAP_FAILED) os_fail("cannot map", path);
  std::shared_ptr<const void> mapping(base, [length](const void* p) {
    ::munmap(const_cast<void*>(p), length);
  });
  const auto* view = static_cast<const std::uint8_t*>(base) + sizeof(CacheHeader);
  return Pixels::mapped(std::move(mapping), view, want.payload, path);
}

}  // namespace

void Pixels::truncate(std::size_t n) {
  GOSSIP_CHECK_MSG(n <= size(), "Pixels::truncate: ", n, " is more than the ", size(), " bytes");
  if (mapping_) size_ = n;
  else own_.resize(n);
}

std::vector<std::uint8_t>& Pixels::owned() {
  GOSSIP_CHECK_MSG(!mapping_, "the pixels mapped from ", file_, " are read-only");
  return own_;
}

Pixels Pixels::mapped(std::shared_ptr<const void> mapping, const std::uint8_t* view,
                      std::size_t size, std::string file) {
  Pixels p;
  p.mapping_ = std::move(mapping);
  p.view_ = view;
  p.size_ = size;
  p.file_ = std::move(file);
  return p;
}

Dataset load_idx(const std::string& images_path, const std::string& labels_path, int classes) {
  check_classes(classes);
  IdxReader images(images_path, kImagesMagic, 3);
  IdxReader labels(labels_path, kLabelsMagic, 1);
  Dataset d = read_labels(images, labels, images_path, labels_path, classes);

  // Pixels stay bytes, read from the (decompressed) stream a chunk at a time; features are
  // made per batch (Dataset::feature).
  const std::uint64_t total = images.payload_bytes();
  std::vector<std::uint8_t>& pixels = d.pixels.owned();
  pixels.reserve(images.size_confirmed() ? total : std::min<std::uint64_t>(total, kChunk));
  std::vector<unsigned char> chunk(std::min<std::uint64_t>(total, kReadChunk));
  while (const std::size_t r = images.read(chunk.data(), chunk.size())) {
    pixels.insert(pixels.end(), chunk.begin(), chunk.begin() + static_cast<std::ptrdiff_t>(r));
  }
  images.finish();
  return d;
}

Dataset load_idx_mapped(const std::string& images_path, const std::string& labels_path,
                        int classes, const std::string& cache_dir, std::string* warning) {
  check_classes(classes);
  if (warning) warning->clear();
  IdxReader images(images_path, kImagesMagic, 3);
  IdxReader labels(labels_path, kLabelsMagic, 1);
  Dataset d = read_labels(images, labels, images_path, labels_path, classes);
  CacheHeader want;
  want.n = images.dims()[0];
  want.rows = images.dims()[1];
  want.cols = images.dims()[2];
  want.payload = images.payload_bytes();
  struct stat st {};
  if (::stat(images_path.c_str(), &st) != 0) fail(images_path, cat("cannot stat: ", std::strerror(errno)));
  want.source_size = static_cast<std::uint64_t>(st.st_size);
  want.source_mtime_ns = std::int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec;
  try {
    d.pixels = map_cached(images, want, images_path, cache_dir);
    return d;
  } catch (const CacheError& e) {
    if (warning) {
      *warning = cat(images_path, ": not shared through the cache (", e.what(),
                     "); loaded into this process's memory");
    }
  }
  return load_idx(images_path, labels_path, classes);
}

}  // namespace gossip
