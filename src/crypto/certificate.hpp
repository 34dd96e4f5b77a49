#pragma once
// The self-signed X.509 certificate each side presents in TLS. It only
// carries the identity key: peers trust the key by its PeerId (pinning), not
// by any issuer, so subject, validity and serial exist because X.509 needs
// them. Made in memory at load, never written to disk.

#include "core/error.hpp"
#include "crypto/ossl.hpp"
#include "crypto/peer_id.hpp"

namespace runsnack {

// Subject and issuer CN = `id`, serial 128 random bits, valid from one day
// ago (clock skew) for 100 years, signed by `key` (Ed25519).
Result<ossl::X509Ptr> make_self_signed_certificate(EVP_PKEY* key, const PeerId& id);

}  // namespace runsnack
