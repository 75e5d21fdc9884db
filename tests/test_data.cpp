// Tests for data: the IDX reader (round trip and each kind of broken file), synthetic sets,
// sharding (disjoint, covering, deterministic, label skew) and the batch sampler.
// Broken IDX files are generated at run time into a temporary directory.
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <unistd.h>
#include <vector>

#include "gossip/core.hpp"
#include "gossip/data.hpp"

using namespace gossip;
using Catch::Contains;
namespace fs = std::filesystem;

namespace {

using Bytes = std::vector<unsigned char>;

/// A fresh directory under the system temp dir, removed at scope exit.
struct TempDir {
  fs::path path;
  TempDir() {
    static std::atomic<int> counter{0};
    path = fs::temp_directory_path() /
           ("gossip_test_data_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string file(const std::string& name) const { return (path / name).string(); }
};

void put32(Bytes& b, std::uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<unsigned char>(v >> s));
}

/// IDX bytes: magic, dims (big-endian), payload.
Bytes idx_bytes(std::uint32_t magic, const std::vector<std::uint32_t>& dims, const Bytes& payload) {
  Bytes b;
  put32(b, magic);
  for (auto d : dims) put32(b, d);
  b.insert(b.end(), payload.begin(), payload.end());
  return b;
}

void write_file(const std::string& path, const Bytes& b, bool gz) {
  if (gz) {
    gzFile f = gzopen(path.c_str(), "wb");
    REQUIRE(f != nullptr);
    REQUIRE(gzwrite(f, b.data(), static_cast<unsigned>(b.size())) == static_cast<int>(b.size()));
    REQUIRE(gzclose(f) == Z_OK);
  } else {
    std::ofstream(path, std::ios::binary)
        .write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
  }
}

// A small valid pair: 3 images of 2x3, labels 0, 9, 3.
const Bytes kPixels = {0, 255, 51, 102, 153, 204, 1, 2, 3, 4, 5, 6, 255, 255, 255, 0, 0, 0};
const Bytes kLabels = {0, 9, 3};
Bytes good_images() { return idx_bytes(0x803, {3, 2, 3}, kPixels); }
Bytes good_labels() { return idx_bytes(0x801, {3}, kLabels); }

/// Writes images and labels files (named for the test) and loads them.
Dataset load_pair(const TempDir& dir, const std::string& stem, const Bytes& images,
                  const Bytes& labels, bool gz = false) {
  const std::string ext = gz ? ".gz" : "";
  const std::string img = dir.file(stem + "-images" + ext);
  const std::string lab = dir.file(stem + "-labels" + ext);
  write_file(img, images, gz);
  write_file(lab, labels, gz);
  return load_idx(img, lab, 10);
}

std::int64_t total_size(const std::vector<std::vector<std::int64_t>>& shards) {
  std::int64_t n = 0;
  for (const auto& s : shards) n += static_cast<std::int64_t>(s.size());
  return n;
}

/// Mean over peers of the total-variation distance between the peer's and the global label mix.
double mean_label_skew(const std::vector<std::vector<std::int64_t>>& shards,
                       const std::vector<std::int32_t>& labels, int classes) {
  std::vector<double> global(classes, 0.0);
  for (auto y : labels) global[y] += 1.0 / static_cast<double>(labels.size());
  double sum = 0.0;
  for (const auto& s : shards) {
    std::vector<double> local(classes, 0.0);
    for (auto i : s) local[labels[i]] += 1.0 / static_cast<double>(s.size());
    double tv = 0.0;
    for (int c = 0; c < classes; ++c) tv += 0.5 * std::abs(local[c] - global[c]);
    sum += tv;
  }
  return sum / static_cast<double>(shards.size());
}

std::vector<std::int32_t> balanced_labels(std::int64_t n, int classes) {
  std::vector<std::int32_t> y(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) y[i] = static_cast<std::int32_t>((i * 7 + i / 3) % classes);
  return y;
}

}  // namespace

// ---- IDX reader -------------------------------------------------------------------------------

TEST_CASE("IDX round trip keeps labels and scales pixels to [0,1]", "[data]") {
  TempDir dir;
  for (bool gz : {false, true}) {
    SECTION(gz ? "gzip" : "plain") {
      Dataset d = load_pair(dir, "roundtrip", good_images(), good_labels(), gz);
      REQUIRE(d.n == 3);
      REQUIRE(d.dim == 6);
      REQUIRE(d.classes == 10);
      REQUIRE(d.y == std::vector<std::int32_t>{0, 9, 3});
      REQUIRE(d.x.empty());  // image sets keep the file's bytes
      REQUIRE(d.pixels.size() == kPixels.size());
      for (std::size_t i = 0; i < kPixels.size(); ++i) {
        REQUIRE(d.pixels[i] == kPixels[i]);
        REQUIRE(d.feature(static_cast<std::int64_t>(i) / 6, static_cast<int>(i % 6)) ==
                Approx(kPixels[i] / 255.0).margin(1e-7));
      }
    }
  }
}

TEST_CASE("mapped IDX sets: one cache file per host, equal to the plain load, rebuilt when stale",
          "[data][mapped]") {
  TempDir dir;
  const std::string img = dir.file("m-images.gz");
  const std::string lab = dir.file("m-labels.gz");
  write_file(img, good_images(), true);
  write_file(lab, good_labels(), true);
  const std::string cache = dir.file("cache");
  const Dataset plain = load_idx(img, lab, 10);
  std::string warning = "stale";
  const Dataset a = load_idx_mapped(img, lab, 10, cache, &warning);
  CHECK(warning.empty());
  REQUIRE_FALSE(a.pixels.mapped_file().empty());
  CHECK(plain.pixels.mapped_file().empty());
  CHECK(a.n == 3);
  CHECK(a.dim == 6);
  CHECK(a.y == plain.y);
  REQUIRE(Bytes(a.pixels.begin(), a.pixels.end()) == kPixels);
  // The cache holds a 64-byte header and the pixels, and nothing else is left in the folder
  // (the lock file stays; no temporary file does).
  const std::string file = a.pixels.mapped_file();
  CHECK(fs::file_size(file) == 64 + kPixels.size());
  for (const auto& e : fs::directory_iterator(cache))
    CHECK_THAT(e.path().string(), !Contains(".tmp."));
  // A second load maps the same file without writing it again.
  const auto written = fs::last_write_time(file);
  const Dataset b = load_idx_mapped(img, lab, 10, cache, &warning);
  CHECK(b.pixels.mapped_file() == file);
  CHECK(fs::last_write_time(file) == written);
  CHECK(Bytes(b.pixels.begin(), b.pixels.end()) == kPixels);
  // A copy of a mapped set shares the mapping and is read-only; shortening it (data.limit_train)
  // shortens only that copy's view.
  Dataset c = b;
  CHECK_THROWS(c.pixels.owned());
  c.pixels.truncate(6);
  CHECK(c.pixels.size() == 6);
  CHECK(b.pixels.size() == kPixels.size());
  // A cache file cut short is not trusted: it is rebuilt.
  fs::resize_file(file, 40);
  const Dataset d = load_idx_mapped(img, lab, 10, cache, &warning);
  CHECK(warning.empty());
  CHECK(Bytes(d.pixels.begin(), d.pixels.end()) == kPixels);
  CHECK(fs::file_size(file) == 64 + kPixels.size());
  // The cache is keyed by the source: another file with other pixels gets its own cache file.
  Bytes other = kPixels;
  other[0] = 7;
  const std::string img2 = dir.file("m2-images.gz");
  write_file(img2, idx_bytes(0x803, {3, 2, 3}, other), true);
  const Dataset e = load_idx_mapped(img2, lab, 10, cache, &warning);
  CHECK(e.pixels.mapped_file() != file);
  CHECK(e.pixels[0] == 7);
  CHECK(a.pixels[0] == 0);  // the first mapping still reads its own file
}

TEST_CASE("mapped IDX sets: an unwritable cache falls back to memory, a broken file is refused",
          "[data][mapped]") {
  TempDir dir;
  const std::string img = dir.file("f-images.gz");
  const std::string lab = dir.file("f-labels.gz");
  write_file(img, good_images(), true);
  write_file(lab, good_labels(), true);
  // A cache folder that cannot exist: a path under a regular file.
  write_file(dir.file("plainfile"), {1}, false);
  std::string warning;
  const Dataset a = load_idx_mapped(img, lab, 10, dir.file("plainfile/cache"), &warning);
  CHECK_THAT(warning, Contains("f-images.gz") && Contains("not shared") &&
                          Contains("plainfile/cache"));
  CHECK(a.pixels.mapped_file().empty());
  CHECK(Bytes(a.pixels.begin(), a.pixels.end()) == kPixels);
  // A truncated IDX file is the same InputError as without the cache, and leaves no cache file.
  Bytes cut = good_images();
  cut.resize(cut.size() - 5);
  const std::string bad = dir.file("cut-images.gz");
  write_file(bad, cut, true);
  const std::string cache = dir.file("cache2");
  CHECK_THROWS_WITH(load_idx_mapped(bad, lab, 10, cache, &warning),
                    Contains("cut-images.gz") && Contains("truncated"));
  std::size_t files = 0;
  for (const auto& e : fs::directory_iterator(cache))
    files += e.path().extension() == ".lock" ? 0 : 1;
  CHECK(files == 0);
}

TEST_CASE("truncated IDX file names the file and both sizes", "[data]") {
  TempDir dir;
  Bytes cut = good_images();
  cut.resize(cut.size() - 5);
  for (bool gz : {false, true}) {
    SECTION(gz ? "gzip" : "plain") {
      REQUIRE_THROWS_AS(load_pair(dir, "idx_truncated", cut, good_labels(), gz), InputError);
      REQUIRE_THROWS_WITH(load_pair(dir, "idx_truncated", cut, good_labels(), gz),
                          Contains("idx_truncated-images") &&
                              Contains("truncated: header says 3 images of 2x3 (18 bytes)") &&
                              Contains("only 13 bytes follow"));
    }
  }
  SECTION("header cut short") {
    Bytes head = good_images();
    head.resize(9);
    REQUIRE_THROWS_WITH(load_pair(dir, "idx_short_header", head, good_labels()),
                        Contains("idx_short_header-images") && Contains("truncated header"));
  }
}

TEST_CASE("IDX file with the wrong magic is rejected", "[data]") {
  TempDir dir;
  SECTION("labels given as images") {
    REQUIRE_THROWS_AS(load_pair(dir, "idx_magic", good_labels(), good_labels()), InputError);
    REQUIRE_THROWS_WITH(load_pair(dir, "idx_magic", good_labels(), good_labels()),
                        Contains("idx_magic-images") &&
                            Contains("wrong magic 0x00000801, expected 0x00000803"));
  }
  SECTION("not an IDX file at all, gzipped") {
    Bytes text = {'h', 'e', 'l', 'l', 'o', ' ', 'w', 'o', 'r', 'l', 'd', '\n'};
    REQUIRE_THROWS_WITH(load_pair(dir, "idx_text", good_images(), text, true),
                        Contains("idx_text-labels.gz") && Contains("wrong magic"));
  }
}

TEST_CASE("IDX images and labels with different counts are rejected", "[data]") {
  TempDir dir;
  Bytes two_labels = idx_bytes(0x801, {2}, {1, 2});
  REQUIRE_THROWS_AS(load_pair(dir, "idx_count", good_images(), two_labels), InputError);
  REQUIRE_THROWS_WITH(load_pair(dir, "idx_count", good_images(), two_labels),
                      Contains("idx_count-labels") &&
                          Contains("count mismatch: 2 labels but") &&
                          Contains("has 3 images"));
}

TEST_CASE("IDX label not below the class count is rejected", "[data]") {
  TempDir dir;
  Bytes bad = idx_bytes(0x801, {3}, {0, 10, 3});
  REQUIRE_THROWS_AS(load_pair(dir, "idx_label_range", good_images(), bad), InputError);
  REQUIRE_THROWS_WITH(load_pair(dir, "idx_label_range", good_images(), bad),
                      Contains("idx_label_range-labels") &&
                          Contains("label out of range: label 10 at index 1"));
}

TEST_CASE("IDX trailing bytes, zero dims and absurd sizes are rejected", "[data]") {
  TempDir dir;
  SECTION("trailing garbage, plain and gzip") {
    Bytes longer = good_images();
    longer.push_back(7);
    longer.push_back(7);
    for (bool gz : {false, true}) {
      REQUIRE_THROWS_WITH(load_pair(dir, "idx_trailing", longer, good_labels(), gz),
                          Contains("idx_trailing-images") &&
                              Contains("trailing garbage: 2 bytes"));
    }
  }
  SECTION("zero dimension") {
    Bytes zero = idx_bytes(0x803, {3, 0, 3}, kPixels);
    REQUIRE_THROWS_WITH(load_pair(dir, "idx_zero", zero, good_labels()),
                        Contains("idx_zero-images") && Contains("dimension 1 is 0"));
  }
  SECTION("huge header is refused before allocating") {
    Bytes huge = idx_bytes(0x803, {0xffffffffu, 28, 28}, kPixels);
    REQUIRE_THROWS_WITH(load_pair(dir, "idx_huge", huge, good_labels()),
                        Contains("idx_huge-images") && Contains("implausible size"));
    Bytes big = idx_bytes(0x803, {1000000, 28, 28}, kPixels);
    REQUIRE_THROWS_WITH(load_pair(dir, "idx_big", big, good_labels()),
                        Contains("idx_big-images") && Contains("only 18 bytes follow"));
    REQUIRE_THROWS_WITH(load_pair(dir, "idx_big", big, good_labels(), true),
                        Contains("idx_big-images.gz") && Contains("cannot hold that much"));
  }
  SECTION("gzip cut short or corrupted") {
    const std::string path = dir.file("idx_gzcut-images.gz");
    const std::string labels = dir.file("idx_gzcut-labels");
    write_file(path, good_images(), true);
    write_file(labels, good_labels(), false);
    Bytes gz(fs::file_size(path));
    std::ifstream(path, std::ios::binary).read(reinterpret_cast<char*>(gz.data()),
                                               static_cast<std::streamsize>(gz.size()));
    Bytes cut(gz.begin(), gz.end() - 12);  // loses the end of the deflate stream and trailer
    write_file(path, cut, false);
    REQUIRE_THROWS_WITH(load_idx(path, labels),
                        Contains("idx_gzcut-images.gz") && Contains("truncated") &&
                            Contains("gzip stream ends early"));
    Bytes bad_crc = gz;
    bad_crc[bad_crc.size() - 8] ^= 0xff;  // first byte of the CRC32 trailer
    write_file(path, bad_crc, false);
    REQUIRE_THROWS_WITH(load_idx(path, labels),
                        Contains("idx_gzcut-images.gz") && Contains("corrupt gzip data"));
  }
  SECTION("missing file") {
    REQUIRE_THROWS_WITH(load_idx(dir.file("nope-images"), dir.file("nope-labels")),
                        Contains("nope-images") && Contains("cannot open"));
  }
}

TEST_CASE("Fashion-MNIST test set loads with balanced labels", "[data][real]") {
  const std::string root = "/usr/share/datasets/fashion-mnist/";
  const std::string images = root + "t10k-images-idx3-ubyte.gz";
  const std::string labels = root + "t10k-labels-idx1-ubyte.gz";
  if (!fs::exists(images) || !fs::exists(labels)) {
    WARN("no Fashion-MNIST at " << root << ", skipped");
    return;
  }
  Dataset d = load_idx(images, labels);
  REQUIRE(d.n == 10000);
  REQUIRE(d.dim == 784);
  REQUIRE(d.pixels.size() == 10000u * 784u);
  std::vector<int> per_class(10, 0);
  for (auto y : d.y) {
    REQUIRE((y >= 0 && y < 10));
    ++per_class[y];
  }
  for (int c : per_class) REQUIRE((c >= 900 && c <= 1100));
  auto [lo, hi] = std::minmax_element(d.pixels.begin(), d.pixels.end());
  REQUIRE(*lo == 0);
  REQUIRE(*hi == 255);
  // Mapped through a cache, the same bytes.
  TempDir dir;
  std::string warning;
  const Dataset m = load_idx_mapped(images, labels, 10, dir.file("cache"), &warning);
  CHECK(warning.empty());
  CHECK_FALSE(m.pixels.mapped_file().empty());
  CHECK(m.y == d.y);
  CHECK(std::equal(m.pixels.begin(), m.pixels.end(), d.pixels.begin(), d.pixels.end()));
}

// ---- synthetic --------------------------------------------------------------------------------

TEST_CASE("synthetic blobs are deterministic and nearly separable by nearest mean", "[data]") {
  const int dim = 20, classes = 10;
  Dataset a = make_synthetic(2000, dim, classes, 7);
  Dataset b = make_synthetic(2000, dim, classes, 7);
  Dataset c = make_synthetic(2000, dim, classes, 8);
  REQUIRE(a.x == b.x);
  REQUIRE(a.y == b.y);
  REQUIRE(a.x != c.x);
  // Estimate class means from the data, classify by the nearest one.
  std::vector<double> mean(classes * dim, 0.0);
  std::vector<int> count(classes, 0);
  for (std::int64_t i = 0; i < a.n; ++i) {
    ++count[a.y[i]];
    for (int j = 0; j < dim; ++j) mean[a.y[i] * dim + j] += a.x[i * dim + j];
  }
  for (int k = 0; k < classes; ++k) {
    REQUIRE(count[k] == 200);
    for (int j = 0; j < dim; ++j) mean[k * dim + j] /= count[k];
  }
  int correct = 0;
  for (std::int64_t i = 0; i < a.n; ++i) {
    int best = 0;
    double best_d = 1e300;
    for (int k = 0; k < classes; ++k) {
      double dist = 0.0;
      for (int j = 0; j < dim; ++j) dist += std::pow(a.x[i * dim + j] - mean[k * dim + j], 2);
      if (dist < best_d) best_d = dist, best = k;
    }
    correct += best == a.y[i];
  }
  REQUIRE(correct / double(a.n) > 0.97);  // pairwise error Phi(-4/sqrt 2) = 0.2%
}

// ---- sharding ---------------------------------------------------------------------------------

TEST_CASE("every shard kind is disjoint, covering, sorted and non-empty", "[data]") {
  const auto labels = balanced_labels(997, 10);
  const std::vector<std::pair<const char*, ShardSpec>> specs = {
      {"iid", {ShardKind::kIid, 0.5, 2}},
      {"dirichlet 0.5", {ShardKind::kDirichlet, 0.5, 2}},
      {"dirichlet 0.01", {ShardKind::kDirichlet, 0.01, 2}},
      {"shards", {ShardKind::kShards, 0.5, 3}}};
  for (const auto& [name, spec] : specs) {
    for (int n_peers : {1, 2, 7, 16, 64}) {
      DYNAMIC_SECTION(name << ", " << n_peers << " peers") {
        auto shards = make_shards(labels, 10, n_peers, spec, 42);
        REQUIRE(shards.size() == static_cast<std::size_t>(n_peers));
        std::vector<int> seen(labels.size(), 0);
        for (const auto& s : shards) {
          REQUIRE(!s.empty());
          REQUIRE(std::is_sorted(s.begin(), s.end()));
          for (auto i : s) ++seen[i];
        }
        REQUIRE(std::all_of(seen.begin(), seen.end(), [](int k) { return k == 1; }));
        REQUIRE(total_size(shards) == static_cast<std::int64_t>(labels.size()));
      }
    }
  }
}

TEST_CASE("iid shards differ in size by at most one", "[data]") {
  auto shards = make_shards(balanced_labels(100, 10), 10, 7, {}, 1);
  for (const auto& s : shards) REQUIRE((s.size() == 14 || s.size() == 15));
}

TEST_CASE("dirichlet with tiny alpha still gives every peer a sample", "[data]") {
  const auto labels = balanced_labels(60, 10);
  auto shards = make_shards(labels, 10, 50, {ShardKind::kDirichlet, 0.001, 2}, 3);
  for (const auto& s : shards) REQUIRE(!s.empty());
  REQUIRE(total_size(shards) == 60);
}

TEST_CASE("shards are a function of the seed", "[data]") {
  const auto labels = balanced_labels(500, 10);
  for (auto kind : {ShardKind::kIid, ShardKind::kDirichlet, ShardKind::kShards}) {
    const ShardSpec spec{kind, 0.3, 2};
    REQUIRE(make_shards(labels, 10, 5, spec, 11) == make_shards(labels, 10, 5, spec, 11));
    REQUIRE(make_shards(labels, 10, 5, spec, 11) != make_shards(labels, 10, 5, spec, 12));
  }
}

TEST_CASE("small dirichlet alpha skews labels, iid does not", "[data]") {
  const auto labels = balanced_labels(10000, 10);
  const double iid = mean_label_skew(make_shards(labels, 10, 10, {ShardKind::kIid}, 5), labels, 10);
  const double mild =
      mean_label_skew(make_shards(labels, 10, 10, {ShardKind::kDirichlet, 100.0}, 5), labels, 10);
  const double skewed =
      mean_label_skew(make_shards(labels, 10, 10, {ShardKind::kDirichlet, 0.1}, 5), labels, 10);
  CAPTURE(iid, mild, skewed);
  REQUIRE(iid < 0.06);
  REQUIRE(mild < 0.1);
  REQUIRE(skewed > 0.5);
}

TEST_CASE("label shards give each peer at most shards_per_peer classes", "[data]") {
  // 1000 samples, 100 per class, 20 shards of 50: every shard holds one class.
  std::vector<std::int32_t> labels(1000);
  for (int i = 0; i < 1000; ++i) labels[i] = i % 10;
  auto shards = make_shards(labels, 10, 10, {ShardKind::kShards, 0.5, 2}, 9);
  for (const auto& s : shards) {
    REQUIRE(s.size() == 100);
    std::set<int> classes;
    for (auto i : s) classes.insert(labels[i]);
    REQUIRE(classes.size() <= 2);
  }
}

TEST_CASE("sharding rejects bad requests with InputError", "[data]") {
  const auto labels = balanced_labels(10, 10);
  REQUIRE_THROWS_WITH(make_shards(labels, 10, 11, {}, 1), Contains("only 10 samples"));
  REQUIRE_THROWS_AS(make_shards(labels, 10, 0, {}, 1), InputError);
  REQUIRE_THROWS_AS(make_shards(labels, 10, 2, {ShardKind::kDirichlet, 0.0}, 1), InputError);
  REQUIRE_THROWS_AS(make_shards(labels, 10, 6, {ShardKind::kShards, 0.5, 2}, 1), InputError);
  REQUIRE_THROWS_AS(make_shards(labels, 5, 2, {}, 1), InputError);  // label 9 >= 5 classes
  REQUIRE(parse_shard_kind("dirichlet") == ShardKind::kDirichlet);
  REQUIRE_THROWS_WITH(parse_shard_kind("random"), Contains("unknown shard kind 'random'"));
}

// ---- batches ----------------------------------------------------------------------------------

TEST_CASE("batch sampler covers its shard exactly once per epoch", "[data]") {
  std::vector<std::int64_t> shard;
  for (int i = 0; i < 40; ++i) shard.push_back(100 + 3 * i);
  BatchSampler s(shard, 8, 21, 2);
  REQUIRE(s.batches_per_epoch() == 5);
  std::vector<std::vector<std::int64_t>> epochs;
  for (int e = 0; e < 3; ++e) {
    std::vector<std::int64_t> seen;
    for (int b = 0; b < 5; ++b) {
      const auto& batch = s.next();
      REQUIRE(batch.size() == 8);
      seen.insert(seen.end(), batch.begin(), batch.end());
    }
    REQUIRE(s.epoch() == Approx(e + 1));
    epochs.push_back(seen);
    std::sort(seen.begin(), seen.end());
    REQUIRE(seen == shard);
  }
  REQUIRE(epochs[0] != epochs[1]);  // a new permutation each epoch
}

TEST_CASE("batch sampler drops the short remainder and handles tiny shards", "[data]") {
  SECTION("10 samples, batch 4: two distinct batches per epoch") {
    BatchSampler s({0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, 4, 1, 0);
    REQUIRE(s.batches_per_epoch() == 2);
    std::set<std::int64_t> seen;
    for (int b = 0; b < 2; ++b) {
      for (auto i : s.next()) seen.insert(i);
    }
    REQUIRE(seen.size() == 8);
  }
  SECTION("3 samples, batch 8: the whole shard each time") {
    BatchSampler s({5, 6, 7}, 8, 1, 0);
    REQUIRE(s.batches_per_epoch() == 1);
    for (int b = 0; b < 3; ++b) {
      auto batch = s.next();
      std::sort(batch.begin(), batch.end());
      REQUIRE(batch == std::vector<std::int64_t>{5, 6, 7});
    }
    REQUIRE(s.epoch() == Approx(3.0));
  }
}

TEST_CASE("batch order is a function of seed and peer", "[data]") {
  std::vector<std::int64_t> shard(64);
  for (int i = 0; i < 64; ++i) shard[i] = i;
  BatchSampler a(shard, 16, 3, 1), b(shard, 16, 3, 1), c(shard, 16, 3, 2);
  bool differs = false;
  for (int k = 0; k < 8; ++k) {
    const auto ba = a.next();
    REQUIRE(ba == b.next());
    differs = differs || ba != c.next();
  }
  REQUIRE(differs);
}

TEST_CASE("gather_batch copies the chosen rows and labels", "[data]") {
  Dataset d = make_synthetic(10, 3, 2, 1);
  std::vector<float> x(2 * 3);
  std::vector<std::int32_t> y(2);
  gather_batch(d, {7, 2}, x.data(), y.data());
  REQUIRE(std::equal(x.begin(), x.begin() + 3, d.x.begin() + 21));
  REQUIRE(std::equal(x.begin() + 3, x.end(), d.x.begin() + 6));
  REQUIRE(y == std::vector<std::int32_t>{d.y[7], d.y[2]});
}

TEST_CASE("image bytes become features per batch, and a peer's rows select the same ones",
          "[data]") {
  Dataset d;
  d.n = 3;
  d.dim = 2;
  d.classes = 2;
  d.pixels = {0, 255, 51, 102, 204, 10};
  d.y = {1, 0, 1};
  d.pixel_scale = 0.5f;
  d.pixel_offset = -1.0f;
  std::vector<float> x(4);
  std::vector<std::int32_t> y(2);
  gather_batch(d, {2, 0}, x.data(), y.data());
  CHECK(x == std::vector<float>{204 * 0.5f - 1.0f, 10 * 0.5f - 1.0f, -1.0f, 255 * 0.5f - 1.0f});
  CHECK(y == std::vector<std::int32_t>{1, 1});
  // A peer's own rows, renumbered from 0, give the same batch bit for bit.
  const Dataset own = select_rows(d, {0, 2});
  CHECK(own.n == 2);
  CHECK(own.pixels.size() == 4);
  std::vector<float> again(4);
  gather_batch(own, {1, 0}, again.data(), y.data());
  CHECK(again == x);
  const Dataset synthetic = make_synthetic(10, 3, 2, 1);
  const Dataset part = select_rows(synthetic, {7, 2});
  gather_batch(part, {0, 1}, again.data(), y.data());
  std::vector<float> direct(6);
  gather_batch(synthetic, {7, 2}, direct.data(), y.data());
  CHECK(std::equal(again.begin(), again.begin() + 4, direct.begin()));
}
