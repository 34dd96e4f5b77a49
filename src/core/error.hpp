#pragma once
// The project's one error convention (docs/ARCHITECTURE.md section 13, rule 5): an `errc` enum in its
// own boost::system category, carried with a one-line human message in
// `Error`, returned as `Result<T>` for expected failures. Exceptions are kept
// for broken invariants and are caught where a coroutine is spawned.

#include <boost/system/error_code.hpp>
#include <boost/system/result.hpp>

#include <string>
#include <utility>

namespace runsnack {

enum class errc {
  ok = 0,
  invalid_argument = 1,  // a caller or user passed something unusable
  malformed = 2,         // bytes from a peer, a link or a file do not parse
  too_large = 3,         // a length or count over its limit
  not_found = 4,
  expired = 5,
  revoked = 6,
  exhausted = 7,         // uses or sessions used up
  refused = 8,           // policy said no (bound to another consumer, service not allowed)
  auth_failed = 9,       // wrong secret or proof
  peer_mismatch = 10,    // provider key does not match the link's PeerId
  io_error = 11,
  timeout = 12,
  closed = 13,           // the peer or stream went away
  unsupported = 14,
  internal = 15,
};

}  // namespace runsnack

namespace boost::system {
template <>
struct is_error_code_enum<runsnack::errc> : std::true_type {};
}  // namespace boost::system

namespace runsnack {

const boost::system::error_category& runsnack_category() noexcept;
boost::system::error_code make_error_code(errc e) noexcept;

// An error for a person to read: `code` for programs, `message` one line,
// saying what is wrong and, where we know, what to do next.
struct Error {
  boost::system::error_code code;
  std::string message;

  Error() = default;
  Error(errc e, std::string msg) : code(make_error_code(e)), message(std::move(msg)) {}
  Error(boost::system::error_code ec, std::string msg) : code(ec), message(std::move(msg)) {}

  bool is(errc e) const noexcept { return code == make_error_code(e); }
  // "message" or, when there is none, the category's text for the code.
  std::string what() const;
};

// Thrown only by Result<T>::value() on an error (a caller that did not check).
[[noreturn]] void throw_exception_from_error(const Error& e, const boost::source_location& loc);

template <class T>
using Result = boost::system::result<T, Error>;

// Shorthand for `return fail(errc::malformed, "...")` in functions returning Result<T>.
inline Error fail(errc e, std::string message) { return Error(e, std::move(message)); }

}  // namespace runsnack
