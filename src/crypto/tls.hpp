#pragma once
// TLS 1.3 contexts that authenticate peers by key pinning (docs/ARCHITECTURE.md
// section 3). Raw OpenSSL, no Asio: the net layer hands the SSL_CTX to
// asio::ssl::context's native-handle constructor, which takes ownership.
//
// Both sides present their self-signed identity certificate and require the
// peer's. There is no CA: a peer is accepted when its certificate key is
// Ed25519 and, where a PeerId was pinned on that SSL with expect_peer(),
// when the key's PeerId equals it. A consumer pins the link's provider, so a
// wrong provider (a rendezvous or relay in the middle) fails the handshake
// before the consumer sends anything secret. A provider pins nobody: it learns
// the consumer's PeerId with peer_of() and authorizes it by grant.
//
// TLS 1.3 only; AES-128-GCM, then ChaCha20-Poly1305, then AES-256-GCM;
// Ed25519 signatures; no session tickets or resumption (every connection
// does the full handshake, hence the pin check); no compression.

#include "core/error.hpp"
#include "crypto/identity.hpp"
#include "crypto/peer_id.hpp"

#include <openssl/ssl.h>

#include <array>
#include <cstdint>
#include <optional>

namespace runsnack {

enum class TlsRole { client, server };

// A new context presenting `identity`. The caller owns the returned SSL_CTX
// (SSL_CTX_free, or move it into asio::ssl::context). It holds its own
// references to the key and certificate, so `identity` may die first.
Result<SSL_CTX*> make_tls_context(const Identity& identity, TlsRole role);

// Pins the peer of `ssl`: the handshake fails unless the peer's key has this
// PeerId. Call before the handshake. The PeerId is copied into `ssl` and
// freed with it.
void expect_peer(SSL* ssl, const PeerId& expected);

// After a handshake that failed on the pin: the PeerId the peer presented
// instead (for the error message "provider is X, link says Y").
std::optional<PeerId> rejected_peer(const SSL* ssl);

// After the handshake: the peer's PeerId, from its certificate key.
Result<PeerId> peer_of(const SSL* ssl);

// After the handshake: 32 bytes both ends compute alike and no other
// connection shares (RFC 8446 exporter, label "EXPORTER-runsnack-auth", no
// context). The auth proof (crypto/secret.hpp) is bound to it.
Result<std::array<std::uint8_t, 32>> channel_binding(SSL* ssl);

}  // namespace runsnack
