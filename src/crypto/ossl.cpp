#include "crypto/ossl.hpp"

#include <openssl/err.h>

namespace runsnack::ossl {

std::string error_text(const std::string& what) {
  unsigned long code = ERR_get_error();
  std::string out = what;
  if (code != 0) {
    char buf[256];
    ERR_error_string_n(code, buf, sizeof buf);
    out += ": ";
    out += buf;
  }
  ERR_clear_error();
  return out;
}

}  // namespace runsnack::ossl
