/// core: errors with file:line and both values, check macros, exit codes, timestamped log lines.
/// Depends on nothing of ours. Every other module throws these; only main() maps them to exits.
#pragma once
#if !defined(GOSSIP_ROOM_CORE)
#error "gossip/core.hpp belongs to room core, which this room does not use (see the room table in meson.build)"
#endif

#include <chrono>
#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>

namespace gossip {

/// Exit codes shared by every subcommand (documented in `gossip --help`).
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;       // runtime failure (a peer died, I/O error, ...)
inline constexpr int kExitBadInput = 2;      // malformed config, topology, data file, arguments
inline constexpr int kExitDisconnected = 3;  // valid topology whose graph is not connected

/// Bad input from the user: a file, a field, an argument. Maps to exit code 2.
class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A broken internal invariant or a failed operation. Maps to exit code 1.
class RuntimeError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// `seconds` (a config's *_s value) as whole milliseconds, truncated: the one place a number of
/// seconds becomes a duration.
inline std::chrono::milliseconds seconds_to_ms(double seconds) {
  return std::chrono::milliseconds(static_cast<std::int64_t>(seconds * 1000.0));
}

namespace detail {
[[noreturn]] void throw_check(const char* file, int line, const std::string& what);

template <typename A, typename B>
[[noreturn]] void throw_check_op(const char* file, int line, const char* expr, const A& a,
                                 const B& b) {
  std::ostringstream os;
  os << "check failed: " << expr << " (" << a << " vs " << b << ")";
  throw_check(file, line, os.str());
}
}  // namespace detail

/// Formats a message from stream-able parts: gossip::cat("n=", n, " too small").
template <typename... Parts>
std::string cat(const Parts&... parts) {
  std::ostringstream os;
  (os << ... << parts);
  return os.str();
}

/// The current time in UTC, ISO-8601 with milliseconds: "2025-01-31T12:00:00.123Z".
std::string utc_timestamp();

/// Writes "<utc_timestamp()> <line>" and a newline to stderr in one call, so lines written by
/// several threads stay whole. A peer's log lines all go through here.
void log_line(const std::string& line);

}  // namespace gossip

#define GOSSIP_CHECK(cond)                                                  \
  do {                                                                      \
    if (!(cond)) ::gossip::detail::throw_check(__FILE__, __LINE__,          \
                                               "check failed: " #cond);     \
  } while (0)

#define GOSSIP_CHECK_MSG(cond, ...)                                         \
  do {                                                                      \
    if (!(cond)) ::gossip::detail::throw_check(__FILE__, __LINE__,          \
                                               ::gossip::cat(__VA_ARGS__)); \
  } while (0)

#define GOSSIP_CHECK_OP_(a, b, op)                                                 \
  do {                                                                             \
    const auto& ga_ = (a);                                                         \
    const auto& gb_ = (b);                                                         \
    if (!(ga_ op gb_))                                                             \
      ::gossip::detail::throw_check_op(__FILE__, __LINE__, #a " " #op " " #b, ga_, gb_); \
  } while (0)

#define GOSSIP_CHECK_EQ(a, b) GOSSIP_CHECK_OP_(a, b, ==)
#define GOSSIP_CHECK_NE(a, b) GOSSIP_CHECK_OP_(a, b, !=)
#define GOSSIP_CHECK_LT(a, b) GOSSIP_CHECK_OP_(a, b, <)
#define GOSSIP_CHECK_LE(a, b) GOSSIP_CHECK_OP_(a, b, <=)
#define GOSSIP_CHECK_GT(a, b) GOSSIP_CHECK_OP_(a, b, >)
#define GOSSIP_CHECK_GE(a, b) GOSSIP_CHECK_OP_(a, b, >=)
