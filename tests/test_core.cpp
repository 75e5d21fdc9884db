// Tests for core: check macros carry file:line and both values; SHA-256 vectors; rng derivation.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <ctime>
#include <regex>
#include <limits>
#include <string>
#include <vector>

#include "gossip/core.hpp"
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
