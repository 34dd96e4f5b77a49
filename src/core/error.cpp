#include "core/error.hpp"

#include <cstdlib>
#include <stdexcept>

namespace runsnack {
namespace {

class Category final : public boost::system::error_category {
 public:
  const char* name() const noexcept override { return "runsnack"; }
  std::string message(int ev) const override {
    switch (static_cast<errc>(ev)) {
      case errc::ok: return "ok";
      case errc::invalid_argument: return "invalid argument";
      case errc::malformed: return "malformed input";
      case errc::too_large: return "too large";
      case errc::not_found: return "not found";
      case errc::expired: return "expired";
      case errc::revoked: return "revoked";
      case errc::exhausted: return "exhausted";
      case errc::refused: return "refused";
      case errc::auth_failed: return "authentication failed";
      case errc::peer_mismatch: return "peer identity mismatch";
      case errc::io_error: return "i/o error";
      case errc::timeout: return "timed out";
      case errc::closed: return "closed";
      case errc::unsupported: return "unsupported";
      case errc::internal: return "internal error";
    }
    return "unknown error";
  }
};

}  // namespace

const boost::system::error_category& runsnack_category() noexcept {
  static const Category category;
  return category;
}

boost::system::error_code make_error_code(errc e) noexcept {
  return {static_cast<int>(e), runsnack_category()};
}

std::string Error::what() const { return message.empty() ? code.message() : message; }

void throw_exception_from_error(const Error& e, const boost::source_location&) {
#if defined(__cpp_exceptions)
  throw std::runtime_error(e.what());
#else  // the WebAssembly kernels (src/pool/wasm/) are built without exceptions
  (void)e;
  std::abort();
#endif
}

}  // namespace runsnack
