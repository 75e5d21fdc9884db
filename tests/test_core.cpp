// Tests for core: check macros carry file:line and both values; SHA-256 vectors; rng derivation;
// the half-width conversions of gossip.wire, exact values and the CPU loops against them.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <regex>
#include <limits>
#include <string>
#include <vector>

#include "gossip/core.hpp"
#include "gossip/half.hpp"
#include "gossip/hash.hpp"
#include "gossip/json.hpp"
#include "gossip/rng.hpp"

using namespace gossip;

TEST_CASE("check failures name the file, line and both values", "[core]") {
  int a = 3, b = 4;
  try {
    GOSSIP_CHECK_EQ(a, b);
    FAIL("GOSSIP_CHECK_EQ did not throw");
  } catch (const RuntimeError& e) {
    const std::string what = e.what();
    CHECK_THAT(what, Catch::Contains("test_core.cpp:"));
    CHECK_THAT(what, Catch::Contains("a == b"));
    CHECK_THAT(what, Catch::Contains("(3 vs 4)"));
  }
  CHECK_NOTHROW([&] { GOSSIP_CHECK_LT(a, b); }());
}

TEST_CASE("sha256 matches the FIPS 180-4 test vectors", "[core]") {
  CHECK(sha256_hex("", 0) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(sha256_hex("abc", 3) ==
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  const std::string two_blocks = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  CHECK(sha256_hex(two_blocks.data(), two_blocks.size()) ==
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  const std::string million(1000000, 'a');
  CHECK(sha256_hex(million.data(), million.size()) ==
        "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST_CASE("random streams depend on seed, peer and purpose only", "[core]") {
  auto a = make_rng(7, 3, Stream::kInit);
  auto b = make_rng(7, 3, Stream::kInit);
  CHECK(a() == b());
  CHECK(derive_seed(7, 3, Stream::kInit) != derive_seed(7, 4, Stream::kInit));
  CHECK(derive_seed(7, 3, Stream::kInit) != derive_seed(7, 3, Stream::kBatch));
  CHECK(derive_seed(7, 3, Stream::kInit) != derive_seed(8, 3, Stream::kInit));
  // normal01 has mean ~0 and variance ~1.
  auto g = make_rng(1, 0, Stream::kSynthetic);
  double sum = 0, sq = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    double x = normal01(g);
    sum += x;
    sq += x * x;
  }
  CHECK(std::abs(sum / n) < 0.01);
  CHECK(std::abs(sq / n - 1.0) < 0.02);
}

TEST_CASE("json strings escape quotes, backslashes and control characters", "[core][json]") {
  CHECK(json_string("plain") == "\"plain\"");
  CHECK(json_string("a\"b\\c") == "\"a\\\"b\\\\c\"");
  CHECK(json_string("line\nnext\tcol") == "\"line\\nnext\\tcol\"");
  CHECK(json_string(std::string("\x01", 1)) == "\"\\u0001\"");
  CHECK(json_string("") == "\"\"");
}

TEST_CASE("json numbers have one format and NaN or infinity is null", "[core][json]") {
  CHECK(json_number(0.0) == "0");
  CHECK(json_number(2.0) == "2");
  CHECK(json_number(0.9921875) == "0.9921875");
  CHECK(json_number(1.0 / 3.0) == "0.3333333333");  // %.10g
  CHECK(json_number(7.5872e-05) == "7.5872e-05");
  CHECK(json_number(std::nan("")) == "null");
  CHECK(json_number(std::numeric_limits<double>::infinity()) == "null");
  CHECK(json_number(-std::numeric_limits<double>::infinity()) == "null");
  CHECK(json_integer(std::uint64_t{18446744073709551615u}) == "18446744073709551615");
  CHECK(json_integer(-3) == "-3");
}

TEST_CASE("json objects and arrays keep the order fields are added in", "[core][json]") {
  JsonObject o;
  o.add("b", 1).add("a", "x").add("ok", true).add("nan", std::nan(""))
      .add("list", JsonArray::of(std::vector<int>{1, 2})).add("inner", JsonObject().add("k", 0.5));
  CHECK(o.str() ==
        "{\"b\": 1, \"a\": \"x\", \"ok\": true, \"nan\": null, \"list\": [1, 2], "
        "\"inner\": {\"k\": 0.5}}");
  CHECK(JsonObject().add("a", 1).add("b", false).pretty() == "{\n  \"a\": 1,\n  \"b\": false\n}");
  CHECK(JsonObject().pretty() == "{}");
  CHECK(JsonArray().str() == "[]");
  CHECK(JsonArray::of(std::vector<std::string>{"p", "q"}).str() == "[\"p\", \"q\"]");
}

TEST_CASE("log timestamps are ISO-8601 UTC with milliseconds, and now", "[core]") {
  const std::string before = gossip::utc_timestamp();
  const std::string stamp = gossip::utc_timestamp();
  INFO(stamp);
  REQUIRE(stamp.size() == 24);
  CHECK(std::regex_match(stamp, std::regex(R"(20\d\d-[01]\d-[0-3]\dT[0-2]\d:[0-5]\d:[0-6]\d\.\d{3}Z)")));
  // The same instant as the C library's clock, within a second or two.
  std::tm utc{};
  REQUIRE(std::sscanf(stamp.c_str(), "%d-%d-%dT%d:%d:%d", &utc.tm_year, &utc.tm_mon,
                      &utc.tm_mday, &utc.tm_hour, &utc.tm_min, &utc.tm_sec) == 6);
  utc.tm_year -= 1900;
  utc.tm_mon -= 1;
  CHECK(std::abs(static_cast<double>(std::time(nullptr) - timegm(&utc))) <= 2.0);
  CHECK(before <= stamp);  // the text sorts in time order
}

// ---- parameters at half width (gossip/half.hpp) ---------------------------------------------

TEST_CASE("bfloat16 rounds to nearest even, keeps NaN, and widens exactly", "[core][wire]") {
  using namespace gossip::math;
  CHECK(float_to_bf16(1.0f) == 0x3f80);
  CHECK(float_to_bf16(0.5f) == 0x3f00);
  CHECK(float_to_bf16(-2.0f) == 0xc000);
  CHECK(bf16_to_float(0x3f80) == 1.0f);
  CHECK(bf16_to_float(0x3f00) == 0.5f);
  // bfloat16 has 7 mantissa bits: a step of 2^-7 at 1. 1 + 2^-8 is halfway between 1 and
  // 1 + 2^-7 and goes to the even one, 1; 1 + 3 * 2^-8 halfway up to the even 1 + 2^-6.
  CHECK(round_to_wire(1.0f + 0x1p-8f, WireFormat::kBf16) == 1.0f);
  CHECK(round_to_wire(1.0f + 3 * 0x1p-8f, WireFormat::kBf16) == 1.0f + 0x1p-6f);
  CHECK(round_to_wire(1.0f + 0x1p-8f + 0x1p-20f, WireFormat::kBf16) == 1.0f + 0x1p-7f);
  CHECK(round_to_wire(-(1.0f + 0x1p-8f + 0x1p-20f), WireFormat::kBf16) == -(1.0f + 0x1p-7f));
  CHECK(round_to_wire(65504.0f, WireFormat::kBf16) == 65536.0f);  // float32's range
  const float nan = std::numeric_limits<float>::quiet_NaN();
  CHECK(std::isnan(bf16_to_float(float_to_bf16(nan))));
  CHECK(std::isnan(bf16_to_float(float_to_bf16(-nan))));
  CHECK(std::signbit(bf16_to_float(float_to_bf16(-nan))));
  // A signalling NaN whose payload is only in the low 16 bits stays a NaN, not infinity.
  CHECK(std::isnan(bf16_to_float(float_to_bf16(std::numeric_limits<float>::signaling_NaN()))));
  CHECK(std::isinf(round_to_wire(std::numeric_limits<float>::infinity(), WireFormat::kBf16)));
  // Only the last half step below FLT_MAX rounds past bfloat16's largest value.
  CHECK(std::isinf(round_to_wire(std::numeric_limits<float>::max(), WireFormat::kBf16)));
  CHECK(round_to_wire(0.0f, WireFormat::kBf16) == 0.0f);
  CHECK(std::signbit(round_to_wire(-0.0f, WireFormat::kBf16)));
  CHECK(round_to_wire(1.25f, WireFormat::kFp32) == 1.25f);
}

TEST_CASE("IEEE half rounds to nearest even, overflows to inf past 65504, and widens exactly",
          "[core][wire]") {
  using namespace gossip::math;
  CHECK(float_to_fp16(1.0f) == 0x3c00);
  CHECK(float_to_fp16(0.5f) == 0x3800);
  CHECK(float_to_fp16(-2.0f) == 0xc000);
  CHECK(fp16_to_float(0x3c00) == 1.0f);
  // 10 mantissa bits: 1 + 2^-11 is halfway and goes down to 1, 1 + 3 * 2^-11 up to 1 + 2^-9.
  CHECK(round_to_wire(1.0f + 0x1p-11f, WireFormat::kFp16) == 1.0f);
  CHECK(round_to_wire(1.0f + 3 * 0x1p-11f, WireFormat::kFp16) == 1.0f + 0x1p-9f);
  // The largest finite half, 65504, is exact; 65519 rounds to it; 65520, halfway to 65536,
  // goes to the even neighbour, which is infinity; so does anything larger.
  CHECK(float_to_fp16(65504.0f) == 0x7bff);
  CHECK(round_to_wire(65519.0f, WireFormat::kFp16) == 65504.0f);
  CHECK(float_to_fp16(65520.0f) == 0x7c00);
  CHECK(float_to_fp16(-1.0e6f) == 0xfc00);
  CHECK(float_to_fp16(std::numeric_limits<float>::max()) == 0x7c00);
  // Subnormals: steps of 2^-24 below 2^-14; 2^-25 is halfway to 0 and goes to 0 (even), just
  // above it up to 2^-24.
  CHECK(float_to_fp16(0x1p-14f) == 0x0400);
  CHECK(float_to_fp16(0x1p-24f) == 0x0001);
  CHECK(fp16_to_float(0x0001) == 0x1p-24f);
  CHECK(fp16_to_float(0x03ff) == 1023 * 0x1p-24f);
  CHECK(float_to_fp16(0x1p-25f) == 0x0000);
  CHECK(float_to_fp16(0x1p-25f + 0x1p-40f) == 0x0001);
  CHECK(float_to_fp16(3 * 0x1p-25f) == 0x0002);  // 1.5 steps: halfway, up to the even 2
  CHECK(float_to_fp16(-0.0f) == 0x8000);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  CHECK(std::isnan(fp16_to_float(float_to_fp16(nan))));
  CHECK(std::isnan(fp16_to_float(float_to_fp16(std::numeric_limits<float>::signaling_NaN()))));
  CHECK(std::isinf(fp16_to_float(0x7c00)));
}

TEST_CASE("the span loops give the scalar conversions' bits and report fp16 overflow",
          "[core][wire]") {
  auto rng = make_rng(7, 0, Stream::kSim);
  std::vector<float> x(10007);
  for (auto& v : x) v = static_cast<float>(normal01(rng) * 100.0);
  x[5] = 0x1p-20f;  // an fp16 subnormal
  x[6] = -0.0f;
  for (const WireFormat w : {WireFormat::kBf16, WireFormat::kFp16}) {
    INFO(wire_format_name(w));
    std::vector<std::uint16_t> h(x.size());
    REQUIRE(narrow_to_wire(x, w, h));
    std::vector<float> back(x.size()), rounded = x;
    REQUIRE(widen_from_wire(h, w, back));
    REQUIRE(round_to_wire(std::span<float>(rounded), w));
    std::vector<float> copied(x.size(), 7.0f);  // copy and round in one pass
    REQUIRE(round_to_wire(std::span<const float>(x), w, std::span<float>(copied)));
    REQUIRE(std::memcmp(copied.data(), rounded.data(), x.size() * 4) == 0);
    // Half a step, relative: 2^-8 with bfloat16's 8 significant bits, 2^-11 with half's 11.
    const double bound = w == WireFormat::kBf16 ? 0x1p-8 : 0x1p-11;
    std::size_t changed = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
      REQUIRE(h[i] == math::narrow(x[i], w));
      REQUIRE(back[i] == math::widen(h[i], w));
      REQUIRE(std::memcmp(&rounded[i], &back[i], 4) == 0);
      if (std::fabs(x[i]) >= 0x1p-14)
        REQUIRE(std::fabs(back[i] - x[i]) <= bound * std::fabs(x[i]));
      changed += back[i] != x[i];
    }
    CHECK(changed > x.size() / 2);  // the rounding did round
    CHECK(first_overflow(x, w) == x.size());
  }
  // 7e4 is beyond binary16's range (it would travel as inf), well inside bfloat16's.
  x[1234] = 7.0e4f;
  std::vector<std::uint16_t> h(x.size());
  CHECK_FALSE(narrow_to_wire(x, WireFormat::kFp16, h));
  CHECK(h[1234] == 0x7c00);
  CHECK(first_overflow(x, WireFormat::kFp16) == 1234);
  CHECK(narrow_to_wire(x, WireFormat::kBf16, h));
  CHECK(first_overflow(x, WireFormat::kBf16) == x.size());
  std::vector<float> out(x.size());
  CHECK_FALSE(round_to_wire(std::span<const float>(x), WireFormat::kFp16, std::span<float>(out)));
  CHECK(std::isinf(out[1234]));
  CHECK(round_to_wire(std::span<const float>(x), WireFormat::kFp32, std::span<float>(out)));
  CHECK(out == x);  // fp32: a copy
  // An inf or NaN given is passed on as such, not reported as an overflow; the widening loop
  // reports it as not finite (what a receiver refuses).
  x[1234] = std::numeric_limits<float>::infinity();
  x[99] = std::numeric_limits<float>::quiet_NaN();
  CHECK(narrow_to_wire(x, WireFormat::kFp16, h));
  std::vector<float> back(x.size());
  CHECK_FALSE(widen_from_wire(h, WireFormat::kFp16, back));
  CHECK(std::isnan(back[99]));
  CHECK(std::isinf(back[1234]));
}
